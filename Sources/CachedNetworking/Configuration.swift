public import CoreMetrics
public import HTTPTypes

extension CachedNetworking {
    /// Settings of a ``CachedNetworking``.
    public struct Configuration: Sendable {
        /// The first part of every store key, so that several caches can share one store.
        public var namespace: String = "cached"
        /// This cache's name in `Cache-Status` members.
        public var cacheName: String = "cached"
        /// The HTTP caching rules' settings (cacheable methods, heuristic freshness, `Set-Cookie`).
        public var rules: CachingRules = CachingRules()
        /// Lifetimes imposed per endpoint; the first rule that matches a request wins. See ``LifetimeOverride``.
        public var lifetimeOverrides: [LifetimeOverride] = []
        /// The wall clock for freshness and ages.
        public var clock: any CacheClock = SystemCacheClock()
        /// Longest wait for one store call; past it the call counts as failed and the request goes on without the
        /// store.
        public var storeTimeout: Duration = .milliseconds(250)
        /// How long the cross-process fetch lease lives in the store (it is removed as soon as the fetch ends).
        public var leaseDuration: Duration = .seconds(10)
        /// How long a request that lost the lease polls the store for the holder's response before fetching
        /// itself.
        public var leaseWait: Duration = .seconds(3)
        /// Pause between two polls while waiting on another process's lease.
        public var leasePollInterval: Duration = .milliseconds(20)
        /// How long this process reuses the namespace generation it read from the store. Zero reads it for
        /// every request, so that ``CachedNetworking/invalidateAll()`` in another process is seen at once.
        public var generationCacheDuration: Duration = .seconds(1)
        /// Responses with a larger body are passed on to the caller but not stored (and a stored response they
        /// replace is removed). What can be fetched at all is the transport's to bound (see
        /// ``AsyncHTTPClientTransport/init(timeout:maximumBodySize:)``), never this.
        public var maximumStoredBodySize: Int = 8 << 20
        /// How long a response is kept in the store past its freshness and stale windows, so that it can still be
        /// revalidated with a cheap 304, or served under `max-stale` or ``CachePolicy/returnCacheDataElseLoad``.
        /// (A response that is stale on arrival, has no validator and no stale window is not stored at all.)
        public var staleRetention: Duration = .seconds(3_600)
        /// Shortest life of the small record that lists a URL's `Vary` field names.
        public var varyIndexLifetime: Duration = .seconds(86_400)
        /// URLs longer than this (in UTF-8 bytes) are keyed by a prefix and a hash.
        public var maximumKeyURLLength: Int = 256
        /// Where metrics go; nil for the factory bootstrapped in `MetricsSystem`.
        public var metricsFactory: (any MetricsFactory)? = nil
        /// Dimensions added to every metric (for example the service's name).
        public var metricsDimensions: [(String, String)] = []
        /// Bytes of entries read from or written to a network store (``RESPStore``, ``RESPClusterStore``) that
        /// this process keeps decoded beside their bytes, so that a read that brings back the same bytes skips
        /// decoding and checking them again. Every read still goes to the store, and bytes that differ from the
        /// kept ones in any way are decoded afresh. Each entry is charged its key, its value and 512 bytes; the
        /// least useful are evicted (SIEVE). Zero keeps none. ``MemoryStore`` keeps its entries decoded itself
        /// and does not use this. Default 8 MiB.
        public var decodedEntryMemory: Int = 8 << 20

        /// The defaults described on each property.
        public init() {}

        /// The first override that matches `request`.
        func lifetimeOverride(for request: HTTPRequest) -> Duration? {
            lifetimeOverrides.first { $0.matches(request) }?.lifetime
        }
    }
}

/// A freshness lifetime imposed on an endpoint, whatever the origin says about freshness.
///
/// A matching response that the shared-cache rules allow to store is stored and treated as fresh for
/// ``lifetime``, even if the origin sent `no-cache`, `max-age=0` or no freshness information at all. An override
/// never makes storable what must not be stored: `no-store`, `private`, `Authorization` without `public` or
/// `s-maxage`, `Set-Cookie` without explicit permission, `Vary: *`, a request with `no-store`, and statuses that
/// are not cacheable by default unless the origin gave explicit freshness (so a 500 is never pinned). After the
/// lifetime the origin's own rules apply again (validation, `stale-while-revalidate`, …).
public struct LifetimeOverride: Sendable {
    /// The imposed lifetime.
    public var lifetime: Duration
    private let predicate: @Sendable (HTTPRequest) -> Bool

    /// Matches requests whose host is `host` (case-insensitive, any port; nil for any host) and whose path starts
    /// with `pathPrefix` (nil for any path).
    public init(host: String? = nil, pathPrefix: String? = nil, lifetime: Duration) {
        let lowered = host?.lowercased()
        self.lifetime = lifetime
        self.predicate = { request in
            if let lowered {
                guard let authority = request.authority?.lowercased() else { return false }
                let requestHost = authority.split(separator: "@").last.map { hostPort -> Substring in
                    hostPort.hasPrefix("[") ? hostPort.prefix { $0 != "]" }.dropFirst() : hostPort.prefix { $0 != ":" }
                } ?? ""
                guard requestHost == lowered || requestHost == "[\(lowered)]" else { return false }
            }
            if let pathPrefix {
                guard (request.path ?? "/").hasPrefix(pathPrefix) else { return false }
            }
            return true
        }
    }

    /// Matches the requests for which `matches` returns true.
    public init(lifetime: Duration, matching matches: @escaping @Sendable (HTTPRequest) -> Bool) {
        self.lifetime = lifetime
        self.predicate = matches
    }

    /// Whether the override applies to `request`.
    public func matches(_ request: HTTPRequest) -> Bool { predicate(request) }
}
