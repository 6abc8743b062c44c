import CachedTestSupport
import Foundation
import Testing

/// Limits and settings an operator gives on the command line or with CONFIG SET, checked against redis-server.
@Suite("Limits and settings")
struct LimitsLiveTests {
    static let kinds: [ServerProcess.Kind] = [.redis, .cached]

    @Test("--proto-max-bulk-len 1mb: a 2 MB bulk is a protocol error that closes that client only", arguments: kinds)
    func protoMaxBulkLength(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind, arguments: ["--proto-max-bulk-len", "1mb"])
        defer { server.stop() }
        let bystander = try server.connect()
        let offender = try RawConnection(port: server.port)

        try offender.send("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$\(2 << 20)\r\n")

        let error = "-ERR Protocol error: invalid bulk length\r\n"
        #expect(try offender.read(count: error.utf8.count) == Array(error.utf8))
        #expect(try offender.closedByServer(within: 5))
        #expect(try bystander.command("PING") == .status("PONG"))
        #expect(try bystander.command("SET", "k", String(repeating: "v", count: 1 << 20)) == .ok, "1 MB is allowed")
    }

    @Test("--client-query-buffer-limit 1mb: a client with 2 MB of request half sent is closed, others go on", arguments: kinds)
    func queryBufferLimit(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind, arguments: ["--client-query-buffer-limit", "1mb"])
        defer { server.stop() }
        let bystander = try server.connect()
        let offender = try RawConnection(port: server.port)

        // Half of a 2 MB value, 64 KB at a time; the server may close the connection before all of it is sent.
        _ = offender.trySend(Array("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$\(2 << 20)\r\n".utf8))
        let chunk = [UInt8](repeating: UInt8(ascii: "x"), count: 64 << 10)
        for _ in 0..<24 where offender.trySend(chunk) == nil {}

        #expect(try offender.closedByServer(within: 5))
        #expect(try bystander.command("PING") == .status("PONG"))
        #expect(try bystander.command("EXISTS", "k") == .integer(0))
    }

    @Test("--maxclients 2: a third connection is told ERR max number of clients reached and closed", arguments: kinds)
    func maxClients(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind, arguments: ["--maxclients", "2"])
        defer { server.stop() }
        let first = try server.connect()
        try poll("the readiness probe to go") {
            try first.command("CLIENT", "LIST").text?.split(separator: "\n").count == 1
        }
        let second = try server.connect()
        #expect(try second.command("PING") == .status("PONG"))

        let third = try RawConnection(port: server.port)
        try third.send(.respCommand(["PING"]))

        let error = "-ERR max number of clients reached\r\n"
        #expect(try third.read(count: error.utf8.count) == Array(error.utf8))
        #expect(try third.closedByServer(within: 5))
        #expect(try first.command("PING") == .status("PONG"))
        #expect(try first.command("INFO", "stats").text?.contains("rejected_connections:1\r\n") == true)
    }

    @Test("CONFIG SET hz and maxmemory at run time: CONFIG GET and INFO report the new values", arguments: kinds)
    func configSetAtRunTime(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let connection = try server.connect()

        #expect(try connection.command("CONFIG", "SET", "hz", "50") == .ok)
        #expect(try connection.command("CONFIG", "SET", "maxmemory", "10mb", "maxmemory-policy", "allkeys-lru") == .ok)

        #expect(try connection.command("CONFIG", "GET", "hz") == .array([.bulk("hz"), .bulk("50")]))
        #expect(try connection.command("CONFIG", "GET", "maxmemory") == .array([.bulk("maxmemory"), .bulk("10485760")]))
        let serverInfo = try #require(try connection.command("INFO", "server").text)
        #expect(serverInfo.contains("\r\nhz:50\r\n") && serverInfo.contains("\r\nconfigured_hz:50\r\n"))
        let memory = try #require(try connection.command("INFO", "memory").text)
        #expect(memory.contains("\r\nmaxmemory:10485760\r\n"), "\(memory)")
        #expect(memory.contains("\r\nmaxmemory_human:10.00M\r\n"), "\(memory)")
        #expect(memory.contains("\r\nmaxmemory_policy:allkeys-lru\r\n"), "\(memory)")
    }

    @Test("--databases 4: SELECT 3 works, SELECT 4 is out of range", arguments: kinds)
    func databases(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind, arguments: ["--databases", "4"])
        defer { server.stop() }
        let connection = try server.connect()

        #expect(try connection.command("SELECT", "3") == .ok)
        #expect(try connection.command("SELECT", "4") == .error("ERR DB index is out of range"))
        #expect(try server.redisCli("-n", "4", "PING").standardError.contains("ERR DB index is out of range"))
    }

    @Test("--requirepass: NOAUTH until AUTH; AUTH and HELLO AUTH with the password work", arguments: kinds)
    func requirePass(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind, arguments: ["--requirepass", "secret"])
        defer { server.stop() }
        let connection = try server.connect()

        #expect(try connection.command("GET", "k") == .error("NOAUTH Authentication required."))
        #expect(try connection.command("AUTH", "wrong")
            == .error("WRONGPASS invalid username-password pair or user is disabled."))
        #expect(try connection.command("AUTH", "secret") == .ok)
        #expect(try connection.command("GET", "k") == .null)

        let resp2 = try server.connect()
        guard case .array(let hello) = try resp2.command("HELLO", "2", "AUTH", "default", "secret") else {
            throw TestEnvironmentError("HELLO 2 did not return a map as an array")
        }
        #expect(Array(hello.prefix(2)) == [.bulk("server"), .bulk("redis")])
        #expect(try resp2.command("SET", "k", "v") == .ok)

        let resp3 = try RawConnection(port: server.port)
        try resp3.send(.respCommand(["HELLO", "3", "AUTH", "default", "secret"]) + .respCommand(["GET", "k"]))
        #expect(try resp3.read(through: "\r\n") == Array("%7\r\n".utf8), "HELLO 3 answers a RESP3 map of 7 fields")
        _ = try resp3.read(through: "$1\r\nv\r\n")

        #expect(try server.redisCli("-a", "secret", "--no-auth-warning", "GET", "k").standardOutput == "v\n")
    }
}
