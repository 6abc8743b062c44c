import CachedNetworking
import CachedNetworkingTesting
import HTTPTypes
import NIOCore
import Testing

@Suite("Invalidation")
struct InvalidationScenarioTests {
    @Test("a successful POST invalidates the target URI")
    func unsafeMethod() async throws {
        let h = try await Harness.make()
        h.origin.route("/items") { received in
            received.method == "POST" ? .init(status: 201, headers: [("Location", "/items/1")]) : .init(status: 200, headers: [("Cache-Control", "max-age=60")], body: "list")
        }
        h.serve("/items/1", [("Cache-Control", "max-age=60")])
        _ = try await h.get("/items")
        _ = try await h.get("/items/1")
        let post = try await h.get("/items", method: .post)
        #expect(post.cacheStatus.headerValue == "cached; fwd=method")
        #expect(try await h.get("/items").source == .network)
        #expect(try await h.get("/items/1").source == .network)
        await h.stop()
    }

    @Test("a store that fails the invalidation after a POST: retried in the background until it succeeds")
    func invalidationRetried() async throws {
        let h = try await Harness.make()
        let calls = Tally()
        h.serve("/doc") { _ in .init(status: 200, headers: [("Cache-Control", "max-age=60")], body: "v\(calls.next())") }
        #expect(try await h.get("/doc").text == "v1")
        // The invalidation right after the POST and the first retry fail; the second retry gets through.
        h.store.inject(.init(operations: [.remove], error: CacheStoreError(.timeout, "stalled"), count: 2))

        let post = try await h.get("/doc", method: .post)
        #expect(post.text == "v2")
        await h.cache.waitForBackgroundRefreshes()

        let after = try await h.get("/doc")
        #expect(after.source == .network)
        #expect(after.text == "v3")
        await h.stop()
    }

    @Test("a failed DELETE invalidates nothing")
    func failedUnsafe() async throws {
        let h = try await Harness.make()
        h.origin.route("/x") { received in
            received.method == "DELETE" ? .init(status: 500) : .init(status: 200, headers: [("Cache-Control", "max-age=60")])
        }
        _ = try await h.get("/x")
        _ = try await h.get("/x", method: .delete)
        #expect(try await h.get("/x").source == .cache)
        await h.stop()
    }

    @Test("invalidate removes the stored responses of a URL, Vary variants included")
    func invalidate() async throws {
        let h = try await Harness.make()
        h.serve("/i", [("Cache-Control", "max-age=60"), ("Vary", "Accept")])
        _ = try await h.get("/i", [("Accept", "a")])
        _ = try await h.get("/i", [("Accept", "b")])
        try await h.cache.invalidate(h.origin.request("/i"))
        #expect(try await h.get("/i", [("Accept", "a")]).source == .network)
        #expect(try await h.get("/i", [("Accept", "b")]).source == .network)
        await h.stop()
    }

    @Test("invalidateAll changes the generation in one store call; old entries are unreachable")
    func invalidateAll() async throws {
        let h = try await Harness.make()
        h.serve("/a", [("Cache-Control", "max-age=60")])
        h.serve("/b", [("Cache-Control", "max-age=60")])
        _ = try await h.get("/a")
        _ = try await h.get("/b")
        let removals = h.store.count(of: .remove)
        try await h.cache.invalidateAll()
        #expect(h.store.count(of: .increment) == 1)
        #expect(h.store.count(of: .remove) == removals)
        #expect(try await h.get("/a").source == .network)
        #expect(h.store.keys.contains(entryKey("http://127.0.0.1:\(h.origin.port)/a", generation: 1)))
        await h.stop()
    }

    @Test("another process sees invalidateAll once its generation cache lapses")
    func invalidateAllAcrossProcesses() async throws {
        let h = try await Harness.make { $0.generationCacheDuration = .zero }
        h.serve("/g", [("Cache-Control", "max-age=60")])
        _ = try await h.get("/g")
        try await h.sibling().invalidateAll()
        #expect(try await h.get("/g").source == .network)
        await h.stop()
    }

    @Test("invalidate reports a failing store")
    func invalidateStoreFailure() async throws {
        let h = try await Harness.make()
        h.store.inject(.init())
        await #expect(throws: CachedNetworkingError.self) { try await h.cache.invalidateAll() }
        await h.stop()
    }

    @Test("prefetch loads a URL so that the next request is a hit, and does nothing while it is fresh")
    func prefetch() async throws {
        let h = try await Harness.make()
        h.serve("/pre", [("Cache-Control", "max-age=60")])
        #expect(try await h.cache.prefetch(h.origin.request("/pre")) == .network)
        #expect(try await h.cache.prefetch(h.origin.request("/pre")) == .cache)
        #expect(try await h.get("/pre").source == .cache)
        #expect(h.origin.count("/pre") == 1)
        await h.stop()
    }
}
