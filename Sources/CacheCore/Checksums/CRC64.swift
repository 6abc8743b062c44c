/// CRC-64/Jones, the checksum of Redis's RDB files and DUMP payloads: polynomial 0xad93d23594c935a9, reflected,
/// starting from 0 with no final inversion (the CRC of "123456789" is 0xe9c6d914c4b8d9ca).
package enum CRC64 {
    /// The reflected Jones polynomial's tables.
    static let engine = ReflectedCRC<UInt64>(polynomial: 0x95AC_9329_AC4B_C9B5)

    /// The CRC of `bytes` appended to data whose CRC was `crc` (0 for none).
    package static func update(_ crc: UInt64, _ bytes: UnsafeRawBufferPointer) -> UInt64 {
        engine.update(crc, bytes)
    }
}
