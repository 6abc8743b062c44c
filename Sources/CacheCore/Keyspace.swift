import Synchronization

/// All databases of a server: the storage engine's root.
///
/// Each database is split into ``shardCount`` shards by the top bits of the key's hash; each shard has its
/// own lock, so commands on different keys rarely wait for each other and no lock covers the whole keyspace.
public final class Keyspace: Sendable {
    /// The hash function of every key in this process (seeded at random at start).
    package static let hasher = KeyHasher()
    /// Shards per database.
    public static let shardCount = 256

    /// The databases, numbered from 0 (`SELECT`). The array never changes; SWAPDB swaps contents.
    package let databases: [Database]
    /// The memory limit, the eviction policy and the running total of used bytes.
    package let budget = MemoryBudget()
    /// Keys removed by expiry and eviction, reported while client-side caching needs them.
    package let removals = RemovalFeed()

    /// A keyspace with `databaseCount` empty databases.
    public init(databases databaseCount: Int) {
        precondition(databaseCount >= 1)
        let (budget, removals) = (self.budget, self.removals)
        databases = (0..<databaseCount).map { Database(budget: budget, removals: removals, number: $0) }
    }

    /// Keys evicted to make room, across all databases (INFO's `evicted_keys`).
    package var evictedKeys: Int {
        databases.reduce(0) { total, db in
            total + db.shards.reduce(0) { sum, shard in sum + shard.lock.withLock { shard.evictedKeys } }
        }
    }

    /// Adds every shard's pending byte count to the budget, making its total exact.
    package func flushAccounting() {
        for db in databases {
            for shard in db.shards {
                shard.lock.lock()
                shard.flushAccounting()
                shard.lock.unlock()
            }
        }
    }

    /// The most keys one shard gives up before ``evict(database:shardIndex:now:)`` moves to the next.
    package static let evictionsPerVisit = 4

    /// Evicts keys by the budget's policy until used memory is within the limit, as Redis's
    /// `performEvictions` does before a command that may allocate. Returns false when it could not get
    /// under the limit: the policy is `noeviction`, or no shard has a key the policy may evict.
    ///
    /// It starts with shard `shardIndex` of database `database` (the shard the command writes to), and holds
    /// no lock but one shard's at a time. Under LRU, LFU and volatile-ttl each key evicted is the best of the
    /// candidates of ``shardsPerChoice`` shards, the next key's chosen among the shards after them; under the
    /// other policies a shard gives up at most ``evictionsPerVisit`` keys before the next shard takes its
    /// turn. Either way a large excess (a lowered limit) is taken from every shard alike, instead of emptying
    /// the first shards whatever their keys' use.
    ///
    /// When other databases than `database` held keys at the last ``refreshDatabasesInUse()``, each key is
    /// chosen among those databases too, as Redis samples every database: under LRU, LFU and volatile-ttl the
    /// best candidate of the same shards of each of them is evicted; under the other policies the databases
    /// take turns.
    package func evict(database: Int, shardIndex: Int, now: Int64) -> Bool {
        evict(database: database, shardIndex: shardIndex, now: now, keyBudget: .max) == .withinLimit
    }

    /// How ``evict(database:shardIndex:now:keyBudget:)`` ended.
    package enum EvictionOutcome: Sendable, Equatable {
        /// Used memory is within the limit (or there is none).
        case withinLimit
        /// It evicted `keyBudget` keys and memory is still over the limit: call again later.
        case budgetSpent
        /// Memory is over the limit and the policy finds nothing more to evict (or is `noeviction`).
        case nothingToEvict
    }

    /// ``evict(database:shardIndex:now:)`` that stops after `keyBudget` keys, so that a large excess (a lowered
    /// limit) is evicted in steps instead of holding up the caller, as Redis's eviction is bounded in time
    /// and resumed later.
    ///
    /// Several threads may evict at once (writes on other event loops, the sweeper): each measures the excess
    /// again after every shard it visits, so that together they evict what the excess is, not that many times.
    ///
    /// When a search finds nothing to evict, that is remembered (``MemoryBudget/remembersNothingToEvict(in:)``)
    /// until a key is written or given a TTL, or the policy, the limit or the databases holding keys change:
    /// meanwhile a call costs one check, not a look at every shard.
    package func evict(database: Int, shardIndex: Int, now: Int64, keyBudget: Int) -> EvictionOutcome {
        guard budget.isOverLimit else { return .withinLimit }
        if budget.policy == .noEviction || budget.remembersNothingToEvict(in: database) { return .nothingToEvict }
        budget.beginEvictionSearch(in: database)
        evictionSearches.add(1, ordering: .relaxed)
        let outcome = search(database: database, shardIndex: shardIndex, now: now, keyBudget: keyBudget)
        budget.endEvictionSearch(in: database, foundNothing: outcome == .nothingToEvict)
        return outcome
    }

    /// Searches made by ``evict(database:shardIndex:now:keyBudget:)``: the calls that looked at shards.
    package let evictionSearches = Atomic<Int>(0)

    private func search(database: Int, shardIndex: Int, now: Int64, keyBudget: Int) -> EvictionOutcome {
        var keysLeft = keyBudget
        let inUse = databasesInUse.load(ordering: .relaxed)
        if inUse & ~Self.databaseBit(database) != 0 {
            let outcome = evictAcrossDatabases(
                inUse | Self.databaseBit(database), from: shardIndex, now: now, keysLeft: &keysLeft)
            if outcome != .nothingToEvict { return outcome }
        }
        if budget.policy.hasScores {
            return evictByScore(database: database, from: shardIndex, now: now, keysLeft: &keysLeft)
        }
        let total = databases.count * Self.shardCount
        var position = database * Self.shardCount + shardIndex
        var fruitless = 0
        // Free the excess as measured now, counting what each shard frees under its lock, and publish the
        // shard's change once it is done rather than after every key.
        var excess = currentExcess
        while excess > 0 {
            guard keysLeft > 0 else { return .budgetSpent }
            let shard = databases[position / Self.shardCount].shards[position % Self.shardCount]
            shard.lock.lock()
            var evicted = false
            var before = shard.usedBytes
            var taken = 0
            while excess > 0 && taken < Self.evictionsPerVisit && keysLeft > 0 && shard.evictOne(now: now) {
                evicted = true
                taken += 1
                keysLeft -= 1
                excess -= before - shard.usedBytes
                before = shard.usedBytes
            }
            shard.flushAccounting()
            shard.lock.unlock()
            if evicted {
                fruitless = 0
                // What other evictors freed meanwhile counts too.
                excess = min(excess, currentExcess)
            } else {
                fruitless += 1
                if fruitless >= total { return .nothingToEvict }
            }
            if excess > 0 { position = (position + 1) % total }
        }
        return .withinLimit
    }

    /// How many shards' best candidates are compared for each key evicted under LRU, LFU and volatile-ttl, as
    /// Redis compares `maxmemory-samples` keys (each shard's candidate is the best of its own sample). Comparing
    /// across shards matters when shards hold few keys: a shard's only keys may all be recently read.
    private var shardsPerChoice: Int { max(1, min(16, budget.samples.load(ordering: .relaxed))) }

    /// Eviction under LRU, LFU and volatile-ttl in one database: each key evicted is the best of the candidates
    /// of ``shardsPerChoice`` shards, the next key's chosen among the shards after them.
    private func evictByScore(database: Int, from shardIndex: Int, now: Int64, keysLeft: inout Int) -> EvictionOutcome {
        let shards = databases[database].shards
        let width = shardsPerChoice
        var index = shardIndex
        var fruitless = 0
        var excess = currentExcess
        while excess > 0 {
            guard keysLeft > 0 else { return .budgetSpent }
            var best: (shard: Int, candidate: (index: Int, slot: UInt64, score: Int))?
            for step in 0..<width {
                let i = (index + step) % Self.shardCount
                shards[i].lock.lock()
                let candidate = shards[i].victimCandidate(now: now)
                shards[i].lock.unlock()
                if let candidate, best.map({ candidate.score > $0.candidate.score }) ?? true { best = (i, candidate) }
            }
            index = (index + width) % Self.shardCount
            guard let best else {
                fruitless += width
                if fruitless >= Self.shardCount { return .nothingToEvict }
                continue
            }
            let shard = shards[best.shard]
            shard.lock.lock()
            let before = shard.usedBytes
            // The candidate may be gone meanwhile (a write on another loop): then the next shards are looked at.
            let evicted = shard.evict(candidate: best.candidate)
            excess -= before - shard.usedBytes
            shard.flushAccounting()
            shard.lock.unlock()
            if evicted {
                fruitless = 0
                keysLeft -= 1
                excess = min(excess, currentExcess)
            } else {
                fruitless += 1
                if fruitless >= Self.shardCount { return .nothingToEvict }
            }
        }
        return .withinLimit
    }

    /// Used memory beyond the limit, as the budget counts it now.
    private var currentExcess: Int { budget.usedBytes - budget.limitBytes.load(ordering: .relaxed) }

    /// Databases that held keys at the last ``refreshDatabasesInUse()``: bit `d` for database `d`, bit 63 for
    /// every database from 63 on.
    private let databasesInUse = Atomic<UInt64>(0)
    /// The database whose turn it is to give up a key, for policies without scores.
    private let evictionTurn = Atomic<Int>(0)

    @inline(__always)
    private static func databaseBit(_ database: Int) -> UInt64 { 1 << UInt64(min(database, 63)) }

    /// Notes which databases hold keys, for ``evict(database:shardIndex:now:)`` to choose among them. It looks
    /// at shards until it finds a key, so an empty database costs a look at each of its shards: call it now and
    /// then (the server's sweeper does, once a second while `maxmemory` is set), not per command.
    package func refreshDatabasesInUse() {
        var mask: UInt64 = 0
        for (index, db) in databases.enumerated() where mask & Self.databaseBit(index) == 0 {
            for shard in db.shards {
                shard.lock.lock()
                let holdsKeys = shard.count > 0
                shard.lock.unlock()
                if holdsKeys {
                    mask |= Self.databaseBit(index)
                    break
                }
            }
        }
        // Eviction looks at other databases by this mask: what it found with the old one may be wrong now.
        if databasesInUse.exchange(mask, ordering: .relaxed) != mask { budget.forgetNothingToEvict() }
    }

    /// ``evict(database:shardIndex:now:keyBudget:)`` among the databases of `mask`, one key at a time, moving to
    /// the next shard index after each. ``EvictionOutcome/nothingToEvict`` when no shard index has a candidate in
    /// those databases; the caller then walks every shard.
    private func evictAcrossDatabases(
        _ mask: UInt64, from shardIndex: Int, now: Int64, keysLeft: inout Int
    ) -> EvictionOutcome {
        let scored = budget.policy.hasScores
        let width = shardsPerChoice
        var index = shardIndex
        // Whose turn it is goes on from one call to the next (each write evicts a key or so).
        var turn = evictionTurn.load(ordering: .relaxed)
        defer { evictionTurn.store(turn, ordering: .relaxed) }
        var fruitless = 0
        var excess = currentExcess
        while excess > 0 {
            guard keysLeft > 0 else { return .budgetSpent }
            var best: (database: Int, shard: Int, candidate: (index: Int, slot: UInt64, score: Int))?
            var chosen: Int?
            // The databases in turn from `turn`, so that ties (and unscored policies) rotate among them.
            for step in 0..<databases.count {
                let d = (turn + step) % databases.count
                guard mask & Self.databaseBit(d) != 0 else { continue }
                let shard = databases[d].shards[index]
                if scored {
                    // The candidates of `width` shards of each database, as in a single database.
                    for offset in 0..<width {
                        let i = (index + offset) % Self.shardCount
                        let shard = databases[d].shards[i]
                        shard.lock.lock()
                        let candidate = shard.victimCandidate(now: now)
                        shard.lock.unlock()
                        if let candidate, best.map({ candidate.score > $0.candidate.score }) ?? true {
                            best = (d, i, candidate)
                        }
                    }
                } else {
                    shard.lock.lock()
                    let has = shard.count > 0 && (!budget.policy.volatileOnly || shard.expiresCount > 0)
                    shard.lock.unlock()
                    if has {
                        chosen = d
                        break
                    }
                }
            }
            if let d = best?.database ?? chosen {
                let shard = databases[d].shards[best?.shard ?? index]
                shard.lock.lock()
                let before = shard.usedBytes
                let evicted = best.map { shard.evict(candidate: $0.candidate) } ?? false || shard.evictOne(now: now)
                excess -= before - shard.usedBytes
                shard.flushAccounting()
                shard.lock.unlock()
                if evicted {
                    keysLeft -= 1
                    excess = min(excess, currentExcess)
                }
                fruitless = evicted ? 0 : fruitless + 1
                turn = d + 1
            } else {
                fruitless += 1
            }
            if fruitless >= Self.shardCount { return .nothingToEvict }
            index = (index + (scored ? width : 1)) % Self.shardCount
        }
        return .withinLimit
    }

    /// Keys across all databases.
    public var totalKeys: Int { databases.reduce(0) { $0 + $1.count } }

    /// Bytes held by entries, tables and expiry indexes across all databases.
    public var usedBytes: Int {
        databases.reduce(0) { total, db in
            total + db.shards.reduce(0) { sum, shard in sum + shard.lock.withLock { shard.usedBytes } }
        }
    }

    /// Changes to keys across all databases since the keyspace was created (see ``Shard/changes``).
    public var totalChanges: Int {
        var total = 0
        for db in databases {
            for shard in db.shards {
                shard.lock.lock()
                total &+= shard.changes
                shard.lock.unlock()
            }
        }
        return total
    }

    /// Exchanges the contents of two databases (SWAPDB), atomically for every client.
    public func swapDatabases(_ a: Int, _ b: Int) {
        // What eviction found in each database is about the other one now.
        defer { budget.forgetNothingToEvict() }
        guard a != b else {
            // Nothing to exchange, but a change all the same, as Redis counts it.
            let shard = databases[a].shards[0]
            shard.lock.lock()
            shard.changes &+= 1
            shard.lock.unlock()
            return
        }
        let (first, second) = (databases[min(a, b)], databases[max(a, b)])
        for i in 0..<Self.shardCount {
            first.shards[i].lock.lock()
            second.shards[i].lock.lock()
            first.shards[i].swapContents(with: second.shards[i])
            // One change, as Redis counts SWAPDB (for the save points and INFO).
            if i == 0 { first.shards[i].changes &+= 1 }
            second.shards[i].lock.unlock()
            first.shards[i].lock.unlock()
        }
    }

    /// Reclaims expired keys in every database, at most `budget` index items per shard, and returns the
    /// keys reclaimed. Called by the background sweeper at `hz` times per second.
    @discardableResult
    public func sweepExpired(now: Int64, budgetPerShard: Int = 2048) -> (reclaimed: Int, exhausted: Bool) {
        var reclaimed = 0
        var exhausted = false
        for db in databases {
            // Only the shards with keys that may expire or memory changes to report.
            db.sweepMarks.forEachMarked { index in
                let shard = db.shards[index]
                shard.lock.lock()
                let before = shard.expiredKeys
                let work = shard.sweepExpired(now: now, budget: budgetPerShard)
                shard.flushAccounting()
                shard.unmarkIfSwept()
                reclaimed += shard.expiredKeys - before
                shard.lock.unlock()
                if work >= budgetPerShard { exhausted = true }
            }
        }
        return (reclaimed, exhausted)
    }
}

/// One numbered database: ``Keyspace/shardCount`` shards.
public final class Database: Sendable {
    @usableFromInline package let shards: [Shard]
    /// The shards the sweeper has to visit.
    package let sweepMarks = SweepMarks()

    package init(budget: MemoryBudget = MemoryBudget(), removals: RemovalFeed = RemovalFeed(), number: Int = 0) {
        precondition(Keyspace.shardCount <= SweepMarks.capacity)
        let marks = sweepMarks
        shards = (0..<Keyspace.shardCount).map {
            Shard(budget: budget, removals: removals, sweepMarks: marks, index: $0, database: number)
        }
    }

    /// The shard that holds keys with this hash.
    @inlinable @inline(__always)
    package func shard(for hash: UInt64) -> Shard {
        shards[Int(truncatingIfNeeded: hash >> 56)]
    }

    /// The index of the shard that holds keys with this hash.
    @inlinable @inline(__always)
    package static func shardIndex(for hash: UInt64) -> Int {
        Int(truncatingIfNeeded: hash >> 56)
    }

    /// Keys in this database (DBSIZE), including expired keys that have not been reclaimed yet.
    package var count: Int {
        shards.reduce(0) { total, shard in total + shard.lock.withLock { shard.count } }
    }

    /// Keys with a TTL.
    package var expiresCount: Int {
        shards.reduce(0) { total, shard in total + shard.lock.withLock { shard.expiresCount } }
    }

    /// (keys, keys with TTL, average remaining TTL in ms) as INFO keyspace reports them.
    package func statistics(now: Int64) -> (keys: Int, expires: Int, averageTTL: Int64) {
        var keys = 0
        var expires = 0
        var sum: Int128 = 0
        for shard in shards {
            shard.lock.lock()
            keys += shard.count
            expires += shard.expiresCount
            sum += shard.expirySum
            shard.lock.unlock()
        }
        guard expires > 0 else { return (keys, 0, 0) }
        let average = sum / Int128(expires) - Int128(now)
        return (keys, expires, Int64(max(0, average)))
    }

    /// Removes every key (FLUSHDB).
    package func removeAll() {
        for shard in shards {
            shard.lock.lock()
            shard.removeAll()
            shard.lock.unlock()
        }
    }

    /// Locks every shard, in index order; pair with ``unlockAll()``.
    package func lockAll() {
        for shard in shards { shard.lock.lock() }
    }

    package func unlockAll() {
        for shard in shards.reversed() { shard.lock.unlock() }
    }
}

/// A set of shard indexes, kept as a 256-bit mask so that a multi-key command can lock each shard it
/// touches once, in ascending order (which rules out deadlock), without allocating.
package struct ShardSet {
    @usableFromInline var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)

    @inlinable
    package init() {}

    @inlinable
    package mutating func insert(_ index: Int) {
        let bit = UInt64(1) << UInt64(index & 63)
        switch index >> 6 {
        case 0: words.0 |= bit
        case 1: words.1 |= bit
        case 2: words.2 |= bit
        default: words.3 |= bit
        }
    }

    /// Calls `body` with each index in ascending order.
    @inlinable
    package func forEach(_ body: (Int) -> Void) {
        for w in 0..<4 {
            var word: UInt64
            switch w {
            case 0: word = words.0
            case 1: word = words.1
            case 2: word = words.2
            default: word = words.3
            }
            while word != 0 {
                let bit = word.trailingZeroBitCount
                body(w << 6 | bit)
                word &= word - 1
            }
        }
    }

    /// Calls `body` with each index in descending order.
    @inlinable
    package func forEachReversed(_ body: (Int) -> Void) {
        for w in stride(from: 3, through: 0, by: -1) {
            var word: UInt64
            switch w {
            case 0: word = words.0
            case 1: word = words.1
            case 2: word = words.2
            default: word = words.3
            }
            while word != 0 {
                let bit = 63 - word.leadingZeroBitCount
                body(w << 6 | bit)
                word &= ~(UInt64(1) << UInt64(bit))
            }
        }
    }

    /// Locks the shards of `database` in this set, in ascending order.
    @inlinable
    package func lock(in database: Database) {
        forEach { database.shards[$0].lock.lock() }
    }

    @inlinable
    package func unlock(in database: Database) {
        forEachReversed { database.shards[$0].lock.unlock() }
    }
}
