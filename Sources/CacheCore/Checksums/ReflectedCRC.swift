/// A reflected CRC of 32 or 64 bits computed eight bytes at a time with eight lookup tables ("slicing by 8").
/// ``CRC32C`` and ``CRC64`` are this with their polynomials; this type leaves the initial value and any
/// inversion to them.
package struct ReflectedCRC<Word: FixedWidthInteger & UnsignedInteger>: @unchecked Sendable {
    /// Eight tables of 256 entries: table k maps a byte to its CRC after k more zero bytes. Never freed: each
    /// CRC has one, made once.
    let tables: UnsafePointer<Word>

    /// The tables for the reflected `polynomial`.
    init(polynomial: Word) {
        let t = UnsafeMutablePointer<Word>.allocate(capacity: 8 * 256)
        for i in 0..<256 {
            var c = Word(i)
            for _ in 0..<8 { c = c & 1 != 0 ? (c >> 1) ^ polynomial : c >> 1 }
            t[i] = c
        }
        for k in 1..<8 {
            for i in 0..<256 {
                let previous = t[(k - 1) * 256 + i]
                t[k * 256 + i] = (previous >> 8) ^ t[Int(truncatingIfNeeded: previous & 0xFF)]
            }
        }
        tables = UnsafePointer(t)
    }

    /// The register `c` after `bytes`.
    func update(_ c: Word, _ bytes: UnsafeRawBufferPointer) -> Word {
        guard var p = bytes.baseAddress else { return c }
        var n = bytes.count
        let t = tables
        var c = c
        while n >= 8 {
            let word = UInt64(littleEndian: p.loadUnaligned(as: UInt64.self)) ^ UInt64(truncatingIfNeeded: c)
            c = t[7 * 256 + Int(word & 0xFF)]
                ^ t[6 * 256 + Int((word >> 8) & 0xFF)]
                ^ t[5 * 256 + Int((word >> 16) & 0xFF)]
                ^ t[4 * 256 + Int((word >> 24) & 0xFF)]
                ^ t[3 * 256 + Int((word >> 32) & 0xFF)]
                ^ t[2 * 256 + Int((word >> 40) & 0xFF)]
                ^ t[1 * 256 + Int((word >> 48) & 0xFF)]
                ^ t[Int(word >> 56)]
            p += 8
            n -= 8
        }
        while n > 0 {
            c = (c >> 8) ^ t[Int(truncatingIfNeeded: (c ^ Word(p.load(as: UInt8.self))) & 0xFF)]
            p += 1
            n -= 1
        }
        return c
    }
}
