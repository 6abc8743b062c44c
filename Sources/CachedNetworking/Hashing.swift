/// FNV-1a, 64 bits: a fast non-cryptographic hash for key suffixes and envelope checksums.
///
/// Keys never rely on the hash alone: every stored envelope carries the full method, URL and `Vary`'d
/// values, which are compared on read, so a collision reads as a miss.
struct FNV1a64 {
    private(set) var value: UInt64 = 0xcbf2_9ce4_8422_2325

    mutating func combine(_ bytes: some Sequence<UInt8>) {
        for byte in bytes {
            value ^= UInt64(byte)
            value &*= 0x0000_0100_0000_01b3
        }
    }

    static func hash(_ text: String) -> UInt64 {
        var hasher = FNV1a64()
        hasher.combine(text.utf8)
        return hasher.value
    }

    /// 16 lowercase hexadecimal digits.
    static func hex(_ value: UInt64) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }
}
