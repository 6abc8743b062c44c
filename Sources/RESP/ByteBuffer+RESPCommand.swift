import NIOCore

/// A value that can be sent as one argument of a command: it writes itself as a RESP bulk string.
///
/// `String`, `Substring`, `[UInt8]`, `ByteBuffer` and `Int` (as its decimal digits) conform.
public protocol RESPCommandArgument {
    /// Appends `$<length>\r\n<bytes>\r\n` for this argument to `buffer`.
    ///
    /// - Parameter buffer: The buffer to append to.
    func writeRESPBulkString(into buffer: inout ByteBuffer)
}

extension String: RESPCommandArgument {
    /// Appends the string's UTF-8 bytes as a bulk string.
    @inlinable
    public func writeRESPBulkString(into buffer: inout ByteBuffer) {
        buffer.writeRESPBulkString(self)
    }
}

extension Substring: RESPCommandArgument {
    /// Appends the substring's UTF-8 bytes as a bulk string.
    @inlinable
    public func writeRESPBulkString(into buffer: inout ByteBuffer) {
        buffer.writeRESPHeader(UInt8(ascii: "$"), self.utf8.count)
        buffer.writeSubstring(self)
        buffer.writeCRLF()
    }
}

extension Array: RESPCommandArgument where Element == UInt8 {
    /// Appends the bytes as a bulk string.
    @inlinable
    public func writeRESPBulkString(into buffer: inout ByteBuffer) {
        self.withUnsafeBytes { buffer.writeRESPBulkString($0) }
    }
}

extension ByteBuffer: RESPCommandArgument {
    /// Appends this buffer's readable bytes as a bulk string.
    @inlinable
    public func writeRESPBulkString(into buffer: inout ByteBuffer) {
        buffer.writeRESPBulkString(self)
    }
}

extension Int: RESPCommandArgument {
    /// Appends the integer's decimal digits as a bulk string (`EXPIRE key 10` sends `$2\r\n10\r\n`).
    @inlinable
    public func writeRESPBulkString(into buffer: inout ByteBuffer) {
        buffer.writeRESPBulkInteger(self)
    }
}

extension ByteBuffer {
    /// `$len\r\nbytes\r\n` for the readable bytes of `bytes`, which are not consumed.
    ///
    /// - Parameter bytes: The payload.
    @inlinable
    public mutating func writeRESPBulkString(_ bytes: ByteBuffer) {
        reserveCapacity(minimumWritableBytes: bytes.readableBytes + 24)
        writeRESPHeader(UInt8(ascii: "$"), bytes.readableBytes)
        writeImmutableBuffer(bytes)
        writeCRLF()
    }

    /// Writes a command as a client sends it: a RESP array of bulk strings, `*2\r\n$3\r\nGET\r\n$1\r\nk\r\n`.
    ///
    /// Arguments of different types can be mixed: `buffer.writeRESPCommand("SET", key, payload, "EX", 60)`.
    /// Without arguments it writes `*0\r\n`, which a server skips.
    /// - Parameter arguments: The command name and its arguments, in order.
    @inlinable
    public mutating func writeRESPCommand<each Argument: RESPCommandArgument>(_ arguments: repeat each Argument) {
        var count = 0
        for _ in repeat each arguments { count += 1 }
        writeRESPArrayHeader(count)
        for argument in repeat each arguments {
            argument.writeRESPBulkString(into: &self)
        }
    }

    /// Writes a command whose arguments are in a collection, as ``writeRESPCommand(_:)`` does.
    ///
    /// - Parameter arguments: The command name and its arguments, in order.
    @inlinable
    public mutating func writeRESPCommand<Arguments: Collection>(arguments: Arguments)
    where Arguments.Element: RESPCommandArgument {
        writeRESPArrayHeader(arguments.count)
        for argument in arguments {
            argument.writeRESPBulkString(into: &self)
        }
    }
}
