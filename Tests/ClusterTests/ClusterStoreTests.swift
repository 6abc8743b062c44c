import CachedNetworking
import CachedNetworkingTesting
import CachedStoreContract
import CachedTestSupport
import Foundation
import HTTPTypes
import NIOCore
import Testing

@testable import CachedNetworking
@testable import CachedNetworkingRedis

/// `RESPClusterStore` on one real Redis Cluster (3 masters, 3 replicas on loopback) shared by the suite: the
/// store contract, routing over every master, the SDK's key layout, redirections during a slot migration done
/// by hand, and seeds that are not a cluster.
@Suite("RESPClusterStore on a Redis Cluster", .redisCluster)
struct ClusterStoreTests {
    @Test(arguments: StoreRequirement.allCases)
    func contract(_ requirement: StoreRequirement) async throws {
        try await withClusterStore { try await requirement.check($0) }
    }

    @Test("ping fetches the slot map and reaches the three masters")
    func pingReachesEveryMaster() async throws {
        let cluster = try RedisClusterTrait.cluster()
        let store = try makeClusterStore(cluster)
        let masters = try await store.ping()
        let expected = try await offThread { try cluster.masters() }
        #expect(Set(masters.map(\.port)) == Set(expected.map(\.port)))
        #expect(masters.count == 3)
        #expect(store.router.slotMap.coveredSlots == 16384)
        // (Replicas appear in CLUSTER SLOTS once they have synchronised; none of them is a master.)
        #expect(Set(store.router.slotMap.replicas).isDisjoint(with: masters))
        await store.shutdown()
        #expect(store.router.runningThreadCount == 0)
    }

    @Test("keys spread over every master, and a URL's cache entries, variants and leases stay on one")
    func keysSpreadButEntriesStayTogether() async throws {
        let cluster = try RedisClusterTrait.cluster()
        let store = try makeClusterStore(cluster)
        let namespace = "layout-\(UUID().uuidString)"
        let transport = FakeHTTPTransport()
        for index in 0..<60 {
            transport.script(
                "https://origin.test/items/\(index)",
                replies: [
                    .init(headerFields: [.cacheControl: "max-age=300", .vary: "Accept-Language"], body: "item \(index)")
                ])
        }
        var configuration = CachedNetworking.Configuration()
        configuration.namespace = namespace
        configuration.storeTimeout = .seconds(5)
        let cache = CachedNetworking(store: store, transport: transport, configuration: configuration)
        for index in 0..<60 {
            for language in ["en", "fr"] {
                var request = HTTPRequest(method: .get, scheme: "https", authority: "origin.test", path: "/items/\(index)")
                request.headerFields[.acceptLanguage] = language
                let answer = try await cache.run(request)
                #expect(String(buffer: answer.body) == "item \(index)")
                #expect(answer.cacheStatus.stored, "\(answer.cacheStatus.headerValue)")
                #expect(try await cache.run(request).source == .cache)
            }
        }
        // Leases, as a fetch or a background refresh would hold them.
        let keys = CacheKeys(namespace: namespace, maximumURLLength: configuration.maximumKeyURLLength)
        for index in 0..<60 {
            let entry = keys.entryKey(generation: 0, method: .get, uri: "https://origin.test/items/\(index)")
            _ = try await store.setIfAbsent(CacheKeys.lockKey(entryKey: entry), to: ByteBuffer(string: "x"), ttl: .seconds(60))
            _ = try await store.setIfAbsent(CacheKeys.refreshKey(entryKey: entry), to: ByteBuffer(string: "x"), ttl: .seconds(60))
        }

        let placement = try await offThread { () -> [Int: [String]] in
            var placement: [Int: [String]] = [:]
            for master in try cluster.masters() {
                let scan = try cluster.cli(master.port, ["--scan", "--pattern", "\(namespace):*"])
                placement[master.port] = scan.lines
            }
            return placement
        }
        // Every master holds some of the 60 URLs; each URL's keys (entry or Vary index, two variants, two leases)
        // are on one master only.
        #expect(placement.count == 3)
        for (port, keys) in placement { #expect(!keys.isEmpty, "master \(port) holds no key") }
        var mastersOfTag: [String: Set<Int>] = [:]
        var keysOfTag: [String: Int] = [:]
        for (port, keys) in placement {
            for key in keys {
                guard let open = key.firstIndex(of: "{"), let close = key[open...].firstIndex(of: "}") else {
                    Issue.record("\(key) has no hash tag")
                    continue
                }
                let tag = String(key[open...close])
                mastersOfTag[tag, default: []].insert(port)
                keysOfTag[tag, default: 0] += 1
            }
        }
        #expect(mastersOfTag.count == 60)
        #expect(mastersOfTag.values.allSatisfy { $0.count == 1 }, "\(mastersOfTag.filter { $0.value.count > 1 })")
        #expect(keysOfTag.values.allSatisfy { $0 == 5 }, "\(keysOfTag.filter { $0.value != 5 })")

        // invalidate removes the GET and HEAD entries of a URL in one slot (one DEL), and the next request misses.
        let first = HTTPRequest(method: .get, scheme: "https", authority: "origin.test", path: "/items/0")
        try await cache.invalidate(first)
        var english = first
        english.headerFields[.acceptLanguage] = "en"
        #expect(try await cache.run(english).source == .network)
        await store.shutdown()
    }

    /// A slot migrated by hand, step by step, as `redis-cli --cluster reshard` does it: keys already at the target
    /// are reached through `ASK` (with `ASKING`), keys still at the source are served there, a multi-key command
    /// split between the two answers `TRYAGAIN` (retried until the retry time is up), and once the slot is
    /// assigned to the target, `MOVED` updates the store's slot map.
    @Test("a slot migrated by hand: ASK, TRYAGAIN, then MOVED")
    func manualMigration() async throws {
        let cluster = try RedisClusterTrait.cluster()
        let store = try makeClusterStore(cluster) { $0.retryTimeout = .milliseconds(300) }
        let tag = try await offThread { try cluster.emptySlotTag("migrate-\(UUID().uuidString)") }
        let slot = ClusterSlots.slot(of: tag)
        let old = "\(tag):old", new = "\(tag):new"
        try await store.set(old, to: ByteBuffer(string: "at the source"), ttl: .seconds(300))
        let masters = try await offThread { try cluster.masters() }
        let source = try #require(masters.first { master in master.slots.contains { $0.contains(slot) } })
        let target = try #require(masters.first { $0.id != source.id })
        #expect(store.router.slotMap.master(of: slot)?.port == source.port)

        func cli(_ port: Int, _ arguments: [String]) async throws {
            let output = try await offThread { try cluster.cli(port, arguments) }
            #expect(output.status == 0 && !output.standardOutput.hasPrefix("ERR"), "\(output.summary)")
        }
        try await cli(target.port, ["cluster", "setslot", String(slot), "importing", source.id])
        try await cli(source.port, ["cluster", "setslot", String(slot), "migrating", target.id])

        // A new key is not at the source: ASK sends it to the target.
        try await store.set(new, to: ByteBuffer(string: "at the target"), ttl: .seconds(300))
        #expect(try await store.get(new)?.text == "at the target")
        #expect(try await store.get(old)?.text == "at the source")
        // The key split between the nodes: TRYAGAIN until the retry time is up.
        let start = ContinuousClock.now
        let split = await storeError { () async throws(CacheStoreError) in _ = try await store.get([old, new]) }
        #expect(split?.kind == .timeout, "\(String(describing: split))")
        #expect(split?.message.contains("TRYAGAIN") == true, "\(String(describing: split))")
        #expect(ContinuousClock.now - start < .seconds(10))

        // Move the old key too, then give the slot to the target on every master.
        try await cli(source.port, ["migrate", "127.0.0.1", String(target.port), "", "0", "5000", "keys", old])
        #expect(try await store.get([old, new]).map { $0?.text } == ["at the source", "at the target"])
        for master in masters {
            try await cli(master.port, ["cluster", "setslot", String(slot), "node", target.id])
        }
        #expect(store.router.slotMap.master(of: slot)?.port == source.port)
        #expect(try await store.get(old)?.text == "at the source")
        #expect(store.router.slotMap.master(of: slot)?.port == target.port)
        #expect(try await store.remove([old, new, "\(tag):missing"]) == 2)
        await store.shutdown()
    }

    @Test("a seed that is not a cluster node: calls fail with its error")
    func seedWithoutClusterSupport() async throws {
        let plain = try await offThread { try ServerProcess.start(.redis) }
        let store = try RESPClusterStore(url: "redis+cluster://127.0.0.1:\(plain.port)")
        let error = await storeError { () async throws(CacheStoreError) in _ = try await store.get("k") }
        #expect(error?.kind == .server, "\(String(describing: error))")
        #expect(error?.message.contains("cluster support disabled") == true, "\(String(describing: error))")
        await store.shutdown()
        _ = try await offThread { plain.stop() }
    }

    @Test("no seed answers: calls fail at once with unreachable")
    func noSeedAnswers() async throws {
        let port = try freeLoopbackPort()
        let store = try RESPClusterStore(url: "redis+cluster://127.0.0.1:\(port)", retryTimeout: .seconds(30))
        for _ in 0..<3 {
            let start = ContinuousClock.now
            let error = await storeError { () async throws(CacheStoreError) in try await store.set("k", to: ByteBuffer(), ttl: nil) }
            #expect(error?.kind == .unreachable, "\(String(describing: error))")
            #expect(ContinuousClock.now - start < .seconds(5))
        }
        await store.shutdown()
        let closed = await storeError { () async throws(CacheStoreError) in _ = try await store.get("k") }
        #expect(closed?.kind == .closed)
    }
}
