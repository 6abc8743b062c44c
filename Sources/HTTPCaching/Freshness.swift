#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import HTTPTypes

/// How long a response stays fresh, and where that number came from (RFC 9111 §4.2.1).
public struct FreshnessLifetime: Sendable, Hashable {
    /// Which rule gave the lifetime.
    public struct Source: Sendable, Hashable, CustomStringConvertible {
        fileprivate enum Base: Sendable, Hashable { case sharedMaxAge, maxAge, expires, heuristic, none, override, markedStale }
        fileprivate let base: Base

        /// `Cache-Control: s-maxage`.
        public static let sharedMaxAge = Source(base: .sharedMaxAge)
        /// `Cache-Control: max-age`.
        public static let maxAge = Source(base: .maxAge)
        /// `Expires` minus `Date`.
        public static let expires = Source(base: .expires)
        /// A fraction of the time since `Last-Modified` (RFC 9111 §4.2.2).
        public static let heuristic = Source(base: .heuristic)
        /// No explicit lifetime and no heuristic allowed: zero.
        public static let none = Source(base: .none)
        /// A lifetime the cache's configuration imposed.
        public static let override = Source(base: .override)
        /// Zero: the cache considers the stored response stale whatever it says (RFC 9111 §4.3.5), until it is
        /// validated or replaced.
        public static let markedStale = Source(base: .markedStale)

        public var description: String {
            switch base {
            case .sharedMaxAge: "s-maxage"
            case .maxAge: "max-age"
            case .expires: "expires"
            case .heuristic: "heuristic"
            case .none: "none"
            case .override: "override"
            case .markedStale: "marked stale"
            }
        }
    }

    /// The lifetime in seconds.
    public let seconds: Int
    /// Where it came from.
    public let source: Source

    /// A lifetime of `seconds` from `source`.
    public init(seconds: Int, source: Source) {
        self.seconds = seconds
        self.source = source
    }

    /// The freshness lifetime of a response for a shared cache: `s-maxage`, else `max-age`, else
    /// `Expires` − `Date`, else a heuristic where allowed, else zero.
    ///
    /// An invalid `Expires` (for example `0`) means "already expired". The heuristic, 10% (configurable) of
    /// `Date` − `Last-Modified` up to a limit, applies only to a response without explicit freshness whose
    /// status is cacheable by default or which is marked `public`.
    /// - Parameters:
    ///   - response: The response's status and header fields.
    ///   - responseTime: When the response was received; stands in for a missing `Date`.
    ///   - rules: Heuristic settings.
    public static func of(
        _ response: HTTPResponse,
        responseTime: Date,
        rules: CachingRules = CachingRules()
    ) -> FreshnessLifetime {
        of(response, directives: ResponseCacheControl(response.headerFields, rules: rules), responseTime: responseTime, rules: rules)
    }

    /// ``of(_:responseTime:rules:)`` with the response's `Cache-Control` already parsed.
    static func of(
        _ response: HTTPResponse,
        directives: ResponseCacheControl,
        responseTime: Date,
        rules: CachingRules
    ) -> FreshnessLifetime {
        if let shared = directives.sharedMaxAge { return FreshnessLifetime(seconds: shared, source: .sharedMaxAge) }
        if let maxAge = directives.maxAge { return FreshnessLifetime(seconds: maxAge, source: .maxAge) }
        let date = response.headerFields[.date].flatMap { HTTPDate.parse($0, relativeTo: responseTime) } ?? responseTime
        let expiresValues = directives.targetedField == nil ? response.headerFields[values: .expires] : []
        if !expiresValues.isEmpty {
            // More than one Expires, or one that is not an HTTP date (RFC 9110 §5.6.7: another zone than GMT, a
            // two-digit year outside the RFC 850 form, `0`, ...), is a time in the past (RFC 9111 §5.3): the
            // response is stale, and no heuristic applies.
            guard expiresValues.count == 1, let expires = HTTPDate.parse(expiresValues[0], relativeTo: responseTime) else {
                return FreshnessLifetime(seconds: 0, source: .expires)
            }
            return FreshnessLifetime(seconds: clampedSeconds(expires.timeIntervalSince(date)), source: .expires)
        }
        let heuristicAllowed =
            directives.public || heuristicallyCacheableStatusCodes.contains(response.status.code)
        if heuristicAllowed,
            let lastModified = response.headerFields[.lastModified].flatMap({ HTTPDate.parse($0, relativeTo: responseTime) })
        {
            let since = date.timeIntervalSince(lastModified)
            let seconds = min(clampedSeconds(since * rules.heuristicFraction), rules.heuristicLimit)
            return FreshnessLifetime(seconds: seconds, source: .heuristic)
        }
        return FreshnessLifetime(seconds: 0, source: .none)
    }
}

/// The age calculation of RFC 9111 §4.2.3, with each intermediate value, in whole seconds.
public struct AgeCalculation: Sendable, Hashable {
    /// `max(0, response_time − date_value)`.
    public let apparentAge: Int
    /// `response_time − request_time`.
    public let responseDelay: Int
    /// `age_value + response_delay`.
    public let correctedAgeValue: Int
    /// `max(apparent_age, corrected_age_value)`.
    public let correctedInitialAge: Int
    /// `now − response_time`.
    public let residentTime: Int
    /// `corrected_initial_age + resident_time`: the response's age now.
    public let currentAge: Int

    /// Computes the age of a stored response.
    /// - Parameters:
    ///   - headerFields: The stored response's header fields (`Age`, `Date`).
    ///   - requestTime: When the request that produced the response was sent.
    ///   - responseTime: When the response was received.
    ///   - now: The current time.
    public init(headerFields: HTTPFields, requestTime: Date, responseTime: Date, now: Date) {
        let ageValue = Self.ageValue(headerFields) ?? 0
        let dateValue = headerFields[.date].flatMap { HTTPDate.parse($0, relativeTo: responseTime) } ?? responseTime
        apparentAge = clampedSeconds(responseTime.timeIntervalSince(dateValue))
        responseDelay = clampedSeconds(responseTime.timeIntervalSince(requestTime))
        correctedAgeValue = min(ageValue + responseDelay, maximumDeltaSeconds)
        correctedInitialAge = max(apparentAge, correctedAgeValue)
        residentTime = clampedSeconds(now.timeIntervalSince(responseTime))
        currentAge = min(correctedInitialAge + residentTime, maximumDeltaSeconds)
    }

    /// The `Age` of `headerFields` in seconds (RFC 9111 §5.1), nil when there is none or it is invalid.
    ///
    /// `Age` is a singleton field, but intermediaries that append instead of replacing make a list of it
    /// (`Age: 7200, 0`, or several field lines): the first member is used and the others discarded. A value that
    /// is not delta-seconds (`-5`, `1.5`, `soon`) is ignored, as the RFC says a cache should.
    static func ageValue(_ headerFields: HTTPFields) -> Int? {
        for line in headerFields[values: .age] {
            for member in line.split(separator: ",", omittingEmptySubsequences: false) {
                let trimmed = member.trimmingOWS()
                // Empty list elements are no members (RFC 9110 §5.6.1).
                if trimmed.isEmpty { continue }
                return parseDeltaSeconds(trimmed)
            }
        }
        return nil
    }

    /// The `Age` header field value for a response served at this age.
    public var headerValue: String { String(currentAge) }
}

/// Seconds as a whole, non-negative number no larger than ``maximumDeltaSeconds``.
func clampedSeconds(_ interval: TimeInterval) -> Int {
    guard interval.isFinite, interval > 0 else { return 0 }
    return interval >= Double(maximumDeltaSeconds) ? maximumDeltaSeconds : Int(interval.rounded(.down))
}
