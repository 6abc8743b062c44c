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

/// A store under test, with a key prefix of its own (tests share servers and run in parallel) and a way to
/// let time pass.
struct StoreFixture: Sendable {
    let kind: StoreUnderTest
    let store: any CacheStore
    /// The memory store's clock; nil for networked stores (they use real time).
    let clock: ManualTestClock?
    let prefix: String

    func key(_ name: String) -> String { prefix + name }

    /// True once `key` reads as missing; for the memory store after moving its clock past `ttl`, for
    /// networked stores after polling real time (bounded generously: a loaded machine can stall a test for
    /// seconds, and the bound is only reached when the test fails anyway).
    func expires(_ key: String, after ttl: Duration) async throws -> Bool {
        if let clock {
            clock.advance(by: ttl + .milliseconds(1))
            return try await store.get(key) == nil
        }
        let deadline = ContinuousClock.now + ttl + .seconds(10)
        while ContinuousClock.now < deadline {
            if try await store.get(key) == nil { return true }
            try await Task.sleep(for: .milliseconds(20))
        }
        return false
    }

    /// Lets `duration` pass (on the memory store's clock, or for real).
    func pass(_ duration: Duration) async throws {
        if let clock { clock.advance(by: duration) } else { try await Task.sleep(for: duration) }
    }
}

/// Runs `body` with a fresh store of `kind`, and shuts the store down afterwards.
func withStore<T>(
    _ kind: StoreUnderTest,
    configure: (inout RESPStore.Configuration) -> Void = { _ in },
    _ body: (StoreFixture) async throws -> T
) async throws -> T {
    let fixture: StoreFixture
    switch kind {
    case .memory:
        let clock = ManualTestClock()
        fixture = StoreFixture(
            kind: kind, store: MemoryStore(maxBytes: 64 << 20, cleanupInterval: nil, clock: clock), clock: clock,
            prefix: "")
    case .cachedServer, .redisServer:
        let server = try LiveServersTrait.server(kind.serverKind!)
        var configuration = try RESPStore.Configuration(url: "redis://127.0.0.1:\(server.port)")
        configuration.commandTimeout = .seconds(5)
        configure(&configuration)
        fixture = StoreFixture(
            kind: kind, store: RESPStore(configuration: configuration), clock: nil,
            prefix: "test:\(UUID().uuidString):")
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
