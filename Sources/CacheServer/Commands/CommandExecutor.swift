import CacheCore
import NIOCore
import RESP

/// Runs one parsed command: finds it in the table, checks arity and authentication, feeds MONITOR, and
/// calls its handler.
package enum CommandExecutor {
    /// Executes the command in `arguments` for `session`, appending the reply to `reply`. `queued` runs a
    /// command of a transaction for EXEC: it was checked when it was queued, so, as Redis's `call()`, it runs
    /// without the checks that come before a command (authentication, context, memory, MISCONF).
    @inline(__always)
    package static func execute(
        _ arguments: Arguments,
        session: ClientSession,
        server: ServerState,
        now: Int64,
        reply: inout ByteBuffer,
        queued: Bool = false
    ) {
        // INFO commandstats and errorstats, and SLOWLOG: what became of the command, told by its reply.
        let replyStart = reply.writerIndex
        var slot = -1  // the command's (or subcommand's) counters; -1 for an unknown one
        var id = -1  // the dispatch entry that runs: the command's, or its subcommand's (see CommandTable.dispatch)
        var ranFor = -1  // nanoseconds the handler ran; -1 when the command was refused before it ran
        var replyEnd = -1  // where the command's own reply ends, when pushes (invalidations) may follow it
        var ownReplyStart = replyStart  // where it starts, after what is sent whatever CLIENT REPLY says
        defer {
            noteOutcome(arguments, id: id, slot: slot, ranFor: ranFor, replyStart: replyStart, reply: reply, session, server)
            // CLIENT REPLY OFF or SKIP: the reply is dropped once it was counted (pushes stay wherever they are, and
            // RESP2 pub/sub confirmations and messages before it). The commands EXEC runs are inside EXEC's reply.
            if !queued && (session.replyOff || session.replySkip || session.replySkipNext) && session.blockKind == .none {
                dropReply(&reply, session, from: ownReplyStart, to: replyEnd >= 0 ? replyEnd : reply.writerIndex)
            }
        }
        // Redis's order of checks: existence, arity, then authentication.
        guard let index = server.commands.lookup(arguments[0]) else {
            if CrossProtocolGuard.isHTTPCommandName(arguments[0]) {
                abortHTTPRequest(session, server, now: now)
                return
            }
            session.noteCommand(nil)
            reply.writeRESPError(bytes: ReplyError.unknownCommand(arguments))
            if session.inTransaction { session.transactionRefused = true }
            return
        }
        var command = server.commands.dispatch[index]
        id = index
        // CLIENT LIST's cmd= is EXEC's while EXEC runs the queued commands, as in Redis.
        if !queued { session.noteCommand(index) }
        slot = server.commandStatistics.slot(command: index, subcommand: nil)
        // As Redis's lookup: a container's (CLIENT, CONFIG...) second argument names the subcommand that runs, with
        // its own arity, flags and handler; an unknown one is refused here.
        if command.flags.contains(.container) && arguments.count > 1 {
            guard let sub = subcommand(of: index, arguments, queued: queued, session, server, &reply) else {
                slot = -1  // as Redis: no command, so no command's counters
                return
            }
            id = server.commands.permissionId(index, sub: sub)
            command = server.commands.dispatch[id]
            slot = server.commandStatistics.slot(command: index, subcommand: sub)
        }
        guard command.acceptsArgumentCount(arguments.count) else {
            refuse(ReplyError.wrongArity(server.commands.fullName(id)), id, session, server, &reply)
            return
        }
        // Unauthenticated, subscribed, tracking and transaction clients, and users whose ACL rules restrict
        // them, take the slow path; everyone else pays these two checks.
        var tracking = false
        if session.modes.rawValue != 0 || session.user.isRestricted {
            if queued {
                if session.user.isRestricted,
                    let refusal = AclCommands.refusal(index, arguments, session: session, server: server, now: now, queued: true)
                {
                    reply.writeRESPError(refusal)
                    return
                }
                tracking = rememberQueuedReadKeys(id, arguments, session: session, server: server)
            } else {
                guard let tracks = admit(index, id, arguments, session: session, server: server, now: now, reply: &reply)
                else { return }
                tracking = tracks
            }
        }
        // CLIENT PAUSE: the command waits for the pause to end, unless it is one the pause lets through. (Redis
        // checks after memory and MISCONF, but evicts nothing while paused: the command would wait either way.)
        if !queued && server.blocked.mayBePaused && hold(id, session: session, server: server, now: now) {
            return
        }
        // As Redis's performEvictions: before any command, make room if memory is over the limit (one check while
        // it is not), and refuse a command that may allocate when nothing can be evicted (or the policy is
        // noeviction). A command that does not allocate evicts a bounded number of keys, as Redis bounds the time.
        if !queued && server.keyspace.budget.isOverLimit {
            let allocates = command.flags.contains(.denyoom)
            let roomMade = makeRoom(
                server.commands.spec(id), arguments, session: session, server: server, now: now, reply: &reply,
                keyBudget: allocates ? .max : ServerState.evictionStep)
            if allocates && !roomMade {
                reply.writeRESPError(ReplyError.outOfMemory)
                return
            }
        }
        // As Redis: while background saves fail, writes (and PING, so that health checks notice) are refused.
        if !queued, server.refusesWrites, !command.flags.isDisjoint(with: [.write, .refusedLikeWrites]) {
            reply.writeRESPError(ReplyError.backgroundSaveFailed)
            return
        }
        var context = CommandContext(
            arguments: arguments, session: session, server: server, now: now, reply: reply, tracking: tracking)
        reply = ByteBuffer()  // hand the buffer over without a copy-on-write
        session.countCommand()
        let started = monotonicNanoseconds()
        command.handler(&context)
        ranFor = monotonicNanoseconds() - started
        replyEnd = context.reply.writerIndex
        // Keys the command's lookups expired (or its evictions removed) and no event of its own published yet.
        if server.notifications.isActive { publishRemovals(&context) }
        ownReplyStart = context.sentRegardlessUntil
        if context.tracking { finishTracking(id, &context) }
        reply = context.reply
        // As Redis 7.0 does, MONITOR sees a command once it has run (so SELECT shows the new database), and
        // never sees administrative commands (CONFIG, CLIENT LIST/KILL, MONITOR, SHUTDOWN...).
        if server.monitors.isActive && !command.flags.contains(.admin) {
            if let line = monitorLine(arguments, id: id, session: session, server: server) {
                server.monitors.broadcast(line, except: session.isMonitor ? session.id : nil)
                // A monitor sees its own commands after their replies, unless it is closing (QUIT).
                if session.isMonitor && !session.closeAfterReply { reply.writeImmutableBuffer(line) }
            } else {
                server.monitors.closeAll(logger: server.logger)
            }
        }
    }

    /// A command named `POST` or `Host:`: an HTTP request sent to the server (``CrossProtocolGuard``). As Redis,
    /// nothing more of the connection runs, nothing is counted, and replies not sent yet are dropped.
    @inline(never)
    static func abortHTTPRequest(_ session: ClientSession, _ server: ServerState, now: Int64) {
        server.crossProtocol.warn(
            logger: server.logger, client: session.unixSocketPath.map { "unix:\($0)" } ?? session.remoteAddress,
            nowMilliseconds: now)
        session.abortConnection = true
        session.closeAfterReply = true
    }

    /// Removes the replies from `start` to `end` of `reply` (a reply CLIENT REPLY says not to send), keeping the
    /// pushes among them (as Redis: invalidations and the client's own keyspace notifications are not replies)
    /// and what follows them, and moves CLIENT REPLY SKIP on: the command after SKIP is the one skipped.
    @inline(never)
    static func dropReply(_ reply: inout ByteBuffer, _ session: ClientSession, from start: Int, to end: Int) {
        if session.replyOff || session.replySkip {
            var kept = ByteBuffer()
            forEachFrame(in: reply, from: start, to: end) { frame, isPush in
                if isPush, let bytes = reply.getSlice(at: frame.lowerBound, length: frame.count) {
                    kept.writeImmutableBuffer(bytes)
                }
                return true
            }
            if end < reply.writerIndex, let tail = reply.getSlice(at: end, length: reply.writerIndex - end) {
                kept.writeImmutableBuffer(tail)
            }
            reply.moveWriterIndex(to: start)
            reply.writeBuffer(&kept)
        }
        session.replySkip = session.replySkipNext
        session.replySkipNext = false
    }

    /// Calls `body` with each whole reply written to `reply` from index `start` to `end`, its range and whether it
    /// is a push (`>`), until `body` returns false. Bytes that do not make a whole reply (none are written) end
    /// the walk as one last frame that is not a push.
    static func forEachFrame(
        in reply: ByteBuffer, from start: Int, to end: Int, _ body: (Range<Int>, _ isPush: Bool) -> Bool
    ) {
        let limits = RESPDecodingLimits(
            maxDepth: .max, maxBulkLength: .max, maxAggregateCount: .max, maxLineLength: .max)
        var offset = start
        while offset < end, let frame = reply.getSlice(at: offset, length: end - offset) {
            let length = (try? RESPValue.frameLength(in: frame, limits: limits)) ?? nil
            let isPush = frame.getInteger(at: frame.readerIndex, as: UInt8.self) == UInt8(ascii: ">")
            guard let length, length > 0 else {
                _ = body(offset..<end, false)
                return
            }
            guard body(offset..<(offset + length), isPush) else { return }
            offset += length
        }
    }

    /// Where the command's own reply starts in `reply`: at `start`, or after the pushes written ahead of it
    /// (invalidations of keys evicted to make room, the client's own keyspace notifications). `nil` when there
    /// are only pushes.
    @inline(never)
    static func ownReplyStart(_ reply: ByteBuffer, from start: Int) -> Int? {
        var found: Int?
        forEachFrame(in: reply, from: start, to: reply.writerIndex) { frame, isPush in
            if !isPush { found = frame.lowerBound }
            return isPush
        }
        return found
    }

    /// Counts the command's outcome for INFO commandstats and errorstats (a call and its time, or a refusal;
    /// an error reply by its first word), and logs it in SLOWLOG when it ran long enough.
    @inline(__always)
    static func noteOutcome(
        _ arguments: Arguments, id: Int, slot: Int, ranFor: Int, replyStart: Int, reply: ByteBuffer,
        _ session: ClientSession, _ server: ServerState
    ) {
        let statistics = session.statistics ?? server.commandStatistics.unbound
        var start = replyStart
        var first = reply.writerIndex > start ? reply.getInteger(at: start, as: UInt8.self) : nil
        if first == UInt8(ascii: ">"), let own = ownReplyStart(reply, from: start) {
            start = own
            first = reply.getInteger(at: start, as: UInt8.self)
        }
        let failed = first == UInt8(ascii: "-")
        if ranFor >= 0 {
            statistics.recordCall(slot: slot, nanoseconds: ranFor, failed: failed, timed: server.latencyTracking)
            if server.slowLog.isSlow(nanoseconds: ranFor) { logSlow(id, arguments, nanoseconds: ranFor, session, server) }
            if server.latency.isSample(nanoseconds: ranFor) { sampleLatency(id, nanoseconds: ranFor, server) }
        } else if failed && slot >= 0 {
            statistics.recordRejection(slot: slot)
        }
        if failed { statistics.recordError(prefix: errorPrefix(reply, at: start)) }
    }

    /// The first word of the error reply at `start` ("ERR", "WRONGTYPE"), as INFO errorstats names it.
    static func errorPrefix(_ reply: ByteBuffer, at start: Int) -> String {
        var end = start + 1
        while end < reply.writerIndex, let byte = reply.getInteger(at: end, as: UInt8.self),
            byte != UInt8(ascii: " "), byte != UInt8(ascii: "\r"), end - start <= 128
        {
            end += 1
        }
        return reply.getString(at: start + 1, length: end - start - 1) ?? "ERR"
    }

    /// A LATENCY sample of `command`, or `fast-command` for a command flagged fast.
    @inline(never)
    static func sampleLatency(_ id: Int, nanoseconds: Int, _ server: ServerState) {
        let event = server.commands.dispatch[id].flags.contains(.fast) ? "fast-command" : "command"
        server.latency.record(event, milliseconds: nanoseconds / 1_000_000, time: Int(server.clock.nowMilliseconds() / 1000))
    }

    @inline(never)
    static func logSlow(_ id: Int, _ arguments: Arguments, nanoseconds: Int, _ session: ClientSession, _ server: ServerState) {
        // As Redis: EXEC is not logged (its commands are).
        guard !server.commands.dispatch[id].flags.contains(.skipSlowlog) else { return }
        server.slowLog.record(
            arguments, redacted: server.commands.secretPositions(id, in: arguments), microseconds: nanoseconds / 1000,
            time: Int(server.clock.nowMilliseconds() / 1000),
            client: session.unixSocketPath.map { "\($0):0" } ?? session.remoteAddress, name: session.name ?? "")
    }

    /// The subcommand of container command `index` (CLIENT, CONFIG...) that `arguments` name, noted for CLIENT
    /// LIST; nil after refusing an unknown one, with Redis's error.
    @inline(never)
    static func subcommand(
        of index: Int, _ arguments: Arguments, queued: Bool, _ session: ClientSession, _ server: ServerState,
        _ reply: inout ByteBuffer
    ) -> Int? {
        let spec = server.commands.commands[index]
        let sub = spec.subcommandIndex(named: arguments[1])
        if !queued { session.noteSubcommand(sub, of: index) }
        if sub == nil { refuse(ReplyError.unknownSubcommand(arguments[1], of: arguments.string(0)), index, session, server, &reply) }
        return sub
    }

    /// The checks for clients with ``ClientSession/modes``: authentication, the RESP2 subscribed context's
    /// restriction (after Redis's), queuing inside MULTI, and, for a tracking client, remembering the keys of
    /// a read before it runs (so that a write on another connection between the read and the remembering
    /// cannot go unreported). Returns nil after replying (with an error, or `QUEUED`), else whether the command
    /// has tracking work. `index` is the command's, `id` its dispatch entry (its subcommand's, for a container).
    @inline(never)
    static func admit(
        _ index: Int, _ id: Int, _ arguments: Arguments, session: ClientSession, server: ServerState, now: Int64,
        reply: inout ByteBuffer
    ) -> Bool? {
        let flags = server.commands.dispatch[id].flags
        if !session.authenticated && !flags.contains(.noauth) {
            refuse("\(ReplyError.noAuth)", id, session, server, &reply)
            return nil
        }
        if session.user.isRestricted,
            let refusal = AclCommands.refusal(index, arguments, session: session, server: server, now: now)
        {
            refuse(refusal, id, session, server, &reply)
            return nil
        }
        if session.modes.contains(.subscribed) && session.protocolVersion == .resp2 && !flags.contains(.subscribedContext) {
            refuse(ReplyError.subscribedContext(server.commands.fullName(id)), id, session, server, &reply)
            return nil
        }
        // As Redis: a monitoring connection (a replica, to Redis) may not read or write keys, or publish.
        if session.modes.contains(.monitoring) && !flags.isDisjoint(with: [.readonly, .write, .mayReplicate]) {
            refuse("ERR Replica can't interact with the keyspace", id, session, server, &reply)
            return nil
        }
        if session.modes.contains(.transaction) && !flags.contains(.transactionControl) {
            // As Redis: a pause holds a command back before it is queued (but not one refused at once).
            if !flags.contains(.noMulti) && server.blocked.mayBePaused && hold(id, session: session, server: server, now: now) {
                return nil
            }
            queue(id, arguments, session: session, server: server, now: now, reply: &reply)
            return nil
        }
        guard session.tracking != nil else { return false }
        rememberReadKeys(id, arguments, session: session, server: server)
        return true
    }

    /// Holds the command back if a CLIENT PAUSE in effect applies to it: every command under `ALL`; under
    /// `WRITE` those that write or may propagate (PUBLISH), and EXEC of a transaction with any. Whether it was
    /// held: it has not run, and runs again when the pause ends.
    @inline(never)
    static func hold(_ id: Int, session: ClientSession, server: ServerState, now: Int64) -> Bool {
        guard let outlet = session.outlet else { return false }
        let propagating: CommandFlags = [.write, .mayReplicate]
        let flags = server.commands.dispatch[id].flags
        let writes = !flags.isDisjoint(with: propagating)
            || (flags.contains(.exec) && !session.queuedFlags.isDisjoint(with: propagating))
        guard let end = server.blocked.postpone(session.id, outlet: outlet, writes: writes, now: now) else { return false }
        session.block(.postponed, until: end)
        return true
    }

    /// A command EXEC runs for a tracking client: its keys are remembered as a read's are (``admit(_:_:_:session:server:now:reply:)``
    /// skips that while queuing). Whether the command has tracking work.
    @inline(never)
    static func rememberQueuedReadKeys(_ id: Int, _ arguments: Arguments, session: ClientSession, server: ServerState) -> Bool {
        guard session.tracking != nil else { return false }
        rememberReadKeys(id, arguments, session: session, server: server)
        return true
    }

    /// Answers a command refused before it runs (its dispatch entry `id`) with `message`. Inside MULTI, EXEC will
    /// fail (Redis's `flagTransaction`); a refused EXEC itself ends the transaction, naming the reason
    /// (`execCommandAbort`).
    @inline(never)
    static func refuse(
        _ message: String, _ id: Int, _ session: ClientSession, _ server: ServerState, _ reply: inout ByteBuffer
    ) {
        if server.commands.dispatch[id].flags.contains(.exec) {
            reply.writeRESPError(TransactionCommands.abortMessage(message))
            if session.inTransaction { _ = session.endTransaction() }
            server.unwatchAll(session)
        } else {
            reply.writeRESPError(message)
            if session.inTransaction { session.transactionRefused = true }
        }
    }

    /// ``refuse(_:_:_:_:_:)`` with a message that quotes what the client sent (any bytes).
    @inline(never)
    static func refuse(
        _ message: [UInt8], _ id: Int, _ session: ClientSession, _ server: ServerState, _ reply: inout ByteBuffer
    ) {
        if server.commands.dispatch[id].flags.contains(.exec) {
            refuse(String(decoding: message, as: UTF8.self), id, session, server, &reply)
        } else {
            reply.writeRESPError(bytes: message)
            if session.inTransaction { session.transactionRefused = true }
        }
    }

    /// Queues a command (its dispatch entry `id`) inside MULTI, answering `QUEUED`; or refuses it as Redis does
    /// before queuing, with the error it would get (and EXEC will fail): a command not allowed in a transaction,
    /// memory over `maxmemory` that eviction cannot bring down, writes while background saves fail.
    @inline(never)
    static func queue(
        _ id: Int, _ arguments: Arguments, session: ClientSession, server: ServerState, now: Int64,
        reply: inout ByteBuffer
    ) {
        let command = server.commands.dispatch[id]
        var refusal: String?
        if command.flags.contains(.noMulti) {
            refusal = "ERR Command not allowed inside a transaction"
        } else if server.keyspace.budget.isOverLimit
            && !makeRoom(server.commands.spec(id), arguments, session: session, server: server, now: now, reply: &reply)
        {
            // Queuing takes memory too: over the limit, Redis queues nothing.
            refusal = "OOM command not allowed when used memory > 'maxmemory'."
        } else if server.refusesWrites && !command.flags.isDisjoint(with: [.write, .refusedLikeWrites]) {
            refusal = "\(ReplyError.backgroundSaveFailed)"
        }
        if let refusal {
            reply.writeRESPError(refusal)
            session.transactionRefused = true
            return
        }
        // As Redis: once EXEC is bound to fail, the commands are answered but not kept.
        if !session.transactionRefused && !session.isWatchDirty { session.queue(arguments, flags: command.flags) }
        reply.writeRESPSimpleString("QUEUED")
    }

    /// Publishes the `expired` and `evicted` events of keys removed while the command ran.
    @inline(never)
    static func publishRemovals(_ context: inout CommandContext) {
        context.server.notifications.publishRemovals(current: context.session, reply: &context.reply)
    }

    /// Sends the invalidations of a command that modified keys (or ran while evicted keys wait), and does a
    /// tracking client's bookkeeping after its command.
    @inline(never)
    static func finishTracking(_ id: Int, _ context: inout CommandContext) {
        let (session, server) = (context.session, context.server)
        let modified = session.modifiedKeys
        let flushed = session.flushedKeys
        if !modified.isEmpty { session.modifiedKeys.removeAll(keepingCapacity: true) }
        session.flushedKeys = false
        server.sendInvalidations(
            modified: modified, flushed: flushed, current: session, reply: &context.reply,
            replyStart: context.replyStart)
        guard session.tracking != nil else { return }
        // A read that expired its own key has just been told so: it holds the key (as missing) again.
        rememberReadKeys(id, context.arguments, session: session, server: server)
        // CLIENT CACHING applies to the next command only (CLIENT subcommands keep it, as in Redis).
        // Inside a transaction, the commands EXEC runs included.
        if session.cachingGiven && !server.commands.dispatch[id].flags.contains(.keepsCaching) && !session.inTransaction
            && !session.runningTransaction
        {
            session.cachingGiven = false
        }
    }

    /// Adds the keys of a read-only command to the tracking table for `session`, as Redis's
    /// `trackingRememberKeys`: not in BCAST mode, in OPTIN mode only after CLIENT CACHING YES, in OPTOUT mode
    /// unless after CLIENT CACHING NO.
    @inline(never)
    static func rememberReadKeys(_ id: Int, _ arguments: Arguments, session: ClientSession, server: ServerState) {
        guard let options = session.tracking, !options.bcast, server.commands.dispatch[id].flags.contains(.readonly)
        else { return }
        if (options.optin && !session.cachingGiven) || (options.optout && session.cachingGiven) { return }
        let keys = server.commands.keyPositions(id, in: arguments).map { Array(arguments[$0.position]) }
        guard !keys.isEmpty else { return }
        server.tracking.remember(keys, for: session.id)
    }

    /// Evicts keys until memory is within the limit (or `keyBudget` keys), starting with the shard of the
    /// command's first key, before the command runs; whether it is within the limit now. As in Redis, tracking
    /// clients and keyspace-event subscribers hear of the evicted keys at once: `session` in `reply`, ahead of
    /// its command's reply.
    @inline(never)
    static func makeRoom(
        _ spec: CommandSpec, _ arguments: Arguments, session: ClientSession, server: ServerState, now: Int64,
        reply: inout ByteBuffer, keyBudget: Int = .max
    ) -> Bool {
        // As Redis: while CLIENT PAUSE holds clients nothing is evicted, and memory counts as within the limit.
        if server.blocked.pauseMode(now: now) != .none { return true }
        var shardIndex = 0
        if spec.firstKey > 0 && spec.firstKey < arguments.count {
            shardIndex = Database.shardIndex(for: Keyspace.hasher.hash(arguments[spec.firstKey]))
        }
        let roomMade =
            server.keyspace.evict(database: session.db, shardIndex: shardIndex, now: now, keyBudget: keyBudget) == .withinLimit
        if server.tracking.isActive { server.sendRemovalInvalidations(current: session, reply: &reply) }
        // As Redis's eviction: `evicted` events go out at once, ahead of the command's reply or its refusal.
        if server.notifications.isActive { server.notifications.publishRemovals(current: session, reply: &reply) }
        return roomMade
    }

    /// The command as MONITOR clients see it: `+<time> [<db> <addr>] "arg" ...`.
    static func monitorLine(_ arguments: Arguments, id: Int, session: ClientSession, server: ServerState) -> ByteBuffer? {
        // Quoting makes a byte at most four (\xHH): a line that could pass what one reply may be is not built,
        // and the monitors are closed as over their output limit, as Redis would close them.
        var bound = 128
        for i in 0..<arguments.count { bound &+= arguments[i].count &* 4 &+ 3 }
        guard bound <= CommandContext.maxReplyBytes else { return nil }
        let micros = server.clock.nowMicroseconds()
        var line = "+\(micros / 1_000_000).\(String(micros % 1_000_000).leftPadded(to: 6)) [\(session.db) "
        line += session.unixSocketPath.map { "unix:\($0)]" } ?? "\(session.remoteAddress)]"
        let redacted = server.commands.secretPositions(id, in: arguments)
        for i in 0..<arguments.count {
            line += " "
            line += redacted.contains(i) ? "\"(redacted)\"" : RESPText.quoted(arguments[i])
        }
        var buffer = ByteBuffer()
        buffer.writeString(line)
        buffer.writeStaticString("\r\n")
        return buffer
    }

}

extension String {
    func leftPadded(to width: Int, with pad: Character = "0") -> String {
        count >= width ? self : String(repeating: pad, count: width - count) + self
    }
}
