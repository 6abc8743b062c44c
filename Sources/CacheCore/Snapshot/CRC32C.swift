/// CRC-32C (Castagnoli, the polynomial iSCSI, ext4 and SCTP use), computed eight bytes at a time with
/// eight lookup tables ("slicing by 8"). It guards the blocks of snapshot files.
package enum CRC32C {
    /// The reflected Castagnoli polynomial.
    static let polynomial: UInt32 = 0x82F6_3B78

    /// Eight tables of 256 entries: table k maps a byte to its CRC after k more zero bytes.
    nonisolated(unsafe) static let tables: UnsafePointer<UInt32> = {
        let t = UnsafeMutablePointer<UInt32>.allocate(capacity: 8 * 256)
        for i in 0..<256 {
            var c = UInt32(i)
            for _ in 0..<8 { c = c & 1 != 0 ? (c >> 1) ^ polynomial : c >> 1 }
            t[i] = c
        }
        for k in 1..<8 {
            for i in 0..<256 {
                let previous = t[(k - 1) * 256 + i]
                t[k * 256 + i] = (previous >> 8) ^ t[Int(previous & 0xFF)]
            }
        }
        return UnsafePointer(t)
    }()

    /// The CRC of `bytes` appended to data whose CRC was `crc` (0 for none).
    package static func update(_ crc: UInt32, _ bytes: UnsafeRawBufferPointer) -> UInt32 {
        guard var p = bytes.baseAddress else { return crc }
        var n = bytes.count
        let t = tables
        var c = ~crc
        while n >= 8 {
            let word = UInt64(littleEndian: p.loadUnaligned(as: UInt64.self)) ^ UInt64(c)
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
            c = (c >> 8) ^ t[Int((c ^ UInt32(p.load(as: UInt8.self))) & 0xFF)]
            p += 1
            n -= 1
        }
        return ~c
    }

    /// The CRC of `bytes`.
    package static func checksum(_ bytes: [UInt8]) -> UInt32 {
        bytes.withUnsafeBytes { update(0, $0) }
    }
}
