import CacheCore
import Testing

@Suite("Values that grow (APPEND, SETRANGE past the end)")
struct ValueGrowthTests {
    /// Appends `part` to `key`'s value through `growValue`, as APPEND does; returns the entry's block address
    /// afterwards (to see whether it moved).
    @discardableResult
    private func append(_ shard: Shard, _ key: [UInt8], _ part: [UInt8], now: Int64 = start) -> UnsafeMutableRawPointer? {
        let hash = hashOf(key)
        return shard.lock.withLock {
            key.withUnsafeBytes { k -> UnsafeMutableRawPointer? in
                guard let index = shard.lookup(k, hash: hash, now: now) else { return nil }
                let oldCount = shard.entry(at: index).value.count
                guard let out = shard.growValue(at: index, hash: hash, to: oldCount + part.count) else { return nil }
                part.withUnsafeBytes { p in
                    if p.count > 0 { (out.baseAddress! + oldCount).copyMemory(from: p.baseAddress!, byteCount: p.count) }
                }
                return shard.entry(at: index).base
            }
        }
    }

    private func allocatedBytes(_ shard: Shard) -> Int {
        shard.lock.withLock {
            var total = 0
            shard.forEach { total += $0.allocatedSize }
            return total
        }
    }

    @Test("Growth across the value-length field's widths keeps every byte, the TTL and the other keys")
    func contentAcrossLengthWidths() {
        let shard = Shard()
        let expiry = start + 60_000
        #expect(shard.put(bytes("plain"), bytes("a")))
        #expect(shard.put(bytes("timed"), bytes("a"), expiry: expiry))
        #expect(shard.put(bytes("other"), bytes("unchanged")))
        var expected: [UInt8] = bytes("a")
        var generator = SeededGenerator(seed: 3)
        // Lengths 1 ... past 2^21 cross the 1-, 2-, 3- and 4-byte length fields.
        var step = 1
        while expected.count < (1 << 21) + 1000 {
            let part = (0..<step).map { _ in UInt8.random(in: 0...255, using: &generator) }
            #expect(append(shard, bytes("plain"), part) != nil)
            #expect(append(shard, bytes("timed"), part) != nil)
            expected += part
            step = min(step * 3 + 1, 40_000)
        }
        #expect(shard.get(bytes("plain")) == expected)
        #expect(shard.get(bytes("timed")) == expected)
        #expect(shard.storedExpiry(bytes("timed")) == .some(expiry))
        #expect(shard.storedExpiry(bytes("plain")) == .some(nil))
        #expect(shard.get(bytes("other")) == bytes("unchanged"))
        #expect(shard.count == 3 && shard.expiresCount == 1)
    }

    @Test("A value built by many small appends moves a logarithmic number of times, not once per append")
    func amortizedGrowth() {
        let shard = Shard()
        #expect(shard.put(bytes("log"), []))
        var moves = 0
        var last: UnsafeMutableRawPointer? = nil
        let part = [UInt8](repeating: 0x61, count: 64)
        for _ in 0..<20_000 {  // 1.28 MB in the end
            let base = append(shard, bytes("log"), part)
            #expect(base != nil)
            if base != last { moves += 1 }
            last = base
        }
        #expect(shard.get(bytes("log"))?.count == 20_000 * 64)
        // Doubling from a few bytes to 1.28 MB is about 20 moves; copying on every call would be 20,000.
        #expect(moves <= 30, "moved \(moves) times")
    }

    @Test("The memory a shard counts follows its entries' blocks, room to grow included, and returns on delete")
    func accountingIncludesRoom() {
        let grown = Shard()
        let control = Shard()
        for shard in [grown, control] {
            for i in 0..<50 { #expect(shard.put(key(i), bytes("v"), expiry: i.isMultiple(of: 2) ? start + 1_000 : nil)) }
        }
        /// What the shard counts beyond its entries' blocks and its expiry index (the table).
        func rest(_ shard: Shard) -> Int { shard.usedBytes - allocatedBytes(shard) - shard.expiryRegistrations * 8 }
        let before = rest(grown)
        let entriesBefore = allocatedBytes(grown)
        for round in 0..<40 {
            for i in stride(from: 0, to: 50, by: 1 + round % 3) {
                append(grown, key(i), [UInt8](repeating: UInt8(round), count: 37 * (round + 1)))
            }
        }
        #expect(allocatedBytes(grown) > entriesBefore + 50 * 37 * 40)
        #expect(rest(grown) == before)
        for shard in [grown, control] {
            for i in 0..<50 { #expect(shard.delete(key(i))) }
        }
        #expect(grown.usedBytes - grown.expiryRegistrations * 8 == control.usedBytes - control.expiryRegistrations * 8)
    }
}
