import CacheCore
import CachedTLS
import Foundation
import Logging
import NIOCore
import RESP
import Synchronization

/// What all connections share: the keyspace, the configuration, the clients and the counters.
package final class ServerState: Sendable {
    package let keyspace: Keyspace
    package let clock: any CacheClock
    package let commands: CommandTable
    package let clients = ClientRegistry()
    package let monitors = MonitorRegistry()
    /// Pub/sub subscriptions (SUBSCRIBE, PSUBSCRIBE, PUBLISH).
    package let pubsub = PubSubRegistry()
    /// Keyspace notifications (`notify-keyspace-events`), published through ``pubsub``.
    package let notifications: KeyspaceNotifier
    /// Client-side caching: CLIENT TRACKING's clients and the keys they may hold.
    package let tracking: TrackingTable
    package let stats = ServerStats()
    /// WATCH: the keys clients watch.
    package let watches = WatchRegistry()
    /// EXEC: runs a transaction with no other client's command in between.
    package let transactions = TransactionGate()
    /// INFO commandstats and errorstats.
    package let commandStatistics: CommandStatisticsRegistry
    /// SLOWLOG.
    package let slowLog = SlowLog()
    /// LATENCY.
    package let latency = LatencyMonitor()
    /// CLIENT PAUSE, and the clients it holds or WAIT blocks.
    package let blocked = BlockedClients()
    /// ACL LOG: failed authentications.
    package let aclLog = AclLog()
    /// ACL: the users, `default` first among them.
    package let users: AclUsers
    /// Closes connections that send HTTP requests.
    package let crossProtocol = CrossProtocolGuard()
    /// MIGRATE's connections to its targets, kept for reuse.
    package let migrateSockets = MigrateSockets()
    /// Where ``evictToLimit(now:)`` starts next.
    private let evictionStart = Atomic<Int>(0)
    /// Snapshot saves and the startup load.
    package let snapshots: SnapshotCoordinator
    package let logger: Logger
    /// Milliseconds since the epoch when the server started.
    package let startTime: Int64
    /// 40 random hex digits, as Redis's run_id.
    package let runID: String
    /// The replication ID INFO reports (`master_replid`): random, as Redis makes one at start; no replica
    /// ever uses it.
    package let replicationID: String
    private let configuration: Mutex<ServerConfiguration>
    private let shutdownHook = Mutex<(@Sendable (ShutdownRequest) -> Void)?>(nil)
    private let listenHook = Mutex<(@Sendable (ServerConfiguration) -> Bool)?>(nil)
    private let tls = Mutex<TLSContext?>(nil)
    /// TLS handshakes under way, which count against `maxclients`.
    package let handshakes = PendingHandshakes()

    /// What new TLS connections use: the TLS settings loaded last (at start, or by CONFIG SET); nil while the
    /// server does not use TLS.
    package var tlsContext: TLSContext? {
        get { tls.withLock { $0 } }
        set { tls.withLock { $0 = newValue } }
    }
    private let limitsVersion = Atomic<Int>(0)
    private let busyPollWindow = Atomic<Int64>(0)
    private let latencyTrackingOn = Atomic<Bool>(true)
    /// Whether commands' latencies are counted (`latency-tracking`).
    package var latencyTracking: Bool { latencyTrackingOn.load(ordering: .relaxed) }
    /// `stop-writes-on-bgsave-error` is on and save points are set: writes are refused while saves fail.
    private let stopWritesArmed = Atomic<Bool>(false)

    /// Whether writes are refused because background saves fail (Redis's `writeCommandsDeniedByDiskError`):
    /// the last one failed, save points are set and `stop-writes-on-bgsave-error` is on. One relaxed load
    /// on every command while saves succeed.
    @inline(__always)
    package var refusesWrites: Bool {
        snapshots.backgroundSaveFailed && stopWritesArmed.load(ordering: .relaxed)
    }

    /// `busy-poll` in nanoseconds, for the event loops' pollers.
    package var busyPollNanoseconds: Int64 { busyPollWindow.load(ordering: .relaxed) }

    /// Changes whenever CONFIG SET changes the request limits; connections re-read them only then.
    @inline(__always)
    package var limitsGeneration: Int { limitsVersion.load(ordering: .acquiring) }

    private let limitsCache: Mutex<(parser: RESPRequestLimits, queryBuffer: Int, output: ServerConfiguration.OutputBufferLimits)>

    package init(configuration: ServerConfiguration, clock: any CacheClock = SystemClock(), logger: Logger) {
        let keyspace = Keyspace(databases: configuration.databases)
        self.keyspace = keyspace
        self.tracking = TrackingTable(removals: keyspace.removals)
        self.notifications = KeyspaceNotifier(removals: keyspace.removals, pubsub: pubsub)
        notifications.configure(configuration.notifyKeyspaceEvents)
        self.clock = clock
        self.commands = CommandTable(CommandRegistry.all.renamed(configuration.renamedCommands))
        self.commandStatistics = CommandStatisticsRegistry(commands: commands)
        self.users = AclUsers(table: commands)
        if !configuration.requirePass.isEmpty { users.setDefaultPassword(configuration.requirePass) }
        self.logger = logger
        self.startTime = clock.nowMilliseconds()
        self.snapshots = SnapshotCoordinator(keyspace: keyspace, clock: clock, logger: logger)
        self.runID = (0..<40).map { _ in String("0123456789abcdef".randomElement()!) }.joined()
        self.replicationID = (0..<40).map { _ in String("0123456789abcdef".randomElement()!) }.joined()
        self.configuration = Mutex(configuration)
        self.limitsCache = Mutex(Self.limits(for: configuration))
        busyPollWindow.store(Int64(configuration.busyPoll) * 1000, ordering: .relaxed)
        latencyTrackingOn.store(configuration.latencyTracking, ordering: .relaxed)
        stopWritesArmed.store(Self.stopsWrites(configuration), ordering: .relaxed)
        Self.applyMemorySettings(configuration, to: keyspace.budget)
        slowLog.configure(thresholdMicroseconds: configuration.slowlogLogSlowerThan, maxLength: configuration.slowlogMaxLen)
        aclLog.maxEntries = configuration.acllogMaxLen
        latency.configure(thresholdMilliseconds: configuration.latencyMonitorThreshold)
    }

    private static func stopsWrites(_ config: ServerConfiguration) -> Bool {
        config.stopWritesOnBackgroundSaveError && !config.savePoints.isEmpty
    }

    /// Hands `maxmemory`, `maxmemory-policy` and `maxmemory-samples` to the engine.
    private static func applyMemorySettings(_ config: ServerConfiguration, to budget: MemoryBudget) {
        budget.setLimit(Int(clamping: config.maxMemory))
        budget.setPolicy(config.maxMemoryPolicy.evictionPolicy)
        budget.samples.store(config.maxMemorySamples, ordering: .relaxed)
    }

    /// Reads the users of the configuration's `user` lines, or of its ACL file, at startup.
    package func loadUsers() throws(AclSetupError) {
        let config = self.config
        let allChannels = config.aclPubsubDefault == .allchannels
        if !config.aclFile.isEmpty && !config.users.isEmpty {
            throw AclSetupError(
                description: "Configuring Redis with users defined in redis.conf and at the same setting an ACL file path is invalid. This setup is very likely to lead to configuration errors and security holes, please define either an ACL file or declare users directly in your redis.conf, but not both.")
        }
        do throws(AclUsers.LoadError) {
            if !config.users.isEmpty {
                users.install(try users.parse(userLines: config.users, pubsubDefaultAll: allChannels))
            }
        } catch {
            throw AclSetupError(description: "\(error.description). Critical error while loading ACLs. Exiting.")
        }
        if !config.aclFile.isEmpty {
            let contents: String
            switch AclUsers.readFile(config.aclFile) {
            case .success(let text): contents = text
            case .failure(let reason):
                throw AclSetupError(
                    description: "Aborting Redis startup because of ACL errors: Error loading ACLs, opening file '\(config.aclFile)': \(reason)")
            }
            do throws(AclUsers.LoadError) {
                let parsed = try users.parse(file: contents, path: config.aclFile, pubsubDefaultAll: allChannels)
                _ = users.replaceAll(with: parsed)
            } catch {
                throw AclSetupError(description: "Aborting Redis startup because of ACL errors: \(error.description)")
            }
        }
    }

    /// A copy of the current configuration.
    package var config: ServerConfiguration { configuration.withLock { $0 } }

    /// Changes the configuration at run time (CONFIG SET).
    package func updateConfiguration<E: Error>(_ body: (inout ServerConfiguration) throws(E) -> Void) throws(E) {
        let result: Result<Void, E> = configuration.withLock { config in
            let password = config.requirePass
            do throws(E) {
                try body(&config)
            } catch {
                return .failure(error)
            }
            // As Redis: a new requirepass replaces the default user's passwords.
            if config.requirePass != password { users.setDefaultPassword(config.requirePass) }
            limitsCache.withLock { $0 = Self.limits(for: config) }
            limitsVersion.add(1, ordering: .releasing)
            busyPollWindow.store(Int64(config.busyPoll) * 1000, ordering: .relaxed)
            latencyTrackingOn.store(config.latencyTracking, ordering: .relaxed)
            stopWritesArmed.store(Self.stopsWrites(config), ordering: .relaxed)
            notifications.configure(config.notifyKeyspaceEvents)
            slowLog.configure(thresholdMicroseconds: config.slowlogLogSlowerThan, maxLength: config.slowlogMaxLen)
            aclLog.maxEntries = config.acllogMaxLen
            latency.configure(thresholdMilliseconds: config.latencyMonitorThreshold)
            Self.applyMemorySettings(config, to: keyspace.budget)
            return .success(())
        }
        try result.get()
    }

    /// The request parser's limits and the query buffer limit under the current configuration.
    package var requestLimits: (parser: RESPRequestLimits, queryBuffer: Int, output: ServerConfiguration.OutputBufferLimits) {
        limitsCache.withLock { $0 }
    }

    private static func limits(for config: ServerConfiguration) -> (parser: RESPRequestLimits, queryBuffer: Int, output: ServerConfiguration.OutputBufferLimits) {
        let parser = RESPRequestLimits(maxBulkLength: config.protoMaxBulkLength, maxInlineLength: config.protoInlineMaxSize)
        // One command is held in one buffer, which cannot pass 4 GiB: a larger limit acts as 2 GiB.
        return (parser, min(config.clientQueryBufferLimit, CommandContext.maxReplyBytes), config.clientOutputBufferLimits)
    }

    /// Evicts toward `maxmemory` (if the policy lets it), as Redis does when the limit is lowered and before
    /// any command while memory is over it: here when the limit or the policy changes, and on every sweeper
    /// cycle (after a snapshot load larger than the limit, say); writes evict for themselves. At most
    /// ``evictionStep`` keys per call, so that neither an event loop nor the sweeper is held up by a large
    /// excess: the sweeper's next cycles go on. Tracking clients hear of the evicted keys.
    @discardableResult
    package func evictToLimit(now: Int64) -> Keyspace.EvictionOutcome {
        let budget = keyspace.budget
        guard budget.isOverLimit else { return .withinLimit }
        guard budget.policy != .noEviction else { return .nothingToEvict }
        // As Redis: while CLIENT PAUSE holds clients, the dataset stands still; eviction waits for the pause's end.
        guard blocked.pauseMode(now: now) == .none else { return .withinLimit }
        keyspace.refreshDatabasesInUse()
        // Start at another shard each time, so that no shard is emptied first.
        let start = evictionStart.wrappingAdd(1, ordering: .relaxed).newValue % Keyspace.shardCount
        let outcome = keyspace.evict(database: 0, shardIndex: start, now: now, keyBudget: Self.evictionStep)
        sendBackgroundInvalidations(tableLimit: config.trackingTableMaxKeys)
        notifications.publishBackgroundRemovals()
        return outcome
    }

    /// Whether this process's heap belongs to the server (set by the running service): then CONFIG SET
    /// maxmemory measures it at once. Servers driven directly, as in tests, count their dataset alone.
    private let heapIsOwn = Atomic<Bool>(false)
    /// The allocator's bytes in use when the server was ready to serve (MEMORY STATS, INFO used_memory_startup).
    private let startupBytes = Atomic<Int>(AllocatorStatistics.current().allocated)
    /// The most used memory seen (INFO used_memory_peak): sampled by the sweeper at every cycle and by each
    /// INFO memory or MEMORY STATS.
    private let peakBytes = Atomic<Int>(0)

    package var startupAllocated: Int { startupBytes.load(ordering: .relaxed) }

    /// Records `used` bytes in use; returns the peak, this sample included.
    @discardableResult
    package func notePeak(_ used: Int) -> Int {
        var peak = peakBytes.load(ordering: .relaxed)
        while used > peak {
            let (exchanged, original) = peakBytes.compareExchange(expected: peak, desired: used, ordering: .relaxed)
            if exchanged { return used }
            peak = original
        }
        return peak
    }

    /// Called by the service that runs the server, before it accepts connections.
    package func countHeapOverhead() {
        heapIsOwn.store(true, ordering: .relaxed)
        startupBytes.store(AllocatorStatistics.current().allocated, ordering: .relaxed)
        // A limit given at start holds from the first command, not from the sweeper's first cycle.
        keyspace.flushAccounting()
        refreshMemoryOverhead()
    }

    /// After CONFIG SET maxmemory or maxmemory-policy: measures the heap beyond the dataset now, so that the
    /// new limit holds from the next command instead of from the sweeper's next cycle.
    package func refreshMemoryOverheadIfOwn() {
        guard heapIsOwn.load(ordering: .relaxed) else { return }
        // The shards' unflushed changes first, or the heap beyond the dataset would count them, as the sweeper
        // does before it measures.
        keyspace.flushAccounting()
        refreshMemoryOverhead()
    }

    /// Measures the heap beyond the dataset (the allocator's statistics; tens of microseconds), which
    /// `maxmemory` counts as used memory.
    package func refreshMemoryOverhead() {
        let budget = keyspace.budget
        let dataset = budget.datasetBytes.load(ordering: .relaxed)
        let overhead = EntryMemory.overheadBytes(datasetBytes: dataset)
        budget.overheadBytes.store(overhead, ordering: .relaxed)
        notePeak(dataset + overhead)
    }

    /// The most keys ``evictToLimit(now:)`` evicts in one call: some milliseconds of work.
    package static let evictionStep = 10_000

    /// Warns when `maxmemory` is below what the server's heap holds besides the keys: then no write fits,
    /// whatever the policy (an idle server uses a few megabytes; Redis about one). At start and after CONFIG SET.
    package func warnIfMaxMemoryTooSmall() {
        let limit = config.maxMemory
        guard limit > 0 else { return }
        let dataset = keyspace.usedBytes
        let overhead = EntryMemory.overheadBytes(datasetBytes: dataset, statistics: AllocatorStatistics.current())
        guard UInt64(clamping: overhead) >= limit else { return }
        logger.warning(
            "maxmemory is below the memory the server uses without its keys: an evicting policy will empty the cache, and noeviction refuse every write that needs memory, until it is raised",
            metadata: ["maxmemory": "\(limit)", "used_without_keys": "\(overhead)"])
    }

    /// Installs what SHUTDOWN calls.
    package func onShutdownRequest(_ hook: @escaping @Sendable (ShutdownRequest) -> Void) {
        shutdownHook.withLock { $0 = hook }
    }

    /// Installs what CONFIG SET calls when `port` or `bind` change.
    package func onListenChange(_ hook: @escaping @Sendable (ServerConfiguration) -> Bool) {
        listenHook.withLock { $0 = hook }
    }

    /// Listens where `config` says (CONFIG SET of `port` or `bind`). False when a socket could not be opened:
    /// then nothing changed. True when nothing listens yet (a server state without its service, in tests).
    package func listen(as config: ServerConfiguration) -> Bool {
        guard let hook = listenHook.withLock({ $0 }) else { return true }
        return hook(config)
    }

    /// Asks the server to stop (SHUTDOWN). Returns false when nothing is installed to do it.
    package func requestShutdown(_ request: ShutdownRequest) -> Bool {
        guard let hook = shutdownHook.withLock({ $0 }) else { return false }
        hook(request)
        return true
    }
}

extension ServerConfiguration.MaxMemoryPolicy {
    /// The engine's policy of this name.
    package var evictionPolicy: EvictionPolicy {
        switch self {
        case .volatileLRU: .volatileLRU
        case .volatileLFU: .volatileLFU
        case .volatileRandom: .volatileRandom
        case .volatileTTL: .volatileTTL
        case .allKeysLRU: .allKeysLRU
        case .allKeysLFU: .allKeysLFU
        case .allKeysRandom: .allKeysRandom
        case .noEviction: .noEviction
        case .allKeysSieve: .allKeysSieve
        }
    }
}

/// How SHUTDOWN asked the server to stop.
package struct ShutdownRequest: Sendable {
    package var save: Bool?
    package var now: Bool
    package var force: Bool
}

/// Counters INFO reports that no single shard owns.
package final class ServerStats: Sendable {
    package let connectionsReceived = Atomic<Int>(0)
    package let rejectedConnections = Atomic<Int>(0)
    /// Commands run by connections that have closed (live ones count their own).
    package let commandsOfClosedClients = Atomic<Int>(0)
    /// Bytes read from and written to clients that have closed (live ones count their own).
    package let netInputBytes = Atomic<Int>(0)
    package let netOutputBytes = Atomic<Int>(0)
    /// Operations per second over the last sampling period, updated by the cron.
    package let instantaneousOpsPerSecond = Atomic<Int>(0)
    /// Bytes per second read from and written to clients over the last sampling period (INFO's
    /// instantaneous_input_kbps and instantaneous_output_kbps), updated by the cron.
    package let instantaneousInputBytesPerSecond = Atomic<Int>(0)
    package let instantaneousOutputBytesPerSecond = Atomic<Int>(0)
    package let resetTime = Atomic<Int64>(0)
    /// Hits, misses, expired and evicted keys, commands and traffic at the last CONFIG RESETSTAT, subtracted
    /// from the running totals.
    package let baseline = Mutex<
        (hits: Int, misses: Int, expired: Int, evicted: Int, commands: Int, input: Int, output: Int)
    >((0, 0, 0, 0, 0, 0, 0))

    package init() {}
}

/// The connected clients, for CLIENT LIST / KILL / INFO.
package final class ClientRegistry: Sendable {
    private let sessions = Mutex<[Int: ClientSession]>([:])
    private let nextID = Atomic<Int>(1)

    package init() {}

    package func makeID() -> Int { nextID.wrappingAdd(1, ordering: .relaxed).oldValue }

    package func add(_ session: ClientSession) { sessions.withLock { $0[session.id] = session } }

    package func remove(_ id: Int) { sessions.withLock { _ = $0.removeValue(forKey: id) } }

    package var count: Int { sessions.withLock { $0.count } }

    /// The sessions ordered by id.
    package var all: [ClientSession] { sessions.withLock { Array($0.values) }.sorted { $0.id < $1.id } }

    package func session(id: Int) -> ClientSession? { sessions.withLock { $0[id] } }
}

/// Connections in MONITOR mode, fed every command as it runs.
package final class MonitorRegistry: Sendable {
    private let sessions = Mutex<[Int: ClientSession]>([:])
    private let active = Atomic<Int>(0)

    package init() {}

    /// Whether anyone monitors (checked on every command, so it is one relaxed load).
    @inline(__always)
    package var isActive: Bool { active.load(ordering: .relaxed) > 0 }

    package func add(_ session: ClientSession) {
        sessions.withLock {
            $0[session.id] = session
            active.store($0.count, ordering: .relaxed)
        }
    }

    package func remove(id: Int) {
        sessions.withLock {
            if $0.removeValue(forKey: id) != nil { active.store($0.count, ordering: .relaxed) }
        }
    }

    /// Closes every monitor, as over its output limit: the line of a command too large to be fed to them.
    package func closeAll(logger: Logger) {
        for session in sessions.withLock({ Array($0.values) }) {
            logger.warning(
                "Client closed for overcoming of output buffer limits", metadata: ["client": "\(session.remoteAddress)"])
            session.close()
        }
    }

    /// Sends `line` to every monitor but the one with id `excluded`, through its connection's output, so that a
    /// monitor that does not read is held to `client-output-buffer-limit` like any client.
    package func broadcast(_ line: ByteBuffer, except excluded: Int? = nil) {
        let targets = sessions.withLock { $0.filter { $0.key != excluded }.map(\.value) }
        for session in targets {
            session.outlet?.send { _, output in output.writeImmutableBuffer(line) }
        }
    }
}

// MARK: transactions

extension ServerState {
    /// Whether `name` exists (and has not expired) in database `db`. Only looks: an expired key stays for the
    /// sweeper or the next command, as Redis's WATCH leaves it.
    package func keyExists(db: Int, name: [UInt8], now: Int64) -> Bool {
        name.withUnsafeBytes { name in
            let hash = Keyspace.hasher.hash(name)
            let shard = keyspace.databases[db].shard(for: hash)
            shard.lock.lock()
            defer { shard.lock.unlock() }
            guard let index = shard.find(name, hash: hash) else { return false }
            return !shard.entry(at: index).isExpired(at: now)
        }
    }

    /// Forgets every key `session` watches (UNWATCH, EXEC, DISCARD, the connection closing).
    package func unwatchAll(_ session: ClientSession) {
        let keys = session.takeWatchedKeys()
        if !keys.isEmpty { watches.remove(keys, for: session) }
        session.clearWatchDirty()
    }

    /// Database `db` is about to be emptied: watchers of its existing keys are told (Redis's
    /// `touchAllWatchedKeysInDb`).
    package func touchWatchedKeys(flushing db: Int, now: Int64) {
        watches.touchAll(db: db) { keyExists(db: db, name: $0.name, now: now) }
    }

    /// Databases `a` and `b` are about to be swapped: watchers of a key of either that exists in either are told.
    package func touchWatchedKeys(swapping a: Int, _ b: Int, now: Int64) {
        watches.touchAll(db: a) { keyExists(db: a, name: $0.name, now: now) || keyExists(db: b, name: $0.name, now: now) }
        watches.touchAll(db: b) { keyExists(db: b, name: $0.name, now: now) || keyExists(db: a, name: $0.name, now: now) }
    }
}

