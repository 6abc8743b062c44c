import CachedTestSupport
import Foundation
import Testing

/// Pub/sub and client-side caching across real connections (several event loops), checked against
/// redis-server: redis-cli as a subscriber, RESP2 redirected invalidations, redis-py's RESP3 client-side cache,
/// many publishers and subscribers at once, and the pubsub output buffer limit.
@Suite("Pub/sub and client-side caching over the network")
struct PubSubTrackingLiveTests {
    static let kinds: [ServerProcess.Kind] = [.redis, .cached]

    /// Polls `condition` until it holds or `timeout` passes (subscriptions made by another process).
    private func eventually(timeout: TimeInterval = 10, _ condition: () throws -> Bool) throws -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if try condition() { return true }
            usleep(10_000)
        }
        return try condition()
    }

    private func subscribers(_ server: ServerProcess, _ channel: String) throws -> Int64 {
        guard case .array(let reply) = try server.connect().command("PUBSUB", "NUMSUB", channel), reply.count == 2,
            case .integer(let count) = reply[1]
        else { return -1 }
        return count
    }

    @Test("a redis-cli SUBSCRIBE process prints each message PUBLISH sends", arguments: kinds)
    func redisCliSubscriber(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let cli = try ExternalProgram.redisCli.path()
        let subscriber = try ExternalProgram.stdbuf.start(
            ["-oL", cli, "-h", "127.0.0.1", "-p", String(server.port), "SUBSCRIBE", "news"])
        #expect(try eventually { try subscribers(server, "news") == 1 }, "redis-cli subscribed")
        let publisher = try server.connect()
        #expect(try publisher.command("PUBLISH", "news", "first") == .integer(1))
        #expect(try publisher.command("PUBLISH", "news", "second message") == .integer(1))
        #expect(try publisher.command("PUBLISH", "other", "x") == .integer(0))
        var printed = ""
        do {
            _ = try subscriber.wait(timeout: 1)
        } catch let timedOut as ProgramTimedOut {
            printed = timedOut.output.standardOutput
        }
        #expect(printed == "subscribe\nnews\n1\nmessage\nnews\nfirst\nmessage\nnews\nsecond message\n")
    }

    @Test("a RESP2 subscriber of __redis__:invalidate receives the invalidations of a client redirecting to it",
          arguments: kinds)
    func redirectToResp2Subscriber(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind, arguments: ["--io-threads", "2"])
        defer { server.stop() }
        let receiver = try RawConnection(port: server.port)
        try receiver.send(.respCommand(["CLIENT", "ID"]))
        guard case .integer(let receiverID) = try receiver.readReplies(1)[0] else { throw TestEnvironmentError("CLIENT ID") }
        try receiver.send(.respCommand(["SUBSCRIBE", "__redis__:invalidate"]))
        _ = try receiver.readReplies(1)

        let tracker = try server.connect()
        #expect(try tracker.command("CLIENT", "TRACKING", "on", "REDIRECT", String(receiverID)) == .ok)
        #expect(try tracker.command("MGET", "a", "b") == .array([.null, .null]))
        let writer = try server.connect()
        #expect(try writer.command("MSET", "a", "1", "b", "2", "c", "3") == .ok)
        #expect(try receiver.readReplies(2) == [
            .array([.bulk("message"), .bulk("__redis__:invalidate"), .array([.bulk("a")])]),
            .array([.bulk("message"), .bulk("__redis__:invalidate"), .array([.bulk("b")])]),
        ])
        #expect(try tracker.command("FLUSHALL") == .ok)
        let flush = Array("*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n$-1\r\n".utf8)
        #expect(try receiver.read(count: flush.count) == flush)
        // Another client's expiring key: EXPIRE with a time in the past deletes it.
        #expect(try tracker.command("GET", "c") == .null)
        #expect(try writer.command("SET", "c", "v") == .ok)
        _ = try receiver.readReplies(1)
        #expect(try tracker.command("GET", "c") == .bulk("v"))
        #expect(try writer.command("PEXPIREAT", "c", "1") == .integer(1))
        #expect(try receiver.readReplies(1) == [
            .array([.bulk("message"), .bulk("__redis__:invalidate"), .array([.bulk("c")])]),
        ])
    }

    @Test("CLIENT REPLY OFF: a subscriber still gets its confirmations and other clients' messages (RESP2, RESP3)",
          arguments: kinds, [2, 3])
    func subscriberWithRepliesOff(_ kind: ServerProcess.Kind, _ version: Int) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let subscriber = try RawConnection(port: server.port)
        if version == 3 {
            try subscriber.send(.respCommand(["HELLO", "3"]))
            _ = try subscriber.read(through: "*0\r\n")  // HELLO's map ends with its empty modules
        }
        let push = version == 3 ? ">" : "*"
        try subscriber.send(.respCommand(["CLIENT", "REPLY", "OFF"]) + .respCommand(["SUBSCRIBE", "news"]))
        let confirmation = Array("\(push)3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n".utf8)
        #expect(try subscriber.read(count: confirmation.count) == confirmation)
        #expect(try server.connect().command("PUBLISH", "news", "hello") == .integer(1))
        let message = Array("\(push)3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$5\r\nhello\r\n".utf8)
        #expect(try subscriber.read(count: message.count) == message)
        // PING's reply stays off; the unsubscribe confirmation that follows it comes.
        try subscriber.send(.respCommand(["PING"]) + .respCommand(["UNSUBSCRIBE"]))
        let unsubscribed = Array("\(push)3\r\n$11\r\nunsubscribe\r\n$4\r\nnews\r\n:0\r\n".utf8)
        #expect(try subscriber.read(count: unsubscribed.count) == unsubscribed)
    }

    @Test("RESP3: tracking-redir-broken once the redirect target has gone", arguments: kinds)
    func brokenRedirect(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let target = try server.connect()
        guard case .integer(let targetID) = try target.command("CLIENT", "ID") else { throw TestEnvironmentError("CLIENT ID") }
        let tracker = try RawConnection(port: server.port)
        try tracker.send(.respCommand(["HELLO", "3"]) + .respCommand(["CLIENT", "TRACKING", "on", "REDIRECT", String(targetID)]))
        _ = try tracker.read(through: "*0\r\n")
        #expect(try tracker.read(count: 5) == Array("+OK\r\n".utf8))
        try tracker.send(.respCommand(["GET", "k"]))
        #expect(try tracker.read(count: 3) == Array("_\r\n".utf8))
        _ = try target.command("QUIT")
        #expect(try eventually { try server.connect().command("CLIENT", "LIST", "ID", String(targetID)) == .bulk("") })
        #expect(try server.connect().command("SET", "k", "v") == .ok)
        let broken = Array(">2\r\n$21\r\ntracking-redir-broken\r\n:\(targetID)\r\n".utf8)
        #expect(try tracker.read(count: broken.count) == broken)
    }

    @Test("many publishers and subscribers on different event loops: all messages arrive, each publisher's in order",
          arguments: kinds)
    func crossLoopDelivery(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind, arguments: ["--io-threads", "4"])
        defer { server.stop() }
        let publisherCount = 6
        let messagesEach = 300
        let subscriberConnections = try (0..<6).map { _ in try RawConnection(port: server.port) }
        for (i, subscriber) in subscriberConnections.enumerated() {
            // Half subscribe to the channel, half to a pattern that matches it.
            try subscriber.send(.respCommand(i % 2 == 0 ? ["SUBSCRIBE", "bus"] : ["PSUBSCRIBE", "b*"]))
            _ = try subscriber.readReplies(1)
        }
        let failures = ProblemLog()
        let group = DispatchGroup()
        for p in 0..<publisherCount {
            group.enter()
            Thread.detachNewThread {
                defer { group.leave() }
                do {
                    let connection = try server.connect()
                    for n in 0..<messagesEach { try connection.append("PUBLISH", "bus", "\(p):\(n)") }
                    for _ in 0..<messagesEach {
                        guard case .integer(6) = try connection.reply() else { return failures.add("a PUBLISH did not reach 6") }
                    }
                } catch {
                    failures.add("publisher \(p): \(error)")
                }
            }
        }
        for (i, subscriber) in subscriberConnections.enumerated() {
            let replies = try subscriber.readReplies(publisherCount * messagesEach, timeout: 60)
            var next = [Int](repeating: 0, count: publisherCount)
            for reply in replies {
                guard case .array(let parts) = reply, let text = parts.last?.text else {
                    failures.add("subscriber \(i): \(reply)")
                    break
                }
                let fields = text.split(separator: ":").compactMap { Int($0) }
                guard fields.count == 2, next[fields[0]] == fields[1] else {
                    failures.add("subscriber \(i): \(text) out of order (expected \(next))")
                    break
                }
                next[fields[0]] += 1
            }
        }
        group.wait()
        #expect(failures.all.isEmpty, "\(failures.all.prefix(5))")
    }

    @Test("a subscriber that does not read is disconnected at the pubsub output buffer limit", arguments: kinds)
    func pubsubOutputLimit(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let admin = try server.connect()
        let slow = try RawConnection(port: server.port)
        try slow.send(.respCommand(["SUBSCRIBE", "firehose"]))
        _ = try slow.readReplies(1)
        // Set after the subscriber has gone quiet: the limit applies to it all the same.
        #expect(try admin.command("CONFIG", "SET", "client-output-buffer-limit", "pubsub 1mb 0 0") == .ok)
        let payload = String(repeating: "x", count: 256 * 1024)
        var published = 0
        // The kernel's socket buffers take some megabytes first; the limit then applies to what waits in the
        // server. Stop as soon as the server has let the subscriber go.
        while published < 400, try subscribers(server, "firehose") == 1 {
            _ = try admin.command("PUBLISH", "firehose", payload)
            published += 1
        }
        #expect(try eventually { try subscribers(server, "firehose") == 0 }, "the subscriber was disconnected")
        #expect(try slow.closedByServer(within: 10))
    }

    @Test("redis-py: a RESP3 client-side cache sees other clients' writes, and PubSub receives messages",
          arguments: kinds)
    func redisPy(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind, arguments: ["--io-threads", "2"])
        defer { server.stop() }
        let out = try PythonScript.run("redis_py_tracking.py", [String(server.port)])
        #expect(out.status == 0, "\(out.standardError)\(out.standardOutput)")
    }
}
