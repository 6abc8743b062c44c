import CacheCore
import NIOCore
import RESP
import Synchronization

/// The state of one client connection.
///
/// Fields without a lock are touched only by the connection's own event loop. What other connections read
/// (CLIENT LIST, INFO) is kept in atomics or behind ``sharedLock``.
package final class ClientSession: @unchecked Sendable {
    package let id: Int
    package let remoteAddress: String
    package let localAddress: String
    package let createdAt: Int64
    package let isLocal: Bool
    /// The path of the Unix socket the client connected through, or nil for TCP.
    package let unixSocketPath: String?

    // Owned by the connection's event loop, which runs one command at a time: no run-time exclusivity checks.
    @exclusivity(unchecked) package var protocolVersion: RESPVersion = .resp2
    @exclusivity(unchecked) package var authenticated: Bool
    @exclusivity(unchecked) package var noEvict = false
    @exclusivity(unchecked) package var noTouch = false
    /// Set by QUIT and CLIENT KILL of oneself: the connection closes once the reply is written.
    @exclusivity(unchecked) package var closeAfterReply = false
    /// In MONITOR mode (read by the clients cron too, hence atomic).
    package var isMonitor: Bool {
        get { monitorFlag.load(ordering: .relaxed) }
        set { monitorFlag.store(newValue, ordering: .relaxed) }
    }
    private let monitorFlag = Atomic<Bool>(false)

    // Read by other connections.
    private let databaseIndex = Atomic<Int>(0)
    private let lastInteraction: Atomic<Int64>
    private let lastCommand = Atomic<Int>(-1)
    private let commands = Atomic<Int>(0)
    private let bytesIn = Atomic<Int>(0)
    private let bytesOut = Atomic<Int>(0)
    private let sharedLock = Mutex<String?>(nil)
    /// The connection, when there is one (tests drive sessions without a network).
    private let channel: (any Channel)?

    package init(
        id: Int,
        remoteAddress: String,
        localAddress: String,
        isLocal: Bool,
        now: Int64,
        authenticated: Bool,
        channel: (any Channel)?,
        unixSocketPath: String? = nil
    ) {
        self.id = id
        self.remoteAddress = remoteAddress
        self.localAddress = localAddress
        self.isLocal = isLocal
        self.unixSocketPath = unixSocketPath
        self.createdAt = now
        self.authenticated = authenticated
        self.lastInteraction = Atomic(now)
        self.channel = channel
    }

    /// Closes the connection now, from any thread (CLIENT KILL).
    package func close() {
        channel?.close(promise: nil)
    }

    /// Flushes what was written to the connection, then closes it (server shutdown).
    package func closeGracefully() -> EventLoopFuture<Void>? {
        guard let channel else { return nil }
        return channel.writeAndFlush(ByteBuffer()).flatMap { channel.close() }.recover { _ in }
    }

    /// The selected database.
    @inline(__always)
    package var db: Int {
        get { databaseIndex.load(ordering: .relaxed) }
        set { databaseIndex.store(newValue, ordering: .relaxed) }
    }

    /// The name set by CLIENT SETNAME or HELLO SETNAME.
    package var name: String? {
        get { sharedLock.withLock { $0 } }
        set { sharedLock.withLock { $0 = newValue } }
    }

    /// Records a command about to run (for CLIENT LIST's `cmd`, `idle` and INFO's counters).
    @inline(__always)
    package func noteCommand(_ index: Int, now: Int64) {
        lastCommand.store(index, ordering: .relaxed)
        lastInteraction.store(now, ordering: .relaxed)
        commands.store(commands.load(ordering: .relaxed) &+ 1, ordering: .relaxed)
    }

    package var lastCommandIndex: Int { lastCommand.load(ordering: .relaxed) }
    package var lastInteractionTime: Int64 { lastInteraction.load(ordering: .relaxed) }
    package var commandsProcessed: Int { commands.load(ordering: .relaxed) }

    /// Counts bytes read from and written to this client. Only the connection's event loop writes these
    /// counters, so a plain load and store suffice, and no cache line is shared with other connections.
    @inline(__always)
    package func noteTraffic(input: Int = 0, output: Int = 0) {
        if input != 0 { bytesIn.store(bytesIn.load(ordering: .relaxed) &+ input, ordering: .relaxed) }
        if output != 0 { bytesOut.store(bytesOut.load(ordering: .relaxed) &+ output, ordering: .relaxed) }
    }

    package var inputBytes: Int { bytesIn.load(ordering: .relaxed) }
    package var outputBytes: Int { bytesOut.load(ordering: .relaxed) }
}
