import CachedTestSupport
import Foundation
import Testing

/// DUMP and RESTORE between cached-server and redis-server, both ways: what one serializes the other restores
/// byte for byte, Redis's LZF-compressed payloads included.
@Suite("DUMP and RESTORE across cached-server and redis-server")
struct DumpRestoreLiveTests {
    /// Values of every encoding DUMP chooses: small and large integers, compressible and random bytes, empty,
    /// lengths around the 6-, 14- and 32-bit length fields.
    static func values() -> [[UInt8]] {
        var generator = SystemRandomNumberGenerator()
        var values: [[UInt8]] = ["", "0", "-1", "127", "-128", "128", "32767", "-32769", "2147483647", "-2147483648",
                                 "2147483648", "007", "-0", " 1", "12345678901", "123456789012"].map { Array($0.utf8) }
        for length in [20, 21, 63, 64, 100, 16_383, 16_384, 70_000, 1_100_000] {
            values.append((0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) })
            values.append((0..<length).map { UInt8(truncatingIfNeeded: $0 % 7 + 97) })  // compresses
        }
        return values
    }

    @Test("A value DUMPed by either server is RESTOREd by the other with its bytes, TTL and encoding")
    func bothWays() throws {
        let cached = try ServerProcess.start(.cached)
        defer { cached.stop() }
        let redis = try ServerProcess.start(.redis)
        defer { redis.stop() }
        let c = try cached.connect()
        let r = try redis.connect()
        for (index, value) in Self.values().enumerated() {
            let key = Array("v\(index)".utf8)
            for (source, target) in [(c, r), (r, c)] {
                #expect(try source.command([Array("SET".utf8), key, value]) == .status("OK"))
                guard case .bulk(let payload) = try source.command([Array("DUMP".utf8), key]) else {
                    Issue.record("DUMP of value \(index) (\(value.count) bytes) gave no payload")
                    continue
                }
                let restore: [[UInt8]] = ["RESTORE", "v\(index)", "60000", "REPLACE"].map { Array($0.utf8) }
                var arguments = restore
                arguments.insert(payload, at: 3)
                #expect(try target.command(arguments) == .status("OK"), "value \(index), \(value.count) bytes")
                #expect(try target.command([Array("GET".utf8), key]) == .bulk(value), "value \(index)")
                guard case .integer(let ttl) = try target.command([Array("PTTL".utf8), key]) else {
                    Issue.record("PTTL of value \(index)")
                    continue
                }
                #expect(ttl > 50_000 && ttl <= 60_000)
                #expect(try target.command([Array("OBJECT".utf8), Array("ENCODING".utf8), key])
                        == source.command([Array("OBJECT".utf8), Array("ENCODING".utf8), key]), "value \(index)")
            }
        }
    }

    @Test("A payload with a flipped byte is refused by both, with Redis's error")
    func corruptPayload() throws {
        let cached = try ServerProcess.start(.cached)
        defer { cached.stop() }
        let redis = try ServerProcess.start(.redis)
        defer { redis.stop() }
        let r = try redis.connect()
        _ = try r.command("SET", "k", String(repeating: "compress me ", count: 50))
        guard case .bulk(let payload) = try r.command("DUMP", "k") else {
            Issue.record("Redis's DUMP gave no payload")
            return
        }
        for position in [0, 1, payload.count / 2, payload.count - 9, payload.count - 1] {
            var damaged = payload
            damaged[position] ^= 0x40
            for connection in [try cached.connect(), r] {
                let reply = try connection.command([Array("RESTORE".utf8), Array("x".utf8), Array("0".utf8), damaged])
                #expect(reply == .error("ERR DUMP payload version or checksum are wrong"), "byte \(position)")
            }
        }
    }
}
