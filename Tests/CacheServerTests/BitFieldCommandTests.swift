import CacheCore
import CacheServer
import RESP
import Testing

/// BITFIELD inside the server: counters packed in one string, and what counts as a change. Replies, errors and
/// overflow rules are compared with Redis's by the differential corpus (bitfield.corpus).
@Suite("BITFIELD and BITFIELD_RO")
struct BitFieldCommandTests {
    @Test("Thousands of 12-bit counters in one string, incremented by #n, read back exactly and as GETBIT sees them")
    func packedCounters() {
        let h = Harness()
        let counters = 3_000
        for round in 1...3 {
            for i in stride(from: 0, to: counters, by: 1) {
                let reply = h.run("BITFIELD", "hits", "INCRBY", "u12", "#\(i)", String(i % 100))
                #expect(reply.elements?.first?.int == round * (i % 100), "counter \(i), round \(round)")
            }
        }
        #expect(h.run("STRLEN", "hits") == .integer(counters * 12 / 8))
        for i in [0, 1, 99, 100, 1_234, counters - 1] {
            #expect(h.run("BITFIELD_RO", "hits", "GET", "u12", "#\(i)").elements?.first?.int == 3 * (i % 100))
        }
        // Counter 1 holds 3: 0000 0000 0011, in bits 12-23.
        #expect(h.run("GETBIT", "hits", "22") == .integer(1))
        #expect(h.run("GETBIT", "hits", "23") == .integer(1))
        #expect(h.run("GETBIT", "hits", "21") == .integer(0))
    }

    @Test("A SET or INCRBY that changes a field, or grows the value, is a write; GETs, a FAIL and a field set to itself are not")
    func whatIsAChange() {
        let h = Harness()
        let writer = h.newSession()
        h.run("SET", "f", "abc")
        let cases: [([String], Bool)] = [
            (["BITFIELD", "f", "GET", "u8", "0", "GET", "i64", "100"], false),
            (["BITFIELD_RO", "f", "GET", "u8", "0"], false),
            (["BITFIELD", "f"], false),
            (["BITFIELD", "f", "SET", "u8", "0", "97"], false),  // 'a' is 97 already
            (["BITFIELD", "f", "INCRBY", "u8", "8", "0"], false),
            (["BITFIELD", "f", "OVERFLOW", "FAIL", "INCRBY", "u8", "0", "1000"], false),
            (["BITFIELD", "f", "GET", "u8", "0", "SET", "u8", "0", "x"], false),
            (["BITFIELD", "f", "SET", "u8", "0", "65"], true),
            (["BITFIELD", "f", "INCRBY", "u8", "0", "1"], true),
            (["BITFIELD", "f", "SET", "u1", "100", "0"], true),  // grows the value, though the bit was 0
        ]
        for (command, changes) in cases {
            let seen = h.changeSeen(watching: "f", run: command, as: writer)
            #expect(seen.aborted == changes, "\(command)")
            #expect(seen.counted == changes, "\(command)")
        }
        let value: [UInt8] = h.run("GET", "f").bytes ?? []
        #expect(value.prefix(3).elementsEqual("Bbc".utf8))
        #expect(h.run("STRLEN", "f") == .integer(13))
    }
}
