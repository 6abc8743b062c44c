import CachedTestSupport
import Foundation
import Testing

/// MONITOR as redis-cli and raw clients see it, checked against redis-server.
@Suite("MONITOR")
struct MonitorLiveTests {
    static let kinds: [ServerProcess.Kind] = [.redis, .cached]

    /// A connection in MONITOR mode, past its +OK.
    private func monitor(_ server: ServerProcess, password: String? = nil) throws -> RawConnection {
        let connection = try RawConnection(port: server.port)
        if let password {
            try connection.send(.respCommand(["AUTH", password]))
            #expect(try connection.read(through: "\r\n") == Array("+OK\r\n".utf8))
        }
        try connection.send(.respCommand(["MONITOR"]))
        #expect(try connection.read(through: "\r\n") == Array("+OK\r\n".utf8))
        return connection
    }

    /// The next monitor line, without its CRLF, split into the timestamp and the rest.
    private func nextLine(_ connection: RawConnection) throws -> (time: String, rest: String) {
        let line = String(decoding: try connection.read(through: "\r\n").dropLast(2), as: UTF8.self)
        let space = line.firstIndex(of: " ") ?? line.endIndex
        return (String(line[..<space]), String(line[space...].dropFirst()))
    }

    @Test("each command of another client is one line: +<unix>.<usec> [<db> <ip:port>] \"cmd\" \"arg\"...", arguments: kinds)
    func lineFormat(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let watcher = try monitor(server)
        let client = try RawConnection(port: server.port)
        let address = client.localAddress

        try client.send(.respCommand(["SET", "greeting", "hello world"]) + .respCommand(["get", "greeting"]))
        #expect(try client.readReplies(2) == [.ok, .bulk("hello world")])

        let set = try nextLine(watcher)
        #expect(set.time.wholeMatch(of: try Regex(#"\+\d{10}\.\d{6}"#)) != nil, "\(set.time)")
        let seconds = Double(set.time.dropFirst()) ?? 0
        #expect(abs(seconds - Date().timeIntervalSince1970) < 60)
        #expect(set.rest == "[0 \(address)] \"SET\" \"greeting\" \"hello world\"")
        #expect(try nextLine(watcher).rest == "[0 \(address)] \"get\" \"greeting\"", "the command name as the client sent it")
    }

    @Test("binary arguments are written with C escapes", arguments: kinds)
    func binaryEscapes(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let watcher = try monitor(server)
        let client = try server.connect()

        let value: [UInt8] = [0x00, 0xFF, 0x07, 0x08, 0x09, 0x0A, 0x0D, 0x22, 0x5C, 0x7F, 0x20, 0x41] + Array("é".utf8)
        #expect(try client.command([Array("SET".utf8), Array("k".utf8), value]) == .ok)

        #expect(try nextLine(watcher).rest.hasSuffix(#""SET" "k" "\x00\xff\a\b\t\n\r\"\\\x7f A\xc3\xa9""#))
    }

    @Test("SELECT shows the database it selected, and later commands show it too", arguments: kinds)
    func databaseNumber(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let watcher = try monitor(server)
        let client = try RawConnection(port: server.port)
        let address = client.localAddress

        try client.send(.respCommand(["SELECT", "5"]) + .respCommand(["GET", "k"]))
        #expect(try client.readReplies(2) == [.ok, .null])

        #expect(try nextLine(watcher).rest == "[5 \(address)] \"SELECT\" \"5\"")
        #expect(try nextLine(watcher).rest == "[5 \(address)] \"GET\" \"k\"")
    }

    @Test(
        "credentials show as (redacted); administrative, unknown and malformed commands are not shown",
        arguments: kinds)
    func hiddenAndRedacted(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind, arguments: ["--requirepass", "secret"])
        defer { server.stop() }
        let watcher = try monitor(server, password: "secret")
        let client = try RawConnection(port: server.port)
        let address = client.localAddress
        let commands: [[String]] = [
            ["GET", "before-auth"],  // refused (NOAUTH): not shown
            ["AUTH", "wrong"],
            ["AUTH", "secret"],
            ["HELLO", "2", "AUTH", "default", "secret", "SETNAME", "me"],
            ["CONFIG", "GET", "hz"],  // admin
            ["CLIENT", "LIST"],  // admin
            ["CLIENT", "KILL", "ID", "999999"],  // admin
            ["CLIENT", "ID"],  // not admin
            ["NO-SUCH-COMMAND"],
            ["GET"],  // wrong arity
            ["MIGRATE", "127.0.0.1", "1", "nokey", "0", "10", "AUTH", "pw"],  // NOKEY: no connection
            ["MIGRATE", "127.0.0.1", "1", "", "0", "10", "AUTH", "pw1", "COPY", "AUTH2", "user", "pw2", "KEYS", "a"],
            ["PING"],
        ]

        try client.send(commands.flatMap { [UInt8].respCommand($0) })
        _ = try client.readReplies(commands.count)

        let expected = [
            #""AUTH" "(redacted)""#,
            #""AUTH" "(redacted)""#,
            #""HELLO" "2" "AUTH" "(redacted)" "(redacted)" "SETNAME" "me""#,
            #""CLIENT" "ID""#,
            #""MIGRATE" "127.0.0.1" "1" "nokey" "0" "10" "AUTH" "(redacted)""#,
            #""MIGRATE" "127.0.0.1" "1" "" "0" "10" "AUTH" "(redacted)" "COPY" "AUTH2" "(redacted)" "(redacted)" "KEYS" "a""#,
            #""PING""#,
        ]
        for line in expected {
            #expect(try nextLine(watcher).rest == "[0 \(address)] \(line)")
        }
    }

    @Test("a second MONITOR gets no reply; the monitor may not touch keys, and what it is refused is not shown",
          arguments: kinds)
    func monitorsOwnCommands(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let watcher = try monitor(server)

        try watcher.send(.respCommand(["MONITOR"]) + .respCommand(["GET", "k"]) + .respCommand(["PUBLISH", "ch", "m"]))

        let refused = Array("-ERR Replica can't interact with the keyspace\r\n".utf8)
        #expect(try watcher.read(through: "\r\n") == refused, "no +OK for the second MONITOR; GET refused")
        #expect(try watcher.read(through: "\r\n") == refused)
        // A command that does not touch keys runs, and the monitor sees it after its reply.
        try watcher.send(.respCommand(["ECHO", "hi"]))
        #expect(try watcher.read(through: "\r\n") == Array("$2\r\n".utf8))
        #expect(try watcher.read(through: "\r\n") == Array("hi\r\n".utf8))
        #expect(try nextLine(watcher).rest.hasSuffix("] \"ECHO\" \"hi\""))
    }

    @Test("QUIT from the monitor gets +OK and ends its connection", arguments: kinds)
    func quitEndsMonitor(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let watcher = try monitor(server)

        try watcher.send(.respCommand(["QUIT"]))

        #expect(try watcher.read(through: "\r\n") == Array("+OK\r\n".utf8))
        #expect(try watcher.closedByServer(within: 5))
    }

    @Test("redis-cli monitor prints OK, then the commands of other clients", arguments: kinds)
    func redisCliMonitor(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let output = OutputBox()
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            output.result = Result { try server.redisCli(["monitor"], timeout: 20) }
            done.signal()
        }
        let admin = try server.connect()
        var monitorID: Int?
        try poll("redis-cli to enter MONITOR mode") {
            guard let list = try admin.command("CLIENT", "LIST").text else { return false }
            let line = list.split(separator: "\n").first { $0.contains(" flags=O ") }
            monitorID = line.flatMap { $0.split(separator: " ").first?.dropFirst(3) }.flatMap { Int($0) }
            return monitorID != nil
        }
        #expect(try admin.command("SET", "watched", "1") == .ok)
        #expect(try admin.command("INCR", "watched") == .integer(2))

        // Ends redis-cli: its connection closes, and it exits.
        #expect(try admin.command("CLIENT", "KILL", "ID", String(monitorID!)) == .integer(1))
        #expect(done.wait(timeout: .now() + 20) == .success)

        let lines = try #require(try output.result?.get()).lines
        #expect(lines.first == "OK")
        #expect(lines.dropFirst().prefix(2).map { $0.split(separator: "] ", maxSplits: 1).last ?? "" }
            == [#""SET" "watched" "1""#, #""INCR" "watched""#], "\(lines)")
    }
}

/// What a background thread produced.
final class OutputBox: @unchecked Sendable {
    var result: Result<ProgramOutput, any Error>?
}
