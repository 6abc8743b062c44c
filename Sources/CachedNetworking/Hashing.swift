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
