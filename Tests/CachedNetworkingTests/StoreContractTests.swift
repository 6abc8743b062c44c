import CachedTestSupport
import Foundation
import NIOCore
import Testing

@testable import CachedNetworking

/// What every ``CacheStore`` must do, run against the memory store, a live `cached-server` and a live
/// `redis-server` (both started for the suite on free loopback ports).
@Suite(.liveServers)
struct StoreContractTests {
    @Test(arguments: StoreUnderTest.allCases)
    func getMissesThenHits(_ kind: StoreUnderTest) async throws {
        try await withStore(kind) { f in
            #expect(try await f.store.get(f.key("greeting")) == nil)
            try await f.store.set(f.key("greeting"), to: ByteBuffer(string: "hello"), ttl: nil)
            #expect(try await f.store.get(f.key("greeting"))?.text == "hello")
            #expect(try await f.store.get(f.key("other")) == nil)
        }
    }

    @Test(arguments: StoreUnderTest.allCases)
    func valuesAreBinarySafe(_ kind: StoreUnderTest) async throws {
        try await withStore(kind) { f in
            let awkward = ByteBuffer(bytes: [0, 13, 10, 0, 255, 36, 42, 13, 10, 13, 10, 0])
            try await f.store.set(f.key("awkward"), to: awkward, ttl: nil)
            #expect(try await f.store.get(f.key("awkward")) == awkward)

            try await f.store.set(f.key("empty"), to: ByteBuffer(), ttl: nil)
            #expect(try await f.store.get(f.key("empty")) == ByteBuffer())

            var bytes = [UInt8](repeating: 0, count: 1 << 20)
            for i in stride(from: 0, to: bytes.count - 1, by: 509) {
                bytes[i] = 13
                bytes[i + 1] = 10
            }
            for i in stride(from: 3, to: bytes.count, by: 257) { bytes[i] = UInt8(truncatingIfNeeded: i) }
            let large = ByteBuffer(bytes: bytes)
            try await f.store.set(f.key("large"), to: large, ttl: .seconds(60))
            let readBack = try await f.store.get(f.key("large"))
            #expect(readBack?.readableBytes == 1 << 20)
            #expect(readBack == large)
        }
    }

    @Test(arguments: StoreUnderTest.allCases)
    func keysAreComparedByteForByte(_ kind: StoreUnderTest) async throws {
        try await withStore(kind) { f in
            // Canonically equivalent, different bytes: Redis keeps them apart, so every store must.
            let composed = f.key("caf\u{E9}")
            let decomposed = f.key("cafe\u{301}")
            try await f.store.set(composed, to: ByteBuffer(string: "composed"), ttl: nil)
            #expect(try await f.store.get(decomposed) == nil)
            try await f.store.set(decomposed, to: ByteBuffer(string: "decomposed"), ttl: nil)
            #expect(try await f.store.get(composed)?.text == "composed")
            #expect(try await f.store.get(decomposed)?.text == "decomposed")

            let spaced = f.key("a key\r\nwith\0 bytes")
            try await f.store.set(spaced, to: ByteBuffer(string: "ok"), ttl: nil)
            #expect(try await f.store.get(spaced)?.text == "ok")
            #expect(try await f.store.get(f.key("a key")) == nil)
        }
    }

    @Test(arguments: StoreUnderTest.allCases)
    func setReplacesValueAndTTL(_ kind: StoreUnderTest) async throws {
        try await withStore(kind) { f in
            let key = f.key("k")
            try await f.store.set(key, to: ByteBuffer(string: "one"), ttl: nil)
            try await f.store.set(key, to: ByteBuffer(string: "two"), ttl: nil)
            #expect(try await f.store.get(key)?.text == "two")

            // A set without a TTL removes the earlier TTL.
            try await f.store.set(key, to: ByteBuffer(string: "short"), ttl: .milliseconds(150))
            try await f.store.set(key, to: ByteBuffer(string: "forever"), ttl: nil)
            try await f.pass(.milliseconds(400))
            #expect(try await f.store.get(key)?.text == "forever")

            // A set with a TTL gives a key that had none an expiry.
            try await f.store.set(key, to: ByteBuffer(string: "mortal"), ttl: .milliseconds(100))
            #expect(try await f.expires(key, after: .milliseconds(100)))
        }
    }

    @Test(arguments: StoreUnderTest.allCases)
    func entriesExpireAfterTheirTTL(_ kind: StoreUnderTest) async throws {
        try await withStore(kind) { f in
            let key = f.key("ttl")
            let start = ContinuousClock.now
            try await f.store.set(key, to: ByteBuffer(string: "v"), ttl: .milliseconds(200))
            let early = try await f.store.get(key)
            if f.clock != nil || ContinuousClock.now - start < .milliseconds(150) {
                #expect(early?.text == "v")
            }
            if let clock = f.clock {
                clock.advance(by: .milliseconds(199))
                #expect(try await f.store.get(key)?.text == "v")
            }
            #expect(try await f.expires(key, after: .milliseconds(200)))
            #expect(try await f.store.get([key]) == [nil])

            // A long TTL does not expire early.
            try await f.store.set(f.key("long"), to: ByteBuffer(string: "v"), ttl: .seconds(3600))
            try await f.pass(.milliseconds(250))
            #expect(try await f.store.get(f.key("long"))?.text == "v")
        }
    }

    @Test(arguments: StoreUnderTest.allCases)
    func setIfAbsentStoresOnlyOnce(_ kind: StoreUnderTest) async throws {
        try await withStore(kind) { f in
            let key = f.key("lock")
            #expect(try await f.store.setIfAbsent(key, to: ByteBuffer(string: "first"), ttl: .seconds(60)))
            #expect(try await f.store.setIfAbsent(key, to: ByteBuffer(string: "second"), ttl: .seconds(60)) == false)
            #expect(try await f.store.get(key)?.text == "first")

            // Its TTL applies, and once expired the key is free again.
            let brief = f.key("brief-lock")
            #expect(try await f.store.setIfAbsent(brief, to: ByteBuffer(string: "first"), ttl: .milliseconds(150)))
            #expect(try await f.expires(brief, after: .milliseconds(150)))
            #expect(try await f.store.setIfAbsent(brief, to: ByteBuffer(string: "third"), ttl: .seconds(60)))
            #expect(try await f.store.get(brief)?.text == "third")

            // A key stored by set counts as present.
            try await f.store.set(f.key("plain"), to: ByteBuffer(string: "x"), ttl: nil)
            #expect(try await f.store.setIfAbsent(f.key("plain"), to: ByteBuffer(string: "y"), ttl: .seconds(1)) == false)
            #expect(try await f.store.get(f.key("plain"))?.text == "x")
        }
    }

    @Test(arguments: StoreUnderTest.allCases)
    func getManyKeepsOrderAndGaps(_ kind: StoreUnderTest) async throws {
        try await withStore(kind) { f in
            try await f.store.set(f.key("a"), to: ByteBuffer(string: "A"), ttl: nil)
            try await f.store.set(f.key("c"), to: ByteBuffer(string: "C"), ttl: .seconds(60))
            let values = try await f.store.get([f.key("a"), f.key("b"), f.key("c"), f.key("a"), f.key("d")])
            #expect(values.map { $0?.text } == ["A", nil, "C", "A", nil])
            #expect(try await f.store.get([String]()) == [])
            #expect(try await f.store.get([f.key("nothing")]) == [nil])
        }
    }

    @Test(arguments: StoreUnderTest.allCases)
    func removeCountsKeysThatExisted(_ kind: StoreUnderTest) async throws {
        try await withStore(kind) { f in
            for name in ["a", "b", "c"] {
                try await f.store.set(f.key(name), to: ByteBuffer(string: name), ttl: nil)
            }
            #expect(try await f.store.remove([f.key("a"), f.key("missing"), f.key("b"), f.key("a")]) == 2)
            #expect(try await f.store.get([f.key("a"), f.key("b"), f.key("c")]).map { $0?.text } == [nil, nil, "c"])
            #expect(try await f.store.remove([f.key("a")]) == 0)
            #expect(try await f.store.remove([]) == 0)

            // An expired key is not counted.
            try await f.store.set(f.key("brief"), to: ByteBuffer(string: "x"), ttl: .milliseconds(100))
            #expect(try await f.expires(f.key("brief"), after: .milliseconds(100)))
            #expect(try await f.store.remove([f.key("brief"), f.key("c")]) == 1)
        }
    }

    @Test(arguments: StoreUnderTest.allCases)
    func incrementCountsFromZeroAndRejectsText(_ kind: StoreUnderTest) async throws {
        try await withStore(kind) { f in
            #expect(try await f.store.increment(f.key("n")) == 1)
            #expect(try await f.store.increment(f.key("n")) == 2)
            #expect(try await f.store.get(f.key("n"))?.text == "2")

            try await f.store.set(f.key("m"), to: ByteBuffer(string: "41"), ttl: nil)
            #expect(try await f.store.increment(f.key("m")) == 42)
            try await f.store.set(f.key("neg"), to: ByteBuffer(string: "-5"), ttl: nil)
            #expect(try await f.store.increment(f.key("neg")) == -4)

            for text in ["abc", "", " 1", "1.5", "9223372036854775808"] {
                try await f.store.set(f.key("t"), to: ByteBuffer(string: text), ttl: nil)
                let error = await storeError { () async throws(CacheStoreError) in _ = try await f.store.increment(f.key("t")) }
                #expect(error?.kind == .server, "INCR of \(text.debugDescription)")
                #expect(error?.message.contains("not an integer") == true, "\(String(describing: error))")
                #expect(try await f.store.get(f.key("t"))?.text == text)
            }

            try await f.store.set(f.key("max"), to: ByteBuffer(string: "9223372036854775807"), ttl: nil)
            let overflow = await storeError { () async throws(CacheStoreError) in _ = try await f.store.increment(f.key("max")) }
            #expect(overflow?.kind == .server)

            // INCR keeps the TTL: the key still expires.
            let start = ContinuousClock.now
            try await f.store.set(f.key("ttl"), to: ByteBuffer(string: "7"), ttl: .milliseconds(500))
            let incremented = try await f.store.increment(f.key("ttl"))
            if f.clock != nil || ContinuousClock.now - start < .milliseconds(400) {
                #expect(incremented == 8)
            }
            #expect(try await f.expires(f.key("ttl"), after: .milliseconds(500)))
        }
    }

    @Test(arguments: StoreUnderTest.allCases)
    func concurrentCallsGiveExactResults(_ kind: StoreUnderTest) async throws {
        try await withStore(kind) { f in
            let tasks = 200
            let rounds = 25  // two operations per round: 50 per task
            let shared = f.key("shared-counter")
            try await withThrowingTaskGroup(of: Void.self) { group in
                for t in 0..<tasks {
                    group.addTask {
                        let own = f.key("task-\(t)")
                        for r in 0..<rounds {
                            let value = ByteBuffer(string: "\(t):\(r)")
                            try await f.store.set(own, to: value, ttl: .seconds(60))
                            _ = try await f.store.increment(shared)
                            if r % 5 == 4 {
                                let got = try await f.store.get(own)
                                #expect(got == value)
                            }
                        }
                    }
                }
                try await group.waitForAll()
            }
            #expect(try await f.store.get(shared)?.text == String(tasks * rounds))
            let keys = (0..<tasks).map { f.key("task-\($0)") }
            let values = try await f.store.get(keys)
            #expect(values.map { $0?.text } == (0..<tasks).map { "\($0):\(rounds - 1)" })
        }
    }

    @Test(arguments: StoreUnderTest.allCases)
    func callsAfterShutdownFailAsClosed(_ kind: StoreUnderTest) async throws {
        try await withStore(kind) { f in
            try await f.store.set(f.key("k"), to: ByteBuffer(string: "v"), ttl: nil)
            await f.store.shutdown()
            let error = await storeError { () async throws(CacheStoreError) in _ = try await f.store.get(f.key("k")) }
            #expect(error?.kind == .closed)
            let setError = await storeError { () async throws(CacheStoreError) in
                try await f.store.set(f.key("k"), to: ByteBuffer(string: "v"), ttl: nil)
            }
            #expect(setError?.kind == .closed)
        }
    }

    // MARK: networked stores

    @Test(arguments: StoreUnderTest.networked)
    func urlDatabaseSelectsADatabase(_ kind: StoreUnderTest) async throws {
        let server = try LiveServersTrait.server(kind.serverKind!)
        let key = "db-test:\(UUID().uuidString)"
        let db3 = try RESPStore(url: "redis://127.0.0.1:\(server.port)/3", poolSize: 1)
        let db0 = try RESPStore(url: "redis://127.0.0.1:\(server.port)/0", poolSize: 1)
        let db3Again = try RESPStore(url: "redis://127.0.0.1:\(server.port)/3", poolSize: 1)
        do {
            try await db3.set(key, to: ByteBuffer(string: "in three"), ttl: .seconds(60))
            #expect(try await db0.get(key) == nil)
            #expect(try await db3Again.get(key)?.text == "in three")
            try await db0.set(key, to: ByteBuffer(string: "in zero"), ttl: .seconds(60))
            #expect(try await db3.get(key)?.text == "in three")
            #expect(try await db3.remove([key]) == 1)
            #expect(try await db0.get(key)?.text == "in zero")
            #expect(try await db0.remove([key]) == 1)
        } catch {
            Issue.record(error)
        }
        await db3.shutdown()
        await db0.shutdown()
        await db3Again.shutdown()
    }

    @Test(arguments: StoreUnderTest.networked)
    func authenticatesWithPasswordAndRejectsAWrongOne(_ kind: StoreUnderTest) async throws {
        let server = try await offThread { try ServerProcess.start(kind.serverKind!, arguments: ["--requirepass", "s3cr:t@"]) }
        let base = "127.0.0.1:\(server.port)"
        for url in ["redis://:s3cr%3At%40@\(base)", "redis://default:s3cr%3At%40@\(base)/1", "redis://s3cr%3At%40@\(base)"] {
            let store = try RESPStore(url: url, poolSize: 1)
            do {
                try await store.ping()
                try await store.set("auth-test", to: ByteBuffer(string: "ok"), ttl: .seconds(5))
                #expect(try await store.get("auth-test")?.text == "ok", "\(url)")
            } catch {
                Issue.record("\(url): \(error)")
            }
            await store.shutdown()
        }

        let wrong = try RESPStore(url: "redis://:nope@\(base)", poolSize: 1)
        let error = await storeError { () async throws(CacheStoreError) in _ = try await wrong.get("k") }
        #expect(error?.kind == .server)
        #expect(error?.message.contains("authentication") == true, "\(String(describing: error))")
        #expect(error?.message.contains("WRONGPASS") == true || error?.message.contains("invalid password") == true)
        await wrong.shutdown()

        let anonymous = try RESPStore(url: "redis://\(base)", poolSize: 1)
        let noAuth = await storeError { () async throws(CacheStoreError) in _ = try await anonymous.get("k") }
        #expect(noAuth?.kind == .server)
        #expect(noAuth?.message.hasPrefix("NOAUTH") == true, "\(String(describing: noAuth))")
        await anonymous.shutdown()
        _ = try await offThread { server.stop() }
    }
}
