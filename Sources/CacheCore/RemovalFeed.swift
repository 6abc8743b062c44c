import Synchronization

/// Keys the engine removes on its own — expired (on access or by the sweeper) and evicted — for a layer above
/// that must hear of them (client-side caching's invalidations).
///
/// Off by default, and then a removal costs one relaxed load of ``isEnabled`` on the expiry or eviction path,
/// never on a plain read or write. When on, each removed key is copied into a list under a mutex (with the
/// shard's lock held, so the list's lock is always taken after a shard's and never before); whoever consumes
/// the keys calls ``drain()`` outside any shard lock.
package final class RemovalFeed: Sendable {
    @usableFromInline let enabled = Atomic<Bool>(false)
    private let pending = Mutex<[[UInt8]]>([])

    package init() {}

    /// Whether removals are recorded (inlinable: the command layer checks it after every write).
    @inlinable @inline(__always)
    package var isEnabled: Bool { enabled.load(ordering: .relaxed) }

    /// Starts or stops recording; stopping drops what was not drained.
    package func setEnabled(_ on: Bool) {
        enabled.store(on, ordering: .relaxed)
        if !on { pending.withLock { $0.removeAll() } }
    }

    /// Records a removed key (called with its shard's lock held).
    package func record(_ key: UnsafeRawBufferPointer) {
        guard isEnabled else { return }
        let copy = Array(key)
        pending.withLock { $0.append(copy) }
    }

    /// The keys recorded since the last call, oldest first.
    package func drain() -> [[UInt8]] {
        pending.withLock { keys in
            guard !keys.isEmpty else { return [] }
            defer { keys = [] }
            return keys
        }
    }
}
