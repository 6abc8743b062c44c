import CachedStoreContract
import CachedNetworkingTesting
import CachedTestSupport
import Foundation
import NIOCore
import Testing

@testable import CachedNetworking
@testable import CachedNetworkingRedis

/// The stores every contract test runs against.
enum StoreUnderTest: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case memory
    case cachedServer
    case redisServer

    static let networked: [StoreUnderTest] = [.cachedServer, .redisServer]

    var testDescription: String { rawValue }

    var serverKind: ServerProcess.Kind? {
        switch self {
        case .memory: nil
        case .cachedServer: .cached
        case .redisServer: .redis
        }
    }
}

/// The servers the contract suite shares: one `cached-server` and one `redis-server`, started when the suite
/// begins and stopped when it ends. A server that could not start fails only the tests that use it.
///
/// With `tls`, the servers listen on a TLS port only (``ServerProcess/port`` is that port), with the shared
/// ``TestCertificates`` (for `localhost` and 127.0.0.1) and client certificates optional: nothing a store does
/// can go around TLS.
struct LiveServersTrait: SuiteTrait, TestScoping {
    var tls = false

    final class Servers: Sendable {
        let cached: Result<ServerProcess, TestEnvironmentError>
        let redis: Result<ServerProcess, TestEnvironmentError>

        init(tls: Bool) {
            func launch(_ kind: ServerProcess.Kind) throws -> ServerProcess {
                guard tls else { return try ServerProcess.start(kind) }
                return try ServerProcess.startTLS(
                    kind, certificates: try TestCertificates.shared(), arguments: ["--tls-auth-clients", "optional"],
                    plain: false
                ).server
            }
            func start(_ kind: ServerProcess.Kind) -> Result<ServerProcess, TestEnvironmentError> {
                do { return .success(try launch(kind)) } catch let error as TestEnvironmentError {
                    return .failure(error)
                } catch {
                    return .failure(TestEnvironmentError("\(kind.rawValue): \(error)"))
                }
            }
            cached = start(.cached)
            redis = start(.redis)
        }

        func server(_ kind: ServerProcess.Kind) throws -> ServerProcess {
            try (kind == .cached ? cached : redis).get()
        }

        func stop() {
            try? cached.get().stop()
            try? redis.get().stop()
        }
    }

    @TaskLocal static var current: Servers?

    func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        let servers = try await offThread { [tls] in Servers(tls: tls) }
        do {
            try await Self.$current.withValue(servers) { try await function() }
        } catch {
            _ = try? await offThread { servers.stop() }
            throw error
        }
        _ = try await offThread { servers.stop() }
    }

    /// The running server of `kind`.
    static func server(_ kind: ServerProcess.Kind) throws -> ServerProcess {
        guard let current else {
            throw TestEnvironmentError("this test needs the .liveServers trait on its suite")
        }
        return try current.server(kind)
    }
}

extension Trait where Self == LiveServersTrait {
    /// Starts a `cached-server` and a `redis-server` for the suite.
    static var liveServers: Self { LiveServersTrait() }

    /// Starts a `cached-server` and a `redis-server` for the suite, each listening on a TLS port only.
    static var liveTLSServers: Self { LiveServersTrait(tls: true) }
}

/// Runs `body` with a fresh store of `kind`, and shuts the store down afterwards.
func withStore<T>(
    _ kind: StoreUnderTest,
    configure: (inout RESPStore.Configuration) -> Void = { _ in },
    _ body: (ContractStore) async throws -> T
) async throws -> T {
    let fixture: ContractStore
    switch kind {
    case .memory:
        let clock = ManualCacheClock()
        fixture = ContractStore(
            store: MemoryStore(maxBytes: 64 << 20, cleanupInterval: nil, clock: clock), prefix: "",
            advanceClock: { clock.advance(by: $0) })
    case .cachedServer, .redisServer:
        let server = try LiveServersTrait.server(kind.serverKind!)
        var configuration = try RESPStore.Configuration(url: "redis://127.0.0.1:\(server.port)")
        configuration.commandTimeout = .seconds(5)
        configure(&configuration)
        return try await withRESPStore(configuration, body)
    }
    return try await withContractStore(fixture, body)
}

extension RESPStore.Configuration {
    /// The configuration with these timeouts and short reconnect delays (20 ms, up to 200 ms), for tests.
    func forTests(connectTimeout: Duration, commandTimeout: Duration) -> Self {
        var configuration = self
        configuration.connectTimeout = connectTimeout
        configuration.commandTimeout = commandTimeout
        configuration.minReconnectDelay = .milliseconds(20)
        configuration.maxReconnectDelay = .milliseconds(200)
        return configuration
    }
}

/// Runs `body` with a fresh ``RESPStore`` for `configuration` and a key prefix of its own, and shuts the store
/// down afterwards.
func withRESPStore<T>(
    _ configuration: RESPStore.Configuration, _ body: (ContractStore) async throws -> T
) async throws -> T {
    try await withContractStore(
        ContractStore(store: RESPStore(configuration: configuration), prefix: "test:\(UUID().uuidString):", advanceClock: nil),
        body)
}

/// Runs `body` with `fixture`, and shuts its store down however `body` ends.
private func withContractStore<T>(_ fixture: ContractStore, _ body: (ContractStore) async throws -> T) async throws -> T {
    do {
        let result = try await body(fixture)
        await fixture.store.shutdown()
        return result
    } catch {
        await fixture.store.shutdown()
        throw error
    }
}

/// Runs `body` with a cache over a fresh store of `kind` (its own namespace; every read goes to the store),
/// a scripted origin and a manual clock, and shuts the store down afterwards. `configure` adjusts the cache's
/// configuration; `wrapping` gives the store the cache uses, around the fresh one (a ``HookedStore``).
func withScenarioCache(
    _ kind: StoreUnderTest,
    configure: (inout CachedNetworking.Configuration) -> Void = { _ in },
    wrapping: (any CacheStore) -> any CacheStore = { $0 },
    _ body: (CachedNetworking, FakeHTTPTransport, ManualCacheClock) async throws -> Void
) async throws {
    let clock = ManualCacheClock()
    let store: any CacheStore
    if let serverKind = kind.serverKind {
        let server = try LiveServersTrait.server(serverKind)
        var configuration = try RESPStore.Configuration(url: "redis://127.0.0.1:\(server.port)")
        configuration.commandTimeout = .seconds(5)
        store = RESPStore(configuration: configuration)
    } else {
        store = MemoryStore(cleanupInterval: nil, clock: clock)
    }
    let origin = FakeHTTPTransport()
    var configuration = CachedNetworking.Configuration()
    configuration.clock = clock
    configuration.namespace = "scenario-\(UUID().uuidString)"
    configuration.decodedEntryMemory = 0
    configuration.storeTimeout = .seconds(5)
    configure(&configuration)
    let cache = CachedNetworking(store: wrapping(store), transport: origin, configuration: configuration)
    do {
        try await body(cache, origin, clock)
    } catch {
        await store.shutdown()
        throw error
    }
    await store.shutdown()
}
