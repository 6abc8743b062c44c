import CachedNetworking
import CachedNetworkingTesting
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPTypes
import Synchronization
import Testing

@testable import CachedNetworking

struct Widget: Decodable, Sendable, Equatable {
    let id: Int
}

@Suite("CachedRepository decodes once per stored entry version")
struct RepositoryTests {
    func repository(_ h: Harness, _ path: String, decodes: Tally) -> CachedRepository<Widget> {
        let cache = h.cache
        return CachedRepository<Widget>(
            request: h.origin.request(path),
            fetch: { request, policy in try await cache.run(request, policy: policy) },
            decode: { data in
                decodes.next()
                return try JSONDecoder().decode(Widget.self, from: data)
            })
    }

    @Test("repeated hits of one entry decode once")
    func decodeOnce() async throws {
        let h = try await Harness.make()
        h.serve("/item", [("Cache-Control", "max-age=60")], body: #"{"id":7}"#)
        let decodes = Tally()
        let items = repository(h, "/item", decodes: decodes)
        for _ in 0..<5 {
            #expect(try await items.value() == Widget(id: 7))
        }
        #expect(decodes.value == 1)
        await h.stop()
    }

    @Test("a 304 revalidation with the same ETag does not decode again; a new ETag does")
    func revalidationKeepsValue() async throws {
        let h = try await Harness.make()
        let version = Tally()
        h.serve("/etag") { received in
            let tag = "\"\(version.value)\""
            if received.header("If-None-Match") == tag { return .init(status: 304) }
            return .init(status: 200, headers: [("Cache-Control", "max-age=10"), ("ETag", tag)], body: "{\"id\":\(version.value)}")
        }
        let decodes = Tally()
        let items = repository(h, "/etag", decodes: decodes)
        #expect(try await items.value() == Widget(id: 0))
        h.advance(11)
        let revalidated = try await items.read()
        #expect(revalidated.value == Widget(id: 0))
        #expect(revalidated.source == .revalidated)
        #expect(decodes.value == 1)
        version.next()
        h.advance(11)
        #expect(try await items.value() == Widget(id: 1))
        #expect(decodes.value == 2)
        await h.stop()
    }

    @Test("responses that were not stored are decoded every time")
    func notStored() async throws {
        let h = try await Harness.make()
        h.serve("/nostore", [("Cache-Control", "no-store")], body: #"{"id":1}"#)
        let decodes = Tally()
        let items = repository(h, "/nostore", decodes: decodes)
        _ = try await items.value()
        _ = try await items.value()
        #expect(decodes.value == 2)
        await h.stop()
    }

    @available(*, deprecated, message: "tests the deprecated API")
    @Test("the deprecated repository of many requests still decodes once per entry")
    func deprecatedManyRequests() async throws {
        let h = try await Harness.make()
        h.serve("/one", [("Cache-Control", "max-age=60")], body: #"{"id":1}"#)
        h.serve("/two", [("Cache-Control", "max-age=60")], body: #"{"id":2}"#)
        let decodes = Tally()
        let cache = h.cache
        let widgets = CachedRepository<Widget>(
            fetch: { request, policy in try await cache.run(request, policy: policy) },
            decode: { data in
                decodes.next()
                return try JSONDecoder().decode(Widget.self, from: data)
            })
        for _ in 0..<3 {
            #expect(try await widgets.value(for: h.origin.request("/one")) == Widget(id: 1))
            #expect(try await widgets.value(for: h.origin.request("/two")) == Widget(id: 2))
        }
        #expect(decodes.value == 2)
        #expect(try await CachedRepository<Widget>(network: cache).value(for: h.origin.request("/one")) == Widget(id: 1))
        do {
            _ = try await widgets.value()
            Issue.record("a repository made without a request has no resource of its own")
        } catch {
            #expect(error.networkError?.kind == .invalidRequest)
        }
        await h.stop()
    }

    @Test("a non-2xx status is an error, not a decode")
    func statusError() async throws {
        let h = try await Harness.make()
        h.serve("/missing", status: 404, body: "nope")
        let items = CachedRepository<Widget>(h.cache, request: h.origin.request("/missing"))
        do {
            _ = try await items.value()
            Issue.record("expected an error")
        } catch {
            #expect(error.kind == .status)
            #expect(error.status?.code == 404)
        }
        await h.stop()
    }
}

@Suite("CachedRepository: one resource, a lifetime of its own, reads with their source")
struct RepositoryResourceTests {
    @Test("read gives the value with its source, age and Cache-Status")
    func readDetails() async throws {
        let f = FakeCache()
        f.serve("/widget", cacheControl: "max-age=60", bodies: [#"{"id":1}"#])
        let widget = CachedRepository<Widget>(f.cache, request: f.request("/widget"))
        let first = try await widget.read()
        #expect(first.value == Widget(id: 1))
        #expect(first.source == .origin)
        #expect(first.age == .zero)
        #expect(first.cacheStatus?.headerValue == "cached; fwd=uri-miss; stored")
        f.clock.advance(by: .seconds(7))
        let second = try await widget.read()
        #expect(second.source == .cache)
        #expect(second.age == .seconds(7))
        #expect(second.cacheStatus?.headerValue == "cached; hit; ttl=53")
        #expect(f.fetches("/widget") == 1)
    }

    @Test("without a lifetime, every read asks the cache")
    func noLifetime() async throws {
        let f = FakeCache()
        f.serve("/widget", cacheControl: nil, bodies: [#"{"id":1}"#, #"{"id":2}"#])
        let widget = CachedRepository<Widget>(f.cache, request: f.request("/widget"))
        #expect(try await widget.value() == Widget(id: 1))
        #expect(try await widget.value() == Widget(id: 2))
        #expect(f.fetches("/widget") == 2)
    }

    @Test("a lifetime holds the value on the cache's clock, whatever the origin said, then asks again")
    func lifetimeHolds() async throws {
        let f = FakeCache()
        f.serve("/widget", cacheControl: "no-store", bodies: [#"{"id":1}"#, #"{"id":2}"#])
        let widget = CachedRepository<Widget>(f.cache, request: f.request("/widget"), lifetime: .seconds(30))
        #expect(try await widget.read().source == .origin)
        f.clock.advance(by: .seconds(29))
        let held = try await widget.read()
        #expect(held.value == Widget(id: 1))
        #expect(held.source == .held)
        #expect(held.age == .seconds(29))
        #expect(held.cacheStatus?.headerValue == "cached; fwd=uri-miss")
        #expect(f.fetches("/widget") == 1)
        f.clock.advance(by: .seconds(1))
        let fetched = try await widget.read()
        #expect(fetched.value == Widget(id: 2))
        #expect(fetched.source == .origin)
        #expect(f.fetches("/widget") == 2)
    }

    @Test("after the lifetime, the cache's own rules decide: a response still fresh comes from the cache")
    func lifetimeThenCache() async throws {
        let f = FakeCache()
        f.serve("/widget", cacheControl: "max-age=600", bodies: [#"{"id":1}"#])
        let widget = CachedRepository<Widget>(f.cache, request: f.request("/widget"), lifetime: .seconds(30))
        _ = try await widget.read()
        f.clock.advance(by: .seconds(31))
        let read = try await widget.read()
        #expect(read.source == .cache)
        #expect(read.age == .seconds(31))
        #expect(f.fetches("/widget") == 1)
    }

    @Test("the reload policies pass over a held value")
    func reloadPassesOverHeld() async throws {
        let f = FakeCache()
        f.serve("/widget", cacheControl: "max-age=600", bodies: [#"{"id":1}"#, #"{"id":2}"#])
        let widget = CachedRepository<Widget>(f.cache, request: f.request("/widget"), lifetime: .seconds(30))
        _ = try await widget.read()
        let reloaded = try await widget.read(policy: .reloadIgnoringLocalCacheData)
        #expect(reloaded.value == Widget(id: 2))
        #expect(reloaded.source == .origin)
        // The reloaded value is the one held now.
        #expect(try await widget.read().value == Widget(id: 2))
        #expect(try await widget.read().source == .held)
    }

    @Test("invalidate drops the held value and the stored response")
    func invalidateOverCache() async throws {
        let f = FakeCache()
        f.serve("/widget", cacheControl: "max-age=600", bodies: [#"{"id":1}"#, #"{"id":2}"#])
        let widget = CachedRepository<Widget>(f.cache, request: f.request("/widget"), lifetime: .seconds(30))
        _ = try await widget.read()
        try await widget.invalidate()
        let read = try await widget.read()
        #expect(read.value == Widget(id: 2))
        #expect(read.source == .origin)
        // Another process's read, through the same store, finds the new response, not the old one.
        let sibling = CachedNetworking(store: f.store, transport: f.transport, configuration: f.cache.configuration)
        #expect(try await sibling.run(f.request("/widget")).bodyData == Data(#"{"id":2}"#.utf8))
        #expect(f.fetches("/widget") == 2)
    }

    @Test("invalidate through a store that fails throws, and the next read bypasses the stored response")
    func invalidateStoreFailure() async throws {
        let f = FakeCache()
        f.serve("/widget", cacheControl: "max-age=600", bodies: [#"{"id":1}"#, #"{"id":2}"#])
        let widget = CachedRepository<Widget>(f.cache, request: f.request("/widget"), lifetime: .seconds(30))
        _ = try await widget.read()
        f.store.inject(.init(operations: [.remove]))
        do {
            try await widget.invalidate()
            Issue.record("expected the store's failure")
        } catch {
            #expect(error.kind == .network)
            #expect(error.networkError?.kind == .store)
        }
        // The stored response is still there, but this repository does not use it.
        let read = try await widget.read()
        #expect(read.value == Widget(id: 2))
        #expect(read.source == .origin)
        #expect(read.cacheStatus?.headerValue == "cached; fwd=request; stored")
        #expect(try await widget.read().source == .held)
    }

    @Test("a repository over a fetch function reloads after invalidate, since it cannot reach the store")
    func invalidateOverFetch() async throws {
        let f = FakeCache()
        f.serve("/widget", cacheControl: "max-age=600", bodies: [#"{"id":1}"#, #"{"id":2}"#])
        let cache = f.cache
        let policies = Mutex<[CachePolicy]>([])
        let widget = CachedRepository<Widget>(request: f.request("/widget"), clock: f.clock) { request, policy in
            policies.withLock { $0.append(policy) }
            return try await cache.run(request, policy: policy)
        }
        _ = try await widget.read()
        #expect(try await widget.read().source == .cache)
        try await widget.invalidate()
        #expect(try await widget.read().value == Widget(id: 2))
        // Only the read right after the invalidation reloads.
        #expect(try await widget.read().source == .cache)
        #expect(policies.withLock { $0 } == [
            .useProtocolCachePolicy, .useProtocolCachePolicy, .reloadIgnoringLocalCacheData, .useProtocolCachePolicy,
        ])
    }

    @Test("a decoder of the caller's choosing decodes")
    func customDecoder() async throws {
        struct Stamp: Decodable, Equatable, Sendable { let at: Date }
        let f = FakeCache()
        f.serve("/stamp", cacheControl: "max-age=60", bodies: [#"{"at":"2024-01-01T00:00:00Z"}"#])
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        let stamp = CachedRepository<Stamp>(f.cache, request: f.request("/stamp"), decoder: decoder)
        #expect(try await stamp.value() == Stamp(at: Date(timeIntervalSince1970: 1_704_067_200)))
        let undecodable = CachedRepository<Stamp>(f.cache, request: f.request("/stamp"))
        do {
            _ = try await undecodable.value()
            Issue.record("the default decoder reads no ISO 8601 date")
        } catch {
            #expect(error.kind == .decoding)
            #expect(error.underlying is DecodingError)
        }
    }

    @Test("a URLRequest names the resource, and its cache policy is the reads' default")
    func urlRequest() async throws {
        let f = FakeCache()
        f.serve("/widget", cacheControl: "max-age=600", bodies: [#"{"id":1}"#, #"{"id":2}"#])
        var request = URLRequest(url: URL(string: FakeCache.base + "/widget")!)
        let widget = CachedRepository<Widget>(f.cache, request: request)
        #expect(widget.request?.path == "/widget")
        _ = try await widget.read()
        #expect(try await widget.read().source == .cache)
        request.cachePolicy = .reloadIgnoringLocalCacheData
        let reloading = CachedRepository<Widget>(f.cache, request: request)
        #expect(try await reloading.read().value == Widget(id: 2))

        let nowhere = CachedRepository<Widget>(f.cache, request: URLRequest(url: URL(string: "file:///widget")!))
        do {
            _ = try await nowhere.value()
            Issue.record("a file URL is no HTTP request")
        } catch {
            #expect(error.networkError?.kind == .invalidRequest)
        }
    }
}

@Suite("CachedRepository over any async source")
struct RepositorySourceTests {
    @Test("the value is held for the lifetime, on the manual clock, then fetched again")
    func heldForLifetime() async throws {
        let clock = ManualCacheClock()
        let fetches = Tally()
        let rates = CachedRepository<Int>(lifetime: .seconds(60), clock: clock) { fetches.next() }
        let first = try await rates.read()
        #expect(first.value == 1)
        #expect(first.source == .origin)
        #expect(first.cacheStatus == nil)
        clock.advance(by: .seconds(59))
        let held = try await rates.read()
        #expect(held.value == 1)
        #expect(held.source == .held)
        #expect(held.age == .seconds(59))
        clock.advance(by: .seconds(1))
        #expect(try await rates.value() == 2)
        #expect(fetches.value == 2)
    }

    @Test("without a lifetime every read fetches; invalidate drops a held value")
    func noLifetimeAndInvalidate() async throws {
        let clock = ManualCacheClock()
        let fetches = Tally()
        let unheld = CachedRepository<Int>(clock: clock) { fetches.next() }
        #expect(try await unheld.value() == 1)
        #expect(try await unheld.value() == 2)
        let held = CachedRepository<Int>(lifetime: .seconds(60), clock: clock) { fetches.next() }
        #expect(try await held.value() == 3)
        #expect(try await held.value() == 3)
        try await held.invalidate()
        #expect(try await held.value() == 4)
    }

    @Test("what the source throws fails the read with kind source, and nothing is held")
    func sourceError() async throws {
        struct Down: Error {}
        let fails = Mutex(true)
        let repository = CachedRepository<Int>(lifetime: .seconds(60), clock: ManualCacheClock()) {
            if fails.withLock({ $0 }) { throw Down() }
            return 1
        }
        do {
            _ = try await repository.value()
            Issue.record("expected the source's error")
        } catch {
            #expect(error.kind == .source)
            #expect(error.underlying is Down)
        }
        fails.withLock { $0 = false }
        #expect(try await repository.read().source == .origin)
    }

    @Test("reads that find nothing held while a fetch runs wait for it and share its value")
    func readsShareOneFetch() async throws {
        let gate = Gate()
        let fetches = Tally()
        let repository = CachedRepository<Int>(lifetime: .seconds(60), clock: ManualCacheClock()) {
            let count = fetches.next()
            await gate.wait()
            return count
        }
        let leader = Task { try await repository.read() }
        let started = await eventually { fetches.value == 1 }
        let followers = (0..<3).map { _ in Task { try await repository.read() } }
        let joined = await eventually { repository.waitingReads == 3 }
        gate.open()
        #expect(started)
        #expect(joined)
        #expect(try await leader.value.source == .origin)
        for follower in followers {
            let read = try await follower.value
            #expect(read.value == 1)
            #expect(read.source == .coalesced)
        }
        #expect(fetches.value == 1)
    }

    @Test("a read under way when the repository is invalidated returns its value, which is not held")
    func invalidatedWhileFetching() async throws {
        let gate = Gate()
        let fetches = Tally()
        let repository = CachedRepository<Int>(lifetime: .seconds(60), clock: ManualCacheClock()) {
            let count = fetches.next()
            if count == 1 { await gate.wait() }
            return count
        }
        let early = Task { try await repository.value() }
        let started = await eventually { fetches.value == 1 }
        try await repository.invalidate()
        gate.open()
        #expect(started)
        #expect(try await early.value == 1)
        #expect(try await repository.value() == 2)
    }
}
