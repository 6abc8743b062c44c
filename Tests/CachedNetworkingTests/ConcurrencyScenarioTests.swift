import CachedNetworking
import CachedNetworkingTesting
import HTTPTypes
import NIOCore
import Testing

@Suite("Single flight and the cross-process lease")
struct ConcurrencyScenarioTests {
    @Test("1000 concurrent identical misses make one origin request")
    func singleFlight() async throws {
        let h = try await Harness.make()
        h.serve("/hot", [("Cache-Control", "max-age=60")], body: "hot", delay: .milliseconds(300))
        let sources = try await withThrowingTaskGroup(of: CachedResponse.Source.self) { group in
            for _ in 0..<1_000 {
                group.addTask { try await h.get("/hot").source }
            }
            var sources: [CachedResponse.Source] = []
            for try await source in group { sources.append(source) }
            return sources
        }
        #expect(h.origin.count("/hot") == 1)
        #expect(sources.filter { $0 == .network }.count == 1)
        #expect(sources.allSatisfy { $0 == .network || $0 == .coalesced || $0 == .cache })
        #expect(h.metrics.value(CachedNetworkingMetrics.coalescedWaits) > 0)
        await h.stop()
    }

    @Test("coalesced requests carry the collapsed parameter")
    func collapsedStatus() async throws {
        let h = try await Harness.make()
        h.serve("/c", [("Cache-Control", "max-age=60")], delay: .milliseconds(200))
        async let first = h.get("/c")
        async let second = h.get("/c")
        let answers = try await [first, second]
        let follower = try #require(answers.first { $0.source == .coalesced })
        #expect(follower.cacheStatus.collapsed)
        await h.stop()
    }

    @Test("requests with different credentials are not coalesced")
    func credentialsNotCoalesced() async throws {
        let h = try await Harness.make()
        h.serve("/me", [("Cache-Control", "max-age=60")], delay: .milliseconds(200))
        async let alice = h.get("/me", [("Authorization", "Bearer alice")])
        async let bob = h.get("/me", [("Authorization", "Bearer bob")])
        _ = try await [alice, bob]
        #expect(h.origin.count("/me") == 2)
        await h.stop()
    }

    @Test("a request that loses the lease takes the holder's stored response")
    func leaseWaiter() async throws {
        let h = try await Harness.make()
        h.serve("/l", [("Cache-Control", "max-age=60")], body: "from-holder", delay: .milliseconds(200))
        let key = entryKey("http://127.0.0.1:\(h.origin.port)/l")
        // Another process holds the lease for this miss.
        #expect(try await h.store.setIfAbsent(key + "#lock", to: ByteBuffer(string: "other"), ttl: .seconds(30)))
        async let waiter = h.get("/l")
        // The holder: fetches (ignoring the lease, as a reload does) and stores the response.
        let holder = try await h.sibling().run(h.origin.request("/l"), policy: .reloadIgnoringLocalCacheData)
        let waited = try await waiter
        #expect(holder.source == .network)
        #expect(waited.source == .coalesced)
        #expect(waited.text == "from-holder")
        #expect(h.origin.count("/l") == 1)
        #expect(h.metrics.value(CachedNetworkingMetrics.coalescedWaits, [("scope", "lease")]) == 1)
        await h.stop()
    }

    @Test("a holder that stores and releases the lease between a waiter's two reads: the waiter takes its response")
    func leaseReleasedBetweenReads() async throws {
        // A wait long enough that only the race decides the outcome, even on a busy machine.
        let h = try await Harness.make {
            $0.leaseWait = .seconds(60)
            $0.storeTimeout = .seconds(60)  // the hooked store read runs another fetch inside it
        }
        h.serve("/race", [("Cache-Control", "max-age=60")], body: "from-holder")
        let key = entryKey("http://127.0.0.1:\(h.origin.port)/race")
        #expect(try await h.store.setIfAbsent(key + "#lock", to: ByteBuffer(string: "other"), ttl: .seconds(30)))
        // The waiter polls: the stored response (none yet), then the lease. The other process finishes in
        // between: it stores its response, then releases the lease.
        let lockKey = key + "#lock"
        let finished = Gate()
        let store = HookedStore(base: h.store, before: { operation, keys in
            guard operation == .get, keys == [lockKey], !finished.isOpen else { return }
            finished.open()
            _ = try? await h.sibling().run(h.origin.request("/race"), policy: .reloadIgnoringLocalCacheData)
            _ = try? await h.store.remove([lockKey])
        })
        let waiter = CachedNetworking(store: store, transport: h.transport, configuration: h.cache.configuration)
        let answer = try await waiter.run(h.origin.request("/race"))
        #expect(store.count(.get, [lockKey]) > 0)
        #expect(answer.source == .coalesced)
        #expect(answer.text == "from-holder")
        #expect(h.origin.count("/race") == 1)
        await h.stop()
    }

    @Test("when the lease holder never stores, the waiter fetches itself after the bounded wait")
    func leaseHolderDied() async throws {
        let h = try await Harness.make { $0.leaseWait = .milliseconds(100) }
        h.serve("/dead", [("Cache-Control", "max-age=60")])
        let key = entryKey("http://127.0.0.1:\(h.origin.port)/dead")
        #expect(try await h.store.setIfAbsent(key + "#lock", to: ByteBuffer(string: "dead"), ttl: .seconds(30)))
        let clock = ContinuousClock()
        let start = clock.now
        let answer = try await h.get("/dead")
        #expect(answer.source == .network)
        #expect(clock.now - start >= .milliseconds(100))
        #expect(h.origin.count("/dead") == 1)
        await h.stop()
    }

    @Test("the lease is released after the fetch")
    func leaseReleased() async throws {
        let h = try await Harness.make()
        h.serve("/rel", [("Cache-Control", "max-age=60")])
        _ = try await h.get("/rel")
        #expect(!h.store.keys.contains { $0.hasSuffix("#lock") })
        #expect(h.store.count(of: .setIfAbsent) == 1)
        await h.stop()
    }
}
