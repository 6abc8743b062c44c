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

    // Owned by the connection's event loop.
    /// The protocol the client speaks (HELLO). Read by other connections too (CLIENT LIST, invalidations),
    /// hence atomic; a relaxed load is a plain load.
    package var protocolVersion: RESPVersion {
        get { RESPVersion(rawValue: protocolStorage.load(ordering: .relaxed)) ?? .resp2 }
        set { protocolStorage.store(newValue.rawValue, ordering: .relaxed) }
    }
    private let protocolStorage = Atomic<UInt8>(RESPVersion.resp2.rawValue)

    /// States that send this client's commands down the executor's slow path. Zero for an authenticated
    /// client that neither subscribes nor tracks, so the executor pays one check for all of them.
    package struct Modes: OptionSet, Sendable {
        package let rawValue: UInt8
        package init(rawValue: UInt8) { self.rawValue = rawValue }
        package static let unauthenticated = Modes(rawValue: 1 << 0)
        /// Subscribed to at least one channel or pattern.
        package static let subscribed = Modes(rawValue: 1 << 1)
        /// CLIENT TRACKING is on.
        package static let tracking = Modes(rawValue: 1 << 2)
        /// MONITOR is on: commands that touch the keyspace are refused.
        package static let monitoring = Modes(rawValue: 1 << 3)
        /// Inside MULTI: commands are queued until EXEC.
        package static let transaction = Modes(rawValue: 1 << 4)
    }

    @exclusivity(unchecked) package private(set) var modes: Modes

    package var authenticated: Bool {
        get { !modes.contains(.unauthenticated) }
        set { if newValue { modes.remove(.unauthenticated) } else { modes.insert(.unauthenticated) } }
    }

    @exclusivity(unchecked) package var noEvict = false
    @exclusivity(unchecked) package var noTouch = false
    /// CLIENT REPLY OFF: no replies until CLIENT REPLY ON (or RESET); pushes still go out.
    @exclusivity(unchecked) package var replyOff = false
    /// CLIENT REPLY SKIP was the last command: the next one's reply is dropped (``replySkip``).
    @exclusivity(unchecked) package var replySkipNext = false
    /// The reply of the command running now is dropped (the command after CLIENT REPLY SKIP).
    @exclusivity(unchecked) package var replySkip = false
    /// Set by QUIT and CLIENT KILL of oneself: the connection closes once the reply is written.
    @exclusivity(unchecked) package var closeAfterReply = false
    /// With ``closeAfterReply``: close without sending the replies not written yet (an HTTP request,
    /// ``CrossProtocolGuard``).
    @exclusivity(unchecked) package var abortConnection = false
    /// The most bytes of replies the connection may hold while a command writes its reply: the hard output
    /// limit of its class (`pubsub` while subscribed, `normal` otherwise), and at most
    /// ``CommandContext/maxReplyBytes`` (set by the connection).
    package var replyLimit: Int { modes.contains(.subscribed) ? replyLimits.pubsub : replyLimits.normal }
    @exclusivity(unchecked) package var replyLimits = (normal: CommandContext.maxReplyBytes, pubsub: CommandContext.maxReplyBytes)
    /// Set when a reply would have gone past ``replyLimit``: that reply is incomplete, and the connection is
    /// closed as over its output limit, without sending it.
    @exclusivity(unchecked) package var replyOverflowed = false
    /// In MONITOR mode (read by the clients cron too, hence atomic).
    package var isMonitor: Bool {
        get { monitorFlag.load(ordering: .relaxed) }
        set {
            monitorFlag.store(newValue, ordering: .relaxed)
            if newValue { modes.insert(.monitoring) } else { modes.remove(.monitoring) }
        }
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
    /// The ACL user the connection runs as: `default` until AUTH or HELLO names another. Changed on the
    /// connection's event loop only.
    @exclusivity(unchecked) package var user: AclUser {
        didSet { userForOthers.withLock { $0 = user } }
    }
    private let userForOthers: Mutex<AclUser>

    /// ``user``, read from another connection (CLIENT LIST, CLIENT KILL USER, ACL DELUSER).
    package var currentUser: AclUser { userForOthers.withLock { $0 } }

    /// The connection, when there is one (tests drive sessions without a network).
    private let channel: (any Channel)?

    package init(
        id: Int,
        remoteAddress: String,
        localAddress: String,
        isLocal: Bool,
        now: Int64,
        authenticated: Bool,
        user: AclUser,
        channel: (any Channel)?,
        unixSocketPath: String? = nil
    ) {
        self.user = user
        self.userForOthers = Mutex(user)
        self.id = id
        self.remoteAddress = remoteAddress
        self.localAddress = localAddress
        self.isLocal = isLocal
        self.unixSocketPath = unixSocketPath
        self.createdAt = now
        self.modes = authenticated ? [] : .unauthenticated
        self.lastInteraction = Atomic(now)
        self.channel = channel
    }

    /// Runs `body` on the connection's event loop (at once for a session without a connection, as in tests).
    package func onEventLoop(_ body: @escaping @Sendable () -> Void) {
        if let channel { channel.eventLoop.execute(body) } else { body() }
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

    /// Records a request (for CLIENT LIST's `cmd`): the command table's index of its command, or nil for an
    /// unknown command (`cmd=NULL`, as in Redis). The read that brought it counted as interaction already
    /// (``noteInteraction(_:)``).
    @inline(__always)
    package func noteCommand(_ index: Int?) {
        lastCommand.store(index.map { $0 << 8 } ?? -1, ordering: .relaxed)
    }

    /// Records the subcommand of a container command (CLIENT, CONFIG...): its index among the container's
    /// subcommands, or nil when there is no such subcommand (`cmd=NULL`, as in Redis).
    package func noteSubcommand(_ subcommand: Int?, of index: Int) {
        lastCommand.store(subcommand.map { index << 8 | ($0 + 1) } ?? -1, ordering: .relaxed)
    }

    /// Counts a command that runs (INFO's `total_commands_processed`; refused ones do not count, as in Redis).
    @inline(__always)
    package func countCommand() {
        commands.store(commands.load(ordering: .relaxed) &+ 1, ordering: .relaxed)
    }

    /// The last command: its index in the command table and, for a subcommand, its index among its
    /// container's subcommands; nil after an unknown command or before the first one.
    package var lastCommandIndex: (command: Int, subcommand: Int?)? {
        let value = lastCommand.load(ordering: .relaxed)
        guard value >= 0 else { return nil }
        let sub = value & 0xff
        return (value >> 8, sub == 0 ? nil : sub - 1)
    }
    package var lastInteractionTime: Int64 { lastInteraction.load(ordering: .relaxed) }

    /// Records interaction with the client at `now` — a read from it, a reply it took to its end, a message
    /// delivered to it — as Redis counts reads and writes for `timeout` and CLIENT LIST's `idle`.
    @inline(__always)
    package func noteInteraction(_ now: Int64) { lastInteraction.store(now, ordering: .relaxed) }

    /// Replies queued for the client at the last idle check; on the connection's event loop only.
    @exclusivity(unchecked) private var queuedAtIdleCheck = 0

    /// Closes a client that has sent nothing for the idle timeout (calling `closing` first), unless it is still
    /// taking a long reply, as Redis counts a write to the client as interaction: the replies queued for it
    /// changed since the last check. The channel tells, on its event loop.
    package func closeUnlessTakingReplies(now: Int64, closing: @escaping @Sendable () -> Void) {
        guard let channel else { return }
        channel.getOption(ChannelOptions.bufferedWritableBytes).whenComplete { result in
            let queued = (try? result.get()) ?? 0
            defer { self.queuedAtIdleCheck = queued }
            // Replies waiting, or done since the last check: written to the client meanwhile.
            if queued != self.queuedAtIdleCheck {
                self.noteInteraction(now)
                return
            }
            closing()
            channel.close(promise: nil)
        }
    }
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

    // The state below is used by few commands: it comes after the fields every command touches.

    // MARK: pub/sub (owned by the event loop; the counts are read by other connections)

    /// Channels and patterns this client is subscribed to.
    package private(set) var channels = Set<[UInt8]>()
    package private(set) var patterns = Set<[UInt8]>()
    /// The patterns in the order they were subscribed to (PUNSUBSCRIBE without arguments answers in that
    /// order, as Redis 7.0 does).
    package private(set) var patternsInOrder: [[UInt8]] = []
    private let subscriptionCounts = Atomic<Int>(0)

    /// Records a pattern subscribed to (after ``updateSubscriptions(_:)`` added it).
    package func notePatternSubscribed(_ pattern: [UInt8]) { patternsInOrder.append(pattern) }

    /// Records a pattern unsubscribed from (after ``updateSubscriptions(_:)`` removed it).
    package func notePatternUnsubscribed(_ pattern: [UInt8]) {
        if let index = patternsInOrder.firstIndex(of: pattern) { patternsInOrder.remove(at: index) }
    }

    /// Records a change of subscriptions (the registry holds the other side).
    package func updateSubscriptions(_ body: (inout Set<[UInt8]>, inout Set<[UInt8]>) -> Void) {
        body(&channels, &patterns)
        subscriptionCounts.store(channels.count << 32 | patterns.count, ordering: .relaxed)
        if channels.isEmpty && patterns.isEmpty { modes.remove(.subscribed) } else { modes.insert(.subscribed) }
    }

    /// Channels and patterns subscribed to, readable from any thread (CLIENT LIST's sub= and psub=).
    package var subscriptionCount: (channels: Int, patterns: Int) {
        let packed = subscriptionCounts.load(ordering: .relaxed)
        return (packed >> 32, packed & 0xFFFF_FFFF)
    }

    /// Whether the client is subscribed to anything (Redis's CLIENT_PUBSUB), from any thread.
    package var isSubscribed: Bool { subscriptionCounts.load(ordering: .relaxed) != 0 }

    // MARK: client-side caching (owned by the event loop)

    /// The options of CLIENT TRACKING while it is on, else nil.
    package var tracking: TrackingOptions? {
        didSet { if tracking == nil { modes.remove(.tracking) } else { modes.insert(.tracking) } }
    }
    /// CLIENT CACHING was given for the next command (OPTIN: yes, OPTOUT: no).
    package var cachingGiven = false
    /// Keys the running command modified while some client tracks, and whether it flushed a database: the
    /// executor sends the invalidations once the command is done.
    package var modifiedKeys: [[UInt8]] = []
    package var flushedKeys = false

    // MARK: transactions (owned by the event loop; what CLIENT LIST shows is read by other connections)

    /// A command queued between MULTI and EXEC: its arguments' bytes one after another, and where each is.
    package struct QueuedCommand: Sendable {
        package var bytes: [UInt8]
        package var spans: [RESPArgumentSpan]

        /// Runs `body` with the command's arguments.
        package func withArguments<R>(_ body: (Arguments) -> R) -> R {
            bytes.withUnsafeBytes { storage in
                spans.withUnsafeBufferPointer { spans in
                    body(Arguments(base: storage.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!, spans: spans))
                }
            }
        }
    }

    /// EXEC is running the queued commands (Redis's CLIENT_DENY_BLOCKING for them: MONITOR is refused).
    @exclusivity(unchecked) package var runningTransaction = false
    /// Messages for this client that its transaction's commands caused (its own invalidations): sent after
    /// EXEC's reply, not inside it.
    package var messagesAfterTransaction = ByteBuffer()

    /// The transaction gate's lane of the connection's event loop (nil without one, as in tests).
    @exclusivity(unchecked) package var lane: TransactionGate.Lane?
    /// The command counters of the connection's event loop (nil outside the server's loops, as in tests).
    @exclusivity(unchecked) package var statistics: CommandStatistics?

    /// The commands queued since MULTI.
    package private(set) var queuedCommands: [QueuedCommand] = []
    /// The flags of the queued commands together (Redis's `mstate.cmd_flags`): whether EXEC writes, may allocate.
    package private(set) var queuedFlags: CommandFlags = []
    /// A command was refused while queuing (unknown, wrong arity, not allowed...): EXEC answers EXECABORT and
    /// runs nothing (Redis's CLIENT_DIRTY_EXEC).
    package var transactionRefused = false
    /// The number of queued commands in a transaction, else -1 (CLIENT LIST's `multi=`).
    private let queuedCount = Atomic<Int>(-1)

    /// Whether MULTI was called and neither EXEC nor DISCARD yet.
    package var inTransaction: Bool { modes.contains(.transaction) }

    /// MULTI.
    package func beginTransaction() {
        modes.insert(.transaction)
        queuedCommands = []
        queuedFlags = []
        transactionRefused = false
        queuedCount.store(0, ordering: .relaxed)
    }

    /// EXEC or DISCARD: leaves the transaction, handing back what was queued.
    package func endTransaction() -> [QueuedCommand] {
        modes.remove(.transaction)
        transactionRefused = false
        queuedCount.store(-1, ordering: .relaxed)
        defer {
            queuedCommands = []
            queuedFlags = []
        }
        return queuedCommands
    }

    /// EXEC runs `count` commands (nil: it is done): CLIENT LIST shows the transaction until then, as Redis does.
    package func noteTransactionRunning(_ count: Int?) {
        runningTransaction = count != nil
        queuedCount.store(count ?? -1, ordering: .relaxed)
    }

    /// Queues a command of the transaction (a copy of its arguments), whose command has `flags`.
    package func queue(_ arguments: Arguments, flags: CommandFlags) {
        queuedFlags.formUnion(flags)
        var total = 0
        for i in 0..<arguments.count { total += arguments[i].count }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(total)
        var spans: [RESPArgumentSpan] = []
        spans.reserveCapacity(arguments.count)
        for i in 0..<arguments.count {
            spans.append(RESPArgumentSpan(offset: bytes.count, count: arguments[i].count))
            bytes.append(contentsOf: arguments[i])
        }
        queuedCommands.append(QueuedCommand(bytes: bytes, spans: spans))
        queuedCount.store(queuedCommands.count, ordering: .relaxed)
    }

    /// The number of commands queued in the transaction, or -1 outside one; from any thread.
    package var queuedCommandCount: Int { queuedCount.load(ordering: .relaxed) }

    /// A key WATCHed by this client, and whether it existed then: a key that did and is gone at EXEC (expired,
    /// evicted) aborts the transaction, as Redis's `isWatchedKeyExpired` does.
    package struct WatchedKey: Sendable {
        package let key: WatchRegistry.Key
        package let existed: Bool
    }

    /// The keys this client watches.
    package var watchedKeys: [WatchedKey] = []
    /// A watched key was changed: the next EXEC fails (Redis's CLIENT_DIRTY_CAS). Set by other connections.
    private let watchDirty = Atomic<Bool>(false)

    /// Marks a change to a watched key; from any thread.
    package func markWatchDirty() { watchDirty.store(true, ordering: .relaxed) }

    /// Whether a watched key changed since WATCH; from any thread (CLIENT LIST's `d` flag).
    package var isWatchDirty: Bool { watchDirty.load(ordering: .relaxed) }

    /// Forgets the watched keys (UNWATCH, EXEC, DISCARD, the connection closing), handing them back so that the
    /// registry can drop them; the dirty mark is cleared once it has (``clearWatchDirty()``).
    package func takeWatchedKeys() -> [WatchRegistry.Key] {
        defer { watchedKeys = [] }
        return watchedKeys.map(\.key)
    }

    /// Clears the mark of a changed watched key, after the registry has forgotten this client's keys.
    package func clearWatchDirty() { watchDirty.store(false, ordering: .relaxed) }

    // MARK: blocking

    /// How a client's command waits (``BlockedClients``).
    package enum BlockKind: UInt8, Sendable {
        case none
        /// A pause holds the command back: it has not run, and runs again when the pause ends.
        case postponed
        /// WAIT ran and blocks: its reply comes at its timeout or with CLIENT UNBLOCK.
        case waiting
    }

    /// Whether, and how, the command just run waits; the connection stops running commands until it is
    /// released. On the connection's event loop only.
    @exclusivity(unchecked) package private(set) var blockKind = BlockKind.none
    /// When the wait ends on its own, in the server clock's milliseconds: the pause's end for a postponed
    /// command, WAIT's timeout (0 for none) for a waiting one.
    @exclusivity(unchecked) package private(set) var blockDeadline: Int64 = 0
    private let blockedFlag = Atomic<Bool>(false)

    /// Whether the client waits (CLIENT LIST's `b` flag; exempt from the idle timeout). Read by other threads.
    package var isBlocked: Bool { blockedFlag.load(ordering: .relaxed) }

    package func block(_ kind: BlockKind, until deadline: Int64) {
        blockKind = kind
        blockDeadline = deadline
        blockedFlag.store(true, ordering: .relaxed)
    }

    package func unblock() {
        blockKind = .none
        blockDeadline = 0
        blockedFlag.store(false, ordering: .relaxed)
    }

    // MARK: out-of-band messages

    /// Where pub/sub messages and invalidations for this client go. Set once, before the session is
    /// registered with the server (the connection handler's outlet writes on the connection's event loop).
    package var outlet: (any SessionOutlet)?
}

/// Delivers messages that are not replies (pub/sub messages, invalidations) to one client.
package protocol SessionOutlet: Sendable {
    /// Runs `write` on the client's event loop with the client's session and its output buffer, and sends
    /// what it wrote. Calls from one thread arrive in the order they were made.
    func send(_ write: @escaping @Sendable (ClientSession, inout ByteBuffer) -> Void)
    /// Releases the client from a wait (``BlockedClients``), on its event loop.
    func release(_ release: BlockedClients.Release)
}
