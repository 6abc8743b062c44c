import CachedStoreContract
import CachedTestSupport
import Foundation
import NIOCore
import Testing

@testable import CachedNetworking
@testable import CachedNetworkingRedis

/// RESPStore's configuration URLs (no network).
struct StoreRESPURLTests {
    @Test func parsesTheURLForms() throws {
        let plain = try RESPStore.Configuration(url: "redis://cache.internal:6380")
        #expect(plain.host == "cache.internal")
        #expect(plain.port == 6380)
        #expect(plain.username == nil && plain.password == nil && plain.database == 0)

        let defaults = try RESPStore.Configuration(url: "redis://localhost")
        #expect(defaults.port == 6379)

        let full = try RESPStore.Configuration(url: "redis://app:p%40ss%3Aword@10.0.0.5:7000/12")
        #expect(full.username == "app")
        #expect(full.password == "p@ss:word")
        #expect(full.host == "10.0.0.5" && full.port == 7000 && full.database == 12)

        let passwordOnly = try RESPStore.Configuration(url: "redis://:secret@h:1/")
        #expect(passwordOnly.username == nil && passwordOnly.password == "secret" && passwordOnly.database == 0)

        let bare = try RESPStore.Configuration(url: "redis://secret@h")
        #expect(bare.username == nil && bare.password == "secret")

        let v6 = try RESPStore.Configuration(url: "REDIS://[::1]:6390/2")
        #expect(v6.host == "::1" && v6.port == 6390 && v6.database == 2)

        #expect(plain.poolSize == 4)
        #expect(plain.connectTimeout == .seconds(1) && plain.commandTimeout == .seconds(1))
    }

    @Test func refusesOtherSchemesWithAClearMessage() {
        for url in ["http://user:hunter2@cache.internal:6380", "redis+cluster://user:hunter2@cache.internal:6380"] {
            #expect {
                _ = try RESPStore.Configuration(url: url)
            } throws: { error in
                let message = "\(error)"
                return (message.contains("rediss://") || message.contains("RESPClusterStore")) && !message.contains("hunter2")
            }
        }
    }

    @Test(arguments: [
        "cache.internal:6379", "http://h:1", "redis://", "redis://:pw@", "redis://h:0", "redis://h:65536",
        "redis://h:port", "redis://h/db", "redis://h/-1", "redis://h?db=1", "redis://[::1", "redis://[::1]x",
        "redis://u:%zz@h",
    ])
    func rejectsMalformedURLs(_ url: String) {
        #expect(throws: RESPStore.ConfigurationError.self) { _ = try RESPStore.Configuration(url: url) }
    }

    @Test func descriptionsHideThePassword() throws {
        let configuration = try RESPStore.Configuration(url: "redis://app:hunter2@[::1]:7000/3")
        #expect(configuration.description.hasPrefix("redis://app:***@[::1]:7000/3 (pool 4"))
        #expect(!"\(configuration)".contains("hunter2"))
    }

    @Test func errorMessagesHideThePassword() {
        do {
            _ = try RESPStore.Configuration(url: "redis://app:hunter2@h:notaport")
            Issue.record("accepted a bad port")
        } catch {
            #expect(!error.description.contains("hunter2"))
            #expect(error.description.contains("redis://***@h:notaport"))
        }
    }
}

/// RESPStore against servers that misbehave, go away, or watch how it writes.
struct StoreRESPTests {
    private func configuration(port: Int, _ adjust: (inout RESPStore.Configuration) -> Void = { _ in })
        -> RESPStore.Configuration
    {
        var configuration = RESPStore.Configuration(host: "127.0.0.1", port: port)
            .forTests(connectTimeout: .milliseconds(500), commandTimeout: .milliseconds(200))
        adjust(&configuration)
        return configuration
    }

    /// Runs `body` with a store of one connection to a fresh `cached-server`, then shuts both down.
    private func withOneConnection(
        polling: Duration = .microseconds(50), _ body: (RESPStore) async throws -> Void
    ) async throws {
        let server = try await offThread { try ServerProcess.start(.cached) }
        let store = RESPStore(configuration: configuration(port: server.port) {
            $0.poolSize = 1
            $0.commandTimeout = .seconds(10)
            $0.replyPolling = polling
        })
        try await body(store)
        await store.shutdown()
        _ = try await offThread { server.stop() }
    }

    /// A server that answers every GET with "ok" after `replyDelay`, and a store with one connection to it.
    private func slowGetServer(replyDelay: Duration) throws -> (ScriptedServer, RESPStore) {
        let server = try ScriptedServer(replyDelay: replyDelay) { command in
            command.first == "GET" ? Array("$2\r\nok\r\n".utf8) : Array("-ERR unexpected\r\n".utf8)
        }
        let store = RESPStore(configuration: configuration(port: server.port) {
            $0.poolSize = 1
            $0.commandTimeout = .seconds(5)
        })
        return (server, store)
    }

    @Test func aServerThatNeverAnswersTimesOut() async throws {
        let silent = try SilentListener()
        let store = RESPStore(configuration: configuration(port: silent.port) { $0.poolSize = 2 })
        let start = ContinuousClock.now
        let error = await storeError { () async throws(CacheStoreError) in _ = try await store.get("k") }
        let elapsed = ContinuousClock.now - start
        #expect(error?.kind == .timeout)
        #expect(elapsed >= .milliseconds(150) && elapsed < .seconds(30), "took \(elapsed)")  // a hang would be forever
        // The connection was discarded; the next call reconnects and times out the same way.
        let again = await storeError { () async throws(CacheStoreError) in try await store.set("k", to: ByteBuffer(), ttl: nil) }
        #expect(again?.kind == .timeout)
        await store.shutdown()
    }

    @Test func aBoundedCallEndsAtItsDeadline() async throws {
        let silent = try SilentListener()
        let store = RESPStore(configuration: configuration(port: silent.port) { $0.commandTimeout = .seconds(30) })
        let start = ContinuousClock.now
        let result = await CacheStoreDeadline.bounding(.milliseconds(100)) { () async throws(CacheStoreError) in
            try await store.get("k")
        }
        let elapsed = ContinuousClock.now - start
        #expect(result.failure?.kind == .timeout, "\(result)")
        // Ended by its own deadline, not the 30 s socket timeout: the message names the bound. (No upper bound on
        // the time taken: a busy machine may be slow to run the resumed task, which says nothing of the store.)
        #expect(result.failure?.message == "no answer within \(Duration.milliseconds(100))", "\(result)")
        #expect(elapsed >= .milliseconds(90), "took \(elapsed)")
        // Unbounded calls still wait for the socket; a bounded one times out again on its own deadline.
        let again = await CacheStoreDeadline.bounding(.milliseconds(50)) { () async throws(CacheStoreError) in
            try await store.set("k", to: ByteBuffer(), ttl: nil)
        }
        #expect(again.failure?.kind == .timeout)
        await store.shutdown()
    }

    /// A call that enters the watcher and finishes before its thread looks at it must not leave its deadline
    /// behind as the time the thread wakes by itself: a later call, due after that, would then never be timed out
    /// (the thread waits for a signal that the later call sees no reason to send).
    @Test func theDeadlineWatcherTimesOutACallAddedAfterOneThatFinishedUnseen() async throws {
        let watcher = StoreDeadlineWatcher(idleNanoseconds: 1_000_000)  // idle after a millisecond's nap
        for round in 0..<100 {
            try await Task.sleep(for: .milliseconds(3))  // the thread waits for a signal
            let early = PendingStoreCall(limit: CacheStoreDeadline(timeout: .milliseconds(1)), watcher: watcher)
            watcher.add(early)
            early.resume(returning: .success(.null))  // finished (and removed) before the thread runs
            try await Task.sleep(for: .milliseconds(2))  // the thread has woken, found nothing and waits again
            let late = PendingStoreCall(limit: CacheStoreDeadline(timeout: .milliseconds(20)), watcher: watcher)
            let timedOut = await withTaskGroup(of: Bool.self) { group in
                group.addTask {
                    let result = await withUnsafeContinuation { continuation in
                        if late.start(continuation) { watcher.add(late) }
                    }
                    return result.failure?.kind == .timeout
                }
                group.addTask {
                    try? await Task.sleep(for: .seconds(10))
                    late.resume(returning: .failure(CacheStoreError(.closed, "the watcher never timed the call out")))
                    return false
                }
                let first = await group.next() ?? false
                group.cancelAll()
                return first
            }
            try #require(timedOut, "round \(round): the call was not timed out at its deadline")
        }
    }

    @Test func aBoundedCallEndsWhenItsTaskIsCancelled() async throws {
        let silent = try SilentListener()
        let store = RESPStore(configuration: configuration(port: silent.port) { $0.commandTimeout = .seconds(30) })
        let call = Task {
            await CacheStoreDeadline.bounding(.seconds(30)) { () async throws(CacheStoreError) in try await store.get("k") }
        }
        try await Task.sleep(for: .milliseconds(100))
        let start = ContinuousClock.now
        call.cancel()
        let result = await call.value
        #expect(result.failure?.kind == .timeout, "\(result)")
        #expect(ContinuousClock.now - start < .seconds(10))
        await store.shutdown()
    }

    @Test func shutdownFailsPendingCallsAsClosed() async throws {
        let silent = try SilentListener()
        let store = RESPStore(configuration: configuration(port: silent.port) {
            $0.poolSize = 2
            $0.commandTimeout = .seconds(30)
        })
        let calls = (0..<6).map { i in
            Task { () -> CacheStoreError? in
                do throws(CacheStoreError) {
                    _ = try await store.get("k\(i)")
                    return nil
                } catch {
                    return error
                }
            }
        }
        try await Task.sleep(for: .milliseconds(150))
        let start = ContinuousClock.now
        await store.shutdown()
        for call in calls {
            let error = await call.value
            #expect(error?.kind == .closed, "\(String(describing: error))")
        }
        #expect(ContinuousClock.now - start < .seconds(5))
        let after = await storeError { () async throws(CacheStoreError) in _ = try await store.get("k") }
        #expect(after?.kind == .closed)
    }

    @Test func aRefusedConnectionFailsFastAndBacksOff() async throws {
        let port = try freeLoopbackPort()
        let store = RESPStore(configuration: configuration(port: port) {
            $0.poolSize = 2
            $0.minReconnectDelay = .seconds(30)
            $0.maxReconnectDelay = .seconds(30)
        })
        for _ in 0..<2 {
            let error = await storeError { () async throws(CacheStoreError) in _ = try await store.get("k") }
            #expect(error?.kind == .unreachable)
            #expect(error?.message.contains("127.0.0.1:\(port)") == true, "\(String(describing: error))")
        }
        // Both connections now wait out their delay: even with a server listening now, calls fail without
        // trying to connect.
        let server = try ScriptedServer(port: port) { _ in Array("$1\r\nv\r\n".utf8) }
        for _ in 0..<20 {
            let error = await storeError { () async throws(CacheStoreError) in _ = try await store.get("k") }
            #expect(error?.kind == .unreachable)
            #expect(error?.message.contains("no connection") == true, "\(String(describing: error))")
        }
        #expect(server.batches.isEmpty)
        await store.shutdown()
        server.stop()
    }

    @Test func reconnectsOnceTheDelayHasPassed() async throws {
        let port = try freeLoopbackPort()
        let store = RESPStore(configuration: configuration(port: port) {
            $0.poolSize = 1
            $0.minReconnectDelay = .milliseconds(100)
            $0.maxReconnectDelay = .milliseconds(100)
        })
        let error = await storeError { () async throws(CacheStoreError) in _ = try await store.get("k") }
        #expect(error?.kind == .unreachable)
        let server = try ScriptedServer(port: port) { _ in Array("$1\r\nv\r\n".utf8) }
        try await Task.sleep(for: .milliseconds(150))
        #expect(try await store.get("k")?.text == "v")
        await store.shutdown()
        server.stop()
    }

    @Test(arguments: [ServerProcess.Kind.cached, .redis])
    func reconnectsAfterTheServerRestarts(_ kind: ServerProcess.Kind) async throws {
        let server = try await offThread { try ServerProcess.start(kind) }
        let store = RESPStore(configuration: configuration(port: server.port) { $0.poolSize = 2 })
        try await store.set("before", to: ByteBuffer(string: "1"), ttl: nil)
        #expect(try await store.get("before")?.text == "1")

        _ = try await offThread { server.kill() }
        // During the outage calls fail quickly (20 calls take less than 20 connect timeouts would).
        let start = ContinuousClock.now
        for _ in 0..<20 {
            let error = await storeError { () async throws(CacheStoreError) in _ = try await store.get("before") }
            #expect(error?.kind == .unreachable || error?.kind == .timeout, "\(String(describing: error))")
        }
        #expect(ContinuousClock.now - start < .seconds(5))

        try await offThread { try server.restart() }
        var recovered = false
        let deadline = ContinuousClock.now + .seconds(5)
        while !recovered && ContinuousClock.now < deadline {
            do {
                try await store.set("after", to: ByteBuffer(string: "2"), ttl: nil)
                recovered = true
            } catch {
                try await Task.sleep(for: .milliseconds(20))
            }
        }
        #expect(recovered)
        #expect(try await store.get("after")?.text == "2")
        // A fresh server: the old data is gone, and every connection of the pool works again.
        #expect(try await store.get("before") == nil)
        for i in 0..<20 { try await store.set("k\(i)", to: ByteBuffer(string: "\(i)"), ttl: nil) }
        #expect(try await store.get((0..<20).map { "k\($0)" }).map { $0?.text } == (0..<20).map { "\($0)" })
        await store.shutdown()
        _ = try await offThread { server.stop() }
    }

    /// A call on an idle connection writes its command itself; a large one only partly fits in the socket
    /// buffer, and the connection's thread must send the rest (and calls queued behind it after it).
    @Test func aLargeCommandOnAnIdleConnectionArrivesWhole() async throws {
        try await withOneConnection { store in
            try await store.ping()
            let large = ByteBuffer(bytes: (0..<(4 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) })
            async let write: Void = store.set("large", to: large, ttl: nil)
            async let small: Void = store.set("small", to: ByteBuffer(string: "s"), ttl: nil)
            try await write
            try await small
            #expect(try await store.get("large") == large)
            #expect(try await store.get("small")?.text == "s")
        }
    }

    /// A call on an idle connection polls for its reply on its own thread: a server on loopback answers within
    /// the poll, and the call completes there, with the right value.
    @Test func repliesOnLoopbackArriveWithinThePoll() async throws {
        // A generous poll: the machine running the tests may be busy.
        try await withOneConnection(polling: .milliseconds(5)) { store in
            for i in 0..<50 { try await store.set("k\(i)", to: ByteBuffer(string: "v\(i)"), ttl: nil) }
            for i in 0..<50 { #expect(try await store.get("k\(i)")?.text == "v\(i)") }
            let polls = store.pool.replyPolls
            #expect(polls.answered > 0, "\(polls)")
        }
    }

    /// A reply too large to arrive within the poll is read on by the connection's thread from where the poll
    /// stopped; calls queued meanwhile follow it in order.
    @Test func aReplyLongerThanThePollArrivesWhole() async throws {
        try await withOneConnection(polling: .microseconds(20)) { store in
            let large = ByteBuffer(bytes: (0..<(4 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 7) })
            try await store.set("large", to: large, ttl: nil)
            try await store.set("small", to: ByteBuffer(string: "s"), ttl: nil)
            for _ in 0..<5 {
                async let big = store.get("large")
                async let small = store.get("small")
                #expect(try await big == large)
                #expect(try await small?.text == "s")
            }
        }
    }

    /// A server slower than the poll: the call is handed to the connection's thread and still gets its reply.
    @Test func aSlowReplyIsHandedToTheConnectionThread() async throws {
        let (server, store) = try slowGetServer(replyDelay: .milliseconds(20))
        for _ in 0..<10 { #expect(try await store.get("k")?.text == "ok") }
        let polls = store.pool.replyPolls
        // The first call connects; of the others, those that find the connection idle poll and run out (a call
        // made while the thread is still finishing the previous one is simply queued), and after four in a row
        // the pool pauses polling. (A caller that a busy machine keeps off the processor for the server's delay
        // finds its reply already there, so a poll may be answered now and then.)
        #expect(polls.ranOut >= 1 && polls.ranOut < 9, "polls: \(polls)")
        await store.shutdown()
        server.stop()
    }

    /// A call handed to the connection's thread after its poll ran out, whose deadline then passes: the caller
    /// gets a timeout at its deadline, the reply is read and dropped when it comes, and the next calls on the
    /// connection get their own replies.
    @Test func aHandedOverCallThatTimesOutLeavesTheConnectionInStep() async throws {
        // The reply to "late" is held back until the call has timed out, so the call cannot have waited for it.
        let lateReplyMayGo = DispatchSemaphore(value: 0)
        let server = try ScriptedServer { command in
            guard command.count == 2, command[0] == "GET" else { return Array("-ERR unexpected\r\n".utf8) }
            if command[1] == "late" { lateReplyMayGo.wait() }
            return Array("$\(command[1].utf8.count)\r\n\(command[1])\r\n".utf8)
        }
        let store = RESPStore(configuration: configuration(port: server.port) {
            $0.poolSize = 1
            $0.commandTimeout = .seconds(5)
        })
        #expect(try await store.get("warm")?.text == "warm")
        let late = await CacheStoreDeadline.bounding(.milliseconds(5)) { () async throws(CacheStoreError) in
            try await store.get("late")
        }
        lateReplyMayGo.signal()
        #expect(late.failure?.kind == .timeout, "\(late)")
        for key in ["next", "after"] { #expect(try await store.get(key)?.text == key) }
        #expect(store.pool.replyPolls.ranOut >= 1, "\(store.pool.replyPolls)")
        await store.shutdown()
        server.stop()
    }

    @Test func aServerThatHangsUpMidWriteIsUnreachable() async throws {
        let server = try HangUpServer()
        let store = RESPStore(configuration: configuration(port: server.port) { $0.poolSize = 1 })
        let large = ByteBuffer(repeating: 0x61, count: 8 << 20)
        for _ in 0..<3 {
            let error = await storeError { () async throws(CacheStoreError) in try await store.set("k", to: large, ttl: nil) }
            #expect(error?.kind == .unreachable, "\(String(describing: error))")
        }
        await store.shutdown()
        server.stop()
    }

    @Test func shutdownDuringALargeWriteDoesNotRaiseSIGPIPE() async throws {
        // The write blocks (the peer never reads); shutdown(2) of the socket makes the next write fail with
        // EPIPE, which raises SIGPIPE — fatal to the process unless the writing thread blocks it.
        let silent = try SilentListener()
        let store = RESPStore(configuration: configuration(port: silent.port) {
            $0.poolSize = 1
            $0.commandTimeout = .seconds(30)
        })
        let large = ByteBuffer(repeating: 0x62, count: 16 << 20)
        let call = Task { () -> CacheStoreError? in
            do throws(CacheStoreError) {
                try await store.set("k", to: large, ttl: nil)
                return nil
            } catch {
                return error
            }
        }
        try await Task.sleep(for: .milliseconds(200))
        await store.shutdown()
        let error = await call.value
        #expect(error?.kind == .closed, "\(String(describing: error))")
    }

    @Test func queuedCommandsArePipelined() async throws {
        let (server, store) = try slowGetServer(replyDelay: .milliseconds(30))
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<40 {
                group.addTask {
                    let value = try await store.get("k\(i)")
                    #expect(value?.text == "ok")
                }
            }
            try await group.waitForAll()
        }
        let batches = server.batches
        #expect(batches.reduce(0, +) == 40)
        // One connection, and the server answers each read only after a delay: the commands queued meanwhile
        // must have gone out together.
        #expect((batches.max() ?? 0) > 1, "batches: \(batches)")
        await store.shutdown()
        server.stop()
    }

    @Test func repliesOfTheWrongTypeAreProtocolViolations() async throws {
        let server = try ScriptedServer { command in
            switch command.first {
            case "GET": Array(":12\r\n".utf8)
            case "MGET": Array("*1\r\n$1\r\na\r\n".utf8)
            case "INCR": Array("$2\r\n12\r\n".utf8)
            case "DEL": Array("-WRONGTYPE Operation against a key holding the wrong kind of value\r\n".utf8)
            case "SET": Array("*0\r\n".utf8)
            default: Array("-ERR unknown\r\n".utf8)
            }
        }
        let store = RESPStore(configuration: configuration(port: server.port) { $0.poolSize = 1 })
        let get = await storeError { () async throws(CacheStoreError) in _ = try await store.get("k") }
        #expect(get?.kind == .protocolViolation)
        #expect(get?.message.contains("GET answered an integer") == true, "\(String(describing: get))")
        let mget = await storeError { () async throws(CacheStoreError) in _ = try await store.get(["a", "b"]) }
        #expect(mget?.kind == .protocolViolation)
        let incr = await storeError { () async throws(CacheStoreError) in _ = try await store.increment("k") }
        #expect(incr?.kind == .protocolViolation)
        let set = await storeError { () async throws(CacheStoreError) in _ = try await store.setIfAbsent("k", to: ByteBuffer(), ttl: .seconds(1)) }
        #expect(set?.kind == .protocolViolation)
        let del = await storeError { () async throws(CacheStoreError) in _ = try await store.remove(["k"]) }
        #expect(del?.kind == .server)
        #expect(del?.message == "WRONGTYPE Operation against a key holding the wrong kind of value")
        // The connection is still in step after all of these.
        let again = await storeError { () async throws(CacheStoreError) in _ = try await store.get("k") }
        #expect(again?.kind == .protocolViolation)
        #expect(server.batches.reduce(0, +) == 6)
        await store.shutdown()
        server.stop()
    }

    @Test func bytesThatAreNotRESPAreAProtocolViolation() async throws {
        let server = try ScriptedServer { _ in Array("hello there\r\n".utf8) }
        let store = RESPStore(configuration: configuration(port: server.port) { $0.poolSize = 1 })
        let error = await storeError { () async throws(CacheStoreError) in _ = try await store.get("k") }
        #expect(error?.kind == .protocolViolation, "\(String(describing: error))")
        await store.shutdown()
        server.stop()
    }

    @Test func authenticatesAsANamedUser() async throws {
        let server = try await offThread {
            try ServerProcess.start(.redis, arguments: ["--user", "alice", "on", ">wonder land", "~*", "+@all"])
        }
        let good = try RESPStore(url: "redis://alice:wonder%20land@127.0.0.1:\(server.port)", poolSize: 1)
        try await good.set("alice-key", to: ByteBuffer(string: "hi"), ttl: .seconds(5))
        #expect(try await good.get("alice-key")?.text == "hi")
        await good.shutdown()

        let wrongUser = try RESPStore(url: "redis://bob:wonder%20land@127.0.0.1:\(server.port)", poolSize: 1)
        let error = await storeError { () async throws(CacheStoreError) in _ = try await wrongUser.get("alice-key") }
        #expect(error?.kind == .server)
        #expect(error?.message.contains("authentication") == true)
        await wrongUser.shutdown()
        _ = try await offThread { server.stop() }
    }

    @Test func aReleasedStoreStopsItsThreads() async throws {
        let silent = try SilentListener()
        var store: RESPStore? = RESPStore(configuration: configuration(port: silent.port) { $0.poolSize = 3 })
        weak let weakStore = store
        let pool = try #require(store?.pool)
        #expect(pool.runningThreadCount == 3)
        store = nil
        #expect(weakStore == nil)
        let deadline = ContinuousClock.now + .seconds(5)
        while pool.runningThreadCount > 0 && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(5))
        }
        #expect(pool.runningThreadCount == 0)
    }

    @Test func shutdownWaitsForTheThreads() async throws {
        let server = try ScriptedServer { _ in Array("+PONG\r\n".utf8) }
        let store = RESPStore(configuration: configuration(port: server.port) { $0.poolSize = 3 })
        try await store.ping()
        await store.shutdown()
        #expect(store.pool.runningThreadCount == 0)
        server.stop()
    }
}

extension Result {
    /// The error of a failure; nil for a success.
    fileprivate var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
