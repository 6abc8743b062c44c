import CachedNetworking
import NIOCore
import Testing

/// Why a near-cache check could not go on.
public struct NearCacheCheckError: Error, CustomStringConvertible {
    public let description: String
}

/// Reads `key` through `store` until its near cache answers it (the count `hits` reads rises), so that the next
/// change must reach the store by invalidation. Records an issue and throws when that does not happen within
/// `timeout`.
/// - Returns: the value the hit answered.
public func readUntilNearHit(
    _ key: String, from store: some CacheStore, hits: () -> Int, timeout: Duration = .seconds(10),
    sourceLocation: SourceLocation = #_sourceLocation
) async throws -> ByteBuffer? {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        let before = hits()
        let value = try await store.get(key)
        if hits() > before { return value }
        try await Task.sleep(for: .milliseconds(2))
    }
    Issue.record("\(key) never came from the near cache", sourceLocation: sourceLocation)
    throw NearCacheCheckError(description: "no near-cache hit for \(key)")
}

/// Reads `key` through `store` every millisecond until it no longer returns `old`.
/// - Returns: the time from `since` (the write's acknowledgement) to the first read, started after it, that did
///   not return `old`; nil if that did not happen within `deadline`.
public func timeUntilGone(
    _ old: ByteBuffer?, key: String, from store: some CacheStore, since: ContinuousClock.Instant, deadline: Duration
) async throws -> Duration? {
    while ContinuousClock.now - since < deadline {
        let value = try await store.get(key)
        if value != old { return ContinuousClock.now - since }
        try await Task.sleep(for: .milliseconds(1))
    }
    return nil
}
