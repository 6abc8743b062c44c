import NIOCore
import Testing

@testable import CachedNetworking
@testable import CachedNetworkingRedis

/// The pieces of the cluster near cache that need no server: pipelined replies after `ASKING`, which replies the
/// router handles itself, slot-map comparison, and the shared core's filling as channels join and leave.
@Suite("Cluster near cache, without a cluster")
struct ClusterNearCacheUnitTests {
    // MARK: pipelines through the router

    @Test("replies of a pipeline: as sent, or each command's own after its ASKING")
    func pipelineReplies() throws {
        let one = ClusterRouter.commandReplies(.success(.integer(1)), commands: 1, asking: false)
        #expect(try one.get() == [.integer(1)])
        let two = ClusterRouter.commandReplies(.success(.array([.null, .integer(-2)])), commands: 2, asking: false)
        #expect(try two.get() == [.null, .integer(-2)])
        let asked = ClusterRouter.commandReplies(
            .success(.array([.status("OK"), .bulk(ByteBuffer(string: "v")), .error("ERR no ASKING"), .integer(5)])),
            commands: 2, asking: true)
        #expect(try asked.get() == [.bulk(ByteBuffer(string: "v")), .error("ERR no ASKING")])
        let short = ClusterRouter.commandReplies(.success(.array([.status("OK")])), commands: 2, asking: false)
        #expect(throws: CacheStoreError.self) { try short.get() }
        let failed = ClusterRouter.commandReplies(
            .failure(CacheStoreError(.timeout, "slow")), commands: 2, asking: true)
        #expect(throws: CacheStoreError.self) { try failed.get() }
    }

    @Test("the router handles a redirection or a transient error in any reply of a pipeline, nothing else")
    func routingErrorsInPipelines() {
        #expect(ClusterRouter.routingError(in: [.bulk(ByteBuffer(string: "v")), .integer(10)]) == nil)
        #expect(ClusterRouter.routingError(in: [.error("WRONGTYPE Operation against a key"), .integer(-1)]) == nil)
        #expect(ClusterRouter.routingError(in: [.null, .error("MOVED 3999 127.0.0.1:6381")]) == "MOVED 3999 127.0.0.1:6381")
        #expect(ClusterRouter.routingError(in: [.error("ASK 3999 127.0.0.1:6381"), .integer(1)]) == "ASK 3999 127.0.0.1:6381")
        #expect(ClusterRouter.routingError(in: [.error("TRYAGAIN Multiple keys request during rehashing of slot")]) != nil)
    }

    // MARK: topology

    @Test("slot maps compare by each slot's master, not by replicas")
    func slotMapComparison() throws {
        func node(_ port: Int64) -> RESPReply { .array([.bulk(ByteBuffer(string: "127.0.0.1")), .integer(port)]) }
        let answeredBy = RESPClusterStore.Node(host: "127.0.0.1", port: 30001)
        let map = try ClusterSlotMap(
            parsing: .array([
                .array([.integer(0), .integer(8191), node(30001), node(30004)]),
                .array([.integer(8192), .integer(16383), node(30002)]),
            ]), answeredBy: answeredBy)
        let sameMastersOtherReplicas = try ClusterSlotMap(
            parsing: .array([
                .array([.integer(0), .integer(8191), node(30001)]),
                .array([.integer(8192), .integer(16383), node(30002), node(30005)]),
            ]), answeredBy: answeredBy)
        #expect(map.assignsSlotsAs(sameMastersOtherReplicas))
        #expect(!map.assignsSlotsAs(ClusterSlotMap()))
        var moved = map
        moved.assign(8191, to: .init(host: "127.0.0.1", port: 30002))
        #expect(!map.assignsSlotsAs(moved))
        moved.assign(8191, to: .init(host: "127.0.0.1", port: 30001))
        #expect(map.assignsSlotsAs(moved))
    }

    // MARK: one core, several channels

    private final class Channel {}

    private func core() -> NearCacheCore {
        NearCacheCore(
            settings: RESPStore.NearCache(maxBytes: 1 << 20, maxAge: nil), logger: RESPStore.disabledLogger,
            metricsFactory: TestMetrics(), metricsDimensions: [])
    }

    /// Reads `key` as a miss and offers `value` for it; whether it was kept.
    private func fill(_ core: NearCacheCore, _ key: String, _ value: String) -> Bool {
        guard case .miss(let ticket, _) = core.startRead(StoreKey(key)) else { return false }
        core.finishRead(ticket, fills: [(StoreKey(key), ByteBuffer(string: value), -1)])
        if case .hit = core.startRead(StoreKey(key)) { return true }
        return false
    }

    /// Starts a read of `key` that misses and may fill; nil (and an issue) otherwise.
    private func fillableMiss(_ core: NearCacheCore, _ key: String) -> NearCacheTable.ReadTicket? {
        guard case .miss(let ticket, true) = core.startRead(StoreKey(key)) else {
            Issue.record("\(key) should miss, fillable")
            return nil
        }
        return ticket
    }

    @Test("the table fills only while every registered channel is up; a channel that joins stops it and flushes")
    func channelJoining() {
        let core = core()
        let first = Channel(), second = Channel()
        core.register(first)
        #expect(!core.statistics.isFilling)
        core.channelUp(first)
        #expect(core.statistics.isFilling)
        #expect(fill(core, "a", "1"))
        core.register(second)
        #expect(!core.statistics.isFilling)
        #expect(core.statistics.entries == 0)
        #expect(!fill(core, "a", "1"))
        core.register(second)
        core.channelUp(second)
        #expect(core.statistics.isFilling)
        #expect(fill(core, "a", "1"))
    }

    /// A core with two registered channels, both up: the table fills.
    private func coreWithTwoLiveChannels() -> (NearCacheCore, Channel, Channel) {
        let core = core()
        let first = Channel(), second = Channel()
        core.register(first)
        core.register(second)
        core.channelUp(first)
        core.channelUp(second)
        return (core, first, second)
    }

    @Test("a channel that leaves flushes; the others keep the table filling, a read in flight keeps nothing")
    func channelLeaving() throws {
        let (core, first, second) = coreWithTwoLiveChannels()
        #expect(fill(core, "a", "1"))
        let ticket = try #require(fillableMiss(core, "b"))
        core.unregister(second)
        core.finishRead(ticket, fills: [(StoreKey("b"), ByteBuffer(string: "2"), -1)])
        #expect(core.statistics.entries == 0)
        #expect(core.statistics.isFilling)
        #expect(fill(core, "b", "2"))
        // A channel down among the rest stops the filling until it is back, or gone.
        core.register(second)
        core.channelUp(second)
        core.channelDown(first)
        #expect(!core.statistics.isFilling)
        core.unregister(first)
        #expect(core.statistics.isFilling)
        core.unregister(second)
        #expect(!core.statistics.isFilling)
    }

    @Test("a channel's subscriber reporting after the channel left changes nothing")
    func lateReportsOfARetiredChannel() {
        let (core, first, second) = coreWithTwoLiveChannels()
        core.unregister(first)
        #expect(core.statistics.isFilling)
        // The retired channel's subscriber, mid-reconnect when it was retired, reports once more.
        core.channelDown(first)
        #expect(core.statistics.isFilling)
        core.channelUp(first)
        #expect(fill(core, "a", "1"))
        // The remaining channel flaps: the table fills again once it is back.
        core.channelDown(second)
        #expect(!core.statistics.isFilling)
        core.channelUp(second)
        #expect(core.statistics.isFilling)
        #expect(fill(core, "b", "2"))
    }

    @Test("a topology flush drops everything and refuses reads in flight")
    func topologyFlush() throws {
        let core = core()
        let channel = Channel()
        core.register(channel)
        core.channelUp(channel)
        #expect(fill(core, "a", "1"))
        let ticket = try #require(fillableMiss(core, "b"))
        ClusterNearCache(core: core).topologyChanged("test")
        core.finishRead(ticket, fills: [(StoreKey("b"), ByteBuffer(string: "2"), -1)])
        #expect(core.statistics.entries == 0)
        #expect(core.statistics.refusedFills == 1)
        #expect(fill(core, "b", "2"))
    }
}
