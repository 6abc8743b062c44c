import Glibc

/// The span of one command argument inside the bytes the parser was given.
///
/// Offsets are relative to the start of the frame (the first byte of the command), so they stay valid while
/// the frame's bytes sit, unread, at the front of a growing receive buffer.
public struct RESPArgumentSpan: Sendable, Equatable {
    /// Where the argument starts, in bytes from the start of the frame (or of the inline storage).
    public var offset: Int
    /// The argument's length in bytes.
    public var count: Int

    /// Creates a span of `count` bytes starting `offset` bytes in.
    @inlinable
    public init(offset: Int, count: Int) {
        self.offset = offset
        self.count = count
    }
}

/// Limits a request parser enforces before it allocates or waits for anything.
public struct RESPRequestLimits: Sendable, Equatable {
    /// The largest bulk string a client may send (`proto-max-bulk-len`, 512 MB by default).
    public var maxBulkLength: Int
    /// The longest inline command, and the longest `*N` / `$N` header line (64 KiB, as Redis).
    public var maxInlineLength: Int
    /// The most arguments one multibulk command may declare (Redis: `INT_MAX`).
    public var maxMultibulkLength: Int
    /// The most arguments a client that still has to authenticate may send (Redis: 10).
    public var unauthenticatedMaxMultibulkLength: Int
    /// The largest bulk string a client that still has to authenticate may send (Redis: 16 KiB).
    public var unauthenticatedMaxBulkLength: Int

    /// Creates limits; the defaults are Redis 7.0's.
    public init(
        maxBulkLength: Int = 512 * 1024 * 1024,
        maxInlineLength: Int = 64 * 1024,
        maxMultibulkLength: Int = Int(Int32.max),
        unauthenticatedMaxMultibulkLength: Int = 10,
        unauthenticatedMaxBulkLength: Int = 16384
    ) {
        self.maxBulkLength = maxBulkLength
        self.maxInlineLength = maxInlineLength
        self.maxMultibulkLength = maxMultibulkLength
        self.unauthenticatedMaxMultibulkLength = unauthenticatedMaxMultibulkLength
        self.unauthenticatedMaxBulkLength = unauthenticatedMaxBulkLength
    }
}

/// A request the client sent that cannot be parsed. The connection is closed after the error reply.
public struct RESPProtocolError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The text of the error reply, without the leading `-` and trailing CRLF, in Redis's wording.
    public let message: String

    /// Creates an error whose reply is `-message\r\n`.
    public init(message: String) { self.message = message }

    /// A `*N` count that is not a number or is too large.
    public static let invalidMultibulkLength = RESPProtocolError(message: "ERR Protocol error: invalid multibulk length")
    /// A `$N` length that is not a number, is negative, or exceeds ``RESPRequestLimits/maxBulkLength``.
    public static let invalidBulkLength = RESPProtocolError(message: "ERR Protocol error: invalid bulk length")
    /// More arguments than an unauthenticated client may send.
    public static let unauthenticatedMultibulkLength = RESPProtocolError(
        message: "ERR Protocol error: unauthenticated multibulk length")
    /// A larger bulk string than an unauthenticated client may send.
    public static let unauthenticatedBulkLength = RESPProtocolError(
        message: "ERR Protocol error: unauthenticated bulk length")
    /// No CR within ``RESPRequestLimits/maxInlineLength`` bytes of a `*`.
    public static let tooBigMultibulkCount = RESPProtocolError(message: "ERR Protocol error: too big mbulk count string")
    /// No CR within ``RESPRequestLimits/maxInlineLength`` bytes of a `$`.
    public static let tooBigBulkCount = RESPProtocolError(message: "ERR Protocol error: too big bulk count string")
    /// An inline command longer than ``RESPRequestLimits/maxInlineLength``.
    public static let tooBigInline = RESPProtocolError(message: "ERR Protocol error: too big inline request")
    /// An inline command with an unterminated quote, or a closing quote not followed by a blank.
    public static let unbalancedQuotes = RESPProtocolError(message: "ERR Protocol error: unbalanced quotes in request")

    /// A multibulk element that does not start with `$`; `byte` is what it starts with.
    public static func expectedDollar(got byte: UInt8) -> RESPProtocolError {
        RESPProtocolError(message: "ERR Protocol error: expected '$', got '\(Character(Unicode.Scalar(byte)))'")
    }

    /// The error reply's text, ``message``.
    public var description: String { message }
}

/// An incremental parser for client requests: RESP multibulk arrays of bulk strings, and inline commands.
///
/// The parser never copies a multibulk argument: it records each argument's span within the frame. Inline
/// commands, whose arguments may be quoted and escaped, are unescaped into ``inlineStorage`` instead.
/// Parsing resumes where it stopped when a frame arrives in pieces, so a large command costs linear time
/// however it is split. Counts declared by the client are checked against ``RESPRequestLimits`` and never
/// used to reserve memory.
public struct RESPRequestParser: Sendable {
    /// What one call to ``parse(_:limits:authenticated:)`` found.
    public enum Result: Equatable, Sendable {
        /// A whole command, `consumed` bytes long from the start of the given bytes. Its arguments are in
        /// ``arguments``; `isInline` says whether they point into ``inlineStorage`` instead of the frame.
        case command(consumed: Int, isInline: Bool)
        /// Bytes that carry no command (an empty inline line, `*0`, `*-1`): skip them and parse again.
        case skip(consumed: Int)
        /// More bytes are needed.
        case incomplete
    }

    /// The arguments of the last command found, in order, as spans of the frame (or of ``inlineStorage``).
    public private(set) var arguments: [RESPArgumentSpan] = []
    /// Unescaped inline arguments; only meaningful after a `.command(_, isInline: true)` result.
    public private(set) var inlineStorage: [UInt8] = []

    // Resumable state for a multibulk frame that arrived in part.
    private var remainingArguments = 0
    private var cursor = 0
    private var inFrame = false

    /// Creates a parser that expects the first byte of a frame.
    public init() {
        arguments.reserveCapacity(16)
    }

    /// Forgets any partial frame (after the connection's buffer was replaced).
    public mutating func reset() {
        arguments.removeAll(keepingCapacity: true)
        remainingArguments = 0
        cursor = 0
        inFrame = false
    }

    /// Parses the next command from `bytes`, which start at the first byte of a frame.
    ///
    /// After `.incomplete`, call again with the same frame start and more bytes appended.
    /// - Throws: ``RESPProtocolError`` for bytes that are not a valid request; the connection must be closed.
    public mutating func parse(
        _ bytes: UnsafeRawBufferPointer,
        limits: RESPRequestLimits,
        authenticated: Bool = true
    ) throws(RESPProtocolError) -> Result {
        if !inFrame {
            guard let first = bytes.first else { return .incomplete }
            if first != UInt8(ascii: "*") {
                return try parseInline(bytes, limits: limits)
            }
            arguments.removeAll(keepingCapacity: true)
            guard let lineEnd = Self.findCR(bytes, from: 0) else {
                if bytes.count > limits.maxInlineLength { throw .tooBigMultibulkCount }
                return .incomplete
            }
            guard lineEnd + 1 < bytes.count else { return .incomplete }
            guard let count = Self.parseInteger(bytes, from: 1, to: lineEnd), count <= limits.maxMultibulkLength,
                count <= Int(Int32.max)
            else { throw .invalidMultibulkLength }
            if !authenticated && count > limits.unauthenticatedMaxMultibulkLength {
                throw .unauthenticatedMultibulkLength
            }
            if count <= 0 { return .skip(consumed: lineEnd + 2) }
            remainingArguments = count
            cursor = lineEnd + 2
            inFrame = true
        }
        while remainingArguments > 0 {
            guard cursor < bytes.count else { return .incomplete }
            guard let lineEnd = Self.findCR(bytes, from: cursor) else {
                if bytes.count - cursor > limits.maxInlineLength { throw .tooBigBulkCount }
                return .incomplete
            }
            guard lineEnd + 1 < bytes.count else { return .incomplete }
            let marker = bytes[cursor]
            guard marker == UInt8(ascii: "$") else { throw .expectedDollar(got: marker) }
            guard let length = Self.parseInteger(bytes, from: cursor + 1, to: lineEnd), length >= 0,
                length <= limits.maxBulkLength
            else { throw .invalidBulkLength }
            if !authenticated && length > limits.unauthenticatedMaxBulkLength { throw .unauthenticatedBulkLength }
            let start = lineEnd + 2
            // The payload and its CRLF must be here; like Redis, the two bytes after the payload are skipped.
            guard bytes.count - start >= length + 2 else { return .incomplete }
            arguments.append(RESPArgumentSpan(offset: start, count: length))
            cursor = start + length + 2
            remainingArguments -= 1
        }
        inFrame = false
        let consumed = cursor
        cursor = 0
        return .command(consumed: consumed, isInline: false)
    }

    /// How many bytes of a pending multibulk frame are still missing, when the parser knows (inside a bulk
    /// payload); `nil` otherwise. A connection uses it to size its receive buffer once for a large value.
    public func missingBulkBytes(available: Int, peek: UnsafeRawBufferPointer) -> Int? {
        guard inFrame, cursor < peek.count, peek[cursor] == UInt8(ascii: "$"),
            let lineEnd = Self.findCR(peek, from: cursor), lineEnd + 1 < peek.count,
            let length = Self.parseInteger(peek, from: cursor + 1, to: lineEnd), length >= 0
        else { return nil }
        let needed = lineEnd + 2 + length + 2
        return needed > available ? needed - available : nil
    }

    // MARK: inline commands

    private mutating func parseInline(_ bytes: UnsafeRawBufferPointer, limits: RESPRequestLimits)
        throws(RESPProtocolError) -> Result
    {
        // Redis looks for the newline with strchr, which stops at a NUL byte: a NUL before the newline hides
        // it, and the request waits for more bytes until it is too big.
        guard let newline = Self.findByte(UInt8(ascii: "\n"), in: bytes, from: 0),
            Self.findByte(0, in: UnsafeRawBufferPointer(rebasing: bytes[..<newline]), from: 0) == nil
        else {
            if bytes.count > limits.maxInlineLength { throw .tooBigInline }
            return .incomplete
        }
        if newline > limits.maxInlineLength { throw .tooBigInline }
        var end = newline
        if end > 0 && bytes[end - 1] == UInt8(ascii: "\r") { end -= 1 }
        arguments.removeAll(keepingCapacity: true)
        inlineStorage.removeAll(keepingCapacity: true)
        try Self.splitInline(bytes, end: end, storage: &inlineStorage, spans: &arguments)
        if arguments.isEmpty { return .skip(consumed: newline + 1) }
        return .command(consumed: newline + 1, isInline: true)
    }

    /// Splits `line` into arguments the way Redis's `sdssplitargs` does (inline commands, redis.conf lines):
    /// blanks separate, `"..."` takes `\n \r \t \b \a \\ \"` and `\xHH` escapes, `'...'` takes `\'`.
    /// - Returns: the arguments, or nil when the quotes are unbalanced.
    public static func splitArguments(_ line: [UInt8]) -> [[UInt8]]? {
        var storage: [UInt8] = []
        var spans: [RESPArgumentSpan] = []
        let balanced = line.withUnsafeBytes { bytes -> Bool in
            do {
                try splitInline(bytes, end: bytes.count, storage: &storage, spans: &spans)
                return true
            } catch {
                return false
            }
        }
        guard balanced else { return nil }
        return spans.map { Array(storage[$0.offset..<($0.offset + $0.count)]) }
    }

    /// Splits an inline line into arguments the way Redis's `sdssplitargs` does: blanks separate, `"..."`
    /// takes `\n \r \t \b \a \\ \"` and `\xHH` escapes, `'...'` takes `\'`; a closing quote must be followed
    /// by a blank or the end of the line. Like that C function, it reads the line only up to a NUL byte.
    static func splitInline(
        _ bytes: UnsafeRawBufferPointer,
        end lineEnd: Int,
        storage: inout [UInt8],
        spans: inout [RESPArgumentSpan]
    ) throws(RESPProtocolError) {
        let end = findByte(0, in: UnsafeRawBufferPointer(rebasing: bytes[..<lineEnd]), from: 0) ?? lineEnd
        var i = 0
        func isSpace(_ c: UInt8) -> Bool {
            c == 0x20 || c == 0x0A || c == 0x0D || c == 0x09 || c == 0x0B || c == 0x0C
        }
        func hexValue(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
            default: return nil
            }
        }
        while true {
            while i < end && isSpace(bytes[i]) { i += 1 }
            if i >= end { return }
            let start = storage.count
            var inDouble = false
            var inSingle = false
            var done = false
            while !done {
                if inDouble {
                    guard i < end else { throw .unbalancedQuotes }
                    let c = bytes[i]
                    if c == UInt8(ascii: "\\") && i + 3 < end && bytes[i + 1] == UInt8(ascii: "x"),
                        let h = hexValue(bytes[i + 2]), let l = hexValue(bytes[i + 3])
                    {
                        storage.append(h << 4 | l)
                        i += 3
                    } else if c == UInt8(ascii: "\\") && i + 1 < end {
                        i += 1
                        switch bytes[i] {
                        case UInt8(ascii: "n"): storage.append(0x0A)
                        case UInt8(ascii: "r"): storage.append(0x0D)
                        case UInt8(ascii: "t"): storage.append(0x09)
                        case UInt8(ascii: "b"): storage.append(0x08)
                        case UInt8(ascii: "a"): storage.append(0x07)
                        default: storage.append(bytes[i])
                        }
                    } else if c == UInt8(ascii: "\"") {
                        // The closing quote must be followed by a space or nothing.
                        if i + 1 < end && !isSpace(bytes[i + 1]) { throw .unbalancedQuotes }
                        done = true
                    } else {
                        storage.append(c)
                    }
                } else if inSingle {
                    guard i < end else { throw .unbalancedQuotes }
                    let c = bytes[i]
                    if c == UInt8(ascii: "\\") && i + 1 < end && bytes[i + 1] == UInt8(ascii: "'") {
                        i += 1
                        storage.append(UInt8(ascii: "'"))
                    } else if c == UInt8(ascii: "'") {
                        if i + 1 < end && !isSpace(bytes[i + 1]) { throw .unbalancedQuotes }
                        done = true
                    } else {
                        storage.append(c)
                    }
                } else {
                    if i >= end { done = true; break }
                    let c = bytes[i]
                    if c == 0x20 || c == 0x0A || c == 0x0D || c == 0x09 || c == 0x00 {
                        done = true
                    } else if c == UInt8(ascii: "\"") {
                        inDouble = true
                    } else if c == UInt8(ascii: "'") {
                        inSingle = true
                    } else {
                        storage.append(c)
                    }
                }
                if i < end { i += 1 }
            }
            spans.append(RESPArgumentSpan(offset: start, count: storage.count - start))
        }
    }

    // MARK: scanning helpers

    @inline(__always)
    static func findCR(_ bytes: UnsafeRawBufferPointer, from start: Int) -> Int? {
        findByte(UInt8(ascii: "\r"), in: bytes, from: start)
    }

    @inline(__always)
    static func findByte(_ byte: UInt8, in bytes: UnsafeRawBufferPointer, from start: Int) -> Int? {
        guard start < bytes.count, let base = bytes.baseAddress else { return nil }
        guard let hit = memchr(base + start, Int32(byte), bytes.count - start) else { return nil }
        return base.distance(to: UnsafeRawPointer(hit))
    }

    /// Parses a signed decimal in `bytes[from..<to]` as Redis's `string2ll` does (no spaces, no `+`,
    /// no leading zeros except "0"), or returns nil.
    @inline(__always)
    static func parseInteger(_ bytes: UnsafeRawBufferPointer, from: Int, to: Int) -> Int? {
        guard let base = bytes.baseAddress else { return nil }
        return RESPInteger.parse(UnsafeRawBufferPointer(start: base + from, count: to - from))
    }
}
