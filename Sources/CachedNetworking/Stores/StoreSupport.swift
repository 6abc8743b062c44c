import Glibc

/// A key compared and hashed by its UTF-8 bytes, as Redis compares keys.
///
/// Swift's `String` equality follows Unicode canonical equivalence, so `"é"` (one scalar) equals `"e\u{301}"`
/// (two). Redis compares bytes and keeps those apart; the memory store does the same so that every store
/// agrees on which keys are distinct.
///
/// The bytes are hashed once, when the key is made (with `Hasher`, so seeded per process), and the table hashes
/// that digest: a hash table rehashes the keys it moves when it removes an entry or grows, and on a full store
/// every write removes one, which would otherwise hash several whole keys (URLs of a hundred bytes) each time.
package struct StoreKey: Hashable, Sendable {
    package let string: String
    /// The hash of the key's bytes.
    package let digest: Int

    package init(_ string: String) {
        var contiguous = string
        contiguous.makeContiguousUTF8()
        self.string = contiguous
        var hasher = Hasher()
        UTF8Bytes.combine(contiguous, into: &hasher)
        self.digest = hasher.finalize()
    }

    package var byteCount: Int { string.utf8.count }

    package static func == (lhs: StoreKey, rhs: StoreKey) -> Bool {
        lhs.digest == rhs.digest && UTF8Bytes.equal(lhs.string, rhs.string)
    }

    package func hash(into hasher: inout Hasher) { hasher.combine(digest) }
}

/// Strings compared and hashed by their UTF-8 bytes rather than by Unicode canonical equivalence (see
/// ``StoreKey``).
package enum UTF8Bytes {
    /// Whether `lhs` and `rhs` have the same bytes.
    package static func equal(_ lhs: String, _ rhs: String) -> Bool {
        let a = lhs.utf8
        let b = rhs.utf8
        guard a.count == b.count else { return false }
        let fast = a.withContiguousStorageIfAvailable { pa in
            b.withContiguousStorageIfAvailable { pb in
                pa.count == 0 || memcmp(pa.baseAddress!, pb.baseAddress!, pa.count) == 0
            }
        }
        if let fast, let fast { return fast }
        return a.elementsEqual(b)
    }

    /// Feeds the bytes of `text` to `hasher`. Native strings hand out their bytes at once; the fallback copies the
    /// same bytes out and feeds them the same way, so that equal bytes always hash alike.
    package static func combine(_ text: String, into hasher: inout Hasher) {
        let done: Void? = text.utf8.withContiguousStorageIfAvailable { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
        if done == nil {
            Array(text.utf8).withUnsafeBytes { hasher.combine(bytes: $0) }
        }
    }
}

extension Duration {
    /// Whole nanoseconds, saturating at the bounds of `Int64`.
    package var storeNanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return seconds < 0 ? .min : .max }
        let (sum, overflow2) = scaled.addingReportingOverflow(attoseconds / 1_000_000_000)
        if overflow2 { return seconds < 0 ? .min : .max }
        return sum
    }

    /// Milliseconds for Redis's `PX`: rounded up, and at least 1 (Redis rejects `PX 0`).
    package var storeMilliseconds: Int64 {
        let (seconds, attoseconds) = components
        if seconds < 0 || (seconds == 0 && attoseconds <= 0) { return 1 }
        let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1000)
        if overflow { return .max / 2 }
        let perMillisecond: Int64 = 1_000_000_000_000_000
        let (whole, remainder) = attoseconds.quotientAndRemainder(dividingBy: perMillisecond)
        let total = scaled + whole + (remainder > 0 ? 1 : 0)
        return Swift.max(1, Swift.min(total, .max / 2))
    }
}

/// Parses a decimal integer the way Redis does for INCR: an optional minus sign and digits, no spaces, no plus
/// sign, no leading zeros, within 64 bits.
package func parseRedisInteger<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> Int64? {
    guard !bytes.isEmpty, bytes.count <= 20 else { return nil }
    var index = bytes.startIndex
    var negative = false
    if bytes[index] == UInt8(ascii: "-") {
        negative = true
        index = bytes.index(after: index)
        guard index != bytes.endIndex else { return nil }
    }
    let firstDigit = bytes[index]
    if firstDigit == UInt8(ascii: "0") {
        // "0" alone; "-0" and "007" are not integers to Redis.
        return !negative && bytes.index(after: index) == bytes.endIndex ? 0 : nil
    }
    var magnitude: UInt64 = 0
    while index != bytes.endIndex {
        let byte = bytes[index]
        guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
        let (times10, o1) = magnitude.multipliedReportingOverflow(by: 10)
        let (sum, o2) = times10.addingReportingOverflow(UInt64(byte - UInt8(ascii: "0")))
        if o1 || o2 { return nil }
        magnitude = sum
        index = bytes.index(after: index)
    }
    if negative {
        if magnitude == UInt64(Int64.max) + 1 { return .min }
        return magnitude <= UInt64(Int64.max) ? -Int64(magnitude) : nil
    }
    return magnitude <= UInt64(Int64.max) ? Int64(magnitude) : nil
}

/// The error texts Redis answers with, so that every store reports the same failures.
package enum RedisErrorText {
    package static let notInteger = "ERR value is not an integer or out of range"
    package static let overflow = "ERR increment or decrement would overflow"
}
