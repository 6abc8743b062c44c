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

    func make(configure: (inout CachedNetworking.Configuration) -> Void = { _ in }) async throws -> Setup {
        let origin = try await OriginServer.start()
        let clock = ManualCacheClock()
        let store = MemoryStore(cleanupInterval: nil)
        let metrics = TestMetrics()
        let configuration = testConfiguration(clock: clock, metrics: metrics, configure: configure)
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
        #expect(try s.store.getDecoded(StoreKey(key))?.decoded != nil)
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
        #expect(try s.store.getDecoded(StoreKey(key))?.decoded == nil)
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

    // MARK: targets seen before (the generation cache's table, keyed by the request's own spelling)

    @Test("spellings of one URI share its entry; other URIs never do")
    func spellingsOfOneURI() async throws {
        let s = try await make()
        s.serve("/p%2fq") { _ in .init(headers: [("Cache-Control", "max-age=60")], body: "pq") }
        s.serve("/p%2fr") { _ in .init(headers: [("Cache-Control", "max-age=60")], body: "pr") }
        s.serve("/p%2fq?x=1") { _ in .init(headers: [("Cache-Control", "max-age=60")], body: "pq x") }
        let first = try await s.get("/p%2fq")
        #expect(first.source == .network)
        // The same URI spelt otherwise (scheme case, percent-encoding case), asked twice each: hits on the entry.
        var upper = s.origin.request("/p%2Fq")
        upper.scheme = "HTTP"
        for request in [s.origin.request("/p%2Fq"), upper, s.origin.request("/p%2Fq"), upper] {
            let answer = try await s.cache.run(request)
            #expect(answer.source == .cache)
            #expect(answer.entry == first.entry)
            #expect(String(buffer: answer.body) == "pq")
        }
        // Other URIs, after the first was seen: their own entries.
        for _ in 0..<2 {
            #expect(String(buffer: try await s.get("/p%2fr").body) == "pr")
            #expect(String(buffer: try await s.get("/p%2fq?x=1").body) == "pq x")
        }
        #expect(s.origin.count("/p%2fq") == 1 && s.origin.count("/p%2fr") == 1 && s.origin.count("/p%2fq?x=1") == 1)
        // HEAD is another entry of the same URI.
        #expect(try await s.cache.run(s.origin.request("/p%2fq", method: .head)).source == .network)
        await s.origin.stop()
    }

    @Test("targets that differ only in Unicode normalization are different entries")
    func unicodeSpellings() async throws {
        let transport = FakeHTTPTransport()
        let store = MemoryStore(cleanupInterval: nil)
        let cache = CachedNetworking(store: store, transport: transport)
        for url in ["https://example.com/caf\u{E9}", "https://example.com/cafe\u{301}"] {
            transport.script(url) { request, _ in
                .init(headerFields: [.cacheControl: "max-age=60"], body: request.path ?? "")
            }
        }
        let composed = HTTPRequest(method: .get, scheme: "https", authority: "example.com", path: "/caf\u{E9}")
        let decomposed = HTTPRequest(method: .get, scheme: "https", authority: "example.com", path: "/cafe\u{301}")
        #expect(try await cache.run(composed).source == .network)
        #expect(try await cache.run(composed).source == .cache)
        // Equal as Swift strings, but other bytes: another store key (as Redis would see it), fetched on its own.
        let other = try await cache.run(decomposed)
        #expect(other.source == .network)
        #expect(Array(other.body.readableBytesView) == Array("/cafe\u{301}".utf8))
        let again = try await cache.run(decomposed)
        #expect(again.source == .cache && again.entry == other.entry)
        let first = try await cache.run(composed)
        #expect(first.source == .cache && first.entry != other.entry)
        #expect(Array(first.body.readableBytesView) == Array("/caf\u{E9}".utf8))
        #expect(transport.requests.count == 2)
    }

    @Test("a target seen before still sees invalidate and invalidateAll")
    func seenTargetsAndInvalidation() async throws {
        let s = try await make()
        s.serve("/v") { _ in .init(headers: [("Cache-Control", "max-age=60")], body: "v") }
        #expect(try await s.get("/v").source == .network)
        #expect(try await s.get("/v").source == .cache)
        try await s.cache.invalidate(s.origin.request("/v"))
        #expect(try await s.get("/v").source == .network)
        #expect(try await s.get("/v").source == .cache)
        try await s.cache.invalidateAll()
        let renewed = try await s.get("/v")
        #expect(renewed.source == .network)
        #expect(renewed.entry?.key == entryKey("http://127.0.0.1:\(s.origin.port)/v", generation: 1))
        #expect(try await s.get("/v").source == .cache)
        #expect(s.origin.count("/v") == 3)
        await s.origin.stop()
    }

    @Test("a target seen before sees another process's invalidateAll once the generation cache lapses")
    func seenTargetsAndAnotherProcess() async throws {
        let s = try await make { $0.generationCacheDuration = .milliseconds(50) }
        s.serve("/w") { _ in .init(headers: [("Cache-Control", "max-age=60")], body: "w") }
        #expect(try await s.get("/w").source == .network)
        #expect(try await s.get("/w").source == .cache)
        let sibling = CachedNetworking(store: s.store, transport: sharedTransport, configuration: s.cache.configuration)
        try await sibling.invalidateAll()
        try await Task.sleep(for: .milliseconds(120))
        let renewed = try await s.get("/w")
        #expect(renewed.source == .network)
        #expect(renewed.entry?.key == entryKey("http://127.0.0.1:\(s.origin.port)/w", generation: 1))
        #expect(try await s.get("/w").source == .cache)
        await s.origin.stop()
    }

    // MARK: hits in the same second share their header fields

    @Test("hits share their fields within a second of age, and get new Age and ttl after it")
    func sharedHitFields() async throws {
        let s = try await make()
        s.serve("/h") { _ in .init(headers: [("Cache-Control", "max-age=60"), ("Cache-Status", "upstream; hit")], body: "h") }
        _ = try await s.get("/h")
        s.clock.advance(by: .seconds(3))
        let first = try await s.get("/h")
        let second = try await s.get("/h")
        #expect(first.headerFields == second.headerFields)
        #expect(second.headerFields[.age] == "3")
        #expect(second.headerFields[.cacheStatus] == "upstream; hit, cached; hit; ttl=57")
        #expect(second.cacheStatus == first.cacheStatus)
        // Shared as one head (status, fields, source, member, identity), not copied field by field.
        #expect(first.head === second.head)
        s.clock.advance(by: .milliseconds(999))
        #expect(try await s.get("/h").headerFields == first.headerFields)
        s.clock.advance(by: .milliseconds(1))
        let later = try await s.get("/h")
        #expect(later.headerFields[.age] == "4")
        #expect(later.headerFields[.cacheStatus] == "upstream; hit, cached; hit; ttl=56")
        #expect(later.cacheStatus.timeToLive == 56)
        #expect(s.origin.count("/h") == 1)

        // Another cache over the same store (another name) gets its own member on the same entry's hits.
        var configuration = s.cache.configuration
        configuration.cacheName = "edge"
        let edge = CachedNetworking(store: s.store, transport: sharedTransport, configuration: configuration)
        for _ in 0..<2 {
            let answer = try await edge.run(s.origin.request("/h"))
            #expect(answer.source == .cache)
            #expect(answer.headerFields[.cacheStatus] == "upstream; hit, edge; hit; ttl=56")
            #expect(try await s.get("/h").headerFields[.cacheStatus] == "upstream; hit, cached; hit; ttl=56")
        }
        // A caller's change to its answer is its own, whichever part it changes.
        var mine = try await s.get("/h")
        let shared = try await s.get("/h")
        #expect(mine.head === shared.head)
        mine.response.headerFields[.age] = "999"
        mine.cacheStatus.detail = "mine"
        mine.source = .stale
        mine.entry = nil
        #expect(mine.head !== shared.head)
        #expect(mine.headerFields[.age] == "999" && mine.cacheStatus.detail == "mine" && mine.source == .stale)
        for answer in [shared, try await s.get("/h")] {
            #expect(answer.headerFields[.age] == "4")
            #expect(answer.cacheStatus.detail == nil && answer.source == .cache && answer.entry != nil)
        }
        await s.origin.stop()
    }

    @Test("a qualified no-cache leaves its fields out of every hit, shared or not")
    func sharedHitFieldsOmitQualifiedNoCache() async throws {
        let s = try await make()
        s.serve("/n") { _ in
            .init(headers: [("Cache-Control", "max-age=60, no-cache=\"X-Token\""), ("X-Token", "secret")], body: "n")
        }
        _ = try await s.get("/n")
        for _ in 0..<2 {
            let answer = try await s.get("/n")
            #expect(answer.source == .cache)
            #expect(answer.headerFields[HTTPField.Name("X-Token")!] == nil)
            #expect(answer.headerFields[.age] == "0")
        }
        await s.origin.stop()
    }

}

@Suite("SingleFlight")
struct SingleFlightTests {
    @Test("followers of a cancelled leader run the operation again")
    func cancelledLeader() async throws {
        let flights = SingleFlight<String, Int>()
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
