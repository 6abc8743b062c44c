import CacheCore

/// Why ACL refuses a command, with the argument that was refused.
package enum AclDenial: Equatable, Sendable {
    case command
    case key(position: Int)
    case channel(position: Int)

    /// Redis's order among a user's selectors: the refusal reported is the highest, then the latest argument.
    var rank: (Int, Int) {
        switch self {
        case .command: (1, 0)
        case .key(let position): (2, position)
        case .channel(let position): (4, position)
        }
    }

    /// ACL LOG's `reason`.
    package var reason: String {
        switch self {
        case .command: "command"
        case .key: "key"
        case .channel: "channel"
        }
    }

    /// The error a refused command gets, in Redis 7.0's words.
    package func error(command fullName: String) -> String {
        switch self {
        case .command: "NOPERM this user has no permissions to run the '\(fullName)' command"
        case .key: "NOPERM this user has no permissions to access one of the keys used as arguments"
        case .channel: "NOPERM this user has no permissions to access one of the channels used as arguments"
        }
    }

    /// The reason EXEC gives for a queued command that the user may no longer run.
    package var execReason: String {
        switch self {
        case .command: "no permission to execute the command or subcommand"
        case .key: "no permission to touch the specified keys"
        case .channel: "no permission to access one of the channels used as arguments"
        }
    }

    /// ACL LOG's `object`: the command's full name, or the key or channel refused.
    package func object(command fullName: String, _ arguments: Arguments) -> String {
        switch self {
        case .command: fullName
        case .key(let position), .channel(let position): arguments.string(position)
        }
    }
}

extension AclUserRules {
    /// Whether the user may run command `index` (its subcommand `sub`) with `arguments`: nil when one of its
    /// selectors allows the command, its keys and its channels; otherwise the refusal Redis reports.
    package func check(_ index: Int, sub: Int?, _ arguments: Arguments, table: CommandTable) -> AclDenial? {
        var refusal = root.check(index, sub: sub, arguments, table: table)
        guard var worst = refusal else { return nil }
        for selector in selectors {
            refusal = selector.check(index, sub: sub, arguments, table: table)
            guard let denial = refusal else { return nil }
            if denial.rank > worst.rank { worst = denial }
        }
        return worst
    }
}

extension AclUserRules {
    /// Whether one of the user's selectors allows the channel (or, with `pattern`, the pattern subscription).
    package func allowsChannel(_ channel: [UInt8], pattern: Bool) -> Bool {
        channel.withUnsafeBytes { bytes in
            ([root] + selectors).contains { $0.allChannels || $0.allowsChannel(bytes, pattern: pattern) }
        }
    }
}

extension AclSelector {
    func check(_ index: Int, sub: Int?, _ arguments: Arguments, table: CommandTable) -> AclDenial? {
        let container = table.commands[index]
        let spec = sub.map { container.subcommands[$0] } ?? container
        // As Redis: commands that run before authentication (AUTH, HELLO) are never refused.
        if !commands.contains(table.permissionId(index, sub: sub)) && !table.dispatch[index].flags.contains(.noauth) {
            guard sub == nil, arguments.count > 1, let allowed = firstArguments[index],
                allowed.contains(where: { Self.equalsLowercased(arguments[1], $0) })
            else { return .command }
        }
        if !allKeys {
            for (position, access) in spec.keyPositions(in: arguments) where !allowsKey(arguments[position], access) {
                return .key(position: position)
            }
        }
        if !allChannels {
            switch spec.channels {
            case .first?:
                if !allowsChannel(arguments[1], pattern: false) { return .channel(position: 1) }
            case .all(let patterns)?:
                for position in 1..<arguments.count where !allowsChannel(arguments[position], pattern: patterns) {
                    return .channel(position: position)
                }
            case nil:
                break
            }
        }
        return nil
    }

    /// A key is allowed when a pattern with at least the access the command needs matches it.
    private func allowsKey(_ key: UnsafeRawBufferPointer, _ access: KeyAccess) -> Bool {
        keys.contains { pattern in
            pattern.access.isSuperset(of: access)
                && pattern.pattern.withUnsafeBytes { Glob.matches(pattern: $0, subject: key) }
        }
    }

    /// A channel is allowed when a pattern matches it; a pattern subscription only when it is one of the
    /// patterns, as written.
    func allowsChannel(_ channel: UnsafeRawBufferPointer, pattern: Bool) -> Bool {
        channels.contains { allowed in
            pattern
                ? allowed.elementsEqual(channel)
                : allowed.withUnsafeBytes { Glob.matches(pattern: $0, subject: channel) }
        }
    }

    private static func equalsLowercased(_ bytes: UnsafeRawBufferPointer, _ lowercase: [UInt8]) -> Bool {
        guard bytes.count == lowercase.count else { return false }
        for (a, b) in zip(bytes, lowercase) {
            let c = a >= UInt8(ascii: "A") && a <= UInt8(ascii: "Z") ? a | 0x20 : a
            if c != b { return false }
        }
        return true
    }
}
