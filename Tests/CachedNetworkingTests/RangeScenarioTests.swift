import CachedNetworking
import CachedNetworkingTesting
import CachedTestSupport
import HTTPCaching
import HTTPTypes
import Testing

/// Range requests answered from stored complete responses, the same through `MemoryStore` and the network
/// stores (a live `cached-server` and `redis-server`, started for the suite).
@Suite("Range requests over every store", .liveServers)
struct RangeScenarioTests {
    static let url = "https://api.example.com/digits"
    static let digits = "0123456789"

    static func request(_ pairs: [(HTTPField.Name, String)] = [], method: HTTPRequest.Method = .get) -> HTTPRequest {
        var fields = HTTPFields()
        for (name, value) in pairs { fields.append(HTTPField(name: name, value: value)) }
        return HTTPRequest(method: method, scheme: "https", authority: "api.example.com", path: "/digits", headerFields: fields)
    }

    /// Stores the digits with `cacheControl`, then runs `body`.
    func withStoredDigits(
        _ kind: StoreUnderTest, cacheControl: String = "max-age=600",
        _ body: (CachedNetworking, FakeHTTPTransport, ManualCacheClock) async throws -> Void
    ) async throws {
        try await withScenarioCache(kind) { cache, origin, clock in
            origin.script(Self.url, replies: [
                .init(headerFields: [.cacheControl: cacheControl, .eTag: "\"v1\""], body: Self.digits)
            ])
            let first = try await cache.run(Self.request())
            #expect(first.cacheStatus.stored)
            try await body(cache, origin, clock)
        }
    }

    @Test("RFC 9110 §14.2: one satisfiable range of a stored response is a 206 with its Content-Range",
          arguments: StoreUnderTest.allCases)
    func singleRange(_ kind: StoreUnderTest) async throws {
        try await withStoredDigits(kind) { cache, origin, _ in
            for (range, part, contentRange) in [
                ("bytes=2-5", "2345", "bytes 2-5/10"), ("bytes=-3", "789", "bytes 7-9/10"),
                ("bytes=8-", "89", "bytes 8-9/10"), ("bytes=0-99", Self.digits, "bytes 0-9/10"),
                ("bytes=20-30, 1-1", "1", "bytes 1-1/10"),
            ] {
                let answer = try await cache.run(Self.request([(.range, range)]))
                #expect(answer.response.status == .partialContent, "\(range)")
                #expect(String(buffer: answer.body) == part, "\(range)")
                #expect(answer.response.headerFields[.contentRange] == contentRange, "\(range)")
                #expect(answer.response.headerFields[.contentLength] == String(part.utf8.count), "\(range)")
                #expect(answer.response.headerFields[.eTag] == "\"v1\"")
                #expect(answer.source == .cache)
            }
            #expect(origin.requestCount(for: Self.url) == 1)
        }
    }

    @Test("RFC 9110 §15.5.17: no satisfiable range is a 416 naming the length", arguments: StoreUnderTest.allCases)
    func unsatisfiable(_ kind: StoreUnderTest) async throws {
        try await withStoredDigits(kind) { cache, origin, _ in
            for range in ["bytes=10-", "bytes=-0", "bytes=10-20, 30-"] {
                let answer = try await cache.run(Self.request([(.range, range)]))
                #expect(answer.response.status == .rangeNotSatisfiable, "\(range)")
                #expect(answer.response.headerFields[.contentRange] == "bytes */10")
                #expect(answer.body.readableBytes == 0)
                #expect(answer.response.headerFields[.cacheControl] == nil)
            }
            #expect(origin.requestCount(for: Self.url) == 1)
        }
    }

    @Test("RFC 9110 §14.2: several ranges, an invalid Range or another unit get the whole response",
          arguments: StoreUnderTest.allCases)
    func ignoredRanges(_ kind: StoreUnderTest) async throws {
        try await withStoredDigits(kind) { cache, origin, _ in
            for range in ["bytes=0-1, 5-6", "bytes=5-1", "lines=1-2"] {
                let answer = try await cache.run(Self.request([(.range, range)]))
                #expect(answer.response.status == .ok, "\(range)")
                #expect(String(buffer: answer.body) == Self.digits, "\(range)")
                #expect(answer.source == .cache, "\(range)")
            }
            #expect(origin.requestCount(for: Self.url) == 1)
        }
    }

    @Test("RFC 9110 §13.1.5: If-Range with the stored strong ETag gets the range, another one the whole",
          arguments: StoreUnderTest.allCases)
    func ifRange(_ kind: StoreUnderTest) async throws {
        try await withStoredDigits(kind) { cache, origin, _ in
            let matching = try await cache.run(Self.request([(.range, "bytes=0-1"), (.ifRange, "\"v1\"")]))
            #expect(matching.response.status == .partialContent)
            #expect(String(buffer: matching.body) == "01")
            for condition in ["\"v0\"", "W/\"v1\"", "Mon, 01 Jan 2024 00:00:00 GMT"] {
                let other = try await cache.run(Self.request([(.range, "bytes=0-1"), (.ifRange, condition)]))
                #expect(other.response.status == .ok, "\(condition)")
                #expect(String(buffer: other.body) == Self.digits, "\(condition)")
            }
            // If-Range without Range is ignored.
            let alone = try await cache.run(Self.request([(.ifRange, "\"v0\"")]))
            #expect(alone.response.status == .ok)
            #expect(alone.source == .cache)
            #expect(origin.requestCount(for: Self.url) == 1)
        }
    }

    @Test("RFC 9110 §13.2.2: If-None-Match is evaluated before Range", arguments: StoreUnderTest.allCases)
    func conditionsBeforeRange(_ kind: StoreUnderTest) async throws {
        try await withStoredDigits(kind) { cache, origin, _ in
            let current = try await cache.run(Self.request([(.range, "bytes=0-1"), (.ifNoneMatch, "\"v1\"")]))
            #expect(current.response.status == .notModified)
            let other = try await cache.run(Self.request([(.range, "bytes=0-1"), (.ifNoneMatch, "\"v0\"")]))
            #expect(other.response.status == .partialContent)
            #expect(String(buffer: other.body) == "01")
            #expect(origin.requestCount(for: Self.url) == 1)
        }
    }

    @Test("RFC 9111 §4.3.1: a stale stored response is validated with the cache's own validators, then cut",
          arguments: StoreUnderTest.allCases)
    func staleValidatedThenCut(_ kind: StoreUnderTest) async throws {
        try await withStoredDigits(kind, cacheControl: "max-age=60") { cache, origin, clock in
            origin.script(Self.url, replies: [.init(status: .notModified, headerFields: [.cacheControl: "max-age=60", .eTag: "\"v1\""])])
            clock.advance(by: .seconds(120))
            let answer = try await cache.run(Self.request([(.range, "bytes=3-4")]))
            #expect(answer.response.status == .partialContent)
            #expect(String(buffer: answer.body) == "34")
            let validation = try #require(origin.requests.last)
            #expect(validation.request.headerFields[.range] == nil)
            #expect(validation.request.headerFields[.ifNoneMatch] == "\"v1\"")
        }
    }

    @Test("RFC 9111 §3.3: on a miss the range request goes to the origin as it is; its 206 is passed on",
          arguments: StoreUnderTest.allCases)
    func missForwarded(_ kind: StoreUnderTest) async throws {
        try await withScenarioCache(kind) { cache, origin, _ in
            origin.script(Self.url) { request, _ in
                guard request.headerFields[.range] == "bytes=1-2" else {
                    return .init(headerFields: [.cacheControl: "max-age=600"], body: Self.digits)
                }
                return .init(
                    status: .partialContent,
                    headerFields: [.cacheControl: "max-age=600", .contentRange: "bytes 1-2/10"], body: "12")
            }
            let part = try await cache.run(Self.request([(.range, "bytes=1-2")]))
            #expect(part.response.status == .partialContent)
            #expect(String(buffer: part.body) == "12")
            #expect(part.source == .network)
            #expect(!part.cacheStatus.stored)
            // Nothing was stored (the 206 has no strong validator): the whole is fetched next, then serves ranges.
            let whole = try await cache.run(Self.request())
            #expect(whole.source == .network)
            let cut = try await cache.run(Self.request([(.range, "bytes=1-2")]))
            #expect(cut.source == .cache)
            #expect(String(buffer: cut.body) == "12")
            #expect(origin.requestCount(for: Self.url) == 2)
        }
    }

    @Test("RFC 9110 §14.2: an origin that ignores Range on a miss is cut by the cache",
          arguments: StoreUnderTest.allCases)
    func originIgnoresRange(_ kind: StoreUnderTest) async throws {
        try await withScenarioCache(kind) { cache, origin, _ in
            origin.script(Self.url, replies: [.init(headerFields: [.cacheControl: "max-age=600"], body: Self.digits)])
            let part = try await cache.run(Self.request([(.range, "bytes=-2")]))
            #expect(part.response.status == .partialContent)
            #expect(String(buffer: part.body) == "89")
            #expect(part.response.headerFields[.contentRange] == "bytes 8-9/10")
        }
    }
}
