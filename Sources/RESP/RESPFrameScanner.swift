import NIOCore

/// Validates one reply without building it, and finds where it ends.
///
/// The scanner is resumable: after it returns nil (more bytes needed), call it again with the same reply
/// start and more bytes appended, and it continues from the first value it has not yet fully seen. A large
/// array arriving in many reads therefore costs linear time, not quadratic. After it returns a length or
/// throws, it is ready for the next reply.
struct RESPFrameScanner: Sendable {
    private struct Level: Sendable {
        /// Values still to come in this aggregate.
        var remaining: Int
        /// An attribute's pairs are not an element of the enclosing aggregate: the value after them is.
        var isAttribute: Bool
    }

    /// Open aggregates, innermost last; never more than ``RESPDecodingLimits/maxDepth``.
    private var levels: [Level] = []
    /// The start of the first value not yet fully validated.
    private var offset = 0
    /// Where to resume looking for the CR of the header line at `offset` (0: from the start of the line).
    private var lineSearchFrom = 0

    init() {}

    /// Forgets a partly scanned reply.
    mutating func reset() {
        levels.removeAll(keepingCapacity: true)
        offset = 0
        lineSearchFrom = 0
    }

    /// Returns the length of the reply that starts at `bytes[0]`, or nil if it is not complete yet.
    mutating func scan(
        _ bytes: UnsafeRawBufferPointer,
        limits: RESPDecodingLimits
    ) throws(RESPDecodingError) -> Int? {
        do throws(RESPDecodingError) {
            while true {
                guard let end = try scanValue(bytes, limits: limits) else { return nil }
                if finishValue(at: end) {
                    reset()
                    return end
                }
            }
        } catch {
            reset()
            throw error
        }
    }

    /// Records that a value ended at `end`; returns whether it completed the reply.
    private mutating func finishValue(at end: Int) -> Bool {
        offset = end
        lineSearchFrom = 0
        while !levels.isEmpty {
            let last = levels.count - 1
            levels[last].remaining -= 1
            if levels[last].remaining > 0 { return false }
            let wasAttribute = levels[last].isAttribute
            levels.removeLast()
            // The value an attribute annotates follows the attribute and is not yet seen.
            if wasAttribute { return false }
        }
        return true
    }

    /// Validates the value (or aggregate header) at `offset`.
    ///
    /// Returns the end of a value that is complete, nil if more bytes are needed; an aggregate header is
    /// pushed onto ``levels`` and scanning continues with its first element.
    private mutating func scanValue(
        _ bytes: UnsafeRawBufferPointer,
        limits: RESPDecodingLimits
    ) throws(RESPDecodingError) -> Int? {
        while true {
            guard offset < bytes.count else { return nil }
            let type = bytes[offset]
            let maxLine: Int
            switch type {
            case UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: ","), UInt8(ascii: "("):
                maxLine = limits.maxLineLength
            case UInt8(ascii: ":"), UInt8(ascii: "$"), UInt8(ascii: "!"), UInt8(ascii: "="),
                UInt8(ascii: "*"), UInt8(ascii: "%"), UInt8(ascii: "~"), UInt8(ascii: ">"), UInt8(ascii: "|"):
                maxLine = 20  // the longest 64-bit decimal, "-9223372036854775808"
            case UInt8(ascii: "#"):
                maxLine = 1
            case UInt8(ascii: "_"):
                maxLine = 0
            default:
                throw RESPDecodingError(.unknownType, at: offset, byte: type)
            }

            // The header line: bytes[lineStart..<cr], then CRLF.
            let lineStart = offset + 1
            guard let cr = RESPRequestParser.findCR(bytes, from: max(lineStart, lineSearchFrom)) else {
                if bytes.count - lineStart > maxLine { throw lineTooLong(type, at: offset) }
                lineSearchFrom = bytes.count
                return nil
            }
            if cr - lineStart > maxLine { throw lineTooLong(type, at: offset) }
            guard cr + 1 < bytes.count else {
                lineSearchFrom = cr
                return nil
            }
            guard bytes[cr + 1] == 0x0A else { throw RESPDecodingError(.invalidLineEnding, at: cr + 1) }
            let line = UnsafeRawBufferPointer(rebasing: bytes[lineStart..<cr])
            let next = cr + 2

            switch type {
            case UInt8(ascii: "+"), UInt8(ascii: "-"):
                if RESPRequestParser.findByte(0x0A, in: line, from: 0) != nil {
                    throw RESPDecodingError(.invalidSimpleString, at: offset)
                }
                return next
            case UInt8(ascii: ":"):
                guard RESPInteger.parse(line) != nil else { throw RESPDecodingError(.invalidInteger, at: offset) }
                return next
            case UInt8(ascii: "_"):
                return next  // maxLine 0 already rejected a payload
            case UInt8(ascii: "#"):
                guard line.count == 1, line[0] == UInt8(ascii: "t") || line[0] == UInt8(ascii: "f") else {
                    throw RESPDecodingError(.invalidBoolean, at: offset)
                }
                return next
            case UInt8(ascii: ","):
                guard RESPDoubleText.isValid(line) else { throw RESPDecodingError(.invalidDouble, at: offset) }
                return next
            case UInt8(ascii: "("):
                guard Self.isBigNumber(line) else { throw RESPDecodingError(.invalidBigNumber, at: offset) }
                return next
            case UInt8(ascii: "$"), UInt8(ascii: "!"), UInt8(ascii: "="):
                return try scanBulk(type, line: line, payloadStart: next, bytes, limits: limits)
            default:  // aggregates
                if try openAggregate(type, line: line, next: next, limits: limits) { return next }
                // An aggregate with elements (or an attribute) was opened: scan what follows it.
                offset = next
                lineSearchFrom = 0
            }
        }
    }

    /// Validates a bulk string, bulk error or verbatim string whose header line has arrived.
    private mutating func scanBulk(
        _ type: UInt8,
        line: UnsafeRawBufferPointer,
        payloadStart: Int,
        _ bytes: UnsafeRawBufferPointer,
        limits: RESPDecodingLimits
    ) throws(RESPDecodingError) -> Int? {
        if line.count == 1 && line[0] == UInt8(ascii: "?") {
            throw RESPDecodingError(.streamedTypeUnsupported, at: offset)
        }
        guard let length = RESPInteger.parse(line) else { throw RESPDecodingError(.invalidBulkLength, at: offset) }
        if length == -1 && type == UInt8(ascii: "$") { return payloadStart }
        guard length >= 0 else { throw RESPDecodingError(.invalidBulkLength, at: offset) }
        guard length <= limits.maxBulkLength else { throw RESPDecodingError(.bulkTooLong, at: offset) }
        if type == UInt8(ascii: "=") && length < 4 { throw RESPDecodingError(.invalidVerbatimString, at: offset) }
        // Written so that no sum can overflow, whatever the limit.
        let available = bytes.count - payloadStart
        guard available >= 2 && available - 2 >= length else {
            lineSearchFrom = payloadStart - 2  // the header's CR: found again without a search
            return nil
        }
        let payloadEnd = payloadStart + length
        guard bytes[payloadEnd] == 0x0D, bytes[payloadEnd + 1] == 0x0A else {
            throw RESPDecodingError(.invalidLineEnding, at: payloadEnd)
        }
        if type == UInt8(ascii: "=") && bytes[payloadStart + 3] != UInt8(ascii: ":") {
            throw RESPDecodingError(.invalidVerbatimString, at: offset)
        }
        return payloadEnd + 2
    }

    /// Checks an aggregate header; returns true if the aggregate is a complete value (null or empty).
    private mutating func openAggregate(
        _ type: UInt8,
        line: UnsafeRawBufferPointer,
        next: Int,
        limits: RESPDecodingLimits
    ) throws(RESPDecodingError) -> Bool {
        if line.count == 1 && line[0] == UInt8(ascii: "?") {
            throw RESPDecodingError(.streamedTypeUnsupported, at: offset)
        }
        guard let count = RESPInteger.parse(line) else {
            throw RESPDecodingError(.invalidAggregateCount, at: offset)
        }
        if count == -1 && type == UInt8(ascii: "*") { return true }
        guard count >= 0 else { throw RESPDecodingError(.invalidAggregateCount, at: offset) }
        guard count <= limits.maxAggregateCount else { throw RESPDecodingError(.aggregateTooLarge, at: offset) }
        let isAttribute = type == UInt8(ascii: "|")
        let hasPairs = isAttribute || type == UInt8(ascii: "%")
        let (values, overflow) = count.multipliedReportingOverflow(by: hasPairs ? 2 : 1)
        if overflow { throw RESPDecodingError(.aggregateTooLarge, at: offset) }
        if values == 0 {
            // An empty attribute annotates the value after it, which is still to come.
            return !isAttribute
        }
        guard levels.count < limits.maxDepth else { throw RESPDecodingError(.nestingTooDeep, at: offset) }
        levels.append(Level(remaining: values, isAttribute: isAttribute))
        return false
    }

    private func lineTooLong(_ type: UInt8, at offset: Int) -> RESPDecodingError {
        switch type {
        case UInt8(ascii: ":"): return RESPDecodingError(.invalidInteger, at: offset)
        case UInt8(ascii: "$"), UInt8(ascii: "!"), UInt8(ascii: "="):
            return RESPDecodingError(.invalidBulkLength, at: offset)
        case UInt8(ascii: "#"): return RESPDecodingError(.invalidBoolean, at: offset)
        case UInt8(ascii: "_"): return RESPDecodingError(.invalidNull, at: offset)
        case UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: ","), UInt8(ascii: "("):
            return RESPDecodingError(.lineTooLong, at: offset)
        default: return RESPDecodingError(.invalidAggregateCount, at: offset)
        }
    }

    /// `[+|-]digits`
    private static func isBigNumber(_ line: UnsafeRawBufferPointer) -> Bool {
        var i = 0
        if i < line.count && (line[i] == UInt8(ascii: "-") || line[i] == UInt8(ascii: "+")) { i += 1 }
        guard i < line.count else { return false }
        while i < line.count {
            guard line[i] &- UInt8(ascii: "0") <= 9 else { return false }
            i += 1
        }
        return true
    }
}

/// The text of a RESP3 double: `[+|-]digits[.digits][(e|E)[+|-]digits]`, or `inf`, `nan` with an optional sign.
enum RESPDoubleText {
    static func isValid(_ text: UnsafeRawBufferPointer) -> Bool {
        var i = 0
        let n = text.count
        if i < n && (text[i] == UInt8(ascii: "-") || text[i] == UInt8(ascii: "+")) { i += 1 }
        if special(UnsafeRawBufferPointer(rebasing: text[i...])) != nil { return true }
        func digits() -> Bool {
            let start = i
            while i < n && text[i] &- UInt8(ascii: "0") <= 9 { i += 1 }
            return i > start
        }
        guard digits() else { return false }
        if i < n && text[i] == UInt8(ascii: ".") {
            i += 1
            guard digits() else { return false }
        }
        if i < n && (text[i] == UInt8(ascii: "e") || text[i] == UInt8(ascii: "E")) {
            i += 1
            if i < n && (text[i] == UInt8(ascii: "-") || text[i] == UInt8(ascii: "+")) { i += 1 }
            guard digits() else { return false }
        }
        return i == n
    }

    /// Converts text that ``isValid(_:)`` accepted.
    static func value(_ text: UnsafeRawBufferPointer) -> Double? {
        var negative = false
        var unsigned = text
        if let first = text.first, first == UInt8(ascii: "-") || first == UInt8(ascii: "+") {
            negative = first == UInt8(ascii: "-")
            unsigned = UnsafeRawBufferPointer(rebasing: text[1...])
        }
        if let special = special(unsigned) { return negative ? -special : special }
        // Only digits, '.', 'e' and signs remain; Swift's conversion does not depend on the C locale.
        return Double(String(decoding: text, as: UTF8.self))
    }

    private static func special(_ text: UnsafeRawBufferPointer) -> Double? {
        guard text.count == 3 else { return nil }
        if text[0] == UInt8(ascii: "i") && text[1] == UInt8(ascii: "n") && text[2] == UInt8(ascii: "f") {
            return .infinity
        }
        if text[0] == UInt8(ascii: "n") && text[1] == UInt8(ascii: "a") && text[2] == UInt8(ascii: "n") {
            return .nan
        }
        return nil
    }
}

extension RESPValue {
    /// The length in bytes of the complete reply at the start of `bytes`, found without building values.
    ///
    /// Any attributes before the reply are part of it. Use it to cut a stream of raw replies at exact
    /// boundaries, for example to compare two servers byte for byte.
    /// - Parameters:
    ///   - bytes: Bytes that start at the first byte of a reply.
    ///   - limits: The limits the reply must respect.
    /// - Returns: The reply's length, or nil if `bytes` end before the reply does.
    /// - Throws: ``RESPDecodingError`` if the bytes are not a valid reply or exceed `limits`.
    public static func frameLength(
        in bytes: UnsafeRawBufferPointer,
        limits: RESPDecodingLimits = RESPDecodingLimits()
    ) throws(RESPDecodingError) -> Int? {
        var scanner = RESPFrameScanner()
        return try scanner.scan(bytes, limits: limits)
    }

    /// The length in bytes of the complete reply at the start of `buffer`'s readable bytes.
    ///
    /// - Parameters:
    ///   - buffer: A buffer whose readable bytes start at the first byte of a reply.
    ///   - limits: The limits the reply must respect.
    /// - Returns: The reply's length, or nil if the readable bytes end before the reply does.
    /// - Throws: ``RESPDecodingError`` if the bytes are not a valid reply or exceed `limits`.
    public static func frameLength(
        in buffer: ByteBuffer,
        limits: RESPDecodingLimits = RESPDecodingLimits()
    ) throws(RESPDecodingError) -> Int? {
        let result = buffer.withUnsafeReadableBytes { bytes in
            Result { () throws(RESPDecodingError) -> Int? in try frameLength(in: bytes, limits: limits) }
        }
        return try result.get()
    }
}
