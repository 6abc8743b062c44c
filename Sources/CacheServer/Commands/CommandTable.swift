import NIOCore
import RESP

/// How a command behaves, in Redis's vocabulary (COMMAND INFO flags).
package struct CommandFlags: OptionSet, Sendable {
    package let rawValue: UInt32
    package init(rawValue: UInt32) { self.rawValue = rawValue }

    package static let write = CommandFlags(rawValue: 1 << 0)
    package static let readonly = CommandFlags(rawValue: 1 << 1)
    package static let denyoom = CommandFlags(rawValue: 1 << 2)
    package static let admin = CommandFlags(rawValue: 1 << 3)
    package static let pubsub = CommandFlags(rawValue: 1 << 4)
    package static let noscript = CommandFlags(rawValue: 1 << 5)
    package static let loading = CommandFlags(rawValue: 1 << 6)
    package static let stale = CommandFlags(rawValue: 1 << 7)
    package static let fast = CommandFlags(rawValue: 1 << 8)
    package static let noauth = CommandFlags(rawValue: 1 << 9)
    package static let allowBusy = CommandFlags(rawValue: 1 << 10)
    package static let noAsyncLoading = CommandFlags(rawValue: 1 << 11)
    package static let noMulti = CommandFlags(rawValue: 1 << 12)
    /// Redis's `may_replicate` (PUBLISH): COMMAND INFO does not list it, as Redis does not.
    package static let mayReplicate = CommandFlags(rawValue: 1 << 13)
    package static let skipSlowlog = CommandFlags(rawValue: 1 << 14)
    /// Allowed in RESP2's subscribed context ((P)SUBSCRIBE, (P)UNSUBSCRIBE, PING, QUIT, RESET). Not a Redis
    /// flag: COMMAND INFO does not list it.
    package static let subscribedContext = CommandFlags(rawValue: 1 << 16)
    /// A container of subcommands (CLIENT, CONFIG, COMMAND, PUBSUB). Not a Redis flag: set by the table.
    package static let container = CommandFlags(rawValue: 1 << 17)
    /// A subcommand that runs but that COMMAND does not report, because Redis 7.0 does not have it (CLIENT
    /// SETINFO, CLIENT NO-TOUCH). Not a Redis flag.
    package static let unlisted = CommandFlags(rawValue: 1 << 18)
    /// Runs at once inside MULTI instead of being queued (MULTI, EXEC, DISCARD, WATCH, QUIT). Not a Redis
    /// flag: COMMAND INFO does not list it.
    package static let transactionControl = CommandFlags(rawValue: 1 << 19)
    /// EXEC: refused, it ends the transaction with EXECABORT, naming the reason. Not a Redis flag.
    package static let exec = CommandFlags(rawValue: 1 << 20)
    /// The keys are found by reading the arguments, not only at the table's positions (MIGRATE's KEYS).
    package static let movableKeys = CommandFlags(rawValue: 1 << 21)
    /// Refused as writes are while background saves fail (PING, so that health checks notice). Not a Redis
    /// flag.
    package static let refusedLikeWrites = CommandFlags(rawValue: 1 << 22)
    /// Leaves a CLIENT CACHING given before it in force for the command after it (CLIENT and its
    /// subcommands, as in Redis). Not a Redis flag.
    package static let keepsCaching = CommandFlags(rawValue: 1 << 23)

    static let names: [(CommandFlags, String)] = [
        (.write, "write"), (.readonly, "readonly"), (.denyoom, "denyoom"), (.admin, "admin"),
        (.pubsub, "pubsub"), (.noscript, "noscript"), (.loading, "loading"), (.stale, "stale"),
        (.skipSlowlog, "skip_slowlog"), (.fast, "fast"), (.noauth, "no_auth"), (.noAsyncLoading, "no_async_loading"), (.noMulti, "no_multi"),
        (.movableKeys, "movablekeys"), (.allowBusy, "allow_busy"),
    ]

    /// The flag names COMMAND INFO lists.
    package var names: [String] { Self.names.filter { contains($0.0) }.map(\.1) }
}

/// What a command does with a key, as Redis 7.0's key specifications tell ACL key permissions: `read` when
/// it reads the value (Redis's ACCESS), `write` when it inserts, updates or deletes it. A command that only
/// looks at a key's existence, type or metadata (EXISTS, TYPE, OBJECT) needs neither: any key pattern that
/// matches lets it through.
package struct KeyAccess: OptionSet, Sendable, Hashable {
    package let rawValue: UInt8
    package init(rawValue: UInt8) { self.rawValue = rawValue }

    package static let read = KeyAccess(rawValue: 1 << 0)
    package static let write = KeyAccess(rawValue: 1 << 1)
}

/// The access a command needs to its keys: to the first one, and to the others (RENAME reads and deletes
/// its source but only writes its destination; BITOP writes its first key and reads the rest).
package struct KeyAccessRule: Sendable {
    package let first: KeyAccess
    package let rest: KeyAccess

    package init(first: KeyAccess, rest: KeyAccess) {
        self.first = first
        self.rest = rest
    }

    /// The same access to every key.
    package static func all(_ access: KeyAccess) -> KeyAccessRule { KeyAccessRule(first: access, rest: access) }
    /// Existence, type or metadata only (EXISTS, TYPE, TOUCH, OBJECT).
    package static let metadata = all([])
    /// Writes without reading (SETNX, MSET, DEL, EXPIRE).
    package static let writeOnly = all(.write)
}

/// What a command's arguments change of its keys (Redis's movable keys and variable flags).
package enum VariableKeys: Sendable {
    /// The keys are found by reading the arguments (MIGRATE's KEYS): their positions among the `count`
    /// arguments from `offset` (the command's name), or nil when the arguments are malformed.
    case movable(@Sendable (_ arguments: Arguments, _ offset: Int, _ count: Int) -> [Int]?)
    /// The access to the first key depends on the options (SET reads it only with GET).
    case firstKeyAccess(@Sendable (Arguments) -> KeyAccess)
}

/// Which arguments of a command are pub/sub channels, for ACL channel permissions.
package enum ChannelArguments: Sendable {
    /// The first argument (PUBLISH).
    case first
    /// Every argument: channels, or with `patterns` patterns (SUBSCRIBE, PSUBSCRIBE).
    case all(patterns: Bool)
}

/// A command handler: reads `context.arguments`, writes one reply into `context.reply`.
package typealias CommandHandler = (inout CommandContext) -> Void

/// The positions of a command's arguments that are secrets (passwords): MONITOR and SLOWLOG show them as
/// `(redacted)`.
package typealias SecretArguments = @Sendable (Arguments) -> Set<Int>

/// One entry of the command table.
package struct CommandSpec: Sendable {
    /// Redis's name for the command, lowercase: what COMMAND, INFO, CLIENT LIST and error messages report,
    /// whatever `rename-command` made of it (as Redis reports a renamed command by its own name).
    package let name: String
    /// The name the command answers to: ``name``, or the one `rename-command` gave it.
    package internal(set) var lookupName: String
    /// Redis's arity: positive = exactly this many arguments (name included), negative = at least -arity.
    package let arity: Int
    package let flags: CommandFlags
    /// Key positions (COMMAND INFO): first key, last key (-1 = last argument), step.
    package let firstKey: Int
    package let lastKey: Int
    package let keyStep: Int
    /// ACL categories without the leading @.
    package let categories: [String]
    /// What the command does with its keys, for ACL key permissions.
    package let keyAccess: KeyAccessRule
    /// COMMAND DOCS: group, summary, since, complexity.
    package let group: String
    package let summary: String
    package let since: String
    package let complexity: String
    /// What runs the command. A container's runs only when it is given no subcommand (COMMAND alone): each
    /// subcommand has its own.
    package let handler: @Sendable (inout CommandContext) -> Void
    /// Subcommands (CLIENT, CONFIG, COMMAND...): each its own entry, with its handler, arity, flags and ACL
    /// categories. The executor looks the subcommand up and checks its arity before anything runs.
    package let subcommands: [CommandSpec]
    /// The arguments that are secrets, when some may be (AUTH, HELLO, MIGRATE, CONFIG SET).
    package let secrets: SecretArguments?
    /// How the arguments change the keys' positions or access, when they do.
    package let variableKeys: VariableKeys?
    /// The arguments that are channels, for a command that has some.
    package let channels: ChannelArguments?

    package init(
        _ name: String, arity: Int, flags: CommandFlags, keys: (Int, Int, Int) = (0, 0, 0),
        access: KeyAccessRule? = nil, categories: [String], group: String, since: String, summary: String, complexity: String = "O(1)",
        subcommands: [CommandSpec] = [], secrets: SecretArguments? = nil, variableKeys: VariableKeys? = nil,
        channels: ChannelArguments? = nil, handler: (@Sendable (inout CommandContext) -> Void)? = nil
    ) {
        self.name = name
        self.lookupName = name
        self.arity = arity
        self.flags = flags
        (self.firstKey, self.lastKey, self.keyStep) = keys
        self.categories = categories
        // Without a rule given: a write reads and writes its keys (SET, INCR), a read reads them.
        self.keyAccess = access ?? .all(flags.contains(.write) ? [.read, .write] : flags.contains(.readonly) ? .read : [])
        self.group = group
        self.summary = summary
        self.since = since
        self.complexity = complexity
        self.subcommands = subcommands
        self.secrets = secrets
        self.variableKeys = variableKeys
        self.channels = channels
        self.handler = handler ?? Self.subcommandNeeded
    }

    /// The handler of a container that takes no request without a subcommand (its arity asks for one, so the
    /// executor refuses such a request before it would run): the arity error, should it run anyway.
    private static func subcommandNeeded(_ c: inout CommandContext) {
        c.wrongArity()
    }

    /// Whether `count` arguments (the name included) satisfy the arity.
    @inline(__always)
    package func acceptsArgumentCount(_ count: Int) -> Bool {
        arity >= 0 ? count == arity : count >= -arity
    }

    /// The positions of the keys in `arguments` and the access each needs: the table's positions (first key,
    /// last key, step), or those the arguments tell (``variableKeys``). What ACL key permissions check and
    /// client tracking remembers.
    package func keyPositions(in arguments: Arguments) -> [(position: Int, access: KeyAccess)] {
        guard firstKey > 0 && firstKey < arguments.count else { return [] }
        var positions: [(Int, KeyAccess)] = []
        var first = keyAccess.first
        switch variableKeys {
        case .movable(let find)?:
            return (find(arguments, 0, arguments.count) ?? []).map { ($0, keyAccess.first) }
        case .firstKeyAccess(let access)?:
            first = access(arguments)
        case nil:
            break
        }
        let last = lastKey < 0 ? arguments.count + lastKey : min(lastKey, arguments.count - 1)
        for i in stride(from: firstKey, through: last, by: max(1, keyStep)) {
            positions.append((i, i == firstKey ? first : keyAccess.rest))
        }
        return positions
    }

    /// The subcommands COMMAND reports (all but the ``CommandFlags/unlisted`` ones).
    package var listedSubcommands: [CommandSpec] { subcommands.filter { !$0.flags.contains(.unlisted) } }

    /// The index in ``subcommands`` of the subcommand a request names (in any case), if there is one.
    package func subcommandIndex(named name: UnsafeRawBufferPointer) -> Int? {
        subcommands.firstIndex { CommandTable.equalsLowercased(name, $0.name) }
    }

    /// The positions of the secrets among `arguments` (none for most commands).
    package func secretPositions(in arguments: Arguments) -> Set<Int> {
        secrets?(arguments) ?? []
    }
}

extension Array where Element == CommandSpec {
    /// The table after `rename-command` lines: renamed commands answer to their new name, and commands
    /// renamed to "" are gone.
    package func renamed(_ renames: [ServerConfiguration.RenamedCommand]) -> [CommandSpec] {
        var specs = self
        for rename in renames {
            guard let index = specs.firstIndex(where: { $0.lookupName == rename.name }) else { continue }
            if rename.newName.isEmpty {
                specs.remove(at: index)
            } else {
                specs[index].lookupName = rename.newName
            }
        }
        return specs
    }
}

/// The commands this server knows, looked up by name without allocating.
package struct CommandTable: Sendable {
    package let commands: [CommandSpec]

    /// What running a command needs, apart from the rest of its spec: copying a whole ``CommandSpec`` for
    /// every command would retain and release each of its strings and arrays.
    package struct Dispatch: Sendable {
        package let arity: Int
        package let flags: CommandFlags
        package let handler: @Sendable (inout CommandContext) -> Void

        /// Whether `count` arguments (the name included) satisfy the arity.
        @inline(__always)
        package func acceptsArgumentCount(_ count: Int) -> Bool {
            arity >= 0 ? count == arity : count >= -arity
        }
    }

    /// The dispatch entry of each command, by the index ``lookup(_:)`` returns, then of each subcommand, by
    /// its ``permissionId(_:sub:)``.
    package let dispatch: [Dispatch]
    /// The container and subcommand of each subcommand's id, from `commands.count` on.
    private let subcommandOwners: [(command: Int, sub: Int)]
    private let buckets: [Int32]  // open addressing over name hashes; -1 = empty
    private let bucketMask: Int
    /// ACL's numbering of commands and subcommands, for the bit sets of users' permissions: command `i` is
    /// `i`, and the subcommands of command `i` are `subcommandBase[i]` on.
    package let subcommandBase: [Int]
    /// How many ids ``subcommandBase`` and the commands use.
    package let permissionIdCount: Int

    package init(_ commands: [CommandSpec]) {
        self.commands = commands
        var next = commands.count
        self.subcommandBase = commands.map { spec in
            defer { next += spec.subcommands.count }
            return next
        }
        self.permissionIdCount = next
        self.dispatch =
            commands.map {
                Dispatch(arity: $0.arity, flags: $0.subcommands.isEmpty ? $0.flags : $0.flags.union(.container), handler: $0.handler)
            }
            + commands.flatMap { $0.subcommands.map { Dispatch(arity: $0.arity, flags: $0.flags, handler: $0.handler) } }
        self.subcommandOwners = commands.indices.flatMap { i in commands[i].subcommands.indices.map { (i, $0) } }
        var size = 16
        while size < commands.count * 4 { size <<= 1 }
        var buckets = [Int32](repeating: -1, count: size)
        for (i, spec) in commands.enumerated() {
            var b = Int(truncatingIfNeeded: Self.hashLowercased(Array(spec.lookupName.utf8))) & (size - 1)
            while buckets[b] >= 0 { b = (b + 1) & (size - 1) }
            buckets[b] = Int32(i)
        }
        self.buckets = buckets
        self.bucketMask = size - 1
    }

    /// FNV-1a of the ASCII-lowercased bytes.
    @inline(__always)
    static func hashLowercased<C: Collection<UInt8>>(_ bytes: C) -> UInt64 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for var c in bytes {
            if c >= UInt8(ascii: "A") && c <= UInt8(ascii: "Z") { c |= 0x20 }
            h = (h ^ UInt64(c)) &* 0x0000_0100_0000_01b3
        }
        return h
    }

    /// The index of the command named `name` (any case), or nil.
    @inline(__always)
    package func lookup(_ name: UnsafeRawBufferPointer) -> Int? {
        guard name.count <= 32 else { return nil }
        var b = Int(truncatingIfNeeded: Self.hashLowercased(name)) & bucketMask
        while true {
            let i = Int(buckets[b])
            if i < 0 { return nil }
            if Self.equalsLowercased(name, commands[i].lookupName) { return i }
            b = (b + 1) & bucketMask
        }
    }

    @inline(__always)
    static func equalsLowercased(_ bytes: UnsafeRawBufferPointer, _ name: String) -> Bool {
        var utf8 = name.utf8.makeIterator()
        for var c in bytes {
            if c >= UInt8(ascii: "A") && c <= UInt8(ascii: "Z") { c |= 0x20 }
            guard let n = utf8.next(), n == c else { return false }
        }
        return utf8.next() == nil
    }

    /// The permission id of command `index`, or of its subcommand `sub`.
    @inline(__always)
    package func permissionId(_ index: Int, sub: Int?) -> Int {
        sub.map { subcommandBase[index] + $0 } ?? index
    }

    /// The command and subcommand whose ``permissionId(_:sub:)`` (and ``dispatch`` entry) is `id`.
    @inline(__always)
    package func owner(of id: Int) -> (command: Int, sub: Int?) {
        id < commands.count ? (id, nil) : subcommandOwners[id - commands.count]
    }

    /// The spec of the command or subcommand `id`.
    package func spec(_ id: Int) -> CommandSpec {
        let (command, sub) = owner(of: id)
        return sub.map { commands[command].subcommands[$0] } ?? commands[command]
    }

    /// The full name of the command or subcommand `id`, as Redis's errors give it: `get`, `client|kill`.
    package func fullName(_ id: Int) -> String {
        let (command, sub) = owner(of: id)
        return sub.map { commands[command].name + "|" + commands[command].subcommands[$0].name } ?? commands[command].name
    }

    /// The keys among `arguments` of the command or subcommand `id`, and the access each needs
    /// (``CommandSpec/keyPositions(in:)``).
    package func keyPositions(_ id: Int, in arguments: Arguments) -> [(position: Int, access: KeyAccess)] {
        let (command, sub) = owner(of: id)
        if let sub { return commands[command].subcommands[sub].keyPositions(in: arguments) }
        return commands[command].keyPositions(in: arguments)
    }

    /// The positions of the secrets among `arguments` of the command or subcommand `id`.
    package func secretPositions(_ id: Int, in arguments: Arguments) -> Set<Int> {
        let (command, sub) = owner(of: id)
        if let sub { return commands[command].subcommands[sub].secretPositions(in: arguments) }
        return commands[command].secretPositions(in: arguments)
    }

    /// The spec named `name` (lowercase), or nil.
    package func spec(named name: String) -> CommandSpec? {
        commands.first { $0.name == name }
    }
}
