import HTTPTypes
import Tracing

/// The spans a ``CachedNetworking`` makes through swift-distributed-tracing: `cached.run` around each
/// ``CachedNetworking/run(_:body:policy:transport:logger:)``, with a child `cached.store.<operation>` around each
/// store call and `cached.origin.fetch` around each origin fetch.
///
/// All are of kind `internal`: the cache sits in front of an HTTP client, and OpenTelemetry's HTTP conventions give
/// the `client` span to the layer that sends the request on the wire (an instrumented transport, whose span nests
/// under `cached.origin.fetch`); a hit sends nothing at all. The spans are made only when a tracer is configured
/// (``CachedNetworking/Configuration/tracer``) or bootstrapped when the cache is made; otherwise each place that
/// could make one costs a nil check.
struct CacheTracing: Sendable {
    /// The tracer; nil when tracing is off.
    let tracer: (any Tracer)?
    /// Whether ``tracer`` is set. Checked first on every path that could make a span: testing the optional
    /// existential itself copies it (a value-witness call and a retain and release), a cost each hit would pay.
    let isOn: Bool

    /// `configured`, else the bootstrapped tracer unless it is the no-op one.
    init(configured: (any Tracer)?) {
        if let configured {
            tracer = configured
        } else {
            let bootstrapped = InstrumentationSystem.tracer
            tracer = bootstrapped is NoOpTracer ? nil : bootstrapped
        }
        isOn = tracer != nil
    }

    /// A span named `name`, child of the task's current context; nil when tracing is off.
    @inline(__always)
    func start(_ name: @autoclosure () -> String) -> (any Span)? {
        guard isOn, let tracer else { return nil }
        return tracer.startSpan(name(), context: ServiceContext.current ?? .topLevel, ofKind: .internal)
    }

    /// A `cached.store.<operation>` span for a call on `key`; nil when tracing is off.
    @inline(__always)
    func startStoreCall(_ operation: StoreOperation, key: @autoclosure () -> String) -> (any Span)? {
        guard let span = start(CachedNetworkingSpans.storePrefix + operation.name) else { return nil }
        span.attributes[CachedNetworkingSpans.Attribute.storeKey] = key()
        return span
    }

    /// The request's method and URL on `span`.
    static func describe(_ request: HTTPRequest, on span: any Span) {
        span.updateAttributes { attributes in
            attributes[CachedNetworkingSpans.Attribute.method] = request.method.rawValue
            attributes[CachedNetworkingSpans.Attribute.url] = fullURL(request)
        }
    }

    /// `error` recorded on `span`, whose status becomes an error.
    static func fail(_ span: any Span, _ error: any Error, type: String) {
        span.recordError(error)
        span.attributes[CachedNetworkingSpans.Attribute.errorType] = type
        span.setStatus(SpanStatus(code: .error, message: "\(error)"))
    }

    /// The request's URL for `url.full`, credentials in the authority replaced as OpenTelemetry asks.
    static func fullURL(_ request: HTTPRequest) -> String {
        var authority = request.authority ?? ""
        if let at = authority.lastIndex(of: "@") {
            authority = "REDACTED:REDACTED" + authority[at...]
        }
        return "\(request.scheme ?? "")://\(authority)\(request.path ?? "")"
    }
}

/// The names of the spans ``CachedNetworking`` makes and of their attributes (OpenTelemetry's where one exists).
public enum CachedNetworkingSpans {
    /// Around each ``CachedNetworking/run(_:body:policy:transport:logger:)``.
    public static let run = "cached.run"
    /// Around each request sent to an origin (a miss, a validation, a background refresh, a forwarded request).
    public static let originFetch = "cached.origin.fetch"
    /// The start of a store call's span name, followed by the operation (`get`, `set`, `set_if_absent`, `remove`,
    /// `increment`), as in ``CachedNetworkingMetrics/Dimension/operation``.
    public static let storePrefix = "cached.store."

    /// Attribute names.
    public enum Attribute {
        /// The request method (`GET`), on `cached.run` and `cached.origin.fetch`.
        public static let method = "http.request.method"
        /// The request's URL, credentials redacted, on `cached.run` and `cached.origin.fetch`.
        public static let url = "url.full"
        /// The response's status code: the answer's on `cached.run`, the origin's on `cached.origin.fetch`.
        public static let statusCode = "http.response.status_code"
        /// The kind of ``CachedNetworkingError`` a span failed with (`transport`, `cancelled`, …), or `store` on a
        /// store call that failed.
        public static let errorType = "error.type"
        /// This cache's `Cache-Status` member for the answer (`cached; hit; ttl=42`), on `cached.run`.
        public static let cacheStatus = "cached.cache_status"
        /// Where the answer came from (`network`, `cache`, `revalidated`, `stale`, `coalesced`), on `cached.run`.
        public static let source = "cached.source"
        /// The store key of a store call (the first one for a call on several keys).
        public static let storeKey = "cached.store.key"
    }
}
