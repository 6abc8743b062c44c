/// The flags of Redis 7.0's key specifications, for COMMAND GETKEYSANDFLAGS: per command with keys
/// (`container|subcommand` for a subcommand), one list per key specification, in Redis's order. The key at a
/// command's first key position has the first specification's flags, any other key the second's (or the only
/// one's). `variable_flags` marks the commands whose flags depend on their arguments, which
/// ``flags(of:firstKey:arguments:from:)`` resolves as Redis does.
package enum KeySpecFlags {
    package static let table: [String: [[String]]] = [
        "append": [["RW", "insert"]],
        "bitcount": [["RO", "access"]],
        "bitfield": [["RW", "access", "update", "variable_flags"]],
        "bitfield_ro": [["RO", "access"]],
        "bitop": [["OW", "update"], ["RO", "access"]],
        "bitpos": [["RO", "access"]],
        "copy": [["RO", "access"], ["OW", "update"]],
        "decr": [["RW", "access", "update"]],
        "decrby": [["RW", "access", "update"]],
        "del": [["RM", "delete"]],
        "dump": [["RO", "access"]],
        "exists": [["RO"]],
        "expire": [["RW", "update"]],
        "expireat": [["RW", "update"]],
        "expiretime": [["RO", "access"]],
        "get": [["RO", "access"]],
        "getbit": [["RO", "access"]],
        "getdel": [["RW", "access", "delete"]],
        "getex": [["RW", "access", "update"]],
        "getrange": [["RO", "access"]],
        "getset": [["RW", "access", "update"]],
        "incr": [["RW", "access", "update"]],
        "incrby": [["RW", "access", "update"]],
        "incrbyfloat": [["RW", "access", "update"]],
        "lcs": [["RO", "access"]],
        "memory|usage": [["RO"]],
        "mget": [["RO", "access"]],
        // Redis finds MIGRATE's keys with its own procedure, which gives every key the first flags.
        "migrate": [["RW", "access", "delete"]],
        "move": [["RW", "access", "update"]],
        "mset": [["OW", "update"]],
        "msetnx": [["OW", "insert"]],
        "object|encoding": [["RO"]],
        "object|freq": [["RO"]],
        "object|idletime": [["RO"]],
        "object|refcount": [["RO"]],
        "persist": [["RW", "update"]],
        "pexpire": [["RW", "update"]],
        "pexpireat": [["RW", "update"]],
        "pexpiretime": [["RO", "access"]],
        "psetex": [["OW", "update"]],
        "pttl": [["RO", "access"]],
        "rename": [["RW", "access", "delete"], ["OW", "update"]],
        "renamenx": [["RW", "access", "delete"], ["OW", "insert"]],
        "restore": [["OW", "update"]],
        "set": [["RW", "access", "update", "variable_flags"]],
        "setbit": [["RW", "access", "update"]],
        "setex": [["OW", "update"]],
        "setnx": [["OW", "insert"]],
        "setrange": [["RW", "update"]],
        "strlen": [["RO"]],
        "substr": [["RO", "access"]],
        "touch": [["RO"]],
        "ttl": [["RO", "access"]],
        "type": [["RO"]],
        "unlink": [["RM", "delete"]],
        "watch": [["RO"]],
    ]

    /// The flags of a key of the command `name` (its original name): of its first key or another,
    /// `arguments` being the command's from index `from` (the command name) on.
    package static func flags(of name: String, firstKey: Bool, arguments: Arguments, from: Int) -> [String] {
        guard let specs = table[name], let first = specs.first else { return [] }
        let flags = firstKey || specs.count == 1 ? first : specs[1]
        guard flags.contains("variable_flags") else { return flags }
        // As Redis: SET reads its key only with GET; BITFIELD writes it only with SET or INCRBY.
        switch name {
        case "set":
            let options = (from + 3)..<max(from + 3, arguments.count)  // after the value
            return options.contains { arguments.matches($0, "get") } ? ["RW", "access", "update"] : ["OW", "update"]
        default:
            return bitFieldWrites(arguments, from: from) ? ["RW", "access", "update"] : ["RO", "access"]
        }
    }

    /// Whether BITFIELD's subcommands (after the key) may write, judged as Redis does: walking them in order,
    /// GET skips its two operands and OVERFLOW its one; SET or INCRBY with its three operands writes, and so
    /// does anything else, an incomplete subcommand included (a syntax error counts as a write).
    private static func bitFieldWrites(_ arguments: Arguments, from: Int) -> Bool {
        var index = from + 2
        while index < arguments.count {
            let remaining = arguments.count - index - 1
            if arguments.matches(index, "get"), remaining >= 2 {
                index += 3
            } else if arguments.matches(index, "overflow"), remaining >= 1 {
                index += 2
            } else {
                return true
            }
        }
        return false
    }
}
