import CachedNetworking
import CachedNetworkingRedis
import CachedNetworkingTesting
import CachedTestSupport
import Foundation
import HTTPTypes
import Testing

/// `Vary` normalization through the cache over every store: the variant key is worked out from the normalized
/// values when a response is stored and when a request is looked up, and must agree in `MemoryStore` and in the
/// network stores (a live `cached-server` and `redis-server`, started for the suite) alike.
@Suite("Vary normalization over every store", .liveServers)
struct VaryStoreScenarioTests {
    static let url = "https://api.example.com/negotiated"

    /// A cache over a fresh store of `kind` (``withScenarioCache(_:configure:_:)``), with a scripted origin that
    /// echoes the request's `Accept-Encoding` and `Accept-Language`.
    func withCache(
        _ kind: StoreUnderTest, _ body: (CachedNetworking, FakeHTTPTransport) async throws -> Void
    ) async throws {
        try await withScenarioCache(kind) { cache, origin, _ in
            origin.script(Self.url) { request, _ in
                let encoding = request.headerFields[values: .acceptEncoding].joined(separator: "|")
                let language = request.headerFields[values: .acceptLanguage].joined(separator: "|")
                return .init(
                    headerFields: [.cacheControl: "max-age=600", .vary: "Accept-Encoding, Accept-Language"],
                    body: "\(encoding) / \(language)")
            }
            try await body(cache, origin)
        }
    }

    func request(_ pairs: [(HTTPField.Name, String)]) -> HTTPRequest {
        var fields = HTTPFields()
        for (name, value) in pairs { fields.append(HTTPField(name: name, value: value)) }
        return HTTPRequest(method: .get, scheme: "https", authority: "api.example.com", path: "/negotiated", headerFields: fields)
    }

    @Test(
        "RFC 9111 §4.1: Vary'd fields that differ only in whitespace, case, field lines and weight order share a variant",
        arguments: StoreUnderTest.allCases)
    func normalizedVariants(_ kind: StoreUnderTest) async throws {
        try await withCache(kind) { cache, origin in
            let first = try await cache.run(request([(.acceptEncoding, "gzip, br"), (.acceptLanguage, "en, fr;q=0.5")]))
            #expect(first.source == .network)
            #expect(first.cacheStatus.stored)

            // The same preferences, written otherwise: one variant.
            for spelling in [
                [(HTTPField.Name.acceptEncoding, "BR ,GZIP"), (.acceptLanguage, "fr;q=0.50,EN")],
                [(.acceptEncoding, "br"), (.acceptEncoding, "gzip"), (.acceptLanguage, " en ; q=1 , fr ; q=0.5 ")],
            ] {
                let hit = try await cache.run(request(spelling))
                #expect(hit.source == .cache, "\(spelling)")
                #expect(String(buffer: hit.body) == "gzip, br / en, fr;q=0.5")
            }

            // Equal weights in another order may mean another preference (RFC 9110 §12.5.4): another variant.
            let other = try await cache.run(request([(.acceptEncoding, "gzip, br"), (.acceptLanguage, "fr, en")]))
            #expect(other.source == .network)
            #expect(other.cacheStatus.forward == .varyMiss)
            let otherHit = try await cache.run(request([(.acceptEncoding, "br,gzip"), (.acceptLanguage, "FR,EN")]))
            #expect(otherHit.source == .cache)
            #expect(String(buffer: otherHit.body) == "gzip, br / fr, en")
            #expect(origin.requestCount(for: Self.url) == 2)
        }
    }
}
