import CachedNetworking
import CachedNetworkingTesting
import CachedTestSupport
import HTTPCaching
import HTTPTypes
import NIOCore
import Synchronization
import Testing

/// Partial responses stored, combined and served (RFC 9111 §3.3, §3.4), the same through `MemoryStore` and the
/// network stores (a live `cached-server` and `redis-server`, started for the suite).
@Suite("Partial responses over every store", .liveServers)
struct PartialStoreScenarioTests {
    static let url = "https://api.example.com/letters"
    static let letters = "abcdefghijklmnopqrst"

    static func request(_ pairs: [(HTTPField.Name, String)] = []) -> HTTPRequest {
        var fields = HTTPFields()
        for (name, value) in pairs { fields.append(HTTPField(name: name, value: value)) }
        return HTTPRequest(method: .get, scheme: "https", authority: "api.example.com", path: "/letters", headerFields: fields)
    }

    static func range(_ value: String) -> HTTPRequest { request([(.range, value)]) }

    /// The representation the origin serves, changed by a test to make a new one.
    struct Representation: Sendable {
        var body = PartialStoreScenarioTests.letters
        var etag = "\"v1\""
        var cacheControl = "max-age=600"
    }

    /// An origin that answers a GET of ``url`` as a server that supports ranges does (RFC 9110 §14): one
    /// satisfiable range gets a `206`, none a `416`, no `Range` (or several ranges) the whole `200`.
    final class RangeOrigin: Sendable {
        let representation = Mutex(Representation())

        func update(_ change: (inout Representation) -> Void) { representation.withLock { change(&$0) } }

        func install(on transport: FakeHTTPTransport) {
            transport.script(PartialStoreScenarioTests.url) { request, _ in
                let current = self.representation.withLock { $0 }
                let bytes = Array(current.body.utf8)
                var fields: HTTPFields = [.cacheControl: current.cacheControl, .eTag: current.etag]
                guard let ranges = ByteRanges(request) else {
                    return .init(headerFields: fields, body: current.body)
                }
                let satisfiable = ranges.satisfiable(length: bytes.count)
                if satisfiable.isEmpty {
                    return .init(
                        status: .rangeNotSatisfiable,
                        headerFields: [.contentRange: "bytes */\(bytes.count)", .cacheControl: current.cacheControl])
                }
                guard satisfiable.count == 1, let range = satisfiable.first else {
                    return .init(headerFields: fields, body: current.body)
                }
                fields[.contentRange] = "bytes \(range.lowerBound)-\(range.upperBound)/\(bytes.count)"
                return .init(
                    status: .partialContent, headerFields: fields,
                    body: String(decoding: bytes[range], as: UTF8.self))
            }
        }
    }

    /// Runs `body` with a cache over a store of `kind` whose origin is a ``RangeOrigin``.
    func withRangeOrigin(
        _ kind: StoreUnderTest,
        _ body: (CachedNetworking, FakeHTTPTransport, RangeOrigin, ManualCacheClock) async throws -> Void
    ) async throws {
        try await withScenarioCache(kind) { cache, transport, clock in
            let origin = RangeOrigin()
            origin.install(on: transport)
            try await body(cache, transport, origin, clock)
        }
    }

    @Test("RFC 9111 §3.3: a 206 with a known length and a strong ETag is stored; a range within it is a hit",
          arguments: StoreUnderTest.allCases)
    func storedAndServed(_ kind: StoreUnderTest) async throws {
        try await withRangeOrigin(kind) { cache, transport, _, _ in
            let first = try await cache.run(Self.range("bytes=2-9"))
            #expect(first.response.status == .partialContent)
            #expect(String(buffer: first.body) == "cdefghij")
            #expect(first.source == .network)
            #expect(first.cacheStatus.stored)
            #expect(first.cacheStatus.forward == .uriMiss)
            for (range, part, contentRange) in [
                ("bytes=3-5", "def", "bytes 3-5/20"), ("bytes=2-9", "cdefghij", "bytes 2-9/20"),
                ("bytes=9-9", "j", "bytes 9-9/20"), ("bytes=30-40, 4-4", "e", "bytes 4-4/20"),
            ] {
                let answer = try await cache.run(Self.range(range))
                #expect(answer.response.status == .partialContent, "\(range)")
                #expect(String(buffer: answer.body) == part, "\(range)")
                #expect(answer.response.headerFields[.contentRange] == contentRange, "\(range)")
                #expect(answer.response.headerFields[.contentLength] == String(part.utf8.count), "\(range)")
                #expect(answer.response.headerFields[.eTag] == "\"v1\"", "\(range)")
                #expect(answer.response.headerFields[.age] != nil, "\(range)")
                #expect(answer.source == .cache, "\(range)")
                #expect(answer.cacheStatus.hit, "\(range)")
            }
            #expect(transport.requestCount(for: Self.url) == 1)
        }
    }

    @Test("RFC 9111 §3.3: a range the partial does not wholly cover goes to the origin (fwd=partial), as it is",
          arguments: StoreUnderTest.allCases)
    func uncoveredGoesToOrigin(_ kind: StoreUnderTest) async throws {
        try await withRangeOrigin(kind) { cache, transport, _, _ in
            _ = try await cache.run(Self.range("bytes=0-4"))
            for range in ["bytes=3-7", "bytes=-2", "bytes=0-1, 3-4"] {
                let answer = try await cache.run(Self.range(range))
                #expect(answer.source == .network, "\(range)")
                #expect(answer.cacheStatus.forward == .partial, "\(range)")
                #expect(transport.requests.last?.request.headerFields[.range] == range, "\(range)")
            }
            #expect(transport.requestCount(for: Self.url) == 4)
        }
    }

    @Test("RFC 9111 §3.4: a 206 with the same strong ETag is combined with the stored parts",
          arguments: StoreUnderTest.allCases)
    func combined(_ kind: StoreUnderTest) async throws {
        try await withRangeOrigin(kind) { cache, transport, origin, _ in
            _ = try await cache.run(Self.range("bytes=0-4"))
            _ = try await cache.run(Self.range("bytes=10-12"))
            // The newer response's header fields replace the stored ones.
            origin.update { $0.cacheControl = "max-age=900" }
            let bridge = try await cache.run(Self.range("bytes=4-10"))
            #expect(bridge.cacheStatus.stored)
            #expect(transport.requestCount(for: Self.url) == 3)
            let across = try await cache.run(Self.range("bytes=1-11"))
            #expect(across.source == .cache)
            #expect(String(buffer: across.body) == "bcdefghijkl")
            #expect(across.response.headerFields[.contentRange] == "bytes 1-11/20")
            #expect(across.response.headerFields[.cacheControl] == "max-age=900")
            #expect(transport.requestCount(for: Self.url) == 3)
            // Not complete yet (13-19 missing): a full GET goes to the origin.
            let whole = try await cache.run(Self.request())
            #expect(whole.source == .network)
            #expect(whole.cacheStatus.forward == .partial)
        }
    }

    @Test("RFC 9111 §3.4: parts that cover the whole representation become the complete stored response",
          arguments: StoreUnderTest.allCases)
    func completed(_ kind: StoreUnderTest) async throws {
        try await withRangeOrigin(kind) { cache, transport, _, _ in
            _ = try await cache.run(Self.range("bytes=10-"))
            _ = try await cache.run(Self.range("bytes=0-9"))
            let whole = try await cache.run(Self.request())
            #expect(whole.response.status == .ok)
            #expect(whole.source == .cache)
            #expect(String(buffer: whole.body) == Self.letters)
            #expect(whole.response.headerFields[.contentLength] == "20")
            #expect(whole.response.headerFields[.contentRange] == nil)
            let suffix = try await cache.run(Self.range("bytes=-3"))
            #expect(String(buffer: suffix.body) == "rst")
            #expect(suffix.response.headerFields[.contentRange] == "bytes 17-19/20")
            // Complete now: an unsatisfiable range gets the cache's own 416.
            let refused = try await cache.run(Self.range("bytes=20-"))
            #expect(refused.response.status == .rangeNotSatisfiable)
            #expect(refused.response.headerFields[.contentRange] == "bytes */20")
            #expect(transport.requestCount(for: Self.url) == 2)
        }
    }

    @Test("RFC 9111 §3.4: a 206 with another validator replaces the stored partial", arguments: StoreUnderTest.allCases)
    func otherValidatorReplaces(_ kind: StoreUnderTest) async throws {
        try await withRangeOrigin(kind) { cache, transport, origin, _ in
            _ = try await cache.run(Self.range("bytes=0-9"))
            origin.update {
                $0.body = "ABCDEFGHIJKLMNOPQRST"
                $0.etag = "\"v2\""
            }
            let newer = try await cache.run(Self.range("bytes=10-19"))
            #expect(String(buffer: newer.body) == "KLMNOPQRST")
            #expect(newer.cacheStatus.stored)
            // The v1 bytes are gone: not combined, not served.
            let old = try await cache.run(Self.range("bytes=2-3"))
            #expect(old.source == .network)
            #expect(String(buffer: old.body) == "CD")
            let combined = try await cache.run(Self.range("bytes=2-3"))
            #expect(combined.source == .cache)
            #expect(String(buffer: combined.body) == "CD")
            #expect(combined.response.headerFields[.eTag] == "\"v2\"")
            let tail = try await cache.run(Self.range("bytes=15-16"))
            #expect(tail.source == .cache)
            #expect(String(buffer: tail.body) == "PQ")
            #expect(transport.requestCount(for: Self.url) == 3)
        }
    }

    @Test("RFC 9111 §3.3: a full GET is never answered from a partial; its 200 replaces it",
          arguments: StoreUnderTest.allCases)
    func fullRequestNotFromPartial(_ kind: StoreUnderTest) async throws {
        try await withRangeOrigin(kind) { cache, transport, _, _ in
            _ = try await cache.run(Self.range("bytes=0-9"))
            let whole = try await cache.run(Self.request())
            #expect(whole.response.status == .ok)
            #expect(whole.source == .network)
            #expect(whole.cacheStatus.forward == .partial)
            #expect(whole.cacheStatus.stored)
            #expect(String(buffer: whole.body) == Self.letters)
            let again = try await cache.run(Self.request())
            #expect(again.source == .cache)
            #expect(String(buffer: again.body) == Self.letters)
            let part = try await cache.run(Self.range("bytes=12-13"))
            #expect(part.source == .cache)
            #expect(String(buffer: part.body) == "mn")
            #expect(transport.requestCount(for: Self.url) == 2)
        }
    }

    @Test("RFC 9111 §3.3, §4.2: a stale partial is not served; the origin's 206 refreshes it",
          arguments: StoreUnderTest.allCases)
    func stalePartial(_ kind: StoreUnderTest) async throws {
        try await withRangeOrigin(kind) { cache, transport, origin, clock in
            origin.update { $0.cacheControl = "max-age=60" }
            _ = try await cache.run(Self.range("bytes=0-9"))
            clock.advance(by: .seconds(120))
            let stale = try await cache.run(Self.range("bytes=2-3"))
            #expect(stale.source == .network)
            #expect(stale.cacheStatus.forward == .partial)
            // The same representation: combined, fresh again.
            let fresh = try await cache.run(Self.range("bytes=5-6"))
            #expect(fresh.source == .cache)
            #expect(String(buffer: fresh.body) == "fg")
            // Within max-stale it may be served stale.
            clock.advance(by: .seconds(120))
            let allowed = try await cache.run(Self.request([(.range, "bytes=0-1"), (.cacheControl, "max-stale=600")]))
            #expect(allowed.source == .stale)
            #expect(String(buffer: allowed.body) == "ab")
            #expect(transport.requestCount(for: Self.url) == 2)
        }
    }

    @Test("RFC 9110 §13.1.5: If-Range is evaluated against the stored partial's validator",
          arguments: StoreUnderTest.allCases)
    func ifRangeOnPartial(_ kind: StoreUnderTest) async throws {
        try await withRangeOrigin(kind) { cache, transport, _, _ in
            _ = try await cache.run(Self.range("bytes=0-9"))
            let matching = try await cache.run(Self.request([(.range, "bytes=1-2"), (.ifRange, "\"v1\"")]))
            #expect(matching.source == .cache)
            #expect(String(buffer: matching.body) == "bc")
            let other = try await cache.run(Self.request([(.range, "bytes=1-2"), (.ifRange, "\"v0\"")]))
            #expect(other.source == .network)
            #expect(transport.requests.last?.request.headerFields[.ifRange] == "\"v0\"")
            #expect(transport.requestCount(for: Self.url) == 2)
        }
    }

    @Test("RFC 9110 §15.5.17: the origin's 416 is passed on and never stored", arguments: StoreUnderTest.allCases)
    func unsatisfiableFromOrigin(_ kind: StoreUnderTest) async throws {
        try await withRangeOrigin(kind) { cache, transport, _, _ in
            _ = try await cache.run(Self.range("bytes=0-9"))
            // RFC 9111 §3.3: the partial holds no byte of it, so it does not answer; the origin does.
            let refused = try await cache.run(Self.range("bytes=25-"))
            #expect(refused.response.status == .rangeNotSatisfiable)
            #expect(refused.response.headerFields[.contentRange] == "bytes */20")
            #expect(refused.source == .network)
            #expect(!refused.cacheStatus.stored)
            // Neither the 416 nor anything else answers the full GET from the cache.
            let whole = try await cache.run(Self.request())
            #expect(whole.response.status == .ok)
            #expect(whole.source == .network)
            #expect(String(buffer: whole.body) == Self.letters)
            #expect(transport.requestCount(for: Self.url) == 3)
        }
    }

    /// 206 responses that are passed on and not stored.
    enum Unstored: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case weakETag, noETag, unknownLength, multipart, multipartWithContentRange, vary, lengthMismatch, noStore

        var testDescription: String { rawValue }

        var reply: FakeHTTPTransport.Reply {
            var fields: HTTPFields = [.cacheControl: "max-age=600", .eTag: "\"v1\"", .contentRange: "bytes 2-5/20"]
            var body = "cdef"
            switch self {
            case .weakETag: fields[.eTag] = "W/\"v1\""
            case .noETag: fields[.eTag] = nil
            case .unknownLength: fields[.contentRange] = "bytes 2-5/*"
            case .multipart:
                fields[.contentRange] = nil
                fields[.contentType] = "multipart/byteranges; boundary=SEP"
                body = "--SEP\r\nContent-Range: bytes 2-5/20\r\n\r\ncdef\r\n--SEP--\r\n"
            case .multipartWithContentRange:
                // Invalid (a multipart 206 has no Content-Range of its own), even with a body of the right length.
                fields[.contentType] = "multipart/byteranges; boundary=SEP"
            case .vary: fields[.vary] = "Accept"
            case .lengthMismatch: fields[.contentRange] = "bytes 2-9/20"
            case .noStore: fields[.cacheControl] = "no-store"
            }
            return .init(status: .partialContent, headerFields: fields, body: body)
        }
    }

    @Test("RFC 9111 §3.3: a 206 without a strong ETag, of unknown length, multipart, with Vary, or inconsistent is not stored",
          arguments: StoreUnderTest.allCases, Unstored.allCases)
    func notStored(_ kind: StoreUnderTest, _ reply: Unstored) async throws {
        try await withScenarioCache(kind) { cache, transport, _ in
            transport.script(Self.url, replies: [reply.reply])
            let first = try await cache.run(Self.range("bytes=2-5"))
            #expect(first.response.status == .partialContent)
            #expect(!first.cacheStatus.stored)
            let second = try await cache.run(Self.range("bytes=2-5"))
            #expect(second.source == .network)
            #expect(second.cacheStatus.forward == .uriMiss)
            #expect(transport.requestCount(for: Self.url) == 2)
        }
    }

    @Test("RFC 9111 §3.3: the parts count against maximumStoredBodySize", arguments: StoreUnderTest.allCases)
    func sizeBound(_ kind: StoreUnderTest) async throws {
        try await withScenarioCache(kind, configure: { $0.maximumStoredBodySize = 8 }) { cache, transport, _ in
            let origin = RangeOrigin()
            origin.install(on: transport)
            _ = try await cache.run(Self.range("bytes=0-4"))
            let within = try await cache.run(Self.range("bytes=1-2"))
            #expect(within.source == .cache)
            // 5 + 5 bytes would be over the limit: not stored, and the stored part stays.
            let over = try await cache.run(Self.range("bytes=10-14"))
            #expect(!over.cacheStatus.stored)
            let stillThere = try await cache.run(Self.range("bytes=3-4"))
            #expect(stillThere.source == .cache)
            let notKept = try await cache.run(Self.range("bytes=10-11"))
            #expect(notKept.source == .network)
            #expect(transport.requestCount(for: Self.url) == 3)
        }
    }

    /// A transport that holds every request until `count` have arrived, then passes them all to `next`: the
    /// requests' cache lookups have then all been made before any answer is stored.
    actor Barrier: HTTPTransport {
        let count: Int
        let next: FakeHTTPTransport
        private var arrived = 0
        private var waiting: [CheckedContinuation<Void, Never>] = []

        init(count: Int, next: FakeHTTPTransport) {
            self.count = count
            self.next = next
        }

        func send(_ request: HTTPRequest, body: ByteBuffer?) async throws -> HTTPTransportResponse {
            arrived += 1
            if arrived < count {
                await withCheckedContinuation { waiting.append($0) }
            } else {
                for continuation in waiting { continuation.resume() }
                waiting = []
            }
            return try await next.send(request, body: body)
        }
    }

    @Test("RFC 9111 §3.4: range requests fetched at the same time each add their part; a 206 names no stored entry",
          arguments: StoreUnderTest.allCases)
    func concurrentParts(_ kind: StoreUnderTest) async throws {
        try await withRangeOrigin(kind) { cache, transport, _, _ in
            let barrier = Barrier(count: 4, next: transport)
            let answers = try await withThrowingTaskGroup(of: CachedResponse.self) { group in
                for range in ["bytes=0-4", "bytes=5-9", "bytes=10-14", "bytes=15-19"] {
                    group.addTask { try await cache.run(Self.range(range), transport: barrier) }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            for answer in answers {
                #expect(answer.response.status == .partialContent)
                #expect(answer.source == .network)
                #expect(answer.entry == nil, "a part's answer names the stored entry")
            }
            // Every part was combined: the whole response is stored.
            let whole = try await cache.run(Self.request())
            #expect(whole.response.status == .ok)
            #expect(whole.source == .cache)
            #expect(String(buffer: whole.body) == Self.letters)
            #expect(transport.requestCount(for: Self.url) == 4)
        }
    }

    @Test("RFC 9111 §3.4: combining keeps the stored fields the new part lacks; a part's Content-Digest is dropped",
          arguments: StoreUnderTest.allCases)
    func combinedFields(_ kind: StoreUnderTest) async throws {
        try await withScenarioCache(kind) { cache, transport, _ in
            let digest = HTTPField.Name("Content-Digest")!
            transport.script(Self.url) { request, _ in
                let first = request.headerFields[.range] == "bytes=0-9"
                var fields: HTTPFields = [
                    .cacheControl: "max-age=600", .eTag: "\"v1\"",
                    .contentRange: first ? "bytes 0-9/20" : "bytes 10-19/20",
                ]
                fields[HTTPField.Name(first ? "X-First" : "X-Second")!] = "yes"
                fields[digest] = first ? "sha-256=:first=:" : "sha-256=:second=:"
                let letters = Array(Self.letters.utf8)
                return .init(
                    status: .partialContent, headerFields: fields,
                    body: String(decoding: first ? letters[0...9] : letters[10...19], as: UTF8.self))
            }
            _ = try await cache.run(Self.range("bytes=0-9"))
            let slice = try await cache.run(Self.range("bytes=2-3"))
            #expect(slice.source == .cache)
            #expect(slice.response.headerFields[digest] == nil, "a slice kept its part's digest")
            _ = try await cache.run(Self.range("bytes=10-19"))
            let whole = try await cache.run(Self.request())
            #expect(whole.source == .cache)
            #expect(String(buffer: whole.body) == Self.letters)
            #expect(whole.response.headerFields[HTTPField.Name("X-First")!] == "yes")
            #expect(whole.response.headerFields[HTTPField.Name("X-Second")!] == "yes")
            #expect(whole.response.headerFields[digest] == nil, "the whole kept a part's digest")
        }
    }
}
