/// Limits a reply decoder enforces before it waits for, or keeps, any bytes a server declared.
///
/// A length or count is checked against these limits as soon as its header line has arrived, so a hostile
/// or broken server cannot make the decoder wait for (and buffer) more than the limits allow.
public struct RESPDecodingLimits: Sendable, Hashable {
    /// The deepest nesting of aggregates (arrays, maps, sets, pushes, attributes); a top-level array is depth 1.
    ///
    /// Decoding recurses once per level, so keep this in the hundreds.
    public var maxDepth: Int
    /// The longest bulk string, bulk error or verbatim string payload, in bytes (Redis's own limit: 512 MB).
    public var maxBulkLength: Int
    /// The most entries one aggregate may declare: elements of an array, set or push, pairs of a map or attribute.
    public var maxAggregateCount: Int
    /// The longest line of a simple string, simple error, double or big number, without its CRLF.
    public var maxLineLength: Int

    /// Creates limits; the defaults suit a client of a Redis-compatible server.
    ///
    /// - Parameters:
    ///   - maxDepth: The deepest nesting of aggregates; 100 by default.
    ///   - maxBulkLength: The longest bulk payload; 512 MiB by default.
    ///   - maxAggregateCount: The most entries per aggregate; `Int32.max` by default.
    ///   - maxLineLength: The longest simple line; 1 MiB by default.
    public init(
        maxDepth: Int = 100,
        maxBulkLength: Int = 512 * 1024 * 1024,
        maxAggregateCount: Int = Int(Int32.max),
        maxLineLength: Int = 1024 * 1024
    ) {
        self.maxDepth = maxDepth
        self.maxBulkLength = maxBulkLength
        self.maxAggregateCount = maxAggregateCount
        self.maxLineLength = maxLineLength
    }
}

/// Bytes that are not a valid RESP2 or RESP3 reply, or that exceed ``RESPDecodingLimits``.
///
/// Compare an error with the static members (`error == .invalidBulkLength`); ``offset`` is context for the
/// message and takes no part in equality. The connection cannot be resynchronised after such an error.
public struct RESPDecodingError: Error, Sendable, Hashable, CustomStringConvertible {
    private enum Base: Hashable, Sendable {
        case unknownType
        case invalidLineEnding
        case lineTooLong
        case invalidSimpleString
        case invalidInteger
        case invalidDouble
        case invalidBoolean
        case invalidNull
        case invalidBigNumber
        case invalidBulkLength
        case bulkTooLong
        case invalidVerbatimString
        case invalidAggregateCount
        case aggregateTooLarge
        case nestingTooDeep
        case streamedTypeUnsupported
        case truncated
    }

    private var base: Base
    /// Where the problem was found: the number of bytes from the first byte of the reply.
    public private(set) var offset: Int
    /// The byte the message names, when there is one (an unknown type byte).
    private var byte: UInt8?

    private init(_ base: Base) {
        self.base = base
        self.offset = 0
        self.byte = nil
    }

    init(_ other: RESPDecodingError, at offset: Int, byte: UInt8? = nil) {
        self = other
        self.offset = offset
        self.byte = byte
    }

    /// The first byte of a value is not a RESP2 or RESP3 type byte.
    public static let unknownType = RESPDecodingError(.unknownType)
    /// A CR is not followed by LF, or a bulk payload is not followed by CRLF.
    public static let invalidLineEnding = RESPDecodingError(.invalidLineEnding)
    /// A line is longer than ``RESPDecodingLimits/maxLineLength`` (or a length header longer than a number can be).
    public static let lineTooLong = RESPDecodingError(.lineTooLong)
    /// A simple string or simple error contains a line feed.
    public static let invalidSimpleString = RESPDecodingError(.invalidSimpleString)
    /// An integer reply is not a strict signed 64-bit decimal (no `+`, no leading zeros, no overflow).
    public static let invalidInteger = RESPDecodingError(.invalidInteger)
    /// A double is not `[sign]digits[.digits][e[sign]digits]`, `inf`, `-inf` or `nan`.
    public static let invalidDouble = RESPDecodingError(.invalidDouble)
    /// A boolean is neither `t` nor `f`.
    public static let invalidBoolean = RESPDecodingError(.invalidBoolean)
    /// A RESP3 null carries data.
    public static let invalidNull = RESPDecodingError(.invalidNull)
    /// A big number is not an optionally signed run of digits.
    public static let invalidBigNumber = RESPDecodingError(.invalidBigNumber)
    /// A bulk length is not a decimal, or is negative (only a bulk string may be `-1`).
    public static let invalidBulkLength = RESPDecodingError(.invalidBulkLength)
    /// A bulk length exceeds ``RESPDecodingLimits/maxBulkLength``.
    public static let bulkTooLong = RESPDecodingError(.bulkTooLong)
    /// A verbatim string is shorter than its `xxx:` format prefix, or lacks the colon.
    public static let invalidVerbatimString = RESPDecodingError(.invalidVerbatimString)
    /// An aggregate count is not a decimal, or is negative (only an array may be `-1`).
    public static let invalidAggregateCount = RESPDecodingError(.invalidAggregateCount)
    /// An aggregate count exceeds ``RESPDecodingLimits/maxAggregateCount``.
    public static let aggregateTooLarge = RESPDecodingError(.aggregateTooLarge)
    /// Aggregates are nested deeper than ``RESPDecodingLimits/maxDepth``.
    public static let nestingTooDeep = RESPDecodingError(.nestingTooDeep)
    /// A RESP3 streamed string or aggregate (`$?`, `*?`); no Redis-compatible server sends them.
    public static let streamedTypeUnsupported = RESPDecodingError(.streamedTypeUnsupported)
    /// The stream ended in the middle of a reply.
    public static let truncated = RESPDecodingError(.truncated)

    /// Whether two errors are of the same kind, wherever they were found.
    public static func == (lhs: RESPDecodingError, rhs: RESPDecodingError) -> Bool {
        lhs.base == rhs.base
    }

    /// Hashes the kind of error, consistently with ``==(_:_:)``.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(base)
    }

    /// A sentence naming the problem and where it was found.
    public var description: String {
        let what: String
        switch base {
        case .unknownType:
            if let byte {
                what = "unknown type byte \(Self.show(byte))"
            } else {
                what = "unknown type byte"
            }
        case .invalidLineEnding: what = "expected CRLF"
        case .lineTooLong: what = "line too long"
        case .invalidSimpleString: what = "line feed inside a simple string or error"
        case .invalidInteger: what = "invalid integer"
        case .invalidDouble: what = "invalid double"
        case .invalidBoolean: what = "invalid boolean (expected 't' or 'f')"
        case .invalidNull: what = "null with a payload"
        case .invalidBigNumber: what = "invalid big number"
        case .invalidBulkLength: what = "invalid bulk length"
        case .bulkTooLong: what = "bulk length over the limit"
        case .invalidVerbatimString: what = "verbatim string without a 'xxx:' format prefix"
        case .invalidAggregateCount: what = "invalid aggregate count"
        case .aggregateTooLarge: what = "aggregate count over the limit"
        case .nestingTooDeep: what = "aggregates nested too deep"
        case .streamedTypeUnsupported: what = "streamed strings and aggregates are not supported"
        case .truncated: what = "stream ended inside a reply"
        }
        return "RESP decoding error at byte \(offset) of the reply: \(what)"
    }

    private static func show(_ byte: UInt8) -> String {
        let hex = (byte < 0x10 ? "0x0" : "0x") + String(byte, radix: 16)
        return (0x21...0x7E).contains(byte) ? "'\(Character(Unicode.Scalar(byte)))' (\(hex))" : hex
    }
}
