import NIOCore

/// How ``CachedNetworking`` calls a store: the fast paths a ``CacheStore`` may opt into through
/// ``CacheStore/callStyle``.
///
/// The cache bounds every store call by ``CachedNetworking/Configuration/storeTimeout``, and a call that does
/// not end in time counts as a store failure (the request goes on without the store). How it enforces the bound
/// depends on what the store promises:
///
/// - ``timedByCache`` (the default): the cache races the call against a timer, in two tasks of its own per call.
///   Any store works this way, even one that ignores cancellation, at the cost of those tasks (a few
///   microseconds per call).
/// - ``immediate``: the store's calls return without suspending (a table behind a lock, in this process), so no
///   timeout can fire first: the cache calls it directly.
/// - ``deadlineAware``: the store bounds its own calls. The cache calls it directly in the request's task, with
///   ``CacheStoreDeadline/current`` set; the store must return by that deadline (racing its I/O against
///   ``CacheStoreDeadline/remaining``) with a ``CacheStoreError/Kind/timeout`` error, and with the same error at
///   once when the task is cancelled.
///
/// An ``immediate`` store that suspends after all is not bounded at all: only promise it for calls that cannot.
public struct CacheStoreCallStyle: Sendable, Hashable, CustomStringConvertible {
    enum Base: Sendable, Hashable { case timedByCache, immediate, deadlineAware }
    let base: Base

    /// The cache races each call against a timer (any store).
    public static let timedByCache = CacheStoreCallStyle(base: .timedByCache)
    /// Calls return without suspending; the cache calls them directly.
    public static let immediate = CacheStoreCallStyle(base: .immediate)
    /// Calls honour ``CacheStoreDeadline/current`` and task cancellation; the cache calls them directly.
    public static let deadlineAware = CacheStoreCallStyle(base: .deadlineAware)

    public var description: String {
        switch base {
        case .timedByCache: "timed by the cache"
        case .immediate: "immediate"
        case .deadlineAware: "deadline-aware"
        }
    }
}

/// The deadline of the store calls a ``CachedNetworking`` makes in the current task, for stores whose
/// ``CacheStore/callStyle`` is ``CacheStoreCallStyle/deadlineAware``.
///
/// ```swift
/// if let deadline = CacheStoreDeadline.current, deadline.remaining <= .zero {
///     throw CacheStoreError(.timeout, "no answer within \(deadline.timeout)")
/// }
/// ```
public struct CacheStoreDeadline: Sendable {
    /// When the call must give up, in ``monotonicNanoseconds()`` (CLOCK_MONOTONIC).
    package let uptimeNanoseconds: UInt64
    /// The timeout the deadline came from (for error messages).
    public let timeout: Duration

    /// The deadline of the current task's store calls; nil outside a bounded call (the store's own timeouts
    /// apply, and cancellation may be ignored).
    @TaskLocal public static var current: CacheStoreDeadline?

    /// A deadline `timeout` from now.
    public init(timeout: Duration) {
        self.timeout = timeout
        self.uptimeNanoseconds = monotonicNanoseconds() &+ UInt64(clamping: timeout.storeNanoseconds)
    }

    /// The time left until the deadline; zero or less once it has passed.
    public var remaining: Duration {
        let now = monotonicNanoseconds()
        guard uptimeNanoseconds > now else { return .zero }
        return .nanoseconds(Int64(clamping: uptimeNanoseconds - now))
    }

    /// Runs `body` with its store calls bounded by `timeout` from now (``current`` set).
    package static func bounding<T: Sendable>(
        _ timeout: Duration,
        _ body: () async throws(CacheStoreError) -> T
    ) async -> Result<T, CacheStoreError> {
        await $current.withValue(CacheStoreDeadline(timeout: timeout)) { () async -> Result<T, CacheStoreError> in
            do throws(CacheStoreError) {
                return .success(try await body())
            } catch {
                return .failure(error)
            }
        }
    }
}

/// CLOCK_MONOTONIC in nanoseconds (SwiftNIO's deadline clock).
package func monotonicNanoseconds() -> UInt64 {
    NIODeadline.now().uptimeNanoseconds
}
