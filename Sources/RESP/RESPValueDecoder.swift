import NIOCore

/// Decodes the replies a RESP2 or RESP3 server sends into ``RESPValue``s.
///
/// Use it in a channel pipeline as `ByteToMessageHandler(RESPValueDecoder())`, with
/// `NIOSingleStepByteToMessageProcessor`, or directly by calling ``decode(buffer:)`` on a buffer of received
/// bytes. It works in two passes: a validating scan that finds where the reply ends (resuming where it
/// stopped when the reply arrives in parts), then, once the whole reply is there, one pass that builds the
/// value. Declared lengths and counts are checked against ``RESPDecodingLimits`` as soon as their header
/// arrives and are never used to reserve memory. Payloads are slices of the received buffer.
public struct RESPValueDecoder: NIOSingleStepByteToMessageDecoder, Sendable {
    /// The decoder produces one ``RESPValue`` per reply.
    public typealias InboundOut = RESPValue

    /// The limits every reply must respect.
    public let limits: RESPDecodingLimits
    /// Whether RESP3 attributes are kept (as ``RESPValue/attributed(_:attributes:)``) or dropped.
    public let keepsAttributes: Bool

    private var scanner = RESPFrameScanner()
    /// Values of the aggregates being built, reused from reply to reply.
    private var scratch: [RESPValue] = []

    /// Creates a decoder.
    ///
    /// - Parameters:
    ///   - limits: The limits every reply must respect.
    ///   - keepsAttributes: Whether to wrap values that RESP3 attributes precede in
    ///     ``RESPValue/attributed(_:attributes:)``; by default attributes are validated and dropped.
    public init(limits: RESPDecodingLimits = RESPDecodingLimits(), keepsAttributes: Bool = false) {
        self.limits = limits
        self.keepsAttributes = keepsAttributes
    }

    /// Decodes the next reply from `buffer`'s readable bytes and moves the reader index past it.
    ///
    /// After it returns nil, call it again with the same buffer once more bytes have been appended.
    /// - Parameter buffer: Received bytes; the readable part must start at the first byte of a reply.
    /// - Returns: The reply, or nil if the buffer does not hold all of it yet.
    /// - Throws: ``RESPDecodingError`` if the bytes are not a valid reply or exceed ``limits``.
    public mutating func decode(buffer: inout ByteBuffer) throws(RESPDecodingError) -> RESPValue? {
        let limits = self.limits
        let scanned = buffer.withUnsafeReadableBytes { bytes in
            Result { () throws(RESPDecodingError) -> Int? in try self.scanner.scan(bytes, limits: limits) }
        }
        guard let length = try scanned.get() else { return nil }

        let frame = buffer.getSlice(at: buffer.readerIndex, length: length) ?? ByteBuffer()
        let keepsAttributes = self.keepsAttributes
        let built = frame.withUnsafeReadableBytes { bytes in
            Result { () throws(RESPDecodingError) -> RESPValue in
                var builder = RESPValueBuilder(bytes: bytes, buffer: frame, keepsAttributes: keepsAttributes)
                return try builder.value(scratch: &self.scratch)
            }
        }
        // Don't let one huge reply pin its element storage for the life of the connection.
        if scratch.capacity > 4096 { scratch = [] }
        let value = try built.get()
        buffer.moveReaderIndex(forwardBy: length)
        return value
    }

    /// Decodes the next reply once the stream has ended (or the decoder is being removed).
    ///
    /// - Parameters:
    ///   - buffer: The bytes that were received and not yet decoded.
    ///   - seenEOF: Whether the stream ended.
    /// - Returns: The next complete reply, or nil if there is none.
    /// - Throws: ``RESPDecodingError/truncated`` if the stream ended inside a reply, or any error of
    ///   ``decode(buffer:)``.
    public mutating func decodeLast(buffer: inout ByteBuffer, seenEOF: Bool) throws(RESPDecodingError) -> RESPValue? {
        if let value = try decode(buffer: &buffer) { return value }
        if seenEOF && buffer.readableBytes > 0 {
            throw RESPDecodingError(.truncated, at: buffer.readableBytes)
        }
        return nil
    }
}

extension RESPValue {
    /// Decodes the first reply in `bytes`, which must start at its first byte.
    ///
    /// - Parameters:
    ///   - buffer: Bytes that start at the first byte of a reply.
    ///   - limits: The limits the reply must respect.
    ///   - keepsAttributes: Whether to keep RESP3 attributes (see ``RESPValueDecoder``).
    /// - Returns: The reply and its length in bytes, or nil if `buffer` ends before the reply does.
    /// - Throws: ``RESPDecodingError`` if the bytes are not a valid reply or exceed `limits`.
    public static func decode(
        _ buffer: ByteBuffer,
        limits: RESPDecodingLimits = RESPDecodingLimits(),
        keepsAttributes: Bool = false
    ) throws(RESPDecodingError) -> (value: RESPValue, length: Int)? {
        var decoder = RESPValueDecoder(limits: limits, keepsAttributes: keepsAttributes)
        var copy = buffer
        guard let value = try decoder.decode(buffer: &copy) else { return nil }
        return (value, copy.readerIndex - buffer.readerIndex)
    }
}

/// Builds the value of a reply that ``RESPFrameScanner`` has validated.
///
/// Validation makes every check here redundant, but none is skipped: a failed one throws instead of trapping.
/// Aggregates are built on a shared stack of values, so each one's array is allocated once, at its real size.
struct RESPValueBuilder {
    let bytes: UnsafeRawBufferPointer
    /// The same bytes as a buffer, for slicing payloads out of it.
    let buffer: ByteBuffer
    let keepsAttributes: Bool
    private var position = 0

    init(bytes: UnsafeRawBufferPointer, buffer: ByteBuffer, keepsAttributes: Bool) {
        self.bytes = bytes
        self.buffer = buffer
        self.keepsAttributes = keepsAttributes
    }

    /// Builds the value at the current position, with any attributes before it.
    mutating func value(scratch: inout [RESPValue]) throws(RESPDecodingError) -> RESPValue {
        var attributes: [RESPValue.Pair] = []
        // A loop, not recursion: a reply may carry any number of attributes in a row.
        while position < bytes.count && bytes[position] == UInt8(ascii: "|") {
            let count = try header()
            let pairs = try pairs(count, scratch: &scratch)
            if keepsAttributes {
                if attributes.isEmpty { attributes = pairs } else { attributes.append(contentsOf: pairs) }
            }
        }
        let value = try plainValue(scratch: &scratch)
        return attributes.isEmpty ? value : .attributed(value, attributes: attributes)
    }

    private mutating func plainValue(scratch: inout [RESPValue]) throws(RESPDecodingError) -> RESPValue {
        guard position < bytes.count else { throw RESPDecodingError(.truncated, at: position) }
        let start = position
        let type = bytes[position]
        switch type {
        case UInt8(ascii: "+"):
            return .simpleString(try slice(line()))
        case UInt8(ascii: "-"):
            return .simpleError(try slice(line()))
        case UInt8(ascii: ":"):
            guard let value = RESPInteger.parse(UnsafeRawBufferPointer(rebasing: bytes[try line()])) else {
                throw RESPDecodingError(.invalidInteger, at: start)
            }
            return .integer(value)
        case UInt8(ascii: "_"):
            _ = try line()
            return .null
        case UInt8(ascii: "#"):
            let line = try line()
            guard line.count == 1 else { throw RESPDecodingError(.invalidBoolean, at: start) }
            return .boolean(bytes[line.lowerBound] == UInt8(ascii: "t"))
        case UInt8(ascii: ","):
            guard let value = RESPDoubleText.value(UnsafeRawBufferPointer(rebasing: bytes[try line()])) else {
                throw RESPDecodingError(.invalidDouble, at: start)
            }
            return .double(value)
        case UInt8(ascii: "("):
            return .bigNumber(try slice(line()))
        case UInt8(ascii: "$"):
            guard let payload = try bulk() else { return .nullBulkString }
            return .bulkString(try slice(payload))
        case UInt8(ascii: "!"):
            guard let payload = try bulk() else { throw RESPDecodingError(.invalidBulkLength, at: start) }
            return .bulkError(try slice(payload))
        case UInt8(ascii: "="):
            guard let payload = try bulk(), payload.count >= 4 else {
                throw RESPDecodingError(.invalidVerbatimString, at: start)
            }
            let format = payload.lowerBound..<payload.lowerBound + 3
            return .verbatimString(format: try slice(format), text: try slice(payload.lowerBound + 4..<payload.upperBound))
        case UInt8(ascii: "*"):
            let count = try header()
            if count == -1 { return .nullArray }
            return .array(try elements(count, scratch: &scratch))
        case UInt8(ascii: "~"):
            return .set(try elements(header(), scratch: &scratch))
        case UInt8(ascii: ">"):
            return .push(try elements(header(), scratch: &scratch))
        case UInt8(ascii: "%"):
            return .map(try pairs(header(), scratch: &scratch))
        default:
            throw RESPDecodingError(.unknownType, at: start, byte: type)
        }
    }

    /// `count` values, built on `scratch` and then moved into an array of exactly their number.
    private mutating func elements(_ count: Int, scratch: inout [RESPValue]) throws(RESPDecodingError) -> [RESPValue] {
        guard count > 0 else { return [] }
        let base = scratch.count
        defer { scratch.removeSubrange(base...) }
        for _ in 0..<count {
            let element = try value(scratch: &scratch)
            scratch.append(element)
        }
        return Array(scratch[base...])
    }

    /// `count` key-value pairs.
    private mutating func pairs(_ count: Int, scratch: inout [RESPValue]) throws(RESPDecodingError) -> [RESPValue.Pair] {
        guard count > 0 else { return [] }
        let base = scratch.count
        defer { scratch.removeSubrange(base...) }
        for _ in 0..<count {
            let key = try value(scratch: &scratch)
            scratch.append(key)
            let item = try value(scratch: &scratch)
            scratch.append(item)
        }
        return (0..<count).map { i in (key: scratch[base + 2 * i], value: scratch[base + 2 * i + 1]) }
    }

    /// Reads a header line holding a count or length (`*3`, `$-1`) and returns the number.
    private mutating func header() throws(RESPDecodingError) -> Int {
        let start = position
        guard let value = RESPInteger.parse(UnsafeRawBufferPointer(rebasing: bytes[try line()])) else {
            throw RESPDecodingError(.invalidAggregateCount, at: start)
        }
        return value
    }

    /// Reads a bulk header and its payload; returns the payload's range, nil for a length of -1.
    private mutating func bulk() throws(RESPDecodingError) -> Range<Int>? {
        let start = position
        let length = try header()
        if length == -1 { return nil }
        guard length >= 0, bytes.count - position >= 2, bytes.count - position - 2 >= length else {
            throw RESPDecodingError(.invalidBulkLength, at: start)
        }
        let payload = position..<position + length
        position += length + 2
        return payload
    }

    /// Reads the line after the type byte at the current position; returns its range without the CRLF.
    private mutating func line() throws(RESPDecodingError) -> Range<Int> {
        let start = position + 1
        guard let cr = RESPRequestParser.findCR(bytes, from: start), cr + 1 < bytes.count else {
            throw RESPDecodingError(.invalidLineEnding, at: position)
        }
        position = cr + 2
        return start..<cr
    }

    /// The bytes in `range` as a slice of ``buffer``, sharing its storage.
    private func slice(_ range: Range<Int>) throws(RESPDecodingError) -> ByteBuffer {
        guard let slice = buffer.getSlice(at: buffer.readerIndex + range.lowerBound, length: range.count) else {
            throw RESPDecodingError(.truncated, at: range.lowerBound)
        }
        return slice
    }
}
