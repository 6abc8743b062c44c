import CachedNetworking
import CachedNetworkingTesting
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPTypes
import NIOCore
import Synchronization
import Testing

@Suite("Batch prefetch")
struct PrefetchTests {
    @Test("every request is stored or has failed when it returns, with an outcome per request, in order")
    func outcomes() async throws {
        let f = FakeCache()
        f.serve("/fresh", cacheControl: "max-age=60", bodies: ["fresh"])
        f.serve("/new", cacheControl: "max-age=60", bodies: ["new"])
        f.serve("/uncacheable", cacheControl: "no-store", bodies: ["no"])
        _ = try await f.cache.run(f.request("/fresh"))
        let requests = [f.request("/fresh"), f.request("/new"), f.request("/unscripted"), f.request("/uncacheable")]
        let outcomes = await f.cache.prefetch(requests, maxConcurrency: 2)
        #expect(outcomes.count == 4)
        #expect(try outcomes[0].result.get() == .cache)
        #expect(outcomes[0].isStored)
        #expect(try outcomes[1].result.get() == .network)
        #expect(outcomes[1].cacheStatus?.stored == true)
        #expect(outcomes[1].isStored)
        #expect(outcomes[2].error?.kind == .transport)
        #expect(!outcomes[2].isStored)
        #expect(try outcomes[3].result.get() == .network)
        #expect(!outcomes[3].isStored)
        // What the batch stored is served from the cache.
        #expect(try await f.cache.run(f.request("/new")).source == .cache)
        #expect(f.fetches("/new") == 1)
        #expect(f.fetches("/fresh") == 1)
    }

    @Test("at most maxConcurrency requests are under way at once")
    func boundedConcurrency() async throws {
        let transport = HeldTransport()
        let cache = CachedNetworking(store: InMemoryCacheStore(), transport: transport)
        let requests = (0..<7).map {
            HTTPRequest(method: .get, scheme: "https", authority: "api.example.com", path: "/items/\($0)")
        }
        let batch = Task { await cache.prefetch(requests, maxConcurrency: 3) }
        var released = 0
        while released < requests.count {
            // The requests not yet released are held or not yet sent; with at most 3 under way, 3 of them (or all
            // that are left) are held once the batch has sent what it may.
            let expected = min(3, requests.count - released)
            guard await eventually({ transport.waiting == expected }) else {
                Issue.record("expected \(expected) requests held, found \(transport.waiting)")
                transport.openAll()
                break
            }
            transport.releaseOne()
            released += 1
        }
        let outcomes = await batch.value
        #expect(outcomes.filter(\.isStored).count == requests.count)
        #expect(transport.mostInFlight == 3)
    }

    @Test("a stale response inside stale-while-revalidate is validated, not served while a background refresh runs")
    func staleIsValidated() async throws {
        let f = FakeCache()
        f.transport.script(FakeCache.base + "/swr") { request, _ in
            if request.headerFields[.ifNoneMatch] == "\"v1\"" { return .init(status: .notModified) }
            return .init(headerFields: [.cacheControl: "max-age=10, stale-while-revalidate=60", .eTag: "\"v1\""], body: "swr")
        }
        _ = try await f.cache.run(f.request("/swr"))
        f.clock.advance(by: .seconds(11))
        let outcomes = await f.cache.prefetch([f.request("/swr")])
        #expect(try outcomes[0].result.get() == .revalidated)
        #expect(outcomes[0].isStored)
        #expect(f.transport.requests.last?.request.headerFields[.ifNoneMatch] == "\"v1\"")
        #expect(try await f.cache.prefetch(f.request("/swr")) == .cache)
        #expect(f.fetches("/swr") == 2)
    }

    @Test("a prefetch that waits for another process's fetch reports the response it stored as stored")
    func leaseWaiterIsStored() async throws {
        let h = try await Harness.make()
        h.serve("/l", [("Cache-Control", "max-age=60")], body: "from-holder")
        let key = entryKey("http://127.0.0.1:\(h.origin.port)/l")
        // Another process holds the lease for this miss.
        #expect(try await h.store.setIfAbsent(key + "#lock", to: ByteBuffer(string: "other"), ttl: .seconds(30)))
        let waiter = Task { await h.cache.prefetch([h.origin.request("/l")]) }
        // The prefetch tried to take the lease, and waits for its holder.
        #expect(await eventually { h.store.count(of: .setIfAbsent) == 2 })
        // The holder: fetches (ignoring the lease, as a reload does) and stores the response.
        _ = try await h.sibling().run(h.origin.request("/l"), policy: .reloadIgnoringLocalCacheData)
        let outcomes = await waiter.value
        #expect(try outcomes[0].result.get() == .coalesced)
        #expect(outcomes[0].isStored)
        #expect(h.origin.count("/l") == 1)
        await h.stop()
    }

    @Test("URLRequest overloads: prefetch one or many, invalidate")
    func urlRequests() async throws {
        let f = FakeCache()
        f.serve("/a", cacheControl: "max-age=60", bodies: ["a1", "a2"])
        f.serve("/b", cacheControl: "max-age=60", bodies: ["b"])
        let a = URLRequest(url: URL(string: FakeCache.base + "/a")!)
        let b = URLRequest(url: URL(string: FakeCache.base + "/b")!)
        let file = URLRequest(url: URL(string: "file:///etc/hosts")!)
        #expect(try await f.cache.prefetch(a) == .network)
        let outcomes = await f.cache.prefetch([a, b, file], maxConcurrency: 2)
        #expect(try outcomes[0].result.get() == .cache)
        #expect(try outcomes[1].result.get() == .network)
        #expect(outcomes[2].error?.kind == .invalidRequest)
        try await f.cache.invalidate(a)
        #expect(String(buffer: try await f.cache.run(a).body) == "a2")
        await #expect(throws: CachedNetworkingError.self) { try await f.cache.invalidate(file) }
    }
}

/// A transport that holds every request until the test releases it, counting how many are under way.
final class HeldTransport: HTTPTransport {
    private struct State {
        var inFlight = 0
        var mostInFlight = 0
        var waiting: [CheckedContinuation<Void, Never>] = []
        var open = false
    }
    private let state = Mutex(State())

    /// Requests held, waiting to be released.
    var waiting: Int { state.withLock { $0.waiting.count } }
    /// The most requests under way at once so far.
    var mostInFlight: Int { state.withLock { $0.mostInFlight } }

    /// Lets the oldest request held answer.
    func releaseOne() {
        let continuation = state.withLock { $0.waiting.isEmpty ? nil : $0.waiting.removeFirst() }
        continuation?.resume()
    }

    /// Lets every request answer, now and from now on (so that a failed test ends).
    func openAll() {
        let continuations = state.withLock { state in
            state.open = true
            defer { state.waiting = [] }
            return state.waiting
        }
        for continuation in continuations { continuation.resume() }
    }

    func send(_ request: HTTPRequest, body: ByteBuffer?) async throws -> HTTPTransportResponse {
        await withCheckedContinuation { continuation in
            let open = state.withLock { state in
                state.inFlight += 1
                state.mostInFlight = max(state.mostInFlight, state.inFlight)
                if !state.open { state.waiting.append(continuation) }
                return state.open
            }
            if open { continuation.resume() }
        }
        state.withLock { $0.inFlight -= 1 }
        var fields = HTTPFields()
        fields[.cacheControl] = "max-age=60"
        return HTTPTransportResponse(response: HTTPResponse(status: .ok, headerFields: fields), body: ByteBuffer(string: "ok"))
    }
}
