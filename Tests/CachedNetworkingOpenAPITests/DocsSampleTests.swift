// The sample of docs/sdk.md's "Clients generated from OpenAPI", compiled and run here so that it stays correct.
import CachedNetworking
import CachedNetworkingOpenAPI
import CachedNetworkingTesting
import CachedOriginSupport
import Foundation
import OpenAPIAsyncHTTPClient
import Testing

/// The items service, through the cache that this service's processes share.
///
/// `Client` is the client swift-openapi-generator made from the items service's openapi.yaml; `store` is the shared
/// store (a `RESPStore` of `CachedNetworkingRedis` behind a `FailOpenStore`, say).
struct Items {
    let cache: CachedNetworking
    let client: Client

    init(serverURL: URL, store: any CacheStore) {
        cache = CachedNetworking(store: store)
        client = Client(
            serverURL: serverURL,
            transport: AsyncHTTPClientTransport(),
            middlewares: [CachingMiddleware(cache: cache)])
    }

    /// The items' names: from the origin the first time, then from the cache while the response is fresh.
    func names() async throws -> [String] {
        let answer = try await client.listItems().ok
        // answer.headers.cacheStatus, when the operation declares the field: "cached; hit; ttl=57"
        return try answer.body.json.map(\.name)
    }

    func shutdown() async {
        await cache.shutdown()
    }
}

@Suite("docs/sdk.md's OpenAPI sample")
struct DocsSampleTests {
    @Test("the sample's client answers the second request from the cache")
    func itemsSample() async throws {
        let origin = try await OriginServer.start()
        origin.route("/v1/items") { _ in
            .init(
                headers: [("Cache-Control", "max-age=60"), ("Content-Type", "application/json")],
                body: #"[{"id":1,"name":"one"}]"#)
        }
        let items = Items(serverURL: URL(string: origin.url("/v1"))!, store: InMemoryCacheStore())
        #expect(try await items.names() == ["one"])
        #expect(try await items.names() == ["one"])
        #expect(origin.count("/v1/items") == 1)
        await items.shutdown()
        await origin.stop()
    }
}
