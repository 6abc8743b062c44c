import CachedTestSupport
import Foundation
import Testing

/// Clients that sit idle or never read their replies, against both servers with the same directives.
@Suite("Idle and slow clients")
struct ClientLimitsLiveTests {
    static let kinds: [ServerProcess.Kind] = [.redis, .cached]

    @Test("--timeout 1: a client that stays silent is disconnected; one that keeps talking is not", arguments: kinds)
    func idleTimeout(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind, arguments: ["--timeout", "1"])
        defer { server.stop() }
        let silent = try RawConnection(port: server.port)
        let talker = try server.connect()
        let start = Date()
        // The silent client is closed within the server's once-a-second check after a second of silence.
        var talked = 0
        while Date().timeIntervalSince(start) < 2.5 {
            #expect(try talker.command("PING") == .status("PONG"))
            talked += 1
            usleep(200_000)
        }
        #expect(try silent.closedByServer(within: 5))
        #expect(try talker.command("PING") == .status("PONG"), "after \(talked) pings 200 ms apart")
    }

    @Test("--timeout 1: a client sending a command a byte at a time, or taking a long reply slowly, is not idle",
          arguments: kinds)
    func busyClientsAreNotIdle(_ kind: ServerProcess.Kind) throws {
        // The 20 MB value is stored before the timeout is set: on a loaded machine, sending it may pause for
        // longer than the timeout, which is not what this test is about.
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let setter = try server.connect()
        #expect(try setter.command("SET", "big", String(repeating: "v", count: 20 << 20)) == .ok)
        #expect(try setter.command("CONFIG", "SET", "timeout", "1") == .ok)

        // 28 bytes, one every 100 ms: the command takes 2.8 s to arrive.
        let slowWriter = try RawConnection(port: server.port)
        for byte in Array("*2\r\n$4\r\nECHO\r\n$8\r\nabcdefgh\r\n".utf8) {
            try slowWriter.send([byte])
            usleep(100_000)
        }
        #expect(try slowWriter.readReplies(1) == [.bulk("abcdefgh")])

        // 20 MB read 1 MB every 100 ms: about 2 s of taking the reply. (Much slower, Redis too closes the
        // client: the kernel's buffers take the reply's last megabytes long before the client reads them.)
        let slowReader = try RawConnection(port: server.port)
        try slowReader.send("GET big\r\n")
        var received = 0
        let total = (20 << 20) + "$20971520\r\n\r\n".utf8.count
        while received < total {
            received += try slowReader.read(count: min(1 << 20, total - received)).count
            usleep(100_000)
        }
        try slowReader.send("PING\r\n")
        #expect(try slowReader.readReplies(1) == [.status("PONG")])
    }

    @Test("a reply past the hard output limit closes its client as it is built, without stopping the server",
          arguments: kinds)
    func replyPastTheLimitWhileBuilt(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind, arguments: ["--client-output-buffer-limit", "normal 8mb 0 0"])
        defer { server.stop() }
        let bystander = try server.connect()
        #expect(try bystander.command("SET", "one-mb", String(repeating: "v", count: 1 << 20)) == .ok)
        let before = try server.peakResidentBytes()
        // One command whose reply is 200 MB: the limit is reached while it is written.
        let greedy = try RawConnection(port: server.port)
        try greedy.send("MGET" + String(repeating: " one-mb", count: 200) + "\r\n")
        #expect(try greedy.closedByServer(within: 10))
        let growth = try server.peakResidentBytes() - before
        #expect(growth < 100 << 20, "peak resident memory grew by \(growth >> 20) MB for an 8 MB limit")
        #expect(try bystander.command("PING") == .status("PONG"))
        #expect(try bystander.command("STRLEN", "one-mb") == .integer(1 << 20))
    }

    @Test("a subscriber's reply is held to the pubsub class while it is built, not the normal one", arguments: kinds)
    func subscriberReplyUnderItsClass(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(
            kind, arguments: ["--client-output-buffer-limit", "normal 10mb 0 0 pubsub 0 0 0"])
        defer { server.stop() }
        // PING with a message, which a RESP2 subscriber may send: the reply echoes the 20 MB message.
        let subscriber = try RawConnection(port: server.port)
        let message = String(repeating: "b", count: 20 << 20)
        try subscriber.send("SUBSCRIBE ch\r\n*2\r\n$4\r\nPING\r\n$\(message.utf8.count)\r\n\(message)\r\n")
        let replies = try subscriber.readReplies(2)
        guard case .array(let pong)? = replies.last else {
            Issue.record("PING answered \(String(describing: replies.last).prefix(200))")
            return
        }
        #expect(pong.last?.text?.count == 20 << 20)
    }

    @Test("a MONITOR client that does not read is held to the output limit like any client", arguments: kinds)
    func monitorThatDoesNotRead(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind, arguments: ["--client-output-buffer-limit", "normal 2mb 0 0"])
        defer { server.stop() }
        let monitor = try RawConnection(port: server.port)
        try monitor.send("MONITOR\r\n")
        #expect(try monitor.readReplies(1) == [.status("OK")])
        let writer = try server.connect()
        let value = String(repeating: "m", count: 100_000)
        // 30 MB of feed; the monitor reads none of it.
        for _ in 0..<300 { #expect(try writer.command("SET", "k", value) == .ok) }
        #expect(try monitor.closedByServer(within: 10))
        #expect(try writer.command("PING") == .status("PONG"))
    }

    @Test("client-output-buffer-limit: a client that sends but never reads is disconnected; memory stays bounded",
          arguments: kinds)
    func slowReader(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind, arguments: ["--client-output-buffer-limit", "normal 4mb 1mb 2"])
        defer { server.stop() }
        let bystander = try server.connect()
        #expect(try bystander.command("SET", "big", String(repeating: "v", count: 100_000)) == .ok)
        let before = try server.residentBytes()

        // 3000 GETs of a 100 KB value (300 MB of replies), sent without reading a byte.
        let reader = try RawConnection(port: server.port)
        let request = [UInt8](repeating: 0, count: 0) + Array(String(repeating: "GET big\r\n", count: 3000).utf8)
        _ = reader.trySend(request)
        // Not a byte read for a second, time enough for the replies to fill the socket buffers and overflow the
        // 4 MB hard limit. Reading at once would make this a fast reader: a client that drains its replies as
        // quickly as the server writes them may never have 4 MB waiting, and is rightly left alone.
        Thread.sleep(forTimeInterval: 1)

        #expect(try reader.closedByServer(within: 10))
        let growth = try server.residentBytes() - before
        #expect(growth < 64 << 20, "resident memory grew by \(growth >> 20) MB for a 4 MB limit")
        #expect(try bystander.command("GET", "big").text?.count == 100_000)
    }

    @Test("CONFIG SET maxclients raises the open files limit, or refuses with the most the system allows", arguments: kinds)
    func maxClientsAtRunTime(_ kind: ServerProcess.Kind) throws {
        // Soft limit 1000, enough for maxclients 900 and 32 more descriptors: nothing to raise at start.
        let roomy = try ServerProcess.start(kind, arguments: ["--maxclients", "900"], openFilesSoftLimit: 1000)
        defer { roomy.stop() }
        let c = try roomy.connect()
        #expect(try roomy.openFilesSoftLimit() == 1000)
        #expect(try c.command("CONFIG", "SET", "maxclients", "3000") == .ok)
        #expect(try roomy.openFilesSoftLimit() == 3032)
        #expect(try c.command("CONFIG", "GET", "maxclients") == .array([.bulk("maxclients"), .bulk("3000")]))

        // Hard limit 1000 too: maxclients is lowered to 968 (1000 less 32 reserved descriptors) at start, nothing
        // above that is possible, and the value stays as it was.
        let tight = try ServerProcess.start(kind, openFilesSoftLimit: 1000, openFilesHardLimit: 1000)
        defer { tight.stop() }
        let t = try tight.connect()
        #expect(try t.command("CONFIG", "SET", "maxclients", "5000") == .error(
            "ERR CONFIG SET failed (possibly related to argument 'maxclients') - The operating system is not able to handle the specified number of clients, try with 968"))
        #expect(try t.command("CONFIG", "GET", "maxclients") == .array([.bulk("maxclients"), .bulk("968")]))
        #expect(try t.command("CONFIG", "SET", "maxclients", "500") == .ok)
        #expect(try tight.openFilesSoftLimit() == 1000)
    }
}
