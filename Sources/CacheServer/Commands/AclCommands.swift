import CacheCore
import Foundation
import RESP

/// ACL. This server has one user, `default`, whose password is `requirepass` (none when it is empty) and who
/// may run every command, on every key and channel. The ACL subcommands report that user, list the command
/// categories, make passwords, check commands (DRYRUN) and keep Redis's log of failed authentications;
/// those that would create, change or remove users, or use an ACL file, are refused.
enum AclCommands {
    /// Redis 7.0's ACL categories, in its order.
    static let categories = [
        "keyspace", "read", "write", "set", "sortedset", "list", "hash", "string", "bitmap", "hyperloglog", "geo",
        "stream", "pubsub", "admin", "fast", "slow", "blocking", "dangerous", "connection", "transaction", "scripting",
    ]

    static func acl(_ c: inout CommandContext) {
        let a = c.arguments
        let n = a.count
        if a.matches(1, "whoami") && n == 2 {
            c.bulk("default")
        } else if a.matches(1, "users") && n == 2 {
            c.arrayHeader(1)
            c.bulk("default")
        } else if a.matches(1, "list") && n == 2 {
            c.arrayHeader(1)
            c.bulk("user default on \(passwordRule(c.server)) ~* &* +@all")
        } else if a.matches(1, "getuser") && n == 3 {
            getUser(&c)
        } else if (a.matches(1, "cat") || a.matches(1, "genpass") || a.matches(1, "log")) && n > 3 {
            // Their arity lets more arguments through than they take.
            c.reply.writeRESPError(bytes: ReplyError.subcommandSyntax(a[1], of: "acl"))
        } else if a.matches(1, "cat") {
            cat(&c)
        } else if a.matches(1, "genpass") {
            generatePassword(&c)
        } else if a.matches(1, "log") {
            log(&c)
        } else if a.matches(1, "dryrun") && n >= 4 {
            dryRun(&c)
        } else if a.matches(1, "deluser") && n >= 3 {
            for j in 2..<n where a[j].elementsEqual("default".utf8) {
                return c.error("ERR The 'default' user cannot be removed")
            }
            c.integer(0)
        } else if a.matches(1, "setuser") && n >= 3 {
            c.error(
                "ERR ACL SETUSER is not supported: this server has one user, 'default', who may run every command; set its password with requirepass"
            )
        } else if (a.matches(1, "load") || a.matches(1, "save")) && n == 2 {
            c.error(
                "ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration."
            )
        } else if a.matches(1, "help") && n == 2 {
            ConnectionCommands.help(&c, "ACL", [
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
        } else {
            ConnectionCommands.subcommandError(&c)
        }
    }

    /// `nopass`, or `#` and the SHA-256 of the password in hex, as ACL LIST shows the password.
    static func passwordRule(_ server: ServerState) -> String {
        let password = server.config.requirePass
        return password.isEmpty ? "nopass" : "#" + SHA256.hexDigest(password.utf8)
    }

    /// ACL GETUSER: the default user's flags, password digests and permissions; null for any other name.
    static func getUser(_ c: inout CommandContext) {
        guard c.arguments[2].elementsEqual("default".utf8) else { return c.null() }
        let password = c.server.config.requirePass
        let v = c.version
        c.reply.writeRESPMapHeader(6, v)
        c.bulk("flags")
        c.reply.writeRESPSetHeader(password.isEmpty ? 2 : 1, v)
        c.bulk("on")
        if password.isEmpty { c.bulk("nopass") }
        c.bulk("passwords")
        if password.isEmpty {
            c.arrayHeader(0)
        } else {
            c.arrayHeader(1)
            c.bulk(SHA256.hexDigest(password.utf8))
        }
        c.bulk("commands")
        c.bulk("+@all")
        c.bulk("keys")
        c.bulk("~*")
        c.bulk("channels")
        c.bulk("&*")
        c.bulk("selectors")
        c.arrayHeader(0)
    }

    /// ACL CAT: the categories, or this server's commands (and subcommands, as `container|sub`) in one.
    static func cat(_ c: inout CommandContext) {
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
        var count = 10
        if c.arguments.count == 3 {
            if c.arguments.matches(2, "reset") {
                c.server.authFailures.reset()
                return c.ok()
            }
            guard let value = c.integerArgument(2) else { return }
            count = value
        }
        let entries = c.server.authFailures.newest(count)
        let v = c.version
        c.arrayHeader(entries.count)
        for entry in entries {
            c.reply.writeRESPMapHeader(7, v)
            c.bulk("count")
            c.integer(entry.count)
            c.bulk("reason")
            c.bulk("auth")
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

    /// ACL DRYRUN username command [arg ...]: `OK` when the user may run it (the default user may run every
    /// command), after the command's existence and number of arguments are checked.
    static func dryRun(_ c: inout CommandContext) {
        let a = c.arguments
        guard a[2].elementsEqual("default".utf8) else {
            return c.reply.writeRESPError(bytes: ReplyError.quoting("ERR User '", a[2], limit: 128, "' not found"))
        }
        let notFound = ReplyError.quoting("ERR Command '", a[3], limit: 128, "' not found")
        guard let index = c.server.commands.lookup(a[3]) else { return c.reply.writeRESPError(bytes: notFound) }
        var spec = c.server.commands.commands[index]
        var name = spec.name
        // A container's command is its subcommand, as Redis looks it up.
        if !spec.subcommands.isEmpty && a.count > 4 {
            guard let sub = spec.subcommandIndex(named: a[4]) else { return c.reply.writeRESPError(bytes: notFound) }
            name += "|" + spec.subcommands[sub].name
            spec = spec.subcommands[sub]
        }
        guard spec.acceptsArgumentCount(a.count - 3) else { return c.error(ReplyError.wrongArity(name)) }
        c.ok()
    }

    /// Logs a failed authentication of `session` (AUTH or HELLO ... AUTH) for ACL LOG.
    static func recordFailure(_ c: CommandContext, username: UnsafeRawBufferPointer) {
        c.server.authFailures.record(
            context: c.session.inTransaction || c.session.runningTransaction ? "multi" : "toplevel",
            object: c.arguments.string(0),
            username: String(decoding: username, as: UTF8.self),
            clientInfo: ConnectionCommands.describe(c.session, server: c.server, now: c.now),
            now: c.now)
    }
}
