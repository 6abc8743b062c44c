// The testing sample of docs/sdk.md, as the docs show it: swift-testing runs its tests with the others
// (``DocsSampleTests`` checks that the sample is here, with its imports).
import CachedNetworking
import CachedNetworkingTesting
import HTTPTypes
import Testing

// docs/sdk.md, Testing with the fakes

@Test func itemsAreCachedAndTheCacheFailsOpen() async throws {
    let clock = ManualCacheClock()
    let transport = FakeHTTPTransport()
    transport.script("https://api.example.com/items", replies: [
        .init(status: .ok, headerFields: [.cacheControl: "max-age=60"], body: "[]"),
    ])
    var configuration = CachedNetworking.Configuration()
    configuration.clock = clock
    let store = InMemoryCacheStore(clock: clock)
    let cache = CachedNetworking(store: store, transport: transport, configuration: configuration)
    let request = HTTPRequest(method: .get, scheme: "https", authority: "api.example.com", path: "/items")

    #expect(try await cache.run(request).source == .network)
    #expect(try await cache.run(request).source == .cache)
    clock.advance(by: .seconds(61))                  // now stale
    store.inject(.init(operations: [.get]))          // and the store is down: the cache fails open
    #expect(try await cache.run(request).source == .network)
    #expect(transport.requestCount(for: "https://api.example.com/items") == 2)
}

@Test func aRepositoryHoldsItsValueForItsLifetime() async throws {
    let clock = ManualCacheClock()
    let transport = FakeHTTPTransport()
    transport.script("https://api.example.com/count", replies: [.init(body: "1"), .init(body: "2")])
    var configuration = CachedNetworking.Configuration()
    configuration.clock = clock
    let cache = CachedNetworking(store: InMemoryCacheStore(clock: clock), transport: transport, configuration: configuration)
    let count = CachedRepository<Int>(
        cache, request: HTTPRequest(method: .get, scheme: "https", authority: "api.example.com", path: "/count"),
        lifetime: .seconds(30))

    #expect(try await count.value() == 1)
    clock.advance(by: .seconds(29))
    #expect(try await count.read().source == .held)
    clock.advance(by: .seconds(1))
    #expect(try await count.value() == 2)
}
