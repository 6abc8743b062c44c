import CachedNetworking
import CachedNetworkingRedis
import CachedStoreContract
import CachedTestSupport
import Foundation
import NIOCore
import Testing

/// One Redis Cluster (3 masters, 3 replicas) for a whole suite, started when the suite begins and stopped when it
/// ends, however it ends; on TLS with `tls` (the shared ``TestCertificates``).
struct RedisClusterTrait: SuiteTrait, TestScoping {
    var tls = false
    @TaskLocal static var current: RedisCluster?

    func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        try await withRedisCluster(tls: tls ? try TestCertificates.shared() : nil) { cluster in
            try await Self.$current.withValue(cluster) { try await function() }
        }
    }

    /// The suite's cluster.
    static func cluster() throws -> RedisCluster {
        guard let current else { throw TestEnvironmentError("this test needs the .redisCluster trait on its suite") }
        return current
    }
}

extension Trait where Self == RedisClusterTrait {
    /// Starts a Redis Cluster for the suite.
    static var redisCluster: Self { RedisClusterTrait() }

    /// Starts a Redis Cluster on TLS for the suite.
    static var redisTLSCluster: Self { RedisClusterTrait(tls: true) }
}

/// A cluster store on `cluster` with lenient timeouts (the machine may be busy with builds), adjusted by
/// `configure`. On a TLS cluster the store trusts the test CA and presents the test client certificate.
func makeClusterStore(
    _ cluster: RedisCluster, configure: (inout RESPClusterStore.Configuration) -> Void = { _ in }
) throws -> RESPClusterStore {
    var configuration = try RESPClusterStore.Configuration(url: cluster.url)
    if let certificates = cluster.certificates {
        configuration.tls?.trustRoots = .file(certificates.caCertificate)
        configuration.tls?.certificateChainFile = certificates.clientCertificate
        configuration.tls?.privateKeyFile = certificates.clientKey
    }
    configuration.commandTimeout = .seconds(5)
    configuration.retryTimeout = .seconds(10)
    configure(&configuration)
    return RESPClusterStore(configuration: configuration)
}

/// Runs `body` with a fresh cluster store on the suite's cluster and a key prefix of its own, and shuts the store
/// down afterwards.
func withClusterStore<T>(
    configure: (inout RESPClusterStore.Configuration) -> Void = { _ in },
    _ body: (ContractStore) async throws -> T
) async throws -> T {
    let store = try makeClusterStore(try RedisClusterTrait.cluster(), configure: configure)
    let fixture = ContractStore(store: store, prefix: "test:\(UUID().uuidString):", advanceClock: nil)
    do {
        let result = try await body(fixture)
        await store.shutdown()
        return result
    } catch {
        await store.shutdown()
        throw error
    }
}

/// Counts of what a traffic run did, shared by its tasks.
final class TrafficTally: @unchecked Sendable {
    private let lock = NSLock()
    private var operations = 0
    private var failures: [String] = []
    private var mismatches: [String] = []

    func succeeded(_ count: Int = 1) { lock.withLock { operations += count } }
    func failed(_ what: String) { lock.withLock { failures.append(what) } }
    func mismatched(_ what: String) { lock.withLock { mismatches.append(what) } }

    var summary: (operations: Int, failures: [String], mismatches: [String]) {
        lock.withLock { (operations, failures, mismatches) }
    }
}

/// A flag the traffic tasks poll to know when to stop.
final class StopFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var stopped = false
    func stop() { lock.withLock { stopped = true } }
    var isStopped: Bool { lock.withLock { stopped } }
}

/// Writes and reads `keys` in a loop until `stop`: SET then GET of one key, every tenth round an MGET of all of
/// them, every seventh a DEL before the SET; every value is checked against the last one written.
///
/// With a `failover` window, one kind of wrong value is tolerated: a write acknowledged by the killed master just
/// before it died may not have reached its replica (Redis replicates asynchronously), so a key whose last write
/// started between just before the kill and the end of the failover may read as an older value or as missing.
/// Failed calls are never tolerated.
func runTraffic(
    store: some CacheStore, keys: [String], task: Int, tally: TrafficTally, stop: StopFlag,
    failover: FailoverWindow? = nil
) async {
    var last: [String: (value: String, writtenAt: ContinuousClock.Instant)] = [:]
    var round = 0
    let deadline = ContinuousClock.now + .seconds(240)
    func mismatch(_ what: String, keys differing: [String]) {
        let mayBeLost = differing.allSatisfy { key in last[key].map { failover?.covers($0.writtenAt) == true } ?? false }
        if !mayBeLost { tally.mismatched(what) }
    }
    while !stop.isStopped && ContinuousClock.now < deadline {
        round += 1
        let key = keys[round % keys.count]
        let value = "\(task):\(round)"
        do {
            if round % 7 == 0, last[key] != nil {
                let removed = try await store.remove([key])
                if removed != 1 { mismatch("DEL \(key) removed \(removed)", keys: [key]) }
                last[key] = nil
            }
            last[key] = (value, .now)
            try await store.set(key, to: ByteBuffer(string: value), ttl: .seconds(600))
            let read = try await store.get(key)
            if read?.text != value { mismatch("GET \(key): \(read?.text ?? "nil"), wrote \(value)", keys: [key]) }
            tally.succeeded(2)
            if round % 10 == 0 {
                let written = keys.filter { last[$0] != nil }
                let values = try await store.get(written).map { $0?.text }
                let differing = zip(written, values).filter { last[$0.0]?.value != $0.1 }.map(\.0)
                if !differing.isEmpty { mismatch("MGET: \(differing.count) of \(written.count) keys differ", keys: differing) }
                tally.succeeded()
            }
        } catch {
            tally.failed("\(key): \(error)")
            // After a failure the key's value is unknown.
            last[key] = nil
        }
    }
}

/// When the master was killed and when the failover was complete, for ``runTraffic``.
final class FailoverWindow: @unchecked Sendable {
    private let lock = NSLock()
    private var killed: ContinuousClock.Instant?
    private var recovered: ContinuousClock.Instant?

    /// Whether a write started at `instant` may have been acknowledged by the killed master and lost with it: it
    /// started at most a second before the kill and before the failover was complete.
    func covers(_ instant: ContinuousClock.Instant) -> Bool {
        lock.withLock {
            guard let killed, instant >= killed - .seconds(1) else { return false }
            return recovered.map { instant <= $0 } ?? true
        }
    }

    /// After a second of traffic, kills the master `victim` with SIGKILL, waits until a replica has taken over
    /// its slots, and lets two more seconds of traffic run; records an issue if the failover does not happen.
    func killAndWaitForFailover(of victim: RedisCluster.Node, in cluster: RedisCluster) async {
        do {
            try await Task.sleep(for: .seconds(1))
            try await offThread { try cluster.server(port: victim.port).kill() }
            lock.withLock { killed = .now }
            try await offThread { try cluster.waitForFailover(of: victim.port) }
            lock.withLock { recovered = .now }
            try await Task.sleep(for: .seconds(2))
        } catch {
            Issue.record("the failover did not happen: \(error)")
        }
    }
}
