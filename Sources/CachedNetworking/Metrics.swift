import CoreMetrics

/// The names of the metrics ``CachedNetworking`` reports through swift-metrics, and of their dimensions.
///
/// Every counter also carries the ``Dimension/namespace`` dimension and the configured extra dimensions.
public enum CachedNetworkingMetrics {
    /// Requests answered from storage without contacting the origin (fresh, or stale as allowed).
    public static let hits = "cached_networking_hits_total"
    /// Requests for which nothing usable was stored.
    public static let misses = "cached_networking_misses_total"
    /// Conditional requests sent to validate stored responses, by ``Dimension/result`` (`not_modified`,
    /// `modified`, `error`).
    public static let revalidations = "cached_networking_revalidations_total"
    /// Stale responses served, by ``Dimension/reason`` (`max_stale`, `stale_while_revalidate`,
    /// `stale_if_error`, `policy`).
    public static let staleServed = "cached_networking_stale_served_total"
    /// Requests that waited on another request's fetch, by ``Dimension/scope`` (`process`, `lease`).
    public static let coalescedWaits = "cached_networking_coalesced_waits_total"
    /// Store calls that failed or timed out (the request went on without the store), by
    /// ``Dimension/operation``.
    public static let storeErrors = "cached_networking_store_errors_total"
    /// Stored values that could not be read as an entry (corrupt, foreign, or a hash collision).
    public static let corruptEntries = "cached_networking_corrupt_entries_total"
    /// Requests sent to origins, by ``Dimension/reason`` (`miss`, `validation`, `refresh`, `bypass`,
    /// `unsafe_method`, `reload`).
    public static let originFetches = "cached_networking_origin_fetches_total"
    /// Body bytes delivered, by ``Dimension/source`` (`cache`, `origin`).
    public static let bytes = "cached_networking_bytes_total"
    /// Responses written to the store.
    public static let stores = "cached_networking_stores_total"
    /// `304 Not Modified` answers the cache made itself to clients' `If-None-Match` and `If-Modified-Since`
    /// (RFC 9111 §4.3.2).
    public static let notModifiedAnswers = "cached_networking_not_modified_answers_total"
    /// `Vary` variants removed because their URL had ``CachedNetworking/Configuration/maximumVariantsPerURL``
    /// others used more recently.
    public static let variantsEvicted = "cached_networking_variants_evicted_total"
    /// Keys a ``RESPStore`` answered from its near cache (see ``RESPStore/NearCache``).
    public static let nearCacheHits = "cached_networking_near_cache_hits_total"
    /// Keys a ``RESPStore`` with a near cache had to read from the server.
    public static let nearCacheMisses = "cached_networking_near_cache_misses_total"
    /// Near-cache invalidations, by ``Dimension/reason``: `server` (keys the server named), `flush` (the
    /// server's flush message), `write` (the store's own writes), `disconnect` (the invalidation connection or a
    /// tracking connection was lost: everything dropped).
    public static let nearCacheInvalidations = "cached_networking_near_cache_invalidations_total"

    /// How long each ``CachedNetworking/run(_:body:policy:transport:logger:)`` took, whatever answered it (a swift-metrics `Timer`,
    /// in nanoseconds).
    public static let runDuration = "cached_networking_run_duration"
    /// How long each store call took, by ``Dimension/operation`` (a `Timer`; calls that timed out count with
    /// the time they were given).
    public static let storeCallDuration = "cached_networking_store_call_duration"
    /// How long each origin fetch took, response body included (a `Timer`).
    public static let originFetchDuration = "cached_networking_origin_fetch_duration"

    /// Dimension names.
    public enum Dimension {
        /// The configured key namespace.
        public static let namespace = "namespace"
        /// The store operation (`get`, `set`, `set_if_absent`, `remove`, `increment`).
        public static let operation = "operation"
        /// Where bytes came from.
        public static let source = "source"
        /// Why something happened.
        public static let reason = "reason"
        /// The outcome of a revalidation.
        public static let result = "result"
        /// Where a coalesced request waited.
        public static let scope = "scope"
    }
}

/// Keys of the metadata ``CachedNetworking`` attaches to its log messages.
public enum CachedNetworkingLogKeys {
    /// The store key concerned.
    public static let key = "cached.key"
    /// The request URI.
    public static let uri = "cached.uri"
    /// The request method.
    public static let method = "cached.method"
    /// The store operation that failed.
    public static let operation = "cached.store.operation"
    /// The error.
    public static let error = "cached.error"
    /// The Cache-Status member of the answer.
    public static let cacheStatus = "cached.cache_status"
    /// How long a store outage lasted.
    public static let outageDuration = "cached.store.outage"
    /// How many store calls failed during an outage.
    public static let failedCalls = "cached.store.failed_calls"
    /// A host as configuration gives it.
    public static let host = "cached.host"
}

/// The counters, made once.
struct CacheMetrics: Sendable {
    typealias Names = CachedNetworkingMetrics
    let hits: Counter
    let misses: Counter
    let corruptEntries: Counter
    let stores: Counter
    let notModifiedAnswers: Counter
    let variantsEvicted: Counter
    private let revalidations: [String: Counter]
    private let staleServedCounters: [String: Counter]
    private let coalescedWaits: [String: Counter]
    private let storeErrors: [Counter]
    private let originFetches: [String: Counter]
    private let cacheBytesCounter: Counter
    private let originBytesCounter: Counter
    let runDuration: Timer
    let originFetchDuration: Timer
    /// By ``StoreOperation/rawValue``.
    private let storeCallDurations: [Timer]

    /// Whether durations are recorded: false when metrics go nowhere (swift-metrics' no-op factory, the default
    /// when nothing was bootstrapped), so that the hot path reads no clock for them.
    let timing: Bool

    init(factory: any MetricsFactory, namespace: String, extra: [(String, String)]) {
        timing = !(factory is NOOPMetricsHandler)
        let dimensions = [(Names.Dimension.namespace, namespace)] + extra
        func make(_ label: String) -> Counter { Counter(label: label, dimensions: dimensions, factory: factory) }
        func family(_ label: String, _ dimension: String, _ values: [String]) -> [String: Counter] {
            Dictionary(uniqueKeysWithValues: values.map {
                ($0, Counter(label: label, dimensions: dimensions + [(dimension, $0)], factory: factory))
            })
        }
        hits = make(Names.hits)
        misses = make(Names.misses)
        corruptEntries = make(Names.corruptEntries)
        stores = make(Names.stores)
        notModifiedAnswers = make(Names.notModifiedAnswers)
        variantsEvicted = make(Names.variantsEvicted)
        revalidations = family(Names.revalidations, Names.Dimension.result, ["not_modified", "modified", "error"])
        staleServedCounters = family(Names.staleServed, Names.Dimension.reason, ["max_stale", "stale_while_revalidate", "stale_if_error", "disconnected", "policy"])
        coalescedWaits = family(Names.coalescedWaits, Names.Dimension.scope, ["process", "lease"])
        storeErrors = StoreOperation.allCases.map {
            Counter(label: Names.storeErrors, dimensions: dimensions + [(Names.Dimension.operation, $0.name)], factory: factory)
        }
        originFetches = family(Names.originFetches, Names.Dimension.reason, ["miss", "validation", "refresh", "bypass", "unsafe_method", "reload"])
        let bytesCounters = family(Names.bytes, Names.Dimension.source, ["cache", "origin"])
        cacheBytesCounter = bytesCounters["cache"]!
        originBytesCounter = bytesCounters["origin"]!
        runDuration = Timer(label: Names.runDuration, dimensions: dimensions, factory: factory)
        originFetchDuration = Timer(label: Names.originFetchDuration, dimensions: dimensions, factory: factory)
        storeCallDurations = StoreOperation.allCases.map {
            Timer(label: Names.storeCallDuration, dimensions: dimensions + [(Names.Dimension.operation, $0.name)], factory: factory)
        }
    }

    /// Now, when durations are recorded (see ``timing``); nil otherwise.
    @inline(__always)
    var timingStart: ContinuousClock.Instant? { timing ? ContinuousClock.now : nil }

    /// Records a store call of `operation` that started at `start` (nil: not timed).
    func storeCall(_ operation: StoreOperation, since start: ContinuousClock.Instant?) {
        guard let start else { return }
        storeCallDurations[operation.rawValue].recordNanoseconds(Self.nanoseconds(since: start))
    }

    /// Records `timer`'s duration from `start` (nil: not timed).
    @inline(__always)
    func record(_ timer: Timer, since start: ContinuousClock.Instant?) {
        guard let start else { return }
        timer.recordNanoseconds(Self.nanoseconds(since: start))
    }

    /// The nanoseconds from `start` to now.
    static func nanoseconds(since start: ContinuousClock.Instant) -> Int64 {
        let elapsed = (ContinuousClock.now - start).components
        return elapsed.seconds &* 1_000_000_000 &+ elapsed.attoseconds / 1_000_000_000
    }

    func revalidation(_ result: String) { revalidations[result]?.increment() }
    func staleServed(_ reason: String) { staleServedCounters[reason]?.increment() }
    func coalesced(_ scope: String) { coalescedWaits[scope]?.increment() }
    func storeError(_ operation: StoreOperation) { storeErrors[operation.rawValue].increment() }
    func originFetch(_ reason: String) { originFetches[reason]?.increment() }
    /// Body bytes delivered from storage.
    func cacheBytes(_ count: Int) {
        if count > 0 { cacheBytesCounter.increment(by: count) }
    }

    /// Body bytes delivered from the origin.
    func originBytes(_ count: Int) {
        if count > 0 { originBytesCounter.increment(by: count) }
    }
}

/// The store calls the cache makes, as metrics, spans and log lines name them.
enum StoreOperation: Int, CaseIterable, Sendable, CustomStringConvertible {
    case get, set, setIfAbsent, remove, increment

    /// The name in the `operation` dimension, the span's name and log lines.
    var name: String {
        switch self {
        case .get: "get"
        case .set: "set"
        case .setIfAbsent: "set_if_absent"
        case .remove: "remove"
        case .increment: "increment"
        }
    }

    var description: String { name }
}
