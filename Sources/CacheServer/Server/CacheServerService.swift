import CacheCore
import Foundation
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import Synchronization

/// The cache server as a swift-service-lifecycle `Service`: it listens, serves RESP clients on every core,
/// sweeps expired keys in the background, and on graceful shutdown stops accepting, answers what is in
/// flight, closes its clients and returns.
public final class CacheServerService: Service, Sendable {
    package let state: ServerState
    private let onServerRunning: (@Sendable ([Int]) -> Void)?
    private let listeners = Mutex<[any Channel]>([])

    /// A server with `configuration`.
    /// - Parameters:
    ///   - configuration: Ports, limits and the other directives.
    ///   - logger: Where the server logs its events.
    ///   - clock: The clock for expiry (tests may pass a ``ManualClock``).
    ///   - onServerRunning: Called with the bound TCP ports once the server listens (useful with port 0).
    public init(
        configuration: ServerConfiguration,
        logger: Logger,
        clock: any CacheClock = SystemClock(),
        onServerRunning: (@Sendable ([Int]) -> Void)? = nil
    ) {
        // Freed memory goes back to the system within about a second (jemalloc's default is 10 s).
        EntryMemory.configureDecay(milliseconds: 1000)
        self.state = ServerState(configuration: configuration, clock: clock, logger: logger)
        self.onServerRunning = onServerRunning
    }

    public func run() async throws {
        let config = state.config
        let logger = state.logger
        let threads = config.ioThreads > 0 ? config.ioThreads : System.coreCount
        let group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
        let state = self.state
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: Int32(clamping: config.tcpBacklog))
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelOption(.socketOption(.so_keepalive), value: 1)
            .childChannelOption(.maxMessagesPerRead, value: 16)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ConnectionHandler(server: state))
                }
            }

        var bound: [any Channel] = []
        do {
            for address in config.bind {
                let host = address.hasPrefix("-") ? String(address.dropFirst()) : address
                do {
                    bound.append(try await bootstrap.bind(host: host, port: config.port).get())
                } catch where address.hasPrefix("-") {
                    logger.warning("Could not bind optional address", metadata: ["address": "\(host)", "error": "\(error)"])
                }
            }
        } catch {
            for channel in bound { try? await channel.close() }
            try? await group.shutdownGracefully()
            logger.critical("Failed listening on port \(config.port) (tcp): \(error)")
            throw error
        }
        listeners.withLock { $0 = bound }
        let ports = bound.compactMap { $0.localAddress?.port }
        let sweeper = ExpirySweeper(state: state)
        sweeper.start()
        state.onShutdownRequest { [weak self] _ in self?.stopListening() }
        logger.notice("Ready to accept connections tcp", metadata: ["port": "\(ports.first ?? config.port)", "threads": "\(threads)"])
        onServerRunning?(ports)

        await withGracefulShutdownHandler {
            for channel in bound { try? await channel.closeFuture.get() }
        } onGracefulShutdown: {
            self.stopListening()
        }

        logger.notice("Shutting down: closing client connections")
        sweeper.stop()
        // Answer what was read: flush every client's pending output, then close.
        var closes: [EventLoopFuture<Void>] = []
        for session in state.clients.all { if let f = session.closeGracefully() { closes.append(f) } }
        for future in closes { try? await future.get() }
        try? await group.shutdownGracefully()
        logger.notice("cached-server is now ready to exit, bye bye...")
    }

    /// Stops accepting connections; ``run()`` then closes the clients and returns.
    public func stopListening() {
        let channels = listeners.withLock { $0 }
        for channel in channels { channel.close(promise: nil) }
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
        let thread = Thread { [self] in loop() }
        thread.name = "cached-sweeper"
        thread.start()
    }

    func stop() {
        running.store(false, ordering: .relaxed)
        while !finished.withLock({ $0 }) { usleep(1000) }
    }

    private func loop() {
        var lastSample = (time: state.clock.nowMilliseconds(), commands: ServerCommands.totalCommands(state))
        var opsHistory: [Int] = []
        var reclaimedSincePurge = 0
        while running.load(ordering: .relaxed) {
            let hz = max(1, min(500, state.config.hz))
            let period = 1000 / hz
            let started = state.clock.nowMilliseconds()
            // Sweep until up to date, spending at most a quarter of the period.
            while running.load(ordering: .relaxed) {
                let result = state.keyspace.sweepExpired(now: state.clock.nowMilliseconds())
                reclaimedSincePurge += result.reclaimed
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
            EntryMemory.decayAll()
            let now = state.clock.nowMilliseconds()
            if now - lastSample.time >= 100 {
                let commands = ServerCommands.totalCommands(state)
                let rate = (commands - lastSample.commands) * 1000 / Int(max(1, now - lastSample.time))
                opsHistory.append(rate)
                if opsHistory.count > 16 { opsHistory.removeFirst() }
                state.stats.instantaneousOpsPerSecond.store(
                    opsHistory.reduce(0, +) / opsHistory.count, ordering: .relaxed)
                lastSample = (now, commands)
            }
            let elapsed = Int(state.clock.nowMilliseconds() - started)
            if elapsed < period { usleep(UInt32((period - elapsed) * 1000)) }
        }
        finished.withLock { $0 = true }
    }
}
