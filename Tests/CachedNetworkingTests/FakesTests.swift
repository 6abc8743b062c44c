import CachedNetworking
import CachedNetworkingTesting
import HTTPTypes
import NIOCore
import Testing

@Suite("The testing fakes")
struct FakesTests {
    @Test("InMemoryCacheStore expires entries on its clock")
    func storeExpiry() async throws {
        let clock = ManualCacheClock()
        let store = InMemoryCacheStore(clock: clock)
        try await store.set("k", to: ByteBuffer(string: "v"), ttl: .seconds(10))
        clock.advance(by: .seconds(9))
        #expect(try await store.get("k") == ByteBuffer(string: "v"))
        clock.advance(by: .seconds(1))
        #expect(try await store.get("k") == nil)
    }

    @Test("InMemoryCacheStore setIfAbsent takes a free key once")
    func storeSetIfAbsent() async throws {
        let clock = ManualCacheClock()
        let store = InMemoryCacheStore(clock: clock)
        #expect(try await store.setIfAbsent("lock", to: ByteBuffer(string: "a"), ttl: .seconds(5)))
        #expect(try await !store.setIfAbsent("lock", to: ByteBuffer(string: "b"), ttl: .seconds(5)))
        clock.advance(by: .seconds(5))
        #expect(try await store.setIfAbsent("lock", to: ByteBuffer(string: "c"), ttl: .seconds(5)))
    }

    @Test("InMemoryCacheStore increments decimal text like INCR and rejects other values")
    func storeIncrement() async throws {
        let store = InMemoryCacheStore()
        #expect(try await store.increment("n") == 1)
        #expect(try await store.increment("n") == 2)
        #expect(try await store.get("n") == ByteBuffer(string: "2"))
        try await store.set("s", to: ByteBuffer(string: "x"), ttl: nil)
        await #expect(throws: CacheStoreError.self) { try await store.increment("s") }
    }

    @Test("InMemoryCacheStore get of many keys and remove")
    func storeManyAndRemove() async throws {
        let store = InMemoryCacheStore()
        try await store.set("a", to: ByteBuffer(string: "1"), ttl: nil)
        #expect(try await store.get(["a", "b"]) == [ByteBuffer(string: "1"), nil])
        #expect(try await store.remove(["a", "b"]) == 1)
        #expect(store.keys.isEmpty)
    }

    @Test("InMemoryCacheStore faults fail the chosen operations the chosen number of times")
    func storeFaults() async throws {
        let store = InMemoryCacheStore()
        store.inject(.init(operations: [.get], error: CacheStoreError(.timeout, "t"), count: 2))
        try await store.set("a", to: ByteBuffer(string: "1"), ttl: nil)
        for _ in 0..<2 {
            await #expect(throws: CacheStoreError(.timeout, "t")) { try await store.get("a") }
        }
        #expect(try await store.get("a") != nil)
        #expect(store.count(of: .get) == 3)
    }

    @Test("InMemoryCacheStore refuses calls after shutdown")
    func storeShutdown() async throws {
        let store = InMemoryCacheStore()
        await store.shutdown()
        await #expect(throws: CacheStoreError.self) { try await store.get("a") }
    }

    @Test("FakeHTTPTransport plays replies in order, repeats the last, and logs requests")
    func transportScript() async throws {
        let transport = FakeHTTPTransport()
        transport.script("https://API.example.com/x", replies: [.init(body: "one"), .init(status: .notFound, body: "two")])
        let request = HTTPRequest(method: .get, scheme: "https", authority: "api.example.com", path: "/x")
        #expect(String(buffer: try await transport.send(request, body: nil).body) == "one")
        #expect(try await transport.send(request, body: nil).response.status == .notFound)
        #expect(try await transport.send(request, body: nil).response.status == .notFound)
        #expect(transport.requestCount(for: "https://api.example.com/x") == 3)
        #expect(transport.requests.first?.request.method == .get)
    }

    @Test("FakeHTTPTransport fails unscripted requests and scripted failures")
    func transportFailures() async throws {
        let transport = FakeHTTPTransport()
        let request = HTTPRequest(method: .get, scheme: "https", authority: "a.example", path: "/")
        await #expect(throws: FakeHTTPTransport.Unscripted.self) { try await transport.send(request, body: nil) }
        transport.script("https://a.example/", replies: [.failure(FakeHTTPTransport.ConnectionRefused())])
        await #expect(throws: FakeHTTPTransport.ConnectionRefused.self) { try await transport.send(request, body: nil) }
    }

    @Test("a cache over the fakes serves from memory with the manual clock")
    func cacheOverFakes() async throws {
        let clock = ManualCacheClock()
        let transport = FakeHTTPTransport()
        transport.script("https://api.example.com/items", replies: [.init(headerFields: [.cacheControl: "max-age=60"], body: "[]")])
        var configuration = CachedNetworking.Configuration()
        configuration.clock = clock
        let cache = CachedNetworking(store: InMemoryCacheStore(clock: clock), transport: transport, configuration: configuration)
        let request = HTTPRequest(method: .get, scheme: "https", authority: "api.example.com", path: "/items")
        _ = try await cache.run(request)
        #expect(try await cache.run(request).source == .cache)
        clock.advance(by: .seconds(61))
        #expect(try await cache.run(request).source == .network)
        #expect(transport.requestCount(for: "https://api.example.com/items") == 2)
    }
}
