import CacheCore
import Synchronization
import Testing

@Suite("Shard table")
struct ShardTableTests {
    @Test("100k keys with random removals: every remaining key is found, every removed key is gone")
    func insertAndRemoveAtScale() {
        let shard = Shard()
        let n = 100_000
        for i in 0..<n { #expect(shard.put(key(i), bytes("value:\(i)"))) }
        #expect(shard.count == n)

        var generator = SeededGenerator(seed: 42)
        var removed = Set<Int>()
        for i in (0..<n).shuffled(using: &generator).prefix(n * 3 / 5) {
            #expect(shard.delete(key(i)))
            removed.insert(i)
        }
        #expect(shard.count == n - removed.count)
        var missing = 0
        var resurrected = 0
        for i in 0..<n {
            let value = shard.get(key(i))
            if removed.contains(i) {
                if value != nil { resurrected += 1 }
            } else if value != bytes("value:\(i)") {
                missing += 1
            }
        }
        #expect(missing == 0)
        #expect(resurrected == 0)
    }

    @Test("Removing keys interleaved with inserts keeps every live key reachable")
    func interleavedInsertsAndRemovals() {
        let shard = Shard()
        var generator = SeededGenerator(seed: 7)
        var live = Set<Int>()
        for round in 0..<40_000 {
            let i = Int.random(in: 0..<5_000, using: &generator)
            if live.contains(i) {
                #expect(shard.delete(key(i)))
                live.remove(i)
            } else {
                shard.put(key(i), bytes("\(round)"))
                live.insert(i)
            }
        }
        #expect(shard.count == live.count)
        #expect(shard.allKeys == Set(live.map(key)))
        #expect(live.allSatisfy { shard.get(key($0)) != nil })
    }

    @Test("The table grows with the keys and shrinks again when they are removed")
    func growsAndShrinks() {
        let shard = Shard()
        #expect(shard.tableCapacity == 0)
        for i in 0..<10_000 { shard.put(key(i), [1]) }
        let grown = shard.tableCapacity
        #expect(grown >= 10_000 * 4 / 3)
        #expect(grown & (grown - 1) == 0)
        for i in 0..<9_990 { shard.delete(key(i)) }
        #expect(shard.tableCapacity < grown / 8)
        for i in 9_990..<10_000 { #expect(shard.get(key(i)) == [1]) }
    }

    @Test("A table of a page or more is mapped from the system; what a table outgrows or sheds goes back at once")
    func tablesFromAPageUpAreMapped() {
        let mapped = { EntryMemory.mappedBytes.load(ordering: .relaxed) }
        let page = EntryMemory.mappedTableBytes
        let start = mapped()
        let shard = Shard()
        for i in 0..<100 { shard.put(key(i), [1]) }
        #expect(shard.tableCapacity * 8 < page)
        #expect(mapped() == start, "a table smaller than a page comes from the allocator")
        for i in 100..<100_000 { shard.put(key(i), [1]) }
        #expect(shard.tableCapacity * 8 > page)
        #expect(mapped() - start == shard.tableCapacity * 8, "only the current table stays mapped")
        for i in 0..<90_000 { shard.delete(key(i)) }
        #expect(shard.tableCapacity < 100_000, "the table shrank")
        #expect(shard.tableCapacity * 8 >= page)
        #expect(mapped() - start == shard.tableCapacity * 8, "the table it shrank from went back")
        shard.removeAll()
        #expect(mapped() == start)
    }

    @Test("Replacing a value keeps one entry and returns the new bytes, whatever the sizes")
    func replaceValues() {
        let shard = Shard()
        shard.put(bytes("k"), bytes("abc"))
        shard.put(bytes("k"), bytes("xyz"))  // same size: rewritten in place
        #expect(shard.get(bytes("k")) == bytes("xyz"))
        shard.put(bytes("k"), [UInt8](repeating: 7, count: 1000))
        #expect(shard.get(bytes("k")) == [UInt8](repeating: 7, count: 1000))
        shard.put(bytes("k"), [])
        #expect(shard.get(bytes("k")) == [])
        #expect(shard.count == 1)
    }

    @Test("Used bytes go back to the bare table after every key is removed")
    func usedBytesAccounting() {
        let shard = Shard()
        for i in 0..<1000 { shard.put(key(i), [UInt8](repeating: 1, count: i % 50)) }
        #expect(shard.usedBytes > shard.tableCapacity * 8)
        for i in 0..<1000 { shard.delete(key(i)) }
        #expect(shard.usedBytes == shard.tableCapacity * 8)
    }

    @Test("Binary keys and values: NUL bytes, high bytes, the empty key, prefixes")
    func binaryKeysAndValues() {
        let shard = Shard()
        let keys: [[UInt8]] = [[], [0], [0, 0], [0xFF], [0, 0xFF, 0x0D, 0x0A], bytes("a"), bytes("ab"), bytes("a\0b")]
        for (i, k) in keys.enumerated() { shard.put(k, [UInt8(i), 0, 0xFF, 0x80]) }
        #expect(shard.count == keys.count)
        for (i, k) in keys.enumerated() { #expect(shard.get(k) == [UInt8(i), 0, 0xFF, 0x80]) }
        #expect(shard.get([0, 0, 0]) == nil)
        #expect(shard.delete([0]))
        #expect(shard.get([0]) == nil)
        #expect(shard.get([0, 0]) == [2, 0, 0xFF, 0x80])
        #expect(shard.get([]) == [0, 0, 0xFF, 0x80])
    }

    @Test("Large values keep every byte")
    func largeValue() {
        let shard = Shard()
        var generator = SeededGenerator(seed: 3)
        let value = (0..<300_000).map { _ in UInt8.random(in: 0...255, using: &generator) }
        shard.put(bytes("big"), value, expiry: start + 1000)
        #expect(shard.get(bytes("big")) == value)
        #expect(shard.storedExpiry(bytes("big")) == .some(start + 1000))
    }

    @Test("removeAll empties the shard and its counters")
    func removeAllResets() {
        let shard = Shard()
        for i in 0..<100 { shard.put(key(i), [1], expiry: i.isMultiple(of: 2) ? start + 1000 : nil) }
        shard.lock.withLock { shard.removeAll() }
        #expect(shard.count == 0)
        #expect(shard.expiresCount == 0)
        #expect(shard.usedBytes == 0)
        #expect(shard.expiryRegistrations == 0)
        #expect(shard.get(key(0)) == nil)
        shard.put(key(0), [2])
        #expect(shard.get(key(0)) == [2])
    }

    @Test("randomSlot returns an occupied slot, and nil on an empty shard")
    func randomSlot() {
        let shard = Shard()
        var generator = SeededGenerator(seed: 5)
        #expect(shard.lock.withLock { shard.randomSlot(using: &generator) } == nil)
        for i in 0..<3 { shard.put(key(i), [UInt8(i)]) }
        var seen = Set<[UInt8]>()
        for _ in 0..<200 {
            let picked = shard.lock.withLock { shard.randomSlot(using: &generator).map { Array(shard.entry(at: $0).key) } }
            #expect(picked != nil)
            if let picked { seen.insert(picked) }
        }
        #expect(seen == Set((0..<3).map(key)))
    }
}

@Suite("Shard scan")
struct ShardScanTests {
    @Test("A full scan of a still table visits every key")
    func fullScan() {
        let shard = Shard()
        for i in 0..<5_000 { shard.put(key(i), []) }
        var seen = Set<[UInt8]>()
        var cursor: UInt64 = 0
        var calls = 0
        repeat {
            let step = shard.scanStep(cursor)
            seen.formUnion(step.keys)
            cursor = step.next
            calls += 1
        } while cursor != 0 && calls < 1_000_000
        #expect(cursor == 0)
        #expect(seen == shard.allKeys)
        #expect(calls == shard.tableCapacity)
    }

    @Test("Keys present for the whole scan are visited although the table grows between calls")
    func scanWhileGrowing() {
        let shard = Shard()
        for i in 0..<50 { shard.put(key(i), []) }
        let original = Set((0..<50).map(key))
        let initialCapacity = shard.tableCapacity
        var seen = Set<[UInt8]>()
        var cursor: UInt64 = 0
        var next = 50
        var calls = 0
        repeat {
            let step = shard.scanStep(cursor)
            seen.formUnion(step.keys)
            cursor = step.next
            // 40 new keys per call until there are 3,000: the table doubles five times mid-scan.
            for _ in 0..<40 where next < 3_000 {
                shard.put(key(next), [])
                next += 1
            }
            calls += 1
        } while cursor != 0 && calls < 1_000_000
        #expect(cursor == 0)
        #expect(next == 3_000)
        #expect(shard.tableCapacity >= initialCapacity * 16)
        #expect(original.isSubset(of: seen))
    }

    @Test("Keys present for the whole scan are visited although keys are removed and the table shrinks")
    func scanWhileShrinking() {
        let shard = Shard()
        for i in 0..<20_000 { shard.put(key(i), []) }
        let kept = Set((0..<20_000).filter { $0.isMultiple(of: 97) }.map(key))
        var doomed = (0..<20_000).filter { !$0.isMultiple(of: 97) }
        var generator = SeededGenerator(seed: 11)
        doomed.shuffle(using: &generator)
        let initialCapacity = shard.tableCapacity
        var seen = Set<[UInt8]>()
        var cursor: UInt64 = 0
        var calls = 0
        repeat {
            let step = shard.scanStep(cursor)
            seen.formUnion(step.keys)
            cursor = step.next
            for _ in 0..<200 {
                guard let i = doomed.popLast() else { break }
                shard.delete(key(i))
            }
            calls += 1
        } while cursor != 0 && calls < 1_000_000
        #expect(cursor == 0)
        #expect(shard.tableCapacity < initialCapacity)
        #expect(kept.isSubset(of: seen))
    }

    @Test("Scanning an empty shard ends at once")
    func scanEmpty() {
        let shard = Shard()
        #expect(shard.scanStep(0).next == 0)
        #expect(shard.scanStep(0).keys.isEmpty)
    }
}
