import CacheCore
import NIOCore
import RESP

/// Connection commands: PING, ECHO, QUIT, AUTH, HELLO, CLIENT.
package enum ConnectionCommands {
    /// The Redis version whose behaviour this server reproduces (HELLO, INFO's redis_version).
    package static let compatibleRedisVersion = "7.0.15"

    static func ping(_ c: inout CommandContext) {
        guard c.arguments.count <= 2 else { return c.wrongArity() }
        if c.version == .resp2 && c.session.modes.contains(.subscribed) {
            // In RESP2's subscribed context the reply must look like a message: ["pong", argument or ""].
            c.arrayHeader(2)
            c.bulk("pong")
            if c.arguments.count == 2 { c.bulk(c.arguments[1]) } else { c.bulk("") }
        } else if c.arguments.count == 2 {
            c.bulk(c.arguments[1])
        } else {
            c.simple("PONG")
        }
    }

    static func echo(_ c: inout CommandContext) {
        c.bulk(c.arguments[1])
    }

    static func quit(_ c: inout CommandContext) {
        c.session.closeAfterReply = true
        c.ok()
    }

    /// RESET: the connection as a new one finds it (Redis's `clearClientConnectionState`): the transaction
    /// discarded and the watched keys forgotten, tracking off, database 0, RESP2, no subscriptions (without
    /// unsubscribe messages), no longer a monitor, not authenticated when a password is set, no name, NO-TOUCH
    /// off (NO-EVICT stays, as in Redis 7.0).
    static func reset(_ c: inout CommandContext) {
        let (session, server) = (c.session, c.server)
        if session.inTransaction { _ = session.endTransaction() }
        server.unwatchAll(session)
        if session.tracking != nil {
            server.tracking.disable(session.id)
            session.tracking = nil
        }
        session.cachingGiven = false
        session.db = 0
        session.protocolVersion = .resp2
        if session.modes.contains(.subscribed) {
            server.pubsub.remove(session.id, channels: session.channels, patterns: session.patterns)
            for pattern in session.patternsInOrder { session.notePatternUnsubscribed(pattern) }
            session.updateSubscriptions { channels, patterns in
                channels.removeAll()
                patterns.removeAll()
            }
        }
        if session.isMonitor {
            server.monitors.remove(id: session.id)
            session.isMonitor = false
        }
        session.user = server.users.defaultUser
        session.authenticated = server.users.defaultAuthenticates
        session.name = nil
        // Redis 7.0 keeps NO-EVICT; NO-TOUCH, of Redis 7.2, goes as 7.2's RESET clears it.
        session.noTouch = false
        session.replyOff = false
        session.replySkipNext = false
        session.replySkip = false
        c.simple("RESET")
    }

    // MARK: authentication

    /// Authenticates `session` as `user` with `password`; true on success. A failure is logged for ACL LOG.
    static func authenticate(_ c: inout CommandContext, user: UnsafeRawBufferPointer, password: UnsafeRawBufferPointer)
        -> Bool
    {
        if let authenticated = c.server.users.authenticate(name: user, password: password) {
            c.session.user = authenticated
            c.session.authenticated = true
            return true
        }
        AclCommands.recordFailure(c, username: user)
        return false
    }

    static func auth(_ c: inout CommandContext) {
        guard c.arguments.count <= 3 else { return c.error(ReplyError.syntax) }
        if c.arguments.count == 2 {
            guard !c.server.users.defaultHasNoPassword else { return c.error(ReplyError.authNotConfigured) }
            let ok = "default".utf8.withContiguousStorageIfAvailable { user in
                authenticate(&c, user: UnsafeRawBufferPointer(user), password: c.arguments[1])
            } ?? false
            return ok ? c.ok() : c.error(ReplyError.wrongPass)
        }
        if authenticate(&c, user: c.arguments[1], password: c.arguments[2]) { c.ok() } else { c.error(ReplyError.wrongPass) }
    }

    /// AUTH's secrets: all its arguments (the password, and the user name with it).
    static func authSecrets(_ arguments: Arguments) -> Set<Int> {
        Set(1..<arguments.count)
    }

    /// HELLO's secrets: the user name and password of its AUTH option, its options read as HELLO reads them
    /// (`HELLO [protover [AUTH username password] [SETNAME name]]`).
    static func helloSecrets(_ arguments: Arguments) -> Set<Int> {
        var j = 2
        var secrets: Set<Int> = []
        while j < arguments.count {
            let more = arguments.count - 1 - j
            if arguments.matches(j, "auth") && more >= 2 {
                secrets.formUnion([j + 1, j + 2])
                j += 3
            } else if arguments.matches(j, "setname") && more >= 1 {
                j += 2
            } else {
                break
            }
        }
        return secrets
    }

    static func hello(_ c: inout CommandContext) {
        var version: RESPVersion?
        var next = 1
        if c.arguments.count >= 2 {
            guard let v = c.arguments.integer(1) else {
                return c.error("ERR Protocol version is not an integer or out of range")
            }
            guard v == 2 || v == 3 else { return c.error(ReplyError.noProto) }
            version = v == 3 ? .resp3 : .resp2
            next = 2
        }
        var credentials: (Int, Int)?
        var name: Int?
        var j = next
        while j < c.arguments.count {
            let more = c.arguments.count - 1 - j
            if c.arguments.matches(j, "auth") && more >= 2 {
                credentials = (j + 1, j + 2)
                j += 3
            } else if c.arguments.matches(j, "setname") && more >= 1 {
                name = j + 1
                j += 2
            } else {
                return c.reply.writeRESPError(bytes: ReplyError.quoting("ERR Syntax error in HELLO option '", c.arguments[j], "'"))
            }
        }
        if let (user, password) = credentials {
            guard authenticate(&c, user: c.arguments[user], password: c.arguments[password]) else {
                return c.error(ReplyError.wrongPass)
            }
        }
        guard c.session.authenticated else {
            return c.error(
                "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time"
            )
        }
        if let name {
            guard setName(&c, argument: name) else { return }
        }
        if let version { c.session.protocolVersion = version }
        let v = c.version
        c.reply.writeRESPMapHeader(7, v)
        c.bulk("server")
        c.bulk("redis")
        c.bulk("version")
        c.bulk(compatibleRedisVersion)
        c.bulk("proto")
        c.integer(Int(v.rawValue))
        c.bulk("id")
        c.integer(c.session.id)
        c.bulk("mode")
        c.bulk("standalone")
        c.bulk("role")
        c.bulk("master")
        c.bulk("modules")
        c.arrayHeader(0)
    }

    /// Sets the client's name from argument `index`; replies with Redis's error and returns false if invalid.
    static func setName(_ c: inout CommandContext, argument index: Int) -> Bool {
        let bytes = c.arguments[index]
        if bytes.isEmpty {
            c.session.name = nil
            return true
        }
        guard bytes.allSatisfy({ $0 > UInt8(ascii: " ") && $0 <= UInt8(ascii: "~") }) else {
            c.error("ERR Client names cannot contain spaces, newlines or special characters.")
            return false
        }
        c.session.name = c.arguments.string(index)
        return true
    }

    // MARK: CLIENT

    static func clientID(_ c: inout CommandContext) {
        c.integer(c.session.id)
    }

    static func clientSetName(_ c: inout CommandContext) {
        if setName(&c, argument: 2) { c.ok() }
    }

    static func clientGetName(_ c: inout CommandContext) {
        if let name = c.session.name { c.bulk(name) } else { c.null() }
    }

    static func clientInfo(_ c: inout CommandContext) {
        c.reply.writeRESPVerbatim(describe(c.session, server: c.server, now: c.now) + "\n", c.version)
    }

    static func clientNoEvict(_ c: inout CommandContext) {
        guard let on = onOff(&c) else { return }
        c.session.noEvict = on
        c.ok()
    }

    static func clientNoTouch(_ c: inout CommandContext) {
        guard let on = onOff(&c) else { return }
        c.session.noTouch = on
        c.ok()
    }

    /// Argument 2 as `ON` (true) or `OFF` (false), in any case; nil after a syntax error.
    private static func onOff(_ c: inout CommandContext) -> Bool? {
        if c.arguments.matches(2, "on") { return true }
        if c.arguments.matches(2, "off") { return false }
        c.error(ReplyError.syntax)
        return nil
    }

    /// CLIENT REPLY ON|OFF|SKIP: ON answers OK; OFF and SKIP answer nothing (the executor drops replies while
    /// they hold).
    static func clientReply(_ c: inout CommandContext) {
        let a = c.arguments
        if a.matches(2, "on") {
            c.session.replyOff = false
            c.session.replySkipNext = false
            c.session.replySkip = false
            c.ok()
        } else if a.matches(2, "off") {
            c.session.replyOff = true
        } else if a.matches(2, "skip") {
            if !c.session.replyOff { c.session.replySkipNext = true }
        } else {
            c.error(ReplyError.syntax)
        }
    }

    /// CLIENT SETINFO: accepted (Redis 7.2's, sent by newer clients), and nothing kept.
    static func clientSetInfo(_ c: inout CommandContext) {
        c.ok()
    }

    static func clientGetRedirect(_ c: inout CommandContext) {
        c.integer(c.session.tracking?.redirect ?? -1)
    }

    static func clientHelp(_ c: inout CommandContext) {
        help(&c, [
            "ID", "    Return the ID of the current connection.",
            "GETNAME", "    Return the name of the current connection.",
            "SETNAME <name>", "    Assign the name <name> to the current connection.",
            "INFO", "    Return information about the current client connection.",
            "LIST [TYPE <normal|master|replica|pubsub>] [ID <id> [<id> ...]]",
            "    Return information about client connections.",
            "KILL <ip:port>", "    Kill connection made from <ip:port>.",
            "KILL <option> <value> [<option> <value> [...]]",
            "    Kill connections. Options are: ID <client-id>, ADDR <ip:port>, LADDR <ip:port>,",
            "    TYPE <normal|master|replica|pubsub>, USER <username>, SKIPME (YES|NO), MAXAGE <seconds>.",
            "UNPAUSE", "    Stop the current client pause, resuming traffic.",
            "PAUSE <timeout> [WRITE|ALL]",
            "    Suspend all, or just write, clients for <timeout> milliseconds.",
            "UNBLOCK <clientid> [TIMEOUT|ERROR]", "    Unblock the specified blocked client.",
            "REPLY (ON|OFF|SKIP)",
            "    Control the replies sent to the current connection.",
            "NO-EVICT (ON|OFF)", "    Protect current client connection from eviction.",
            "NO-TOUCH (ON|OFF)", "    Do not change the last access time of keys read by this client.",
            "CACHING (YES|NO)",
            "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
            "GETREDIR", "    Return the client ID we are redirecting to when tracking is enabled.",
            "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
            "         [OPTIN] [OPTOUT] [NOLOOP]",
            "    Control server assisted client side caching.",
            "TRACKINGINFO", "    Report tracking status for the current connection.",
        ])
    }

    /// Replies with HELP text: the command's name line, the given lines, and the HELP line.
    /// A container's HELP reply: the command as the client typed it (upper-cased, as Redis does, so a renamed
    /// command shows its new name), then `lines`.
    static func help(_ c: inout CommandContext, _ lines: [String]) {
        let command = c.arguments.string(0).uppercased()
        let all = ["\(command) <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"] + lines + [
            "HELP", "    Prints this help.",
        ]
        c.arrayHeader(all.count)
        for line in all { c.reply.writeRESPSimpleString(line) }
    }

    static func describe(_ s: ClientSession, server: ServerState, now: Int64) -> String {
        let age = (now - s.createdAt) / 1000
        let idle = (now - s.lastInteractionTime) / 1000
        var cmd = "NULL"
        if let last = s.lastCommandIndex, last.command < server.commands.commands.count {
            let spec = server.commands.commands[last.command]
            cmd = spec.name
            if let sub = last.subcommand, sub < spec.subcommands.count { cmd += "|" + spec.subcommands[sub].name }
        }
        // Redis 7.0's letters, in its order: O monitor, P subscriber, x in MULTI, b blocked (WAIT or a pause),
        // t tracking, R broken redirect, B BCAST, d a watched key changed, U Unix socket, e no-evict; N when none
        // applies.
        var flags = ""
        if s.isMonitor { flags += "O" }
        let subscriptions = s.subscriptionCount
        if subscriptions.channels + subscriptions.patterns > 0 { flags += "P" }
        let queued = s.queuedCommandCount
        if queued >= 0 { flags += "x" }
        if s.isBlocked { flags += "b" }
        let tracking = server.tracking.options(of: s.id)
        if tracking != nil { flags += "t" }
        if tracking != nil && server.tracking.hasBrokenRedirect(s.id) { flags += "R" }
        if tracking?.bcast == true { flags += "B" }
        if s.isWatchDirty { flags += "d" }
        if s.unixSocketPath != nil { flags += "U" }
        if s.noEvict { flags += "e" }
        if flags.isEmpty { flags = "N" }
        return "id=\(s.id) addr=\(s.remoteAddress) laddr=\(s.localAddress) fd=-1 name=\(s.name ?? "") age=\(age) "
            + "idle=\(idle) flags=\(flags) db=\(s.db) sub=\(subscriptions.channels) psub=\(subscriptions.patterns) ssub=0 "
            + "multi=\(queued) qbuf=0 qbuf-free=0 argv-mem=0 "
            + "multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem=0 tot-mem=0 events=r cmd=\(cmd) user=\(s.currentUser.name) "
            + "redir=\(tracking?.redirect ?? -1) "
            + "resp=\(s.protocolVersion.rawValue)"
    }

    /// CLIENT LIST [TYPE type | ID id [id ...]], as Redis 7.0 reads it: TYPE or ID, not both; with ID, a line
    /// per id given that names a connection, in the order given.
    static func clientList(_ c: inout CommandContext) {
        let a = c.arguments
        var sessions = c.server.clients.all
        if a.count == 4 && a.matches(2, "type") {
            let type = a.string(3).lowercased()
            guard ["normal", "master", "replica", "slave", "pubsub"].contains(type) else {
                return c.reply.writeRESPError(bytes: ReplyError.quoting("ERR Unknown client type '", a[3], "'"))
            }
            sessions = sessions.filter { Self.type(of: $0) == (type == "slave" ? "replica" : type) }
        } else if a.count > 3 && a.matches(2, "id") {
            var byID: [Int: ClientSession] = [:]
            for session in sessions { byID[session.id] = session }
            sessions = []
            for j in 3..<a.count {
                guard let id = a.integer(j) else { return c.error("ERR Invalid client ID") }
                if let session = byID[id] { sessions.append(session) }
            }
        } else if a.count != 2 {
            return c.error(ReplyError.syntax)
        }
        let text = sessions.map { describe($0, server: c.server, now: c.now) + "\n" }.joined()
        c.reply.writeRESPVerbatim(text, c.version)
    }

    static func clientKill(_ c: inout CommandContext) {
        let a = c.arguments
        if a.count == 3 {
            // Old form: CLIENT KILL ip:port
            let address = a.string(2)
            guard let target = c.server.clients.all.first(where: { $0.remoteAddress == address }) else {
                return c.error("ERR No such client")
            }
            kill(target, by: c.session, server: c.server)
            return c.ok()
        }
        var id: Int?, address: String?, localAddress: String?, user: String?, skipMe = true, maxAge: Int?
        var type: String?
        var j = 2
        while j < a.count {
            guard j + 1 < a.count else { return c.error(ReplyError.syntax) }
            if a.matches(j, "id") {
                guard let v = a.integer(j + 1), v > 0 else { return c.error("ERR client-id should be greater than 0") }
                id = v
            } else if a.matches(j, "addr") {
                address = a.string(j + 1)
            } else if a.matches(j, "laddr") {
                localAddress = a.string(j + 1)
            } else if a.matches(j, "user") {
                user = a.string(j + 1)
                guard c.server.users.user(named: a.string(j + 1)) != nil else {
                    return c.reply.writeRESPError(bytes: ReplyError.quoting("ERR No such user '", a[j + 1], "'"))
                }
            } else if a.matches(j, "type") {
                let t = a.string(j + 1).lowercased()
                guard ["normal", "master", "replica", "slave", "pubsub"].contains(t) else {
                    return c.reply.writeRESPError(bytes: ReplyError.quoting("ERR Unknown client type '", a[j + 1], "'"))
                }
                type = t
            } else if a.matches(j, "skipme") {
                if a.matches(j + 1, "yes") {
                    skipMe = true
                } else if a.matches(j + 1, "no") {
                    skipMe = false
                } else {
                    return c.error(ReplyError.syntax)
                }
            } else if a.matches(j, "maxage") {
                guard let v = a.integer(j + 1) else { return c.error(ReplyError.notInteger) }
                maxAge = v
            } else {
                return c.error(ReplyError.syntax)
            }
            j += 2
        }
        var killed = 0
        for s in c.server.clients.all {
            if let id, s.id != id { continue }
            if let address, s.remoteAddress != address { continue }
            if let localAddress, s.localAddress != localAddress { continue }
            if let type, Self.type(of: s) != (type == "slave" ? "replica" : type) { continue }
            if let maxAge, (c.now - s.createdAt) / 1000 < maxAge { continue }
            if let user, s.currentUser.name != user { continue }
            if skipMe && s === c.session { continue }
            kill(s, by: c.session, server: c.server)
            killed += 1
        }
        c.integer(killed)
    }

    /// The client's class for CLIENT LIST and KILL's TYPE: pubsub while it is subscribed, else normal.
    static func type(of session: ClientSession) -> String {
        session.isSubscribed ? "pubsub" : "normal"
    }

    static func kill(_ target: ClientSession, by requester: ClientSession, server: ServerState) {
        if target === requester {
            requester.closeAfterReply = true
        } else {
            // Gone for every other client at once, as in Redis, where CLIENT KILL frees the client: the
            // connection closes on its own event loop a moment later.
            server.clients.remove(target.id)
            target.close()
        }
    }
}
