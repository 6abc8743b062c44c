#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// The SDK's clock: every part of it that reads time takes one.
///
/// It gives two readings: the wall-clock time that HTTP freshness, ages and stored-at times are measured with
/// (``now()``), and a monotonic reading (``uptime()``) for durations (``MemoryStore``'s TTLs,
/// ``FailOpenStore``'s cool-down, a ``CachedRepository``'s lifetime). ``SystemCacheClock`` is the real one;
/// ``CachedNetworkingTesting``'s `ManualCacheClock` moves only when a test advances it, so that tests of
/// freshness, expiry and lifetimes never sleep. Pass the same manual clock to the cache's configuration, the
/// stores and the repositories of a test, and one `advance(by:)` moves them all.
public protocol CacheClock: Sendable {
    /// The current wall-clock time.
    func now() -> Date

    /// A monotonic reading: the time elapsed since a fixed point of the clock's choosing. Only differences
    /// between two readings of the same clock mean anything.
    ///
    /// The default is ``now()`` as a duration since 1970: monotonic as far as ``now()`` is. A clock whose
    /// wall-clock time can be stepped back (as the system's can) gives a reading of its own.
    func uptime() -> Duration
}

extension CacheClock {
    /// ``now()`` as a duration since 1970.
    public func uptime() -> Duration {
        let interval = now().timeIntervalSince1970
        let seconds = interval.rounded(.down)
        return .seconds(Int64(seconds)) + .nanoseconds(Int64(((interval - seconds) * 1e9).rounded()))
    }
}

/// The system's clocks: `Date()` for the wall-clock time, `ContinuousClock` (which never goes back, and counts
/// time asleep) for ``uptime()``.
public struct SystemCacheClock: CacheClock {
    /// The point ``uptime()`` counts from: the first time any system clock read it.
    private static let origin = ContinuousClock.now

    /// The system clock.
    public init() {}

    /// `Date()`.
    public func now() -> Date { Date() }

    /// The `ContinuousClock` time since the first reading of any `SystemCacheClock`.
    public func uptime() -> Duration { Self.origin.duration(to: .now) }
}
