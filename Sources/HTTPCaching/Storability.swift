public import HTTPTypes

/// Settings of the caching rules that RFC 9111 leaves to the cache.
public struct CachingRules: Sendable, Hashable {
    /// Request methods whose responses are stored. RFC 9111 allows GET and HEAD without further
    /// specification; other methods are forwarded.
    public var cacheableMethods: Set<HTTPRequest.Method> = [.get, .head]
    /// The fraction of (`Date` − `Last-Modified`) used as a heuristic freshness lifetime (RFC 9111 §4.2.2).
    public var heuristicFraction: Double = 0.1
    /// The largest heuristic freshness lifetime, in seconds.
    public var heuristicLimit: Int = 86_400
    /// Whether a response that sets cookies may be stored when it carries neither `public` nor `s-maxage`.
    ///
    /// RFC 9111 allows it, but a shared cache that replays one user's `Set-Cookie` to another leaks a session;
    /// the default (false) stores such responses only when the origin marked them explicitly shareable.
    public var storesSetCookieWithoutExplicitPermission: Bool = false
    /// Targeted cache-control fields this cache obeys (RFC 9213), in order of precedence: the first one a
    /// response carries with a valid, non-empty value replaces its `Cache-Control` and `Expires` for this
    /// cache's decisions. Empty by default: a cache inside a service is not the CDN that `CDN-Cache-Control`
    /// addresses unless its operator says so (``HTTPField/Name/cdnCacheControl``).
    public var targetedCacheControlFields: [HTTPField.Name] = []

    /// The defaults described on each property.
    public init() {}
}

/// The final status codes whose caching rules this cache implements, for `must-understand` (RFC 9111 §3): those
/// RFC 9110 defines, but 304 (it updates a stored response). 206 is stored as a partial response when its
/// `Content-Range` and validator allow (RFC 9111 §3.3; ``ContentRange``, ``PartialContent``).
public let understoodStatusCodes: Set<Int> = Set([200, 201, 202, 203, 204, 205, 206])
    .union(300...303).union([305, 307, 308]).union(400...417).union([421, 422, 426]).union(500...505)

/// Status codes that are heuristically cacheable (RFC 9110 §15.1): storable without explicit freshness.
public let heuristicallyCacheableStatusCodes: Set<Int> = [200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414, 501]

/// Whether a response may be stored by a shared cache, and why not.
public struct StorageDecision: Sendable, Hashable, CustomStringConvertible {
    /// Why a response was or was not storable.
    public struct Reason: Sendable, Hashable, CustomStringConvertible {
        fileprivate enum Base: Sendable, Hashable {
            case storable, methodNotCacheable, statusNotFinal, statusNotUnderstood, requestNoStore
            case responseNoStore, privateResponse, authorization, varyWildcard, setCookie, noFreshnessInformation
        }
        fileprivate let base: Base

        /// The response may be stored.
        public static let storable = Reason(base: .storable)
        /// The request method is not one whose responses this cache stores.
        public static let methodNotCacheable = Reason(base: .methodNotCacheable)
        /// The status code is informational (1xx).
        public static let statusNotFinal = Reason(base: .statusNotFinal)
        /// The status code is one whose caching this cache does not implement (304, which updates a stored
        /// response instead).
        public static let statusNotUnderstood = Reason(base: .statusNotUnderstood)
        /// The request carried `Cache-Control: no-store`.
        public static let requestNoStore = Reason(base: .requestNoStore)
        /// The response carried `Cache-Control: no-store`.
        public static let responseNoStore = Reason(base: .responseNoStore)
        /// The response carried `Cache-Control: private`, which a shared cache must not store.
        public static let privateResponse = Reason(base: .privateResponse)
        /// The request carried `Authorization` and the response allowed no shared reuse (RFC 9111 §3.5).
        public static let authorization = Reason(base: .authorization)
        /// The response carried `Vary: *`, which no later request can match.
        public static let varyWildcard = Reason(base: .varyWildcard)
        /// The response sets a cookie and was not marked `public` or given an `s-maxage`.
        public static let setCookie = Reason(base: .setCookie)
        /// The response has no explicit freshness, no `public`, and a status that is not cacheable by default.
        public static let noFreshnessInformation = Reason(base: .noFreshnessInformation)

        public var description: String {
            switch base {
            case .storable: "storable"
            case .methodNotCacheable: "method not cacheable"
            case .statusNotFinal: "status not final"
            case .statusNotUnderstood: "status not understood"
            case .requestNoStore: "request no-store"
            case .responseNoStore: "response no-store"
            case .privateResponse: "private"
            case .authorization: "authorization"
            case .varyWildcard: "vary *"
            case .setCookie: "set-cookie"
            case .noFreshnessInformation: "no freshness information"
            }
        }
    }

    /// Why.
    public let reason: Reason
    /// Whether the response may be stored.
    public var isStorable: Bool { reason == .storable }

    public var description: String { reason.description }

    /// Decides whether a shared cache may store `response` to `request` (RFC 9111 §3, §3.5).
    ///
    /// - Parameters:
    ///   - request: The request as the client sent it.
    ///   - response: The response from the origin.
    ///   - rules: Cache settings.
    /// - Returns: The decision with its reason.
    public static func evaluate(
        request: HTTPRequest,
        response: HTTPResponse,
        rules: CachingRules = CachingRules()
    ) -> StorageDecision {
        evaluate(
            request: request, requestDirectives: RequestCacheControl(request.headerFields), response: response,
            responseDirectives: ResponseCacheControl(response.headerFields, rules: rules), rules: rules)
    }

    /// Decides as ``evaluate(request:response:rules:)`` does, with the `Cache-Control` of the request and of the
    /// response already parsed (a cache that keeps the response's directives parses them once).
    ///
    /// - Parameters:
    ///   - request: The request as the client sent it.
    ///   - requestDirectives: Its `Cache-Control` (of which only `no-store` matters here).
    ///   - response: The response from the origin.
    ///   - responseDirectives: The directives of `response`'s header fields under `rules`
    ///     (``ResponseCacheControl/init(_:rules:)``).
    ///   - rules: Cache settings.
    /// - Returns: The decision with its reason.
    public static func evaluate(
        request: HTTPRequest,
        requestDirectives: RequestCacheControl,
        response: HTTPResponse,
        responseDirectives directives: ResponseCacheControl,
        rules: CachingRules = CachingRules()
    ) -> StorageDecision {
        guard rules.cacheableMethods.contains(request.method) else { return StorageDecision(reason: .methodNotCacheable) }
        let code = response.status.code
        guard code >= 200 else { return StorageDecision(reason: .statusNotFinal) }
        if requestDirectives.noStore { return StorageDecision(reason: .requestNoStore) }
        if directives.mustUnderstand {
            // With must-understand, only a status code whose caching rules the cache implements is stored, and
            // then no-store gives way (RFC 9111 §3, §5.2.2.3).
            guard understoodStatusCodes.contains(code) else {
                return StorageDecision(reason: directives.noStore ? .responseNoStore : .statusNotUnderstood)
            }
        } else {
            if directives.noStore { return StorageDecision(reason: .responseNoStore) }
            guard code != 304 else { return StorageDecision(reason: .statusNotUnderstood) }
        }
        if directives.private != nil { return StorageDecision(reason: .privateResponse) }
        if request.headerFields[.authorization] != nil
            && !(directives.mustRevalidate || directives.public || directives.sharedMaxAge != nil)
        {
            return StorageDecision(reason: .authorization)
        }
        if let vary = Vary(response.headerFields), vary.isWildcard { return StorageDecision(reason: .varyWildcard) }
        if response.headerFields[.setCookie] != nil && !rules.storesSetCookieWithoutExplicitPermission
            && !(directives.public || directives.sharedMaxAge != nil)
        {
            return StorageDecision(reason: .setCookie)
        }
        let explicit =
            directives.public || directives.maxAge != nil || directives.sharedMaxAge != nil
            || (directives.targetedField == nil && response.headerFields[.expires] != nil)
        guard explicit || heuristicallyCacheableStatusCodes.contains(code) else {
            return StorageDecision(reason: .noFreshnessInformation)
        }
        return StorageDecision(reason: .storable)
    }
}
