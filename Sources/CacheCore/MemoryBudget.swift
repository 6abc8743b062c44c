import Synchronization

/// How the keyspace makes room when its memory is over the limit (`maxmemory-policy`).
@usableFromInline package enum EvictionPolicy: UInt8, Sendable, CaseIterable {
    /// Evict nothing: commands that need memory are refused.
    case noEviction
    /// Any key, least recently read first (approximated by sampling).
    case allKeysLRU
    /// Keys with a TTL, least recently read first.
    case volatileLRU
    /// Any key, least frequently read first (Redis's logarithmic counter with decay).
    case allKeysLFU
    /// Keys with a TTL, least frequently read first.
    case volatileLFU
    /// Any key, at random.
    case allKeysRandom
    /// Keys with a TTL, at random.
    case volatileRandom
    /// Keys with a TTL, the one expiring soonest first.
    case volatileTTL
    /// Any key, by a SIEVE-style hand over each shard's table that spares keys read since it last passed
    /// (see ``Shard/evictOne(now:)``). The default.
    case allKeysSieve

    /// Whether candidates have a score that compares across shards (LRU's idle time, LFU's rarity, the
    /// nearness of expiry), rather than being taken in turn (random, SIEVE's hand).
    package var hasScores: Bool {
        switch self {
        case .allKeysLRU, .volatileLRU, .allKeysLFU, .volatileLFU, .volatileTTL: true
        default: false
        }
    }

    /// Whether the access stamp holds an LFU counter; under every other policy it holds the time of the last
    /// access (LRU's clock), as Redis keeps it (OBJECT IDLETIME).
    @inlinable
    package var tracksFrequency: Bool { self == .allKeysLFU || self == .volatileLFU }

    /// Whether only keys with a TTL may be evicted.
    @inlinable
    package var volatileOnly: Bool {
        switch self {
        case .volatileLRU, .volatileLFU, .volatileRandom, .volatileTTL: true
        default: false
        }
    }
}

/// The memory limit and the keyspace's running total of used bytes, shared by every shard.
///
/// Shards count their bytes exactly under their own locks and add their changes to ``used`` in batches of
/// about ``flushThreshold`` bytes, so two event loops writing to different shards do not write one shared
/// cache line on every command. The total is therefore exact to within `flushThreshold` per shard, and the
/// sweeper makes it exact at every cycle (``Keyspace/flushAccounting()``).
public final class MemoryBudget: Sendable {
    /// The limit in bytes; 0 means none.
    @usableFromInline package let limitBytes = Atomic<Int>(0)
    /// Bytes held by entries, tables and expiry indexes, as flushed by the shards.
    @usableFromInline package let datasetBytes = Atomic<Int>(0)
    /// Heap bytes not held by the dataset (connection buffers, allocator caches), refreshed by the sweeper.
    @usableFromInline package let overheadBytes = Atomic<Int>(0)
    private let policyValue = Atomic<UInt8>(EvictionPolicy.allKeysSieve.rawValue)
    /// Keys sampled per eviction by the approximated policies (`maxmemory-samples`).
    package let samples = Atomic<Int>(5)
    /// How far a shard's unflushed change may grow before it is added to ``datasetBytes``.
    package let flushThreshold = Atomic<Int>(256)

    package init() {}

    @inlinable
    package var policy: EvictionPolicy {
        get { EvictionPolicy(rawValue: policyValueLoad()) ?? .noEviction }
    }

    @usableFromInline
    func policyValueLoad() -> UInt8 { policyValue.load(ordering: .relaxed) }

    package func setPolicy(_ policy: EvictionPolicy) {
        policyValue.store(policy.rawValue, ordering: .relaxed)
        forgetNothingToEvict()
    }

    /// Sets the limit (0: none). The flush threshold follows it: 1/65536 of the limit, between 256 bytes and
    /// 64 KiB, so that the unflushed total of the 256 shards of a database is under 0.4% of the limit.
    package func setLimit(_ bytes: Int) {
        limitBytes.store(max(0, bytes), ordering: .relaxed)
        forgetNothingToEvict()
        let threshold = bytes > 0 ? min(64 * 1024, max(256, bytes / 65536)) : 64 * 1024
        flushThreshold.store(threshold, ordering: .relaxed)
    }

    /// The bytes compared with the limit: the dataset plus the heap's other allocations.
    @inlinable
    package var usedBytes: Int {
        datasetBytes.load(ordering: .relaxed) + overheadBytes.load(ordering: .relaxed)
    }

    /// Whether a limit is set and used memory is over it: two relaxed loads, on every command that may
    /// allocate.
    @inlinable @inline(__always)
    package var isOverLimit: Bool {
        let limit = limitBytes.load(ordering: .relaxed)
        return limit > 0 && usedBytes > limit
    }

    // MARK: remembering that nothing can be evicted

    /// What eviction last found in databases 0 to 31: bit `d` set, nothing the policy may evict in database `d`;
    /// bit `32 + d` set, a search of database `d` is under way. Anything that may give eviction a candidate
    /// (a key written, a TTL given, the policy or limit changed) clears it all, so that while memory is over the
    /// limit with nothing to evict, each command costs one check instead of a walk of every shard.
    private let evictionMemo = Atomic<UInt64>(0)

    /// Forgets what eviction found: a key was written or given a TTL (called under the shard's lock, on every
    /// write: one relaxed load unless something is remembered), or what eviction may take changed.
    @inline(__always)
    package func forgetNothingToEvict() {
        if evictionMemo.load(ordering: .relaxed) != 0 { evictionMemo.store(0, ordering: .relaxed) }
    }

    /// Whether a search of `database` found nothing to evict and nothing changed since.
    @inline(__always)
    package func remembersNothingToEvict(in database: Int) -> Bool {
        database < 32 && evictionMemo.load(ordering: .relaxed) & (1 << UInt64(database)) != 0
    }

    /// Notes that a search of `database` starts: what changes from now on makes its finding stale. Set before
    /// the search takes its first shard lock, so that a write to a shard after the search looked at it sees it.
    package func beginEvictionSearch(in database: Int) {
        guard database < 32 else { return }
        evictionMemo.bitwiseOr(1 << UInt64(32 + database), ordering: .relaxed)
    }

    /// Ends the search that ``beginEvictionSearch(in:)`` began: when it found nothing to evict, and nothing
    /// changed meanwhile, that is remembered.
    package func endEvictionSearch(in database: Int, foundNothing: Bool) {
        guard database < 32 else { return }
        let searching: UInt64 = 1 << UInt64(32 + database)
        guard foundNothing else {
            evictionMemo.bitwiseAnd(~searching, ordering: .relaxed)
            return
        }
        var current = evictionMemo.load(ordering: .relaxed)
        while current & searching != 0 {
            let (exchanged, original) = evictionMemo.compareExchange(
                expected: current, desired: current | (1 << UInt64(database)), ordering: .relaxed)
            if exchanged { return }
            current = original
        }
    }
}
