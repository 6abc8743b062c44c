import CachedTestSupport
import Foundation
import Testing

/// The wire protocol byte for byte over a plain socket: inline commands (what `printf 'PING\r\n' | nc` sends),
/// pipelines written in one go, requests split across writes, protocol errors, and RESP3 after HELLO 3.
@Suite("RESP over a raw socket")
struct RawProtocolTests {
    /// Sends `request` on a fresh connection and reads exactly as many bytes as `reply` has.
    private func exchange(_ server: ServerProcess, _ request: String, expecting reply: String) throws -> String {
        let connection = try RawConnection(port: server.port)
        try connection.send(request)
        return String(decoding: try connection.read(count: reply.utf8.count), as: UTF8.self)
    }

    @Test("an inline PING is answered +PONG", arguments: [ServerProcess.Kind.redis, .cached])
    func inlinePing(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }

        #expect(try exchange(server, "PING\r\n", expecting: "+PONG\r\n") == "+PONG\r\n")
        #expect(try exchange(server, "ping\n", expecting: "+PONG\r\n") == "+PONG\r\n", "a bare LF ends an inline command too")
        #expect(try exchange(server, "\r\n\r\n  PING  \r\n", expecting: "+PONG\r\n") == "+PONG\r\n", "empty lines and blanks are skipped")
    }

    @Test("inline arguments split on blanks, and double quotes group and unescape", arguments: [ServerProcess.Kind.redis, .cached])
    func inlineArguments(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let request = "SET greeting \"hello world\"\r\nGET greeting\r\nECHO \"a\\x41\\tb\"\r\nECHO 'single quoted'\r\n"
        let reply = "+OK\r\n$11\r\nhello world\r\n$4\r\naA\tb\r\n$13\r\nsingle quoted\r\n"

        #expect(try exchange(server, request, expecting: reply) == reply)
    }

    @Test("an inline command with unbalanced quotes is a protocol error that closes the connection", arguments: [ServerProcess.Kind.redis, .cached])
    func unbalancedQuotes(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let connection = try RawConnection(port: server.port)
        try connection.send("SET k \"abc\r\nPING\r\n")
        let error = "-ERR Protocol error: unbalanced quotes in request\r\n"

        #expect(String(decoding: try connection.read(count: error.utf8.count), as: UTF8.self) == error)
        #expect(try connection.closedByServer(), "nothing after the error is executed")
    }

    @Test("a malformed multibulk length is a protocol error that closes the connection", arguments: [ServerProcess.Kind.redis, .cached])
    func invalidMultibulkLength(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let connection = try RawConnection(port: server.port)
        try connection.send("*abc\r\nPING\r\n")
        let error = "-ERR Protocol error: invalid multibulk length\r\n"

        #expect(String(decoding: try connection.read(count: error.utf8.count), as: UTF8.self) == error)
        #expect(try connection.closedByServer())
    }

    @Test("1,000 commands pipelined in one write are answered in order", arguments: [ServerProcess.Kind.redis, .cached])
    func pipelineInOneWrite(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        var request: [UInt8] = []
        var expected: [RedisReply] = []
        for i in 0..<500 {
            request += .respCommand(["INCR", "hits"])
            expected.append(.integer(Int64(i + 1)))
            request += .respCommand(["ECHO", "message \(i)"])
            expected.append(.bulk("message \(i)"))
        }
        let connection = try RawConnection(port: server.port)
        try connection.send(request)

        let replies = try connection.readReplies(expected.count)
        #expect(mismatches(replies, expected).isEmpty, "\(mismatches(replies, expected).prefix(3))")
    }

    @Test(
        "replies far larger than the socket buffer, mixed with small ones, arrive whole and in order",
        arguments: [ServerProcess.Kind.redis, .cached])
    func repliesLargerThanTheSocketBuffer(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        // 1 MiB that differs from one place to the next, so a reply that lost, repeated or swapped bytes shows.
        let value = (0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 10) }
        let connection = try RawConnection(port: server.port)
        try connection.send(Self.bulkCommand(["SET", "big"], value: value))
        #expect(try connection.readReplies(1) == [.ok])

        // 24 MiB of replies to one write: the socket takes a part of them at a time, the rest waits for the
        // client, and the small replies in between must keep their places.
        var request: [UInt8] = []
        var expected: [RedisReply] = []
        for i in 0..<24 {
            request += .respCommand(["GET", "big"])
            expected.append(.bulk(value))
            request += .respCommand(["INCR", "n"])
            expected.append(.integer(Int64(i + 1)))
        }
        try connection.send(request)
        usleep(100_000)  // the client reads late, as a busy one would

        let replies = try connection.readReplies(expected.count, timeout: 30)
        #expect(replies.count == expected.count)
        let wrong = zip(replies, expected).enumerated().filter { $0.element.0 != $0.element.1 }.map(\.offset)
        #expect(wrong.isEmpty, "replies out of place or damaged at \(wrong.prefix(5))")
        try connection.send(.respCommand(["PING"]))
        #expect(try connection.readReplies(1) == [.status("PONG")])
    }

    /// A command whose last argument is `value`, as raw bytes.
    private static func bulkCommand(_ words: [String], value: [UInt8]) -> [UInt8] {
        var bytes = Array("*\(words.count + 1)\r\n".utf8)
        for word in words { bytes += Array("$\(word.utf8.count)\r\n\(word)\r\n".utf8) }
        bytes += Array("$\(value.count)\r\n".utf8) + value + Array("\r\n".utf8)
        return bytes
    }

    @Test("inline and multibulk commands mix in one pipeline", arguments: [ServerProcess.Kind.redis, .cached])
    func mixedPipeline(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let request = "SET a 1\r\n" + String(decoding: [UInt8].respCommand(["INCR", "a"]), as: UTF8.self) + "GET a\r\n"
        let reply = "+OK\r\n:2\r\n$1\r\n2\r\n"

        #expect(try exchange(server, request, expecting: reply) == reply)
    }

    @Test("a command written one byte at a time is answered once, when complete", arguments: [ServerProcess.Kind.redis, .cached])
    func requestSplitAcrossWrites(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let connection = try RawConnection(port: server.port)
        let request = [UInt8].respCommand(["SET", "split", "across\r\nwrites"]) + .respCommand(["GET", "split"])
        for byte in request {
            try connection.send([byte])
            usleep(200)  // lets each byte travel as its own segment
        }

        #expect(try connection.readReplies(2) == [.ok, .bulk("across\r\nwrites")])
    }

    @Test("QUIT replies +OK and closes the connection; later commands are not run", arguments: [ServerProcess.Kind.redis, .cached])
    func quit(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let connection = try RawConnection(port: server.port)
        try connection.send("QUIT\r\nSET after-quit 1\r\n")

        #expect(String(decoding: try connection.read(count: 5), as: UTF8.self) == "+OK\r\n")
        #expect(try connection.closedByServer())
        #expect(try HiredisConnection(port: server.port).command("EXISTS", "after-quit") == .integer(0))
    }

    @Test("after HELLO 3 the server answers a map and sends RESP3 nulls", arguments: [ServerProcess.Kind.redis, .cached])
    func helloSwitchesToResp3(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let connection = try RawConnection(port: server.port)
        try connection.send("HELLO 3\r\n")
        // server, version, proto, id, mode, role, modules — modules, an empty array, comes last.
        let hello = String(decoding: try connection.read(through: "$7\r\nmodules\r\n*0\r\n"), as: UTF8.self)
        #expect(hello.hasPrefix("%7\r\n"), "\(hello.debugDescription)")
        #expect(hello.contains("$5\r\nproto\r\n:3\r\n"), "\(hello.debugDescription)")
        #expect(hello.contains("$4\r\nmode\r\n$10\r\nstandalone\r\n$4\r\nrole\r\n$6\r\nmaster\r\n"), "\(hello.debugDescription)")

        try connection.send("GET missing\r\nMGET missing\r\nINCR n\r\n")
        let reply = "_\r\n*1\r\n_\r\n:1\r\n"
        #expect(String(decoding: try connection.read(count: reply.utf8.count), as: UTF8.self) == reply)
    }

    @Test("HELLO 2 switches back: a flat array, and nulls are $-1 again", arguments: [ServerProcess.Kind.redis, .cached])
    func helloSwitchesBackToResp2(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let connection = try RawConnection(port: server.port)
        try connection.send("HELLO 3\r\n")
        _ = try connection.read(through: "$7\r\nmodules\r\n*0\r\n")
        try connection.send("HELLO 2\r\nGET missing\r\n")

        let replies = try connection.readReplies(2)
        guard case .array(let fields) = replies[0], fields.count == 14 else {
            Issue.record("HELLO 2 should answer a flat array of 14 elements, got \(replies[0])")
            return
        }
        #expect(fields[4] == .bulk("proto"))
        #expect(fields[5] == .integer(2))
        #expect(replies[1] == .null)
    }
}
