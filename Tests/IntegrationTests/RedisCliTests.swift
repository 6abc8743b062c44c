import CachedTestSupport
import Foundation
import Testing

/// redis-cli run the way scripts run it: arguments on the command line or commands on stdin, output to a pipe.
/// When stdout is not a terminal, redis-cli prints replies raw (nil as an empty line, integers as digits);
/// `--no-raw` forces the annotated form an interactive user sees (`(nil)`, `(integer) 1`, `1) "a"`).
@Suite("redis-cli")
struct RedisCliTests {
    @Test("SET prints OK and GET prints the value", arguments: [ServerProcess.Kind.redis, .cached])
    func setAndGet(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }

        let set = try server.redisCli("set", "greeting", "hello world")
        #expect(set.status == 0, "\(set.summary)")
        #expect(set.standardOutput == "OK\n", "\(set.summary)")

        let get = try server.redisCli("get", "greeting")
        #expect(get.standardOutput == "hello world\n", "\(get.summary)")
    }

    @Test("GET of a missing key prints an empty line, or (nil) with --no-raw", arguments: [ServerProcess.Kind.redis, .cached])
    func getMissing(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }

        #expect(try server.redisCli("get", "missing").standardOutput == "\n")
        #expect(try server.redisCli("--raw", "get", "missing").standardOutput == "\n")
        #expect(try server.redisCli("--no-raw", "get", "missing").standardOutput == "(nil)\n")
    }

    @Test("integer replies print as digits, or (integer) N with --no-raw", arguments: [ServerProcess.Kind.redis, .cached])
    func integerReplies(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }

        #expect(try server.redisCli("incr", "hits").standardOutput == "1\n")
        #expect(try server.redisCli("--raw", "incrby", "hits", "41").standardOutput == "42\n")
        #expect(try server.redisCli("--no-raw", "decr", "hits").standardOutput == "(integer) 41\n")
    }

    @Test("array replies print one element a line, nil as an empty line", arguments: [ServerProcess.Kind.redis, .cached])
    func arrayReplies(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        #expect(try server.redisCli("mset", "a", "1", "b", "2").standardOutput == "OK\n")

        #expect(try server.redisCli("mget", "a", "missing", "b").standardOutput == "1\n\n2\n")
        #expect(try server.redisCli("--no-raw", "mget", "a", "missing", "b").standardOutput == "1) \"1\"\n2) (nil)\n3) \"2\"\n")
    }

    @Test("an error reply prints its message on stdout", arguments: [ServerProcess.Kind.redis, .cached])
    func errorReply(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let message = "ERR unknown command 'nope', with args beginning with: 'a' "

        let raw = try server.redisCli("nope", "a")
        #expect(raw.lines.first == message, "\(raw.summary)")

        let annotated = try server.redisCli("--no-raw", "nope", "a")
        #expect(annotated.standardOutput == "(error) \(message)\n", "\(annotated.summary)")
    }

    @Test("-n 3 works in database 3 and leaves database 0 alone", arguments: [ServerProcess.Kind.redis, .cached])
    func selectDatabase(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }

        #expect(try server.redisCli("-n", "3", "set", "only-in-3", "x").standardOutput == "OK\n")

        #expect(try server.redisCli("-n", "3", "get", "only-in-3").standardOutput == "x\n")
        #expect(try server.redisCli("-n", "3", "dbsize").standardOutput == "1\n")
        #expect(try server.redisCli("get", "only-in-3").standardOutput == "\n")
        #expect(try server.redisCli("dbsize").standardOutput == "0\n")
    }

    @Test("commands read from stdin run in order, one reply a line", arguments: [ServerProcess.Kind.redis, .cached])
    func commandsFromStdin(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }

        let out = try server.redisCli([], input: Data("set n 1\nincr n\nincrby n 10\nget n\nget nothing\n".utf8))
        #expect(out.status == 0, "\(out.summary)")
        #expect(out.standardOutput == "OK\n2\n12\n12\n\n", "\(out.summary)")
    }

    @Test("-3 speaks RESP3 (HELLO 3 on connect) and prints replies the same way", arguments: [ServerProcess.Kind.redis, .cached])
    func resp3(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        #expect(try server.redisCli("set", "k", "v").standardOutput == "OK\n")

        let get = try server.redisCli("-3", "get", "k")
        #expect(get.standardOutput == "v\n", "\(get.summary)")
        #expect(try server.redisCli("-3", "--no-raw", "get", "missing").standardOutput == "(nil)\n")
        #expect(try server.redisCli("-3", "--no-raw", "incr", "c").standardOutput == "(integer) 1\n")
    }

    @Test("--pipe mass-inserts 20,000 SETs and reports no errors", arguments: [ServerProcess.Kind.redis, .cached])
    func pipeMassInsertion(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        var input = [UInt8]()
        for i in 0..<20_000 { input += .respCommand(["SET", "mass:\(i)", "value-\(i)"]) }

        let out = try server.redisCli(["--pipe"], input: Data(input))
        #expect(out.status == 0, "\(out.summary)")
        #expect(out.standardOutput.contains("errors: 0, replies: 20000"), "\(out.summary)")

        #expect(try server.redisCli("dbsize").standardOutput == "20000\n")
        #expect(try server.redisCli("mget", "mass:0", "mass:12345", "mass:19999").lines == ["value-0", "value-12345", "value-19999"])
    }

    @Test("--pipe also takes inline commands (it appends an empty line and an ECHO of 20 random bytes)", arguments: [ServerProcess.Kind.redis, .cached])
    func pipeInlineCommands(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let input = (0..<1_000).map { "SET inline:\($0) \($0)\r\n" }.joined()

        let out = try server.redisCli(["--pipe"], input: Data(input.utf8))
        #expect(out.status == 0, "\(out.summary)")
        #expect(out.standardOutput.contains("errors: 0, replies: 1000"), "\(out.summary)")
        #expect(try server.redisCli("get", "inline:999").standardOutput == "999\n")
    }

    @Test("--pipe counts error replies", arguments: [ServerProcess.Kind.redis, .cached])
    func pipeCountsErrors(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        var input = [UInt8].respCommand(["SET", "word", "not-a-number"])
        for _ in 0..<10 { input += .respCommand(["INCR", "word"]) }  // ERR value is not an integer or out of range
        for _ in 0..<89 { input += .respCommand(["INCR", "number"]) }

        let out = try server.redisCli(["--pipe"], input: Data(input))
        #expect(out.standardOutput.contains("errors: 10, replies: 100"), "\(out.summary)")
        #expect(try server.redisCli("get", "number").standardOutput == "89\n")
    }

    @Test("--scan lists exactly the keys that exist", arguments: [ServerProcess.Kind.redis, .cached])
    func scanAll(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let expected = try ScanFixture.load(into: server)

        let out = try server.redisCli("--scan")
        #expect(out.status == 0, "\(out.summary)")
        #expect(Set(out.lines) == expected.all)
    }

    @Test("--scan --pattern 'user:*' lists exactly the matching keys", arguments: [ServerProcess.Kind.redis, .cached])
    func scanPattern(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let expected = try ScanFixture.load(into: server)

        let out = try server.redisCli("--scan", "--pattern", "user:*")
        #expect(out.status == 0, "\(out.summary)")
        #expect(Set(out.lines) == expected.users)
    }

    @Test("--memkeys finds the key that takes the most memory and counts every string", arguments: [ServerProcess.Kind.redis, .cached])
    func memoryKeys(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        try server.load(count: 200, name: { "key:\($0)" })
        #expect(try server.connect().command("SET", "big", String(repeating: "x", count: 5_000)) == .status("OK"))

        let out = try server.redisCli("--memkeys")
        #expect(out.status == 0, "\(out.summary)")
        let biggest = out.lines.first { $0.hasPrefix("Biggest string found") } ?? ""
        #expect(biggest.hasPrefix("Biggest string found '\"big\"' has "), "\(out.summary)")
        let bytes = Int(biggest.split(separator: " ").dropLast().last ?? "") ?? 0
        #expect(bytes >= 5_000 && bytes < 6_000, "\(biggest)")
        #expect(out.lines.contains { $0.hasPrefix("201 strings with ") }, "\(out.summary)")
    }

    @Test("--hotkeys under an LFU policy names the key read most", arguments: [ServerProcess.Kind.redis, .cached])
    func hotKeys(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let connection = try server.connect()
        #expect(try connection.command("CONFIG", "SET", "maxmemory-policy", "allkeys-lfu") == .status("OK"))
        try server.load(count: 100, name: { "key:\($0)" })
        for _ in 0..<500 { _ = try connection.command("GET", "key:42") }

        let out = try server.redisCli("--hotkeys")
        #expect(out.status == 0, "\(out.summary)")
        let hottest = out.lines.first { $0.hasPrefix("hot key found with counter:") } ?? ""
        #expect(hottest.hasSuffix("keyname: \"key:42\""), "\(out.summary)")
    }
}

/// 5,000 keys for the SCAN tests: 2,000 `user:N`, 2,000 `session:N` and 1,000 `usr:N` (which `user:*` must not match).
private struct ScanFixture {
    let users: Set<String>
    let all: Set<String>

    static func load(into server: ServerProcess) throws -> ScanFixture {
        let names = (0..<2_000).map { "user:\($0)" } + (0..<2_000).map { "session:\($0)" } + (0..<1_000).map { "usr:\($0)" }
        try server.load(count: names.count, name: { names[$0] })
        return ScanFixture(users: Set(names.filter { $0.hasPrefix("user:") }), all: Set(names))
    }
}
