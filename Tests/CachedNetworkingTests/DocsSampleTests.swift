// The code samples of docs/sdk.md and README.md, compiled and run here so that they stay correct.
import CachedNetworking
import CachedNetworkingTesting
import CachedOriginSupport
import CachedTestSupport
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPTypes
import Logging
import NIOCore
import Testing

private enum QuickStart {
    static func fetchItems(store: any CacheStore) async throws(CachedNetworkingError) -> CachedResponse {
        let transport = AsyncHTTPClientTransport()
        var configuration = CachedNetworking.Configuration()
        configuration.namespace = "catalog"
        let cache = CachedNetworking(store: store, transport: transport, configuration: configuration)

        let request = HTTPRequest(method: .get, scheme: "https", authority: "api.example.com", path: "/items")
        let answer = try await cache.run(request)
        try? await transport.shutdown()
        return answer
    }

    static func transportSettings() -> AsyncHTTPClientTransport {
        let transport = AsyncHTTPClientTransport(timeout: .seconds(10), maximumBodySize: 256 << 20)
        return transport
    }

    static func timedOut(_ error: CachedNetworkingError) -> Bool {
        (error.underlying as? HTTPTransportError)?.kind == .timeout
    }

    static func load(_ cache: CachedNetworking, _ url: URL) {
        cache.run(URLRequest(url: url)) { data, response, error, fromCache in
            _ = (data, response, error, fromCache)
        }
    }

    static func sharedStores() throws -> (RESPStore, FailOpenStore<RESPStore>) {
        let store = try RESPStore(url: "redis://:s3cret@cache.internal:6379/2", poolSize: 4,
                                  connectTimeout: .seconds(1), commandTimeout: .milliseconds(500))
        let shared = FailOpenStore(wrapping: try RESPStore(url: "redis://127.0.0.1:6379"))
        return (store, shared)
    }

    static func makeTLSStore(url: String, certificates directory: String) throws(RESPStore.ConfigurationError) -> RESPStore {
        var configuration = try RESPStore.Configuration(url: url)         // rediss://app:s3cret@cache.internal:6380
        configuration.tls?.trustRoots = .file("\(directory)/ca.crt")        // your CA instead of the system's
        configuration.tls?.certificateChainFile = "\(directory)/client.crt" // mutual TLS
        configuration.tls?.privateKeyFile = "\(directory)/client.key"
        return RESPStore(configuration: configuration)
    }

    static func clusterStores() throws -> (RESPClusterStore, RESPClusterStore) {
        let clustered = try RESPClusterStore(url: "redis+cluster://:s3cret@10.0.0.1:7000,10.0.0.2:7000,10.0.0.3:7000")
        return (clustered, try clusterStore())
    }

    static func clusterStore() throws(RESPStore.ConfigurationError) -> RESPClusterStore {
        var configuration = try RESPClusterStore.Configuration(url: "redis+cluster://app:s3cret@10.0.0.1:7000,10.0.0.2:7000")
        configuration.poolSize = 4                       // connections (threads) per master
        configuration.retryTimeout = .seconds(2)         // how long a call retries through resharding and failover
        return RESPClusterStore(configuration: configuration)
    }

    static func makeNearCachedStore(url: String, logger: Logger) throws -> RESPStore {
        var configuration = try RESPStore.Configuration(url: url)
        configuration.nearCache = RESPStore.NearCache(maxBytes: 32 << 20, maxAge: .seconds(30))
        // Or: RESPStore.NearCache(maxBytes: 32 << 20, mode: .broadcast(prefixes: ["catalog:"]))
        return RESPStore(configuration: configuration, logger: logger)
    }

    static func makeNearCachedClusterStore(url: String, logger: Logger) throws -> RESPClusterStore {
        var configuration = try RESPClusterStore.Configuration(url: url)   // redis+cluster://host:port,host:port
        configuration.nearCache = RESPStore.NearCache(maxBytes: 32 << 20, maxAge: .seconds(30))
        return RESPClusterStore(configuration: configuration, logger: logger)
    }

    static func configureOverrides() -> CachedNetworking.Configuration {
        var configuration = CachedNetworking.Configuration()
        configuration.lifetimeOverrides = [
            LifetimeOverride(host: "api.example.com", pathPrefix: "/catalog/", lifetime: .seconds(300)),
            LifetimeOverride(lifetime: .seconds(30)) { request in request.path?.hasSuffix(".json") == true },
        ]
        return configuration
    }

    static func afterImport(_ cache: CachedNetworking) async throws(CachedNetworkingError) {
        try await cache.invalidate(HTTPRequest(method: .get, scheme: "https", authority: "api.example.com", path: "/items"))
        try await cache.invalidateAll()
    }

    struct Item: Decodable, Sendable {
        let id: Int
        let name: String
    }

    static func items(_ cache: CachedNetworking) async throws(CachedRepositoryError) -> [Item] {
        let repository = CachedRepository<[Item]>(network: cache)
        return try await repository.value(
            for: HTTPRequest(method: .get, scheme: "https", authority: "api.example.com", path: "/items"))
    }
}

/// README.md's "Use the SDK" sample, statement for statement: compiled, not run (it needs a server on port 6379 and
/// the internet). ``ReadmeSampleTests`` runs the same statements against a live server and a local origin.
private enum Readme {
    static func useTheSDK() async throws -> (first: CachedResponse, second: CachedResponse) {
        let cache = CachedNetworking(
            store: FailOpenStore(wrapping: try RESPStore(url: "redis://127.0.0.1:6379")),
            transport: AsyncHTTPClientTransport())

        let request = HTTPRequest(method: .get, scheme: "https", authority: "api.example.com", path: "/items")
        let first = try await cache.run(request)
        let second = try await cache.run(request)
        return (first, second)
    }
}

@Suite("README.md sample")
struct ReadmeSampleTests {
    @Test("the sample's statements, run against a live cached-server and a local origin, answer as the comments say")
    func useTheSDK() async throws {
        let server = try await offThread { try ServerProcess.start(.cached) }
        let origin = try await OriginServer.start()
        origin.route("/items", reply: .init(headers: [("Cache-Control", "max-age=60")], body: #"[{"id":1,"name":"one"}]"#))
        let store = FailOpenStore(wrapping: try RESPStore(url: "redis://127.0.0.1:\(server.port)"))
        let transport = AsyncHTTPClientTransport()
        let cache = CachedNetworking(store: store, transport: transport)

        let request = origin.request("/items")
        let first = try await cache.run(request)
        let second = try await cache.run(request)

        #expect(first.source == .network)
        #expect(first.response.headerFields[.cacheStatus] == "cached; fwd=uri-miss; stored")
        #expect(second.source == .cache)
        #expect(second.response.headerFields[.cacheStatus]?.hasPrefix("cached; hit; ttl=") == true)
        #expect(second.text == #"[{"id":1,"name":"one"}]"#)
        #expect(origin.count("/items") == 1)
        try await transport.shutdown()
        await store.shutdown()
        await origin.stop()
    }
}

@Suite("docs/sdk.md samples")
struct DocsSampleTests {
    @Test("the testing sample runs as documented")
    func testingSample() async throws {
        let clock = ManualCacheClock()
        let transport = FakeHTTPTransport()
        transport.script("https://api.example.com/items", replies: [
            .init(status: .ok, headerFields: [.cacheControl: "max-age=60"], body: "[]"),
        ])
        var configuration = CachedNetworking.Configuration()
        configuration.clock = clock
        let store = InMemoryCacheStore(clock: clock)
        let cache = CachedNetworking(store: store, transport: transport, configuration: configuration)
        let request = HTTPRequest(method: .get, scheme: "https", authority: "api.example.com", path: "/items")

        #expect(try await cache.run(request).source == .network)
        #expect(try await cache.run(request).source == .cache)
        clock.advance(by: .seconds(61))
        store.inject(.init(operations: [.get]))
        #expect(try await cache.run(request).source == .network)
        #expect(transport.requestCount(for: "https://api.example.com/items") == 2)
    }

    @Test("the store samples configure what they say")
    func storeSamples() async throws {
        let (store, shared) = try QuickStart.sharedStores()
        #expect(store.configuration.host == "cache.internal")
        #expect(store.configuration.password == "s3cret")
        #expect(store.configuration.database == 2)
        #expect(store.configuration.commandTimeout == .milliseconds(500))
        #expect(shared.base.configuration.port == 6379)
        await store.shutdown()
        await shared.shutdown()
    }

    @Test("the TLS sample connects with the CA and the client certificate of its directory")
    func tlsSample() async throws {
        let certificates = try TestCertificates.shared()
        // cached-server requires a client certificate signed by the CA (tls-auth-clients yes).
        let (server, tlsPort) = try await offThread { try ServerProcess.startTLS(.cached, certificates: certificates) }
        let store = try QuickStart.makeTLSStore(
            url: "rediss://localhost:\(tlsPort)", certificates: certificates.directory.path)
        #expect(store.configuration.tls?.trustRoots == .file(certificates.caCertificate))
        #expect(store.configuration.tls?.certificateVerification == .fullVerification)
        try await store.set("tls-sample", to: ByteBuffer(string: "over TLS"), ttl: .seconds(60))
        #expect(try await store.get("tls-sample") == ByteBuffer(string: "over TLS"))
        await store.shutdown()
        _ = try await offThread { server.stop() }
    }

    @Test("the cluster samples configure what they say")
    func clusterSamples() async throws {
        let (clustered, configured) = try QuickStart.clusterStores()
        #expect(clustered.configuration.seeds.map(\.description) == ["10.0.0.1:7000", "10.0.0.2:7000", "10.0.0.3:7000"])
        #expect(clustered.configuration.password == "s3cret")
        #expect(configured.configuration.username == "app")
        #expect(configured.configuration.seeds.count == 2)
        #expect(configured.configuration.poolSize == 4)
        #expect(configured.configuration.retryTimeout == .seconds(2))
        await clustered.shutdown()
        await configured.shutdown()
    }

    @Test("the near-cache sample keeps what it reads, against a live redis-server")
    func nearCacheSample() async throws {
        let server = try await offThread { try ServerProcess.start(.redis) }
        let store = try QuickStart.makeNearCachedStore(
            url: "redis://127.0.0.1:\(server.port)", logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() })
        #expect(store.configuration.nearCache?.maxBytes == 32 << 20)
        #expect(store.configuration.nearCache?.maxAge == .seconds(30))
        #expect(store.configuration.nearCache?.mode == .default)
        try await store.set("catalog:sample", to: ByteBuffer(string: "v"), ttl: .seconds(60))
        let deadline = ContinuousClock.now + .seconds(10)
        while store.nearCacheStatistics?.hits == 0, ContinuousClock.now < deadline {
            #expect(try await store.get("catalog:sample") == ByteBuffer(string: "v"))
        }
        #expect(store.nearCacheStatistics?.hits ?? 0 > 0)
        await store.shutdown()
        _ = try await offThread { server.stop() }
    }

    @Test("the cluster near-cache sample configures the cluster store's near cache")
    func clusterNearCacheSample() async throws {
        let store = try QuickStart.makeNearCachedClusterStore(
            url: "redis+cluster://10.0.0.1:7000,10.0.0.2:7000", logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() })
        #expect(store.configuration.nearCache == RESPStore.NearCache(maxBytes: 32 << 20, maxAge: .seconds(30)))
        #expect(store.configuration.description.contains("near cache 33554432 bytes"))
        #expect(store.nearCacheStatistics?.entries == 0)
        #expect(store.nearCacheStatistics?.isFilling == false)
        await store.shutdown()
    }

    @Test("the override sample matches what it says")
    func overrides() {
        let configuration = QuickStart.configureOverrides()
        let catalog = HTTPRequest(method: .get, scheme: "https", authority: "API.example.com:443", path: "/catalog/1")
        let json = HTTPRequest(method: .get, scheme: "https", authority: "other.example", path: "/a.json")
        let other = HTTPRequest(method: .get, scheme: "https", authority: "other.example", path: "/a")
        #expect(configuration.lifetimeOverrides.first { $0.matches(catalog) }?.lifetime == .seconds(300))
        #expect(configuration.lifetimeOverrides.first { $0.matches(json) }?.lifetime == .seconds(30))
        #expect(!configuration.lifetimeOverrides.contains { $0.matches(other) })
    }

    @Test("the repository sample decodes through a cache over the fakes")
    func repositorySample() async throws {
        let transport = FakeHTTPTransport()
        transport.script("https://api.example.com/items", replies: [
            .init(headerFields: [.cacheControl: "max-age=60"], body: #"[{"id":1,"name":"one"}]"#),
        ])
        let cache = CachedNetworking(store: InMemoryCacheStore(), transport: transport)
        #expect(try await QuickStart.items(cache).map(\.name) == ["one"])
        try await QuickStart.afterImport(cache)
        #expect(try await QuickStart.items(cache).count == 1)
        #expect(transport.requestCount(for: "https://api.example.com/items") == 2)
    }
}
