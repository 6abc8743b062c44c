import CMemoryHints
import Synchronization

/// One lock's worth of a database: an open-addressing hash table of ``Entry`` pointers, and the index that
/// finds its keys when they expire.
///
/// Each table slot is one 64-bit word: the entry's address (16-byte aligned, so its low 4 bits are dropped)
/// and, in the top 21 bits, the low bits of the key's hash. Those hash bits both reject most non-matching
/// slots without touching the entry and give each entry's home slot without rehashing the key, so growing
/// the table and scanning it never read entries. Collisions are resolved by linear probing, and deletion
/// shifts the following run back (no tombstones).
///
/// Every method that is not `lock`-related must be called with ``lock`` held. That lock is what keeps
/// accesses exclusive, so the stored properties skip Swift's run-time exclusivity checks (which showed as
/// several percent of the GET path).
public final class Shard: @unchecked Sendable {
    package let lock = ShardLock()
    /// The memory limit and total this shard counts towards.
    package let budget: MemoryBudget
    /// Where this shard marks itself for the sweeper, and its place there (none for a shard made on its own).
    private let sweepMarks: SweepMarks?
    private let sweepIndex: Int
    /// Whether this shard is marked for the sweeper: a write reads this field, not the shared marks.
    @exclusivity(unchecked) private var markedForSweep = false

    @exclusivity(unchecked) @usableFromInline var slots: UnsafeMutablePointer<UInt64>?
    @exclusivity(unchecked) @usableFromInline var capacity: Int = 0
    /// Keys in this shard, including expired ones not reclaimed yet.
    @exclusivity(unchecked) package private(set) var count: Int = 0
    /// Keys with a time to live.
    @exclusivity(unchecked) package private(set) var expiresCount: Int = 0
    /// Bytes held by entries, the table and the expiry index.
    @exclusivity(unchecked) package private(set) var usedBytes: Int = 0
    /// The part of ``usedBytes``' changes not yet added to the budget's total.
    @exclusivity(unchecked) private var unflushedBytes: Int = 0
    /// Bytes charged for the expiry index (8 per registration: the 4-byte hash and its array's slack).
    @exclusivity(unchecked) private var expiryIndexBytes: Int = 0
    /// Keys removed to make room under the memory limit.
    @exclusivity(unchecked) package var evictedKeys: Int = 0
    /// The time of the last lookup, which stamps entries written after it (LRU and LFU policies).
    @exclusivity(unchecked) @usableFromInline package var clockNow: Int64 = 0
    /// The default policy's eviction hand: the next slot it looks at.
    @exclusivity(unchecked) var hand: Int = 0
    /// State of the generator that picks sample slots and LFU increments (xorshift).
    @exclusivity(unchecked) var randomState: UInt64
    /// The sum of the expiry times of keys with a TTL, for the average TTL.
    @exclusivity(unchecked) package private(set) var expirySum: Int128 = 0
    /// Keys removed because their time was up (on access or by the sweeper).
    @exclusivity(unchecked) @usableFromInline package var expiredKeys: Int = 0
    /// Read hits and misses, counted by the command layer.
    @exclusivity(unchecked) package var hits: Int = 0
    @exclusivity(unchecked) package var misses: Int = 0

    /// Counts a read that found its key. Commands call this rather than writing `hits &+= 1` themselves: in
    /// another module that write is checked for exclusive access at run time, which costs more than the call.
    package func countHit() { hits &+= 1 }

    /// Counts a read that did not find its key (see ``countHit()``).
    package func countMiss() { misses &+= 1 }

    /// Changes to this shard's keys since it was created: every insert, overwrite, TTL change and removal
    /// (including expiry) counts one. It only grows, and moves with neither SWAPDB nor FLUSHDB, so the
    /// snapshot scheduler can tell how many changes happened since a save by comparing sums.
    package internal(set) var changes: Int = 0

    @exclusivity(unchecked) var expiryIndex = ExpiryIndex()
    /// Where keys this shard removes on its own (expired, evicted) are reported, when anyone listens. Last,
    /// so that the fields every lookup reads keep their places.
    package let removals: RemovalFeed
    /// The number of the database this shard belongs to (SWAPDB swaps contents, not shards), for the removals
    /// it reports.
    package let database: Int

    /// Slots in the table (0 before the first insert).
    package var tableCapacity: Int { capacity }
    /// Key hashes the expiry index holds, live or stale.
    package var expiryRegistrations: Int { expiryIndex.registrations }

    @usableFromInline static let tagBits: UInt64 = 21
    @usableFromInline static let tagShift: UInt64 = 64 - tagBits
    @usableFromInline static let tagMask: UInt64 = (1 << tagBits) - 1
    @usableFromInline static let pointerMask: UInt64 = (1 << tagShift) - 1
    /// The largest table: home slots come from the tag bits.
    package static let maxCapacity = 1 << Int(tagBits)
    static let minCapacity = 16

    package init(
        budget: MemoryBudget = MemoryBudget(), removals: RemovalFeed = RemovalFeed(), sweepMarks: SweepMarks? = nil,
        index: Int = 0, database: Int = 0
    ) {
        self.budget = budget
        self.removals = removals
        self.database = database
        self.sweepMarks = sweepMarks
        self.sweepIndex = index
        randomState = UInt64(UInt(bitPattern: ObjectIdentifier(budget).hashValue)) &* 0x9E37_79B9_7F4A_7C15 | 1
        randomState ^= UInt64(UInt(bitPattern: Unmanaged.passUnretained(lock).toOpaque().hashValue))
        if randomState == 0 { randomState = 0x2545_F491_4F6C_DD1D }
    }

    deinit {
        removeAll()
    }

    // MARK: slots

    @inlinable @inline(__always)
    static func pack(_ entry: Entry, hash: UInt64) -> UInt64 {
        let address = UInt64(UInt(bitPattern: entry.base))
        assert(address & 15 == 0 && address >> 47 == 0, "entries must be 16-byte aligned user-space addresses")
        return (address >> 4) | ((hash & tagMask) << tagShift)
    }

    @inlinable @inline(__always)
    static func unpack(_ slot: UInt64) -> Entry {
        Entry(UnsafeMutableRawPointer(bitPattern: UInt((slot & pointerMask) << 4))!)
    }

    @inlinable @inline(__always)
    static func tag(_ slot: UInt64) -> UInt64 { slot >> tagShift }

    /// The entry in slot `index`.
    @inlinable @inline(__always)
    package func entry(at index: Int) -> Entry {
        Self.unpack(slots![index])
    }

    /// The slot holding `key`, whether or not it has expired, or nil.
    @inlinable
    package func find(_ key: UnsafeRawBufferPointer, hash: UInt64) -> Int? {
        guard let slots else { return nil }
        let mask = capacity - 1
        let tag = hash & Self.tagMask
        var i = Int(truncatingIfNeeded: hash) & mask
        while true {
            let s = slots[i]
            if s == 0 { return nil }
            if Self.tag(s) == tag && Self.unpack(s).keyEquals(key) { return i }
            i = (i + 1) & mask
        }
    }

    /// The slot holding `key` if it exists and has not expired at `now`. An expired key is removed on the way
    /// (lazy expiry) and counted in ``expiredKeys``. As in Redis, a key is still alive at its expiry
    /// millisecond and expired after it.
    @inlinable
    package func lookup(_ key: UnsafeRawBufferPointer, hash: UInt64, now: Int64) -> Int? {
        clockNow = now
        guard let index = find(key, hash: hash) else { return nil }
        let entry = Self.unpack(slots![index])
        if entry.isExpired(at: now) {
            removeExpired(at: index)
            return nil
        }
        return index
    }

    /// Removes the entry in slot `index` because its time is up: counts it in ``expiredKeys`` and reports it
    /// to ``removals``.
    @usableFromInline package func removeExpired(at index: Int) {
        if removals.isEnabled { removals.record(Self.unpack(slots![index]).key, database: database, reason: .expired) }
        remove(at: index)
        expiredKeys &+= 1
    }

    /// Adds `entry` for a key that is not in the table. Returns false when the table cannot grow.
    @discardableResult
    package func insert(_ entry: Entry, hash: UInt64) -> Bool {
        if (count + 1) * 4 > capacity * 3 {
            guard grow() else { return false }
        }
        let mask = capacity - 1
        var i = Int(truncatingIfNeeded: hash) & mask
        while slots![i] != 0 { i = (i + 1) & mask }
        slots![i] = Self.pack(entry, hash: hash)
        count += 1
        changes &+= 1
        account(added: entry, hash: hash)
        return true
    }

    /// Puts `entry` in place of the entry in slot `index` (the same key), freeing the old one.
    package func replace(at index: Int, with entry: Entry, hash: UInt64) {
        let old = Self.unpack(slots![index])
        account(removed: old)
        old.deallocate()
        changes &+= 1
        slots![index] = Self.pack(entry, hash: hash)
        account(added: entry, hash: hash)
    }

    /// Removes and frees the entry in slot `index`.
    @usableFromInline package func remove(at index: Int) {
        let old = Self.unpack(slots![index])
        account(removed: old)
        old.deallocate()
        removeSlot(index)
        count -= 1
        changes &+= 1
        if capacity > Self.minCapacity && count * 8 < capacity {
            resize(to: Self.capacityFor(count))
        }
    }

    /// Changes the expiry of the entry in slot `index` (nil removes it), reallocating the entry only when a
    /// small entry gains or loses its expiry field (a large one has it in any case).
    package func setExpiry(at index: Int, to expiry: Int64?, hash: UInt64) {
        let entry = Self.unpack(slots![index])
        switch (entry.expiry, expiry) {
        case (nil, nil):
            return
        case (let old?, let new?):
            changes &+= 1
            expirySum += Int128(new) - Int128(old)
            entry.updateExpiry(new)
            registerExpiry(hash: hash, expiry: new)
        case (nil, let new?) where entry.setExpiryInPlace(new):
            changes &+= 1
            budget.forgetNothingToEvict()
            expiresCount += 1
            expirySum += Int128(new)
            registerExpiry(hash: hash, expiry: new)
        case (let old?, nil) where entry.setExpiryInPlace(nil):
            changes &+= 1
            expiresCount -= 1
            expirySum -= Int128(old)
        default:
            guard let rebuilt = Entry.make(key: entry.key, value: entry.value, expiry: expiry) else { return }
            rebuilt.flags |= entry.flags & Entry.keptFlags
            let access = entry.access
            replace(at: index, with: rebuilt, hash: hash)
            rebuilt.access = access
        }
    }

    /// Removes and frees every entry.
    package func removeAll() {
        if let slots {
            for i in 0..<capacity where slots[i] != 0 {
                Self.unpack(slots[i]).deallocate()
            }
            EntryMemory.freeTable(slots, slots: capacity)
        }
        changes &+= count
        slots = nil
        capacity = 0
        publishTable()
        count = 0
        expiresCount = 0
        charge(-usedBytes)
        flushAccounting()
        expiryIndexBytes = 0
        expirySum = 0
        expiryIndex = ExpiryIndex()
        hand = 0
    }

    /// Exchanges everything this shard holds with `other` (SWAPDB). Both locks must be held.
    package func swapContents(with other: Shard) {
        swap(&slots, &other.slots)
        swap(&capacity, &other.capacity)
        swap(&count, &other.count)
        swap(&expiresCount, &other.expiresCount)
        swap(&usedBytes, &other.usedBytes)
        swap(&expirySum, &other.expirySum)
        swap(&expiryIndex, &other.expiryIndex)
        swap(&expiryIndexBytes, &other.expiryIndexBytes)
        swap(&hand, &other.hand)
        publishTable()
        other.publishTable()
        markForSweep()
        other.markForSweep()
    }

    // MARK: memory accounting

    /// Adds `delta` bytes to this shard's total, and to the budget's once enough has accumulated.
    @inline(__always)
    private func charge(_ delta: Int) {
        usedBytes += delta
        unflushedBytes += delta
        markForSweep()
        if unflushedBytes >= budget.flushThreshold.load(ordering: .relaxed)
            || -unflushedBytes >= budget.flushThreshold.load(ordering: .relaxed)
        {
            flushAccounting()
        }
    }

    /// Adds this shard's pending change to the budget's total.
    package func flushAccounting() {
        if unflushedBytes != 0 {
            budget.datasetBytes.add(unflushedBytes, ordering: .relaxed)
            unflushedBytes = 0
        }
    }

    /// Marks this shard for the sweeper, unless it is marked already.
    @inline(__always)
    private func markForSweep() {
        if !markedForSweep {
            markedForSweep = true
            sweepMarks?.mark(sweepIndex)
        }
    }

    /// Unmarks this shard for the sweeper when it has nothing left for it: no expiry index to go through and
    /// nothing to add to the budget's total. The sweeper calls it after it has swept and flushed the shard.
    package func unmarkIfSwept() {
        guard markedForSweep, expiryIndex.isEmpty, unflushedBytes == 0 else { return }
        markedForSweep = false
        sweepMarks?.unmark(sweepIndex)
    }

    /// Charges the expiry index's current size.
    private func chargeExpiryIndex() {
        let bytes = expiryIndex.registrations * 8
        if bytes != expiryIndexBytes {
            charge(bytes - expiryIndexBytes)
            expiryIndexBytes = bytes
        }
    }

    // MARK: iteration

    /// Visits the entries whose home slot is the one `cursor` points at, and following ones, and returns the
    /// next cursor (0 when the whole table was visited). The cursor counts home slots in reversed-bit order,
    /// as Redis's SCAN does, so a key present for a whole iteration is visited at least once even when the
    /// table grows or shrinks in between.
    package func scan(cursor: UInt64, visit: (Entry) -> Void) -> UInt64 {
        guard let slots, capacity > 0 else { return 0 }
        let mask = UInt64(capacity - 1)
        let home = Int(cursor & mask)
        var i = home
        while slots[i] != 0 {
            if Int(Self.tag(slots[i]) & mask) == home { visit(Self.unpack(slots[i])) }
            i = (i + 1) & Int(mask)
            if i == home { break }
        }
        var v = cursor | ~mask
        v = Self.reverseBits(v) &+ 1
        return Self.reverseBits(v)
    }

    /// Calls `body` for every entry (KEYS, snapshots). The table must not change during the call.
    package func forEach(_ body: (Entry) -> Void) {
        guard let slots else { return }
        for i in 0..<capacity where slots[i] != 0 {
            body(Self.unpack(slots[i]))
        }
    }

    /// A slot index holding an entry, chosen at random, or nil when the shard is empty.
    package func randomSlot<G: RandomNumberGenerator>(using generator: inout G) -> Int? {
        guard count > 0, let slots else { return nil }
        var i = Int.random(in: 0..<capacity, using: &generator)
        while slots[i] == 0 { i = (i + 1) & (capacity - 1) }
        return i
    }

    static func reverseBits(_ value: UInt64) -> UInt64 {
        var v = value
        v = ((v >> 1) & 0x5555_5555_5555_5555) | ((v & 0x5555_5555_5555_5555) << 1)
        v = ((v >> 2) & 0x3333_3333_3333_3333) | ((v & 0x3333_3333_3333_3333) << 2)
        v = ((v >> 4) & 0x0F0F_0F0F_0F0F_0F0F) | ((v & 0x0F0F_0F0F_0F0F_0F0F) << 4)
        return v.byteSwapped
    }

    // MARK: expiry sweeping

    /// Reclaims keys whose time is up at `now`, working through at most about `budget` index items.
    /// Returns the number of items it worked through (a result below `budget` means it is up to date).
    package func sweepExpired(now: Int64, budget: Int) -> Int {
        guard !expiryIndex.isEmpty else { return 0 }
        var work = 0
        while work < budget, var batch = expiryIndex.takeDue(now: now) {
            while work < budget, let hash = batch.hashes.popLast() {
                work += 1
                visitEntries(hash: hash) { index, entry in
                    guard let expiry = entry.expiry else { return false }
                    if expiry < now {
                        removeExpired(at: index)
                        return true
                    }
                    // A far window being spread into slots: keep keys that really expire in it.
                    if batch.isCascade && expiry >> (ExpiryIndex.slotShift + ExpiryIndex.windowShift) == batch.slot {
                        expiryIndex.register(hash: UInt64(hash), expiry: expiry)
                    }
                    return false
                }
            }
            expiryIndex.putBack(batch)
        }
        if expiryIndex.registrations > staleRegistrationLimit { rebuildExpiryIndex() }
        chargeExpiryIndex()
        return work
    }

    /// The number of keys whose expiry is before `now` but which are still in the table.
    package func countExpired(now: Int64) -> Int {
        guard expiresCount > 0, let slots else { return 0 }
        var n = 0
        for i in 0..<capacity where slots[i] != 0 {
            if Self.unpack(slots[i]).isExpired(at: now) { n += 1 }
        }
        return n
    }

    /// Calls `body` for each entry whose key hashes to `hash`; `body` returns true when it removed the
    /// entry (the table may then have changed, so the run is searched again from the key's home slot).
    private func visitEntries(hash: UInt32, _ body: (Int, Entry) -> Bool) {
        let tag = UInt64(hash) & Self.tagMask
        var steps = 0
        var i = Int(truncatingIfNeeded: hash) & (capacity - 1)
        while let slots = self.slots, steps <= capacity, slots[i] != 0 {
            let s = slots[i]
            if Self.tag(s) == tag, UInt32(truncatingIfNeeded: Keyspace.hasher.hash(Self.unpack(s).key)) == hash,
                body(i, Self.unpack(s))
            {
                i = Int(truncatingIfNeeded: hash) & (capacity - 1)
                steps = 0
                continue
            }
            i = (i + 1) & (capacity - 1)
            steps += 1
        }
    }

    /// How many hashes the expiry index may hold before it is rebuilt from the live keys: the keys with a TTL
    /// plus slack proportional to the table, so that rebuilding (which reads the whole table) costs O(1) per
    /// registration however the keys' TTLs churn. The slack is kept small because stale hashes count
    /// towards maxmemory: every key evicted or deleted with a TTL leaves one behind.
    private var staleRegistrationLimit: Int { expiresCount + max(64, capacity / 2) }

    /// Records a key's expiry in the index. A key that is overwritten, deleted or given a new TTL leaves its
    /// old hash behind, so the index is rebuilt here when such stale hashes pile up: without it, a client that
    /// keeps changing TTLs between two sweeps would grow the index without bound.
    private func registerExpiry(hash: UInt64, expiry: Int64) {
        markForSweep()
        expiryIndex.register(hash: hash, expiry: expiry)
        if expiryIndex.registrations > staleRegistrationLimit { rebuildExpiryIndex() }
        chargeExpiryIndex()
    }

    private func rebuildExpiryIndex() {
        var index = ExpiryIndex()
        forEach { entry in
            if let expiry = entry.expiry { index.register(hash: Keyspace.hasher.hash(entry.key), expiry: expiry) }
        }
        expiryIndex = index
    }

    // MARK: internals

    @inline(__always)
    private func account(added entry: Entry, hash: UInt64) {
        charge(entry.allocatedSize)
        budget.forgetNothingToEvict()  // a candidate for eviction, maybe
        stampNew(entry)
        if let expiry = entry.expiry {
            expiresCount += 1
            expirySum += Int128(expiry)
            registerExpiry(hash: hash, expiry: expiry)
        }
    }

    @inline(__always)
    private func account(removed entry: Entry) {
        charge(-entry.allocatedSize)
        if let expiry = entry.expiry {
            expiresCount -= 1
            expirySum -= Int128(expiry)
        }
    }

    /// Empties slot `index` and shifts the rest of its run back so that every entry stays reachable.
    private func removeSlot(_ index: Int) {
        let slots = self.slots!
        let mask = capacity - 1
        var hole = index
        var j = (index + 1) & mask
        while slots[j] != 0 {
            let home = Int(Self.tag(slots[j])) & mask
            // Move slots[j] into the hole unless its home lies cyclically in (hole, j].
            let distanceToHome = (j - home) & mask
            let distanceToHole = (j - hole) & mask
            if distanceToHome >= distanceToHole {
                slots[hole] = slots[j]
                hole = j
            }
            j = (j + 1) & mask
        }
        slots[hole] = 0
    }

    static func capacityFor(_ count: Int) -> Int {
        var c = minCapacity
        while c * 3 < count * 8 { c <<= 1 }  // load at most 3/8 right after a resize
        return c
    }

    private func grow() -> Bool {
        let target = capacity == 0 ? Self.minCapacity : capacity * 2
        guard target <= Self.maxCapacity else { return false }
        resize(to: target)
        return true
    }

    private func resize(to newCapacity: Int) {
        let newSlots = EntryMemory.allocateTable(slots: newCapacity)
        let mask = newCapacity - 1
        if let old = slots {
            for i in 0..<capacity where old[i] != 0 {
                let s = old[i]
                var j = Int(Self.tag(s)) & mask
                while newSlots[j] != 0 { j = (j + 1) & mask }
                newSlots[j] = s
            }
            EntryMemory.freeTable(old, slots: capacity)
        }
        charge((newCapacity - capacity) * MemoryLayout<UInt64>.stride)
        slots = newSlots
        capacity = newCapacity
        hand &= newCapacity - 1
        publishTable()
    }

    // MARK: prefetching

    /// The table's address and its capacity less one, published for ``prefetch(hash:)``, which reads them
    /// without the lock (so they are atomics; a reader may see an address and a mask of different tables).
    @usableFromInline let tableAddressHint = Atomic<UInt>(0)
    @usableFromInline let tableMaskHint = Atomic<UInt>(0)

    private func publishTable() {
        tableAddressHint.store(UInt(bitPattern: slots), ordering: .relaxed)
        tableMaskHint.store(UInt(max(capacity - 1, 0)), ordering: .relaxed)
    }

    /// Starts loading the cache line of `hash`'s home slot, so that a lookup a little later does not wait for
    /// it. Called without the lock, ahead of the commands of a pipeline: the table may be replaced or freed
    /// meanwhile, and a prefetch never faults, so at worst the hint is wasted.
    @inlinable @inline(__always)
    public func prefetch(hash: UInt64) {
        let address = tableAddressHint.load(ordering: .relaxed)
        guard address != 0 else { return }
        let home = UInt(truncatingIfNeeded: hash) & tableMaskHint.load(ordering: .relaxed)
        cached_prefetch(UnsafeRawPointer(bitPattern: address &+ home &* 8))
    }
}
