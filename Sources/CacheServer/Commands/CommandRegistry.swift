/// The command table: every command this server runs, in Redis's vocabulary.
package enum CommandRegistry {
    private typealias S = StringCommands
    private typealias K = KeyCommands
    private typealias D = DatabaseCommands
    private typealias C = ConnectionCommands
    private typealias V = ServerCommands
    private typealias P = PubSubCommands
    private typealias T = TransactionCommands

    private static let readFast: CommandFlags = [.readonly, .fast]
    private static let writeFast: CommandFlags = [.write, .denyoom, .fast]
    private static let connectionFlags: CommandFlags = [.noscript, .loading, .stale, .fast]

    package static let all: [CommandSpec] = strings + bitmaps + keys + databases + connection + server + pubsub + transactions

    static let strings: [CommandSpec] = [
        CommandSpec("get", arity: 2, flags: readFast, keys: (1, 1, 1), categories: ["read", "string", "fast"],
                    group: "string", since: "1.0.0", summary: "Get the value of a key", handler: S.get),
        CommandSpec("set", arity: -3, flags: [.write, .denyoom], keys: (1, 1, 1), categories: ["write", "string", "slow"],
                    group: "string", since: "1.0.0", summary: "Set the string value of a key", handler: S.set),
        CommandSpec("setnx", arity: 3, flags: writeFast, keys: (1, 1, 1), categories: ["write", "string", "fast"],
                    group: "string", since: "1.0.0", summary: "Set the value of a key, only if the key does not exist",
                    handler: S.setnx),
        CommandSpec("setex", arity: 4, flags: [.write, .denyoom], keys: (1, 1, 1), categories: ["write", "string", "slow"],
                    group: "string", since: "2.0.0", summary: "Set the value and expiration of a key", handler: S.setex),
        CommandSpec("psetex", arity: 4, flags: [.write, .denyoom], keys: (1, 1, 1),
                    categories: ["write", "string", "slow"], group: "string", since: "2.6.0",
                    summary: "Set the value and expiration in milliseconds of a key", handler: S.psetex),
        CommandSpec("getset", arity: 3, flags: writeFast, keys: (1, 1, 1), categories: ["write", "string", "fast"],
                    group: "string", since: "1.0.0", summary: "Set the string value of a key and return its old value",
                    handler: S.getset),
        CommandSpec("getdel", arity: 2, flags: [.write, .fast], keys: (1, 1, 1), categories: ["write", "string", "fast"],
                    group: "string", since: "6.2.0", summary: "Get the value of a key and delete the key",
                    handler: S.getdel),
        CommandSpec("getex", arity: -2, flags: [.write, .fast], keys: (1, 1, 1), categories: ["write", "string", "fast"],
                    group: "string", since: "6.2.0", summary: "Get the value of a key and optionally set its expiration",
                    handler: S.getex),
        CommandSpec("mget", arity: -2, flags: readFast, keys: (1, -1, 1), categories: ["read", "string", "fast"],
                    group: "string", since: "1.0.0", summary: "Get the values of all the given keys",
                    complexity: "O(N) where N is the number of keys to retrieve.", handler: S.mget),
        CommandSpec("mset", arity: -3, flags: [.write, .denyoom], keys: (1, -1, 2), categories: ["write", "string", "slow"],
                    group: "string", since: "1.0.1", summary: "Set multiple keys to multiple values",
                    complexity: "O(N) where N is the number of keys to set.", handler: S.mset),
        CommandSpec("msetnx", arity: -3, flags: [.write, .denyoom], keys: (1, -1, 2),
                    categories: ["write", "string", "slow"], group: "string", since: "1.0.1",
                    summary: "Set multiple keys to multiple values, only if none of the keys exist",
                    complexity: "O(N) where N is the number of keys to set.", handler: S.msetnx),
        CommandSpec("incr", arity: 2, flags: writeFast, keys: (1, 1, 1), categories: ["write", "string", "fast"],
                    group: "string", since: "1.0.0", summary: "Increment the integer value of a key by one",
                    handler: S.incr),
        CommandSpec("decr", arity: 2, flags: writeFast, keys: (1, 1, 1), categories: ["write", "string", "fast"],
                    group: "string", since: "1.0.0", summary: "Decrement the integer value of a key by one",
                    handler: S.decr),
        CommandSpec("incrby", arity: 3, flags: writeFast, keys: (1, 1, 1), categories: ["write", "string", "fast"],
                    group: "string", since: "1.0.0", summary: "Increment the integer value of a key by the given amount",
                    handler: S.incrby),
        CommandSpec("decrby", arity: 3, flags: writeFast, keys: (1, 1, 1), categories: ["write", "string", "fast"],
                    group: "string", since: "1.0.0", summary: "Decrement the integer value of a key by the given number",
                    handler: S.decrby),
        CommandSpec("append", arity: 3, flags: writeFast, keys: (1, 1, 1), categories: ["write", "string", "fast"],
                    group: "string", since: "2.0.0", summary: "Append a value to a key", handler: S.append),
        CommandSpec("strlen", arity: 2, flags: readFast, keys: (1, 1, 1), categories: ["read", "string", "fast"],
                    group: "string", since: "2.2.0", summary: "Get the length of the value stored in a key",
                    handler: S.strlen),
        CommandSpec("getrange", arity: 4, flags: [.readonly], keys: (1, 1, 1), categories: ["read", "string", "slow"],
                    group: "string", since: "2.4.0", summary: "Get a substring of the string stored at a key",
                    complexity: "O(N) where N is the length of the returned string.", handler: S.getrange),
        CommandSpec("substr", arity: 4, flags: [.readonly], keys: (1, 1, 1), categories: ["read", "string", "slow"],
                    group: "string", since: "1.0.0", summary: "Get a substring of the string stored at a key",
                    complexity: "O(N) where N is the length of the returned string. The complexity is ultimately determined by the returned length, but because creating a substring from an existing string is very cheap, it can be considered O(1) for small strings.",
                    handler: S.getrange),
        CommandSpec("lcs", arity: -3, flags: [.readonly], keys: (1, 2, 1), categories: ["read", "string", "slow"],
                    group: "string", since: "7.0.0", summary: "Find longest common substring",
                    complexity: "O(N*M) where N and M are the lengths of s1 and s2, respectively",
                    handler: LCSCommand.lcs),
        CommandSpec("setrange", arity: 4, flags: [.write, .denyoom], keys: (1, 1, 1), categories: ["write", "string", "slow"],
                    group: "string", since: "2.2.0", summary: "Overwrite part of a string at key starting at the specified offset",
                    complexity: "O(1), not counting the time taken to copy the new string in place. Usually, this string is very small so the amortized complexity is O(1). Otherwise, complexity is O(M) with M being the length of the value argument.",
                    handler: S.setrange),
        CommandSpec("incrbyfloat", arity: 3, flags: writeFast, keys: (1, 1, 1), categories: ["write", "string", "fast"],
                    group: "string", since: "2.6.0", summary: "Increment the float value of a key by the given amount",
                    handler: S.incrbyfloat),
    ]

    private typealias I = IntrospectionCommands

    /// A subcommand of OBJECT or MEMORY, with Redis 7.0's flags, keys and categories.
    private static func introspection(
        _ name: String, arity: Int, flags: CommandFlags = [], keys: (Int, Int, Int) = (0, 0, 0), categories: [String],
        group: String, since: String, summary: String, complexity: String = "O(1)"
    ) -> CommandSpec {
        CommandSpec(name, arity: arity, flags: flags, keys: keys, categories: categories, group: group, since: since,
                    summary: summary, complexity: complexity, handler: { _ in })
    }

    private typealias B = BitCommands

    static let bitmaps: [CommandSpec] = [
        CommandSpec("setbit", arity: 4, flags: [.write, .denyoom], keys: (1, 1, 1), categories: ["write", "bitmap", "slow"],
                    group: "bitmap", since: "2.2.0",
                    summary: "Sets or clears the bit at offset in the string value stored at key", handler: B.setbit),
        CommandSpec("getbit", arity: 3, flags: readFast, keys: (1, 1, 1), categories: ["read", "bitmap", "fast"],
                    group: "bitmap", since: "2.2.0",
                    summary: "Returns the bit value at offset in the string value stored at key", handler: B.getbit),
        CommandSpec("bitcount", arity: -2, flags: [.readonly], keys: (1, 1, 1), categories: ["read", "bitmap", "slow"],
                    group: "bitmap", since: "2.6.0", summary: "Count set bits in a string", complexity: "O(N)",
                    handler: B.bitcount),
        CommandSpec("bitpos", arity: -3, flags: [.readonly], keys: (1, 1, 1), categories: ["read", "bitmap", "slow"],
                    group: "bitmap", since: "2.8.7", summary: "Find first bit set or clear in a string",
                    complexity: "O(N)", handler: B.bitpos),
        CommandSpec("bitop", arity: -4, flags: [.write, .denyoom], keys: (2, -1, 1), categories: ["write", "bitmap", "slow"],
                    group: "bitmap", since: "2.6.0", summary: "Perform bitwise operations between strings",
                    complexity: "O(N)", handler: B.bitop),
        CommandSpec("bitfield", arity: -2, flags: [.write, .denyoom], keys: (1, 1, 1),
                    categories: ["write", "bitmap", "slow"], group: "bitmap", since: "3.2.0",
                    summary: "Perform arbitrary bitfield integer operations on strings",
                    complexity: "O(1) for each subcommand specified", handler: BitFieldCommands.bitfield),
        CommandSpec("bitfield_ro", arity: -2, flags: readFast, keys: (1, 1, 1),
                    categories: ["read", "bitmap", "fast"], group: "bitmap", since: "6.0.0",
                    summary: "Perform arbitrary bitfield integer operations on strings. Read-only variant of BITFIELD",
                    complexity: "O(1) for each subcommand specified", handler: BitFieldCommands.bitfieldReadOnly),
    ]

    static let keys: [CommandSpec] = [
        CommandSpec("dump", arity: 2, flags: [.readonly], keys: (1, 1, 1), categories: ["keyspace", "read", "slow"],
                    group: "generic", since: "2.6.0",
                    summary: "Return a serialized version of the value stored at the specified key.",
                    complexity: "O(1) to access the key and additional O(N*M) to serialize it, where N is the number of Redis objects composing the value and M their average size. For small string values the time complexity is thus O(1)+O(1*M) where M is small, so simply O(1).",
                    handler: DumpCommands.dump),
        CommandSpec("restore", arity: -4, flags: [.write, .denyoom], keys: (1, 1, 1),
                    categories: ["keyspace", "write", "slow", "dangerous"], group: "generic", since: "2.6.0",
                    summary: "Create a key using the provided serialized value, previously obtained using DUMP.",
                    complexity: "O(1) to create the new key and additional O(N*M) to reconstruct the serialized value, where N is the number of Redis objects composing the value and M their average size. For small string values the time complexity is thus O(1)+O(1*M) where M is small, so simply O(1). However for sorted set values the complexity is O(N*M*log(N)) because inserting values into sorted sets is O(log(N)).",
                    handler: DumpCommands.restore),
        CommandSpec("object", arity: -2, flags: [], categories: ["slow"], group: "generic", since: "2.2.3",
                    summary: "A container for object introspection commands", complexity: "Depends on subcommand.",
                    subcommands: [
                        introspection("help", arity: 2, flags: [.loading, .stale], categories: ["keyspace", "slow"],
                                      group: "generic", since: "6.2.0",
                                      summary: "Show helpful text about the different subcommands"),
                    ] + [
                        ("freq", "4.0.0", "Get the logarithmic access frequency counter of a Redis object"),
                        ("idletime", "2.2.3", "Get the time since a Redis object was last accessed"),
                        ("encoding", "2.2.3", "Inspect the internal encoding of a Redis object"),
                        ("refcount", "2.2.3", "Get the number of references to the value of the key"),
                    ].map { name, since, summary in
                        introspection(name, arity: 3, flags: [.readonly], keys: (2, 2, 1),
                                      categories: ["keyspace", "read", "slow"], group: "generic", since: since,
                                      summary: summary)
                    }, handler: I.object),
        CommandSpec("copy", arity: -3, flags: [.write, .denyoom], keys: (1, 2, 1), categories: ["keyspace", "write", "slow"],
                    group: "generic", since: "6.2.0", summary: "Copy a key",
                    complexity: "O(N) worst case for collections, where N is the number of nested items. O(1) for string values.",
                    handler: K.copy),
        CommandSpec("del", arity: -2, flags: [.write], keys: (1, -1, 1), categories: ["keyspace", "write", "slow"],
                    group: "generic", since: "1.0.0", summary: "Delete a key",
                    complexity: "O(N) where N is the number of keys that will be removed.", handler: K.del),
        CommandSpec("unlink", arity: -2, flags: [.write, .fast], keys: (1, -1, 1),
                    categories: ["keyspace", "write", "fast"], group: "generic", since: "4.0.0",
                    summary: "Delete a key asynchronously in another thread.", complexity: "O(1) for each key removed.",
                    handler: K.del),
        CommandSpec("touch", arity: -2, flags: readFast, keys: (1, -1, 1), categories: ["keyspace", "read", "fast"],
                    group: "generic", since: "3.2.1",
                    summary: "Alters the last access time of a key(s). Returns the number of existing keys specified.",
                    complexity: "O(N) where N is the number of keys that will be touched.", handler: K.touch),
        CommandSpec("exists", arity: -2, flags: readFast, keys: (1, -1, 1), categories: ["keyspace", "read", "fast"],
                    group: "generic", since: "1.0.0", summary: "Determine if a key exists",
                    complexity: "O(N) where N is the number of keys to check.", handler: K.exists),
        CommandSpec("type", arity: 2, flags: readFast, keys: (1, 1, 1), categories: ["keyspace", "read", "fast"],
                    group: "generic", since: "1.0.0", summary: "Determine the type stored at key", handler: K.type),
        CommandSpec("expire", arity: -3, flags: [.write, .fast], keys: (1, 1, 1),
                    categories: ["keyspace", "write", "fast"], group: "generic", since: "1.0.0",
                    summary: "Set a key's time to live in seconds", handler: K.expire),
        CommandSpec("pexpire", arity: -3, flags: [.write, .fast], keys: (1, 1, 1),
                    categories: ["keyspace", "write", "fast"], group: "generic", since: "2.6.0",
                    summary: "Set a key's time to live in milliseconds", handler: K.pexpire),
        CommandSpec("expireat", arity: -3, flags: [.write, .fast], keys: (1, 1, 1),
                    categories: ["keyspace", "write", "fast"], group: "generic", since: "1.2.0",
                    summary: "Set the expiration for a key as a UNIX timestamp", handler: K.expireat),
        CommandSpec("pexpireat", arity: -3, flags: [.write, .fast], keys: (1, 1, 1),
                    categories: ["keyspace", "write", "fast"], group: "generic", since: "2.6.0",
                    summary: "Set the expiration for a key as a UNIX timestamp specified in milliseconds",
                    handler: K.pexpireat),
        CommandSpec("ttl", arity: 2, flags: readFast, keys: (1, 1, 1), categories: ["keyspace", "read", "fast"],
                    group: "generic", since: "1.0.0", summary: "Get the time to live for a key in seconds", handler: K.ttl),
        CommandSpec("pttl", arity: 2, flags: readFast, keys: (1, 1, 1), categories: ["keyspace", "read", "fast"],
                    group: "generic", since: "2.6.0", summary: "Get the time to live for a key in milliseconds",
                    handler: K.pttl),
        CommandSpec("expiretime", arity: 2, flags: readFast, keys: (1, 1, 1), categories: ["keyspace", "read", "fast"],
                    group: "generic", since: "7.0.0", summary: "Get the expiration Unix timestamp for a key",
                    handler: K.expiretime),
        CommandSpec("pexpiretime", arity: 2, flags: readFast, keys: (1, 1, 1),
                    categories: ["keyspace", "read", "fast"], group: "generic", since: "7.0.0",
                    summary: "Get the expiration Unix timestamp for a key in milliseconds", handler: K.pexpiretime),
        CommandSpec("persist", arity: 2, flags: [.write, .fast], keys: (1, 1, 1),
                    categories: ["keyspace", "write", "fast"], group: "generic", since: "2.2.0",
                    summary: "Remove the expiration from a key", handler: K.persist),
        CommandSpec("rename", arity: 3, flags: [.write], keys: (1, 2, 1), categories: ["keyspace", "write", "slow"],
                    group: "generic", since: "1.0.0", summary: "Rename a key", handler: K.rename),
        CommandSpec("renamenx", arity: 3, flags: [.write, .fast], keys: (1, 2, 1),
                    categories: ["keyspace", "write", "fast"], group: "generic", since: "1.0.0",
                    summary: "Rename a key, only if the new key does not exist", handler: K.renamenx),
        CommandSpec("move", arity: 3, flags: [.write, .fast], keys: (1, 1, 1), categories: ["keyspace", "write", "fast"],
                    group: "generic", since: "1.0.0", summary: "Move a key to another database", handler: K.move),
        CommandSpec("randomkey", arity: 1, flags: [.readonly], categories: ["keyspace", "read", "slow"],
                    group: "generic", since: "1.0.0", summary: "Return a random key from the keyspace",
                    handler: K.randomkey),
        CommandSpec("keys", arity: 2, flags: [.readonly], categories: ["keyspace", "read", "slow", "dangerous"],
                    group: "generic", since: "1.0.0", summary: "Find all keys matching the given pattern",
                    complexity: "O(N) with N being the number of keys in the database", handler: K.keys),
        CommandSpec("scan", arity: -2, flags: [.readonly], categories: ["keyspace", "read", "slow"],
                    group: "generic", since: "2.8.0", summary: "Incrementally iterate the keys space",
                    complexity: "O(1) for every call. O(N) for a complete iteration.", handler: K.scan),
        CommandSpec("wait", arity: 3, flags: [.noscript], categories: ["slow", "connection"], group: "generic",
                    since: "3.0.0",
                    summary: "Wait for the synchronous replication of all the write commands sent in the context of the current connection",
                    handler: BlockingCommands.wait),
    ]

    static let databases: [CommandSpec] = [
        CommandSpec("select", arity: 2, flags: [.loading, .stale, .fast], categories: ["fast", "connection"],
                    group: "connection", since: "1.0.0", summary: "Change the selected database for the current connection",
                    handler: D.select),
        CommandSpec("swapdb", arity: 3, flags: [.write, .fast], categories: ["keyspace", "write", "fast", "dangerous"],
                    group: "server", since: "4.0.0", summary: "Swaps two Redis databases",
                    complexity: "O(N) where N is the count of clients watching or blocking on keys from both databases.",
                    handler: D.swapdb),
        CommandSpec("dbsize", arity: 1, flags: readFast, categories: ["keyspace", "read", "fast"], group: "server",
                    since: "1.0.0", summary: "Return the number of keys in the selected database", handler: D.dbsize),
        CommandSpec("flushdb", arity: -1, flags: [.write], categories: ["keyspace", "write", "slow", "dangerous"],
                    group: "server", since: "1.0.0", summary: "Remove all keys from the current database",
                    complexity: "O(N) where N is the number of keys in the selected database", handler: D.flushdb),
        CommandSpec("flushall", arity: -1, flags: [.write], categories: ["keyspace", "write", "slow", "dangerous"],
                    group: "server", since: "1.0.0", summary: "Remove all keys from all databases",
                    complexity: "O(N) where N is the total number of keys in all databases", handler: D.flushall),
    ]

    static let connection: [CommandSpec] = [
        CommandSpec("ping", arity: -1, flags: [.fast, .subscribedContext], categories: ["fast", "connection"], group: "connection",
                    since: "1.0.0", summary: "Ping the server", handler: C.ping),
        CommandSpec("echo", arity: 2, flags: [.loading, .stale, .fast], categories: ["fast", "connection"], group: "connection",
                    since: "1.0.0", summary: "Echo the given string", handler: C.echo),
        CommandSpec("quit", arity: -1, flags: [.allowBusy, .noscript, .loading, .stale, .fast, .noauth, .subscribedContext, .transactionControl],
                    categories: ["fast", "connection"], group: "connection", since: "1.0.0",
                    summary: "Close the connection", handler: C.quit),
        CommandSpec("reset", arity: 1,
                    flags: [.noscript, .loading, .stale, .fast, .noauth, .allowBusy, .subscribedContext, .transactionControl],
                    categories: ["fast", "connection"], group: "connection", since: "6.2.0",
                    summary: "Reset the connection", handler: C.reset),
        CommandSpec("auth", arity: -2, flags: [.noscript, .loading, .stale, .fast, .noauth, .allowBusy],
                    categories: ["fast", "connection"], group: "connection", since: "1.0.0",
                    summary: "Authenticate to the server", complexity: "O(N) where N is the number of passwords defined for the user",
                    handler: C.auth),
        CommandSpec("hello", arity: -1, flags: [.noscript, .loading, .stale, .fast, .noauth, .allowBusy],
                    categories: ["fast", "connection"], group: "connection", since: "6.0.0",
                    summary: "Handshake with Redis", handler: C.hello),
        CommandSpec("client", arity: -2, flags: [], categories: ["slow"],
                    group: "connection", since: "2.4.0", summary: "A container for client connection commands",
                    complexity: "Depends on subcommand.",
                    subcommands: subcommands("client", [
                        ("id", 2, "Returns the client ID for the current connection"),
                        ("setname", 3, "Set the current connection name"),
                        ("getname", 2, "Get the current connection name"),
                        ("info", 2, "Returns information about the current client connection."),
                        ("list", -2, "Get the list of client connections"),
                        ("kill", -3, "Kill the connection of a client"),
                        ("no-evict", 3, "Set client eviction mode for the current connection"),
                        ("tracking", -3, "Enable or disable server assisted client side caching support"),
                        ("caching", 3, "Instruct the server about tracking or not keys in the next request"),
                        ("getredir", 2, "Get tracking notifications redirection client ID if any"),
                        ("trackinginfo", 2, "Return information about server assisted client side caching for the current connection"),
                        ("help", 2, "Show helpful text about the different subcommands"),
                        ("no-touch", 3, "Controls whether commands sent by the client will alter the LRU/LFU of the keys they access."),
                        ("setinfo", 4, "Set client or connection specific info"),
                        ("reply", 3, "Instruct the server whether to reply to commands"),
                        ("pause", -3, "Stop processing commands from clients for some time"),
                        ("unpause", 2, "Resume processing of clients that were paused"),
                        ("unblock", -3, "Unblock a client blocked in a blocking command from a different connection"),
                    ], administrative: ["list", "kill", "no-evict", "pause", "unpause", "unblock"], unlisted: ["no-touch", "setinfo"]), handler: C.client),
    ]

    private static let subscribeFlags: CommandFlags = [.pubsub, .noscript, .loading, .stale, .subscribedContext]

    static let pubsub: [CommandSpec] = [
        CommandSpec("subscribe", arity: -2, flags: subscribeFlags, categories: ["pubsub", "slow"], group: "pubsub",
                    since: "2.0.0", summary: "Listen for messages published to the given channels",
                    complexity: "O(N) where N is the number of channels to subscribe to.", handler: P.subscribe),
        CommandSpec("unsubscribe", arity: -1, flags: subscribeFlags, categories: ["pubsub", "slow"], group: "pubsub",
                    since: "2.0.0", summary: "Stop listening for messages posted to the given channels",
                    complexity: "O(N) where N is the number of clients already subscribed to a channel.",
                    handler: P.unsubscribe),
        CommandSpec("psubscribe", arity: -2, flags: subscribeFlags, categories: ["pubsub", "slow"], group: "pubsub",
                    since: "2.0.0", summary: "Listen for messages published to channels matching the given patterns",
                    complexity: "O(N) where N is the number of patterns the client is already subscribed to.",
                    handler: P.psubscribe),
        CommandSpec("punsubscribe", arity: -1, flags: subscribeFlags, categories: ["pubsub", "slow"],
                    group: "pubsub", since: "2.0.0",
                    summary: "Stop listening for messages posted to channels matching the given patterns",
                    complexity: "O(N+M) where N is the number of patterns the client is already subscribed and M is the number of total patterns subscribed in the system (by any client).",
                    handler: P.punsubscribe),
        CommandSpec("publish", arity: 3, flags: [.pubsub, .loading, .stale, .fast, .mayReplicate], categories: ["pubsub", "fast"],
                    group: "pubsub", since: "2.0.0", summary: "Post a message to a channel",
                    complexity: "O(N+M) where N is the number of clients subscribed to the receiving channel and M is the total number of subscribed patterns (by any client).",
                    handler: P.publish),
        CommandSpec("pubsub", arity: -2, flags: [], categories: ["slow"], group: "pubsub", since: "2.8.0",
                    summary: "A container for Pub/Sub commands", complexity: "Depends on subcommand.",
                    subcommands: subcommands("pubsub", [
                        ("channels", -2, "List active channels"),
                        ("numsub", -2, "Get the count of subscribers for channels"),
                        ("numpat", 2, "Get the count of unique patterns pattern subscriptions"),
                        ("help", 2, "Show helpful text about the different subcommands"),
                    ]), handler: P.pubsub),
    ]

    static let server: [CommandSpec] = [
        CommandSpec("latency", arity: -2, flags: [], categories: ["slow"], group: "server", since: "2.8.13",
                    summary: "A container for latency diagnostics commands", complexity: "Depends on subcommand.",
                    subcommands: [
                        introspection("help", arity: 2, flags: [.loading, .stale], categories: ["slow"], group: "server",
                                      since: "2.8.13", summary: "Show helpful text about the different subcommands."),
                    ] + [
                        ("doctor", 2, "Return a human readable latency analysis report."),
                        ("reset", -2, "Reset latency data for one or more events."),
                        ("latest", 2, "Return the latest latency samples for all events."),
                        ("history", 3, "Return timestamp-latency samples for the event."),
                        ("histogram", -2, "Return the cumulative distribution of latencies of a subset of commands or all."),
                    ].map { name, arity, summary in
                        introspection(name, arity: arity, flags: [.admin, .noscript, .loading, .stale],
                                      categories: ["admin", "slow", "dangerous"], group: "server", since: "2.8.13",
                                      summary: summary)
                    }, handler: I.latency),
        CommandSpec("slowlog", arity: -2, flags: [], categories: ["slow"], group: "server", since: "2.2.12",
                    summary: "A container for slow log commands", complexity: "Depends on subcommand.",
                    subcommands: [
                        introspection("reset", arity: 2, flags: [.admin, .loading, .stale], categories: ["admin", "slow", "dangerous"],
                                      group: "server", since: "2.2.12", summary: "Clear all entries from the slow log",
                                      complexity: "O(N) where N is the number of entries in the slowlog"),
                        introspection("len", arity: 2, flags: [.admin, .loading, .stale], categories: ["admin", "slow", "dangerous"],
                                      group: "server", since: "2.2.12", summary: "Get the slow log's length"),
                        introspection("help", arity: 2, flags: [.loading, .stale], categories: ["slow"], group: "server",
                                      since: "6.2.0", summary: "Show helpful text about the different subcommands"),
                        introspection("get", arity: -2, flags: [.admin, .loading, .stale], categories: ["admin", "slow", "dangerous"],
                                      group: "server", since: "2.2.12", summary: "Get the slow log's entries",
                                      complexity: "O(N) where N is the number of entries returned"),
                    ], handler: I.slowlog),
        CommandSpec("memory", arity: -2, flags: [], categories: ["slow"], group: "server", since: "4.0.0",
                    summary: "A container for memory diagnostics commands", complexity: "Depends on subcommand.",
                    subcommands: [
                        introspection("purge", arity: 2, categories: ["slow"], group: "server", since: "4.0.0",
                                      summary: "Ask the allocator to release memory",
                                      complexity: "Depends on how much memory is allocated, could be slow"),
                        introspection("malloc-stats", arity: 2, categories: ["slow"], group: "server", since: "4.0.0",
                                      summary: "Show allocator internal stats",
                                      complexity: "Depends on how much memory is allocated, could be slow"),
                        introspection("help", arity: 2, flags: [.loading, .stale], categories: ["slow"], group: "server",
                                      since: "4.0.0", summary: "Show helpful text about the different subcommands"),
                        introspection("usage", arity: -3, flags: [.readonly], keys: (2, 2, 1), categories: ["read", "slow"],
                                      group: "server", since: "4.0.0", summary: "Estimate the memory usage of a key",
                                      complexity: "O(N) where N is the number of samples."),
                        introspection("doctor", arity: 2, categories: ["slow"], group: "server", since: "4.0.0",
                                      summary: "Outputs memory problems report"),
                        introspection("stats", arity: 2, categories: ["slow"], group: "server", since: "4.0.0",
                                      summary: "Show memory usage details"),
                    ], handler: I.memory),
        CommandSpec("config", arity: -2, flags: [], categories: ["slow"], group: "server", since: "2.0.0",
                    summary: "A container for server configuration commands", complexity: "Depends on subcommand.",
                    subcommands: subcommands("config", [
                        ("get", -3, "Get the values of configuration parameters"),
                        ("set", -4, "Set configuration parameters to the given values"),
                        ("resetstat", 2, "Reset the stats returned by INFO"),
                        ("rewrite", 2, "Rewrite the configuration file with the in memory configuration"),
                        ("help", 2, "Show helpful text about the different subcommands"),
                    ], administrative: ["get", "set", "resetstat", "rewrite"]), handler: ConfigCommands.config),
        CommandSpec("info", arity: -1, flags: [.loading, .stale], categories: ["slow", "dangerous"], group: "server",
                    since: "1.0.0", summary: "Get information and statistics about the server", handler: V.info),
        CommandSpec("time", arity: 1, flags: [.loading, .stale, .fast], categories: ["fast"], group: "server",
                    since: "2.6.0", summary: "Return the current server time", handler: V.time),
        CommandSpec("monitor", arity: 1, flags: [.admin, .noscript, .loading, .stale],
                    categories: ["admin", "slow", "dangerous"], group: "server", since: "1.0.0",
                    summary: "Listen for all requests received by the server in real time", handler: V.monitor),
        CommandSpec("shutdown", arity: -1, flags: [.admin, .noscript, .loading, .stale, .noMulti, .allowBusy],
                    categories: ["admin", "slow", "dangerous"], group: "server", since: "1.0.0",
                    summary: "Synchronously save the dataset to disk and then shut down the server",
                    complexity: "O(N) when saving, where N is the total number of keys in all databases when saving data, otherwise O(1)",
                    handler: V.shutdown),
        CommandSpec("save", arity: 1, flags: [.admin, .noscript, .noAsyncLoading, .noMulti], categories: ["admin", "slow", "dangerous"],
                    group: "server", since: "1.0.0", summary: "Synchronously save the dataset to disk",
                    complexity: "O(N) where N is the total number of keys in all databases", handler: V.save),
        CommandSpec("bgsave", arity: -1, flags: [.admin, .noscript, .noAsyncLoading], categories: ["admin", "slow", "dangerous"],
                    group: "server", since: "1.0.0", summary: "Asynchronously save the dataset to disk",
                    complexity: "O(N) where N is the total number of keys in all databases", handler: V.bgsave),
        CommandSpec("lastsave", arity: 1, flags: [.loading, .stale, .fast], categories: ["admin", "fast", "dangerous"],
                    group: "server", since: "1.0.0", summary: "Get the UNIX time stamp of the last successful save to disk",
                    handler: V.lastsave),
        CommandSpec("command", arity: -1, flags: [.loading, .stale], categories: ["slow", "connection"],
                    group: "server", since: "2.8.13", summary: "Get array of Redis command details",
                    complexity: "O(N) where N is the total number of Redis commands",
                    subcommands: subcommands("command", [
                        ("count", 2, "Get total number of Redis commands"),
                        ("docs", -2, "Get array of specific Redis command documentation"),
                        ("getkeys", -4, "Extract keys given a full Redis command"),
                        ("info", -2, "Get array of specific Redis command details, or all when no argument is given"),
                        ("list", -2, "Get an array of Redis command names"),
                        ("help", 2, "Show helpful text about the different subcommands"),
                    ]), handler: V.command),
    ]

    /// Specs for a container command's subcommands (COMMAND INFO/DOCS, and MONITOR's test for `admin`; the
    /// container dispatches). Flags and ACL categories are Redis 7.0's: `administrative` ones are admin (and
    /// so @admin and @dangerous); all but COMMAND's and the HELP subcommands are noscript; CLIENT's and
    /// COMMAND's are @connection, PUBSUB's (but HELP) @pubsub. Categories are listed in Redis's order.
    /// `unlisted` ones run but are not reported by COMMAND (Redis 7.0 does not have them).
    static func subcommands(
        _ parent: String, _ list: [(String, Int, String)], administrative: Set<String> = [], unlisted: Set<String> = []
    ) -> [CommandSpec] {
        list.map { name, arity, summary in
            var flags: CommandFlags = unlisted.contains(name) ? [.unlisted, .loading, .stale] : [.loading, .stale]
            if parent != "command" && name != "help" { flags.insert(.noscript) }
            if administrative.contains(name) { flags.insert(.admin) }
            if parent == "pubsub" && name != "help" { flags = [.pubsub, .loading, .stale] }
            var categories: [String] = []
            if flags.contains(.pubsub) { categories.append("pubsub") }
            if flags.contains(.admin) { categories.append("admin") }
            categories.append("slow")
            if flags.contains(.admin) { categories.append("dangerous") }
            if parent == "client" || parent == "command" { categories.append("connection") }
            let group = parent == "client" ? "connection" : parent == "pubsub" ? "pubsub" : "server"
            return CommandSpec(name, arity: arity, flags: flags, categories: categories, group: group,
                        since: "2.4.0", summary: summary, handler: { _ in })
        }
    }

    static let transactions: [CommandSpec] = [
        CommandSpec("multi", arity: 1, flags: [.noscript, .loading, .stale, .fast, .allowBusy, .transactionControl],
                    categories: ["fast", "transaction"], group: "transactions", since: "1.2.0",
                    summary: "Mark the start of a transaction block", handler: T.multi),
        CommandSpec("exec", arity: 1, flags: [.noscript, .loading, .stale, .skipSlowlog, .transactionControl, .exec],
                    categories: ["slow", "transaction"], group: "transactions", since: "1.2.0",
                    summary: "Execute all commands issued after MULTI",
                    complexity: "Depends on commands in the transaction", handler: T.exec),
        CommandSpec("discard", arity: 1, flags: [.noscript, .loading, .stale, .fast, .allowBusy, .transactionControl],
                    categories: ["fast", "transaction"], group: "transactions", since: "2.0.0",
                    summary: "Discard all commands issued after MULTI",
                    complexity: "O(N), when N is the number of queued commands", handler: T.discard),
        CommandSpec("watch", arity: -2, flags: [.noscript, .loading, .stale, .fast, .allowBusy, .transactionControl],
                    keys: (1, -1, 1), categories: ["fast", "transaction"], group: "transactions", since: "2.2.0",
                    summary: "Watch the given keys to determine execution of the MULTI/EXEC block",
                    complexity: "O(1) for every key.", handler: T.watch),
        CommandSpec("unwatch", arity: 1, flags: [.noscript, .loading, .stale, .fast, .allowBusy],
                    categories: ["fast", "transaction"], group: "transactions", since: "2.2.0",
                    summary: "Forget about all watched keys", handler: T.unwatch),
    ]
}
