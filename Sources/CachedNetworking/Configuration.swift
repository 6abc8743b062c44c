public import CoreMetrics
public import HTTPTypes
public import Tracing

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
        /// How stale a stored response may be and still answer when the origin cannot be reached: the transport
        /// fails with an ``HTTPTransportError`` of kind `connectionFailed`, `connectionLost`, `hostNotFound` or
        /// `timeout`, or a gateway answers 502 or 504 (RFC 9111 §4.2.4, which
        /// lets a disconnected cache serve stale). Never when the response has `must-revalidate`,
        /// `proxy-revalidate`, `s-maxage` or an unqualified `no-cache`, or the request has `no-cache`. Zero (the
        /// default) serves stale on failures only where `stale-if-error` allows it. Responses are kept in the
        /// store past their freshness for the longest of this, `stale-while-revalidate` and `stale-if-error`, then
        /// ``staleRetention``.
        public var staleWhenDisconnected: Duration = .zero
        /// Shortest life of the small record that lists a URL's `Vary` field names.
        public var varyIndexLifetime: Duration = .seconds(86_400)
        /// The most `Vary` variants kept for one URL (and method). Storing one more removes the least recently
        /// used one (recency is kept to the minute: a variant served again and again rewrites the URL's index at
        /// most once a minute). Values below 1 count as 1. Default 32.
        public var maximumVariantsPerURL: Int = 32
        /// URLs longer than this (in UTF-8 bytes) are keyed by a prefix and a hash.
        public var maximumKeyURLLength: Int = 256
        /// Where metrics go; nil for the factory bootstrapped in `MetricsSystem`.
        public var metricsFactory: (any MetricsFactory)? = nil
        /// Dimensions added to every metric (for example the service's name).
        public var metricsDimensions: [(String, String)] = []
        /// Where the cache's spans go (swift-distributed-tracing): nil for the tracer bootstrapped in
        /// `InstrumentationSystem`, unless that is the no-op one. Read once, when the cache is made; without a
        /// tracer the cache makes no spans at all.
        public var tracer: (any Tracer)? = nil
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
    /// The `host` argument when it names no host (so that the override matches nothing), for the cache's warning.
    let unusableHost: String?

    /// Matches requests whose host (and port, when `host` names one) is `host` and whose path starts with
    /// `pathPrefix`.
    ///
    /// ```swift
    /// LifetimeOverride(host: "api.example.com", lifetime: .seconds(60))        // any port
    /// LifetimeOverride(host: "api.example.com:8443", lifetime: .seconds(60))   // port 8443 only
    /// LifetimeOverride(host: "[::1]:8080", pathPrefix: "/catalog/", lifetime: .seconds(60))
    /// ```
    /// - Parameters:
    ///   - host: A host name or IP address, compared case-insensitively (`api.example.com`, `10.0.0.1`, `::1` or
    ///     `[::1]`), which matches any port; or one with a port (`api.example.com:8443`, `[::1]:8080`), which
    ///     matches that port only, a request that names no port being on its scheme's default (80 for `http`,
    ///     443 for `https`). Nil for any host. A value that is neither (`api.example.com:https`, `:8080`, an
    ///     empty string) matches nothing, and a ``CachedNetworking`` made with it logs a warning saying so.
    ///   - pathPrefix: The start of the path (`/catalog/`); nil for any path.
    ///   - lifetime: The imposed lifetime.
    public init(host: String? = nil, pathPrefix: String? = nil, lifetime: Duration) {
        self.lifetime = lifetime
        // nil: any host; .some(nil): a host that cannot be read, which matches nothing.
        let pattern: HostPattern?? = host.map { HostPattern(parsing: $0) }
        self.unusableHost = pattern.flatMap { $0 == nil ? host : nil }
        self.predicate = { request in
            if case .some(let required) = pattern {
                guard let required, required.matches(request) else { return false }
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
        self.unusableHost = nil
    }

    /// Whether the override applies to `request`.
    public func matches(_ request: HTTPRequest) -> Bool { predicate(request) }
}

/// A host, lowercased and without IPv6 brackets, and a port when one was given: a ``LifetimeOverride``'s `host`,
/// or a request's authority.
struct HostPattern: Sendable, Hashable {
    var host: String
    var port: Int?

    /// `text` read as `host`, `host:port`, `[IPv6]`, `[IPv6]:port` or a bare IPv6 address (two colons or more);
    /// nil for anything else (an empty host, a port that is not a number from 0 to 65535).
    init?(parsing text: some StringProtocol) {
        let lowered = text.lowercased()
        if lowered.hasPrefix("[") {
            guard let close = lowered.firstIndex(of: "]") else { return nil }
            let host = lowered[lowered.index(after: lowered.startIndex)..<close]
            let rest = lowered[lowered.index(after: close)...]
            guard !host.isEmpty else { return nil }
            if rest.isEmpty {
                self.init(host: String(host), port: nil)
            } else {
                guard rest.first == ":", let port = Self.port(rest.dropFirst()) else { return nil }
                self.init(host: String(host), port: port)
            }
            return
        }
        let colons = lowered.reduce(0) { $1 == ":" ? $0 + 1 : $0 }
        if colons > 1 {
            self.init(host: lowered, port: nil)
            return
        }
        guard let colon = lowered.firstIndex(of: ":") else {
            guard !lowered.isEmpty else { return nil }
            self.init(host: lowered, port: nil)
            return
        }
        let host = lowered[..<colon]
        guard !host.isEmpty, let port = Self.port(lowered[lowered.index(after: colon)...]) else { return nil }
        self.init(host: String(host), port: port)
    }

    init(host: String, port: Int?) {
        self.host = host
        self.port = port
    }

    private static func port(_ text: Substring) -> Int? {
        guard (1...5).contains(text.count), text.allSatisfy({ $0.isASCII && $0.isNumber }), let port = Int(text),
            port <= 65_535
        else { return nil }
        return port
    }

    /// Whether `request`'s host is this one, and its port this one's when this one has a port (a request without
    /// a port being on its scheme's default one).
    func matches(_ request: HTTPRequest) -> Bool {
        guard let authority = request.authority else { return false }
        let hostPort = authority.split(separator: "@", omittingEmptySubsequences: false).last ?? ""
        guard let target = HostPattern(parsing: hostPort), target.host == host else { return false }
        guard let port else { return true }
        if let requestPort = target.port { return requestPort == port }
        switch request.scheme?.lowercased() {
        case "http": return port == 80
        case "https": return port == 443
        default: return false
        }
    }
}
