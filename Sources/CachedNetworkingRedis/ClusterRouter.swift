import CachedNetworking
import Logging
import Synchronization

/// The routing half of ``RESPClusterStore``: the slot map, a connection pool per master, and the loop that
/// follows redirections and retries through resharding and failover.
///
/// Each master gets a ``RESPConnectionPool`` of ``RESPClusterStore/Configuration/poolSize`` connections (the same
/// pipelining pool as ``RESPStore``'s, so calls never block the cooperative pool). `CLUSTER SLOTS` goes through
/// separate one-connection "probe" pools, one per known node, so that a slot-map refresh never waits behind a
/// master's queue and can ask a replica or a seed when masters fail.
///
/// Locking: one mutex guards the state below; it is never held across an `await` or a blocking call (creating a
/// pool only starts its threads).
final class ClusterRouter: Sendable {
    typealias Node = RESPClusterStore.Node

    let configuration: RESPClusterStore.Configuration
    /// The near cache's channels, one per master, when ``RESPClusterStore/Configuration/nearCache`` is set.
    let nearCache: ClusterNearCache?
    /// The TLS context every node's connections share, when ``RESPClusterStore/Configuration/tls`` is set.
    private let tlsContext: StoreTLSContext?
    /// Logs the server's ACL refusals once per command.
    private let errorReplies: ErrorReplyLog
    private let logger: Logger
    private let state: Mutex<State>

    private struct State {
        var map = ClusterSlotMap()
        /// Data pools, by master.
        var pools: [Node: RESPConnectionPool] = [:]
        /// One-connection pools for `CLUSTER SLOTS`, by node.
        var probes: [Node: RESPConnectionPool] = [:]
        /// Pools of nodes that left the map, shutting down; awaited by ``shutdown()``.
        var retired: [RESPConnectionPool] = []
        /// The refresh under way, which later callers join.
        var refresh: Task<CacheStoreError?, Never>?
        /// When the last refresh ended (monotonic nanoseconds), and how.
        var lastRefresh: (at: UInt64, error: CacheStoreError?)?
        /// Nodes whose last call failed to reach them: asked for the slot map last.
        var suspects: Set<Node> = []
        var closed = false
        var counters = Counters()
    }

    /// What the router has done so far (for tests and diagnostics).
    struct Counters: Sendable, Hashable {
        /// `MOVED` redirections followed.
        var moved = 0
        /// `ASK` redirections followed.
        var asked = 0
        /// Attempts repeated after a transient error or an unreachable node.
        var retried = 0
        /// Slot maps fetched.
        var refreshes = 0
    }

    /// The counters now.
    var counters: Counters { state.withLock { $0.counters } }

    /// Refreshes closer together than this reuse the last one's outcome (a burst of failures or `MOVED`s makes
    /// one `CLUSTER SLOTS`, not one each).
    static let minimumRefreshInterval: UInt64 = 100_000_000
    /// Backoff between retries: from the first delay, doubling, up to the maximum (less up to a fifth at random).
    static let firstRetryDelay: UInt64 = 10_000_000
    static let maximumRetryDelay: UInt64 = 200_000_000

    private static let askingBytes = RESPCommand("ASKING", argumentCount: 0).bytes

    /// The replies to commands each sent after its own `ASKING` on one connection (`asking` true), or sent as
    /// they are: for each command, `ASKING`'s error if it failed, else the command's own reply.
    static func commandReplies(
        _ result: Result<RESPReply, CacheStoreError>, commands: Int, asking: Bool
    ) -> Result<[RESPReply], CacheStoreError> {
        let sent = asking ? 2 * commands : commands
        guard case .success(let reply) = result, sent > 1 else { return result.map { [$0] } }
        guard case .array(let replies) = reply, replies.count == sent else {
            return .failure(StoreCommands.unexpected("a pipeline of \(sent) commands", reply))
        }
        guard asking else { return .success(replies) }
        return .success(stride(from: 0, to: sent, by: 2).map { index in
            if case .error = replies[index] { return replies[index] }
            return replies[index + 1]
        })
    }

    /// The first reply that the router handles itself (a redirection or a transient cluster error), as text.
    static func routingError(in replies: [RESPReply]) -> String? {
        for reply in replies {
            if case .error(let text) = reply,
                ClusterRedirection(errorText: text) != nil || ClusterTransientError(errorText: text) != nil
            {
                return text
            }
        }
        return nil
    }

    private static let clusterSlotsBytes: ByteBuffer = {
        var command = RESPCommand("CLUSTER", argumentCount: 1)
        command.append("SLOTS")
        return command.bytes
    }()
    private static let closedError = CacheStoreError(.closed, "the store was shut down")

    init(configuration: RESPClusterStore.Configuration, logger: Logger, nearCache: ClusterNearCache? = nil) {
        self.configuration = configuration
        self.nearCache = nearCache
        self.tlsContext = StoreTLSContext.make(configuration.tls, logger: logger)
        self.errorReplies = ErrorReplyLog(logger: logger, username: configuration.username)
        self.logger = logger
        self.state = Mutex(State())
    }

    // MARK: calls

    /// Sends `command`, whose keys are all in `slot`, to the master of `slot`, following `MOVED` and `ASK` and
    /// retrying within ``RESPClusterStore/Configuration/retryTimeout``.
    /// - Returns: the reply (never an error reply).
    /// - Throws: ``CacheStoreError/Kind/server`` for an error reply other than a redirection or a transient
    ///   cluster error; the last failure when the retry time is up.
    func execute(_ command: RESPCommand, slot: Int) async throws(CacheStoreError) -> RESPReply {
        try await executeNotingResends(command, slot: slot).reply
    }

    /// ``execute(_:slot:)``, telling also whether the command was sent again after an attempt whose outcome is
    /// unknown (its connection broke or timed out after it may have been applied).
    func executeNotingResends(_ command: RESPCommand, slot: Int) async throws(CacheStoreError) -> (reply: RESPReply, resent: Bool) {
        let (replies, resent) = try await run(pipeline: [command], slot: slot)
        if case .error(let text) = replies[0] { throw CacheStoreError(.server, text) }
        return (replies[0], resent)
    }

    /// Sends `commands`, whose keys are all in `slot`, pipelined on one connection to the master of `slot`, as
    /// ``execute(_:slot:)`` does: a redirection or a transient error in any reply sends them all again.
    /// - Returns: the replies in order; error replies other than those are left to the caller.
    func execute(pipeline commands: [RESPCommand], slot: Int) async throws(CacheStoreError) -> [RESPReply] {
        try await run(pipeline: commands, slot: slot).replies
    }

    private func run(pipeline commands: [RESPCommand], slot: Int) async throws(CacheStoreError) -> (replies: [RESPReply], resent: Bool) {
        let deadline = monotonicNanoseconds() &+ UInt64(clamping: configuration.retryTimeout.storeNanoseconds)
        var redirect: (node: Node, asking: Bool)?
        var redirections = 0
        var retries = 0
        // Whether an attempt failed in a way that leaves unknown whether the server applied it.
        var outcomeUnknown = false
        while true {
            let failure: CacheStoreError
            if let routed = try route(slot: slot, redirect: redirect) {
                let (node, pool, asking) = routed
                redirect = nil
                let bytes = RESPCommand.pipeline(commands, eachAfter: asking ? Self.askingBytes : nil)
                let sent = await pool.submit(bytes, replies: asking ? 2 * commands.count : commands.count)
                let replies = Self.commandReplies(sent, commands: commands.count, asking: asking)
                switch replies.map({ ($0, Self.routingError(in: $0)) }) {
                case .success((_, let text?)):
                    if let redirection = ClusterRedirection(errorText: text) {
                        redirections += 1
                        guard redirections <= configuration.maxRedirections else {
                            throw CacheStoreError(
                                .server, "more than \(configuration.maxRedirections) redirections for slot \(slot); the last: \(text)")
                        }
                        let target = redirection.target(answeredBy: node)
                        if redirection.kind == .moved {
                            noteMoved(redirection.slot, to: target)
                        } else {
                            state.withLock { $0.counters.asked += 1 }
                        }
                        logger.trace("cluster redirection", metadata: ["reply": "\(text)", "from": "\(node)"])
                        redirect = (target, redirection.kind == .ask)
                        continue
                    }
                    guard let transient = ClusterTransientError(errorText: text) else {
                        throw CacheStoreError(.server, text)
                    }
                    if transient == .clusterDown { _ = await refreshSlots() }
                    failure = CacheStoreError(transient == .clusterDown ? .unreachable : .timeout, "\(node) answered \(text)")
                case .success((let replies, nil)):
                    errorReplies.note(replies, answering: commands)
                    if retries > 0 { state.withLock { _ = $0.suspects.remove(node) } }
                    return (replies, outcomeUnknown)
                case .failure(let error):
                    switch error.kind {
                    case .unreachable, .timeout:
                        outcomeUnknown = true
                        state.withLock { _ = $0.suspects.insert(node) }
                        // A node that cannot be reached may have failed over: ask the others. When none of them
                        // answers either, the whole cluster is out of reach and retrying cannot help.
                        if let refreshError = await refreshSlots(), refreshError.kind == .unreachable {
                            throw CacheStoreError(
                                error.kind, "\(node): \(error.message); no node of the cluster answers (\(refreshError.message))")
                        }
                        failure = CacheStoreError(error.kind, "\(node): \(error.message)")
                    case .closed where !isClosed:
                        // The node left the map while this call was queued on its pool.
                        outcomeUnknown = true
                        failure = CacheStoreError(.unreachable, "\(node) left the cluster")
                    default:
                        throw error
                    }
                }
            } else {
                // No node is known for the slot: ask the cluster. A refresh that fails here is final (no seed
                // answers, or a seed is not a cluster node); a map without the slot is retried (the slot may be
                // picked up by a failover).
                if let refreshError = await refreshSlots() { throw refreshError }
                if try route(slot: slot, redirect: nil) != nil { continue }
                failure = CacheStoreError(.unreachable, "no master serves slot \(slot)")
            }
            retries += 1
            // The bound on redirections is per attempt: a slot being migrated answers ASK and then TRYAGAIN
            // until the migration of the keys is done, and those retries are bounded by the retry time.
            redirections = 0
            state.withLock { $0.counters.retried += 1 }
            let now = monotonicNanoseconds()
            guard now < deadline, !Task.isCancelled else { throw failure }
            logger.debug("retrying a cluster command", metadata: ["slot": "\(slot)", "after": "\(failure)"])
            try? await Task.sleep(nanoseconds: min(Self.retryDelay(afterRetries: retries), deadline &- now))
        }
    }

    /// Runs `commands` (each with the slot of its keys) concurrently.
    /// - Returns: the replies in the order of `commands`.
    /// - Throws: the first failure, in the order of `commands`.
    func executeAll(_ commands: [(command: RESPCommand, slot: Int)]) async throws(CacheStoreError) -> [RESPReply] {
        try await Self.concurrently(commands.count) { (index) throws(CacheStoreError) in
            try await self.execute(commands[index].command, slot: commands[index].slot)
        }
    }

    /// Runs `work` for each index below `count` concurrently.
    /// - Returns: the results in the order of the indices.
    /// - Throws: the first failure, in the order of the indices.
    static func concurrently<Value: Sendable>(
        _ count: Int, _ work: @escaping @Sendable (Int) async throws(CacheStoreError) -> Value
    ) async throws(CacheStoreError) -> [Value] {
        typealias Outcome = Result<Value, CacheStoreError>
        let outcomes = await withTaskGroup(of: (Int, Outcome).self) { group in
            for index in 0..<count {
                group.addTask {
                    do throws(CacheStoreError) {
                        return (index, .success(try await work(index)))
                    } catch {
                        return (index, .failure(error))
                    }
                }
            }
            var outcomes = [Outcome?](repeating: nil, count: count)
            for await (index, outcome) in group { outcomes[index] = outcome }
            return outcomes
        }
        var results: [Value] = []
        results.reserveCapacity(count)
        for outcome in outcomes {
            guard let outcome else { throw CacheStoreError(.protocolViolation, "a command got no result") }
            results.append(try outcome.get())
        }
        return results
    }

    /// Sends `command` to every master (after refreshing the slot map).
    func executeOnEveryMaster(_ command: RESPCommand) async throws(CacheStoreError) -> [(Node, RESPReply)] {
        if let refreshError = await refreshSlots(force: true) { throw refreshError }
        let masters: [(Node, RESPConnectionPool)] = try state.withLock { (s) throws(CacheStoreError) in
            if s.closed { throw Self.closedError }
            return s.map.masters.map { ($0, dataPool(for: $0, in: &s)) }
        }
        var replies: [(Node, RESPReply)] = []
        for (node, pool) in masters {
            switch await pool.submit(command.bytes) {
            case .success(.error(let text)):
                errorReplies.note([.error(text)], answering: [command])
                throw CacheStoreError(.server, "\(node): \(text)")
            case .success(let reply): replies.append((node, reply))
            case .failure(let error): throw CacheStoreError(error.kind, "\(node): \(error.message)")
            }
        }
        return replies
    }

    /// The master (or redirection target) for `slot` and its pool, creating the pool on first use; nil when
    /// the map has no master for the slot.
    private func route(slot: Int, redirect: (node: Node, asking: Bool)?) throws(CacheStoreError)
        -> (Node, RESPConnectionPool, asking: Bool)?
    {
        try state.withLock { (s) throws(CacheStoreError) in
            if s.closed { throw Self.closedError }
            guard let node = redirect?.node ?? s.map.master(of: slot) else { return nil }
            return (node, dataPool(for: node, in: &s), redirect?.asking ?? false)
        }
    }

    private func dataPool(for node: Node, in s: inout State) -> RESPConnectionPool {
        if let pool = s.pools[node] { return pool }
        let nodeConfiguration = configuration.nodeConfiguration(node, poolSize: configuration.poolSize)
        // With a near cache, the node's channel is created (and, being new, stops the filling) before any of
        // its connections exists: no read from the node is kept before its subscriber is up.
        let pool = RESPConnectionPool(
            configuration: nodeConfiguration, tlsContext: tlsContext, logger: logger,
            hook: nearCache?.channel(for: node, configuration: nodeConfiguration, tlsContext: tlsContext))
        s.pools[node] = pool
        return pool
    }

    private var isClosed: Bool { state.withLock { $0.closed } }

    private static func retryDelay(afterRetries retries: Int) -> UInt64 {
        let doubled = firstRetryDelay << UInt64(min(max(retries - 1, 0), 16))
        let delay = min(maximumRetryDelay, doubled)
        return delay - UInt64.random(in: 0...(delay / 5))
    }

    // MARK: the slot map

    /// The slot map now (for tests and diagnostics).
    var slotMap: ClusterSlotMap { state.withLock { $0.map } }

    /// Records a `MOVED`: the slot goes to `node` at once, and the whole map is refreshed in the background
    /// (a slot rarely moves alone).
    private func noteMoved(_ slot: Int, to node: Node) {
        let refreshDue: Bool = state.withLock { s in
            s.counters.moved += 1
            s.map.assign(slot, to: node)
            nearCache?.topologyChanged("slot \(slot) moved to \(node)")
            guard s.refresh == nil, !s.closed else { return false }
            guard let last = s.lastRefresh else { return true }
            return monotonicNanoseconds() &- last.at >= Self.minimumRefreshInterval
        }
        if refreshDue { Task { _ = await self.refreshSlots() } }
    }

    /// Fetches the slot map with `CLUSTER SLOTS` from the first node that answers: known masters, then
    /// replicas, then seeds, nodes that recently failed last. A refresh under way is joined; one that ended
    /// less than ``minimumRefreshInterval`` ago is not repeated unless `force`d.
    /// - Returns: nil when the map is fresh; else why no node gave one (``CacheStoreError/Kind/unreachable``
    ///   when none answered, ``CacheStoreError/Kind/server`` when one answered with an error).
    @discardableResult
    func refreshSlots(force: Bool = false) async -> CacheStoreError? {
        enum Step {
            case join(Task<CacheStoreError?, Never>)
            case reuse(CacheStoreError?)
        }
        let step: Step = state.withLock { s in
            if s.closed { return .reuse(Self.closedError) }
            if let running = s.refresh { return .join(running) }
            if !force, let last = s.lastRefresh, monotonicNanoseconds() &- last.at < Self.minimumRefreshInterval {
                return .reuse(last.error)
            }
            let task = Task { await self.fetchSlots() }
            s.refresh = task
            return .join(task)
        }
        switch step {
        case .join(let task): return await task.value
        case .reuse(let error): return error
        }
    }

    private func fetchSlots() async -> CacheStoreError? {
        let candidates: [Node] = state.withLock { s in
            var nodes: [Node] = []
            for node in s.map.masters.shuffled() + s.map.replicas.shuffled() + configuration.seeds
            where !nodes.contains(node) {
                nodes.append(node)
            }
            return nodes.filter { !s.suspects.contains($0) } + nodes.filter { s.suspects.contains($0) }
        }
        var outcome: CacheStoreError? = CacheStoreError(.unreachable, "no seed node is configured")
        var answered = false
        for node in candidates {
            guard let probe = probePool(for: node) else {
                outcome = Self.closedError
                break
            }
            switch await probe.submit(Self.clusterSlotsBytes) {
            case .success(.error(let text)):
                answered = true
                outcome = CacheStoreError(.server, "CLUSTER SLOTS on \(node) answered \(text)")
            case .success(let reply):
                answered = true
                do throws(CacheStoreError) {
                    let map = try ClusterSlotMap(parsing: reply, answeredBy: node)
                    guard map.coveredSlots > 0 else {
                        outcome = CacheStoreError(.unreachable, "\(node) knows no slot yet: is the cluster created?")
                        continue
                    }
                    install(map, from: node)
                    outcome = nil
                } catch {
                    outcome = CacheStoreError(error.kind, "\(node): \(error.message)")
                }
            case .failure(let error):
                if !answered { outcome = CacheStoreError(error.kind, "\(node): \(error.message)") }
            }
            if outcome == nil || outcome?.kind == .closed { break }
        }
        if let outcome, outcome.kind != .closed {
            logger.warning("cannot fetch the cluster's slot map", metadata: ["error": "\(outcome)"])
        }
        state.withLock { s in
            s.refresh = nil
            s.lastRefresh = (monotonicNanoseconds(), outcome)
        }
        return outcome
    }

    private func probePool(for node: Node) -> RESPConnectionPool? {
        state.withLock { s in
            if s.closed { return nil }
            if let pool = s.probes[node] { return pool }
            let pool = RESPConnectionPool(
                configuration: configuration.nodeConfiguration(node, poolSize: 1), tlsContext: tlsContext, logger: logger)
            s.probes[node] = pool
            return pool
        }
    }

    /// Makes `map` current, and retires the pools of nodes it no longer names.
    private func install(_ map: ClusterSlotMap, from node: Node) {
        let retiring: [RESPConnectionPool] = state.withLock { s in
            guard !s.closed else { return [] }
            let changed = Set(s.map.masters) != Set(map.masters)
            if !s.map.assignsSlotsAs(map) { nearCache?.topologyChanged("new slot map from \(node)") }
            s.map = map
            s.counters.refreshes += 1
            s.suspects.removeAll()
            var retiring: [RESPConnectionPool] = []
            for (known, pool) in s.pools where !map.masters.contains(known) {
                s.pools[known] = nil
                retiring.append(pool)
                nearCache?.nodeLeft(known)
            }
            let named = Set(map.masters + map.replicas + configuration.seeds)
            for (known, pool) in s.probes where !named.contains(known) {
                s.probes[known] = nil
                retiring.append(pool)
            }
            // Pools retired before whose threads have all exited are done with.
            s.retired.removeAll { $0.runningThreadCount == 0 }
            s.retired += retiring
            // With a near cache every master gets its pool, and so its invalidation channel, at once: a channel
            // that joins later stops the filling and drops everything until it is subscribed.
            if nearCache != nil {
                for master in map.masters { _ = dataPool(for: master, in: &s) }
            }
            if changed {
                logger.debug(
                    "cluster slot map changed",
                    metadata: ["from": "\(node)", "masters": "\(map.masters.map(\.description).joined(separator: " "))"])
            }
            return retiring
        }
        for pool in retiring { pool.beginShutdown() }
    }

    // MARK: shutdown

    /// Connection threads of every pool (retired ones included) that have not exited yet.
    var runningThreadCount: Int {
        let pools = state.withLock { s in Array(s.pools.values) + Array(s.probes.values) + s.retired }
        return pools.reduce(0) { $0 + $1.runningThreadCount }
    }

    /// Fails queued and in-flight calls with ``CacheStoreError/Kind/closed`` and waits until every connection
    /// thread has exited.
    func shutdown() async {
        let pools = closeAll()
        await nearCache?.shutdown()
        for pool in pools { await pool.shutdown() }
    }

    /// Starts shutting down without waiting (for `deinit`).
    func beginShutdown() {
        _ = closeAll()
        nearCache?.beginShutdown()
    }

    private func closeAll() -> [RESPConnectionPool] {
        let (pools, refresh): ([RESPConnectionPool], Task<CacheStoreError?, Never>?) = state.withLock { s in
            s.closed = true
            let pools = Array(s.pools.values) + Array(s.probes.values) + s.retired
            s.pools = [:]
            s.probes = [:]
            s.retired = pools
            return (pools, s.refresh)
        }
        refresh?.cancel()
        for pool in pools { pool.beginShutdown() }
        return pools
    }
}
