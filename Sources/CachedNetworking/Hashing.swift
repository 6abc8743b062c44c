/// FNV-1a, 64 bits: a fast non-cryptographic hash for key suffixes and envelope checksums.
///
/// Keys never rely on the hash alone: every stored envelope carries the full method, URL and `Vary`'d
/// values, which are compared on read, so a collision reads as a miss.
struct FNV1a64 {
    private(set) var value: UInt64 = 0xcbf2_9ce4_8422_2325

    mutating func combine(_ bytes: some Sequence<UInt8>) {
        // Contiguous bytes (a String's UTF-8, a ByteBuffer's view) go through the pointer loop.
        if bytes.withContiguousStorageIfAvailable({ combine(UnsafeRawBufferPointer($0)) }) != nil { return }
        for byte in bytes {
            value ^= UInt64(byte)
            value &*= Self.prime
        }
    }

    mutating func combine(_ bytes: UnsafeRawBufferPointer) {
        var value = self.value
        for byte in bytes {
            value ^= UInt64(byte)
            value &*= Self.prime
        }
        self.value = value
    }

    private static let prime: UInt64 = 0x0000_0100_0000_01b3

    static func hash(_ text: String) -> UInt64 {
        var hasher = FNV1a64()
        hasher.combine(text.utf8)
        return hasher.value
    }

    /// 16 lowercase hexadecimal digits.
    static func hex(_ value: UInt64) -> String {
        String(unsafeUninitializedCapacity: 16) { buffer in
            for i in 0..<16 {
                let nibble = UInt8(truncatingIfNeeded: value >> UInt64(60 - 4 * i)) & 0xF
                buffer[i] = nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") - 10 + nibble
            }
            return 16
        }
    }
}

/// The checksum of the stored envelope (format 2): the bytes as 64-bit little-endian words, each taken into one
/// accumulator with the round of xxHash64 (add the word times a prime, rotate, multiply by another), the bytes
/// after the last whole word one at a time, and the accumulator through xxHash64's final avalanche; the length
/// seeds it. A round costs a multiply and a rotate on the accumulator's chain per 8 bytes, where bytewise FNV-1a
/// costs a multiply per byte (more than a microsecond for a 1 KB envelope). Every step is a bijection of the
/// accumulator and, for a given accumulator, of its input, so two inputs of the same length that differ in a
/// single word (any change within 8 aligned bytes) never checksum alike.
enum WordChecksum {
    private static let prime1: UInt64 = 0x9E37_79B1_85EB_CA87
    private static let prime2: UInt64 = 0xC2B2_AE3D_27D4_EB4F
    private static let prime3: UInt64 = 0x1656_67B1_9E37_79F9
    private static let prime5: UInt64 = 0x27D4_EB2F_1656_67C5

    static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        var value = prime5 &+ UInt64(bytes.count)
        var offset = 0
        while offset + 8 <= bytes.count {
            let word = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
            value = rotated(value &+ word &* prime2, by: 31) &* prime1
            offset += 8
        }
        while offset < bytes.count {
            value = rotated(value ^ UInt64(bytes[offset]) &* prime5, by: 11) &* prime1
            offset += 1
        }
        value ^= value >> 33
        value &*= prime2
        value ^= value >> 29
        value &*= prime3
        value ^= value >> 32
        return value
    }

    @inline(__always)
    private static func rotated(_ value: UInt64, by bits: UInt64) -> UInt64 { value << bits | value >> (64 - bits) }
}
