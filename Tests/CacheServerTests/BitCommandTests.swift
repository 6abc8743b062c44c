import CacheCore
import CacheServer
import RESP
import Testing

/// Bitmaps inside the server: what counts as a change (WATCH, save points), growth, and BITOP's locking of
/// several shards. Replies are compared with Redis's by the differential corpus (bitmaps.corpus).
@Suite("Bitmaps: SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP")
struct BitCommandTests {
    @Test("SETBIT that leaves the bit as it was changes nothing: no WATCH abort, no save point; a flip or growth does")
    func unchangedBitIsNotAWrite() {
        let h = Harness()
        let writer = h.newSession()
        h.run("SETBIT", "b", "3", "1")
        for (command, changes) in [(["SETBIT", "b", "3", "1"], false), (["SETBIT", "b", "4", "0"], false),
                                   (["SETBIT", "b", "4", "1"], true), (["SETBIT", "b", "40", "0"], true)] {
            let seen = h.changeSeen(watching: "b", run: command, as: writer)
            #expect(seen.aborted == changes, "\(command)")
            #expect(seen.counted == changes, "\(command)")
        }
        #expect(h.run("STRLEN", "b") == .integer(6))
    }

    @Test("A bitmap grown bit by bit far past its end keeps every bit set, and counts them")
    func growthKeepsBits() {
        let h = Harness()
        var offsets: [Int] = []
        var offset = 1
        while offset < 3_000_000 {
            offsets.append(offset)
            offset = offset * 3 + 7
        }
        for o in offsets { #expect(h.run("SETBIT", "map", String(o), "1") == .integer(0)) }
        for o in offsets {
            #expect(h.run("GETBIT", "map", String(o)) == .integer(1))
            #expect(h.run("GETBIT", "map", String(o + 1)) == .integer(0))
        }
        #expect(h.run("BITCOUNT", "map") == .integer(offsets.count))
        #expect(h.run("BITPOS", "map", "1", "2") == .integer(offsets.first { $0 >= 16 }!))
        #expect(h.run("STRLEN", "map") == .integer(offsets.last! / 8 + 1))
    }

    @Test("BITOP over keys in many shards, the destination among them")
    func bitopAcrossShards() {
        let h = Harness()
        var expected = [UInt8](repeating: 0, count: 64)
        var arguments = ["BITOP", "XOR", "k0"]
        for i in 0..<40 {
            let value = (0..<(i + 24)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ i &* 7) }
            h.run([Array("SET".utf8), Array("k\(i)".utf8), value])
            for (j, byte) in value.enumerated() { expected[j] ^= byte }
            arguments.append("k\(i)")
        }
        #expect(h.run(arguments.map { Array($0.utf8) }) == .integer(63))
        #expect(h.run("GET", "k0").bytes == Array(expected.prefix(63)))
    }

    @Test("BITOP AND, OR and NOT over values of many lengths, byte for byte", arguments: ["AND", "OR", "NOT"])
    func bitopOperations(operation: String) {
        let h = Harness()
        var values: [[UInt8]] = []
        for i in 0..<12 {
            // Lengths 9 to 64, bytes from a fixed recipe: words and tails both.
            let value = (0..<(9 + (i * 37) % 56)).map { UInt8(truncatingIfNeeded: $0 &* 89 &+ i &* 53 &+ ($0 >> 2)) }
            values.append(value)
            h.run([Array("SET".utf8), Array("v\(i)".utf8), value])
        }
        let sources = operation == "NOT" ? [0] : Array(0..<12)
        let length = sources.map { values[$0].count }.max()!
        var expected = [UInt8](repeating: operation == "AND" ? 0xFF : 0, count: length)
        for j in 0..<length {
            for n in sources {
                let byte = j < values[n].count ? values[n][j] : 0
                switch operation {
                case "AND": expected[j] &= byte
                case "OR": expected[j] |= byte
                default: expected[j] = ~byte
                }
            }
        }
        let command = ["BITOP", operation, "out"] + sources.map { "v\($0)" }
        #expect(h.run(command.map { Array($0.utf8) }) == .integer(length))
        #expect(h.run("GET", "out").bytes == expected)
    }
}

@Suite("Bitmaps: BITOP over sources that expire on the way")
struct BitopExpiryTests {
    @Test("BITOP whose sources expire as it reads them stores into, or deletes, the right key", arguments: [false, true])
    func sourcesExpiring(oneAlive: Bool) {
        let h = Harness()
        for i in 0..<300 { h.run("SET", "keep:\(i)", "value \(i)") }
        h.run("SET", "dest", "old destination")
        var command = ["BITOP", "OR", "dest"]
        // Enough sources that, once they expire, every shard's table shrinks.
        for i in 0..<20_000 {
            h.run("SET", "src:\(i)", "s", "PX", "5")
            command.append("src:\(i)")
        }
        if oneAlive {
            h.run("SET", "alive", "\u{1}\u{2}")
            command.append("alive")
        }
        h.advance(50)
        // Reading the expired sources removes them, moving slots and shrinking tables, the destination's too.
        #expect(h.run(command.map { Array($0.utf8) }) == .integer(oneAlive ? 2 : 0))
        #expect(h.run("GET", "dest") == (oneAlive ? .bulk("\u{1}\u{2}") : .nullBulkString))
        for i in 0..<300 { #expect(h.run("GET", "keep:\(i)") == .bulk("value \(i)")) }
        #expect(h.run("DBSIZE") == .integer(300 + (oneAlive ? 2 : 0)))
    }
}
