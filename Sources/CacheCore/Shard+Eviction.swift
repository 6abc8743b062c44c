/// Eviction: what each policy records when a key is written or read, and how a shard chooses the key to
/// remove when the keyspace is over its memory limit. All require the shard's lock.
///
/// Per-entry state is the 2-bit read count in the flags byte (default policy) and the 3-byte access stamp
/// (LRU and LFU), as Redis keeps 24 bits per object:
///
/// - LRU: the time of the last write or read in units of 128 ms, modulo 2^24 (it wraps after 24.8 days;
///   Redis uses 1 s units and wraps after 194 days).
/// - LFU: Redis's layout: the low 8 bits a logarithmic access counter (new keys start at 5, an access
///   increments it with probability 1 / ((counter - 5) * 10 + 1)), the high 16 bits the minute of the last
///   decrement; the counter loses one per minute without access.
extension Shard {
    static let lruUnitShift: Int64 = 7
    static let stampMask: UInt32 = 0xFF_FFFF
    static let lfuInitialCount: UInt32 = 5
    static let lfuLogFactor: UInt64 = 10

    @inline(__always)
    static func lruClock(_ now: Int64) -> UInt32 { UInt32(truncatingIfNeeded: now >> lruUnitShift) & stampMask }

    @inline(__always)
    static func lfuMinutes(_ now: Int64) -> UInt32 { UInt32(truncatingIfNeeded: now / 60_000) & 0xFFFF }

    /// Sets the access stamp of an entry just written, for the current policy.
    @inline(__always)
    func stampNew(_ entry: Entry) {
        if budget.policy.tracksFrequency {
            entry.access = Self.lfuMinutes(clockNow) << 8 | Self.lfuInitialCount
        } else {
            entry.access = Self.lruClock(clockNow)
        }
    }

    /// Records an access at `now` in the LRU stamp, writing only when the stamp changes (every 128 ms), so a
    /// read of a hot key does not dirty its cache line each time.
    @inline(__always)
    func stampAccess(_ entry: Entry, now: Int64) {
        let stamp = Self.lruClock(now)
        if entry.access != stamp { entry.access = stamp }
    }

    /// Seconds since the last access of `entry` at `now`, to the nearest second, as OBJECT IDLETIME reports
    /// them; meaningful only while the policy keeps LRU stamps (``EvictionPolicy/tracksFrequency`` false).
    package func idleSeconds(_ entry: Entry, now: Int64) -> Int64 {
        let elapsed = (Self.lruClock(now) &- entry.access) & Self.stampMask
        return ((Int64(elapsed) << Self.lruUnitShift) + 500) / 1000
    }

    /// Gives the entry in slot `index` the access history of a key just created (RESTORE, which may have
    /// written over an older one) and then what RESTORE's IDLETIME or FREQ asks for, as Redis does: under an
    /// LFU policy the counter `frequency` (0-255), under any other a last access `idleSeconds` ago (at most
    /// about 24.8 days, the span of the stamp). A value the policy does not use changes nothing.
    package func restoreAccess(_ index: Int, idleSeconds: Int?, frequency: Int?, now: Int64) {
        let e = entry(at: index)
        e.readCount = 0
        stampNew(e)
        if budget.policy.tracksFrequency {
            if let frequency { e.access = Self.lfuMinutes(now) << 8 | UInt32(min(255, max(0, frequency))) }
        } else if let idleSeconds {
            let span = Int64(Self.stampMask) << Self.lruUnitShift
            let idle = min(Int64(max(0, idleSeconds)), span / 1000) * 1000
            e.access = Self.lruClock(now - idle)
        }
    }

    /// The LFU counter of `entry` at `now`, decayed but not updated (OBJECT FREQ).
    package func frequency(_ entry: Entry, now: Int64) -> Int {
        Int(lfuDecayedCounter(entry.access, now: now))
    }

    /// Marks the entry in slot `index` as read at `now` (GET, MGET): raises its read count, or its stamp.
    @inline(__always)
    package func touch(_ index: Int, now: Int64) {
        let e = entry(at: index)
        switch budget.policy {
        case .allKeysLRU, .volatileLRU:
            e.access = Self.lruClock(now)
        case .allKeysLFU, .volatileLFU:
            e.access = lfuCounted(e.access, now: now)
        default:
            let flags = e.flags
            if flags & Entry.readCountMask != Entry.readCountMask { e.readCount = e.readCount + 1 }
            stampAccess(e, now: now)
        }
    }

    /// An LFU stamp after one more access at `now`: the counter decayed, then raised with probability
    /// 1 / ((counter - 5) * 10 + 1).
    @inline(__always)
    func lfuCounted(_ access: UInt32, now: Int64) -> UInt32 {
        var counter = lfuDecayedCounter(access, now: now)
        if counter < 255 {
            let base = UInt64(counter > Self.lfuInitialCount ? counter - Self.lfuInitialCount : 0)
            if nextRandom() % (base * Self.lfuLogFactor + 1) == 0 { counter += 1 }
        }
        return Self.lfuMinutes(now) << 8 | counter
    }

    /// Records an access to the entry in slot `index` by a command other than a read SIEVE counts (STRLEN,
    /// a write to an existing key, EXPIRE...), as Redis's key lookups do: the LFU counter, or else the time of
    /// the last access. SIEVE's read count is left alone.
    @inline(__always)
    package func noteAccess(_ index: Int, now: Int64) {
        let e = entry(at: index)
        if budget.policy.tracksFrequency { e.access = lfuCounted(e.access, now: now) } else { stampAccess(e, now: now) }
    }

    /// The LFU counter of a stamp, less one per minute since its last decrement.
    @inline(__always)
    func lfuDecayedCounter(_ access: UInt32, now: Int64) -> UInt32 {
        let counter = access & 0xFF
        let last = access >> 8
        let minutes = Self.lfuMinutes(now)
        let elapsed = minutes >= last ? minutes - last : 0xFFFF - last + minutes
        return counter > elapsed ? counter - elapsed : 0
    }

    @inline(__always)
    func nextRandom() -> UInt64 {
        var x = randomState
        x ^= x << 13
        x ^= x >> 7
        x ^= x << 17
        randomState = x
        return x
    }

    /// Removes one key chosen by the budget's policy at `now`, counting it in ``evictedKeys``. Returns
    /// false when this shard has no key the policy may evict (none at all, or none with a TTL for the
    /// volatile policies), or the policy is `noeviction`.
    @discardableResult
    package func evictOne(now: Int64) -> Bool {
        guard let victim = chooseVictim(now: now) else { return false }
        evict(at: victim.index)
        return true
    }

    /// The key ``evictOne(now:)`` would remove at `now`, without removing it: its slot, the slot's content
    /// (to tell, under the lock again, that it still holds that key), and how good a victim it is by the
    /// policy, higher being better (idle time for LRU, rarity for LFU, nearness of expiry for volatile-ttl;
    /// 0 for the others). Scores of shards of one keyspace compare. nil when there is no candidate.
    package func victimCandidate(now: Int64) -> (index: Int, slot: UInt64, score: Int)? {
        guard let slots, let victim = chooseVictim(now: now) else { return nil }
        return (victim.index, slots[victim.index], victim.score)
    }

    /// Removes the candidate ``victimCandidate(now:)`` named if its slot still holds it; false otherwise.
    package func evict(candidate: (index: Int, slot: UInt64, score: Int)) -> Bool {
        guard let slots, candidate.index < capacity, slots[candidate.index] == candidate.slot, candidate.slot != 0
        else { return false }
        // The same slot word may hold a key written since at the same address: never one the policy spares.
        if budget.policy.volatileOnly && !Self.unpack(candidate.slot).hasExpiry { return false }
        evict(at: candidate.index)
        return true
    }

    private func evict(at index: Int) {
        if removals.isEnabled { removals.record(entry(at: index).key, database: database, reason: .evicted) }
        remove(at: index)
        evictedKeys &+= 1
    }

    private func chooseVictim(now: Int64) -> (index: Int, score: Int)? {
        let policy = budget.policy
        guard count > 0, let slots else { return nil }
        if policy.volatileOnly && expiresCount == 0 { return nil }
        switch policy {
        case .noEviction:
            return nil
        case .allKeysSieve:
            return sieveVictim(slots).map { ($0, 0) }
        case .allKeysRandom, .volatileRandom:
            return sampleVictim(slots, samples: 1, volatileOnly: policy.volatileOnly) { _ in 0 }
        case .allKeysLRU, .volatileLRU:
            let clock = Self.lruClock(now)
            return sampleVictim(slots, samples: budget.samples.load(ordering: .relaxed), volatileOnly: policy.volatileOnly) {
                // Idle time in clock units, modulo the clock's wrap.
                Int((clock &- $0.access) & Self.stampMask)
            }
        case .allKeysLFU, .volatileLFU:
            return sampleVictim(slots, samples: budget.samples.load(ordering: .relaxed), volatileOnly: policy.volatileOnly) {
                255 - Int(lfuDecayedCounter($0.access, now: now))
            }
        case .volatileTTL:
            return sampleVictim(slots, samples: budget.samples.load(ordering: .relaxed), volatileOnly: true) {
                // The sooner it expires, the better a victim.
                Int.max - Int($0.expiry ?? .max)
            }
        }
    }

    /// The default policy's choice: the hand walks the table in slot order from where it stopped; an entry
    /// read since the hand last passed (read count > 0) is spared and its count decremented, the first
    /// entry with a count of 0 is the victim. Entries never move to a queue's head: a kept entry stays
    /// where it is, and a new entry lands wherever its hash puts it, with a count of 0.
    ///
    /// This is SIEVE's rule (spare the visited, evict the first unvisited, never reorder) over the hash
    /// table's order instead of insertion order, which keeps it free of per-entry links; the 2-bit count
    /// lets a key read several times survive several passes.
    private func sieveVictim(_ slots: UnsafeMutablePointer<UInt64>) -> Int? {
        let mask = capacity - 1
        var i = hand & mask
        // Counts are at most 3, so four passes always find a victim.
        for _ in 0..<(4 * capacity) {
            let s = slots[i]
            if s != 0 {
                let e = Self.unpack(s)
                let readCount = e.readCount
                if readCount == 0 {
                    // Removing shifts the next entry of the run into this slot: the hand stays to look at it.
                    hand = i
                    return i
                }
                e.readCount = readCount - 1
            }
            i = (i + 1) & mask
        }
        return nil
    }

    /// The entry with the highest `score` among `samples` consecutive occupied slots from a random one
    /// (only entries with a TTL when `volatileOnly`), as Redis samples a few keys per eviction. When a
    /// shard holds at most `samples` candidates, every one of them is considered.
    private func sampleVictim(
        _ slots: UnsafeMutablePointer<UInt64>, samples: Int, volatileOnly: Bool, score: (Entry) -> Int
    ) -> (index: Int, score: Int)? {
        let mask = capacity - 1
        var i = Int(truncatingIfNeeded: nextRandom()) & mask
        var best: (index: Int, score: Int)?
        var seen = 0
        var steps = 0
        while seen < max(1, samples) && steps < capacity {
            let s = slots[i]
            if s != 0 {
                let e = Self.unpack(s)
                if !volatileOnly || e.hasExpiry {
                    let value = score(e)
                    if best == nil || value > best!.score { best = (i, value) }
                    seen += 1
                }
            }
            i = (i + 1) & mask
            steps += 1
        }
        return best
    }
}
