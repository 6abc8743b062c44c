import RESP

/// The arguments of one command, as views into the receive buffer (no copies).
///
/// Valid only during the command's execution: the bytes belong to the connection's buffer.
package struct Arguments {
    @usableFromInline let base: UnsafeRawPointer
    @usableFromInline let spans: UnsafeBufferPointer<RESPArgumentSpan>

    @inlinable
    package init(base: UnsafeRawPointer, spans: UnsafeBufferPointer<RESPArgumentSpan>) {
        self.base = base
        self.spans = spans
    }

    /// The number of arguments, the command name included.
    @inlinable
    package var count: Int { spans.count }

    /// Argument `index` (0 is the command name).
    @inlinable @inline(__always)
    package subscript(_ index: Int) -> UnsafeRawBufferPointer {
        let span = spans[index]
        return UnsafeRawBufferPointer(start: base + span.offset, count: span.count)
    }

    /// The arguments from `count` on: a command given as arguments of another (ACL DRYRUN's).
    package func dropping(_ count: Int) -> Arguments {
        Arguments(base: base, spans: UnsafeBufferPointer(rebasing: spans[count...]))
    }

    /// Argument `index` as text (invalid UTF-8 is repaired), for names and messages.
    package func string(_ index: Int) -> String {
        String(decoding: self[index], as: UTF8.self)
    }

    /// Argument `index` as bytes.
    package func bytes(_ index: Int) -> [UInt8] {
        Array(self[index])
    }

    /// Argument `index` as a 64-bit integer in Redis's strict syntax, or nil.
    @inlinable
    package func integer(_ index: Int) -> Int? {
        RESPInteger.parse(self[index])
    }

    /// Whether argument `index` equals `word` ignoring ASCII case (`word` must be lowercase).
    @inlinable
    package func matches(_ index: Int, _ word: StaticString) -> Bool {
        let a = self[index]
        guard a.count == word.utf8CodeUnitCount else { return false }
        let w = word.utf8Start
        for i in 0..<a.count {
            var c = a[i]
            if c >= UInt8(ascii: "A") && c <= UInt8(ascii: "Z") { c |= 0x20 }
            if c != w[i] { return false }
        }
        return true
    }
}
