/// The classes of keyspace notifications a server publishes (`notify-keyspace-events`), with Redis 7.0's
/// letters: `K` and `E` choose the channels (`__keyspace@<db>__:<key>`, `__keyevent@<db>__:<event>`), the
/// others the events. `A` stands for `g$lshzxetd`. Events of the classes of types this server does not store
/// (lists, sets...) never happen, but their letters are accepted and kept, as Redis keeps them.
public struct KeyspaceEventFlags: OptionSet, Sendable, Hashable {
    public let rawValue: Int

    public init(rawValue: Int) { self.rawValue = rawValue }

    /// `K`: events on `__keyspace@<db>__:<key>`, the event's name as the message.
    public static let keyspace = Self(rawValue: 1 << 0)
    /// `E`: events on `__keyevent@<db>__:<event>`, the key as the message.
    public static let keyevent = Self(rawValue: 1 << 1)
    /// `g`: commands on any type (DEL, EXPIRE, RENAME...).
    public static let generic = Self(rawValue: 1 << 2)
    /// `$`: string commands.
    public static let string = Self(rawValue: 1 << 3)
    /// `l`, `s`, `h`, `z`: list, set, hash and sorted set commands.
    public static let list = Self(rawValue: 1 << 4)
    public static let set = Self(rawValue: 1 << 5)
    public static let hash = Self(rawValue: 1 << 6)
    public static let zset = Self(rawValue: 1 << 7)
    /// `x`: keys removed because their time was up.
    public static let expired = Self(rawValue: 1 << 8)
    /// `e`: keys removed to make room under `maxmemory`.
    public static let evicted = Self(rawValue: 1 << 9)
    /// `t`: stream commands.
    public static let stream = Self(rawValue: 1 << 10)
    /// `m`: reads of keys that do not exist.
    public static let keyMiss = Self(rawValue: 1 << 11)
    /// `d`: module key types.
    public static let module = Self(rawValue: 1 << 12)
    /// `n`: keys created.
    public static let newKey = Self(rawValue: 1 << 13)

    /// `A`.
    public static let all: Self = [.generic, .string, .list, .set, .hash, .zset, .expired, .evicted, .stream, .module]

    /// The letters in the order CONFIG GET writes them, after `A` or in its place.
    private static let typeLetters: [(Character, Self)] = [
        ("g", .generic), ("$", .string), ("l", .list), ("s", .set), ("h", .hash), ("z", .zset), ("x", .expired),
        ("e", .evicted), ("t", .stream), ("d", .module), ("n", .newKey),
    ]

    /// Reads the letters of `text`, or nil when one is not a class.
    public init?(parsing text: String) {
        var flags: Self = []
        for letter in text {
            switch letter {
            case "A": flags.formUnion(.all)
            case "K": flags.insert(.keyspace)
            case "E": flags.insert(.keyevent)
            case "m": flags.insert(.keyMiss)
            default:
                guard let (_, flag) = Self.typeLetters.first(where: { $0.0 == letter }) else { return nil }
                flags.insert(flag)
            }
        }
        self = flags
    }

    /// The error for a value with a letter that is no class, as Redis words it.
    public static let invalidMessage = "Invalid event class character. Use 'Ag$lshzxeKEtmdn'."

    /// The flags as CONFIG GET shows them, as Redis 7.0 writes them: `A` when every class it stands for is on
    /// (and then, as in Redis 7.0, without `n`), else each class's letter; then `K`, `E` and `m`.
    public var text: String {
        var out = ""
        if isSuperset(of: .all) {
            out += "A"
        } else {
            for (letter, flag) in Self.typeLetters where contains(flag) { out.append(letter) }
        }
        if contains(.keyspace) { out += "K" }
        if contains(.keyevent) { out += "E" }
        if contains(.keyMiss) { out += "m" }
        return out
    }
}
