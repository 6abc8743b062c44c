@testable import CachedNetworking
import CachedNetworkingTesting
import CachedOriginSupport
import HTTPTypes
import NIOCore
import Synchronization
import Testing

/// The cache over a `MemoryStore`, which keeps decoded entries beside their bytes: hits reuse the decoded form,
/// and must answer exactly as the bytes would.
@Suite("Scenarios over MemoryStore (decoded entries)")
struct MemoryStoreScenarioTests {
    struct Setup {
        let origin: OriginServer
        let clock: ManualCacheClock
        let store: MemoryStore
        let metrics: TestMetrics
        let cache: CachedNetworking

        func serve(_ path: String, _ handler: @escaping @Sendable (OriginServer.Received) -> OriginServer.Reply) {
            origin.route(path, dated: clock, handler)
        }

        func get(_ path: String) async throws -> CachedResponse {
            try await cache.run(origin.request(path))
        }
    }

    func make() async throws -> Setup {
        let origin = try await OriginServer.start()
        let clock = ManualCacheClock()
        let store = MemoryStore(cleanupInterval: nil)
        let metrics = TestMetrics()
        let configuration = testConfiguration(clock: clock, metrics: metrics)
        let cache = CachedNetworking(store: store, transport: sharedTransport, configuration: configuration)
        return Setup(origin: origin, clock: clock, store: store, metrics: metrics, cache: cache)
    }

    @Test("a hit comes from the decoded entry, with Age, Cache-Status and the entry identity")
    func hit() async throws {
        let s = try await make()
        s.serve("/m") { _ in .init(headers: [("Cache-Control", "max-age=60"), ("ETag", "\"v1\"")], body: "stored body") }
        let first = try await s.get("/m")
        #expect(first.source == .network)
        let key = try #require(first.entry?.key)
        #expect(try s.store.getDecoded(key)?.decoded != nil)
        s.clock.advance(by: .seconds(10))
        let second = try await s.get("/m")
        #expect(second.source == .cache)
        #expect(String(buffer: second.body) == "stored body")
        #expect(second.headerFields[.age] == "10")
        #expect(second.cacheStatus.hit && second.cacheStatus.timeToLive == 50)
        #expect(second.headerFields[.cacheStatus] == "cached; hit; ttl=50")
        #expect(second.entry == first.entry)
        #expect(s.origin.count("/m") == 1)
        await s.origin.stop()
    }

    @Test("bytes written through CacheStore replace the decoded entry")
    func overwrittenBytes() async throws {
        let s = try await make()
        s.serve("/o") { _ in .init(headers: [("Cache-Control", "max-age=60")], body: "fresh") }
        let key = try #require(try await s.get("/o").entry?.key)
        try await s.store.set(key, to: ByteBuffer(string: "garbage"), ttl: nil)
        #expect(try s.store.getDecoded(key)?.decoded == nil)
        #expect(try await s.get("/o").source == .network)
        #expect(s.metrics.value(CachedNetworkingMetrics.corruptEntries) == 1)
        #expect(try await s.get("/o").source == .cache)
        await s.origin.stop()
    }

    @Test("a stale entry is revalidated with its validator and the 304 is merged")
    func revalidation() async throws {
        let s = try await make()
        s.serve("/r") { received in
            if received.header("If-None-Match") == "\"v1\"" {
                return .init(status: 304, headers: [("Cache-Control", "max-age=30"), ("ETag", "\"v1\"")])
            }
            return .init(headers: [("Cache-Control", "max-age=10"), ("ETag", "\"v1\"")], body: "payload")
        }
        _ = try await s.get("/r")
        s.clock.advance(by: .seconds(20))
        let validated = try await s.get("/r")
        #expect(validated.source == .revalidated)
        #expect(String(buffer: validated.body) == "payload")
        s.clock.advance(by: .seconds(20))
        let hit = try await s.get("/r")
        #expect(hit.source == .cache)
        #expect(hit.headerFields[.cacheControl] == "max-age=30")
        #expect(hit.cacheStatus.timeToLive == 10)
        #expect(s.origin.count("/r") == 2)
        await s.origin.stop()
    }

    @Test("stale-while-revalidate serves the decoded entry and refreshes it in the background")
    func staleWhileRevalidate() async throws {
        let s = try await make()
        s.serve("/s") { _ in .init(headers: [("Cache-Control", "max-age=10, stale-while-revalidate=60")], body: "v") }
        _ = try await s.get("/s")
        s.clock.advance(by: .seconds(15))
        let stale = try await s.get("/s")
        #expect(stale.source == .stale)
        #expect(stale.headerFields[.age] == "15")
        await s.cache.waitForBackgroundRefreshes()
        #expect(s.origin.count("/s") == 2)
        #expect(try await s.get("/s").source == .cache)
        await s.origin.stop()
    }
}

@Suite("SingleFlight")
struct SingleFlightTests {
    @Test("followers of a cancelled leader run the operation again")
    func cancelledLeader() async throws {
        let flights = SingleFlight<Int>()
        let runs = RunCount()
        let leader = Task {
            await flights.run("k") {
                runs.count.withLock { $0 += 1 }
                try? await Task.sleep(for: .seconds(10))
                return -1
            }
        }
        while !flights.isRunning("k") { await Task.yield() }
        let follower = Task {
            await flights.run("k") {
                runs.count.withLock { $0 += 1 }
                return 7
            }
        }
        try await Task.sleep(for: .milliseconds(50))
        leader.cancel()
        #expect(await leader.value == (-1, true))
        let (value, led) = await follower.value
        #expect(value == 7 && led)
        #expect(runs.count.withLock { $0 } == 2)
    }
}

final class RunCount: Sendable {
    let count = Mutex(0)
}
