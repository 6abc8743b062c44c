// The Swift samples of docs/sdk.md and README.md whose imports are exactly these, as the docs show them
// (``DocsSampleTests`` checks that each sample is here, with its imports, and runs them). Samples made of statements
// are wrapped in a function of their own.
import CachedNetworking
import HTTPTypes

// README.md, Use the SDK: compiled, not run (it needs a server on port 6379 and the internet); ``ReadmeSampleTests``
// runs the same statements against a live server and a local origin.

func readmeSample() async throws -> (first: CachedResponse, second: CachedResponse) {
    let cache = CachedNetworking(
        store: FailOpenStore(wrapping: try RESPStore(url: "redis://127.0.0.1:6379")),
        transport: AsyncHTTPClientTransport())

    let request = HTTPRequest(method: .get, scheme: "https", authority: "api.example.com", path: "/items")
    let first = try await cache.run(request)   // first.source == .network;  Cache-Status: cached; fwd=uri-miss; stored
    let second = try await cache.run(request)  // second.source == .cache;   Cache-Status: cached; hit; ttl=60
    return (first, second)
}

// docs/sdk.md, Quick start

func fetchItems(store: any CacheStore) async throws(CachedNetworkingError) -> CachedResponse {
    let transport = AsyncHTTPClientTransport()
    var configuration = CachedNetworking.Configuration()
    configuration.namespace = "catalog"
    let cache = CachedNetworking(store: store, transport: transport, configuration: configuration)

    let request = HTTPRequest(method: .get, scheme: "https", authority: "api.example.com", path: "/items")
    let answer = try await cache.run(request)
    // answer.source: .network the first time, then .cache while the response is fresh
    // answer.cacheStatus.headerValue: "cached; fwd=uri-miss; stored", then "cached; hit; ttl=57"
    try? await transport.shutdown()
    return answer
}

// docs/sdk.md, Invalidation

func afterImport(_ cache: CachedNetworking) async throws(CachedNetworkingError) {
    try await cache.invalidate(HTTPRequest(method: .get, scheme: "https", authority: "api.example.com", path: "/items"))
    try await cache.invalidateAll()
}

// docs/sdk.md, Typed repository

struct Item: Decodable, Sendable {
    let id: Int
    let name: String
}

/// The service's view of the catalog: its repositories are made once, with the service.
final class Catalog: Sendable {
    private let items: CachedRepository<[Item]>

    init(cache: CachedNetworking) {
        items = CachedRepository(
            cache,
            request: HTTPRequest(method: .get, scheme: "https", authority: "api.example.com", path: "/items"),
            lifetime: .seconds(30))
    }

    /// The items: held for 30 seconds, then read through the cache again.
    func allItems() async throws(CachedRepositoryError) -> [Item] {
        try await items.value()
    }

    /// The items with where they came from, for logs: `.held`, `.cache`, `.origin`, …, their age and Cache-Status.
    func itemsWithSource() async throws(CachedRepositoryError) -> CachedValue<[Item]> {
        try await items.read()
    }

    /// After the catalog changed: the next read, in any process that shares the store, fetches from the origin.
    func catalogChanged() async throws(CachedRepositoryError) {
        try await items.invalidate()
    }
}

// docs/sdk.md, Errors and closures

func fetchAll(_ cache: CachedNetworking, _ requests: [HTTPRequest]) async throws -> [CachedResponse] {
    try await withThrowingTaskGroup(of: CachedResponse.self) { group in
        for request in requests {
            group.addTask { try await cache.run(request) }
        }
        return try await group.reduce(into: []) { $0.append($1) }
    }
}

func isOriginDown(_ error: any Error) -> Bool {
    (error as? CachedNetworkingError)?.kind == .transport
}
