import CacheCore
import Foundation
import NIOCore
import RESP

/// ACL: users with passwords and permissions on commands, keys and channels, in Redis 7.0's rule language
/// (see ``AclUserRules``), their log of refusals, and the ACL file.
enum AclCommands {
    /// Redis 7.0's ACL categories, in its order.
    static let categories = [
        "keyspace", "read", "write", "set", "sortedset", "list", "hash", "string", "bitmap", "hyperloglog", "geo",
        "stream", "pubsub", "admin", "fast", "slow", "blocking", "dangerous", "connection", "transaction", "scripting",
    ]

    static func whoami(_ c: inout CommandContext) {
        c.bulk(c.session.user.name)
    }

    static func users(_ c: inout CommandContext) {
        let users = c.server.users.all
        c.arrayHeader(users.count)
        for user in users { c.bulk(user.name) }
    }

    /// ACL LIST: each user's rules, as a `user` line of the ACL file.
    static func list(_ c: inout CommandContext) {
        let users = c.server.users.all
        c.arrayHeader(users.count)
        for user in users { c.bulk(user.rules.line(name: user.name, table: c.server.commands)) }
    }

    static func load(_ c: inout CommandContext) { file(&c, load: true) }
    static func save(_ c: inout CommandContext) { file(&c, load: false) }

    /// For ACL CAT, GENPASS and LOG, whose arity lets more arguments through than they take: whether the
    /// arguments are within what they take, else Redis's error.
    private static func atMostOneArgument(_ c: inout CommandContext) -> Bool {
        guard c.arguments.count > 3 else { return true }
        c.reply.writeRESPError(bytes: ReplyError.subcommandSyntax(c.arguments[1], of: c.arguments.string(0)))
        return false
    }

    static func help(_ c: inout CommandContext) {
        ConnectionCommands.help(&c, [
            "CAT [<category>]", "    List all commands that belong to <category>, or all command categories",
            "    when no category is specified.",
            "DELUSER <username> [<username> ...]", "    Delete a list of users.",
            "DRYRUN <username> <command> [<arg> ...]",
            "    Returns whether the user can execute the given command without executing the command.",
            "GETUSER <username>", "    Get the user's details.",
            "GENPASS [<bits>]", "    Generate a secure 256-bit user password. The optional `bits` argument can",
            "    be used to specify a different size.",
            "LIST", "    Show users details in config file format.",
            "LOAD", "    Reload users from the ACL file.",
            "LOG [<count> | RESET]", "    Show the ACL log entries.",
            "SAVE", "    Save the current config to the ACL file.",
            "SETUSER <username> <attribute> [<attribute> ...]",
            "    Create or modify a user with the specified attributes.",
            "USERS", "    List all the registered usernames.",
            "WHOAMI", "    Return the current connection username.",
        ])
    }

    /// ACL SETUSER name rule ...: all the rules or none.
    static func setUser(_ c: inout CommandContext) {
        let a = c.arguments
        let name = a.string(2)
        if a[2].contains(UInt8(ascii: " ")) || a[2].contains(0) {
            return c.error("ERR Usernames can't contain spaces or null characters")
        }
        let rules = (3..<a.count).map { a.bytes($0) }
        do throws(AclUsers.RefusedRule) {
            try c.server.users.setUser(name, rules: rules, pubsubDefaultAll: c.server.config.aclPubsubDefault == .allchannels)
            if let user = c.server.users.user(named: name) { closeSubscribersNoLongerAllowed(user, server: c.server) }
            c.ok()
        } catch {
            if case .unmatchedParenthesis = error.error { return c.error("ERR \(error.error.message)") }
            var message = ByteBuffer()
            message.writeString("ERR Error in ACL SETUSER modifier '")
            message.writeBytes(error.rule)
            message.writeString("': \(error.error.message)")
            c.reply.writeRESPError(bytes: message.readableBytesView)
        }
    }

    /// ACL DELUSER name ...: the number of users removed; their connections are closed.
    static func deleteUsers(_ c: inout CommandContext) {
        let a = c.arguments
        let names = (2..<a.count).map { a.string($0) }
        if names.contains("default") { return c.error("ERR The 'default' user cannot be removed") }
        let removed = c.server.users.delete(names)
        disconnect(removed, c)
        c.integer(removed.count)
    }

    /// Closes the connections authenticated as any of `users` (deleted, or replaced by ACL LOAD).
    static func disconnect(_ users: [AclUser], _ c: CommandContext) {
        guard !users.isEmpty else { return }
        for session in c.server.clients.all where users.contains(where: { $0 === session.currentUser }) {
            ConnectionCommands.kill(session, by: c.session, server: c.server)
        }
    }

    /// As Redis: the connections of `user` subscribed to a channel or pattern its rules no longer allow are
    /// closed (each checked on its own event loop, a moment later).
    static func closeSubscribersNoLongerAllowed(_ user: AclUser, server: ServerState) {
        for session in server.clients.all where session.isSubscribed && session.currentUser === user {
            session.onEventLoop {
                guard session.user === user else { return }
                let rules = user.rules
                guard session.channels.contains(where: { !rules.allowsChannel($0, pattern: false) })
                    || session.patterns.contains(where: { !rules.allowsChannel($0, pattern: true) })
                else { return }
                server.clients.remove(session.id)
                session.close()
            }
        }
    }

    /// ACL LOAD and ACL SAVE, with `aclfile`.
    static func file(_ c: inout CommandContext, load: Bool) {
        let path = c.server.config.aclFile
        guard !path.isEmpty else {
            return c.error(
                "ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration."
            )
        }
        let users = c.server.users
        if load {
            let contents: String
            switch AclUsers.readFile(path) {
            case .success(let text): contents = text
            case .failure(let reason): return c.error("ERR Error loading ACLs, opening file '\(path)': \(reason)")
            }
            do throws(AclUsers.LoadError) {
                let parsed = try users.parse(
                    file: contents, path: path, pubsubDefaultAll: c.server.config.aclPubsubDefault == .allchannels)
                disconnect(users.replaceAll(with: parsed), c)
                closeSubscribersNoLongerAllowed(users.defaultUser, server: c.server)
                c.ok()
            } catch {
                c.error("ERR \(error.description)")
            }
        } else {
            do throws(AclUsers.LoadError) {
                try users.save(to: path)
                c.ok()
            } catch {
                c.server.logger.warning("\(error.description)")
                c.error("ERR There was an error trying to save the ACLs. Please check the server logs for more information")
            }
        }
    }

    /// The refusal of command `index` with `arguments` for a connection whose user's rules restrict it, logged
    /// for ACL LOG; nil when the user may run it.
    /// `queued`: a command EXEC runs, checked again in case the rules changed since it was queued.
    static func refusal(
        _ index: Int, _ arguments: Arguments, session: ClientSession, server: ServerState, now: Int64, queued: Bool = false
    ) -> String? {
        let spec = server.commands.commands[index]
        let sub = spec.subcommands.isEmpty || arguments.count < 2 ? nil : spec.subcommandIndex(named: arguments[1])
        guard let denial = session.user.rules.check(index, sub: sub, arguments, table: server.commands) else { return nil }
        let fullName = sub.map { spec.name + "|" + spec.subcommands[$0].name } ?? spec.name
        log(denial.reason, object: denial.object(command: fullName, arguments), username: session.user.name,
            session: session, server: server, now: now)
        if queued {
            return "NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: \(denial.execReason)"
        }
        return denial.error(command: fullName)
    }

    /// ACL GETUSER: the user's flags, password digests and permissions; null for a user that does not exist.
    static func getUser(_ c: inout CommandContext) {
        guard let user = c.server.users.user(named: c.arguments.string(2)) else { return c.null() }
        let rules = user.rules
        let table = c.server.commands
        let v = c.version
        c.reply.writeRESPMapHeader(6, v)
        c.bulk("flags")
        let flags = rules.flagNames
        c.reply.writeRESPSetHeader(flags.count, v)
        for flag in flags { c.bulk(flag) }
        c.bulk("passwords")
        c.arrayHeader(rules.passwords.count)
        for password in rules.passwords { c.bulk(password) }
        writePermissions(&c, rules.root, table: table)
        c.bulk("selectors")
        c.arrayHeader(rules.selectors.count)
        for selector in rules.selectors {
            c.reply.writeRESPMapHeader(3, v)
            writePermissions(&c, selector, table: table)
        }
    }

    private static func writePermissions(_ c: inout CommandContext, _ selector: AclSelector, table: CommandTable) {
        c.bulk("commands")
        c.bulk(selector.commandRules(table: table))
        c.bulk("keys")
        c.bulk(selector.allKeys ? "~*" : selector.keyPatternNames.joined(separator: " "))
        c.bulk("channels")
        c.bulk(selector.channelNames.joined(separator: " "))
    }

    /// ACL CAT: the categories, or this server's commands (and subcommands, as `container|sub`) in one.
    static func cat(_ c: inout CommandContext) {
        guard atMostOneArgument(&c) else { return }
        guard c.arguments.count == 3 else {
            c.arrayHeader(categories.count)
            for category in categories { c.bulk(category) }
            return
        }
        let category = c.arguments.string(2).lowercased()
        guard categories.contains(category) else {
            return c.reply.writeRESPError(bytes: ReplyError.quoting("ERR Unknown category '", c.arguments[2], limit: 128, "'"))
        }
        var names: [String] = []
        for spec in c.server.commands.commands where !spec.flags.contains(.unlisted) {
            if spec.categories.contains(category) { names.append(spec.name) }
            for sub in spec.listedSubcommands where sub.categories.contains(category) {
                names.append(spec.name + "|" + sub.name)
            }
        }
        c.arrayHeader(names.count)
        for name in names { c.bulk(name) }
    }

    /// ACL GENPASS [bits]: random hex digits, four bits each (256 bits by default).
    static func generatePassword(_ c: inout CommandContext) {
        guard atMostOneArgument(&c) else { return }
        var bits = 256
        if c.arguments.count == 3 {
            guard let value = c.integerArgument(2) else { return }
            guard value > 0 && value <= 4096 else {
                return c.error(
                    "ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096"
                )
            }
            bits = value
        }
        let digits = Array("0123456789abcdef".utf8)
        var generator = SystemRandomNumberGenerator()
        let text = (0..<(bits + 3) / 4).map { _ in digits[Int(generator.next() & 0xf)] }
        c.bulk(String(decoding: text, as: UTF8.self))
    }

    /// ACL LOG [count | RESET]: the newest `count` (10 by default) failed authentications, newest first.
    static func log(_ c: inout CommandContext) {
        guard atMostOneArgument(&c) else { return }
        var count = 10
        if c.arguments.count == 3 {
            if c.arguments.matches(2, "reset") {
                c.server.aclLog.reset()
                return c.ok()
            }
            guard let value = c.integerArgument(2) else { return }
            count = value
        }
        let entries = c.server.aclLog.newest(count)
        let v = c.version
        c.arrayHeader(entries.count)
        for entry in entries {
            c.reply.writeRESPMapHeader(7, v)
            c.bulk("count")
            c.integer(entry.count)
            c.bulk("reason")
            c.bulk(entry.reason)
            c.bulk("context")
            c.bulk(entry.context)
            c.bulk("object")
            c.bulk(entry.object)
            c.bulk("username")
            c.bulk(entry.username)
            c.bulk("age-seconds")
            c.reply.writeRESPDouble(formatted: String(format: "%.17g", Double(max(0, c.now - entry.time)) / 1000), v)
            c.bulk("client-info")
            c.bulk(entry.clientInfo)
        }
    }

    /// ACL DRYRUN username command [arg ...]: `OK` when the user may run it, else why not (a bulk string),
    /// after the command's existence and number of arguments are checked.
    static func dryRun(_ c: inout CommandContext) {
        let a = c.arguments
        guard let user = c.server.users.user(named: a.string(2)) else {
            return c.reply.writeRESPError(bytes: ReplyError.quoting("ERR User '", a[2], limit: 128, "' not found"))
        }
        let notFound = ReplyError.quoting("ERR Command '", a[3], limit: 128, "' not found")
        let table = c.server.commands
        guard let index = table.lookup(a[3]) else { return c.reply.writeRESPError(bytes: notFound) }
        let container = table.commands[index]
        var spec = container
        var name = spec.name
        var sub: Int?
        // A container's command is its subcommand, as Redis looks it up.
        if !container.subcommands.isEmpty && a.count > 4 {
            guard let found = container.subcommandIndex(named: a[4]) else { return c.reply.writeRESPError(bytes: notFound) }
            name += "|" + container.subcommands[found].name
            spec = container.subcommands[found]
            sub = found
        }
        guard spec.acceptsArgumentCount(a.count - 3) else { return c.error(ReplyError.wrongArity(name)) }
        let arguments = a.dropping(3)
        switch user.rules.check(index, sub: sub, arguments, table: table) {
        case nil:
            c.ok()
        case .command:
            c.bulk("This user has no permissions to run the '\(name)' command")
        case .key(let position):
            c.bulk("This user has no permissions to access the '\(arguments.string(position))' key")
        case .channel(let position):
            c.bulk("This user has no permissions to access the '\(arguments.string(position))' channel")
        }
    }

    /// Logs a failed authentication of `session` (AUTH or HELLO ... AUTH) for ACL LOG.
    static func recordFailure(_ c: CommandContext, username: UnsafeRawBufferPointer) {
        log("auth", object: c.arguments.string(0), username: String(decoding: username, as: UTF8.self),
            session: c.session, server: c.server, now: c.now)
    }

    /// An ACL LOG entry for `session`: in the `multi` context inside a transaction (queued or run by EXEC),
    /// else `toplevel`, with the client's CLIENT LIST line.
    private static func log(
        _ reason: String, object: String, username: String, session: ClientSession, server: ServerState, now: Int64
    ) {
        server.aclLog.record(
            reason: reason, context: session.inTransaction || session.runningTransaction ? "multi" : "toplevel",
            object: object, username: username,
            clientInfo: ConnectionCommands.describe(session, server: server, now: now), now: now)
    }
}
