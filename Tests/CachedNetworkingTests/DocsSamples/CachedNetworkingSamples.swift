// The Swift samples of docs/sdk.md, docs/scaling.md and README.md whose imports are exactly these, as the docs show
// them (``DocsSampleTests`` checks that each sample is here, with its imports, and runs them). Samples made of
// statements are wrapped in a function of their own.
import CachedNetworking

// docs/sdk.md, Stores

func respStoreSample() throws -> RESPStore {
    let store = try RESPStore(url: "redis://:s3cret@cache.internal:6379/2", poolSize: 4,
                              connectTimeout: .seconds(1), commandTimeout: .milliseconds(500))
    return store
}

func clusterStoreSample() throws -> RESPClusterStore {
    let clustered = try RESPClusterStore(url: "redis+cluster://:s3cret@10.0.0.1:7000,10.0.0.2:7000,10.0.0.3:7000")
    return clustered
}

func failOpenStoreSample() throws -> FailOpenStore<RESPStore> {
    let shared = FailOpenStore(wrapping: try RESPStore(url: "redis://127.0.0.1:6379"))
    return shared
}

// docs/sdk.md, TLS

func makeTLSStore(url: String, certificates directory: String) throws(RESPStore.ConfigurationError) -> RESPStore {
    var configuration = try RESPStore.Configuration(url: url)         // rediss://app:s3cret@cache.internal:6380
    configuration.tls?.trustRoots = .file("\(directory)/ca.crt")        // your CA instead of the system's
    configuration.tls?.certificateChainFile = "\(directory)/client.crt" // mutual TLS
    configuration.tls?.privateKeyFile = "\(directory)/client.key"
    return RESPStore(configuration: configuration)
}

// docs/sdk.md, Redis Cluster

func clusterStore() throws(RESPStore.ConfigurationError) -> RESPClusterStore {
    var configuration = try RESPClusterStore.Configuration(url: "redis+cluster://app:s3cret@10.0.0.1:7000,10.0.0.2:7000")
    configuration.poolSize = 4                       // connections (threads) per master
    configuration.retryTimeout = .seconds(2)         // how long a call retries through resharding and failover
    return RESPClusterStore(configuration: configuration)
}

// docs/sdk.md, Per-endpoint lifetimes

func configureOverrides() -> CachedNetworking.Configuration {
    var configuration = CachedNetworking.Configuration()
    configuration.lifetimeOverrides = [
        LifetimeOverride(host: "api.example.com", pathPrefix: "/catalog/", lifetime: .seconds(300)),
        LifetimeOverride(host: "internal.example.com:8443", lifetime: .seconds(60)),
        LifetimeOverride(lifetime: .seconds(30)) { request in request.path?.hasSuffix(".json") == true },
    ]
    return configuration
}

// docs/sdk.md, Typed repository

struct RatesClient: Sendable {
    func latest() async throws -> [String: Double] { ["EUR": 1.0, "USD": 1.08] }
}

func makeRates(_ client: RatesClient) -> CachedRepository<[String: Double]> {
    CachedRepository(lifetime: .seconds(60)) { try await client.latest() }
}

// docs/sdk.md, Naming the SDK's types

enum Storefront {
    /// The app's own notion of a cache policy: here, the plain name means this one.
    enum CachePolicy {
        case aggressive, conservative
    }

    static func sdkPolicy(for policy: CachePolicy) -> CachedNetworking.CachePolicy {
        switch policy {
        case .aggressive: .returnCacheDataElseLoad
        case .conservative: .useProtocolCachePolicy
        }
    }
}

// docs/scaling.md

func makeCache(transport: any HTTPTransport, configuration: CachedNetworking.Configuration) throws -> CachedNetworking {
    let store = FailOpenStore(wrapping: try RESPClusterStore(url: "redis+cluster://10.0.0.1:7000,10.0.0.2:7000"))
    return CachedNetworking(store: store, transport: transport, configuration: configuration)
}

func nearCachedStoreSample() throws -> FailOpenStore<RESPStore> {
    var configuration = try RESPStore.Configuration(url: "redis://cache.internal:6379")
    configuration.nearCache = RESPStore.NearCache(maxBytes: 32 << 20, maxAge: .seconds(30))
    let store = FailOpenStore(wrapping: RESPStore(configuration: configuration))
    return store
}

func nearCachedClusterStoreSample() throws -> FailOpenStore<RESPClusterStore> {
    var configuration = try RESPClusterStore.Configuration(url: "redis+cluster://10.0.0.1:7000,10.0.0.2:7000")
    configuration.nearCache = RESPStore.NearCache(maxBytes: 32 << 20, maxAge: .seconds(30))
    let store = FailOpenStore(wrapping: RESPClusterStore(configuration: configuration))
    return store
}
