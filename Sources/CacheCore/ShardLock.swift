import Glibc

/// A mutex for one shard. Critical sections are a few hundred nanoseconds, so it spins briefly before it
/// sleeps (glibc's adaptive mutex). Separate `lock()`/`unlock()` calls let multi-key commands take several
/// shards' locks in a fixed order.
public final class ShardLock: @unchecked Sendable {
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>

    package init() {
        mutex = .allocate(capacity: 1)
        var attributes = pthread_mutexattr_t()
        pthread_mutexattr_init(&attributes)
        pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ADAPTIVE_NP))
        let rc = pthread_mutex_init(mutex, &attributes)
        precondition(rc == 0, "pthread_mutex_init failed: \(rc)")
        pthread_mutexattr_destroy(&attributes)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    @inlinable @inline(__always)
    package func lock() {
        pthread_mutex_lock(mutex)
    }

    @inlinable @inline(__always)
    package func unlock() {
        pthread_mutex_unlock(mutex)
    }

    @inlinable @inline(__always)
    package func withLock<R>(_ body: () throws -> R) rethrows -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }
}
