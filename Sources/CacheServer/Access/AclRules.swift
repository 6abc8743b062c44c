import CacheCore

/// A set of command permission ids (``CommandTable/permissionId(_:sub:)``).
package struct PermissionBits: Sendable, Equatable {
    private var words: [UInt64]

    init(count: Int) { words = [UInt64](repeating: 0, count: (count + 63) / 64) }

    @inline(__always)
    func contains(_ id: Int) -> Bool { words[id >> 6] & (1 << UInt64(id & 63)) != 0 }

    mutating func set(_ id: Int, _ on: Bool) {
        if on { words[id >> 6] |= 1 << UInt64(id & 63) } else { words[id >> 6] &= ~(1 << UInt64(id & 63)) }
    }

    mutating func setAll(_ on: Bool, count: Int) {
        for id in 0..<count { set(id, on) }
    }

    func isFull(count: Int) -> Bool { (0..<count).allSatisfy(contains) }
}

/// One set of permissions: which commands, keys and channels (Redis 7.0's selector). A user's root
/// permissions are one; rules in parentheses add more, and a command may run if any one of them allows it
/// whole.
package struct AclSelector: Sendable, Equatable {
    package struct KeyPattern: Sendable, Equatable {
        package var access: KeyAccess
        package var pattern: [UInt8]
    }

    package var commands: PermissionBits
    /// `+@all` came after any `-@all`: Redis's "may run commands added later", which decides whether the
    /// description starts from `+@all` or `-@all`.
    package var futureCommands = false
    /// `+cmd|arg`: a command that is not allowed, allowed when its first argument is one of these
    /// (lowercase).
    package var firstArguments: [Int: [[UInt8]]] = [:]
    package var keys: [KeyPattern] = []
    package var allKeys = false
    package var channels: [[UInt8]] = []
    package var allChannels = false

    init(table: CommandTable) { commands = PermissionBits(count: table.permissionIdCount) }
}

/// Why a rule of ACL SETUSER (or a `user` line) was refused, in Redis 7.0's words.
package enum AclRuleError: Error, Equatable {
    case syntax
    case unknownCommand
    case keyAfterAllKeys
    case channelAfterAllChannels
    case noSuchPassword
    case badHash
    case firstArgumentOfSubcommand
    case unmatchedParenthesis(String)

    package var message: String {
        switch self {
        case .syntax: "Syntax error"
        case .unknownCommand: "Unknown command or category name in ACL"
        case .keyAfterAllKeys:
            "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns"
        case .channelAfterAllChannels:
            "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels"
        case .noSuchPassword: "The password you are trying to remove from the user does not exist"
        case .badHash: "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters"
        case .firstArgumentOfSubcommand: "Allowing first-arg of a subcommand is not supported"
        case .unmatchedParenthesis(let start): "Unmatched parenthesis in acl selector starting at '\(start)'."
        }
    }
}

/// Everything ACL knows of one user: whether it is on, its passwords (SHA-256 digests), and its
/// permissions. A value: ACL SETUSER changes a copy and stores it whole, so that a refused rule changes nothing.
package struct AclUserRules: Sendable, Equatable {
    package var enabled = false
    package var noPassword = false
    /// SHA-256 digests in lowercase hex, in the order they were added.
    package var passwords: [String] = []
    /// `sanitize-payload` / `skip-sanitize-payload` (RESTORE's payload checks), when one was given.
    package var sanitizePayload: Bool?
    package var root: AclSelector
    package var selectors: [AclSelector] = []

    /// A new user: off, no password, no permissions, and the channels `acl-pubsub-default` gives.
    package init(table: CommandTable, allChannels: Bool = false) {
        root = AclSelector(table: table)
        root.allChannels = allChannels
    }

    /// The `default` user of a server without ACL rules: on, no password, every command, key and channel.
    package static func unrestricted(table: CommandTable) -> AclUserRules {
        var rules = AclUserRules(table: table)
        rules.enabled = true
        rules.noPassword = true
        rules.root.allKeys = true
        rules.root.allChannels = true
        rules.root.commands.setAll(true, count: table.permissionIdCount)
        rules.root.futureCommands = true
        return rules
    }

    /// Whether the root permissions allow every command on every key and channel: such a user's commands
    /// are not checked.
    package func isUnrestricted(table: CommandTable) -> Bool {
        root.allKeys && root.allChannels && root.commands.isFull(count: table.permissionIdCount)
    }

    /// Whether `password` is one of the user's (any is, with `nopass`). Digests are compared in full.
    package func accepts(password: UnsafeRawBufferPointer) -> Bool {
        if noPassword { return true }
        let digest = SHA256.hexDigest(password)
        var found = false
        for stored in passwords where stored.utf8.elementsEqual(digest.utf8) { found = true }
        return found
    }

    // MARK: rules

    /// Joins ACL SETUSER's arguments so that a selector written over several (`(~a` `+get)`) is one rule.
    package static func mergingSelectors(_ arguments: [[UInt8]]) throws(AclRuleError) -> [[UInt8]] {
        var merged: [[UInt8]] = []
        var open: [UInt8]?
        var opening: [UInt8] = []
        for argument in arguments {
            if var selector = open {
                selector.append(UInt8(ascii: " "))
                selector += argument
                if argument.last == UInt8(ascii: ")") {
                    merged.append(selector)
                    open = nil
                } else {
                    open = selector
                }
            } else if argument.first == UInt8(ascii: "(") && argument.last != UInt8(ascii: ")") {
                open = argument
                opening = argument
            } else {
                merged.append(argument)
            }
        }
        if open != nil { throw .unmatchedParenthesis(String(decoding: opening, as: UTF8.self)) }
        return merged
    }

    /// Applies one rule (Redis 7.0's ACL SETUSER language).
    package mutating func apply(_ rule: [UInt8], table: CommandTable, pubsubDefaultAll: Bool) throws(AclRuleError) {
        guard !rule.isEmpty else { return }
        let text = String(decoding: rule, as: UTF8.self)
        switch text.lowercased() {
        case "on": enabled = true
        case "off": enabled = false
        case "skip-sanitize-payload": sanitizePayload = false
        case "sanitize-payload": sanitizePayload = true
        case "nopass":
            noPassword = true
            passwords.removeAll()
        case "resetpass":
            noPassword = false
            passwords.removeAll()
        case "clearselectors":
            selectors.removeAll()
        case "reset":
            self = AclUserRules(table: table, allChannels: pubsubDefaultAll)
            sanitizePayload = true
        default:
            switch rule.first {
            case UInt8(ascii: ">"):
                let digest = SHA256.hexDigest(rule.dropFirst())
                if !passwords.contains(digest) { passwords.append(digest) }
                noPassword = false
            case UInt8(ascii: "#"):
                let digest = try Self.hash(rule.dropFirst())
                if !passwords.contains(digest) { passwords.append(digest) }
                noPassword = false
            case UInt8(ascii: "<"):
                let digest = SHA256.hexDigest(rule.dropFirst())
                guard let i = passwords.firstIndex(of: digest) else { throw .noSuchPassword }
                passwords.remove(at: i)
            case UInt8(ascii: "!"):
                let digest = try Self.hash(rule.dropFirst())
                guard let i = passwords.firstIndex(of: digest) else { throw .noSuchPassword }
                passwords.remove(at: i)
            case UInt8(ascii: "(") where rule.last == UInt8(ascii: ")"):
                var selector = AclSelector(table: table)
                selector.allChannels = pubsubDefaultAll
                for part in rule.dropFirst().dropLast().split(separator: UInt8(ascii: " ")) {
                    try selector.apply(Array(part), table: table)
                }
                selectors.append(selector)
            default:
                try root.apply(rule, table: table)
            }
        }
    }

    private static func hash(_ text: ArraySlice<UInt8>) throws(AclRuleError) -> String {
        guard text.count == 64,
            text.allSatisfy({ ($0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9")) || ($0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "f")) })
        else { throw .badHash }
        return String(decoding: text, as: UTF8.self)
    }

    // MARK: description

    /// The user as ACL LIST and ACL SAVE write it: `user <name> <rules>`.
    package func line(name: String, table: CommandTable) -> String {
        var parts = ["user", name]
        parts += flagNames
        parts += passwords.map { "#" + $0 }
        parts.append(root.description(table: table))
        for selector in selectors { parts.append("(" + selector.description(table: table) + ")") }
        return parts.joined(separator: " ")
    }

    /// ACL GETUSER's flags, in Redis's order.
    package var flagNames: [String] {
        var names = [enabled ? "on" : "off"]
        if noPassword { names.append("nopass") }
        if sanitizePayload == false { names.append("skip-sanitize-payload") }
        if sanitizePayload == true { names.append("sanitize-payload") }
        return names
    }
}

extension AclSelector {
    /// Applies one key, channel or command rule.
    mutating func apply(_ rule: [UInt8], table: CommandTable) throws(AclRuleError) {
        let text = String(decoding: rule, as: UTF8.self)
        switch text.lowercased() {
        case "allkeys", "~*":
            allKeys = true
            keys = []
        case "resetkeys":
            allKeys = false
            keys = []
        case "allchannels", "&*":
            allChannels = true
            channels = []
        case "resetchannels":
            allChannels = false
            channels = []
        case "allcommands", "+@all":
            commands.setAll(true, count: table.permissionIdCount)
            futureCommands = true
            firstArguments = [:]
        case "nocommands", "-@all":
            commands.setAll(false, count: table.permissionIdCount)
            futureCommands = false
            firstArguments = [:]
        default:
            guard let first = rule.first else { throw .syntax }
            switch first {
            case UInt8(ascii: "~"), UInt8(ascii: "%"):
                try addKeyPattern(rule)
            case UInt8(ascii: "&"):
                if allChannels { throw .channelAfterAllChannels }
                let pattern = Array(rule.dropFirst())
                if pattern.contains(UInt8(ascii: " ")) { throw .syntax }
                if !channels.contains(pattern) { channels.append(pattern) }
            case UInt8(ascii: "+"), UInt8(ascii: "-"):
                try changeCommands(Array(rule.dropFirst()), allow: first == UInt8(ascii: "+"), table: table)
            default:
                throw .syntax
            }
        }
    }

    private mutating func addKeyPattern(_ rule: [UInt8]) throws(AclRuleError) {
        if allKeys { throw .keyAfterAllKeys }
        var access: KeyAccess = [.read, .write]
        var offset = 1
        if rule[0] == UInt8(ascii: "%") {
            // %R~, %W~, %RW~: the letters, each once, then `~`.
            access = []
            var closed = false
            while offset < rule.count {
                let c = rule[offset]
                offset += 1
                if c == UInt8(ascii: "~") {
                    closed = true
                    break
                } else if c | 0x20 == UInt8(ascii: "r") && !access.contains(.read) {
                    access.insert(.read)
                } else if c | 0x20 == UInt8(ascii: "w") && !access.contains(.write) {
                    access.insert(.write)
                } else {
                    throw .syntax
                }
            }
            if !closed || access.isEmpty { throw .syntax }
        }
        if allKeys { throw .keyAfterAllKeys }
        let pattern = Array(rule[offset...])
        if pattern.contains(UInt8(ascii: " ")) { throw .syntax }
        if let i = keys.firstIndex(where: { $0.pattern == pattern }) {
            keys[i].access.formUnion(access)
        } else {
            keys.append(KeyPattern(access: access, pattern: pattern))
        }
    }

    /// `+name`, `-name`, `+@category`, `-@category`, `+container|sub`, `+command|first-argument`.
    private mutating func changeCommands(_ name: [UInt8], allow: Bool, table: CommandTable) throws(AclRuleError) {
        let text = String(decoding: name, as: UTF8.self).lowercased()
        if text.hasPrefix("@") {
            let category = String(text.dropFirst())
            guard AclCommands.categories.contains(category) else { throw .unknownCommand }
            Self.set(&commands, category, allow, table: table)
            for (i, spec) in table.commands.enumerated() where spec.categories.contains(category) { firstArguments[i] = nil }
            return
        }
        guard let bar = text.lastIndex(of: "|") else {
            guard let index = table.commands.firstIndex(where: { $0.name == text }) else { throw .unknownCommand }
            setCommand(index, allow, table: table)
            return
        }
        let name = String(text[..<bar])
        let argument = String(text[text.index(after: bar)...])
        if let parent = table.commands.firstIndex(where: { $0.name == name }) {
            let spec = table.commands[parent]
            if spec.subcommands.isEmpty {
                // A first argument of a command without subcommands: only allowed, never taken away.
                guard allow else { throw .unknownCommand }
                guard !argument.isEmpty else { throw .syntax }
                let bytes = Array(argument.utf8)
                if !(firstArguments[parent] ?? []).contains(bytes) { firstArguments[parent, default: []].append(bytes) }
                return
            }
            guard !argument.isEmpty else { throw .syntax }
            guard let sub = spec.subcommands.firstIndex(where: { $0.name == argument }) else { throw .unknownCommand }
            commands.set(table.subcommandBase[parent] + sub, allow)
            return
        }
        // `container|sub|argument`: a subcommand's first argument.
        let parts = name.split(separator: "|", omittingEmptySubsequences: false)
        guard parts.count == 2, let parent = table.commands.firstIndex(where: { $0.name == parts[0] }),
            table.commands[parent].subcommands.contains(where: { $0.name == parts[1] })
        else { throw .unknownCommand }
        throw allow ? .firstArgumentOfSubcommand : .unknownCommand
    }

    /// `+name` / `-name`: the command, all its subcommands, and no first arguments.
    private mutating func setCommand(_ index: Int, _ allow: Bool, table: CommandTable) {
        commands.set(index, allow)
        firstArguments[index] = nil
        for j in table.commands[index].subcommands.indices { commands.set(table.subcommandBase[index] + j, allow) }
    }

    /// The selector's rules: keys, channels, then commands, as Redis 7.0 describes them.
    package func description(table: CommandTable) -> String {
        var parts: [String] = []
        if allKeys { parts.append("~*") } else { parts += keyPatternNames }
        if allChannels { parts.append("&*") } else { parts.append("resetchannels"); parts += channelNames }
        parts.append(commandRules(table: table))
        return parts.joined(separator: " ")
    }

    /// ACL GETUSER's `keys`: `~pattern`, `%R~pattern` or `%W~pattern` each.
    package var keyPatternNames: [String] {
        keys.map { key in
            let prefix = key.access == [.read, .write] ? "~" : key.access == .read ? "%R~" : "%W~"
            return prefix + String(decoding: key.pattern, as: UTF8.self)
        }
    }

    /// ACL GETUSER's `channels`.
    package var channelNames: [String] { allChannels ? ["&*"] : channels.map { "&" + String(decoding: $0, as: UTF8.self) } }

    /// The command rules that rebuild this selector's commands, chosen as Redis 7.0 chooses them: `+@all` or
    /// `-@all`; then, one at a time, the category that adds (or removes) the most commands while getting the
    /// fewest wrong, counting only commands no category chosen so far covers; then each command and
    /// subcommand that still differs; then the first arguments of commands not allowed whole.
    package func commandRules(table: CommandTable) -> String {
        let additive = !futureCommands
        var rules: [String] = [additive ? "-@all" : "+@all"]
        var fake = AclSelector(table: table)
        if !additive { fake.commands.setAll(true, count: table.permissionIdCount) }
        var remaining = commands
        var applied: Set<String> = []
        while true {
            var best: String?
            var fewestWrong = Int.max
            var mostRight = 0
            for category in AclCommands.categories where !applied.contains(category) {
                let (on, off) = Self.count(remaining, category, table: table)
                let (right, wrong) = additive ? (on, off) : (off, on)
                if right > wrong && (wrong < fewestWrong || (wrong == fewestWrong && right > mostRight)) {
                    best = category
                    fewestWrong = wrong
                    mostRight = right
                }
            }
            guard let category = best else { break }
            Self.set(&fake.commands, category, additive, table: table)
            // Those commands are accounted for: they count against any other category that covers them.
            Self.set(&remaining, category, !additive, table: table)
            rules.append((additive ? "+@" : "-@") + category)
            applied.insert(category)
        }
        for (i, spec) in table.commands.enumerated() {
            let allowed = commands.contains(i)
            if allowed != fake.commands.contains(i) {
                rules.append((allowed ? "+" : "-") + spec.name)
                fake.commands.set(i, allowed)
                for j in spec.subcommands.indices { fake.commands.set(table.subcommandBase[i] + j, allowed) }
            }
            for (j, sub) in spec.subcommands.enumerated() {
                let id = table.subcommandBase[i] + j
                if commands.contains(id) != fake.commands.contains(id) {
                    rules.append((commands.contains(id) ? "+" : "-") + spec.name + "|" + sub.name)
                    fake.commands.set(id, commands.contains(id))
                }
            }
            if !allowed {
                for argument in firstArguments[i] ?? [] {
                    rules.append("+" + spec.name + "|" + String(decoding: argument, as: UTF8.self))
                }
            }
        }
        return rules.joined(separator: " ")
    }

    /// How many of `category`'s commands and subcommands `bits` allows and refuses, among those COMMAND
    /// lists (Redis 7.0's).
    private static func count(_ bits: PermissionBits, _ category: String, table: CommandTable) -> (on: Int, off: Int) {
        var on = 0
        var off = 0
        for (i, spec) in table.commands.enumerated() where !spec.flags.contains(.unlisted) {
            if spec.categories.contains(category) { if bits.contains(i) { on += 1 } else { off += 1 } }
            for (j, sub) in spec.subcommands.enumerated()
            where sub.categories.contains(category) && !sub.flags.contains(.unlisted) {
                if bits.contains(table.subcommandBase[i] + j) { on += 1 } else { off += 1 }
            }
        }
        return (on, off)
    }

    /// Allows or refuses every command and subcommand of `category`.
    static func set(_ bits: inout PermissionBits, _ category: String, _ allow: Bool, table: CommandTable) {
        for (i, spec) in table.commands.enumerated() {
            if spec.categories.contains(category) { bits.set(i, allow) }
            for (j, sub) in spec.subcommands.enumerated() where sub.categories.contains(category) {
                bits.set(table.subcommandBase[i] + j, allow)
            }
        }
    }
}
