import CacheCore
import NIOCore
import RESP

/// Runs one parsed command: finds it in the table, checks arity and authentication, feeds MONITOR, and
/// calls its handler.
package enum CommandExecutor {
    /// Executes the command in `arguments` for `session`, appending the reply to `reply`.
    @inline(__always)
    package static func execute(
        _ arguments: Arguments,
        session: ClientSession,
        server: ServerState,
        now: Int64,
        reply: inout ByteBuffer
    ) {
        // Redis's order of checks: existence, arity, then authentication.
        guard let index = server.commands.lookup(arguments[0]) else {
            reply.writeRESPError(bytes: ReplyError.unknownCommand(arguments))
            return
        }
        let command = server.commands.dispatch[index]
        session.noteCommand(index, now: now)
        guard command.acceptsArgumentCount(arguments.count) else {
            reply.writeRESPError(ReplyError.wrongArity(server.commands.commands[index].name))
            return
        }
        if !session.authenticated && !command.flags.contains(.noauth) {
            reply.writeRESPError(ReplyError.noAuth)
            return
        }
        // As Redis's performEvictions: before a command that may allocate, make room if memory is over the
        // limit, and refuse the command when nothing can be evicted (or the policy is noeviction).
        if command.flags.contains(.denyoom) && server.keyspace.budget.isOverLimit
            && !makeRoom(server.commands.commands[index], arguments, session: session, server: server, now: now)
        {
            reply.writeRESPError(ReplyError.outOfMemory)
            return
        }
        var context = CommandContext(arguments: arguments, session: session, server: server, now: now, reply: reply)
        reply = ByteBuffer()  // hand the buffer over without a copy-on-write
        command.handler(&context)
        reply = context.reply
        // As Redis 7.0 does, MONITOR sees a command once it has run (so SELECT shows the new database), and
        // never sees administrative commands (CONFIG, CLIENT LIST/KILL, MONITOR, SHUTDOWN...).
        if server.monitors.isActive, case let spec = server.commands.commands[index], !isAdministrative(spec, arguments) {
            let line = monitorLine(arguments, spec: spec, session: session, server: server)
            server.monitors.broadcast(line, except: session.isMonitor ? session.id : nil)
            // A monitor sees its own commands after their replies, unless it is closing (QUIT).
            if session.isMonitor && !session.closeAfterReply { reply.writeImmutableBuffer(line) }
        }
    }

    /// Evicts keys until memory is within the limit, starting with the shard of the command's first key.
    static func makeRoom(
        _ spec: CommandSpec, _ arguments: Arguments, session: ClientSession, server: ServerState, now: Int64
    ) -> Bool {
        var shardIndex = 0
        if spec.firstKey > 0 && spec.firstKey < arguments.count {
            shardIndex = Database.shardIndex(for: Keyspace.hasher.hash(arguments[spec.firstKey]))
        }
        return server.keyspace.evict(database: session.db, shardIndex: shardIndex, now: now)
    }

    /// Whether the command (or, for a container such as CLIENT, its subcommand) has the `admin` flag.
    static func isAdministrative(_ spec: CommandSpec, _ arguments: Arguments) -> Bool {
        if !spec.subcommands.isEmpty && arguments.count > 1 {
            let sub = arguments[1]
            if let subcommand = spec.subcommands.first(where: { CommandTable.equalsLowercased(sub, $0.name) }) {
                return subcommand.flags.contains(.admin)
            }
        }
        return spec.flags.contains(.admin)
    }

    /// The arguments MONITOR shows as `(redacted)`: AUTH's credentials and those of HELLO's AUTH option.
    static func redactedArguments(_ spec: CommandSpec, _ arguments: Arguments) -> Range<Int>? {
        switch spec.name {
        case "auth":
            return 1..<arguments.count
        case "hello":
            // HELLO [protover [AUTH username password] [SETNAME name]]: the options are read as HELLO reads them.
            var j = 2
            var redacted: Range<Int>?
            while j < arguments.count {
                let more = arguments.count - 1 - j
                if arguments.matches(j, "auth") && more >= 2 {
                    redacted = (j + 1)..<(j + 3)
                    j += 3
                } else if arguments.matches(j, "setname") && more >= 1 {
                    j += 2
                } else {
                    break
                }
            }
            return redacted
        default:
            return nil
        }
    }

    /// The command as MONITOR clients see it: `+<time> [<db> <addr>] "arg" ...`.
    static func monitorLine(_ arguments: Arguments, spec: CommandSpec, session: ClientSession, server: ServerState)
        -> ByteBuffer
    {
        let micros = server.clock.nowMicroseconds()
        var line = "+\(micros / 1_000_000).\(String(micros % 1_000_000).leftPadded(to: 6)) [\(session.db) "
        line += session.unixSocketPath.map { "unix:\($0)]" } ?? "\(session.remoteAddress)]"
        let redacted = redactedArguments(spec, arguments)
        for i in 0..<arguments.count {
            line += " "
            line += redacted?.contains(i) == true ? "\"(redacted)\"" : RESPText.quoted(arguments[i])
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
