import Synchronization

/// Keys the engine removes on its own — expired (on access or by the sweeper) and evicted — for the layers
/// above that must hear of them: client-side caching's invalidations, and keyspace notifications (`expired`,
/// `evicted`).
///
/// Off by default, and then a removal costs one relaxed load of ``isEnabled`` on the expiry or eviction path,
/// never on a plain read or write. When on, each removed key is copied into a list under a mutex (with the
/// shard's lock held, so the list's lock is always taken after a shard's and never before); whoever consumes
/// the keys calls ``drain()`` or ``drainEvents()`` outside any shard lock, or with one held.
/// The two consumers have lists of their own, so neither takes the other's keys.
package final class RemovalFeed: Sendable {
    /// Why the engine removed a key.
    package enum Reason: Sendable, Equatable {
        case expired
        case evicted
    }

    /// One removal, for keyspace notifications.
    package struct Removal: Sendable, Equatable {
        package var key: [UInt8]
        package var database: Int
        package var reason: Reason

        package init(key: [UInt8], database: Int, reason: Reason) {
            self.key = key
            self.database = database
            self.reason = reason
        }
    }

    private static let trackingBit = 1
    private static let expiredBit = 2
    private static let evictedBit = 4

    /// Who listens: client-side caching, keyspace notifications of expired keys, of evicted keys.
    @usableFromInline let listeners = Atomic<Int>(0)
    private let pending = Mutex<(keys: [[UInt8]], events: [Removal])>(([], []))

    package init() {}

    /// Whether removals are recorded (inlinable: the command layer checks it after every write).
    @inlinable @inline(__always)
    package var isEnabled: Bool { listeners.load(ordering: .relaxed) != 0 }

    /// Starts or stops recording removed keys for client-side caching; stopping drops what was not drained.
    package func setEnabled(_ on: Bool) {
        set(Self.trackingBit, on)
        if !on { pending.withLock { $0.keys.removeAll() } }
    }

    /// Starts or stops recording removals for keyspace notifications, by reason; stopping drops what was not
    /// drained.
    package func setNotifying(expired: Bool, evicted: Bool) {
        set(Self.expiredBit, expired)
        set(Self.evictedBit, evicted)
        if !expired || !evicted {
            pending.withLock { $0.events.removeAll { ($0.reason == .expired && !expired) || ($0.reason == .evicted && !evicted) } }
        }
    }

    private func set(_ bit: Int, _ on: Bool) {
        if on { listeners.bitwiseOr(bit, ordering: .relaxed) } else { listeners.bitwiseAnd(~bit, ordering: .relaxed) }
    }

    /// Records a key removed from database `database` (called with its shard's lock held).
    package func record(_ key: UnsafeRawBufferPointer, database: Int, reason: Reason) {
        let listening = listeners.load(ordering: .relaxed)
        guard listening != 0 else { return }
        let tracked = listening & Self.trackingBit != 0
        let notified = listening & (reason == .expired ? Self.expiredBit : Self.evictedBit) != 0
        guard tracked || notified else { return }
        let copy = Array(key)
        pending.withLock { pending in
            if tracked { pending.keys.append(copy) }
            if notified { pending.events.append(Removal(key: copy, database: database, reason: reason)) }
        }
    }

    /// The keys recorded for client-side caching since the last call, oldest first.
    package func drain() -> [[UInt8]] {
        pending.withLock { pending in
            guard !pending.keys.isEmpty else { return [] }
            defer { pending.keys = [] }
            return pending.keys
        }
    }

    /// The removals recorded for keyspace notifications since the last call, oldest first.
    package func drainEvents() -> [Removal] {
        pending.withLock { pending in
            guard !pending.events.isEmpty else { return [] }
            defer { pending.events = [] }
            return pending.events
        }
    }
}
