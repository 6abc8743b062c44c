import CacheCore
import Testing

/// What each eviction policy removes, on a manual clock: every test passes `now` explicitly and the
/// samplers see every key (samples ≥ keys), so each choice is deterministic.
@Suite("Eviction policies")
struct EvictionTests {
    /// A shard under `policy` whose samplers look at `samples` keys.
    func shard(_ policy: EvictionPolicy, samples: Int = 64) -> Shard {
        let budget = MemoryBudget()
        budget.setPolicy(policy)
        budget.samples.store(samples, ordering: .relaxed)
        return Shard(budget: budget)
    }

    /// Evicts `n` keys and returns them (the keys that disappeared).
    func evict(_ n: Int, from shard: Shard, now: Int64) -> Set<[UInt8]> {
        let before = shard.allKeys
        for _ in 0..<n {
            #expect(shard.lock.withLock { shard.evictOne(now: now) })
        }
        return before.subtracting(shard.allKeys)
    }

    @Test("allkeys-lru evicts the least recently read keys")
    func lru() {
        let s = shard(.allKeysLRU)
        for i in 0..<8 { s.put(key(i), bytes("v"), now: start) }
        // Read every key but 3 and 6, in order, one second apart: 0 is then the least recently read of those.
        var now = start
        for i in [0, 1, 2, 4, 5, 7] {
            now += 1000
            s.read(key(i), now: now)
        }
        #expect(evict(2, from: s, now: now + 1000) == [key(3), key(6)])
        #expect(evict(1, from: s, now: now + 1000) == [key(0)])
        // Reading 1 again makes 2 the oldest.
        s.read(key(1), now: now + 2000)
        #expect(evict(1, from: s, now: now + 3000) == [key(2)])
        #expect(s.evictedKeys == 4)
    }

    @Test("allkeys-lru with one sample evicts some key, not necessarily the oldest")
    func lruOneSample() {
        let s = shard(.allKeysLRU, samples: 1)
        for i in 0..<50 { s.put(key(i), bytes("v"), now: start + Int64(i) * 1000) }
        #expect(evict(10, from: s, now: start + 60_000).count == 10)
        #expect(s.lock.withLock { s.count } == 40)
    }

    @Test("allkeys-lfu keeps frequently read keys over rarely read ones, and counts decay with time")
    func lfu() {
        let s = shard(.allKeysLFU)
        for i in 0..<10 { s.put(key(i), bytes("v"), now: start) }
        // The counter grows with probability 1/11 per read past its first (Redis's logarithmic counter): after
        // 200 reads a hot key has passed key 9's count but for a chance of (10/11)^199, where 50 reads left it
        // tied with key 9 about once in a hundred keys.
        for _ in 0..<200 {
            for i in 0..<5 { s.read(key(i), now: start + 1000) }
        }
        s.read(key(9), now: start + 1000)
        // 5...8 were never read; 9 once; 0...4 200 times.
        #expect(evict(4, from: s, now: start + 2000) == Set((5...8).map(key)))
        #expect(evict(1, from: s, now: start + 2000) == [key(9)])

        // An idle hour takes the hot keys' counts down to 0; a key read now (count 5 + 1) outlives them.
        let later = start + 60 * 60_000
        s.put(key(100), bytes("v"), now: later)
        s.read(key(100), now: later)
        #expect(evict(5, from: s, now: later) == Set((0..<5).map(key)))
        #expect(s.allKeys == [key(100)])
    }

    @Test("volatile policies never evict keys without a TTL, and report when nothing is left to evict",
          arguments: [EvictionPolicy.volatileLRU, .volatileLFU, .volatileRandom, .volatileTTL])
    func volatileOnly(_ policy: EvictionPolicy) {
        let s = shard(policy)
        for i in 0..<10 { s.put(key(i), bytes("v"), now: start) }
        for i in 10..<15 { s.put(key(i), bytes("v"), expiry: start + 3_600_000, now: start) }
        #expect(evict(5, from: s, now: start) == Set((10..<15).map(key)))
        #expect(!s.lock.withLock { s.evictOne(now: start) })
        #expect(s.allKeys == Set((0..<10).map(key)))
    }

    @Test("volatile-ttl evicts the key that expires soonest")
    func volatileTTL() {
        let s = shard(.volatileTTL)
        let expiries: [Int64] = [50, 10, 40, 20, 30]
        for (i, e) in expiries.enumerated() { s.put(key(i), bytes("v"), expiry: start + e * 1000, now: start) }
        s.put(key(99), bytes("v"), now: start)
        #expect(evict(1, from: s, now: start) == [key(1)])
        #expect(evict(1, from: s, now: start) == [key(3)])
        #expect(evict(2, from: s, now: start) == [key(4), key(2)])
        #expect(evict(1, from: s, now: start) == [key(0)])
        #expect(s.allKeys == [key(99)])
    }

    @Test("allkeys-random and volatile-random evict any eligible key",
          arguments: [EvictionPolicy.allKeysRandom, .volatileRandom])
    func random(_ policy: EvictionPolicy) {
        let s = shard(policy)
        for i in 0..<20 { s.put(key(i), bytes("v"), expiry: start + 1000, now: start) }
        #expect(evict(20, from: s, now: start).count == 20)
        #expect(!s.lock.withLock { s.evictOne(now: start) })
    }

    @Test("allkeys-sieve keeps keys read again over keys written once")
    func sieveKeepsReread() {
        let s = shard(.allKeysSieve)
        for i in 0..<40 { s.put(key(i), bytes("v"), now: start) }
        // Read the even keys three times: the hand spares each of them three times.
        for _ in 0..<3 {
            for i in stride(from: 0, to: 40, by: 2) { s.read(key(i), now: start) }
        }
        // Twenty evictions take exactly the twenty keys never read, whatever the table's order.
        #expect(evict(20, from: s, now: start) == Set(stride(from: 1, to: 40, by: 2).map(key)))
        #expect(s.allKeys == Set(stride(from: 0, to: 40, by: 2).map(key)))
        // A new key, never read, goes before the survivors.
        s.put(key(100), bytes("v"), now: start)
        #expect(evict(1, from: s, now: start) == [key(100)])
    }

    @Test("allkeys-sieve: once every key has been spared, the hand evicts them in turn")
    func sieveAllRead() {
        let s = shard(.allKeysSieve)
        for i in 0..<12 { s.put(key(i), bytes("v"), now: start) }
        for _ in 0..<5 {
            for i in 0..<12 { s.read(key(i), now: start) }
        }
        #expect(evict(12, from: s, now: start).count == 12)
        #expect(!s.lock.withLock { s.evictOne(now: start) })
    }

    @Test("noeviction evicts nothing")
    func noEviction() {
        let s = shard(.noEviction)
        s.put(key(1), bytes("v"))
        #expect(!s.lock.withLock { s.evictOne(now: start) })
        #expect(s.allKeys == [key(1)])
    }

    @Test("a key keeps its access record when it gains or loses a TTL")
    func accessSurvivesExpiryChange() {
        let s = shard(.allKeysSieve)
        for i in 0..<10 { s.put(key(i), bytes("v"), now: start) }
        s.read(key(0), now: start)
        s.changeExpiry(key(0), to: start + 60_000)
        s.changeExpiry(key(0), to: nil)
        #expect(evict(9, from: s, now: start) == Set((1..<10).map(key)))
    }
}

@Suite("Memory budget")
struct MemoryBudgetTests {
    @Test("the budget's total equals the shards' bytes once flushed, through writes, deletes, expiry and flushes")
    func accountingIsExact() {
        let keyspace = Keyspace(databases: 2)
        let budget = keyspace.budget
        func shardsTotal() -> Int {
            keyspace.databases.reduce(0) { total, db in total + db.shards.reduce(0) { sum, shard in sum + shard.lock.withLock { shard.usedBytes } } }
        }
        func check() {
            keyspace.flushAccounting()
            #expect(budget.datasetBytes.load(ordering: .relaxed) == shardsTotal())
            #expect(shardsTotal() == keyspace.usedBytes)
        }
        let db = keyspace.databases[0]
        for i in 0..<5000 {
            let k = key(i)
            db.shard(for: hashOf(k)).put(k, Array(repeating: 1, count: i % 300), expiry: i % 3 == 0 ? start + 1000 : nil)
        }
        check()
        #expect(budget.datasetBytes.load(ordering: .relaxed) > 5000 * 16)
        for i in stride(from: 0, to: 5000, by: 4) { db.shard(for: hashOf(key(i))).delete(key(i)) }
        check()
        keyspace.sweepExpired(now: start + 10_000)
        check()
        keyspace.swapDatabases(0, 1)
        check()
        keyspace.databases[1].removeAll()
        check()
        #expect(budget.datasetBytes.load(ordering: .relaxed) == 0)
    }

    @Test("without flushing, the total is within one flush threshold per shard")
    func unflushedDriftIsBounded() {
        let keyspace = Keyspace(databases: 1)
        keyspace.budget.setLimit(64 << 20)
        let db = keyspace.databases[0]
        for i in 0..<20_000 {
            let k = key(i)
            db.shard(for: hashOf(k)).put(k, Array(repeating: 2, count: 100))
        }
        let exact = keyspace.usedBytes
        let threshold = keyspace.budget.flushThreshold.load(ordering: .relaxed)
        let drift = abs(exact - keyspace.budget.datasetBytes.load(ordering: .relaxed))
        #expect(drift <= threshold * Keyspace.shardCount)
        // 1/65536 of the limit per shard: at most 0.4% of the limit for one database's 256 shards.
        #expect(drift <= (64 << 20) / 250)
        #expect(exact > 20_000 * 100)
    }

    @Test("Keyspace.evict brings used memory under the limit, counting every key it evicts")
    func evictToLimit() {
        let keyspace = Keyspace(databases: 2)
        let budget = keyspace.budget
        let db = keyspace.databases[0]
        for i in 0..<10_000 {
            let k = key(i)
            db.shard(for: hashOf(k)).put(k, Array(repeating: 3, count: 100))
        }
        keyspace.flushAccounting()
        let full = budget.datasetBytes.load(ordering: .relaxed)
        budget.setLimit(full / 2)
        #expect(budget.isOverLimit)
        #expect(keyspace.evict(database: 0, shardIndex: 7, now: start))
        #expect(!budget.isOverLimit)
        keyspace.flushAccounting()
        #expect(budget.datasetBytes.load(ordering: .relaxed) <= full / 2)
        #expect(keyspace.evictedKeys == 10_000 - keyspace.totalKeys)
        #expect(keyspace.totalKeys > 4000 && keyspace.totalKeys < 5500)
    }

    @Test("Keyspace.evict fails under noeviction, and under a volatile policy when no key has a TTL")
    func evictFails() {
        for policy in [EvictionPolicy.noEviction, .volatileLRU, .volatileTTL] {
            let keyspace = Keyspace(databases: 1)
            keyspace.budget.setPolicy(policy)
            let db = keyspace.databases[0]
            for i in 0..<100 { db.shard(for: hashOf(key(i))).put(key(i), bytes("value")) }
            keyspace.flushAccounting()
            keyspace.budget.setLimit(100)
            #expect(!keyspace.evict(database: 0, shardIndex: 0, now: start), "\(policy)")
            #expect(keyspace.totalKeys == 100)
        }
    }

    @Test("Keyspace.evict remembers that nothing can be evicted: no search again until a key may be a victim")
    func nothingToEvictIsRemembered() {
        let keyspace = Keyspace(databases: 2)
        keyspace.budget.setPolicy(.volatileRandom)
        let db = keyspace.databases[0]
        for i in 0..<100 { db.shard(for: hashOf(key(i))).put(key(i), bytes("value")) }
        keyspace.flushAccounting()
        keyspace.budget.setLimit(100)
        func searches() -> Int { keyspace.evictionSearches.load(ordering: .relaxed) }
        func evict(_ database: Int = 0, from shardIndex: Int = 0) -> Keyspace.EvictionOutcome {
            keyspace.evict(database: database, shardIndex: shardIndex, now: start, keyBudget: 1)
        }

        // No key has a TTL: one search finds nothing, and the calls after it do not search.
        #expect(evict() == .nothingToEvict)
        #expect(searches() == 1)
        for shardIndex in [0, 5, 200] { #expect(evict(from: shardIndex) == .nothingToEvict) }
        #expect(searches() == 1)
        // Each database is remembered on its own.
        #expect(evict(1) == .nothingToEvict)
        #expect(evict(1) == .nothingToEvict)
        #expect(searches() == 2)

        // A key given a TTL is a victim: the next call searches and evicts it.
        db.shard(for: hashOf(key(7))).changeExpiry(key(7), to: start + 60_000)
        #expect(evict() == .budgetSpent)
        #expect(searches() == 3)
        #expect(!db.shard(for: hashOf(key(7))).holds(key(7)))
        #expect(evict() == .nothingToEvict)
        #expect(evict() == .nothingToEvict)
        #expect(searches() == 4)

        // So is a key written with a TTL.
        db.shard(for: hashOf(key(500))).put(key(500), bytes("v"), expiry: start + 60_000)
        #expect(evict() == .budgetSpent)
        #expect(!db.shard(for: hashOf(key(500))).holds(key(500)))
        #expect(evict() == .nothingToEvict)
        #expect(searches() == 6)

        // A new limit searches again; a policy that may take any key evicts.
        keyspace.budget.setLimit(99)
        #expect(evict() == .nothingToEvict)
        #expect(searches() == 7)
        keyspace.budget.setPolicy(.allKeysRandom)
        #expect(evict() == .budgetSpent)
        #expect(searches() == 8)
        #expect(keyspace.totalKeys == 98)
    }

    @Test("Keyspace.evict moves on to other shards and databases when the written key's shard is empty")
    func evictElsewhere() {
        let keyspace = Keyspace(databases: 2)
        let db = keyspace.databases[1]
        for i in 0..<1000 { db.shard(for: hashOf(key(i))).put(key(i), Array(repeating: 4, count: 100)) }
        keyspace.flushAccounting()
        keyspace.budget.setLimit(keyspace.budget.datasetBytes.load(ordering: .relaxed) - 10_000)
        #expect(keyspace.evict(database: 0, shardIndex: 3, now: start))
        #expect(keyspace.totalKeys < 1000)
    }

    /// A keyspace of eight databases under `policy`: `cold` keys in database 5 and `warm` keys in database 0,
    /// made by `fill`, then a limit `excessKeys` keys' worth below what they use; evicts from database 0's side
    /// (as a write to database 0 would) and returns what each database kept.
    func evictAcross(
        _ policy: EvictionPolicy, cold: Int, warm: Int, excessKeys: Int, now: Int64,
        fill: (_ database: Int, _ key: [UInt8], _ shard: Shard) -> Void
    ) -> (database0: Int, database5: Int) {
        let keyspace = Keyspace(databases: 8)
        keyspace.budget.setPolicy(policy)
        keyspace.budget.samples.store(16, ordering: .relaxed)
        for (database, count) in [(5, cold), (0, warm)] {
            for i in 0..<count {
                let k = key(database * 100_000 + i)
                fill(database, k, keyspace.databases[database].shard(for: hashOf(k)))
            }
        }
        keyspace.flushAccounting()
        let perKey = keyspace.budget.datasetBytes.load(ordering: .relaxed) / (cold + warm)
        keyspace.budget.setLimit(keyspace.budget.datasetBytes.load(ordering: .relaxed) - excessKeys * perKey)
        keyspace.refreshDatabasesInUse()
        #expect(keyspace.evict(database: 0, shardIndex: 9, now: now))
        return (keyspace.databases[0].count, keyspace.databases[5].count)
    }

    @Test("Keyspace.evict chooses among every database holding keys: LRU takes another database's idle keys first")
    func evictAcrossDatabasesLRU() {
        let kept = evictAcross(.allKeysLRU, cold: 2000, warm: 1000, excessKeys: 1000, now: start + 61_000) { database, k, shard in
            shard.put(k, Array(repeating: 1, count: 100), now: start)
            if database == 0 { shard.read(k, now: start + 60_000) }
        }
        #expect(kept.database0 >= 940, "\(kept)")
        #expect(kept.database5 <= 1060, "\(kept)")
    }

    @Test("Keyspace.evict chooses among every database holding keys: volatile-ttl takes the soonest expiry, wherever it is")
    func evictAcrossDatabasesTTL() {
        let kept = evictAcross(.volatileTTL, cold: 2000, warm: 1000, excessKeys: 1000, now: start) { database, k, shard in
            shard.put(k, Array(repeating: 1, count: 100), expiry: start + (database == 5 ? 60_000 : 100_000_000))
        }
        #expect(kept.database0 >= 940, "\(kept)")
    }

    @Test("Keyspace.evict chooses among every database holding keys: random takes them in turn")
    func evictAcrossDatabasesRandom() {
        let kept = evictAcross(.allKeysRandom, cold: 3000, warm: 2000, excessKeys: 2000, now: start) { _, k, shard in
            shard.put(k, Array(repeating: 1, count: 100))
        }
        // About a thousand from each.
        #expect((800...1200).contains(kept.database0), "\(kept)")
        #expect((1800...2200).contains(kept.database5), "\(kept)")
    }

    @Test("a large excess is taken from every shard, each by its policy, not by emptying the first shards")
    func evictSpreads() {
        let keyspace = Keyspace(databases: 1)
        keyspace.budget.setPolicy(.allKeysLRU)
        let db = keyspace.databases[0]
        for i in 0..<10_000 { db.shard(for: hashOf(key(i))).put(key(i), Array(repeating: 2, count: 100), now: start) }
        // The last thousand are read later: an LRU keeps them while it evicts half the keys.
        for i in 9_000..<10_000 { db.shard(for: hashOf(key(i))).read(key(i), now: start + 60_000) }
        keyspace.flushAccounting()
        keyspace.budget.setLimit(keyspace.budget.datasetBytes.load(ordering: .relaxed) / 2)
        #expect(keyspace.evict(database: 0, shardIndex: 0, now: start + 61_000))
        let kept = (9_000..<10_000).filter { db.shard(for: hashOf(key($0))).holds(key($0)) }.count
        #expect(kept >= 950, "\(kept) of the 1,000 keys read last")
    }
}

extension Shard {
    /// Reads `key` at `now` as GET does: a lookup that records the access.
    @discardableResult
    func read(_ key: [UInt8], now: Int64) -> Bool {
        lock.withLock {
            key.withUnsafeBytes { k in
                guard let index = lookup(k, hash: hashOf(key), now: now) else { return false }
                touch(index, now: now)
                return true
            }
        }
    }
}
