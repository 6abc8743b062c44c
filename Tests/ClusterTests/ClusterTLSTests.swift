import CachedNetworking
import CachedStoreContract
import CachedTestSupport
import Foundation
import NIOCore
import Testing

@testable import CachedNetworking
@testable import CachedNetworkingRedis

/// `RESPClusterStore` on a Redis Cluster that runs on TLS (`tls-cluster yes`, `tls-replication yes`, client
/// certificates required; 3 masters, 3 replicas on loopback, shared by the suite): the store contract over
/// `rediss+cluster://`, the TLS ports the cluster announces, the near cache with one TLS subscriber per master,
/// and certificates that must be refused.
@Suite("RESPClusterStore on a TLS Redis Cluster", .redisTLSCluster)
struct ClusterTLSTests {
    @Test("the store contract over rediss+cluster://", arguments: StoreRequirement.allCases)
    func contract(_ requirement: StoreRequirement) async throws {
        try await withClusterStore { try await requirement.check($0) }
    }

    @Test("ping reaches the three masters at the TLS ports the cluster announces, verified by name (IP address)")
    func pingReachesEveryMasterOverTLS() async throws {
        let cluster = try RedisClusterTrait.cluster()
        let store = try makeClusterStore(cluster)
        #expect(store.configuration.tls?.certificateVerification == .fullVerification)
        let masters = try await store.ping()
        #expect(masters.count == 3)
        #expect(Set(masters.map(\.port)).isSubset(of: Set(cluster.tlsPorts)), "\(masters) not among \(cluster.tlsPorts)")
        #expect(store.router.slotMap.coveredSlots == 16384)
        await store.shutdown()
        #expect(store.router.runningThreadCount == 0)
    }

    @Test("the near cache over TLS: an overwrite on any master reaches another store's near cache")
    func nearCacheOverTLS() async throws {
        let cluster = try RedisClusterTrait.cluster()
        let pair = try await NearCachePair(cluster)
        let masters = try await offThread { try cluster.masters() }
        #expect(masters.count == 3)
        for master in masters {
            let key = key(on: master, UUID().uuidString)
            try await pair.cache(key, "v0")
            for round in 1...3 {
                try await pair.expectOverwrite(key, from: round == 1 ? "v0" : "v\(round - 1)", to: "v\(round)")
                #expect(try await pair.reader.readUntilNearHit(key)?.text == "v\(round)")
            }
        }
        #expect((pair.reader.nearCacheStatistics?.hits ?? 0) >= 9)
        await pair.shutdown()
    }

    @Test("without a client certificate, or trusting another CA, no node is reached, and the error says why")
    func refusedCertificates() async throws {
        let cluster = try RedisClusterTrait.cluster()
        let certificates = try TestCertificates.shared()
        let cases: [(String, (inout RESPClusterStore.Configuration) -> Void)] = [
            ("certificate verify failed", { $0.tls?.trustRoots = .file(certificates.otherCACertificate) }),
            ("certificate required", {
                $0.tls?.certificateChainFile = nil
                $0.tls?.privateKeyFile = nil
            }),
        ]
        for (reason, configure) in cases {
            let store = try makeClusterStore(cluster) {
                configure(&$0)
                $0.retryTimeout = .milliseconds(500)
            }
            let start = ContinuousClock.now
            let error = await storeError { () async throws(CacheStoreError) in _ = try await store.get("refused") }
            #expect(error?.kind == .unreachable, "\(String(describing: error))")
            #expect(error?.message.contains(reason) == true, "\(reason): \(String(describing: error))")
            #expect(ContinuousClock.now - start < .seconds(20))
            await store.shutdown()
        }
    }
}
