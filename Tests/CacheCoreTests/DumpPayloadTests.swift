import CacheCore
import Testing

@Suite("DUMP payloads: CRC-64, LZF, RDB string encodings")
struct DumpPayloadTests {
    @Test("CRC-64/Jones: the check value of \"123456789\", and eight bytes at a time agrees with one bit at a time")
    func crc64() {
        #expect(bytes("123456789").withUnsafeBytes { CRC64.update(0, $0) } == 0xE9C6_D914_C4B8_D9CA)
        var generator = SeededGenerator(seed: 21)
        let data = (0..<90).map { _ in UInt8.random(in: 0...255, using: &generator) }
        for length in 0...90 {
            var reference: UInt64 = 0
            for byte in data[..<length] {
                reference ^= UInt64(byte)
                for _ in 0..<8 { reference = reference & 1 != 0 ? (reference >> 1) ^ 0x95AC_9329_AC4B_C9B5 : reference >> 1 }
            }
            #expect(Array(data[..<length]).withUnsafeBytes { CRC64.update(0, $0) } == reference, "length \(length)")
        }
    }

    @Test("Redis's payloads decode: its integer, plain and LZF encodings (taken from redis-server 7.0's DUMP)")
    func redisPayloads() {
        let cases: [([UInt8], String)] = [
            ([0x00, 0x03, 0x61, 0x62, 0x63, 0x0A, 0x00, 0xD9, 0xAC, 0x30, 0x3D, 0x41, 0x72, 0xA2, 0xE2], "abc"),
            ([0x00, 0xC0, 0x7B, 0x0A, 0x00, 0x48, 0xE2, 0x53, 0xE1, 0x00, 0x7A, 0x67, 0xB9], "123"),
            ([0x00, 0xC1, 0x2C, 0x01, 0x0A, 0x00, 0x95, 0x42, 0x61, 0xF2, 0x65, 0x82, 0x5C, 0x10], "300"),
            ([0x00, 0xC2, 0x70, 0x11, 0x01, 0x00, 0x0A, 0x00, 0x01, 0xA4, 0x08, 0xFE, 0x95, 0x30, 0x95, 0xA5], "70000"),
            ([0x00, 0xC3, 0x09, 0x24, 0x01, 0x61, 0x61, 0xE0, 0x17, 0x00, 0x01, 0x61, 0x61, 0x0A, 0x00, 0x5D, 0xB2,
              0xD5, 0xD7, 0xF1, 0x99, 0xC5, 0x11], String(repeating: "a", count: 36)),
        ]
        for (payload, text) in cases {
            let decoded = payload.withUnsafeBytes { DumpPayload.decode($0, limit: 1 << 29) }
            #expect(decoded == .success(bytes(text)), "\(text)")
        }
    }

    @Test("What DUMP encodes decodes to the same bytes, for integers, lengths across every length field, binary")
    func roundTrip() {
        var generator = SeededGenerator(seed: 22)
        var values: [[UInt8]] = ["", "0", "-0", "007", "127", "-128", "128", "-32769", "2147483647", "-2147483649",
                                 "12345678901", " 5"].map(bytes)
        for length in [1, 63, 64, 16_383, 16_384, 100_000] {
            values.append((0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) })
        }
        for value in values {
            let payload = value.withUnsafeBytes { DumpPayload.encode($0) }
            #expect(payload.withUnsafeBytes { DumpPayload.decode($0, limit: 1 << 29) } == .success(value))
            // Any one flipped bit is caught by the checksum (or the version).
            var damaged = payload
            let position = Int.random(in: 0..<payload.count, using: &generator)
            damaged[position] ^= 1 << UInt8.random(in: 0...7, using: &generator)
            #expect(damaged.withUnsafeBytes { DumpPayload.decode($0, limit: 1 << 29) } == .failure(.versionOrChecksum))
        }
        #expect(bytes("-5").withUnsafeBytes { DumpPayload.encode($0) }.prefix(3) == [0x00, 0xC0, 0xFB])
        #expect(bytes("007").withUnsafeBytes { DumpPayload.encode($0) }.prefix(2) == [0x00, 0x03])
    }

    @Test("LZF: literals, back references that overlap what they copy, and malformed streams refused")
    func lzf() {
        func run(_ input: [UInt8], _ count: Int) -> [UInt8]? { input.withUnsafeBytes { LZF.decompress($0, count: count) } }
        // "ab", then 10 bytes copied from 2 back: "abababababab".
        #expect(run([0x01, 0x61, 0x62, 0xE0, 0x01, 0x01], 12) == bytes("abababababab"))
        // A back reference of length 7 + 255 + 2 = 264 from one byte back.
        #expect(run([0x00, 0x7A, 0xE0, 0xFF, 0x00], 265) == [UInt8](repeating: 0x7A, count: 265))
        #expect(run([0x01, 0x61, 0x62], 2) == bytes("ab"))
        #expect(run([0x01, 0x61, 0x62], 3) == nil, "shorter than announced")
        #expect(run([0x01, 0x61, 0x62], 1) == nil, "longer than announced")
        #expect(run([0x05, 0x61], 6) == nil, "literal run past the input")
        #expect(run([0x00, 0x61, 0x20, 0x05], 4) == nil, "reference before the start")
        #expect(run([0x00, 0x61, 0xE0], 10) == nil, "cut inside a reference")
        #expect(run([0x00, 0x61, 0x20, 0x00], 1 << 40) == nil, "a length no input of this size can produce")
    }

    @Test("Payloads that are not strings, or not well formed, are refused without reading past their end")
    func refused() {
        func payload(_ body: [UInt8], version: UInt16 = 10) -> [UInt8] {
            var out = body + [UInt8(version & 0xFF), UInt8(version >> 8)]
            let crc = out.withUnsafeBytes { CRC64.update(0, $0) }
            for k in 0..<8 { out.append(UInt8(truncatingIfNeeded: crc >> UInt64(8 * k))) }
            return out
        }
        func decode(_ p: [UInt8], limit: Int = 1 << 29) -> Result<[UInt8], DumpPayload.Failure> {
            p.withUnsafeBytes { DumpPayload.decode($0, limit: limit) }
        }
        #expect(decode(payload([0x01, 0x01, 0x01, 0x61])) == .failure(.notAString(type: 1)))
        #expect(decode(payload([0x16])) == .failure(.badFormat))
        #expect(decode(payload([0x00, 0xC4])) == .failure(.badFormat))
        #expect(decode(payload([0x00, 0x81, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF])) == .failure(.badFormat))
        #expect(decode(payload([0x00, 0x30])) == .failure(.badFormat), "48 bytes announced, 10 there")
        #expect(decode(payload([0x00, 0x03, 0x61, 0x62, 0x63], version: 12)) == .success(bytes("abc")))
        #expect(decode(payload([0x00, 0x03, 0x61, 0x62, 0x63], version: 13)) == .failure(.versionOrChecksum))
        // A compressed string longer than the limit is refused before anything is allocated.
        #expect(decode(payload([0x00, 0xC3, 0x03, 0x0A, 0x00, 0x7A, 0xE0]), limit: 9) == .failure(.badFormat))
        #expect(decode(Array(payload([0x00, 0x03, 0x61, 0x62, 0x63]).dropLast())) == .failure(.versionOrChecksum))
    }
}
