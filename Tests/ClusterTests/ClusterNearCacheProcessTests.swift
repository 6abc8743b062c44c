import CachedNetworking
import CachedNetworkingAsyncHTTPClient
import CachedOriginSupport
import CachedStoreContract
import CachedTestSupport
import Foundation
import Synchronization
import Testing

@testable import CachedNetworking
@testable import CachedNetworkingRedis

/// The cluster near cache across processes: `cached-fetch --store redis+cluster://… --near-cache` processes fetch a
/// URL over and over, answered from their near caches, while this process overwrites the stored response; one URL
/// whose entry lives on each master.
extension ClusterNearCacheTests {
    @Test("cached-fetch processes with --near-cache see an overwrite of an entry on each master within 50 ms (median)")
    func cachedFetchProcessesSeeOverwrites() async throws {
        let cluster = try RedisClusterTrait.cluster()
        let origin = try await OriginServer.start()
        let namespace = "procs-\(UUID().uuidString)"
        let store = try makeClusterStore(cluster)
        var configuration = CachedNetworking.Configuration()
        configuration.namespace = namespace
        configuration.storeTimeout = .seconds(5)
        let transport = AsyncHTTPClientTransport()
        let cache = CachedNetworking(store: store, transport: transport, configuration: configuration)
        let masters = try await offThread { try cluster.masters() }
        var latencies: [Duration] = []
        for master in masters {
            // A path whose entry (hash tag of its URL) lives on this master.
            let path = try #require((0..<10_000).lazy.map { "/item/\($0)" }.first { path in
                let slot = ClusterSlots.slot(of: CacheKeys.slotTag(origin.url(path)))
                return master.slots.contains { $0.contains(slot) }
            })
            let body = Mutex("\(path) first")
            origin.route(path) { _ in OriginServer.Reply(headers: [("Cache-Control", "max-age=600")], body: body.withLock { $0 }) }
            let first = try await cache.run(origin.request(path))
            #expect(String(buffer: first.body) == "\(path) first")
            let tag = CacheKeys.slotTag(origin.url(path))
            let placed = try await offThread { try cluster.cli(master.port, ["--scan", "--pattern", "\(namespace):*{\(tag)}*"]) }
            #expect(!placed.lines.isEmpty, "the entry of \(path) is not on master \(master.port)")

            let arguments = [
                "--store", cluster.url, "--namespace", namespace, "--near-cache", "1m",
                "--repeat", "100000", "--interval", "1", "--until-changed", origin.url(path),
            ]
            let running = try await offThread { try (0..<2).map { _ in try ExternalProgram.cachedFetch.start(arguments) } }
            latencies += try await CachedFetchLines.measureOverwrite(seenBy: running, expecting: "\(path) second") {
                body.withLock { $0 = "\(path) second" }
                let stored = try await cache.run(origin.request(path), policy: .reloadIgnoringLocalCacheData)
                #expect(stored.cacheStatus.stored, "\(stored.cacheStatus.headerValue)")
            }
        }
        print("cluster near cache, cached-fetch processes: \(latencies.count) rounds, median \(median(latencies))")
        #expect(latencies.count == 6)
        #expect(median(latencies) <= clusterInvalidationBound, "median \(median(latencies)) of \(latencies)")
        try? await transport.shutdown()
        await store.shutdown()
        await origin.stop()
    }
}
