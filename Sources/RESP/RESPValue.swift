import NIOCore

/// One reply a RESP2 or RESP3 server sent, decoded.
///
/// Textual payloads are `ByteBuffer` slices of the bytes that were received, so decoding a bulk string does
/// not copy it. Two values are equal when they would have come from the same bytes, with two exceptions:
/// any two NaN doubles are equal, and a double's text is not kept (`,1.0` and `,1` decode to equal values).
/// To compare replies byte for byte, cut them with `RESPValue.frameLength(in:limits:)` and compare the bytes.
public enum RESPValue: Sendable {
    /// One key-value pair of a map or an attribute, in the order the server sent it.
    public typealias Pair = (key: RESPValue, value: RESPValue)

    /// A simple string, `+OK\r\n`.
    case simpleString(ByteBuffer)
    /// A simple error, `-ERR message\r\n`; the payload starts with the error code.
    case simpleError(ByteBuffer)
    /// An integer, `:42\r\n`.
    case integer(Int)
    /// A bulk string, `$5\r\nhello\r\n`.
    case bulkString(ByteBuffer)
    /// The RESP2 null bulk string, `$-1\r\n`.
    case nullBulkString
    /// An array, `*2\r\n...`.
    case array([RESPValue])
    /// The RESP2 null array, `*-1\r\n`.
    case nullArray
    /// The RESP3 null, `_\r\n`.
    case null
    /// A RESP3 boolean, `#t\r\n` or `#f\r\n`.
    case boolean(Bool)
    /// A RESP3 double, `,3.14\r\n`; `inf`, `-inf` and `nan` included.
    case double(Double)
    /// A RESP3 big number, `(3492890328409238509324850943850943825024385\r\n`: its digits, with any sign.
    case bigNumber(ByteBuffer)
    /// A RESP3 bulk error, `!21\r\nSYNTAX invalid syntax\r\n`.
    case bulkError(ByteBuffer)
    /// A RESP3 verbatim string, `=15\r\ntxt:Some string\r\n`: the three-byte format (`txt`, `mkd`) and the text.
    case verbatimString(format: ByteBuffer, text: ByteBuffer)
    /// A RESP3 map, `%2\r\n...`: its pairs in the order they were sent (keys may repeat).
    case map([Pair])
    /// A RESP3 set, `~2\r\n...`: its elements in the order they were sent.
    case set([RESPValue])
    /// A RESP3 push message, `>3\r\n...`, sent out of band (pub/sub messages, invalidations).
    case push([RESPValue])
    /// A value that a RESP3 attribute (`|1\r\n...`) preceded, with the attribute's pairs.
    ///
    /// ``RESPValueDecoder`` produces it only when asked to keep attributes; by default it drops them, as
    /// clients that do not understand an attribute should. Consecutive attributes are merged into one list.
    indirect case attributed(RESPValue, attributes: [Pair])
}

extension RESPValue {
    /// Whether the value is one of the three nulls: `$-1`, `*-1` or `_`.
    @inlinable
    public var isNull: Bool {
        switch self {
        case .nullBulkString, .nullArray, .null: return true
        default: return false
        }
    }

    /// Whether the value is an error reply, simple (`-`) or bulk (`!`).
    @inlinable
    public var isError: Bool {
        switch self {
        case .simpleError, .bulkError: return true
        default: return false
        }
    }
}

// MARK: - Equatable, Hashable

extension RESPValue: Hashable {
    /// Compares two values; see ``RESPValue`` for how doubles compare.
    public static func == (lhs: RESPValue, rhs: RESPValue) -> Bool {
        switch (lhs, rhs) {
        case (.simpleString(let a), .simpleString(let b)): return a == b
        case (.simpleError(let a), .simpleError(let b)): return a == b
        case (.integer(let a), .integer(let b)): return a == b
        case (.bulkString(let a), .bulkString(let b)): return a == b
        case (.nullBulkString, .nullBulkString): return true
        case (.array(let a), .array(let b)): return a == b
        case (.nullArray, .nullArray): return true
        case (.null, .null): return true
        case (.boolean(let a), .boolean(let b)): return a == b
        case (.double(let a), .double(let b)): return Self.doubleKey(a) == Self.doubleKey(b)
        case (.bigNumber(let a), .bigNumber(let b)): return a == b
        case (.bulkError(let a), .bulkError(let b)): return a == b
        case (.verbatimString(let f1, let t1), .verbatimString(let f2, let t2)): return f1 == f2 && t1 == t2
        case (.map(let a), .map(let b)): return Self.pairsEqual(a, b)
        case (.set(let a), .set(let b)): return a == b
        case (.push(let a), .push(let b)): return a == b
        case (.attributed(let v1, let a1), .attributed(let v2, let a2)): return v1 == v2 && Self.pairsEqual(a1, a2)
        default: return false
        }
    }

    /// Hashes the value consistently with ``==(_:_:)``.
    public func hash(into hasher: inout Hasher) {
        switch self {
        case .simpleString(let b): hasher.combine(0); hasher.combine(b)
        case .simpleError(let b): hasher.combine(1); hasher.combine(b)
        case .integer(let i): hasher.combine(2); hasher.combine(i)
        case .bulkString(let b): hasher.combine(3); hasher.combine(b)
        case .nullBulkString: hasher.combine(4)
        case .array(let a): hasher.combine(5); hasher.combine(a)
        case .nullArray: hasher.combine(6)
        case .null: hasher.combine(7)
        case .boolean(let v): hasher.combine(8); hasher.combine(v)
        case .double(let d): hasher.combine(9); hasher.combine(Self.doubleKey(d))
        case .bigNumber(let b): hasher.combine(10); hasher.combine(b)
        case .bulkError(let b): hasher.combine(11); hasher.combine(b)
        case .verbatimString(let f, let t): hasher.combine(12); hasher.combine(f); hasher.combine(t)
        case .map(let pairs): hasher.combine(13); Self.hashPairs(pairs, into: &hasher)
        case .set(let a): hasher.combine(14); hasher.combine(a)
        case .push(let a): hasher.combine(15); hasher.combine(a)
        case .attributed(let v, let pairs):
            hasher.combine(16)
            hasher.combine(v)
            Self.hashPairs(pairs, into: &hasher)
        }
    }

    /// Doubles compare by bit pattern (so `0` and `-0` differ, as their wire forms do), all NaNs as one.
    private static func doubleKey(_ d: Double) -> UInt64 {
        d.isNaN ? Double.nan.bitPattern : d.bitPattern
    }

    private static func pairsEqual(_ a: [Pair], _ b: [Pair]) -> Bool {
        a.count == b.count && zip(a, b).allSatisfy { $0.key == $1.key && $0.value == $1.value }
    }

    private static func hashPairs(_ pairs: [Pair], into hasher: inout Hasher) {
        hasher.combine(pairs.count)
        for pair in pairs {
            hasher.combine(pair.key)
            hasher.combine(pair.value)
        }
    }
}

// MARK: - CustomStringConvertible

extension RESPValue: CustomStringConvertible {
    /// The value as `redis-cli` prints it: `(integer) 1`, `"bulk"`, `(nil)`, numbered aggregate elements.
    public var description: String {
        var out = ""
        self.render(into: &out, prefix: "")
        if out.last == "\n" { out.removeLast() }
        return out
    }

    /// Appends the `redis-cli` rendering of `self`, one line per scalar, each ending in a newline.
    /// `prefix` is the indentation of every line of a nested aggregate after its first.
    private func render(into out: inout String, prefix: String) {
        switch self {
        case .simpleString(let b):
            out += String(buffer: b)
        case .simpleError(let b), .bulkError(let b):
            out += "(error) "
            out += String(buffer: b)
        case .integer(let i):
            out += "(integer) \(i)"
        case .bulkString(let b):
            Self.appendQuoted(b, to: &out)
        case .nullBulkString, .nullArray, .null:
            out += "(nil)"
        case .boolean(let v):
            out += v ? "(true)" : "(false)"
        case .double(let d):
            out += "(double) \(d)"
        case .bigNumber(let b):
            out += "(big number) "
            out += String(buffer: b)
        case .verbatimString(let format, let text):
            out += "(\(String(buffer: format))) "
            Self.appendQuoted(text, to: &out)
        case .array(let elements), .push(let elements):
            Self.renderElements(elements, separator: ")", empty: self.isPush ? "push" : "array", into: &out, prefix: prefix)
            return
        case .set(let elements):
            Self.renderElements(elements, separator: "~", empty: "set", into: &out, prefix: prefix)
            return
        case .map(let pairs):
            Self.renderPairs(pairs, separator: "#", empty: "(empty hash)", into: &out, prefix: prefix)
            return
        case .attributed(let value, let pairs):
            Self.renderPairs(pairs, separator: "|", empty: "(empty attribute)", into: &out, prefix: prefix)
            out += prefix
            value.render(into: &out, prefix: prefix)
            return
        }
        out += "\n"
    }

    private var isPush: Bool {
        if case .push = self { return true }
        return false
    }

    private static func renderElements(
        _ elements: [RESPValue],
        separator: Character,
        empty: String,
        into out: inout String,
        prefix: String
    ) {
        guard !elements.isEmpty else {
            out += "(empty \(empty))\n"
            return
        }
        let width = String(elements.count).count
        let nested = prefix + String(repeating: " ", count: width + 2)
        for (i, element) in elements.enumerated() {
            // The caller already wrote the prefix and index of the line the first element is on.
            if i > 0 { out += prefix }
            out += Self.index(i + 1, width: width) + "\(separator) "
            element.render(into: &out, prefix: nested)
        }
    }

    private static func renderPairs(
        _ pairs: [Pair],
        separator: Character,
        empty: String,
        into out: inout String,
        prefix: String
    ) {
        guard !pairs.isEmpty else {
            out += empty + "\n"
            return
        }
        let width = String(pairs.count).count
        let nested = prefix + String(repeating: " ", count: width + 2)
        for (i, pair) in pairs.enumerated() {
            if i > 0 { out += prefix }
            out += Self.index(i + 1, width: width) + "\(separator) "
            pair.key.render(into: &out, prefix: nested)
            if out.last == "\n" { out.removeLast() }
            out += " => "
            pair.value.render(into: &out, prefix: nested)
        }
    }

    private static func index(_ i: Int, width: Int) -> String {
        let digits = String(i)
        return String(repeating: " ", count: width - digits.count) + digits
    }

    private static func appendQuoted(_ bytes: ByteBuffer, to out: inout String) {
        out += RESPText.quoted(bytes.readableBytesView)
    }
}
