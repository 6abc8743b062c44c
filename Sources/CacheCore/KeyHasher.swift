/// A fast seeded 64-bit hash for keys.
///
/// The seed is random per process, so a client cannot choose keys that collide (hash flooding).
/// Short keys (the common case) cost two multiplications.
public struct KeyHasher: Sendable {
    @usableFromInline let seed: UInt64

    /// A hasher with a random seed.
    public init() {
        self.seed = UInt64.random(in: 1...UInt64.max)
    }

    /// A hasher with a fixed seed, for reproducible tests.
    public init(seed: UInt64) {
        self.seed = seed | 1
    }

    @usableFromInline static let k0: UInt64 = 0xa076_1d64_78bd_642f
    @usableFromInline static let k1: UInt64 = 0xe703_7ed1_a0b4_28db
    @usableFromInline static let k2: UInt64 = 0x8ebc_6af0_9c88_c6e3

    @inlinable @inline(__always)
    static func mix(_ a: UInt64, _ b: UInt64) -> UInt64 {
        let r = a.multipliedFullWidth(by: b)
        return r.high ^ r.low
    }

    @inlinable @inline(__always)
    static func load64(_ p: UnsafeRawPointer, _ offset: Int) -> UInt64 {
        UInt64(littleEndian: p.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
    }

    @inlinable @inline(__always)
    static func load32(_ p: UnsafeRawPointer, _ offset: Int) -> UInt64 {
        UInt64(UInt32(littleEndian: p.loadUnaligned(fromByteOffset: offset, as: UInt32.self)))
    }

    /// The hash of `bytes`.
    @inlinable
    public func hash(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        let n = bytes.count
        var a: UInt64 = 0
        var b: UInt64 = 0
        var s = seed ^ Self.k0
        guard let p = bytes.baseAddress, n > 0 else { return Self.mix(s ^ Self.k1, Self.k2) }
        if n <= 16 {
            if n >= 8 {
                a = Self.load64(p, 0)
                b = Self.load64(p, n - 8)
            } else if n >= 4 {
                a = Self.load32(p, 0) << 32 | Self.load32(p, n - 4)
            } else {
                a = UInt64(p.load(as: UInt8.self)) << 16 | UInt64(p.load(fromByteOffset: n >> 1, as: UInt8.self)) << 8
                    | UInt64(p.load(fromByteOffset: n - 1, as: UInt8.self))
            }
        } else {
            var i = 0
            while n - i > 16 {
                s = Self.mix(Self.load64(p, i) ^ Self.k1, Self.load64(p, i + 8) ^ s)
                i += 16
            }
            a = Self.load64(p, n - 16)
            b = Self.load64(p, n - 8)
        }
        return Self.mix(Self.k1 ^ UInt64(n), Self.mix(a ^ Self.k1, b ^ s))
    }

    /// The hash of a byte array.
    @inlinable
    public func hash(_ bytes: [UInt8]) -> UInt64 {
        bytes.withUnsafeBytes { hash($0) }
    }
}
