import CacheCore
import Testing

@Suite("Databases, keyspace and shard sets")
struct DatabaseTests {
    /// Stores `key` in the shard of `database` its hash selects.
    func put(_ database: Database, _ key: [UInt8], expiry: Int64? = nil) {
        database.shard(for: hashOf(key)).put(key, bytes("v"), expiry: expiry)
    }

    @Test("swapContents exchanges keys, counters and expiry indexes")
    func swapContents() {
        let a = Shard()
        let b = Shard()
        a.put(bytes("a1"), bytes("x"), expiry: start + 1_000)
        a.put(bytes("a2"), bytes("y"))
        b.put(bytes("b1"), bytes("z"))
        let (usedA, usedB) = (a.usedBytes, b.usedBytes)
        a.lock.withLock { b.lock.withLock { a.swapContents(with: b) } }
        #expect(a.allKeys == [bytes("b1")])
        #expect(b.allKeys == [bytes("a1"), bytes("a2")])
        #expect((a.count, b.count) == (1, 2))
        #expect((a.expiresCount, b.expiresCount) == (0, 1))
        #expect((a.usedBytes, b.usedBytes) == (usedB, usedA))
        #expect(b.get(bytes("a1")) == bytes("x"))
        b.sweepAll(now: start + 1_000 + sweepLag)
        #expect(b.allKeys == [bytes("a2")])
    }

    @Test("statistics reports keys, keys with a TTL and their average remaining TTL")
    func statistics() {
        let db = Database()
        #expect(db.statistics(now: start) == (0, 0, 0))
        put(db, bytes("a"), expiry: start + 1_000)
        put(db, bytes("b"), expiry: start + 3_000)
        put(db, bytes("c"))
        #expect(db.statistics(now: start) == (3, 2, 2_000))
        #expect(db.statistics(now: start + 500) == (3, 2, 1_500))
        #expect(db.count == 3)
        #expect(db.expiresCount == 2)
        put(db, bytes("a"))  // plain SET drops a's TTL
        #expect(db.statistics(now: start) == (3, 1, 3_000))
    }

    @Test("The average TTL is never negative, even when only expired keys remain")
    func statisticsNeverNegative() {
        let db = Database()
        put(db, bytes("a"), expiry: start + 10)
        #expect(db.statistics(now: start + 1_000) == (1, 1, 0))
    }

    @Test("removeAll empties every shard of a database")
    func databaseRemoveAll() {
        let db = Database()
        for i in 0..<1_000 { put(db, key(i), expiry: i.isMultiple(of: 3) ? start + 10_000 : nil) }
        #expect(db.count == 1_000)
        db.removeAll()
        #expect(db.statistics(now: start) == (0, 0, 0))
    }

    @Test("swapDatabases exchanges whole databases and leaves others alone")
    func swapDatabases() {
        let keyspace = Keyspace(databases: 3)
        for i in 0..<100 { put(keyspace.databases[0], key(i)) }
        put(keyspace.databases[1], bytes("one"), expiry: start + 5)
        put(keyspace.databases[2], bytes("two"))
        let changes = keyspace.totalChanges
        keyspace.swapDatabases(1, 0)
        #expect(keyspace.totalChanges == changes + 1, "one change, as Redis counts SWAPDB")
        #expect(keyspace.databases[0].count == 1)
        #expect(keyspace.databases[1].count == 100)
        #expect(keyspace.databases[2].count == 1)
        #expect(keyspace.databases[0].expiresCount == 1)
        #expect(keyspace.totalKeys == 102)
        keyspace.swapDatabases(2, 2)
        #expect(keyspace.databases[2].count == 1)
        #expect(keyspace.totalChanges == changes + 2, "SWAPDB of a database with itself counts a change too")
    }

    @Test("Keyspace.sweepExpired reclaims due keys in every database and reports an exhausted budget")
    func keyspaceSweep() {
        let keyspace = Keyspace(databases: 2)
        for i in 0..<3_000 { put(keyspace.databases[i % 2], key(i), expiry: start + 10) }
        put(keyspace.databases[0], bytes("stays"), expiry: start + 100_000)
        let limited = keyspace.sweepExpired(now: start + 10 + sweepLag, budgetPerShard: 1)
        #expect(limited.exhausted)
        #expect(limited.reclaimed <= 2 * Keyspace.shardCount)
        var reclaimed = limited.reclaimed
        while true {
            let result = keyspace.sweepExpired(now: start + 10 + sweepLag)
            reclaimed += result.reclaimed
            if !result.exhausted { break }
        }
        #expect(reclaimed == 3_000)
        #expect(keyspace.totalKeys == 1)
    }

    @Test("the sweeper visits only marked shards: a write marks its shard, a sweep unmarks it once nothing is left")
    func sweepMarks() {
        let keyspace = Keyspace(databases: 2)
        let budget = keyspace.budget
        let db = keyspace.databases[0]
        func marked(_ database: Database) -> [Int] {
            var indexes: [Int] = []
            database.sweepMarks.forEachMarked { indexes.append($0) }
            return indexes
        }
        func index(_ k: [UInt8]) -> Int { Database.shardIndex(for: hashOf(k)) }
        #expect(marked(db).isEmpty && marked(keyspace.databases[1]).isEmpty, "a new keyspace has nothing to sweep")

        // A key without a TTL: its shard is marked until the sweep has added its bytes to the total.
        put(db, bytes("plain"))
        #expect(marked(db) == [index(bytes("plain"))])
        #expect(budget.datasetBytes.load(ordering: .relaxed) == 0, "below the flush threshold, not yet in the total")
        keyspace.sweepExpired(now: start)
        #expect(marked(db).isEmpty)
        #expect(budget.datasetBytes.load(ordering: .relaxed) == keyspace.usedBytes && keyspace.usedBytes > 0)

        // A key with a TTL keeps its shard marked until the key is gone.
        put(db, bytes("volatile"), expiry: start + 10)
        keyspace.sweepExpired(now: start)
        #expect(marked(db) == [index(bytes("volatile"))], "not due yet: still to be swept")
        #expect(keyspace.sweepExpired(now: start + 10 + sweepLag).reclaimed == 1)
        #expect(marked(db).isEmpty)
        #expect(keyspace.totalKeys == 1)

        // A removal marks too (the total must go down), and SWAPDB marks both sides.
        _ = db.shard(for: hashOf(bytes("plain"))).delete(bytes("plain"))
        #expect(marked(db) == [index(bytes("plain"))])
        keyspace.sweepExpired(now: start + 100)
        #expect(budget.datasetBytes.load(ordering: .relaxed) == keyspace.usedBytes)
        put(keyspace.databases[1], bytes("other"), expiry: start + 100_000)
        keyspace.sweepExpired(now: start + 100)
        keyspace.swapDatabases(0, 1)
        #expect(marked(keyspace.databases[0]).count == Keyspace.shardCount)
        #expect(marked(keyspace.databases[1]).count == Keyspace.shardCount)
        keyspace.sweepExpired(now: start + 100)
        #expect(marked(keyspace.databases[0]) == [index(bytes("other"))], "only the shard with a TTL stays marked")
        #expect(marked(keyspace.databases[1]).isEmpty)
        #expect(keyspace.databases[0].expiresCount == 1)
    }

    @Test("ShardSet visits its indexes once each, ascending, and descending in reverse")
    func shardSetOrder() {
        var set = ShardSet()
        for i in [200, 3, 64, 63, 0, 255, 3, 128, 127, 200] { set.insert(i) }
        var ascending: [Int] = []
        set.forEach { ascending.append($0) }
        var descending: [Int] = []
        set.forEachReversed { descending.append($0) }
        #expect(ascending == [0, 3, 63, 64, 127, 128, 200, 255])
        #expect(descending == ascending.reversed())
    }

    @Test("An empty ShardSet visits nothing")
    func emptyShardSet() {
        let set = ShardSet()
        var visited = 0
        set.forEach { _ in visited += 1 }
        set.forEachReversed { _ in visited += 1 }
        #expect(visited == 0)
    }

    @Test("Keys spread over many shards, and each lives in the shard its hash selects")
    func shardSelection() {
        let db = Database()
        for i in 0..<10_000 { put(db, key(i)) }
        let used = db.shards.filter { $0.count > 0 }.count
        #expect(used > Keyspace.shardCount * 9 / 10)
        for i in 0..<10_000 {
            #expect(db.shards[Database.shardIndex(for: hashOf(key(i)))].holds(key(i)))
        }
    }
}

@Suite("Entries")
struct EntryTests {
    @Test("Lengths around the varint boundaries round-trip, with and without expiry", arguments: [0, 1, 127, 128, 16_383, 16_384, 70_000])
    func varintBoundaries(length: Int) throws {
        let k = [UInt8](repeating: 0x6B, count: min(length, 20_000))
        let v = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        for expiry in [nil, Int64(start + 1)] as [Int64?] {
            let entry = try #require(k.withUnsafeBytes { kb in v.withUnsafeBytes { vb in Entry.make(key: kb, value: vb, expiry: expiry) } })
            defer { entry.deallocate() }
            #expect(Array(entry.key) == k)
            #expect(Array(entry.value) == v)
            #expect(entry.expiry == expiry)
            #expect(entry.hasExpiry == (expiry != nil))
            #expect(entry.allocatedSize >= k.count + v.count + (expiry == nil ? 3 : 11))
            #expect(entry.allocatedSize % 16 == 0)
        }
    }

    @Test("updateExpiry rewrites the expiry and nothing else")
    func updateExpiry() throws {
        let k = bytes("key"), v = bytes("value")
        let entry = try #require(k.withUnsafeBytes { kb in v.withUnsafeBytes { Entry.make(key: kb, value: $0, expiry: 5) } })
        defer { entry.deallocate() }
        entry.updateExpiry(-1)
        #expect(entry.expiry == -1)
        entry.updateExpiry(.max)
        #expect(entry.expiry == .max)
        #expect(Array(entry.key) == k)
        #expect(Array(entry.value) == v)
    }
}
