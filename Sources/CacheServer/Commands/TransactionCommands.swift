import CacheCore
import NIOCore
import RESP

/// MULTI, EXEC, DISCARD, WATCH and UNWATCH: Redis's transactions.
///
/// After MULTI the executor queues a client's commands (``CommandExecutor``, `admit`), answering `QUEUED`,
/// or an error for a command it refuses, which makes EXEC fail with EXECABORT. EXEC runs the queued commands
/// one after the other with no other client's command in between (``TransactionGate``), replying with an
/// array of their replies, or with a null array when a watched key changed since WATCH.
enum TransactionCommands {
    static func multi(_ c: inout CommandContext) {
        if refusedOverMemory(&c) { return }
        guard !c.session.inTransaction else { return c.error("ERR MULTI calls can not be nested") }
        c.session.beginTransaction()
        c.ok()
    }

    static func discard(_ c: inout CommandContext) {
        guard c.session.inTransaction else { return c.error("ERR DISCARD without MULTI") }
        _ = c.session.endTransaction()
        c.server.unwatchAll(c.session)
        c.ok()
    }

    static func exec(_ c: inout CommandContext) {
        let (session, server) = (c.session, c.server)
        guard session.inTransaction else { return c.error("ERR EXEC without MULTI") }
        let refused = session.transactionRefused
        let flags = session.queuedFlags
        let commands = session.endTransaction()
        // As Redis, before anything else: EXEC of a transaction that writes is refused while memory is over the
        // limit and nothing can be evicted, or while background saves fail.
        if flags.contains(.denyoom) && overMemory(c) {
            server.unwatchAll(session)
            return c.error(abortMessage("\(ReplyError.outOfMemory)"))
        }
        if flags.contains(.write) && server.refusesWrites {
            server.unwatchAll(session)
            return c.error(abortMessage("\(ReplyError.backgroundSaveFailed)"))
        }
        if refused {
            server.unwatchAll(session)
            return c.error("EXECABORT Transaction discarded because of previous errors.")
        }
        server.transactions.exclusively(from: session.lane) {
            // The time once no other client runs commands: waiting for them may have taken a while.
            let now = server.clock.nowMilliseconds()
            let changed = watchedKeyChanged(session, server: server, now: now)
            server.unwatchAll(session)
            if changed {
                c.reply.writeRESPNullArray(session.protocolVersion)
                return
            }
            c.reply.writeRESPArrayHeader(commands.count)
            session.noteTransactionRunning(commands.count)
            defer { session.noteTransactionRunning(nil) }
            var unsent = ByteBuffer()
            for command in commands {
                command.withArguments { arguments in
                    // A client that killed itself (CLIENT KILL ... SKIPME no) gets no further replies; the
                    // commands still run, as in Redis.
                    if session.closeAfterReply {
                        unsent.clear()
                        CommandExecutor.execute(arguments, session: session, server: server, now: now, reply: &unsent, queued: true)
                    } else {
                        CommandExecutor.execute(arguments, session: session, server: server, now: now, reply: &c.reply, queued: true)
                    }
                }
            }
        }
        if session.messagesAfterTransaction.readableBytes > 0 {
            c.reply.writeBuffer(&session.messagesAfterTransaction)
            session.messagesAfterTransaction = ByteBuffer()
        }
    }

    /// Inside MULTI, Redis refuses every command but EXEC, DISCARD and QUIT while memory is over the limit and
    /// eviction cannot bring it down, MULTI and WATCH included, and EXEC then fails: true after that refusal.
    private static func refusedOverMemory(_ c: inout CommandContext) -> Bool {
        guard c.session.inTransaction, overMemory(c) else { return false }
        c.error(ReplyError.outOfMemory)
        c.session.transactionRefused = true
        return true
    }

    /// Whether memory is over `maxmemory` and eviction cannot bring it down (never while a CLIENT PAUSE holds
    /// clients: nothing is evicted then, as in Redis).
    private static func overMemory(_ c: CommandContext) -> Bool {
        c.server.keyspace.budget.isOverLimit && c.server.blocked.pauseMode(now: c.now) == .none
            && !c.server.keyspace.evict(database: c.session.db, shardIndex: 0, now: c.now)
    }

    /// EXEC's error when it is refused: the transaction is discarded, and the reason given, as Redis words it
    /// (a reason of its own, such as an arity error, without the `ERR` code; OOM, NOAUTH... with theirs).
    static func abortMessage(_ reason: String) -> String {
        var reason = Substring(reason)
        if reason.hasPrefix("-") { reason = reason.dropFirst() }
        if reason.hasPrefix("ERR ") { reason = reason.dropFirst(4) }
        return "EXECABORT Transaction discarded because of: " + reason
    }

    /// Whether a key `session` watches was changed since WATCH: a write marked it, or it existed then and is
    /// gone now (expired or evicted).
    private static func watchedKeyChanged(_ session: ClientSession, server: ServerState, now: Int64) -> Bool {
        if session.isWatchDirty { return true }
        return session.watchedKeys.contains { $0.existed && !server.keyExists(db: $0.key.db, name: $0.key.name, now: now) }
    }

    static func watch(_ c: inout CommandContext) {
        if refusedOverMemory(&c) { return }
        guard !c.session.inTransaction else { return c.error("ERR WATCH inside MULTI is not allowed") }
        let db = c.session.db
        for i in 1..<c.arguments.count {
            let key = WatchRegistry.Key(db: db, name: c.arguments.bytes(i))
            if c.session.watchedKeys.contains(where: { $0.key == key }) { continue }
            // In the registry before the look: a write from here on marks this client, whichever it sees.
            c.server.watches.add(key, for: c.session)
            let existed = c.server.keyExists(db: db, name: key.name, now: c.now)
            c.session.watchedKeys.append(ClientSession.WatchedKey(key: key, existed: existed))
        }
        c.ok()
    }

    static func unwatch(_ c: inout CommandContext) {
        c.server.unwatchAll(c.session)
        c.ok()
    }
}
