import CachedStoreContract
import CachedTestSupport
import Foundation
import NIOCore
import Testing

@testable import CachedNetworking

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
struct LiveServersTrait: SuiteTrait, TestScoping {
    final class Servers: Sendable {
        let cached: Result<ServerProcess, TestEnvironmentError>
        let redis: Result<ServerProcess, TestEnvironmentError>

        init() {
            func start(_ kind: ServerProcess.Kind) -> Result<ServerProcess, TestEnvironmentError> {
                do { return .success(try ServerProcess.start(kind)) } catch let error as TestEnvironmentError {
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
        let servers = try await offThread { Servers() }
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
        let clock = ManualTestClock()
        fixture = ContractStore(
            store: MemoryStore(maxBytes: 64 << 20, cleanupInterval: nil, clock: clock), prefix: "",
            advanceClock: { clock.advance(by: $0) })
    case .cachedServer, .redisServer:
        let server = try LiveServersTrait.server(kind.serverKind!)
        var configuration = try RESPStore.Configuration(url: "redis://127.0.0.1:\(server.port)")
        configuration.commandTimeout = .seconds(5)
        configure(&configuration)
        fixture = ContractStore(
            store: RESPStore(configuration: configuration), prefix: "test:\(UUID().uuidString):", advanceClock: nil)
    }
    do {
        let result = try await body(fixture)
        await fixture.store.shutdown()
        return result
    } catch {
        await fixture.store.shutdown()
        throw error
    }
}
