import CThreadName
import CacheCore
import CachedTLS
import Foundation
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import Synchronization

/// The cache server as a swift-service-lifecycle `Service`: it loads the snapshot file if there is one,
/// listens, serves RESP clients on every core, sweeps expired keys and writes scheduled snapshots in the
/// background, and on graceful shutdown stops accepting, answers what is in flight, closes its clients,
/// writes the final snapshot when one is due, and returns.
public final class CacheServerService: Service, Sendable {
    package let state: ServerState
    private let onServerRunning: (@Sendable ([Int]) -> Void)?
    private let systemd: SystemdNotifier?
    private let listeners = Mutex<Listeners?>(nil)
    /// How SHUTDOWN asked the server to stop; nil for a signal.
    private let shutdownRequest = Mutex<ShutdownRequest?>(nil)
    private let stopping = Atomic<Bool>(false)
    /// Set while the snapshot loads at start, and when a shutdown calls that load off.
    private let loading = Atomic<Bool>(false)
    private let loadCancelled = Atomic<Bool>(false)

    /// A server with `configuration`.
    /// - Parameters:
    ///   - configuration: Ports, limits and the other directives.
    ///   - logger: Where the server logs its events.
    ///   - clock: The clock for expiry (tests may pass a ``ManualClock``).
    ///   - systemd: Where to send `READY=1`, `STOPPING=1` and `STATUS=` lines (`sd_notify`), if anywhere.
    ///   - onServerRunning: Called with the bound TCP ports once the server listens.
    public init(
        configuration: ServerConfiguration,
        logger: Logger,
        clock: any CacheClock = SystemClock(),
        systemd: SystemdNotifier? = nil,
        onServerRunning: (@Sendable ([Int]) -> Void)? = nil
    ) {
        // Freed memory goes back to the system within about a second (jemalloc's default is 10 s).
        EntryMemory.configureDecay(milliseconds: 1000)
        self.state = ServerState(configuration: configuration, clock: clock, logger: logger)
        self.systemd = systemd
        self.onServerRunning = onServerRunning
    }

    public func run() async throws {
        let config = state.config
        let logger = state.logger
        try state.loadUsers()
        // As Redis: a shutdown asked for while the snapshot loads stops the load, and the server exits without
        // saving (the file on disk holds more than what was loaded).
        guard try await loadSnapshot(config) else {
            logger.notice("Shutdown requested while the snapshot loaded: stopped loading, exiting without saving")
            logger.notice("cached-server is now ready to exit, bye bye...")
            return
        }
        let threads = config.ioThreads > 0 ? config.ioThreads : System.coreCount
        let group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
        let state = self.state
        let io = ConnectionIO(fastPath: config.ioFastPath, group: group) { [state] in state.busyPollNanoseconds }
        state.transactions.configure(loops: group)
        state.commandStatistics.configure(loops: group)
        // As in Redis: port 0 means no TCP listener, and a server that listens nowhere does not start.
        if config.usesTLS {
            do {
                state.tlsContext = try config.makeTLSContext()
            } catch {
                logger.warning("\(error)")
                await io.shutdown()
                try? await group.shutdownGracefully()
                throw TLSSetupError()
            }
        }
        let listeners = Listeners(io: io, eventLoops: group, backlog: config.tcpBacklog, logger: logger) {
            channel, socket, path, tls in
            try Self.setUp(channel, socket: socket, unixSocketPath: path, tls: tls, state: state)
        }
        do {
            try listeners.open(config)
        } catch {
            await io.shutdown()
            try? await group.shutdownGracefully()
            throw error
        }
        // From the first command on, maxmemory counts the heap beyond the dataset: measured before any
        // connection is accepted (a CONFIG SET maxmemory on the first connection measures it again).
        state.countHeapOverhead()
        listeners.start()
        self.listeners.withLock { $0 = listeners }
        // A signal that came while the snapshot loaded.
        if stopping.load(ordering: .relaxed) { listeners.stop() }
        state.onListenChange { [listeners] config in listeners.change(to: config) }
        let ports = listeners.tcpPorts
        let sweeper = ExpirySweeper(state: state)
        sweeper.start()
        state.snapshots.startScheduler { [state] in state.config }
        state.onShutdownRequest { [weak self] request in
            self?.shutdownRequest.withLock { $0 = request }
            self?.stopListening()
        }
        var ready: Logger.Metadata = ["threads": "\(threads)"]
        if let port = ports.first { ready["port"] = "\(port)" }
        if let port = listeners.tlsPorts.first { ready["tls-port"] = "\(port)" }
        if !config.unixSocket.isEmpty { ready["unixsocket"] = "\(config.unixSocket)" }
        logger.notice("Ready to accept connections", metadata: ready)
        state.warnIfMaxMemoryTooSmall()
        let places = ports.map { "port \($0)" } + listeners.tlsPorts.prefix(1).map { "TLS port \($0)" }
            + (config.unixSocket.isEmpty ? [] : [config.unixSocket])
        notifySystemd("READY=1\nSTATUS=Ready to accept connections on \(places.joined(separator: ", "))")
        onServerRunning?(ports)

        await withGracefulShutdownHandler {
            try? await listeners.stopped.get()
        } onGracefulShutdown: {
            self.stopListening()
        }
        if !config.unixSocket.isEmpty { unlink(config.unixSocket) }

        logger.notice("Shutting down: closing client connections")
        sweeper.stop()
        await closeClients(within: .seconds(max(0, state.config.shutdownTimeout)))
        await io.shutdown()
        try? await group.shutdownGracefully()
        let saved = await saveBeforeExit()
        logger.notice("cached-server is now ready to exit, bye bye...")
        if let failure = saved { throw failure }
    }

    /// Whether the snapshot is loading (at start): a signal then stops the load.
    public var isLoading: Bool { loading.load(ordering: .relaxed) }

    /// Loads the snapshot file, on a thread of its own, before anything listens. Returns false when a graceful
    /// shutdown (SIGTERM, SIGINT) called the load off.
    private func loadSnapshot(_ config: ServerConfiguration) async throws -> Bool {
        let state = self.state
        let exists = access(config.snapshotPath, F_OK) == 0
        if exists {
            notifySystemd("STATUS=Loading the snapshot \(config.snapshotPath)")
        }
        loading.store(true, ordering: .relaxed)
        defer { loading.store(false, ordering: .relaxed) }
        return try await withGracefulShutdownHandler {
            try await extendingSystemdTimeout(exists) {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Bool, any Error>) in
                    let thread = Thread { [self] in
                        cached_name_current_thread("cached-load")
                        do throws(SnapshotLoadError) {
                            try state.snapshots.load(config) { loadCancelled.load(ordering: .relaxed) }
                            continuation.resume(returning: !loadCancelled.load(ordering: .relaxed))
                        } catch where error.isCancellation {
                            continuation.resume(returning: false)
                        } catch {
                            continuation.resume(throwing: error)
                        }
                    }
                    thread.name = "cached-load"
                    thread.start()
                }
            }
        } onGracefulShutdown: {
            self.loadCancelled.store(true, ordering: .relaxed)
        }
    }

    /// How often, while a snapshot loads at start or saves at exit, systemd is told to wait longer
    /// (`EXTEND_TIMEOUT_USEC`, by three times this), so that a data set too large for the unit's
    /// TimeoutStartSec or TimeoutStopSec is not killed halfway.
    static let systemdExtensionInterval: Duration = .seconds(10)

    /// Runs `body`, telling systemd every ``systemdExtensionInterval`` (and once at once) that the start or
    /// stop under way needs more time, when `extend` is true and systemd is listening.
    private func extendingSystemdTimeout<T: Sendable, Failure: Error>(
        _ extend: Bool, _ body: () async throws(Failure) -> T
    ) async throws(Failure) -> T {
        guard extend, systemd != nil else { return try await body() }
        let interval = Self.systemdExtensionInterval
        let microseconds = (interval * 3).components.seconds * 1_000_000
        let ticker = Task {
            while !Task.isCancelled {
                notifySystemd("EXTEND_TIMEOUT_USEC=\(microseconds)")
                try? await Task.sleep(for: interval)
            }
        }
        defer { ticker.cancel() }
        return try await body()
    }

    /// Writes the final snapshot once no client is left: on a signal when save points are set, after
    /// SHUTDOWN SAVE (or SHUTDOWN with save points) when something changed since its save, never after
    /// SHUTDOWN NOSAVE. Returns the error of a failed save.
    private func saveBeforeExit() async -> SnapshotSaveFailure? {
        let state = self.state
        let config = state.config
        state.snapshots.stopScheduler()
        let request = shutdownRequest.withLock { $0 }
        let due: Bool
        switch request {
        case nil:
            // Unlike Redis, not when the file holds the dataset already (nothing changed since it was loaded or
            // saved): a server stopped right after a large load does not write it all again.
            due = !config.savePoints.isEmpty && !state.snapshots.fileHoldsDataset(config.snapshotPath)
        case let request?:
            // SHUTDOWN saved already when it was asked to (or had save points), before the listeners closed;
            // when that failed and FORCE made it go on, it exits without trying again.
            due = (request.save ?? !config.savePoints.isEmpty) && state.snapshots.current.lastSaveOK
                && state.snapshots.changesSinceLastSave > 0
        }
        guard due else { return nil }
        notifySystemd("STATUS=Saving the final snapshot")
        state.logger.notice("Saving the final snapshot before exiting.")
        return await extendingSystemdTimeout(true) {
            await withCheckedContinuation { (continuation: CheckedContinuation<SnapshotSaveFailure?, Never>) in
                let thread = Thread {
                    cached_name_current_thread("cached-exitsave")
                    switch state.snapshots.saveNow(config, trigger: "shutdown", waitForOthers: true) {
                    case .failed(let error):
                        continuation.resume(returning: SnapshotSaveFailure(underlying: error))
                    case .saved, .busy:
                        continuation.resume(returning: nil)
                    }
                }
                thread.name = "cached-exitsave"
                thread.start()
            }
        }
    }

    private func notifySystemd(_ message: String) {
        guard let systemd, let problem = systemd.notify(message) else { return }
        state.logger.warning("Could not notify systemd", metadata: ["error": "\(problem)"])
    }

    /// Answers what was read: flushes every client's pending output, then closes it. Clients that have not
    /// taken their replies within `timeout` (they stopped reading) are closed anyway.
    private func closeClients(within timeout: Duration) async {
        let sessions = state.clients.all
        let closes = sessions.compactMap { $0.closeGracefully() }
        let logger = state.logger
        await withTaskGroup(of: Bool.self) { tasks in
            tasks.addTask {
                for future in closes { try? await future.get() }
                return true
            }
            tasks.addTask {
                try? await Task.sleep(for: timeout)
                return false
            }
            if await tasks.next() == false {
                logger.warning(
                    "Closing clients that did not take their replies within shutdown-timeout",
                    metadata: ["shutdown-timeout": "\(timeout.components.seconds)"])
                for session in sessions { session.close() }
            }
            tasks.cancelAll()
        }
    }

    /// Adds the server's handlers to the channel of a connection a listener accepted (on the Unix socket at
    /// `unixSocketPath`, or TCP when nil; to the TLS port when `tls`); `socket` is what the fast path knows of it.
    private static func setUp(
        _ channel: any Channel, socket: FastPathSocket?, unixSocketPath: String?, tls: Bool, state: ServerState
    ) throws {
        var tlsHandler: TLSServerHandler?
        if tls {
            do {
                guard let context = state.tlsContext else { throw TLSError("the TLS settings are not loaded") }
                tlsHandler = TLSServerHandler(
                    connection: try TLSConnection(context: context), server: state, descriptor: socket?.descriptor ?? -1)
            } catch {
                state.logger.warning("Could not set up a TLS connection", metadata: ["error": "\(error)"])
                throw error
            }
        }
        if unixSocketPath == nil { try Self.setKeepAlive(on: channel, seconds: state.config.tcpKeepalive) }
        if let tlsHandler { try channel.pipeline.syncOperations.addHandler(tlsHandler) }
        try channel.pipeline.syncOperations.addHandler(
            ConnectionHandler(
                server: state, unixSocketPath: unixSocketPath, descriptor: socket?.descriptor,
                busyPoll: socket?.busyPoll, tls: tlsHandler))
    }

    /// TCP keepalive as Redis sets it for `tcp-keepalive N`: probes after N idle seconds, every N/3 seconds,
    /// dropping the connection after 3 unanswered probes (0 turns keepalive off).
    static func setKeepAlive(on channel: any Channel, seconds: Int) throws {
        guard let options = channel.syncOptions else { return }
        try options.setOption(.socketOption(.so_keepalive), value: seconds > 0 ? 1 : 0)
        guard seconds > 0 else { return }
        func tcpOption(_ name: Int32) -> ChannelOptions.Types.SocketOption {
            ChannelOptions.Types.SocketOption(level: .tcp, name: NIOBSDSocket.Option(rawValue: name))
        }
        let idle = min(seconds, Int(Int32.max))
        try options.setOption(tcpOption(TCP_KEEPIDLE), value: idle)
        try options.setOption(tcpOption(TCP_KEEPINTVL), value: max(1, idle / 3))
        try options.setOption(tcpOption(TCP_KEEPCNT), value: 3)
    }

    /// Stops accepting connections; ``run()`` then closes the clients and returns.
    public func stopListening() {
        if !stopping.exchange(true, ordering: .relaxed) {
            notifySystemd("STOPPING=1\nSTATUS=Shutting down")
        }
        listeners.withLock { $0 }?.stop()
    }
}

/// Reclaims expired keys in the background, `hz` times a second, and samples the command rate.
final class ExpirySweeper: Sendable {
    private let state: ServerState
    private let running = Atomic<Bool>(false)
    private let finished = Mutex<Bool>(false)

    init(state: ServerState) { self.state = state }

    func start() {
        running.store(true, ordering: .relaxed)
        let thread = Thread { [self] in
            cached_name_current_thread("cached-sweeper")
            loop()
        }
        thread.name = "cached-sweeper"
        thread.start()
    }

    func stop() {
        running.store(false, ordering: .relaxed)
        while !finished.withLock({ $0 }) { usleep(1000) }
    }

    private func loop() {
        let traffic = ServerCommands.totalTraffic(state)
        var lastSample = (
            time: state.clock.nowMilliseconds(), commands: ServerCommands.totalCommands(state), input: traffic.input,
            output: traffic.output
        )
        // The last 16 samples of operations, input bytes and output bytes per second, averaged as Redis does.
        var opsHistory: [(ops: Int, input: Int, output: Int)] = []
        var reclaimedSincePurge = 0
        var lastIdleCheck = state.clock.nowMilliseconds()
        var lastDecay = lastIdleCheck
        var lastDataset = state.keyspace.budget.datasetBytes.load(ordering: .relaxed)
        var lastDatasetChange = lastIdleCheck
        while running.load(ordering: .relaxed) {
            let config = state.config
            let hz = max(1, min(500, config.hz))
            let trackingLimit = config.trackingTableMaxKeys
            let period = 1000 / hz
            let started = state.clock.nowMilliseconds()
            // While CLIENT PAUSE holds clients, the dataset stands still, as in Redis: no expiry (nor eviction,
            // which ``ServerState/evictToLimit(now:)`` holds back).
            // Sweep until up to date, spending at most a quarter of the period.
            while running.load(ordering: .relaxed) && state.blocked.pauseMode(now: state.clock.nowMilliseconds()) == .none {
                let result = state.keyspace.sweepExpired(now: state.clock.nowMilliseconds())
                reclaimedSincePurge += result.reclaimed
                // Tracking clients hear of the keys that expired (and of any a plain read expired lazily).
                state.sendBackgroundInvalidations(tableLimit: trackingLimit)
                // Subscribers hear of them as `expired` (and `evicted`) events.
                state.notifications.publishBackgroundRemovals()
                if !result.exhausted {
                    // Up to date: hand the pages that expiry emptied back to the system.
                    if reclaimedSincePurge >= 4096 {
                        EntryMemory.purgeVolatile()
                        reclaimedSincePurge = 0
                    }
                    break
                }
                if state.clock.nowMilliseconds() - started >= Int64(period / 4) { break }
            }
            // The sweep made the dataset total exact; refresh the heap's other part, which only maxmemory reads
            // (reading the allocator's statistics costs tens of microseconds: not on every tick without a limit),
            // and evict if memory is over the limit without a write to do it (a snapshot loaded at start).
            let budget = state.keyspace.budget
            if budget.limitBytes.load(ordering: .relaxed) > 0 {
                state.refreshMemoryOverhead()
                // Step by step, for at most a quarter of the period; the next cycles go on.
                while state.evictToLimit(now: state.clock.nowMilliseconds()) == .budgetSpent,
                    state.clock.nowMilliseconds() - started < Int64(period / 4)
                {}
            }
            let now = state.clock.nowMilliseconds()
            // Pages the allocator holds free go back to the system as they age (its decay time is 1 s), as long as
            // something asks it to decay. Every cycle while the dataset changes and for two seconds after, so that
            // what a load, a flush or a sweep freed goes back within about a second; once a second otherwise: a
            // decay walks every arena under its locks, which a server only reading need not pay ten times a second.
            let dataset = budget.datasetBytes.load(ordering: .relaxed)
            if dataset != lastDataset {
                lastDataset = dataset
                lastDatasetChange = now
            }
            if now - lastDatasetChange <= 2000 || now - lastDecay >= 1000 {
                EntryMemory.decayAll()
                lastDecay = now
            }
            if now - lastSample.time >= 100 {
                let commands = ServerCommands.totalCommands(state)
                let traffic = ServerCommands.totalTraffic(state)
                let span = Int(max(1, now - lastSample.time))
                opsHistory.append((
                    (commands - lastSample.commands) * 1000 / span, (traffic.input - lastSample.input) * 1000 / span,
                    (traffic.output - lastSample.output) * 1000 / span
                ))
                if opsHistory.count > 16 { opsHistory.removeFirst() }
                let n = opsHistory.count
                state.stats.instantaneousOpsPerSecond.store(opsHistory.reduce(0) { $0 + $1.ops } / n, ordering: .relaxed)
                state.stats.instantaneousInputBytesPerSecond.store(
                    opsHistory.reduce(0) { $0 + $1.input } / n, ordering: .relaxed)
                state.stats.instantaneousOutputBytesPerSecond.store(
                    opsHistory.reduce(0) { $0 + $1.output } / n, ordering: .relaxed)
                lastSample = (now, commands, traffic.input, traffic.output)
            }
            if now - lastIdleCheck >= 1000 {
                // Eviction chooses among the databases that hold keys.
                if budget.limitBytes.load(ordering: .relaxed) > 0 { state.keyspace.refreshDatabasesInUse() }
                closeIdleClients(now: now)
                state.migrateSockets.closeIdle(now: now)
                lastIdleCheck = now
            }
            let elapsed = Int(state.clock.nowMilliseconds() - started)
            if elapsed < period { usleep(UInt32((period - elapsed) * 1000)) }
        }
        finished.withLock { $0 = true }
    }

    /// Closes clients idle for longer than `timeout` seconds (0: never), as Redis's clients cron does.
    /// MONITOR clients are exempt: they only receive.
    private func closeIdleClients(now: Int64) {
        let timeout = Int64(state.config.timeout)
        guard timeout > 0 else { return }
        // As in Redis, subscribers are never idle: they wait for messages.
        let logger = state.logger
        // Nor are blocked clients (WAIT, a pause): they wait for the server.
        for session in state.clients.all
        where !session.isMonitor && !session.isSubscribed && !session.isBlocked
            && now - session.lastInteractionTime > timeout * 1000
        {
            session.closeUnlessTakingReplies(now: now) {
                logger.info("Closing idle client", metadata: ["client": "\(session.remoteAddress)"])
            }
        }
    }
}

/// The final snapshot could not be written at shutdown.
public struct SnapshotSaveFailure: Error, CustomStringConvertible {
    let underlying: SnapshotError

    public var description: String { "Error trying to save the snapshot before exiting: \(underlying)" }
}

/// The users of the configuration or the ACL file could not be read at start, in Redis's words.
public struct AclSetupError: Error, CustomStringConvertible {
    public let description: String
}

/// The TLS settings could not be loaded at start (the log says why), as Redis says it.
public struct TLSSetupError: Error, CustomStringConvertible {
    public var description: String { "Failed to configure TLS. Check logs for more info." }
}

/// The server could not listen where it was configured to.
public enum ListenError: Error, CustomStringConvertible {
    /// Binding `address`:`port` failed.
    case tcp(address: String, port: Int, reason: String)
    /// Creating the Unix socket at `path` failed.
    case unixSocket(path: String, reason: String)
    /// Port 0 (no TCP) and no Unix socket.
    case nowhere

    public var description: String {
        switch self {
        case .tcp(let address, let port, let reason):
            "Could not create server TCP listening socket \(address):\(port): \(reason)"
        case .unixSocket(let path, let reason):
            "Failed opening Unix socket \(path): \(reason)"
        case .nowhere:
            "Configured to not listen anywhere, exiting."
        }
    }
}
