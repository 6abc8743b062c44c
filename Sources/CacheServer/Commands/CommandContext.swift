import CacheCore
import NIOCore
import RESP

/// Everything a command handler needs: its arguments, the client, the server, the time, and the reply.
package struct CommandContext {
    package let arguments: Arguments
    package let session: ClientSession
    package let server: ServerState
    /// Milliseconds since the epoch, read once for the whole command.
    package let now: Int64
    /// Where the handler writes its reply.
    package var reply: ByteBuffer
    /// Where this command's reply starts in ``reply`` (replies of earlier commands may precede it).
    package let replyStart: Int
    /// Set when the command has client-side caching work for the executor to finish: keys it modified while
    /// some client tracks, or a tracking client's read.
    package var tracking = false
    /// Where the start of the reply that CLIENT REPLY OFF or SKIP leaves alone ends: pub/sub confirmations, and
    /// the messages a subscriber publishes to itself, are sent whatever CLIENT REPLY says, as in Redis. The
    /// reply from here on is the command's own.
    package var sentRegardlessUntil: Int

    package init(
        arguments: Arguments, session: ClientSession, server: ServerState, now: Int64, reply: ByteBuffer,
        tracking: Bool = false
    ) {
        self.arguments = arguments
        self.session = session
        self.server = server
        self.now = now
        self.reply = reply
        self.replyStart = reply.writerIndex
        self.sentRegardlessUntil = reply.writerIndex
        self.tracking = tracking
    }

    /// The client's selected database.
    @inline(__always)
    package var database: Database { server.keyspace.databases[session.db] }

    /// The protocol the client speaks.
    @inline(__always)
    package var version: RESPVersion { session.protocolVersion }

    /// The lowercase name of the command being run, for error messages.
    package var commandName: String {
        server.commands.lookup(arguments[0]).map { server.commands.commands[$0].name } ?? arguments.string(0).lowercased()
    }

    // MARK: replies

    @inline(__always) package mutating func ok() { reply.writeRESPOK() }
    @inline(__always) package mutating func error(_ message: StaticString) { reply.writeRESPError(message) }
    @inline(__always) package mutating func error(_ message: String) { reply.writeRESPError(message) }
    @inline(__always) package mutating func integer(_ value: Int) { reply.writeRESPInteger(value) }
    @inline(__always) package mutating func null() { reply.writeRESPNull(version) }
    /// The most a connection's replies may take while a command writes: a reply that would grow past it is
    /// abandoned and the connection closed (as over its output limit), rather than grown without end — or
    /// past what one buffer can hold (4 GiB), which would stop the server.
    package static let maxReplyBytes = 1 << 31

    /// Whether `bytes` more fit in the reply within the connection's limit; when not, marks the reply as
    /// overflowed (``ClientSession/replyOverflowed``): the connection is closed after the command, its reply
    /// unsent. Commands that write much (values, lists of keys) ask before each part.
    @inline(__always)
    package mutating func hasRoom(for bytes: Int) -> Bool {
        if reply.readableBytes &+ bytes <= session.replyLimit { return true }
        session.replyOverflowed = true
        return false
    }

    @inline(__always) package mutating func bulk(_ bytes: UnsafeRawBufferPointer) {
        guard hasRoom(for: bytes.count &+ 24) else { return }
        reply.writeRESPBulkString(bytes)
    }
    @inline(__always) package mutating func bulk(_ text: String) { reply.writeRESPBulkString(text) }
    @inline(__always) package mutating func arrayHeader(_ count: Int) { reply.writeRESPArrayHeader(count) }
    @inline(__always) package mutating func simple(_ text: StaticString) { reply.writeRESPSimpleString(text) }

    /// Replies with the arity error for the running command.
    package mutating func wrongArity() { error(ReplyError.wrongArity(commandName)) }

    /// Reads argument `index` as an integer, replying with Redis's error when it is not one.
    package mutating func integerArgument(_ index: Int) -> Int? {
        if let value = arguments.integer(index) { return value }
        error(ReplyError.notInteger)
        return nil
    }

    // MARK: keys

    /// Records a read of the key in slot `index` of `shard` for eviction (GET, MGET): SIEVE's read count, the
    /// LRU stamp or the LFU counter. Not for a client in CLIENT NO-TOUCH mode.
    @inline(__always)
    package func read(_ shard: Shard, _ index: Int) {
        if !session.noTouch { shard.touch(index, now: now) }
    }

    /// Records another access to the key in slot `index` of `shard` (STRLEN, GETRANGE, EXPIRE, the source of
    /// RENAME...): the LRU stamp or the LFU counter, as Redis's lookups do. Not in CLIENT NO-TOUCH mode.
    @inline(__always)
    package func accessed(_ shard: Shard, _ index: Int) {
        if !session.noTouch { shard.noteAccess(index, now: now) }
    }

    /// Records that the command modified the key in argument `index` (Redis's `signalModifiedKey`). Costs
    /// one relaxed load while no client tracks.
    @inline(__always)
    package mutating func keyModified(_ index: Int) {
        if server.tracking.isActive { noteModified(arguments[index]) }
        if server.watches.isActive { server.watches.touch(db: session.db, name: arguments[index]) }
    }

    /// Records that the command modified the key in argument `index` in database `db`, another than the
    /// client's (MOVE's target), for WATCH: tracking does not tell databases apart.
    package func keyModified(_ index: Int, inDatabase db: Int) {
        if server.watches.isActive { server.watches.touch(db: db, name: arguments[index]) }
    }

    /// Records that the command modified `key`, for the invalidations sent after it.
    @inline(never)
    package mutating func noteModified(_ key: UnsafeRawBufferPointer) {
        tracking = true
        session.modifiedKeys.append(Array(key))
    }

    /// Records that the command flushed a database or all of them: every tracking client is told that all its
    /// keys are invalid (Redis's null invalidation), and the table is cleared.
    package mutating func keysFlushed() {
        guard server.tracking.isActive else { return }
        tracking = true
        session.flushedKeys = true
    }

    // MARK: keyspace notifications

    /// Publishes keyspace event `event` of class `type` about the key in argument `index` (in database `db`,
    /// the client's by default), when `notify-keyspace-events` has that class on: otherwise one relaxed load.
    @inline(__always)
    package mutating func notify(_ type: KeyspaceEventFlags, _ event: StaticString, key index: Int, db: Int? = nil) {
        if server.notifications.publishes(type) { publishEvent(event, key: arguments[index], db: db ?? session.db) }
    }

    /// A read that did not find the key in argument `index` (Redis's `keymiss` event, class `m`).
    @inline(__always)
    package mutating func keyMissed(_ index: Int) {
        if server.notifications.publishes(.keyMiss) { publishEvent("keymiss", key: arguments[index], db: session.db) }
    }

    /// A write that created the key in argument `index` (Redis's `new` event, class `n`).
    @inline(__always)
    package mutating func keyCreated(_ index: Int, db: Int? = nil) {
        if server.notifications.publishes(.newKey) { publishEvent("new", key: arguments[index], db: db ?? session.db) }
    }

    @inline(never)
    mutating func publishEvent(_ event: StaticString, key: UnsafeRawBufferPointer, db: Int) {
        server.notifications.publish(event, key: key, db: db, current: session, reply: &reply)
    }

    /// The hash of argument `index`, used as a key.
    @inline(__always)
    package func hash(_ index: Int) -> UInt64 {
        Keyspace.hasher.hash(arguments[index])
    }
}
