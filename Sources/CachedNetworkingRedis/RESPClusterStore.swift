import CachedNetworking
import CoreMetrics
import Logging
import NIOCore

/// A ``CacheStore`` on a Redis Cluster: keys are spread over the cluster's masters by hash slot.
///
/// ```swift
/// let store = try RESPClusterStore(url: "redis+cluster://:s3cret@10.0.0.1:7000,10.0.0.2:7000,10.0.0.3:7000")
/// try await store.set("greeting", to: ByteBuffer(string: "hello"), ttl: .seconds(60))
/// let value = try await store.get("greeting")
/// await store.shutdown()
/// ```
///
/// ## Routing
///
/// The store fetches the slot map with `CLUSTER SLOTS` from a seed (or any node it knows) on first use, computes
/// each key's slot (CRC16 of the key or of its `{hash tag}`, modulo 16384) and sends the command to the slot's
/// master. Each master has its own pool of connections, each on a thread of its own, pipelined like
/// ``RESPStore``'s: blocking calls never run on Swift concurrency's cooperative threads. Multi-key calls (`get` of
/// several keys, `remove`) are split by slot, sent concurrently, and their results put back in order (`remove`
/// adds the counts).
///
/// ## Resharding and failover
///
/// - `MOVED`: the slot is recorded at its new master at once, the whole map is refreshed in the background, and
///   the command is sent again to the named node.
/// - `ASK` (a slot being migrated, the key already moved): `ASKING` and the command are sent to the named node
///   on one connection; the map is not changed.
/// - `CLUSTERDOWN` and a master that cannot be reached: the map is refreshed (from another node) and the command
///   retried with backoff (10 ms doubling to 200 ms) until ``Configuration/retryTimeout`` has passed. So a call
///   that starts while a master is failing waits for a replica to be promoted if that happens within the retry
///   time; a call made while no node answers at all fails at once.
/// - `TRYAGAIN` and `LOADING`: the command is retried with backoff, the map unchanged.
/// - At most ``Configuration/maxRedirections`` redirections per attempt.
///
/// ## Near cache
///
/// With ``Configuration/nearCache`` set, values the store reads are also kept in this process's memory and
/// answered from there without a round trip, as ``RESPStore`` does (``RESPStore/NearCache``), until a master says
/// they changed. Each master gets its own invalidation subscriber (`SUBSCRIBE __redis__:invalidate`), and every
/// data connection to that master sends `CLIENT TRACKING on REDIRECT <that subscriber's id>` before its first
/// command; all of them feed one table, bounded by ``RESPStore/NearCache/maxBytes``. The whole near cache is
/// dropped, and reads on their way keep nothing, when any master's subscriber or a tracking data connection is
/// lost, when the slot map changes (`MOVED`, or a refresh that gives any slot to another master: resharding,
/// failover), and when a master joins or leaves; it fills again only once every master's subscriber is up. A
/// master promoted by a failover therefore has its own subscriber before anything read from it is kept. See
/// ``nearCacheStatistics`` for the counters.
///
/// A retried `INCR` may be applied twice when a connection broke after the command was sent (the SDK only
/// increments the namespace generation, where an extra increment is harmless). Read replicas are not used.
///
/// ## Failures
///
/// A call fails with ``CacheStoreError/Kind/unreachable`` or ``CacheStoreError/Kind/timeout`` once it cannot be
/// served within ``Configuration/retryTimeout`` (plus the connect and command timeouts of the attempt under way
/// then), with ``CacheStoreError/Kind/server`` for an error reply (and for a seed that is not a cluster node),
/// and with ``CacheStoreError/Kind/closed`` after ``shutdown()``. Wrap it in ``FailOpenStore`` to stop calling a
/// cluster that keeps failing.
///
/// ## TLS and users
///
/// `rediss+cluster://` (or ``Configuration/tls``) connects to every node over TLS (a cluster with
/// `tls-cluster yes`, which announces its TLS ports), each node's certificate checked as ``RESPStore/TLS`` says;
/// see ``RESPStore`` for how TLS works under hiredis. The user and password of the URL authenticate on every
/// node; an ACL that refuses a command fails its calls with ``CacheStoreError/Kind/server`` (`NOPERM`), logged at
/// warning level once per command name.
public final class RESPClusterStore: CacheStore {
    /// The configuration the store was created with.
    public let configuration: Configuration
    /// The slot map and the pools (internal for tests).
    let router: ClusterRouter
    /// The near cache, when ``Configuration/nearCache`` is set.
    let nearCache: NearCacheCore?

    /// Creates a store for `configuration`. The slot map is fetched and connections are opened on first use;
    /// with a near cache, a master's invalidation connection together with its pool.
    /// - Parameters:
    ///   - configuration: the seeds and the pools' settings.
    ///   - logger: where connection and topology events go (slot map changes and retries at debug, failed
    ///     connection attempts, failed slot-map fetches and commands the ACL refuses, once per command, at
    ///     warning). Default: nowhere.
    ///   - metricsFactory: where the near cache's metrics go; nil for the factory bootstrapped in `MetricsSystem`.
    ///   - metricsDimensions: dimensions added to the near cache's metrics.
    public init(
        configuration: Configuration, logger: Logger = RESPStore.disabledLogger,
        metricsFactory: (any MetricsFactory)? = nil, metricsDimensions: [(String, String)] = []
    ) {
        self.configuration = configuration
        let core = configuration.nearCache.map {
            NearCacheCore(
                settings: $0, logger: logger, metricsFactory: metricsFactory ?? MetricsSystem.factory,
                metricsDimensions: metricsDimensions)
        }
        self.nearCache = core
        self.router = ClusterRouter(
            configuration: configuration, logger: logger, nearCache: core.map(ClusterNearCache.init(core:)))
    }

    /// The near cache's counters and state; nil when ``Configuration/nearCache`` is nil.
    public var nearCacheStatistics: RESPStore.NearCacheStatistics? { nearCache?.statistics }

    /// Creates a store from a `redis+cluster://` URL (see ``Configuration/init(url:)``).
    /// - Parameters:
    ///   - url: `redis+cluster://[[user]:password@]host[:port][,host[:port]…]`.
    ///   - poolSize: connections (and threads) to keep to each master. Default 4.
    ///   - connectTimeout: the longest a connection attempt may take. Default 1 second.
    ///   - commandTimeout: the longest one attempt of a call may wait on the socket. Default 1 second.
    ///   - retryTimeout: how long a call keeps retrying through resharding and failover. Default 2 seconds.
    ///   - logger: where connection and topology events go. Default: nowhere.
    /// - Throws: ``RESPStore/ConfigurationError`` when the URL is malformed.
    public convenience init(
        url: String,
        poolSize: Int = 4,
        connectTimeout: Duration = .seconds(1),
        commandTimeout: Duration = .seconds(1),
        retryTimeout: Duration = .seconds(2),
        logger: Logger = RESPStore.disabledLogger
    ) throws(RESPStore.ConfigurationError) {
        var configuration = try Configuration(url: url)
        configuration.poolSize = poolSize
        configuration.connectTimeout = connectTimeout
        configuration.commandTimeout = commandTimeout
        configuration.retryTimeout = retryTimeout
        self.init(configuration: configuration, logger: logger)
    }

    deinit {
        router.beginShutdown()
    }

    /// Fetches the slot map and sends `PING` to every master: checks that the cluster is reachable, serves
    /// slots, and accepts the credentials.
    /// - Returns: the masters, in the slot map's order.
    /// - Throws: ``CacheStoreError`` naming the first node that failed.
    @discardableResult
    public func ping() async throws(CacheStoreError) -> [Node] {
        var masters: [Node] = []
        for (node, reply) in try await router.executeOnEveryMaster(StoreCommands.ping) {
            try StoreCommands.checkPing(reply)
            masters.append(node)
        }
        return masters
    }

    // MARK: CacheStore

    /// `GET key` on the key's master (answered from the near cache when it holds the key).
    /// - Returns: the value, or nil when the key does not exist.
    /// - Throws: ``CacheStoreError``; ``CacheStoreError/Kind/server`` when the key holds a non-string type.
    public func get(_ key: String) async throws(CacheStoreError) -> ByteBuffer? {
        guard let nearCache else { return try await remoteGet(key) }
        let slot = ClusterSlots.slot(of: key)
        return try await nearCache.get(
            key, pipeline: { (commands) throws(CacheStoreError) in try await router.execute(pipeline: commands, slot: slot) },
            remote: { () throws(CacheStoreError) in try await remoteGet(key) })
    }

    /// `GET key` on the key's master.
    private func remoteGet(_ key: String) async throws(CacheStoreError) -> ByteBuffer? {
        try StoreCommands.value(ofGet: try await router.execute(StoreCommands.get(key), slot: ClusterSlots.slot(of: key)))
    }

    /// `MGET` per slot: keys that share a slot go in one `MGET`, the slots' commands run concurrently (only for
    /// the keys the near cache does not hold).
    /// - Returns: the values in the order of `keys`, nil for missing keys. No round trip when `keys` is empty.
    /// - Throws: ``CacheStoreError``: the first failure among the slots' commands.
    /// - Complexity: one round trip per distinct slot, concurrently.
    public func get(_ keys: [String]) async throws(CacheStoreError) -> [ByteBuffer?] {
        guard let nearCache else { return try await remoteGet(keys) }
        return try await nearCache.get(
            keys, remote: { (keys) throws(CacheStoreError) in try await remoteGet(keys) },
            fetch: { (missing, ttlOf) throws(CacheStoreError) in try await readTracked(missing, ttlOf: ttlOf) })
    }

    /// `MGET` per slot on the masters.
    private func remoteGet(_ keys: [String]) async throws(CacheStoreError) -> [ByteBuffer?] {
        let groups = Self.groupedBySlot(keys)
        let replies = try await router.executeAll(
            groups.map { (StoreCommands.mget($0.positions.lazy.map { keys[$0] }), $0.slot) })
        var values = [ByteBuffer?](repeating: nil, count: keys.count)
        for (group, reply) in zip(groups, replies) {
            let groupValues = try StoreCommands.values(ofMGet: reply, count: group.positions.count)
            for (position, value) in zip(group.positions, groupValues) { values[position] = value }
        }
        return values
    }

    /// For the near cache: `MGET` per slot with a `PTTL` for each key whose `ttlOf` flag is true, one pipeline
    /// per slot, the slots' pipelines run concurrently.
    private func readTracked(_ keys: [String], ttlOf: [Bool]) async throws(CacheStoreError) -> [(value: ByteBuffer?, ttl: Int64?)] {
        let groups = Self.groupedBySlot(keys)
        let router = self.router
        let groupReads = try await ClusterRouter.concurrently(groups.count) { (index) throws(CacheStoreError) in
            let group = groups[index]
            return try await NearCacheCore.read(group.positions.map { keys[$0] }, ttlOf: group.positions.map { ttlOf[$0] }) {
                (commands) throws(CacheStoreError) in try await router.execute(pipeline: commands, slot: group.slot)
            }
        }
        var read = [(value: ByteBuffer?, ttl: Int64?)](repeating: (nil, nil), count: keys.count)
        for (group, groupRead) in zip(groups, groupReads) {
            for (position, entry) in zip(group.positions, groupRead) { read[position] = entry }
        }
        return read
    }

    /// `SET key value [PX ttl]` on the key's master. A TTL is sent in whole milliseconds, rounded up.
    /// - Throws: ``CacheStoreError``.
    public func set(_ key: String, to value: ByteBuffer, ttl: Duration?) async throws(CacheStoreError) {
        try await nearCache.writing([key]) { () throws(CacheStoreError) in
            try StoreCommands.checkSet(
                try await router.execute(StoreCommands.set(key, to: value, ttl: ttl), slot: ClusterSlots.slot(of: key)))
        }
    }

    /// `SET key value NX PX ttl` on the key's master.
    ///
    /// When the command had to be sent again after an attempt whose outcome is unknown (a connection that broke
    /// or timed out, say during a failover) and the second attempt finds the key set, the first attempt may have
    /// set it: the key is read, and holding `value` counts as set by this call. Give each caller a value of its
    /// own (a lease token) for that to tell callers apart.
    /// - Returns: true when the key did not exist and now holds `value`.
    /// - Throws: ``CacheStoreError``.
    public func setIfAbsent(_ key: String, to value: ByteBuffer, ttl: Duration) async throws(CacheStoreError) -> Bool {
        let slot = ClusterSlots.slot(of: key)
        return try await nearCache.writing([key]) { () throws(CacheStoreError) in
            let (reply, resent) = try await router.executeNotingResends(
                StoreCommands.setIfAbsent(key, to: value, ttl: ttl), slot: slot)
            if try StoreCommands.stored(bySetIfAbsent: reply) { return true }
            guard resent else { return false }
            return try StoreCommands.value(ofGet: try await router.execute(StoreCommands.get(key), slot: slot)) == value
        }
    }

    /// `DEL` per slot, the slots' commands run concurrently.
    /// - Returns: how many of the keys existed (a repeated key counts once). No round trip when `keys` is empty.
    /// - Throws: ``CacheStoreError``: the first failure among the slots' commands (the others may have removed
    ///   their keys).
    @discardableResult
    public func remove(_ keys: [String]) async throws(CacheStoreError) -> Int {
        guard !keys.isEmpty else { return 0 }
        return try await nearCache.writing(keys) { () throws(CacheStoreError) in try await remoteRemove(keys) }
    }

    /// `DEL` per slot on the masters.
    private func remoteRemove(_ keys: [String]) async throws(CacheStoreError) -> Int {
        let groups = Self.groupedBySlot(keys)
        let replies = try await router.executeAll(
            groups.map { (StoreCommands.del($0.positions.lazy.map { keys[$0] }), $0.slot) })
        var removed = 0
        for reply in replies { removed += try StoreCommands.count(removedBy: reply) }
        return removed
    }

    /// `INCR key` on the key's master.
    /// - Returns: the incremented value.
    /// - Throws: ``CacheStoreError/Kind/server`` when the value is not an integer; ``CacheStoreError`` otherwise.
    public func increment(_ key: String) async throws(CacheStoreError) -> Int {
        try await nearCache.writing([key]) { () throws(CacheStoreError) in
            try StoreCommands.value(ofIncr: try await router.execute(StoreCommands.incr(key), slot: ClusterSlots.slot(of: key)))
        }
    }

    /// Fails queued and in-flight calls with ``CacheStoreError/Kind/closed``, closes every connection and waits
    /// for the store's threads to exit. Later calls fail with ``CacheStoreError/Kind/closed``.
    public func shutdown() async {
        await router.shutdown()
    }

    // MARK: private

    /// The positions of `keys` grouped by slot, the groups in the order of their first key.
    static func groupedBySlot(_ keys: [String]) -> [(slot: Int, positions: [Int])] {
        var groups: [(slot: Int, positions: [Int])] = []
        var groupOfSlot: [Int: Int] = [:]
        for (position, key) in keys.enumerated() {
            let slot = ClusterSlots.slot(of: key)
            if let group = groupOfSlot[slot] {
                groups[group].positions.append(position)
            } else {
                groupOfSlot[slot] = groups.count
                groups.append((slot, [position]))
            }
        }
        return groups
    }
}
