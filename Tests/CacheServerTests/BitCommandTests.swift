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
            let before = h.server.keyspace.totalChanges
            #expect(h.run("WATCH", "b") == .ok)
            h.run(command.map { Array($0.utf8) }, as: writer)
            #expect(h.run("MULTI") == .ok)
            h.run("PING")
            let exec = h.run("EXEC")
            #expect((exec == .nullArray) == changes, "\(command)")
            #expect((h.server.keyspace.totalChanges != before) == changes, "\(command)")
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
}
