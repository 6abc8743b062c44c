import Glibc
import Synchronization

/// Where the engine reads the time: wall-clock milliseconds since the Unix epoch.
///
/// The engine itself never reads a clock: every operation takes `now` as an argument. Servers read a
/// `CacheClock` once per command; tests use ``ManualClock`` and never sleep.
public protocol CacheClock: Sendable {
    /// Milliseconds since 1970-01-01T00:00:00Z.
    func nowMilliseconds() -> Int64
    /// Microseconds since 1970-01-01T00:00:00Z (for TIME and latency figures).
    func nowMicroseconds() -> Int64
}

extension CacheClock {
    public func nowMilliseconds() -> Int64 { nowMicroseconds() / 1000 }
}

/// The system's real-time clock.
public struct SystemClock: CacheClock {
    public init() {}

    public func nowMicroseconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1_000_000 + Int64(ts.tv_nsec) / 1000
    }
}

/// A clock that moves only when told to, for tests.
public final class ManualClock: CacheClock {
    private let micros: Atomic<Int64>

    /// A clock set to `milliseconds` since the epoch (default: 2026-01-01).
    public init(milliseconds: Int64 = 1_767_225_600_000) {
        micros = Atomic(milliseconds * 1000)
    }

    public func nowMicroseconds() -> Int64 { micros.load(ordering: .relaxed) }

    /// Moves the clock forward by `milliseconds`.
    public func advance(milliseconds: Int64) {
        micros.add(milliseconds * 1000, ordering: .relaxed)
    }

    /// Sets the clock to `milliseconds` since the epoch.
    public func set(milliseconds: Int64) {
        micros.store(milliseconds * 1000, ordering: .relaxed)
    }
}
