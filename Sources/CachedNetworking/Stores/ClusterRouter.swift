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

    /// The reply to a command sent after `ASKING` on one connection: `ASKING`'s error if it failed, else the
    /// command's own reply.
    static func commandReply(afterAsking result: Result<RESPReply, CacheStoreError>) -> Result<RESPReply, CacheStoreError> {
        guard case .success(.array(let replies)) = result, replies.count == 2 else { return result }
        if case .error = replies[0] { return .success(replies[0]) }
        return .success(replies[1])
    }

    private static let clusterSlotsBytes: [UInt8] = {
        var command = RESPCommand("CLUSTER", argumentCount: 1)
        command.append("SLOTS")
        return command.bytes
    }()
    private static let closedError = CacheStoreError(.closed, "the store was shut down")

    init(configuration: RESPClusterStore.Configuration, logger: Logger) {
        self.configuration = configuration
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
        let deadline = monotonicNanoseconds() &+ UInt64(clamping: configuration.retryTimeout.storeNanoseconds)
        var redirect: (node: Node, asking: Bool)?
        var redirections = 0
        var retries = 0
        while true {
            let failure: CacheStoreError
            if let routed = try route(slot: slot, redirect: redirect) {
                let (node, pool, asking) = routed
                redirect = nil
                let result =
                    asking
                    ? Self.commandReply(afterAsking: await pool.submit(Self.askingBytes + command.bytes, replies: 2))
                    : await pool.submit(command.bytes)
                switch result {
                case .success(.error(let text)):
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
                case .success(let reply):
                    if retries > 0 { state.withLock { _ = $0.suspects.remove(node) } }
                    return reply
                case .failure(let error):
                    switch error.kind {
                    case .unreachable, .timeout:
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
        let results = await withTaskGroup(of: (Int, Result<RESPReply, CacheStoreError>).self) { group in
            for (index, entry) in commands.enumerated() {
                group.addTask {
                    do throws(CacheStoreError) {
                        return (index, .success(try await self.execute(entry.command, slot: entry.slot)))
                    } catch {
                        return (index, .failure(error))
                    }
                }
            }
            var results = [Result<RESPReply, CacheStoreError>?](repeating: nil, count: commands.count)
            for await (index, result) in group { results[index] = result }
            return results
        }
        var replies: [RESPReply] = []
        replies.reserveCapacity(results.count)
        for result in results {
            guard let result else { throw CacheStoreError(.protocolViolation, "a command got no result") }
            replies.append(try result.get())
        }
        return replies
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
            case .success(.error(let text)): throw CacheStoreError(.server, "\(node): \(text)")
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
        let pool = RESPConnectionPool(
            configuration: configuration.nodeConfiguration(node, poolSize: configuration.poolSize), logger: logger)
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
            let pool = RESPConnectionPool(configuration: configuration.nodeConfiguration(node, poolSize: 1), logger: logger)
            s.probes[node] = pool
            return pool
        }
    }

    /// Makes `map` current, and retires the pools of nodes it no longer names.
    private func install(_ map: ClusterSlotMap, from node: Node) {
        let retiring: [RESPConnectionPool] = state.withLock { s in
            guard !s.closed else { return [] }
            let changed = Set(s.map.masters) != Set(map.masters)
            s.map = map
            s.counters.refreshes += 1
            s.suspects.removeAll()
            var retiring: [RESPConnectionPool] = []
            for (known, pool) in s.pools where !map.masters.contains(known) {
                s.pools[known] = nil
                retiring.append(pool)
            }
            let named = Set(map.masters + map.replicas + configuration.seeds)
            for (known, pool) in s.probes where !named.contains(known) {
                s.probes[known] = nil
                retiring.append(pool)
            }
            s.retired += retiring
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
        for pool in pools { await pool.shutdown() }
    }

    /// Starts shutting down without waiting (for `deinit`).
    func beginShutdown() {
        _ = closeAll()
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
