import CachedNetworking
import CachedNetworkingTesting
import Foundation
import HTTPTypes
import Testing

@Suite("One clock for the SDK")
struct ClockTests {
    @Test("one manual clock moves the cache's freshness, MemoryStore's TTLs and a repository's lifetime together")
    func oneManualClock() async throws {
        let clock = ManualCacheClock()
        let store = MemoryStore(cleanupInterval: nil, clock: clock)
        let transport = FakeHTTPTransport()
        transport.script("https://api.example.com/n", replies: [
            .init(headerFields: [.cacheControl: "max-age=60"], body: "1"),
            .init(headerFields: [.cacheControl: "max-age=60"], body: "2"),
        ])
        var configuration = CachedNetworking.Configuration()
        configuration.clock = clock
        configuration.staleRetention = .zero
        let cache = CachedNetworking(store: store, transport: transport, configuration: configuration)
        let number = CachedRepository<Int>(
            cache, request: HTTPRequest(method: .get, scheme: "https", authority: "api.example.com", path: "/n"),
            lifetime: .seconds(10))
        #expect(try await number.read().source == .origin)
        clock.advance(by: .seconds(9))
        #expect(try await number.read().source == .held)
        clock.advance(by: .seconds(1))
        #expect(try await number.read().source == .cache)
        let entries = store.count
        clock.advance(by: .seconds(51))
        // The response's TTL in the store (its freshness, no retention) has passed on the same clock.
        #expect(store.removeExpired() >= 1)
        #expect(store.count < entries)
        let read = try await number.read()
        #expect(read.value == 2)
        #expect(read.source == .origin)
        await store.shutdown()
    }

    @Test("FailOpenStore's cool-down runs on a manual clock")
    func failOpenCoolDown() async throws {
        let clock = ManualCacheClock()
        let base = InMemoryCacheStore(clock: clock)
        let breaker = FailOpenStore(wrapping: base, failureThreshold: 1, coolDown: .seconds(5), clock: clock)
        base.inject(.init(operations: [.get], count: 1))
        await #expect(throws: CacheStoreError.self) { try await breaker.get("k") }
        #expect(breaker.state.isTripped)
        clock.advance(by: .seconds(4))
        await #expect(throws: CacheStoreError.self) { try await breaker.get("k") }
        #expect(base.count(of: .get) == 1)
        clock.advance(by: .seconds(1))
        #expect(try await breaker.get("k") == nil)
        #expect(!breaker.state.isTripped)
    }

    @Test("a manual clock's uptime follows advance and set; a clock that gives only now() gets one from it")
    func uptime() {
        let clock = ManualCacheClock()
        #expect(clock.uptime() == .zero)
        clock.advance(by: .milliseconds(1_500))
        #expect(clock.uptime() == .milliseconds(1_500))
        clock.set(to: clock.now().addingTimeInterval(-0.5))
        #expect(clock.uptime() == .seconds(1))

        struct WallOnly: CacheClock {
            func now() -> Date { Date(timeIntervalSince1970: 100.25) }
        }
        #expect(WallOnly().uptime() == .milliseconds(100_250))
        let system = SystemCacheClock()
        let first = system.uptime()
        #expect(system.uptime() >= first)
    }
}
