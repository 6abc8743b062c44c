import CachedNetworking
import CachedNetworkingTesting
import CachedTestSupport
import HTTPCaching
import HTTPTypes
import Testing

/// What the origin tells this cache apart from other caches (RFC 9213), and what the cache does when the
/// origin cannot be reached (RFC 9111 §4.2.4): the same through `MemoryStore` and the network stores (a live
/// `cached-server` and `redis-server`, started for the suite).
@Suite("Targeted Cache-Control and stale when disconnected, over every store", .liveServers)
struct OriginControlScenarioTests {
    static let url = "https://api.example.com/item"
    static let request = HTTPRequest(method: .get, scheme: "https", authority: "api.example.com", path: "/item")

    static func obeyingCDNCacheControl(_ configuration: inout CachedNetworking.Configuration) {
        configuration.rules.targetedCacheControlFields = [.cdnCacheControl]
    }

    static func disconnected(_ window: Duration) -> (inout CachedNetworking.Configuration) -> Void {
        { $0.staleWhenDisconnected = window }
    }

    // MARK: - RFC 9213

    @Test("RFC 9213 §2.2: a configured targeted field replaces Cache-Control, and is passed on unchanged",
          arguments: StoreUnderTest.allCases)
    func targetedFieldObeyed(_ kind: StoreUnderTest) async throws {
        try await withScenarioCache(kind, configure: Self.obeyingCDNCacheControl) { cache, origin, clock in
            origin.script(Self.url, replies: [
                .init(headerFields: [.cacheControl: "no-store", .cdnCacheControl: "max-age=600"], body: "v1"),
                .init(headerFields: [.cacheControl: "no-store", .cdnCacheControl: "max-age=600"], body: "v2"),
            ])
            let first = try await cache.run(Self.request)
            #expect(first.cacheStatus.stored)
            #expect(first.response.headerFields[.cdnCacheControl] == "max-age=600")
            #expect(first.response.headerFields[.cacheControl] == "no-store")
            clock.advance(by: .seconds(300))
            let hit = try await cache.run(Self.request)
            #expect(hit.source == .cache)
            #expect(String(buffer: hit.body) == "v1")
            #expect(hit.response.headerFields[.cdnCacheControl] == "max-age=600")
            #expect(origin.requestCount(for: Self.url) == 1)
        }
    }

    @Test("RFC 9213 §2.2: by default a targeted field is not this cache's, and Cache-Control decides",
          arguments: StoreUnderTest.allCases)
    func targetedFieldIgnoredByDefault(_ kind: StoreUnderTest) async throws {
        try await withScenarioCache(kind) { cache, origin, _ in
            origin.script(Self.url, replies: [
                .init(headerFields: [.cacheControl: "no-store", .cdnCacheControl: "max-age=600"], body: "v1"),
                .init(headerFields: [.cacheControl: "no-store", .cdnCacheControl: "max-age=600"], body: "v2"),
            ])
            _ = try await cache.run(Self.request)
            let second = try await cache.run(Self.request)
            #expect(second.source == .network)
            #expect(String(buffer: second.body) == "v2")
        }
    }

    @Test("RFC 9213 §2.2: the targeted field's no-store wins over Cache-Control and Expires",
          arguments: StoreUnderTest.allCases)
    func targetedNoStore(_ kind: StoreUnderTest) async throws {
        try await withScenarioCache(kind, configure: Self.obeyingCDNCacheControl) { cache, origin, _ in
            origin.script(Self.url, replies: [
                .init(headerFields: [.cacheControl: "public, max-age=600", .cdnCacheControl: "no-store"], body: "v1"),
                .init(headerFields: [.cacheControl: "public, max-age=600", .cdnCacheControl: "no-store"], body: "v2"),
            ])
            let first = try await cache.run(Self.request)
            #expect(!first.cacheStatus.stored)
            let second = try await cache.run(Self.request)
            #expect(String(buffer: second.body) == "v2")
        }
    }

    @Test("RFC 9213 §2.1: an invalid targeted field is ignored and Cache-Control applies",
          arguments: StoreUnderTest.allCases)
    func invalidTargetedField(_ kind: StoreUnderTest) async throws {
        try await withScenarioCache(kind, configure: Self.obeyingCDNCacheControl) { cache, origin, clock in
            origin.script(Self.url, replies: [
                .init(headerFields: [.cacheControl: "max-age=60", .cdnCacheControl: "max-age=600,"], body: "v1"),
                .init(headerFields: [.cacheControl: "max-age=60"], body: "v2"),
            ])
            _ = try await cache.run(Self.request)
            clock.advance(by: .seconds(120))
            let second = try await cache.run(Self.request)
            #expect(String(buffer: second.body) == "v2")
        }
    }

    // MARK: - RFC 9111 §4.2.4

    /// Stores a response with `cacheControl`, lets it go `staleFor` seconds stale, and makes the origin fail
    /// with `failure` from then on.
    func storeThenFail(
        _ origin: FakeHTTPTransport, _ clock: ManualCacheClock, cache: CachedNetworking, cacheControl: String,
        staleFor: Int, failure: FakeHTTPTransport.Reply = .failure(HTTPTransportError(.connectionFailed, "refused"))
    ) async throws {
        origin.script(Self.url, replies: [.init(headerFields: [.cacheControl: cacheControl, .eTag: "\"v1\""], body: "v1")])
        let first = try await cache.run(Self.request)
        #expect(first.cacheStatus.stored)
        origin.script(Self.url, replies: [failure])
        clock.advance(by: .seconds(60 + staleFor))
    }

    @Test("RFC 9111 §4.2.4: an unreachable origin lets a stale response answer, inside the configured bound",
          arguments: StoreUnderTest.allCases)
    func staleWhenDisconnected(_ kind: StoreUnderTest) async throws {
        try await withScenarioCache(kind, configure: Self.disconnected(.seconds(600))) { cache, origin, clock in
            try await storeThenFail(origin, clock, cache: cache, cacheControl: "max-age=60", staleFor: 500)
            let stale = try await cache.run(Self.request)
            #expect(stale.source == .stale)
            #expect(String(buffer: stale.body) == "v1")
            #expect(stale.cacheStatus.detail == "disconnected")
            #expect(stale.cacheStatus.forward == .stale)
            #expect(stale.cacheStatus.forwardStatus == nil)
            #expect(stale.cacheStatus.timeToLive == -500)
            #expect(origin.requestCount(for: Self.url) == 2)

            // Past the bound the failure is the caller's.
            clock.advance(by: .seconds(101))
            await #expect(throws: CachedNetworkingError.self) { try await cache.run(Self.request) }
        }
    }

    @Test("RFC 9111 §4.2.4: every kind of unreachable origin counts; an origin that answered does not",
          arguments: StoreUnderTest.allCases)
    func whatCountsAsDisconnected(_ kind: StoreUnderTest) async throws {
        for (error, disconnected) in [
            (HTTPTransportError(.connectionLost, "reset"), true), (HTTPTransportError(.hostNotFound, "no such host"), true),
            (HTTPTransportError(.timeout, "no answer"), true), (HTTPTransportError(.invalidResponse, "garbage"), false),
            (HTTPTransportError(.bodyTooLarge, "too large"), false),
        ] {
            try await withScenarioCache(kind, configure: Self.disconnected(.seconds(600))) { cache, origin, clock in
                try await storeThenFail(origin, clock, cache: cache, cacheControl: "max-age=60", staleFor: 10, failure: .failure(error))
                if disconnected {
                    #expect(try await cache.run(Self.request).source == .stale, "\(error)")
                } else {
                    await #expect(throws: CachedNetworkingError.self, "\(error)") { try await cache.run(Self.request) }
                }
            }
        }
        // An error of the transport's own type says nothing of the origin.
        try await withScenarioCache(kind, configure: Self.disconnected(.seconds(600))) { cache, origin, clock in
            try await storeThenFail(
                origin, clock, cache: cache, cacheControl: "max-age=60", staleFor: 10,
                failure: .failure(FakeHTTPTransport.ConnectionRefused()))
            await #expect(throws: CachedNetworkingError.self) { try await cache.run(Self.request) }
        }
    }

    @Test("RFC 9111 §4.2.4: a window as long as Duration allows is served, and stored, without overflow",
          arguments: StoreUnderTest.allCases)
    func unboundedWindow(_ kind: StoreUnderTest) async throws {
        let forever: (inout CachedNetworking.Configuration) -> Void = {
            $0.staleWhenDisconnected = .seconds(Int64.max)
            $0.staleRetention = .seconds(Int64.max)
        }
        try await withScenarioCache(kind, configure: forever) { cache, origin, clock in
            try await storeThenFail(origin, clock, cache: cache, cacheControl: "max-age=60", staleFor: 86_400 * 365)
            let stale = try await cache.run(Self.request)
            #expect(stale.source == .stale)
            #expect(String(buffer: stale.body) == "v1")
        }
    }

    @Test("RFC 9111 §4.2.4: a gateway's 502 or 504 counts as unreachable, and fwd-status says so",
          arguments: StoreUnderTest.allCases)
    func gatewayFailure(_ kind: StoreUnderTest) async throws {
        for status in [502, 504] {
            try await withScenarioCache(kind, configure: Self.disconnected(.seconds(600))) { cache, origin, clock in
                try await storeThenFail(
                    origin, clock, cache: cache, cacheControl: "max-age=60", staleFor: 10,
                    failure: .init(status: .init(code: status), body: "gateway"))
                let stale = try await cache.run(Self.request)
                #expect(stale.source == .stale)
                #expect(String(buffer: stale.body) == "v1")
                #expect(stale.cacheStatus.forwardStatus == status)
                #expect(stale.cacheStatus.detail == "disconnected")
            }
        }
        // A 503 is the origin's own answer, passed on.
        try await withScenarioCache(kind, configure: Self.disconnected(.seconds(600))) { cache, origin, clock in
            try await storeThenFail(
                origin, clock, cache: cache, cacheControl: "max-age=60", staleFor: 10,
                failure: .init(status: .serviceUnavailable, body: "down"))
            let answer = try await cache.run(Self.request)
            #expect(answer.response.status.code == 503)
        }
    }

    @Test("RFC 9111 §4.2.4: must-revalidate, proxy-revalidate, s-maxage and no-cache forbid serving stale",
          arguments: StoreUnderTest.allCases)
    func directivesForbid(_ kind: StoreUnderTest) async throws {
        for cacheControl in ["max-age=60, must-revalidate", "max-age=60, proxy-revalidate", "s-maxage=60", "no-cache"] {
            try await withScenarioCache(kind, configure: Self.disconnected(.seconds(600))) { cache, origin, clock in
                try await storeThenFail(origin, clock, cache: cache, cacheControl: cacheControl, staleFor: 10)
                await #expect(throws: CachedNetworkingError.self, "\(cacheControl)") { try await cache.run(Self.request) }
            }
        }
    }

    @Test("RFC 9111 §4.2.4: off by default, a failure without stale-if-error is the caller's",
          arguments: StoreUnderTest.allCases)
    func offByDefault(_ kind: StoreUnderTest) async throws {
        try await withScenarioCache(kind) { cache, origin, clock in
            try await storeThenFail(origin, clock, cache: cache, cacheControl: "max-age=60", staleFor: 10)
            await #expect(throws: CachedNetworkingError.self) { try await cache.run(Self.request) }
        }
    }

    @Test("RFC 9111 §4.2.4: a request's no-cache asks for a validated response, so no stale one",
          arguments: StoreUnderTest.allCases)
    func requestNoCache(_ kind: StoreUnderTest) async throws {
        try await withScenarioCache(kind, configure: Self.disconnected(.seconds(600))) { cache, origin, clock in
            try await storeThenFail(origin, clock, cache: cache, cacheControl: "max-age=60", staleFor: 10)
            var request = Self.request
            request.headerFields[.cacheControl] = "no-cache"
            await #expect(throws: CachedNetworkingError.self) { try await cache.run(request) }
        }
    }
}
