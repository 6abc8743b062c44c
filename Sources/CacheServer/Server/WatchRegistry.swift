import CacheCore
import Synchronization

/// The keys clients WATCH, and the clients whose transaction a change to one of them aborts (Redis's
/// `watched_keys` and `touchWatchedKey`).
///
/// A write to a key marks every client watching it (in that database) dirty: its next EXEC fails. Writes
/// report their keys only while some client watches (``isActive``, one relaxed load); flushes and SWAPDB
/// mark the watchers of the keys they affect. A key that expires or is evicted after WATCH is found missing
/// when EXEC checks it (``ClientSession/WatchedKey/existed``), which is how Redis 7.0 treats it too.
package final class WatchRegistry: Sendable {
    package struct Key: Hashable, Sendable {
        package let db: Int
        package let name: [UInt8]

        package init(db: Int, name: [UInt8]) {
            self.db = db
            self.name = name
        }
    }

    private struct Watchers: @unchecked Sendable {
        var byKey: [Key: [ClientSession]] = [:]
    }

    private let state = Mutex(Watchers())
    private let active = Atomic<Bool>(false)
    /// Watched keys per bucket of key hashes: a write to a key whose bucket holds none (almost every write,
    /// with a few keys watched) is done after one load, without copying the key or taking the lock.
    private let buckets = WatchBuckets()

    package init() {}

    /// Whether any client watches a key.
    @inline(__always)
    package var isActive: Bool { active.load(ordering: .relaxed) }

    /// Adds `session` to the watchers of `key` (the session records the key itself).
    package func add(_ key: Key, for session: ClientSession) {
        state.withLock { state in
            if state.byKey[key] == nil { buckets.add(key.name, 1) }
            state.byKey[key, default: []].append(session)
            active.store(true, ordering: .relaxed)
        }
    }

    /// Removes `session` from the watchers of `keys`.
    package func remove(_ keys: some Sequence<Key>, for session: ClientSession) {
        state.withLock { state in
            for key in keys {
                guard var sessions = state.byKey[key] else { continue }
                sessions.removeAll { $0 === session }
                state.byKey[key] = sessions.isEmpty ? nil : sessions
                if sessions.isEmpty { buckets.add(key.name, -1) }
            }
            if state.byKey.isEmpty { active.store(false, ordering: .relaxed) }
        }
    }

    /// A command changed `name` in database `db`: its watchers' transactions fail.
    package func touch(db: Int, name: UnsafeRawBufferPointer) {
        guard buckets.mayHold(name) else { return }
        let key = Key(db: db, name: Array(name))
        state.withLock { state in
            for session in state.byKey[key] ?? [] { session.markWatchDirty() }
        }
    }

    /// Database `db` is about to be emptied or swapped: the watchers of its watched keys for which
    /// `affected` says so are marked (Redis's `touchAllWatchedKeysInDb`). `affected` runs without the
    /// registry's lock held, so that it may look keys up.
    package func touchAll(db: Int, where affected: (Key) -> Bool) {
        guard isActive else { return }
        let keys = state.withLock { state in state.byKey.keys.filter { $0.db == db } }
        let hit = keys.filter(affected)
        guard !hit.isEmpty else { return }
        state.withLock { state in
            for key in hit {
                for session in state.byKey[key] ?? [] { session.markWatchDirty() }
            }
        }
    }
}

/// Counts of watched keys by bucket of their hash (4,096 buckets), readable without a lock.
private final class WatchBuckets: @unchecked Sendable {
    private static let count = 4096
    private let counts: UnsafeMutablePointer<Atomic<Int>>

    init() {
        counts = .allocate(capacity: Self.count)
        for i in 0..<Self.count { (counts + i).initialize(to: Atomic(0)) }
    }

    deinit {
        counts.deinitialize(count: Self.count)
        counts.deallocate()
    }

    private static func bucket(_ name: UnsafeRawBufferPointer) -> Int {
        Int(truncatingIfNeeded: Keyspace.hasher.hash(name)) & (count - 1)
    }

    /// Whether a watched key may have `name` (none does when its bucket is empty).
    @inline(__always)
    func mayHold(_ name: UnsafeRawBufferPointer) -> Bool {
        counts[Self.bucket(name)].load(ordering: .relaxed) != 0
    }

    /// Counts a key watched (`delta` 1) or no longer watched (-1); with the registry's lock held.
    func add(_ name: [UInt8], _ delta: Int) {
        let bucket = name.withUnsafeBytes { Self.bucket($0) }
        counts[bucket].add(delta, ordering: .relaxed)
    }
}

