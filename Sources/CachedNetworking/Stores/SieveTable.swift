import NIOCore

/// The memory store's table: a hash index over slots linked in insertion order, evicted with SIEVE.
///
/// SIEVE (Zhang et al., NSDI '24) keeps one "visited" bit per entry and a hand that walks from the oldest
/// entry towards the newest: a visited entry is spared (its bit cleared), the first unvisited one is evicted.
/// A hit only sets a bit, so hits never reorder the list — cheaper than LRU and as good or better for
/// caches with one-hit-wonders.
///
/// Not thread-safe: ``MemoryStore`` keeps it behind a mutex. Times are nanoseconds on the store's clock.
package struct SieveTable {
    /// An entry, or a free slot (`live == false`).
    package struct Slot {
        var key: StoreKey
        var value: ByteBuffer
        /// The cache's decoded form of `value`, when the writer gave one (see ``DecodedEnvelopeStore``);
        /// it always belongs to the `value` beside it.
        var decoded: DecodedEnvelope?
        /// When the entry expires; `Int64.max` when it does not.
        var expiresAt: Int64
        /// Bytes charged for the entry: key + value + per-entry overhead.
        var cost: Int
        var visited: Bool
        var live: Bool
        /// Towards the newer neighbour (-1 at the head).
        var newer: Int32
        /// Towards the older neighbour (-1 at the tail).
        var older: Int32
    }

    package let maxBytes: Int
    package let entryOverhead: Int

    package private(set) var index: [StoreKey: Int32] = [:]
    private(set) var slots: [Slot] = []
    private var freeSlots: [Int32] = []
    /// Newest entry.
    private var head: Int32 = -1
    /// Oldest entry.
    private var tail: Int32 = -1
    /// The next eviction candidate (-1: start from the tail).
    private var hand: Int32 = -1
    /// Bytes charged for all live entries.
    package private(set) var bytes = 0

    package init(maxBytes: Int, entryOverhead: Int) {
        self.maxBytes = maxBytes
        self.entryOverhead = entryOverhead
    }

    package var count: Int { index.count }

    /// The cost charged for an entry.
    package func cost(keyBytes: Int, valueBytes: Int) -> Int { keyBytes + valueBytes + entryOverhead }

    /// The slot of `key` if it holds a live, unexpired entry; an expired entry is removed on the way.
    package mutating func find(_ key: StoreKey, now: Int64) -> Int32? {
        guard let slot = index[key] else { return nil }
        if slots[Int(slot)].expiresAt <= now {
            remove(slot: slot)
            return nil
        }
        return slot
    }

    /// The value under `key`, marking the entry visited.
    package mutating func get(_ key: StoreKey, now: Int64) -> ByteBuffer? {
        guard let slot = find(key, now: now) else { return nil }
        slots[Int(slot)].visited = true
        return slots[Int(slot)].value
    }

    /// The value under `key` and its decoded form, marking the entry visited.
    mutating func getDecoded(_ key: StoreKey, now: Int64) -> (value: ByteBuffer, decoded: DecodedEnvelope?)? {
        guard let slot = find(key, now: now) else { return nil }
        slots[Int(slot)].visited = true
        return (slots[Int(slot)].value, slots[Int(slot)].decoded)
    }

    /// Stores `value` under `key`, replacing any entry, then evicts until the table fits its budget.
    ///
    /// An entry that alone costs more than the whole budget is not kept (as if evicted at once).
    package mutating func set(_ key: StoreKey, value: ByteBuffer, expiresAt: Int64, now: Int64) {
        set(key, value: value, decoded: nil, expiresAt: expiresAt, now: now)
    }

    /// ``set(_:value:expiresAt:now:)`` with the cache's decoded form of `value` (``DecodedEnvelopeStore``).
    mutating func set(_ key: StoreKey, value: ByteBuffer, decoded: DecodedEnvelope?, expiresAt: Int64, now: Int64) {
        let newCost = cost(keyBytes: key.byteCount, valueBytes: value.readableBytes)
        let existing = index[key]
        guard newCost <= maxBytes else {
            if let existing { remove(slot: existing) }
            return
        }
        let slot: Int32
        if let existing {
            let i = Int(existing)
            bytes += newCost - slots[i].cost
            slots[i].value = value
            slots[i].decoded = decoded
            slots[i].expiresAt = expiresAt
            slots[i].cost = newCost
            slots[i].visited = true
            slot = existing
        } else {
            slot = insertAtHead(Slot(
                key: key, value: value, decoded: decoded, expiresAt: expiresAt, cost: newCost,
                visited: false, live: true, newer: -1, older: -1))
            index[key] = slot
            bytes += newCost
        }
        evictToBudget(sparing: slot)
    }

    /// Replaces the value of the live entry in `slot`, keeping its expiry.
    package mutating func replaceValue(slot: Int32, with value: ByteBuffer) {
        let i = Int(slot)
        let newCost = cost(keyBytes: slots[i].key.byteCount, valueBytes: value.readableBytes)
        bytes += newCost - slots[i].cost
        slots[i].value = value
        slots[i].decoded = nil
        slots[i].cost = newCost
        slots[i].visited = true
        evictToBudget(sparing: slot)
    }

    /// Removes the entry in `slot`.
    package mutating func remove(slot: Int32) {
        let i = Int(slot)
        precondition(slots[i].live, "removing a free slot")
        let newer = slots[i].newer
        let older = slots[i].older
        if newer >= 0 { slots[Int(newer)].older = older } else { head = older }
        if older >= 0 { slots[Int(older)].newer = newer } else { tail = newer }
        if hand == slot { hand = newer }
        index[slots[i].key] = nil
        bytes -= slots[i].cost
        slots[i] = Slot(
            key: StoreKey(""), value: ByteBuffer(), decoded: nil, expiresAt: 0, cost: 0,
            visited: false, live: false, newer: -1, older: -1)
        freeSlots.append(slot)
    }

    /// Removes expired entries among up to `limit` slots starting at `start`.
    /// - Returns: how many were removed, and where to continue (nil when the scan reached the end).
    package mutating func removeExpired(from start: Int, limit: Int, now: Int64) -> (removed: Int, next: Int?) {
        var removed = 0
        let end = min(slots.count, start + limit)
        var i = start
        while i < end {
            if slots[i].live && slots[i].expiresAt <= now {
                remove(slot: Int32(i))
                removed += 1
            }
            i += 1
        }
        return (removed, end < slots.count ? end : nil)
    }

    /// Drops every entry and releases the table's memory.
    package mutating func removeAll() {
        self = SieveTable(maxBytes: maxBytes, entryOverhead: entryOverhead)
    }

    // MARK: private

    private mutating func insertAtHead(_ entry: Slot) -> Int32 {
        var entry = entry
        entry.older = head
        entry.newer = -1
        let slot: Int32
        if let reused = freeSlots.popLast() {
            slot = reused
            slots[Int(slot)] = entry
        } else {
            slot = Int32(slots.count)
            slots.append(entry)
        }
        if head >= 0 { slots[Int(head)].newer = slot }
        head = slot
        if tail < 0 { tail = slot }
        return slot
    }

    /// Evicts with SIEVE until the table fits, never evicting `spared` (the entry just written).
    private mutating func evictToBudget(sparing spared: Int32) {
        while bytes > maxBytes && index.count > 1 {
            var candidate = hand >= 0 ? hand : tail
            // Every other entry is cleared within one lap, so this finds a victim within two laps.
            while true {
                if candidate < 0 { candidate = tail }
                let i = Int(candidate)
                if candidate == spared {
                    candidate = slots[i].newer
                } else if slots[i].visited {
                    slots[i].visited = false
                    candidate = slots[i].newer
                } else {
                    break
                }
            }
            hand = slots[Int(candidate)].newer
            remove(slot: candidate)
        }
    }
}
