/// CRC-32C (Castagnoli, the polynomial iSCSI, ext4 and SCTP use). It guards the blocks of snapshot files.
package enum CRC32C {
    /// The reflected Castagnoli polynomial's tables.
    static let engine = ReflectedCRC<UInt32>(polynomial: 0x82F6_3B78)

    /// The CRC of `bytes` appended to data whose CRC was `crc` (0 for none).
    package static func update(_ crc: UInt32, _ bytes: UnsafeRawBufferPointer) -> UInt32 {
        ~engine.update(~crc, bytes)
    }

    /// The CRC of `bytes`.
    package static func checksum(_ bytes: [UInt8]) -> UInt32 {
        bytes.withUnsafeBytes { update(0, $0) }
    }
}
