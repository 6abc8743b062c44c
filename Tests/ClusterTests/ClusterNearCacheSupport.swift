import CachedNetworking
import CachedStoreContract
import CachedTestSupport
import Foundation
import NIOCore
import Testing

@testable import CachedNetworking
@testable import CachedNetworkingRedis

/// The bound on the median time for an overwrite on one store to reach another store's near cache. Delivery is
/// one message from the key's master and one wake-up of the subscriber's thread; single rounds on two loaded
/// cores can take tens of milliseconds, which the median of several rounds absorbs.
let clusterInvalidationBound: Duration = .milliseconds(50)

/// How long one round may take before it counts as an invalidation that never came.
let clusterRoundDeadline: Duration = .seconds(5)

/// A cluster store with a near cache (default mode, no maximum age) and short reconnect delays.
func makeNearCacheClusterStore(
    _ cluster: RedisCluster, configure: (inout RESPClusterStore.Configuration) -> Void = { _ in }
) throws -> RESPClusterStore {
    try makeClusterStore(cluster) {
        $0.poolSize = 2
        $0.minReconnectDelay = .milliseconds(20)
        $0.maxReconnectDelay = .milliseconds(200)
        var nearCache = RESPStore.NearCache(maxBytes: 4 << 20, maxAge: nil)
        nearCache.healthCheckInterval = .milliseconds(500)
        $0.nearCache = nearCache
        configure(&$0)
    }
}

/// A key whose slot the master `master` serves, made unique by `label`.
func key(on master: RedisCluster.Node, _ label: String) -> String {
    var candidate = 0
    while true {
        let key = "near:\(label):\(candidate)"
        let slot = ClusterSlots.slot(of: key)
        if master.slots.contains(where: { $0.contains(slot) }) { return key }
        candidate += 1
    }
}

/// The median of `durations`.
func median(_ durations: [Duration]) -> Duration {
    let sorted = durations.sorted()
    return sorted.isEmpty ? .zero : sorted[sorted.count / 2]
}

/// A store with a near cache that reads, and a plain store that writes, on one cluster.
struct NearCachePair {
    let reader: RESPClusterStore
    let writer: RESPClusterStore

    /// Both stores, with `retryTimeout`; waits until the reader's near cache fills.
    init(_ cluster: RedisCluster, retryTimeout: Duration = .seconds(10)) async throws {
        reader = try makeNearCacheClusterStore(cluster) { $0.retryTimeout = retryTimeout }
        writer = try makeClusterStore(cluster) { $0.retryTimeout = retryTimeout }
        try await reader.waitUntilFilling()
    }

    /// The writer stores `value` under `key`, and the reader reads it until its near cache holds it.
    func cache(_ key: String, _ value: String, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        try await writer.set(key, to: ByteBuffer(string: value), ttl: .seconds(300))
        let read = try await reader.readUntilNearHit(key, sourceLocation: sourceLocation)
        #expect(read?.text == value, sourceLocation: sourceLocation)
    }

    /// The writer overwrites `key` (held as `old` by the reader's near cache) with `new`; expects the reader to
    /// stop serving `old` within ``clusterRoundDeadline`` and to read `new`.
    func expectOverwrite(
        _ key: String, from old: String, to new: String, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        try await writer.set(key, to: ByteBuffer(string: new), ttl: .seconds(300))
        let gone = try await reader.timeUntilGone(ByteBuffer(string: old), key: key, since: .now)
        #expect(gone != nil, "the overwrite of \(key) never reached the near cache", sourceLocation: sourceLocation)
        #expect(try await reader.get(key)?.text == new, sourceLocation: sourceLocation)
    }

    func shutdown() async {
        await reader.shutdown()
        await writer.shutdown()
    }
}

extension RESPClusterStore {
    /// The near cache's statistics (the store must have one).
    var near: RESPStore.NearCacheStatistics { nearCacheStatistics! }

    /// Pings every master (which opens every master's invalidation channel) and waits until the near cache fills.
    func waitUntilFilling(timeout: Duration = .seconds(20), sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let deadline = ContinuousClock.now + timeout
        while true {
            do throws(CacheStoreError) {
                try await ping()
                if near.isFilling { return }
            } catch {
                // A master may be failing over: try again until the deadline.
            }
            guard ContinuousClock.now < deadline else {
                Issue.record("the near cache did not start filling within \(timeout): \(near)", sourceLocation: sourceLocation)
                throw TestEnvironmentError("near cache not filling")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    /// Reads `key` until the near cache answers it (a hit), so that the next change must come by invalidation.
    func readUntilNearHit(_ key: String, sourceLocation: SourceLocation = #_sourceLocation) async throws -> ByteBuffer? {
        try await CachedStoreContract.readUntilNearHit(
            key, from: self, hits: { near.hits }, timeout: .seconds(20), sourceLocation: sourceLocation)
    }

    /// Reads `key` every millisecond until it no longer returns `old`: the time from `since` until then, or nil
    /// after ``clusterRoundDeadline``.
    func timeUntilGone(_ old: ByteBuffer?, key: String, since: ContinuousClock.Instant) async throws -> Duration? {
        try await CachedStoreContract.timeUntilGone(old, key: key, from: self, since: since, deadline: clusterRoundDeadline)
    }
}

extension RedisCluster {
    /// A hash tag `{<label>-<n>}` whose slot holds no key: a test that migrates the slot by hand must not meet
    /// other tests' keys there (`CLUSTER SETSLOT … NODE` refuses a slot its node still holds keys in). Blocks.
    func emptySlotTag(_ label: String) throws -> String {
        let masters = try masters()
        for candidate in 0..<1_000 {
            let tag = "{\(label)-\(candidate)}"
            let slot = ClusterSlots.slot(of: tag)
            guard let owner = masters.first(where: { $0.slots.contains { $0.contains(slot) } }) else { continue }
            let count = try cli(owner.port, ["cluster", "countkeysinslot", String(slot)])
            if count.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines) == "0" { return tag }
        }
        throw TestEnvironmentError("no empty slot among 1000 tags \(label)-…")
    }

    /// A master serving slots and one of its replicas whose replication link is up. A new cluster's nodes learn
    /// the replicas' roles by gossip, so this waits (blocking) until some node's view shows such a pair.
    func masterWithSyncedReplica(timeout: TimeInterval = 30) throws -> (master: Node, replica: Node) {
        let deadline = Date().addingTimeInterval(timeout)
        var last = "nothing checked yet"
        while Date() < deadline {
            for server in liveServers {
                let nodes = try self.nodes(seenFrom: server.port)
                last = "\(nodes)"
                for master in nodes where master.isMaster && master.slotCount > 0 {
                    guard let replica = nodes.first(where: { $0.masterID == master.id }) else { continue }
                    let replication = try cli(replica.port, ["info", "replication"]).standardOutput
                    if replication.contains("master_link_status:up") { return (master, replica) }
                }
            }
            usleep(100_000)
        }
        throw TestEnvironmentError("no master with a synced replica within \(Int(timeout)) s: \(last)")
    }

    /// `INFO stats`' `keyspace_hits` of the node on `port`.
    func keyspaceHits(port: Int) throws -> Int {
        let output = try cli(port, ["info", "stats"])
        // INFO's lines end in CRLF.
        let lines = output.standardOutput.components(separatedBy: .newlines)
        guard let line = lines.first(where: { $0.hasPrefix("keyspace_hits:") }),
            let hits = Int(line.dropFirst("keyspace_hits:".count).trimmingCharacters(in: .whitespacesAndNewlines))
        else { throw TestEnvironmentError("no keyspace_hits in INFO stats of \(port): \(output.summary)") }
        return hits
    }
}
