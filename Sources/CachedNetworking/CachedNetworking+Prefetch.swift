public import HTTPTypes
public import Logging

extension CachedNetworking {
    /// What ``CachedNetworking/prefetch(_:maxConcurrency:logger:)`` did for one request.
    public struct PrefetchOutcome: Sendable {
        /// Where the request's answer came from, or why it failed.
        ///
        /// - ``CachedResponse/Source/cache``: a fresh response was already stored; nothing was fetched.
        /// - ``CachedResponse/Source/revalidated``: the stored response was stale and the origin confirmed it.
        /// - ``CachedResponse/Source/network``: fetched from the origin (and stored when it may be: see
        ///   ``isStored``).
        /// - ``CachedResponse/Source/coalesced``: another request (of this batch, of this process or of another
        ///   process) was fetching the same response; this one took its result.
        /// - ``CachedResponse/Source/stale``: the origin could not answer and the stale stored response stood in
        ///   (`stale-if-error`); nothing new was stored.
        public var result: Result<CachedResponse.Source, CachedNetworkingError>
        /// This cache's `Cache-Status` member for the answer; nil when the request failed.
        public var cacheStatus: CacheStatus?

        /// An outcome: `result`, and the answer's `Cache-Status` member.
        public init(result: Result<CachedResponse.Source, CachedNetworkingError>, cacheStatus: CacheStatus?) {
            self.result = result
            self.cacheStatus = cacheStatus
        }

        /// Whether a fresh response to the request is stored now: one already was, the origin confirmed it, this
        /// prefetch (or the fetch it joined) stored the origin's answer, or another process's fetch that it
        /// waited for stored it. False when the request failed, when the answer may not be stored (`no-store`, a
        /// 500 without explicit freshness, …) and for a stale response that stood in for a failed origin.
        public var isStored: Bool {
            guard case .success(let source) = result, source != .stale else { return false }
            if source == .cache || source == .revalidated { return true }
            guard let cacheStatus else { return false }
            // A coalesced answer read from the store (after another process's fetch) is a fresh hit.
            return cacheStatus.stored || (cacheStatus.hit && (cacheStatus.timeToLive ?? 0) >= 0)
        }

        /// The error, when the request failed.
        public var error: CachedNetworkingError? {
            if case .failure(let error) = result { return error }
            return nil
        }
    }

    /// Loads many responses into the cache, at most `maxConcurrency` requests at a time, and returns once every
    /// one of them is stored or has failed.
    ///
    /// Each request is prefetched as ``prefetch(_:logger:)`` does: fetched unless a fresh response is already stored,
    /// and a stale stored response validated rather than served. A failure fails only its own request.
    /// Identical requests (of this batch or of concurrent callers) make one origin request between them.
    ///
    /// ```swift
    /// let outcomes = await cache.prefetch(requests, maxConcurrency: 8)
    /// for (request, outcome) in zip(requests, outcomes) where !outcome.isStored {
    ///     logger.warning("not prefetched: \(request.path ?? "/"): \(outcome.error?.description ?? "not storable")")
    /// }
    /// ```
    ///
    /// Cancelling the calling task cancels the requests under way; those not yet started fail with
    /// ``CachedNetworkingError/Kind/cancelled``.
    /// - Parameters:
    ///   - requests: The requests (GET, usually), each with a scheme and an authority.
    ///   - maxConcurrency: How many requests run at once (at least 1). Default 8.
    ///   - logger: Where the cache's lines about these requests go; nil for the cache's logger (see
    ///     ``run(_:body:policy:transport:logger:)``).
    /// - Returns: One outcome per request, in the order of `requests`.
    @discardableResult
    public func prefetch(_ requests: [HTTPRequest], maxConcurrency: Int = 8, logger: Logger? = nil) async -> [PrefetchOutcome] {
        await prefetch(requests.map { .success($0) }, maxConcurrency: maxConcurrency, logger: logger)
    }

    /// ``prefetch(_:maxConcurrency:logger:)`` of requests that may already have failed to be made (a `URLRequest`
    /// without an HTTP URL): those fail with their error.
    func prefetch(
        _ requests: [Result<HTTPRequest, CachedNetworkingError>], maxConcurrency: Int, logger: Logger?
    ) async -> [PrefetchOutcome] {
        var outcomes = [PrefetchOutcome?](repeating: nil, count: requests.count)
        await withTaskGroup(of: (Int, PrefetchOutcome).self) { group in
            var next = 0
            func startNext() {
                let index = next
                next += 1
                let request = requests[index]
                group.addTask {
                    let answer: CachedResponse
                    do throws(CachedNetworkingError) {
                        answer = try await self.run(try request.get(), policy: .refreshStale, logger: logger)
                    } catch {
                        return (index, PrefetchOutcome(result: .failure(error), cacheStatus: nil))
                    }
                    return (index, PrefetchOutcome(result: .success(answer.source), cacheStatus: answer.cacheStatus))
                }
            }
            while next < min(requests.count, max(1, maxConcurrency)) { startNext() }
            for await (index, outcome) in group {
                outcomes[index] = outcome
                if next < requests.count { startNext() }
            }
        }
        return outcomes.compactMap { $0 }
    }
}
