import CachedNetworking
import CachedStoreContract
import CachedTestSupport
import Foundation
import NIOCore
import Testing

@testable import CachedNetworking
@testable import CachedNetworkingRedis

/// `RESPClusterStore`'s near cache on a real Redis Cluster: two stores, each with its own near cache, share the
/// cluster; what one writes on any master reaches the other's near cache through that master's invalidation
/// channel, hits cost no round trip, and a slot that moves to another master keeps the near cache coherent.
@Suite("RESPClusterStore's near cache on a Redis Cluster", .redisCluster, .serialized)
struct ClusterNearCacheTests {
    @Test("the store contract, with the near cache on", arguments: StoreRequirement.allCases)
    func contract(_ requirement: StoreRequirement) async throws {
        try await withClusterStore(configure: {
            $0.nearCache = RESPStore.NearCache(maxBytes: 1 << 20)
        }) { try await requirement.check($0) }
    }

    @Test("an overwrite or a removal on any master reaches another store's near cache within 50 ms (median)")
    func overwritesOnEveryMasterReachAnotherStore() async throws {
        let cluster = try RedisClusterTrait.cluster()
        let reader = try makeNearCacheClusterStore(cluster)
        let writer = try makeNearCacheClusterStore(cluster)
        try await reader.waitUntilFilling()
        try await writer.waitUntilFilling()
        let masters = try await offThread { try cluster.masters() }
        #expect(masters.count == 3)
        var rounds: [Duration] = []
        for master in masters {
            let key = key(on: master, UUID().uuidString)
            var current: ByteBuffer? = ByteBuffer(string: "v0")
            try await writer.set(key, to: current!, ttl: .seconds(60))
            for round in 1...6 {
                #expect(try await reader.readUntilNearHit(key) == current)
                let next: ByteBuffer?
                if round % 3 == 0 {
                    #expect(try await writer.remove([key]) == 1)
                    next = nil
                } else {
                    next = ByteBuffer(string: "v\(round)")
                    try await writer.set(key, to: next!, ttl: .seconds(60))
                }
                let gone = try await reader.timeUntilGone(current, key: key, since: .now)
                #expect(gone != nil, "master \(master.port), round \(round): the change never reached the near cache")
                if let gone { rounds.append(gone) }
                #expect(try await reader.get(key) == next)
                if next == nil {
                    current = ByteBuffer(string: "v\(round)-again")
                    try await writer.set(key, to: current!, ttl: .seconds(60))
                } else {
                    current = next
                }
            }
        }
        print("cluster near cache: \(rounds.count) rounds, median \(median(rounds)), max \(rounds.max() ?? .zero)")
        #expect(rounds.count == 18)
        #expect(median(rounds) <= clusterInvalidationBound, "median \(median(rounds)) of \(rounds)")
        #expect(reader.near.invalidations >= 18, "\(reader.near)")
        await reader.shutdown()
        await writer.shutdown()
        #expect(reader.router.runningThreadCount == 0)
    }

    @Test("hits are answered from memory: the key's master sees no read")
    func hitsCostNoRoundTrip() async throws {
        let cluster = try RedisClusterTrait.cluster()
        let store = try makeNearCacheClusterStore(cluster)
        try await store.waitUntilFilling()
        for master in try await offThread({ try cluster.masters() }) {
            let key = key(on: master, UUID().uuidString)
            try await store.set(key, to: ByteBuffer(string: "kept"), ttl: .seconds(60))
            #expect(try await store.readUntilNearHit(key)?.text == "kept")
            let before = try await offThread { try cluster.keyspaceHits(port: master.port) }
            let hitsBefore = store.near.hits
            for _ in 0..<50 { #expect(try await store.get(key)?.text == "kept") }
            #expect(try await store.get([key, key]).map { $0?.text } == ["kept", "kept"])
            let after = try await offThread { try cluster.keyspaceHits(port: master.port) }
            #expect(store.near.hits - hitsBefore == 52, "\(store.near)")
            #expect(after == before, "master \(master.port): keyspace_hits rose from \(before) to \(after)")
        }
        await store.shutdown()
    }

    /// The key's slot migrated by hand (as `redis-cli --cluster reshard` does it) to another master: the old
    /// master forgets the key (and says so), the reader's first read after the move gets `MOVED` and flushes, and
    /// from then on the new master's channel invalidates the key.
    @Test("after the key's slot moves to another master, no stale value is served and overwrites still invalidate")
    func slotMoveKeepsTheNearCacheCoherent() async throws {
        let cluster = try RedisClusterTrait.cluster()
        let stores = try await NearCachePair(cluster)
        let tag = try await offThread { try cluster.emptySlotTag("near-move-\(UUID().uuidString)") }
        let key = "\(tag):value"
        let slot = ClusterSlots.slot(of: key)
        try await stores.cache(key, "before")

        let masters = try await offThread { try cluster.masters() }
        let source = try #require(masters.first { master in master.slots.contains { $0.contains(slot) } })
        let target = try #require(masters.first { $0.id != source.id })
        /// Moves the slot with its key from `from` to `to`, as `redis-cli --cluster reshard` does.
        func moveSlot(from: RedisCluster.Node, to: RedisCluster.Node) async throws {
            func cli(_ port: Int, _ arguments: [String]) async throws {
                let output = try await offThread { try cluster.cli(port, arguments) }
                #expect(output.status == 0 && !output.standardOutput.hasPrefix("ERR"), "\(output.summary)")
            }
            try await cli(to.port, ["cluster", "setslot", String(slot), "importing", from.id])
            try await cli(from.port, ["cluster", "setslot", String(slot), "migrating", to.id])
            try await cli(from.port, ["migrate", "127.0.0.1", String(to.port), "", "0", "5000", "keys", key])
            for master in masters {
                try await cli(master.port, ["cluster", "setslot", String(slot), "node", to.id])
            }
        }
        try await moveSlot(from: source, to: target)
        // The writer learns the move through MOVED and writes on the new master.
        try await stores.writer.set(key, to: ByteBuffer(string: "after the move"), ttl: .seconds(300))
        #expect(try await stores.reader.get(key)?.text == "after the move")
        #expect(stores.reader.router.slotMap.master(of: slot)?.port == target.port)

        // Kept again, from the new master, and invalidated by it.
        try await stores.reader.waitUntilFilling()
        #expect(try await stores.reader.readUntilNearHit(key)?.text == "after the move")
        try await stores.expectOverwrite(key, from: "after the move", to: "overwritten")

        // Moving it back: the same again.
        #expect(try await stores.reader.readUntilNearHit(key)?.text == "overwritten")
        try await moveSlot(from: target, to: source)
        try await stores.writer.set(key, to: ByteBuffer(string: "back home"), ttl: .seconds(300))
        #expect(try await stores.reader.get(key)?.text == "back home")
        #expect(stores.reader.router.slotMap.master(of: slot)?.port == source.port)
        await stores.shutdown()
    }
}

/// A master killed with SIGKILL: its channel is lost (the near cache flushed), the promoted replica gets a
/// channel of its own, and what is written on it afterwards reaches the near cache. A manual failover, where the
/// old master stays up as a replica and no connection breaks: it invalidates the writes it replicates.
@Suite("RESPClusterStore's near cache when a master fails over")
struct ClusterNearCacheFailoverTests {
    @Test("a manual failover: an overwrite on the new master reaches a near cache that only served hits meanwhile")
    func manualFailoverKeepsTheNearCacheCoherent() async throws {
        try await withRedisCluster { cluster in
            let stores = try await NearCachePair(cluster, retryTimeout: .seconds(30))
            let (master, replica) = try await offThread { try cluster.masterWithSyncedReplica() }
            let key = key(on: master, UUID().uuidString)
            try await stores.cache(key, "before")

            let failover = try await offThread { try cluster.cli(replica.port, ["cluster", "failover"]) }
            #expect(failover.standardOutput.hasPrefix("OK"), "\(failover.summary)")
            try await offThread { try cluster.waitForFailover(of: master.port) }
            // The writer is redirected (MOVED) to the promoted replica; the reader, which only served hits, has not
            // talked to the cluster since, so the invalidation can only come from the demoted master replicating.
            try await stores.expectOverwrite(key, from: "before", to: "after the failover")
            await stores.shutdown()
        }
    }

    @Test("after a failover no stale value is served, and overwrites on the new master still invalidate")
    func failoverKeepsTheNearCacheCoherent() async throws {
        try await withRedisCluster { cluster in
            let stores = try await NearCachePair(cluster, retryTimeout: .seconds(30))
            let reader = stores.reader
            let victim = try await offThread { try cluster.masters()[0] }
            let key = key(on: victim, UUID().uuidString)
            try await stores.cache(key, "before")
            let flushesBefore = reader.near.invalidations

            try await offThread { try cluster.server(port: victim.port).kill() }
            try await offThread { try cluster.waitForFailover(of: victim.port) }
            // The write may have to wait for the writer's slot map to catch up (retries within 30 s).
            try await stores.writer.set(key, to: ByteBuffer(string: "after the failover"), ttl: .seconds(300))
            #expect(try await reader.get(key)?.text == "after the failover")
            #expect(reader.near.invalidations > flushesBefore, "\(reader.near)")
            let newOwner = try #require(reader.router.slotMap.master(of: ClusterSlots.slot(of: key)))
            #expect(newOwner.port != victim.port)

            // Kept again, from the promoted replica, and invalidated by it.
            try await reader.waitUntilFilling(timeout: .seconds(30))
            #expect(try await reader.readUntilNearHit(key)?.text == "after the failover")
            try await stores.expectOverwrite(key, from: "after the failover", to: "overwritten")
            await stores.shutdown()
            #expect(reader.router.runningThreadCount == 0)
        }
    }
}
