import CachedNetworking
import CoreMetrics
import Logging
import NIOCore
import Synchronization

/// A near cache of a ``RESPStore`` or a ``RESPClusterStore``: the table (shared by every tracking channel), its
/// counters and metrics.
///
/// The table fills only while every ``TrackingChannel`` is subscribed and no channel has turned the near cache
/// off; see ``NearCacheTable`` for the epochs that keep overtaken replies out.
final class NearCacheCore: Sendable {
    private struct State {
        var table: NearCacheTable
        var channels: Set<ObjectIdentifier> = []
        var liveChannels: Set<ObjectIdentifier> = []
        var disabledReason: String?
        var hits = 0
        var misses = 0
        var fills = 0
        var refusedFills = 0
        var invalidations = 0
    }

    /// How a read of one key starts.
    enum SingleRead {
        /// Answered from memory.
        case hit(ByteBuffer)
        /// Not in memory: read it under `ticket`; with its TTL when `fillable`.
        case miss(NearCacheTable.ReadTicket, fillable: Bool)
        /// The near cache is off: read without it.
        case bypass
    }

    /// How a read of several keys starts.
    enum MultiRead {
        /// Every key answered from memory.
        case hits([ByteBuffer?])
        /// Some keys answered (`values`); the others, at `missing` indices, are read under `ticket`, with their
        /// TTLs where `fillable` (one flag per missing key).
        case misses(values: [ByteBuffer?], missing: [Int], NearCacheTable.ReadTicket, fillable: [Bool])
        case bypass
    }

    /// Why entries are dropped, for the metric's `reason` dimension.
    enum InvalidationReason: String, CaseIterable {
        /// Keys the server named.
        case server
        /// The server's flush message.
        case flush
        /// This store's own writes.
        case write
        /// The invalidation connection or a tracking data connection was lost.
        case disconnect
        /// A cluster's slot map changed, or a node's channel was added or removed.
        case topology
    }

    let settings: RESPStore.NearCache
    let logger: Logger
    private let state: Mutex<State>
    private let hitCounter: Counter
    private let missCounter: Counter
    private let invalidationCounters: [InvalidationReason: Counter]

    init(
        settings: RESPStore.NearCache, logger: Logger, metricsFactory: any MetricsFactory,
        metricsDimensions: [(String, String)]
    ) {
        self.settings = settings
        self.logger = logger
        let maxAge = settings.maxAge.map { $0.storeNanoseconds }
        self.state = Mutex(State(table: NearCacheTable(
            maxBytes: settings.maxBytes, entryOverhead: settings.entryOverhead, maxAge: maxAge,
            prefixes: settings.mode.broadcastPrefixes)))
        typealias Names = CachedNetworkingMetrics
        hitCounter = Counter(label: Names.nearCacheHits, dimensions: metricsDimensions, factory: metricsFactory)
        missCounter = Counter(label: Names.nearCacheMisses, dimensions: metricsDimensions, factory: metricsFactory)
        invalidationCounters = Dictionary(uniqueKeysWithValues: InvalidationReason.allCases.map {
            ($0, Counter(
                label: Names.nearCacheInvalidations,
                dimensions: metricsDimensions + [(Names.Dimension.reason, $0.rawValue)], factory: metricsFactory))
        })
    }

    /// The counters and state, for ``RESPStore/nearCacheStatistics``.
    var statistics: RESPStore.NearCacheStatistics {
        state.withLock { s in
            RESPStore.NearCacheStatistics(
                hits: s.hits, misses: s.misses, fills: s.fills, refusedFills: s.refusedFills,
                invalidations: s.invalidations, entries: s.table.count, bytes: s.table.bytes,
                isFilling: s.table.filling, disabledReason: s.disabledReason)
        }
    }

    /// Whether the near cache was turned off for good.
    var isDisabled: Bool { state.withLock { $0.disabledReason != nil } }

    // MARK: reads

    func startRead(_ key: StoreKey) -> SingleRead {
        let now = Int64(clamping: monotonicNanoseconds())
        let start: SingleRead = state.withLock { s in
            guard s.disabledReason == nil else { return .bypass }
            if let value = s.table.lookup(key, now: now) {
                s.hits += 1
                return .hit(value)
            }
            s.misses += 1
            let ticket = s.table.beginRead(now: now)
            return .miss(ticket, fillable: ticket.fillable && s.table.admits(key))
        }
        switch start {
        case .hit: hitCounter.increment()
        case .miss: missCounter.increment()
        case .bypass: break
        }
        return start
    }

    func startRead(_ keys: [StoreKey]) -> MultiRead {
        let now = Int64(clamping: monotonicNanoseconds())
        let (start, hits): (MultiRead, Int) = state.withLock { s in
            guard s.disabledReason == nil else { return (.bypass, 0) }
            var values: [ByteBuffer?] = []
            values.reserveCapacity(keys.count)
            var missing: [Int] = []
            for (index, key) in keys.enumerated() {
                let value = s.table.lookup(key, now: now)
                values.append(value)
                if value == nil { missing.append(index) }
            }
            s.hits += keys.count - missing.count
            s.misses += missing.count
            guard !missing.isEmpty else { return (.hits(values), keys.count) }
            let ticket = s.table.beginRead(now: now)
            let fillable = missing.map { ticket.fillable && s.table.admits(keys[$0]) }
            return (.misses(values: values, missing: missing, ticket, fillable: fillable), keys.count - missing.count)
        }
        if hits > 0 { hitCounter.increment(by: Int64(hits)) }
        if case .misses(_, let missing, _, _) = start { missCounter.increment(by: Int64(missing.count)) }
        return start
    }

    /// Ends a read started by `startRead`, offering what it got: each key, its value and its `PTTL`.
    func finishRead(_ ticket: NearCacheTable.ReadTicket, fills: [(StoreKey, ByteBuffer?, Int64)]) {
        state.withLock { s in
            for (key, value, ttl) in fills {
                switch s.table.fill(ticket, key: key, value: value, ttlMilliseconds: ttl) {
                case .filled: s.fills += 1
                case .refused: s.refusedFills += 1
                case .skipped: break
                }
            }
            s.table.endRead(ticket)
        }
    }

    // MARK: invalidation

    /// Drops `keys` and keeps reads in flight from storing them.
    func invalidate(_ keys: [StoreKey], reason: InvalidationReason) {
        guard !keys.isEmpty else { return }
        state.withLock { s in
            s.table.invalidate(keys)
            s.invalidations += keys.count
        }
        invalidationCounters[reason]?.increment(by: Int64(keys.count))
    }

    /// Drops `keys` written by this store (before the command is sent, and again after its reply).
    func invalidate(written keys: [String], count: Bool = true) {
        guard !keys.isEmpty, !isDisabled else { return }
        let storeKeys = keys.map(StoreKey.init)
        if count {
            invalidate(storeKeys, reason: .write)
        } else {
            state.withLock { _ = $0.table.invalidate(storeKeys) }
        }
    }

    /// Drops everything and keeps reads in flight from storing anything.
    func invalidateAll(reason: InvalidationReason) {
        state.withLock { s in
            s.table.invalidateAll()
            s.invalidations += 1
        }
        invalidationCounters[reason]?.increment()
    }

    // MARK: channels

    /// Adds a channel; the table fills only while every channel is subscribed. A channel added to a table that
    /// fills (a cluster node that joined) stops the filling and drops everything until it is subscribed: reads
    /// from its server are not tracked before then.
    func register(_ channel: AnyObject) {
        state.withLock { s in
            guard s.channels.insert(ObjectIdentifier(channel)).inserted, s.table.filling else { return }
            s.table.stopFilling()
            s.invalidations += 1
        }
    }

    /// Removes a channel whose server left (a cluster node no longer in the slot map): everything is dropped,
    /// since keys read from that server will not be invalidated any more, and the table fills if every remaining
    /// channel is subscribed (and there is one).
    func unregister(_ channel: AnyObject) {
        let removed: Bool = state.withLock { s in
            let id = ObjectIdentifier(channel)
            guard s.channels.remove(id) != nil else { return false }
            s.liveChannels.remove(id)
            s.invalidations += 1
            if s.disabledReason == nil, !s.channels.isEmpty, s.liveChannels == s.channels {
                s.table.invalidateAll()
                s.table.startFilling()
            } else {
                s.table.stopFilling()
            }
            return true
        }
        if removed { invalidationCounters[.topology]?.increment() }
    }

    /// Whether `channel` is one of the near cache's channels (registered, not yet removed).
    func isRegistered(_ channel: AnyObject) -> Bool {
        state.withLock { $0.channels.contains(ObjectIdentifier(channel)) }
    }

    /// `channel` is subscribed and its connections track for it from their next batch on. A channel no longer
    /// registered (its subscriber reported after the channel was retired) changes nothing.
    func channelUp(_ channel: AnyObject) {
        state.withLock { s in
            let id = ObjectIdentifier(channel)
            guard s.channels.contains(id) else { return }
            s.liveChannels.insert(id)
            if s.disabledReason == nil, s.liveChannels == s.channels { s.table.startFilling() }
        }
    }

    /// `channel` lost its subscription or its tracking: everything is dropped and nothing kept until it is back.
    /// A channel no longer registered changes nothing: what was read from its server was dropped when it left.
    func channelDown(_ channel: AnyObject) {
        let registered: Bool = state.withLock { s in
            let id = ObjectIdentifier(channel)
            guard s.channels.contains(id) else { return false }
            s.liveChannels.remove(id)
            s.table.stopFilling()
            s.invalidations += 1
            return true
        }
        if registered { invalidationCounters[.disconnect]?.increment() }
    }

    /// Drops everything and answers nothing more: the store was shut down.
    func close() {
        state.withLock { s in
            if s.disabledReason == nil { s.disabledReason = "the store was shut down" }
            s.table.stopFilling()
        }
    }

    /// Turns the near cache off for good (logged once, at warning level): the server cannot track.
    /// - Returns: true if this call turned it off.
    @discardableResult
    func disable(reason: String) -> Bool {
        let first: Bool = state.withLock { s in
            guard s.disabledReason == nil else { return false }
            s.disabledReason = reason
            s.table.stopFilling()
            return true
        }
        if first {
            logger.warning("near cache turned off: the server does not support client-side caching",
                metadata: ["reason": "\(reason)"])
        }
        return first
    }
}

/// One server's invalidation channel: its ``InvalidationSubscriber`` and the `CLIENT TRACKING` setup of the data
/// connections to the same server (it is their pool's ``RESPConnectionHook``).
///
/// The generation changes whenever the subscription comes or goes, so that every data connection sets its
/// tracking up again before its next batch: for the new subscriber's id once subscribed, not at all while none
/// is. A store on one server has one channel; a store on a cluster has one per master, each hooked to that
/// master's connections, all sharing one ``NearCacheCore`` (see ``ClusterNearCache``).
final class TrackingChannel: RESPConnectionHook, InvalidationListener, Sendable {
    private enum Phase: Equatable {
        case connecting
        case subscribed(clientID: Int64)
        case down
        case disabled
    }

    private struct State {
        var phase = Phase.connecting
        var generation: UInt64 = 0
        var subscriber: InvalidationSubscriber?
    }

    private let core: NearCacheCore
    private let configuration: RESPStore.Configuration
    private let tlsContext: StoreTLSContext?
    private let state = Mutex(State())
    /// `state.generation`, readable without the lock.
    private let generation = Atomic<UInt64>(0)

    /// A channel to the server `configuration` names, feeding `core`, its subscriber connecting with the store's
    /// TLS context when the store uses TLS. Call ``start()`` to subscribe.
    init(configuration: RESPStore.Configuration, tlsContext: StoreTLSContext?, core: NearCacheCore) {
        self.configuration = configuration
        self.tlsContext = tlsContext
        self.core = core
        core.register(self)
    }

    /// Starts the subscriber.
    func start() {
        let subscriber = InvalidationSubscriber(
            configuration: configuration, tlsContext: tlsContext, healthCheckInterval: core.settings.healthCheckInterval,
            logger: core.logger, listener: self)
        state.withLock { $0.subscriber = subscriber }
    }

    /// Stops the subscriber without waiting for its thread, and leaves the near cache: its server is no longer
    /// used (a cluster node that left the slot map). The channel keeps the subscriber, so that ``shutdown()``
    /// still waits for its thread.
    func retire() {
        state.withLock { $0.subscriber }?.beginShutdown()
        core.unregister(self)
    }

    /// Lets go of the subscriber once its thread has exited (a retired channel, whose subscriber refers to it
    /// until then); true if it has.
    func releaseIfStopped() -> Bool {
        state.withLock { s in
            guard s.subscriber?.hasExited ?? true else { return false }
            s.subscriber = nil
            return true
        }
    }

    /// Stops the subscriber without waiting for its thread.
    func beginShutdown() {
        takeSubscriber()?.beginShutdown()
    }

    /// Stops the subscriber and waits for its thread to exit.
    func shutdown() async {
        await takeSubscriber()?.shutdown()
    }

    /// The subscriber, released by the channel: the subscriber refers to the channel as its listener until its
    /// thread exits, and the channel must not keep it beyond that.
    private func takeSubscriber() -> InvalidationSubscriber? {
        state.withLock { s in
            defer { s.subscriber = nil }
            return s.subscriber
        }
    }

    /// Moves to `phase` and a new generation. Must hold the lock.
    private func enter(_ phase: Phase, _ s: inout State) {
        s.phase = phase
        s.generation += 1
        generation.store(s.generation, ordering: .releasing)
    }

    // MARK: InvalidationListener

    func subscribed(clientID: Int64) {
        let disabled: Bool = state.withLock { s in
            guard s.phase != .disabled else { return true }
            enter(.subscribed(clientID: clientID), &s)
            return false
        }
        if !disabled { core.channelUp(self) }
    }

    func invalidate(_ keys: [StoreKey]) {
        core.invalidate(keys, reason: .server)
    }

    func invalidateAll() {
        core.invalidateAll(reason: .flush)
    }

    func unsubscribed(reason: String) {
        guard core.isRegistered(self) else { return }  // retired: its server is no longer used
        // The phase first, so that connections stop registering for the old id; what they read meanwhile was
        // read under tickets that the flush below refuses.
        state.withLock { s in
            if s.phase != .disabled { enter(.down, &s) }
        }
        core.channelDown(self)
        core.logger.info("near cache flushed: the invalidation connection was lost", metadata: ["reason": "\(reason)"])
    }

    func unsupported(reason: String) {
        // A retired channel's subscriber, refused on its way out, says nothing about the servers in use.
        guard core.isRegistered(self) else { return }
        turnOff(reason: reason)
    }

    // MARK: RESPConnectionHook

    var setupGeneration: UInt64 { generation.load(ordering: .acquiring) }

    func setUp(_ connection: HiredisConnection) -> Result<UInt64, CacheStoreError> {
        let (phase, current) = state.withLock { ($0.phase, $0.generation) }
        guard case .subscribed(let clientID) = phase else { return .success(current) }
        var off = RESPCommand("CLIENT", argumentCount: 2)
        off.append("TRACKING")
        off.append("off")
        let on = trackingCommand(redirect: clientID)
        if let error = connection.append(off) ?? connection.append(on) { return .failure(error) }
        var errors: [String] = []
        for _ in 0..<2 {
            switch connection.readReply() {
            case .success(.status): break
            case .success(.error(let text)): errors.append(text)
            case .success(let other): errors.append("CLIENT TRACKING answered \(other.typeName)")
            case .failure(let error): return .failure(error)
            }
        }
        guard let text = errors.first else { return .success(current) }
        if InvalidationSubscriber.isUnknownCommand(text) {
            turnOff(reason: "CLIENT TRACKING: \(text)")
        } else if text.contains("does not exist") {
            // The subscriber's connection is gone on the server and this process has not noticed yet.
            trackingBroken(generation: current, reason: text)
        } else {
            // A refusal that will not change by itself (overlapping prefixes, an ACL without CLIENT).
            turnOff(reason: "CLIENT TRACKING: \(text)")
        }
        return .success(current)
    }

    /// The subscriber's health-check interval: a data connection the server closed loses its tracked keys, so
    /// it must be noticed as soon as the subscriber's own connection would be. None once the near cache is off.
    var idleCheckInterval: Duration? { core.isDisabled ? nil : core.settings.healthCheckInterval }

    func connectionClosed() {
        // The server forgets what a closed connection read, so its keys would never be invalidated.
        guard !core.isDisabled else { return }
        core.invalidateAll(reason: .disconnect)
    }

    // MARK: private

    /// `CLIENT TRACKING on REDIRECT <id> [BCAST [PREFIX <p>]…] [NOLOOP]`.
    private func trackingCommand(redirect clientID: Int64) -> RESPCommand {
        var arguments = ["TRACKING", "on", "REDIRECT", String(clientID)]
        if let prefixes = core.settings.mode.broadcastPrefixes {
            arguments.append("BCAST")
            for prefix in prefixes where !prefix.isEmpty { arguments += ["PREFIX", prefix] }
        }
        if core.settings.noLoop { arguments.append("NOLOOP") }
        var command = RESPCommand("CLIENT", argumentCount: arguments.count)
        for argument in arguments { command.append(argument) }
        return command
    }

    /// Tracking could not be set up for the subscriber of `generation`: flush, stop filling, and subscribe
    /// again, which gives a new generation (unless the channel has moved on already).
    private func trackingBroken(generation expected: UInt64, reason: String) {
        let subscriber: InvalidationSubscriber?? = state.withLock { s in
            guard s.generation == expected, case .subscribed = s.phase else { return .none }
            enter(.down, &s)
            return .some(s.subscriber)
        }
        guard case .some(let subscriber) = subscriber else { return }
        core.channelDown(self)
        core.logger.info("near cache flushed: tracking could not be set up", metadata: ["reason": "\(reason)"])
        subscriber?.reconnect()
    }

    private func turnOff(reason: String) {
        let subscriber = state.withLock { s in
            if s.phase != .disabled { enter(.disabled, &s) }
            return s.subscriber
        }
        core.disable(reason: reason)
        subscriber?.beginShutdown()
    }
}
