#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// The wall clock that freshness, ages and stored-at times are measured with.
///
/// Inject a manual clock (``CachedNetworkingTesting``'s `ManualCacheClock`) in tests to move time forward
/// without sleeping.
public protocol CacheClock: Sendable {
    /// The current time.
    func now() -> Date
}

/// The system's wall clock.
public struct SystemCacheClock: CacheClock {
    /// The system clock.
    public init() {}

    /// `Date()`.
    public func now() -> Date { Date() }
}
