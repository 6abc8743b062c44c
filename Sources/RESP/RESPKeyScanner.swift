/// Finds, ahead of parsing, the second argument (the key, for most commands) of each multibulk command at
/// the start of a buffer (the last one may be incomplete past that argument), so that the server can prefetch where those keys live while it runs the
/// commands before them.
///
/// It is a hint, not a parser: it stops quietly at the first thing that is not a plain, whole multibulk
/// command (an inline command, a partial frame, a malformed or oversized length) and never reads past the
/// buffer. ``RESPRequestParser`` still parses and validates every command.
public enum RESPKeyScanner {
    /// Calls `body` with the second argument of each of the first `limit` commands of two arguments or more in
    /// `bytes`; commands of one argument are passed over.
    @inlinable
    public static func forEachKey(
        in bytes: UnsafeRawBufferPointer, limit: Int, _ body: (UnsafeRawBufferPointer) -> Void
    ) {
        var position = 0
        var found = 0
        while found < limit, position < bytes.count, bytes[position] == UInt8(ascii: "*") {
            guard let (count, afterCount) = header(bytes, at: position + 1), count > 0, count <= 1024 else { return }
            position = afterCount
            for argument in 0..<count {
                guard position < bytes.count, bytes[position] == UInt8(ascii: "$"),
                    let (length, start) = header(bytes, at: position + 1), length >= 0
                else { return }
                let end = start + length
                guard end <= bytes.count - 2 else { return }
                if argument == 1 {
                    body(UnsafeRawBufferPointer(rebasing: bytes[start..<end]))
                    found += 1
                }
                position = end + 2
            }
        }
    }

    /// The decimal number at `start`, up to `\r\n`, and the position after the `\n`; nil when there is no
    /// such line in `bytes` or the number is not a plain one of at most 10 digits.
    @inlinable
    static func header(_ bytes: UnsafeRawBufferPointer, at start: Int) -> (Int, Int)? {
        var i = start
        var value = 0
        while i < bytes.count, i - start < 11 {
            let byte = bytes[i]
            if byte == UInt8(ascii: "\r") {
                guard i > start, i + 1 < bytes.count, bytes[i + 1] == UInt8(ascii: "\n") else { return nil }
                return (value, i + 2)
            }
            let digit = byte &- UInt8(ascii: "0")
            guard digit <= 9 else { return nil }
            value = value * 10 + Int(digit)
            i += 1
        }
        return nil
    }
}
