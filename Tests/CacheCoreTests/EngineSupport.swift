import CacheCore

/// Helpers shared by the engine tests: byte keys, a seeded generator, and shard operations that take the
/// shard's lock and work on `[UInt8]` keys.

/// The UTF-8 bytes of `text`.
func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

/// The key `key:<i>`.
func key(_ i: Int) -> [UInt8] { bytes("key:\(i)") }

/// The hash the engine uses for `key`.
func hashOf(_ key: [UInt8]) -> UInt64 { Keyspace.hasher.hash(key) }

/// A small deterministic generator (SplitMix64), so that a failing run can be repeated.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// A point in time far from zero, so that relative arithmetic in tests never goes negative.
let start: Int64 = 1_767_225_600_000

/// How late the sweeper may reclaim a key: it drains the expiry index in 64 ms slots, each once the whole
/// slot has passed. (Reads never see such a key: lookup expires it on the spot.)
let sweepLag: Int64 = 64

extension Shard {
    /// Stores `value` under `key` with `expiry` (nil: no TTL), as SET does.
    @discardableResult
    func put(_ key: [UInt8], _ value: [UInt8], expiry: Int64? = nil, now: Int64 = start) -> Bool {
        let hash = hashOf(key)
        return lock.withLock {
            key.withUnsafeBytes { k in
                value.withUnsafeBytes { v in
                    let existing = lookup(k, hash: hash, now: now)
                    return setValue(k, hash: hash, value: v, ttl: expiry.map { .at($0) } ?? .clear, existing: existing)
                }
            }
        }
    }

    /// The value of `key` at `now`, through `lookup` (so an expired key is removed on the way).
    func get(_ key: [UInt8], now: Int64 = start) -> [UInt8]? {
        lock.withLock {
            key.withUnsafeBytes { k in lookup(k, hash: hashOf(key), now: now).map { Array(entry(at: $0).value) } }
        }
    }

    /// Whether `key` is in the table, expired or not (no lazy expiry).
    func holds(_ key: [UInt8]) -> Bool {
        lock.withLock { key.withUnsafeBytes { find($0, hash: hashOf(key)) != nil } }
    }

    /// The stored expiry of `key`, looked up without lazy expiry: nil when absent, .some(nil) without TTL.
    func storedExpiry(_ key: [UInt8]) -> Int64?? {
        lock.withLock {
            key.withUnsafeBytes { k in find(k, hash: hashOf(key)).map { entry(at: $0).expiry } }
        }
    }

    /// The address of `key`'s entry block (to see whether a change moved it), or nil when absent.
    func blockAddress(_ key: [UInt8]) -> UnsafeMutableRawPointer? {
        lock.withLock { key.withUnsafeBytes { k in find(k, hash: hashOf(key)).map { entry(at: $0).base } } }
    }

    /// Sets or removes the TTL of an existing `key`; false when the key is absent.
    @discardableResult
    func changeExpiry(_ key: [UInt8], to expiry: Int64?, now: Int64 = start) -> Bool {
        let hash = hashOf(key)
        return lock.withLock {
            key.withUnsafeBytes { k in
                guard let index = lookup(k, hash: hash, now: now) else { return false }
                setExpiry(at: index, to: expiry, hash: hash)
                return true
            }
        }
    }

    /// Removes `key`; false when it was absent (or expired at `now`).
    @discardableResult
    func delete(_ key: [UInt8], now: Int64 = start) -> Bool {
        let hash = hashOf(key)
        return lock.withLock {
            key.withUnsafeBytes { k in
                guard let index = lookup(k, hash: hash, now: now) else { return false }
                remove(at: index)
                return true
            }
        }
    }

    /// Every key in the table, expired ones included.
    var allKeys: Set<[UInt8]> {
        lock.withLock {
            var keys = Set<[UInt8]>()
            forEach { keys.insert(Array($0.key)) }
            return keys
        }
    }

    /// One SCAN step: the keys visited and the next cursor.
    func scanStep(_ cursor: UInt64) -> (keys: [[UInt8]], next: UInt64) {
        lock.withLock {
            var keys: [[UInt8]] = []
            let next = scan(cursor: cursor) { keys.append(Array($0.key)) }
            return (keys, next)
        }
    }

    /// Runs `sweepExpired` until it reports that it is up to date; returns the number of calls.
    @discardableResult
    func sweepAll(now: Int64, budget: Int = 1 << 20) -> Int {
        var calls = 0
        while true {
            calls += 1
            let work = lock.withLock { sweepExpired(now: now, budget: budget) }
            if work < budget { return calls }
        }
    }
}
