public import CachedNetworking
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import Synchronization

/// A ``CacheClock`` that moves only when told to, for tests of freshness, expiry and lifetimes without sleeping.
///
/// Pass one clock to everything under test that takes a clock (the cache's `Configuration.clock`, `MemoryStore`,
/// `FailOpenStore`, ``InMemoryCacheStore``, `CachedRepository`): one ``advance(by:)`` moves them all.
///
/// ```swift
/// let clock = ManualCacheClock()
/// clock.advance(by: .seconds(61))   // the 60-second response is now stale
/// ```
public final class ManualCacheClock: CacheClock {
    private struct Reading {
        var date: Date
        var uptime: Duration
    }

    private let current: Mutex<Reading>

    /// A clock showing `start` (by default 2024-01-01 00:00:00 GMT, a whole second), with an ``uptime()`` of zero.
    public init(start: Date = Date(timeIntervalSince1970: 1_704_067_200)) {
        current = Mutex(Reading(date: start, uptime: .zero))
    }

    /// The time the clock shows.
    public func now() -> Date { current.withLock { $0.date } }

    /// The time the clock has been moved by since it was made (``set(to:)`` counts too, backwards included).
    public func uptime() -> Duration { current.withLock { $0.uptime } }

    /// Moves the clock forward by `duration`: both its time and its ``uptime()``.
    public func advance(by duration: Duration) {
        let (seconds, attoseconds) = duration.components
        let interval = Double(seconds) + Double(attoseconds) / 1e18
        current.withLock { reading in
            reading.date = reading.date.addingTimeInterval(interval)
            reading.uptime += duration
        }
    }

    /// Sets the clock to `date`; its ``uptime()`` moves by as much (backwards, when `date` is earlier).
    public func set(to date: Date) {
        current.withLock { reading in
            let interval = date.timeIntervalSince(reading.date)
            reading.uptime += .nanoseconds(Int64((interval * 1e9).rounded()))
            reading.date = date
        }
    }
}
