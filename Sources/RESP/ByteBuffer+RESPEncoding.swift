import NIOCore

/// The protocol a connection speaks: RESP2 until `HELLO 3`, then RESP3.
public enum RESPVersion: UInt8, Sendable {
    case resp2 = 2
    case resp3 = 3
}

extension ByteBuffer {
    /// `+text\r\n`
    @inlinable
    public mutating func writeRESPSimpleString(_ text: StaticString) {
        writeInteger(UInt8(ascii: "+"))
        writeStaticString(text)
        writeCRLF()
    }

    /// `+text\r\n` for text that contains no CR or LF.
    @inlinable
    public mutating func writeRESPSimpleString(_ text: String) {
        writeInteger(UInt8(ascii: "+"))
        writeString(text)
        writeCRLF()
    }

    /// `+OK\r\n`
    @inlinable
    public mutating func writeRESPOK() {
        writeStaticString("+OK\r\n")
    }

    /// `-message\r\n`; `message` starts with the error code (`ERR`, `WRONGTYPE`, ...).
    @inlinable
    public mutating func writeRESPError(_ message: StaticString) {
        writeInteger(UInt8(ascii: "-"))
        writeStaticString(message)
        writeCRLF()
    }

    /// `-message\r\n`; as Redis does, CR and LF are trimmed from both ends of the message and replaced by
    /// spaces inside it.
    @inlinable
    public mutating func writeRESPError(_ message: String) {
        writeRESPError(bytes: message.utf8)
    }

    /// `-message\r\n` from raw bytes (Redis's messages may quote client bytes that are not UTF-8).
    /// CR and LF at either end are trimmed and inner ones become spaces, as Redis does.
    @inlinable
    public mutating func writeRESPError<Bytes: BidirectionalCollection<UInt8>>(bytes message: Bytes) {
        writeInteger(UInt8(ascii: "-"))
        let isNewline: (UInt8) -> Bool = { $0 == 0x0D || $0 == 0x0A }
        if message.contains(where: isNewline) {
            let start = message.firstIndex(where: { !isNewline($0) }) ?? message.endIndex
            let end = message.lastIndex(where: { !isNewline($0) }).map { message.index(after: $0) } ?? start
            if start < end {
                writeBytes(message[start..<end].lazy.map { isNewline($0) ? 0x20 : $0 })
            }
        } else {
            writeBytes(message)
        }
        writeCRLF()
    }

    /// `:value\r\n`
    @inlinable
    public mutating func writeRESPInteger(_ value: Int) {
        writeRESPHeader(UInt8(ascii: ":"), value)
    }

    /// `$len\r\nbytes\r\n`
    @inlinable
    public mutating func writeRESPBulkString(_ bytes: UnsafeRawBufferPointer) {
        reserveCapacity(minimumWritableBytes: bytes.count + 24)
        writeRESPHeader(UInt8(ascii: "$"), bytes.count)
        writeBytes(bytes)
        writeCRLF()
    }

    /// `$len\r\nbytes\r\n`
    @inlinable
    public mutating func writeRESPBulkString<Bytes: Sequence<UInt8>>(_ bytes: Bytes) {
        let array = Array(bytes)
        array.withUnsafeBytes { writeRESPBulkString($0) }
    }

    /// `$len\r\ntext\r\n`
    @inlinable
    public mutating func writeRESPBulkString(_ text: String) {
        writeRESPHeader(UInt8(ascii: "$"), text.utf8.count)
        writeString(text)
        writeCRLF()
    }

    /// The bulk string of an integer's decimal digits (as GET returns a counter).
    @inlinable
    public mutating func writeRESPBulkInteger(_ value: Int) {
        var scratch: (UInt64, UInt64, UInt64) = (0, 0, 0)
        withUnsafeMutableBytes(of: &scratch) { raw in
            let n = RESPInteger.format(value, into: raw.baseAddress!)
            writeRESPBulkString(UnsafeRawBufferPointer(rebasing: raw[0..<n]))
        }
    }

    /// A missing value: `$-1\r\n` in RESP2, `_\r\n` in RESP3.
    @inlinable
    public mutating func writeRESPNull(_ version: RESPVersion) {
        if version == .resp3 { writeStaticString("_\r\n") } else { writeStaticString("$-1\r\n") }
    }

    /// A missing array: `*-1\r\n` in RESP2, `_\r\n` in RESP3.
    @inlinable
    public mutating func writeRESPNullArray(_ version: RESPVersion) {
        if version == .resp3 { writeStaticString("_\r\n") } else { writeStaticString("*-1\r\n") }
    }

    /// `*count\r\n`
    @inlinable
    public mutating func writeRESPArrayHeader(_ count: Int) {
        writeRESPHeader(UInt8(ascii: "*"), count)
    }

    /// A map of `count` pairs: `%count\r\n` in RESP3, a flat array of `2 * count` items in RESP2.
    @inlinable
    public mutating func writeRESPMapHeader(_ count: Int, _ version: RESPVersion) {
        if version == .resp3 { writeRESPHeader(UInt8(ascii: "%"), count) } else { writeRESPArrayHeader(count * 2) }
    }

    /// A set: `~count\r\n` in RESP3, an array in RESP2.
    @inlinable
    public mutating func writeRESPSetHeader(_ count: Int, _ version: RESPVersion) {
        writeRESPHeader(version == .resp3 ? UInt8(ascii: "~") : UInt8(ascii: "*"), count)
    }

    /// A push message (RESP3 `>`), an array in RESP2.
    @inlinable
    public mutating func writeRESPPushHeader(_ count: Int, _ version: RESPVersion) {
        writeRESPHeader(version == .resp3 ? UInt8(ascii: ">") : UInt8(ascii: "*"), count)
    }

    /// A boolean: `#t`/`#f` in RESP3, `:1`/`:0` in RESP2.
    @inlinable
    public mutating func writeRESPBoolean(_ value: Bool, _ version: RESPVersion) {
        if version == .resp3 {
            writeStaticString(value ? "#t\r\n" : "#f\r\n")
        } else {
            writeStaticString(value ? ":1\r\n" : ":0\r\n")
        }
    }

    /// A double: `,text\r\n` in RESP3, a bulk string in RESP2. `text` is already formatted.
    @inlinable
    public mutating func writeRESPDouble(formatted text: String, _ version: RESPVersion) {
        if version == .resp3 {
            writeInteger(UInt8(ascii: ","))
            writeString(text)
            writeCRLF()
        } else {
            writeRESPBulkString(text)
        }
    }

    /// A verbatim string (`=len\r\ntxt:...`) in RESP3, a bulk string in RESP2.
    ///
    /// The format is always three bytes on the wire: as Redis does, a shorter one is padded with spaces and a
    /// longer one cut.
    @inlinable
    public mutating func writeRESPVerbatim(_ text: String, format: StaticString = "txt", _ version: RESPVersion) {
        if version == .resp3 {
            writeRESPHeader(UInt8(ascii: "="), text.utf8.count + 4)
            format.withUTF8Buffer { formatBytes in
                for i in 0..<3 {
                    writeInteger(i < formatBytes.count ? formatBytes[i] : UInt8(ascii: " "))
                }
            }
            writeInteger(UInt8(ascii: ":"))
            writeString(text)
            writeCRLF()
        } else {
            writeRESPBulkString(text)
        }
    }

    // MARK: building blocks

    @inlinable
    mutating func writeCRLF() {
        writeInteger(UInt16(0x0D0A), endianness: .big)
    }

    /// `<marker><decimal>\r\n` without allocating.
    @inlinable
    public mutating func writeRESPHeader(_ marker: UInt8, _ value: Int) {
        if value >= 0 && value < 10 {
            // The common case of small counts and lengths: 4 bytes in one store.
            let word = UInt32(marker) << 24 | UInt32(UInt8(ascii: "0") + UInt8(value)) << 16 | 0x0D0A
            writeInteger(word, endianness: .big)
            return
        }
        reserveCapacity(minimumWritableBytes: 24)
        writeWithUnsafeMutableBytes(minimumWritableBytes: 24) { out in
            out[0] = marker
            let n = RESPInteger.format(value, into: out.baseAddress! + 1)
            out[n + 1] = 0x0D
            out[n + 2] = 0x0A
            return n + 3
        }
    }
}
