import RESP

/// Commands that make clients wait: WAIT, CLIENT PAUSE / UNPAUSE, and CLIENT UNBLOCK (see ``BlockedClients``).
enum BlockingCommands {
    /// WAIT numreplicas timeout. No replica ever acknowledges a write here: with none asked for (or inside a
    /// transaction, as Redis answers there) the answer is 0 at once; otherwise the client blocks until the
    /// timeout (milliseconds; 0 for none) or CLIENT UNBLOCK, and is then answered 0.
    static func wait(_ c: inout CommandContext) {
        guard let replicas = c.integerArgument(1), let timeout = timeoutArgument(&c, 2) else { return }
        guard replicas > 0, !c.session.runningTransaction, let outlet = c.session.outlet else { return c.integer(0) }
        c.server.blocked.wait(c.session.id, outlet: outlet, timed: timeout > 0)
        c.session.block(.waiting, until: timeout > 0 ? c.now + timeout : 0)
    }

    /// CLIENT PAUSE timeout [WRITE|ALL]: holds back every command (ALL, the default), or those that write (WRITE),
    /// of every client for `timeout` milliseconds, or until CLIENT UNPAUSE. Expiry and eviction stop meanwhile.
    static func pause(_ c: inout CommandContext) {
        let a = c.arguments
        guard a.count <= 4 else { return c.reply.writeRESPError(bytes: ReplyError.subcommandSyntax(a[1], of: c.arguments.string(0))) }
        var mode = BlockedClients.PauseMode.all
        if a.count == 4 {
            if a.matches(3, "write") {
                mode = .write
            } else if !a.matches(3, "all") {
                return c.error("ERR CLIENT PAUSE mode must be WRITE or ALL")
            }
        }
        guard let timeout = timeoutArgument(&c, 2) else { return }
        c.server.blocked.pause(mode, until: c.now + timeout, now: c.now)
        // The commands other event loops are running finish before the reply: once it is OK, nothing the pause
        // holds runs.
        c.server.transactions.exclusively(from: c.session.lane) {}
        c.ok()
    }

    /// CLIENT UNPAUSE: ends the pause in effect; the commands it held run.
    static func unpause(_ c: inout CommandContext) {
        c.server.blocked.unpause()
        c.ok()
    }

    /// CLIENT UNBLOCK client-id [TIMEOUT|ERROR]: releases a client WAIT blocks, as at its timeout (the default)
    /// or with an error. 1 if it was blocked, else 0 (also for a client a pause holds, which only the pause's
    /// end releases).
    static func unblock(_ c: inout CommandContext) {
        let a = c.arguments
        guard a.count <= 4 else { return c.reply.writeRESPError(bytes: ReplyError.subcommandSyntax(a[1], of: c.arguments.string(0))) }
        var release = BlockedClients.Release.timeout
        if a.count == 4 {
            if a.matches(3, "error") {
                release = .error
            } else if !a.matches(3, "timeout") {
                return c.error("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR")
            }
        }
        guard let id = c.integerArgument(2) else { return }
        c.integer(c.server.blocked.unblock(id, release) ? 1 : 0)
    }

    /// Counts the error a client released by CLIENT UNBLOCK ... ERROR receives: in errorstats, and as a failed
    /// call of its command (WAIT, its last), as Redis counts it.
    static func countUnblockError(session: ClientSession, server: ServerState) {
        let statistics = session.statistics ?? server.commandStatistics.unbound
        statistics.recordError(prefix: "UNBLOCKED")
        if let last = session.lastCommandIndex {
            statistics.recordFailure(slot: server.commandStatistics.slot(command: last.command, subcommand: nil))
        }
    }

    /// Redis's reply to a blocked client that CLIENT UNBLOCK ... ERROR releases.
    static let unblockedError = "UNBLOCKED client unblocked via CLIENT UNBLOCK"

    /// A timeout in milliseconds, as Redis reads one: an integer, not negative; one so large that the moment
    /// it names cannot be represented is refused too.
    static func timeoutArgument(_ c: inout CommandContext, _ index: Int) -> Int64? {
        guard let value = c.arguments.integer(index) else {
            c.error("ERR timeout is not an integer or out of range")
            return nil
        }
        guard value >= 0 else {
            c.error("ERR timeout is negative")
            return nil
        }
        guard Int64(value) <= Int64.max - c.now else {
            c.error("ERR timeout is out of range")
            return nil
        }
        return Int64(value)
    }
}
