/// Decimal integers as RESP and Redis read and write them.
public enum RESPInteger {
    /// Parses a signed 64-bit decimal the way Redis's `string2ll` does: an optional `-`, digits, no leading
    /// zeros (except `0` itself), no spaces or `+`, no overflow. Returns nil for anything else.
    @inlinable
    public static func parse(_ bytes: UnsafeRawBufferPointer) -> Int? {
        let count = bytes.count
        guard count > 0, count <= 20 else { return nil }
        var i = 0
        var negative = false
        if bytes[0] == UInt8(ascii: "-") {
            negative = true
            i = 1
            guard count > 1 else { return nil }
        }
        let first = bytes[i]
        if first == UInt8(ascii: "0") {
            return (count == i + 1 && !negative) ? 0 : nil
        }
        guard first >= UInt8(ascii: "1") && first <= UInt8(ascii: "9") else { return nil }
        var value: UInt64 = 0
        while i < count {
            let d = bytes[i] &- UInt8(ascii: "0")
            guard d <= 9 else { return nil }
            let (m, o1) = value.multipliedReportingOverflow(by: 10)
            let (a, o2) = m.addingReportingOverflow(UInt64(d))
            guard !o1 && !o2 else { return nil }
            value = a
            i += 1
        }
        if negative {
            guard value <= UInt64(Int64.max) + 1 else { return nil }
            return value == UInt64(Int64.max) + 1 ? Int.min : -Int(value)
        }
        guard value <= UInt64(Int64.max) else { return nil }
        return Int(value)
    }

    /// Parses a byte array with ``parse(_:)-(UnsafeRawBufferPointer)``.
    @inlinable
    public static func parse<C: Collection<UInt8>>(_ bytes: C) -> Int? {
        if let r = bytes.withContiguousStorageIfAvailable({ parse(UnsafeRawBufferPointer($0)) }) { return r }
        return Array(bytes).withUnsafeBytes { parse($0) }
    }

    /// Writes the decimal digits of `value` into `out` (at least 20 bytes) and returns how many it wrote.
    @inlinable
    public static func format(_ value: Int, into out: UnsafeMutableRawPointer) -> Int {
        var magnitude = value.magnitude
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes of scratch, filled from the end
        return withUnsafeMutableBytes(of: &digits) { scratch -> Int in
            var pos = 24
            repeat {
                pos -= 1
                scratch[pos] = UInt8(truncatingIfNeeded: magnitude % 10) &+ UInt8(ascii: "0")
                magnitude /= 10
            } while magnitude != 0
            if value < 0 {
                pos -= 1
                scratch[pos] = UInt8(ascii: "-")
            }
            let n = 24 - pos
            out.copyMemory(from: scratch.baseAddress! + pos, byteCount: n)
            return n
        }
    }
}
