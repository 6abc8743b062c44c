import CachedTestSupport
import Testing

/// hiredis, the C client most Redis client libraries wrap, driven from Swift.
@Suite("hiredis")
struct HiredisClientTests {
    @Test("connects with a timeout and PING answers the status PONG", arguments: [ServerProcess.Kind.redis, .cached])
    func connectAndPing(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let client = try HiredisConnection(port: server.port, connectTimeout: 2)

        #expect(try client.command("PING") == .status("PONG"))
        #expect(try client.command("PING", "hello") == .bulk("hello"))
    }

    @Test("keys and values are binary safe: NUL, CR LF and non-UTF-8 bytes round-trip", arguments: [ServerProcess.Kind.redis, .cached])
    func binarySafeArguments(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let client = try server.connect()
        let key: [UInt8] = Array("key\0with\r\nbreaks".utf8)
        let value: [UInt8] = [0, 13, 10] + Array("$3\r\nfoo\r\n*1\r\n".utf8) + [0, 0xFF, 0xFE, 0x80, 13, 10, 0]

        #expect(try client.command([Array("SET".utf8), key, value]) == .ok)
        #expect(try client.command([Array("GET".utf8), key]) == .bulk(value))
        #expect(try client.command([Array("STRLEN".utf8), key]) == .integer(Int64(value.count)))
        #expect(try client.command([Array("GET".utf8), Array("key".utf8)]) == .null, "the key is not cut at its NUL")
    }

    @Test("an empty string is a value, not nil", arguments: [ServerProcess.Kind.redis, .cached])
    func emptyString(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let client = try server.connect()

        #expect(try client.command("SET", "empty", "") == .ok)
        #expect(try client.command("GET", "empty") == .bulk([]))
        #expect(try client.command("EXISTS", "empty") == .integer(1))
    }

    @Test("a 4 MB value round-trips intact", arguments: [ServerProcess.Kind.redis, .cached])
    func largeValue(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let client = try server.connect()
        let value = (0..<4 * 1024 * 1024).map { UInt8(truncatingIfNeeded: ($0 &* 2_654_435_761) >> 13) }

        #expect(try client.command([Array("SET".utf8), Array("big".utf8), value]) == .ok)
        #expect(try client.command([Array("GET".utf8), Array("big".utf8)]) == .bulk(value))
    }

    @Test("each reply type arrives as its hiredis type", arguments: [ServerProcess.Kind.redis, .cached])
    func replyTypes(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let client = try server.connect()

        #expect(try client.command("SET", "name", "ada") == .status("OK"))
        #expect(try client.command("GET", "name") == .bulk("ada"))
        #expect(try client.command("INCR", "visits") == .integer(1))
        #expect(try client.command("GET", "nobody") == .null)
        #expect(try client.command("MGET", "name", "nobody", "visits") == .array([.bulk("ada"), .null, .bulk("1")]))
        #expect(try client.command("MGET", "nobody") == .array([.null]))
        #expect(try client.command("KEYS", "no-such-*") == .array([]))
    }

    @Test("error replies carry Redis's exact messages", arguments: [ServerProcess.Kind.redis, .cached])
    func errorMessages(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let client = try server.connect()

        #expect(try client.command("NOPE", "a") == .error("ERR unknown command 'NOPE', with args beginning with: 'a' "))
        #expect(try client.command("NOPE") == .error("ERR unknown command 'NOPE', with args beginning with: "))
        #expect(try client.command("GET") == .error("ERR wrong number of arguments for 'get' command"))
        try client.command("SET", "word", "abc")
        #expect(try client.command("INCR", "word") == .error("ERR value is not an integer or out of range"))
        #expect(try client.command("PING") == .status("PONG"), "an error does not close the connection")
    }

    @Test("1,000 pipelined commands are answered in order", arguments: [ServerProcess.Kind.redis, .cached])
    func pipelining(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let client = try server.connect()
        var expected: [RedisReply] = []
        for i in 0..<250 {
            try client.append("SET", "p:\(i)", "value \(i)")
            expected.append(.ok)
            try client.append("INCR", "p:counter")
            expected.append(.integer(Int64(i + 1)))
            try client.append("GET", "p:\(i)")
            expected.append(.bulk("value \(i)"))
            try client.append("GET", "p:missing:\(i)")
            expected.append(.null)
        }

        let replies = try (0..<expected.count).map { _ in try client.reply() }
        #expect(replies.count == 1_000)
        #expect(mismatches(replies, expected).isEmpty, "\(mismatches(replies, expected).prefix(3))")
    }
}
