import CachedNetworking
import CachedNetworkingTesting
import HTTPTypes
import Testing

/// RFC rules followed to the letter, through the whole cache: a scripted origin, an in-memory store and a clock
/// moved by hand.
@Suite("RFC conformance through the cache")
struct ConformanceScenarioTests {
    static let url = "https://api.example.com/doc"
    static let request = HTTPRequest(method: .get, scheme: "https", authority: "api.example.com", path: "/doc")

    /// A cache over an in-memory store with a scripted origin and a manual clock.
    static func makeCache() -> (cache: CachedNetworking, origin: FakeHTTPTransport, clock: ManualCacheClock) {
        let clock = ManualCacheClock()
        let origin = FakeHTTPTransport()
        var configuration = CachedNetworking.Configuration()
        configuration.clock = clock
        let cache = CachedNetworking(store: InMemoryCacheStore(clock: clock), transport: origin, configuration: configuration)
        return (cache, origin, clock)
    }

    /// `pairs` as header fields.
    static func fields(_ pairs: [(String, String)]) -> HTTPFields {
        var fields = HTTPFields()
        for (name, value) in pairs { fields.append(HTTPField(name: HTTPField.Name(name)!, value: value)) }
        return fields
    }

    @Test("RFC 9111 §5.3: an Expires in a zone other than GMT is invalid, so the response is stale")
    func expiresInAnotherZone() async throws {
        let (cache, origin, clock) = Self.makeCache()
        // A Last-Modified long ago would give a heuristic lifetime of a day: an invalid Expires rules it out.
        origin.script(Self.url, replies: [
            .init(headerFields: Self.fields([
                ("Date", HTTPDate.format(clock.now())), ("Expires", "Thu, 18 Aug 2050 02:01:18 UTC"),
                ("Last-Modified", "Sun, 06 Nov 1994 08:49:37 GMT"),
            ]), body: "v1"),
        ])
        #expect(try await cache.run(Self.request).source == .network)
        let second = try await cache.run(Self.request)
        #expect(second.source != .cache && second.source != .stale, "\(second.source)")
        #expect(origin.requestCount(for: Self.url) == 2)
        // It was stored (it has a validator) and validated: the second request was conditional.
        #expect(origin.requests.last?.request.headerFields[.ifModifiedSince] == "Sun, 06 Nov 1994 08:49:37 GMT")
    }

    @Test("RFC 9111 §5.1: a list-valued Age (two intermediaries appended) counts its first member")
    func listValuedAge() async throws {
        let (cache, origin, clock) = Self.makeCache()
        origin.script(Self.url, replies: [
            .init(headerFields: Self.fields([
                ("Date", HTTPDate.format(clock.now())), ("Cache-Control", "max-age=10000"), ("Age", "7200, 0"),
            ]), body: "v1"),
        ])
        _ = try await cache.run(Self.request)
        clock.advance(by: .seconds(5))
        let hit = try await cache.run(Self.request)
        #expect(hit.source == .cache)
        #expect(hit.headerFields[.age] == "7205")
        #expect(hit.cacheStatus.timeToLive == 2795)
    }

    @Test("RFC 9110 §7.6.1: hop-by-hop fields are removed from the answer on a miss, a hit and a forwarded request")
    func hopByHopOnEveryAnswer() async throws {
        let (cache, origin, clock) = Self.makeCache()
        let hopByHop: [(String, String)] = [
            ("Connection", "close, X-Hop-Session"), ("X-Hop-Session", "abc"), ("Keep-Alive", "timeout=5"),
            ("Transfer-Encoding", "chunked"), ("TE", "trailers"), ("Upgrade", "h2c"),
            ("Proxy-Authenticate", "Basic realm=\"x\""), ("Proxy-Authorization", "Basic eDp5"),
            ("Proxy-Connection", "keep-alive"),
        ]
        let names = Set(hopByHop.map { $0.0.lowercased() })
        origin.script(Self.url, replies: [
            .init(headerFields: Self.fields([("Date", HTTPDate.format(clock.now())), ("Cache-Control", "max-age=60"),
                ("Content-Type", "text/plain")] + hopByHop), body: "v1"),
        ])
        origin.script(Self.url, method: .post, replies: [.init(status: .ok, headerFields: Self.fields(hopByHop), body: "done")])

        let miss = try await cache.run(Self.request)
        let hit = try await cache.run(Self.request)
        var post = Self.request
        post.method = .post
        let forwarded = try await cache.run(post, body: .init(string: "x"))
        #expect(miss.source == .network && hit.source == .cache && forwarded.source == .network)
        for answer in [miss, hit, forwarded] {
            let left = answer.headerFields.map(\.name.canonicalName).filter(names.contains)
            #expect(left.isEmpty, "\(answer.source): \(left)")
        }
        #expect(miss.headerFields[.contentType] == "text/plain" && hit.headerFields[.contentType] == "text/plain")
    }

    @Test("RFC 9110 §6.6.1: a Date that is not an HTTP-date is replaced with the time the response was received")
    func invalidDateReplaced() async throws {
        let (cache, origin, clock) = Self.makeCache()
        origin.script(Self.url, replies: [
            .init(headerFields: Self.fields([("Date", "Mon, 01 Jan 2024 00:00:00 UTC"), ("Cache-Control", "max-age=60")]),
                  body: "v1"),
        ])
        let miss = try await cache.run(Self.request)
        #expect(miss.headerFields[values: .date] == [HTTPDate.format(clock.now())])
        clock.advance(by: .seconds(10))
        let hit = try await cache.run(Self.request)
        #expect(hit.headerFields[values: .date] == miss.headerFields[values: .date])
        #expect(hit.headerFields[.age] == "10")
    }

    @Test("RFC 9110 §13.1.3: a stored Last-Modified that is not an HTTP-date is not sent as If-Modified-Since")
    func invalidLastModifiedNotSent() async throws {
        let (cache, origin, clock) = Self.makeCache()
        origin.script(Self.url, replies: [
            .init(headerFields: Self.fields([
                ("Date", HTTPDate.format(clock.now())), ("Cache-Control", "max-age=10"),
                ("Last-Modified", "Sun, 06 Nov 1994 08:49:37 UTC"),
            ]), body: "v1"),
        ])
        _ = try await cache.run(Self.request)
        clock.advance(by: .seconds(11))
        _ = try await cache.run(Self.request)
        #expect(origin.requestCount(for: Self.url) == 2)
        #expect(origin.requests.last?.request.headerFields[.ifModifiedSince] == nil)
    }
}
