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
        let spec = server.commands.commands[index]
        session.noteCommand(index, now: now)
        guard spec.acceptsArgumentCount(arguments.count) else {
            reply.writeRESPError(ReplyError.wrongArity(spec.name))
            return
        }
        if !session.authenticated && !spec.flags.contains(.noauth) {
            reply.writeRESPError(ReplyError.noAuth)
            return
        }
        if server.monitors.isActive && !spec.flags.contains(.skipMonitor) {
            feedMonitors(arguments, session: session, server: server)
        }
        var context = CommandContext(arguments: arguments, session: session, server: server, now: now, reply: reply)
        reply = ByteBuffer()  // hand the buffer over without a copy-on-write
        spec.handler(&context)
        reply = context.reply
    }

    /// Sends the command to every MONITOR client as `+<time> [<db> <addr>] "arg" ...`.
    static func feedMonitors(_ arguments: Arguments, session: ClientSession, server: ServerState) {
        let micros = server.clock.nowMicroseconds()
        var line = "+\(micros / 1_000_000).\(String(micros % 1_000_000).leftPadded(to: 6)) [\(session.db) "
        line += session.isLocal && session.remoteAddress.hasPrefix("unix") ? "unix:\(session.localAddress)]" : "\(session.remoteAddress)]"
        for i in 0..<arguments.count {
            line += " "
            line += quotedRepresentation(arguments[i])
        }
        var buffer = ByteBuffer()
        buffer.writeString(line)
        buffer.writeStaticString("\r\n")
        server.monitors.broadcast(buffer)
    }

    /// Bytes in double quotes with C escapes, as Redis's `sdscatrepr` writes them.
    package static func quotedRepresentation(_ bytes: UnsafeRawBufferPointer) -> String {
        var out = "\""
        for c in bytes {
            switch c {
            case UInt8(ascii: "\\"): out += "\\\\"
            case UInt8(ascii: "\""): out += "\\\""
            case 0x0A: out += "\\n"
            case 0x0D: out += "\\r"
            case 0x09: out += "\\t"
            case 0x07: out += "\\a"
            case 0x08: out += "\\b"
            case 0x20...0x7E: out.unicodeScalars.append(Unicode.Scalar(c))
            default:
                let hex = Array("0123456789abcdef")
                out += "\\x\(hex[Int(c >> 4)])\(hex[Int(c & 15)])"
            }
        }
        return out + "\""
    }
}

extension String {
    func leftPadded(to width: Int, with pad: Character = "0") -> String {
        count >= width ? self : String(repeating: pad, count: width - count) + self
    }
}
