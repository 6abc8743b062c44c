public import CachedNetworking
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import Synchronization

/// A wall clock that moves only when told to, for tests of freshness and expiry without sleeping.
///
/// ```swift
/// let clock = ManualCacheClock()
/// clock.advance(by: .seconds(61))   // the 60-second response is now stale
/// ```
public final class ManualCacheClock: CacheClock {
    private let current: Mutex<Date>

    /// A clock showing `start` (by default 2024-01-01 00:00:00 GMT, a whole second).
    public init(start: Date = Date(timeIntervalSince1970: 1_704_067_200)) {
        current = Mutex(start)
    }

    /// The time the clock shows.
    public func now() -> Date { current.withLock { $0 } }

    /// Moves the clock forward by `duration`.
    public func advance(by duration: Duration) {
        let (seconds, attoseconds) = duration.components
        let interval = Double(seconds) + Double(attoseconds) / 1e18
        current.withLock { $0 = $0.addingTimeInterval(interval) }
    }

    /// Sets the clock to `date`.
    public func set(to date: Date) {
        current.withLock { $0 = date }
    }
}
