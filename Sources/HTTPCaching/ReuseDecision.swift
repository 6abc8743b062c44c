#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import HTTPTypes

/// What a cache knows about a stored response when deciding whether to reuse it.
public struct StoredResponseInfo: Sendable, Hashable {
    /// The stored status and header fields (after 304 merges).
    public var response: HTTPResponse
    /// When the request that produced the stored response (or its last validation) was sent.
    public var requestTime: Date
    /// When that response was received.
    public var responseTime: Date
    /// A freshness lifetime imposed by configuration, replacing the one the origin gave; nil to use the
    /// origin's.
    public var lifetimeOverride: Int?
    /// Whether the cache considers the response stale whatever its freshness lifetime (a HEAD response disagreed
    /// with it, RFC 9111 §4.3.5): its lifetime is zero until it is validated or replaced.
    public var markedStale: Bool

    /// Describes a stored response.
    public init(
        response: HTTPResponse, requestTime: Date, responseTime: Date, lifetimeOverride: Int? = nil, markedStale: Bool = false
    ) {
        self.response = response
        self.requestTime = requestTime
        self.responseTime = responseTime
        self.lifetimeOverride = lifetimeOverride
        self.markedStale = markedStale
    }
}

/// Whether a stored response can answer a request now, and how (RFC 9111 §4, RFC 5861).
public struct ReuseDecision: Sendable, Hashable {
    /// What the cache should do.
    public struct Action: Sendable, Hashable, CustomStringConvertible {
        fileprivate enum Base: Sendable, Hashable { case serveFresh, serveStale, serveStaleWhileRevalidating, validate }
        fileprivate let base: Base

        /// The response is fresh enough for the request: serve it.
        public static let serveFresh = Action(base: .serveFresh)
        /// The response is stale but the request's `max-stale` accepts it: serve it.
        public static let serveStale = Action(base: .serveStale)
        /// The response is stale within `stale-while-revalidate`: serve it and revalidate in the background.
        public static let serveStaleWhileRevalidating = Action(base: .serveStaleWhileRevalidating)
        /// The response must be validated with the origin (or, with `only-if-cached`, answered with 504).
        public static let validate = Action(base: .validate)

        /// Whether the stored response is served without waiting for the origin.
        public var servesStoredResponse: Bool { base != .validate }

        public var description: String {
            switch base {
            case .serveFresh: "serve fresh"
            case .serveStale: "serve stale"
            case .serveStaleWhileRevalidating: "serve stale while revalidating"
            case .validate: "validate"
            }
        }
    }

    /// What to do.
    public let action: Action
    /// The stored response's current age in seconds (RFC 9111 §4.2.3).
    public let currentAge: Int
    /// Its freshness lifetime in seconds.
    public let freshnessLifetime: FreshnessLifetime
    /// Whether, if validation fails (the origin cannot be reached or answers 500, 502, 503 or 504), the stored
    /// response may be served instead (`stale-if-error` of the response or the request, and no
    /// `must-revalidate`, `proxy-revalidate` or `s-maxage`).
    public let staleIfErrorAllowed: Bool
    /// Whether, if the origin cannot be reached, the stored response may be served however stale it is, as a
    /// disconnected cache may (RFC 9111 §4.2.4): unless an unqualified `no-cache`, or `must-revalidate`,
    /// `proxy-revalidate` or `s-maxage` on a stale response forbid it, or the request's `no-cache` asks for a
    /// validated response. How stale is the cache's choice.
    public let staleWhenDisconnectedAllowed: Bool
    /// Header fields to leave out when serving without validation (a qualified `no-cache`), lowercased.
    public let fieldsToOmitWhenServed: Set<String>

    /// Seconds of freshness left; negative once stale (the `ttl` of `Cache-Status`).
    public var timeToLive: Int { freshnessLifetime.seconds - currentAge }
    /// Seconds past the freshness lifetime; zero while fresh.
    public var staleness: Int { max(0, currentAge - freshnessLifetime.seconds) }
    /// Whether the stored response is fresh (RFC 9111 §4.2: lifetime > age).
    public var isFresh: Bool { freshnessLifetime.seconds > currentAge }

    /// Decides how to use `stored` for a request with `requestDirectives` at `now`, as a shared cache.
    ///
    /// Order of the rules: a request `no-cache` or an unqualified response `no-cache` always validates (and
    /// then allows no `stale-if-error`); a fresh response is served unless the request's `max-age` or
    /// `min-fresh` rule it out; a stale response is served when the request's `max-stale` accepts it, or with a
    /// background revalidation inside `stale-while-revalidate` (not to a request with `min-fresh`), unless
    /// `must-revalidate`, `proxy-revalidate` or `s-maxage` forbid serving it stale; everything else validates.
    /// - Parameters:
    ///   - stored: The stored response.
    ///   - requestDirectives: The request's `Cache-Control`.
    ///   - now: The current time.
    ///   - rules: Cache settings (heuristic freshness).
    public static func evaluate(
        stored: StoredResponseInfo,
        requestDirectives: RequestCacheControl,
        now: Date,
        rules: CachingRules = CachingRules()
    ) -> ReuseDecision {
        evaluate(prepared: PreparedStoredResponse(stored, rules: rules), requestDirectives: requestDirectives, now: now)
    }

    /// Decides as ``evaluate(stored:requestDirectives:now:rules:)`` does, from a stored response whose
    /// directives, freshness lifetime and initial age were worked out once (see ``PreparedStoredResponse``).
    /// - Parameters:
    ///   - prepared: The stored response, prepared with the cache's rules.
    ///   - requestDirectives: The request's `Cache-Control`.
    ///   - now: The current time.
    public static func evaluate(
        prepared: PreparedStoredResponse,
        requestDirectives: RequestCacheControl,
        now: Date
    ) -> ReuseDecision {
        let stored = prepared.info
        let directives = prepared.directives
        let lifetime = prepared.freshnessLifetime
        let age = prepared.currentAge(now: now)
        let staleness = max(0, age - lifetime.seconds)
        let fresh = lifetime.seconds > age
        let revalidateWhenStale = directives.requiresRevalidationWhenStale
        // An unqualified `no-cache` allows no use without a successful validation (RFC 9111 §5.2.2.4), so not
        // after a failed one either, whatever `stale-if-error` says; unless configuration overrides the
        // origin's lifetime.
        let validateBeforeUse = directives.requiresValidationBeforeUse && stored.lifetimeOverride == nil
        let errorWindow = max(directives.staleIfError ?? -1, requestDirectives.staleIfError ?? -1)
        let staleIfError =
            !validateBeforeUse && !(revalidateWhenStale && !fresh) && errorWindow >= 0 && staleness <= errorWindow
        let disconnected = !validateBeforeUse && !(revalidateWhenStale && !fresh) && !requestDirectives.noCache
        var omitted: Set<String> = []
        if case .fields(let names) = directives.noCache, stored.lifetimeOverride == nil { omitted = names }

        func decision(_ action: Action) -> ReuseDecision {
            ReuseDecision(
                action: action,
                currentAge: age,
                freshnessLifetime: lifetime,
                staleIfErrorAllowed: staleIfError,
                staleWhenDisconnectedAllowed: disconnected,
                fieldsToOmitWhenServed: action == .validate ? [] : omitted
            )
        }

        if requestDirectives.noCache || validateBeforeUse { return decision(.validate) }
        if let maxAge = requestDirectives.maxAge, age > maxAge { return decision(.validate) }
        if fresh {
            if let minFresh = requestDirectives.minFresh, lifetime.seconds - age < minFresh {
                return decision(.validate)
            }
            return decision(.serveFresh)
        }
        if revalidateWhenStale { return decision(.validate) }
        if let maxStale = requestDirectives.maxStale, maxStale.allows(staleness: staleness) {
            return decision(.serveStale)
        }
        // A request's `min-fresh` asks for a response fresh for a while yet: a stale one never qualifies.
        if let window = directives.staleWhileRevalidate, staleness <= window, requestDirectives.minFresh == nil {
            return decision(.serveStaleWhileRevalidating)
        }
        return decision(.validate)
    }
}

/// A stored response with what reuse decisions read from its header fields worked out once: its
/// `Cache-Control`, its freshness lifetime and its corrected initial age (RFC 9111 §4.2.3), none of which
/// change while it stays stored. Only the resident time depends on the current time.
///
/// A cache that keeps stored responses in memory prepares each once and decides with
/// ``ReuseDecision/evaluate(prepared:requestDirectives:now:)`` on every hit, instead of parsing the header
/// fields again.
public struct PreparedStoredResponse: Sendable, Hashable {
    /// The stored response.
    public let info: StoredResponseInfo
    /// The stored response's `Cache-Control`.
    public let directives: ResponseCacheControl
    /// Its freshness lifetime: zero when it is marked stale, else the override when there is one, else the one its
    /// header fields give under the rules it was prepared with.
    public let freshnessLifetime: FreshnessLifetime
    /// `corrected_initial_age` (RFC 9111 §4.2.3): its age when it was received.
    public let correctedInitialAge: Int
    /// The heuristic settings the lifetime was worked out with (they matter only for a heuristic lifetime).
    private let heuristicFraction: Double
    private let heuristicLimit: Int
    /// The targeted fields (RFC 9213) the directives were chosen under.
    private let targetedFields: [HTTPField.Name]

    /// Prepares `stored` for reuse decisions under `rules`.
    public init(_ stored: StoredResponseInfo, rules: CachingRules = CachingRules()) {
        self.init(stored, directives: ResponseCacheControl(stored.response.headerFields, rules: rules), rules: rules)
    }

    /// Prepares `stored` for reuse decisions under `rules`, with its `Cache-Control` already parsed.
    /// - Parameters:
    ///   - stored: The stored response.
    ///   - directives: The directives of `stored`'s header fields under `rules` (as
    ///     ``ResponseCacheControl/init(_:rules:)`` reads them).
    ///   - rules: Cache settings (heuristic freshness).
    public init(_ stored: StoredResponseInfo, directives: ResponseCacheControl, rules: CachingRules = CachingRules()) {
        info = stored
        self.directives = directives
        freshnessLifetime =
            stored.markedStale
            ? FreshnessLifetime(seconds: 0, source: .markedStale)
            : stored.lifetimeOverride.map { FreshnessLifetime(seconds: $0, source: .override) }
            ?? FreshnessLifetime.of(stored.response, directives: directives, responseTime: stored.responseTime, rules: rules)
        correctedInitialAge = AgeCalculation(
            headerFields: stored.response.headerFields,
            requestTime: stored.requestTime,
            responseTime: stored.responseTime,
            now: stored.responseTime
        ).correctedInitialAge
        heuristicFraction = rules.heuristicFraction
        heuristicLimit = rules.heuristicLimit
        targetedFields = rules.targetedCacheControlFields
    }

    /// The response's age at `now` in whole seconds (`current_age`, RFC 9111 §4.2.3): what
    /// ``AgeCalculation/currentAge`` computes from the header fields.
    public func currentAge(now: Date) -> Int {
        let residentTime = clampedSeconds(now.timeIntervalSince(info.responseTime))
        return min(correctedInitialAge + residentTime, maximumDeltaSeconds)
    }

    /// Whether the preparation holds under `rules`: always, unless `rules` obey other targeted fields, or the
    /// lifetime is heuristic and `rules` compute heuristics differently.
    public func isPrepared(for rules: CachingRules) -> Bool {
        (targetedFields.isEmpty ? rules.targetedCacheControlFields.isEmpty : targetedFields == rules.targetedCacheControlFields)
            && (freshnessLifetime.source != .heuristic
                || (heuristicFraction == rules.heuristicFraction && heuristicLimit == rules.heuristicLimit))
    }
}

/// Status codes after which `stale-if-error` allows serving a stale response (RFC 5861 §4).
public let staleIfErrorStatusCodes: Set<Int> = [500, 502, 503, 504]
