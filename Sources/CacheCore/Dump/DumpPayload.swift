/// The serialized value DUMP returns and RESTORE takes, in Redis's format, so that values move between this
/// server and Redis in either direction:
///
///     [type: 1][value][RDB version: 2, little-endian][CRC-64/Jones of everything before it: 8, little-endian]
///
/// A string is type 0, and its value is one of Redis's RDB string encodings: an integer (a canonical decimal of
/// at most 11 characters that fits 32 bits, in 1, 2 or 4 bytes), the bytes after their length, or (read only)
/// LZF-compressed bytes. This server writes the first two; Redis also compresses strings of more than 20 bytes,
/// which are read back all the same.
package enum DumpPayload {
    /// The RDB version written: Redis 7.0's, so that Redis 7.0 and later restore what DUMP gives.
    package static let writtenVersion: UInt16 = 10
    /// The newest RDB version read: up to Redis 7.4's, whose string encodings are the same.
    package static let newestReadVersion: UInt16 = 12

    /// Why a payload was refused.
    package enum Failure: Error, Equatable {
        /// Shorter than its footer, from a newer RDB version, or failing its checksum.
        case versionOrChecksum
        /// Not a well-formed string value.
        case badFormat
        /// A well-formed value of another type (a list, a hash...), which this server does not store.
        case notAString(type: UInt8)
    }

    static let stringType: UInt8 = 0

    /// The payload of the string `value`.
    package static func encode(_ value: UnsafeRawBufferPointer) -> [UInt8] {
        var out: [UInt8] = [stringType]
        out.reserveCapacity(value.count + 20)
        if let integer = integerEncoding(value) {
            out.append(contentsOf: integer)
        } else {
            appendLength(value.count, to: &out)
            out.append(contentsOf: value)
        }
        out.append(UInt8(truncatingIfNeeded: writtenVersion))
        out.append(UInt8(truncatingIfNeeded: writtenVersion >> 8))
        let crc = out.withUnsafeBytes { CRC64.update(0, $0) }
        for shift in stride(from: 0, to: 64, by: 8) { out.append(UInt8(truncatingIfNeeded: crc >> UInt64(shift))) }
        return out
    }

    /// The string in `payload`, or why it was refused. `limit` bounds the length of a compressed string.
    package static func decode(_ payload: UnsafeRawBufferPointer, limit: Int) -> Result<[UInt8], Failure> {
        let count = payload.count
        guard count >= 10 else { return .failure(.versionOrChecksum) }
        let version = UInt16(payload[count - 10]) | UInt16(payload[count - 9]) << 8
        var stored: UInt64 = 0
        for k in 0..<8 { stored |= UInt64(payload[count - 8 + k]) << UInt64(8 * k) }
        guard version <= newestReadVersion,
            CRC64.update(0, UnsafeRawBufferPointer(rebasing: payload[..<(count - 8)])) == stored
        else { return .failure(.versionOrChecksum) }
        // Read as Redis reads it: from the whole payload, footer included, so that a value whose length runs
        // into the footer (a payload made by hand) is taken as Redis takes it.
        var reader = Reader(bytes: payload)
        guard let type = reader.byte() else { return .failure(.badFormat) }
        guard type == stringType else {
            // RDB types 1-21 are lists, sets, sorted sets, hashes, modules and streams in their encodings.
            return .failure(type <= 21 ? .notAString(type: type) : .badFormat)
        }
        guard let value = reader.string(limit: limit) else { return .failure(.badFormat) }
        return .success(value)
    }

    /// Redis's integer encoding of `value`, when it has one: a canonical decimal (what formatting its number
    /// gives back) of at most 11 characters whose number fits 32 bits.
    static func integerEncoding(_ value: UnsafeRawBufferPointer) -> [UInt8]? {
        guard value.count <= 11, let number = parseCanonical(value) else { return nil }
        if number >= -128 && number <= 127 {
            return [0xC0, UInt8(truncatingIfNeeded: number)]
        }
        if number >= -32768 && number <= 32767 {
            return [0xC1, UInt8(truncatingIfNeeded: number), UInt8(truncatingIfNeeded: number >> 8)]
        }
        if number >= -2_147_483_648 && number <= 2_147_483_647 {
            return [0xC2] + (0..<4).map { UInt8(truncatingIfNeeded: number >> ($0 * 8)) }
        }
        return nil
    }

    /// The number `value` spells in the canonical form: digits with no leading zero, an optional minus sign
    /// before a number other than zero.
    static func parseCanonical(_ value: UnsafeRawBufferPointer) -> Int? {
        guard let first = value.first else { return nil }
        var i = first == UInt8(ascii: "-") ? 1 : 0
        guard i < value.count else { return nil }
        if value[i] == UInt8(ascii: "0") { return value.count == 1 ? 0 : nil }
        var number = 0
        while i < value.count {
            let digit = Int(value[i]) - 48
            guard digit >= 0 && digit <= 9 else { return nil }
            number = number * 10 + digit  // at most 11 characters: no overflow
            i += 1
        }
        return first == UInt8(ascii: "-") ? -number : number
    }

    /// RDB's length encoding: 6 bits, 14 bits (big-endian), or a marker and 4 or 8 big-endian bytes.
    static func appendLength(_ length: Int, to out: inout [UInt8]) {
        if length < 1 << 6 {
            out.append(UInt8(length))
        } else if length < 1 << 14 {
            out.append(0x40 | UInt8(length >> 8))
            out.append(UInt8(truncatingIfNeeded: length))
        } else if length <= Int(UInt32.max) {
            out.append(0x80)
            for shift in stride(from: 24, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: length >> shift)) }
        } else {
            out.append(0x81)
            for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: length >> shift)) }
        }
    }

    /// Reads a payload's value, front to back.
    struct Reader {
        let bytes: UnsafeRawBufferPointer
        var position = 0

        mutating func byte() -> UInt8? {
            guard position < bytes.count else { return nil }
            defer { position += 1 }
            return bytes[position]
        }

        /// `count` bytes, or nil when fewer are left.
        mutating func take(_ count: Int) -> UnsafeRawBufferPointer? {
            guard count >= 0, count <= bytes.count - position else { return nil }
            defer { position += count }
            return UnsafeRawBufferPointer(rebasing: bytes[position..<position + count])
        }

        /// A plain length (not a special encoding).
        mutating func length() -> Int? {
            guard case .length(let n)? = lengthOrEncoding() else { return nil }
            return n
        }

        enum LengthOrEncoding { case length(Int), encoding(UInt8) }

        mutating func lengthOrEncoding() -> LengthOrEncoding? {
            guard let first = byte() else { return nil }
            switch first >> 6 {
            case 0:
                return .length(Int(first & 0x3F))
            case 1:
                guard let second = byte() else { return nil }
                return .length(Int(first & 0x3F) << 8 | Int(second))
            case 2:
                let width: Int
                switch first {
                case 0x80: width = 4
                case 0x81: width = 8
                default: return nil
                }
                guard let raw = take(width) else { return nil }
                var n: UInt64 = 0
                for b in raw { n = n << 8 | UInt64(b) }
                guard n <= UInt64(Int.max) else { return nil }
                return .length(Int(n))
            default:
                return .encoding(first & 0x3F)
            }
        }

        /// A string in any of its encodings; a compressed one may be at most `limit` bytes long.
        mutating func string(limit: Int) -> [UInt8]? {
            switch lengthOrEncoding() {
            case .length(let n)?:
                return take(n).map { Array($0) }
            case .encoding(let kind)?:
                switch kind {
                case 0, 1, 2:
                    let width = 1 << Int(kind)
                    guard let raw = take(width) else { return nil }
                    var n: UInt64 = 0
                    for (k, b) in raw.enumerated() { n |= UInt64(b) << UInt64(8 * k) }
                    // Sign-extended from its width.
                    let shift = UInt64(64 - 8 * width)
                    let number = Int64(bitPattern: n << shift) >> Int64(shift)
                    return Array(String(number).utf8)
                case 3:
                    guard let compressed = length(), let count = length(), count <= limit,
                        let input = take(compressed)
                    else { return nil }
                    return LZF.decompress(input, count: count)
                default:
                    return nil
                }
            case nil:
                return nil
            }
        }
    }
}
