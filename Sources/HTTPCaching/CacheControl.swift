public import HTTPTypes

/// The greatest delta-seconds value a cache needs to represent (RFC 9111 §1.2.2): larger values, and values
/// that overflow, are read as this.
public let maximumDeltaSeconds = 2_147_483_648

/// One `Cache-Control` directive as written: a lowercased name and an optional value with quotes removed.
public struct CacheDirective: Sendable, Hashable {
    /// The directive's name, lowercased (`max-age`).
    public var name: String
    /// The directive's argument with any quoting undone, or nil when it has none.
    public var value: String?

    /// A directive named `name` with `value`.
    public init(name: String, value: String? = nil) {
        self.name = name.lowercased()
        self.value = value
    }

    /// Splits `Cache-Control` field values into directives.
    ///
    /// Tolerant of what real servers send: spaces around `=` and commas, empty list elements, quoted values
    /// with backslash escapes, upper-case names. Several field lines are read as one list.
    /// - Parameter values: The field values, one per field line.
    /// - Returns: The directives in order, duplicates kept.
    public static func parse(_ values: [String]) -> [CacheDirective] {
        var directives: [CacheDirective] = []
        for value in values {
            for element in splitList(value) {
                let trimmed = element.trimmingOWS()
                guard !trimmed.isEmpty else { continue }
                if let equals = trimmed.firstIndex(of: "=") {
                    let name = trimmed[..<equals].trimmingOWS()
                    guard !name.isEmpty else { continue }
                    let rawValue = trimmed[trimmed.index(after: equals)...].trimmingOWS()
                    directives.append(CacheDirective(name: String(name), value: unquote(rawValue)))
                } else {
                    directives.append(CacheDirective(name: String(trimmed), value: nil))
                }
            }
        }
        return directives
    }

    /// Splits a comma-separated list (or a list of parameters, with `separator` `;`), keeping separators inside
    /// quoted strings.
    static func splitList(_ value: String, separator: Character = ",") -> [Substring] {
        var elements: [Substring] = []
        var start = value.startIndex
        var index = value.startIndex
        var inQuotes = false
        var escaped = false
        while index < value.endIndex {
            let character = value[index]
            if escaped {
                escaped = false
            } else if inQuotes && character == "\\" {
                escaped = true
            } else if character == "\"" {
                inQuotes.toggle()
            } else if character == separator && !inQuotes {
                elements.append(value[start..<index])
                start = value.index(after: index)
            }
            index = value.index(after: index)
        }
        elements.append(value[start...])
        return elements
    }

    private static func unquote(_ value: Substring) -> String {
        guard value.count >= 2, value.first == "\"", value.last == "\"" else { return String(value) }
        var result = ""
        var escaped = false
        for character in value.dropFirst().dropLast() {
            if escaped {
                result.append(character)
                escaped = false
            } else if character == "\\" {
                escaped = true
            } else {
                result.append(character)
            }
        }
        return result
    }

    /// The value read as delta-seconds: nil when it is not a non-negative decimal integer; values beyond
    /// ``maximumDeltaSeconds`` read as that.
    var deltaSeconds: Int? { value.flatMap(parseDeltaSeconds) }

    /// The value read as a list of field names (for qualified `no-cache` and `private`), lowercased.
    var fieldNames: [String] {
        guard let value else { return [] }
        return value.split(separator: ",").map { $0.trimmingOWS().lowercased() }.filter { !$0.isEmpty }
    }
}

/// Which header fields a qualified directive (`no-cache`, `private`) applies to.
public enum DirectiveScope: Sendable, Hashable {
    /// The whole response (the directive was given without field names).
    case wholeResponse
    /// Only these header fields, lowercased.
    case fields(Set<String>)

    /// Combines two occurrences of the same directive: the whole response wins over field lists, which unite.
    func combined(with other: DirectiveScope) -> DirectiveScope {
        switch (self, other) {
        case (.fields(let left), .fields(let right)): .fields(left.union(right))
        default: .wholeResponse
        }
    }

    static func from(_ directive: CacheDirective) -> DirectiveScope {
        let names = directive.fieldNames
        return names.isEmpty ? .wholeResponse : .fields(Set(names))
    }
}

/// How stale a response the client accepts (the request's `max-stale`).
public enum MaxStale: Sendable, Hashable {
    /// `max-stale` without a value: a stale response of any age.
    case unlimited
    /// `max-stale=N`: a response at most N seconds past its freshness lifetime.
    case seconds(Int)

    /// Whether a response `staleness` seconds past its lifetime is acceptable.
    public func allows(staleness: Int) -> Bool {
        switch self {
        case .unlimited: true
        case .seconds(let limit): staleness <= limit
        }
    }
}

/// The `Cache-Control` directives of a request (RFC 9111 §5.2.1, RFC 5861 §4).
///
/// Duplicated or conflicting directives resolve to the most restrictive reading (RFC 9111 §4.2.1): the
/// smallest `max-age`, the largest `min-fresh`, the smallest `max-stale` (a bare `max-stale` loses to one
/// with a limit). An invalid `max-age` reads as 0; an invalid `max-stale` disables it; an invalid
/// `min-fresh` is ignored.
public struct RequestCacheControl: Sendable, Hashable {
    /// `max-age`: the client wants a response no older than this many seconds.
    public var maxAge: Int?
    /// `max-stale`: the client accepts a stale response.
    public var maxStale: MaxStale?
    /// `min-fresh`: the client wants a response that stays fresh at least this many more seconds.
    public var minFresh: Int?
    /// `no-cache`: a stored response must not be used without validation.
    public var noCache: Bool = false
    /// `no-store`: nothing of this request or its response may be stored.
    public var noStore: Bool = false
    /// `no-transform`.
    public var noTransform: Bool = false
    /// `only-if-cached`: answer from the cache or with 504, never contact the origin.
    public var onlyIfCached: Bool = false
    /// `stale-if-error` (RFC 5861): the client accepts a response this many seconds stale when the origin fails.
    public var staleIfError: Int?
    /// Directives this type does not know, in order.
    public var extensions: [CacheDirective] = []

    /// No directives.
    public init() {}

    /// Reads the `Cache-Control` field lines of `headerFields`.
    public init(_ headerFields: HTTPFields) {
        self.init(directives: CacheDirective.parse(headerFields[values: .cacheControl]))
    }

    /// Reads a `Cache-Control` field value.
    public init(parsing value: String) {
        self.init(directives: CacheDirective.parse([value]))
    }

    /// Interprets parsed directives.
    public init(directives: [CacheDirective]) {
        var maxStaleInvalid = false
        for directive in directives {
            switch directive.name {
            case "max-age":
                maxAge = minimum(maxAge, directive.deltaSeconds ?? 0)
            case "max-stale":
                if directive.value == nil {
                    if maxStale == nil { maxStale = .unlimited }
                } else if let seconds = directive.deltaSeconds {
                    if case .seconds(let existing) = maxStale {
                        maxStale = .seconds(min(existing, seconds))
                    } else {
                        maxStale = .seconds(seconds)
                    }
                } else {
                    maxStaleInvalid = true
                }
            case "min-fresh":
                if let seconds = directive.deltaSeconds { minFresh = max(minFresh ?? 0, seconds) }
            case "no-cache": noCache = true
            case "no-store": noStore = true
            case "no-transform": noTransform = true
            case "only-if-cached": onlyIfCached = true
            case "stale-if-error":
                staleIfError = minimum(staleIfError, directive.deltaSeconds ?? 0)
            default: extensions.append(directive)
            }
        }
        if maxStaleInvalid { maxStale = nil }
    }
}

/// The `Cache-Control` directives of a response (RFC 9111 §5.2.2, RFC 5861 §3, RFC 8246).
///
/// Duplicated or conflicting directives resolve to the most restrictive reading (RFC 9111 §4.2.1): the
/// smallest `max-age`, `s-maxage`, `stale-while-revalidate` and `stale-if-error`; an unqualified `no-cache`
/// or `private` wins over qualified ones, whose field names unite. Invalid delta-seconds read as 0, which
/// makes the response stale (or the stale window empty).
public struct ResponseCacheControl: Sendable, Hashable {
    /// `max-age`: the freshness lifetime in seconds.
    public var maxAge: Int?
    /// `s-maxage`: the freshness lifetime for shared caches; implies `proxy-revalidate`.
    public var sharedMaxAge: Int?
    /// `no-cache`: must be validated before each use (whole response), or the named fields must not be sent
    /// without validation.
    public var noCache: DirectiveScope?
    /// `private`: for a single user; a shared cache does not store it.
    public var `private`: DirectiveScope?
    /// `no-store`: must not be stored.
    public var noStore: Bool = false
    /// `no-transform`.
    public var noTransform: Bool = false
    /// `must-revalidate`: once stale, must not be used without successful validation.
    public var mustRevalidate: Bool = false
    /// `proxy-revalidate`: `must-revalidate` for shared caches.
    public var proxyRevalidate: Bool = false
    /// `must-understand`: store only when the status code's caching rules are understood.
    public var mustUnderstand: Bool = false
    /// `public`: storable even where it would not be by default (including with `Authorization`).
    public var `public`: Bool = false
    /// `immutable` (RFC 8246): will not change while fresh.
    public var immutable: Bool = false
    /// `stale-while-revalidate` (RFC 5861): may be served this many seconds stale while revalidating in the
    /// background.
    public var staleWhileRevalidate: Int?
    /// `stale-if-error` (RFC 5861): may be served this many seconds stale when the origin fails.
    public var staleIfError: Int?
    /// Directives this type does not know, in order.
    public var extensions: [CacheDirective] = []
    /// The targeted field (RFC 9213) these directives come from, or nil when they are `Cache-Control`'s.
    /// Under a targeted field, `Expires` does not count either.
    public var targetedField: HTTPField.Name?

    /// No directives.
    public init() {}

    /// Reads the `Cache-Control` field lines of `headerFields`.
    public init(_ headerFields: HTTPFields) {
        self.init(directives: CacheDirective.parse(headerFields[values: .cacheControl]))
    }

    /// Reads a `Cache-Control` field value.
    public init(parsing value: String) {
        self.init(directives: CacheDirective.parse([value]))
    }

    /// Interprets parsed directives.
    public init(directives: [CacheDirective]) {
        for directive in directives {
            switch directive.name {
            case "max-age": maxAge = minimum(maxAge, directive.deltaSeconds ?? 0)
            case "s-maxage": sharedMaxAge = minimum(sharedMaxAge, directive.deltaSeconds ?? 0)
            case "no-cache":
                let scope = DirectiveScope.from(directive)
                noCache = noCache.map { $0.combined(with: scope) } ?? scope
            case "private":
                let scope = DirectiveScope.from(directive)
                `private` = `private`.map { $0.combined(with: scope) } ?? scope
            case "no-store": noStore = true
            case "no-transform": noTransform = true
            case "must-revalidate": mustRevalidate = true
            case "proxy-revalidate": proxyRevalidate = true
            case "must-understand": mustUnderstand = true
            case "public": `public` = true
            case "immutable": immutable = true
            case "stale-while-revalidate":
                staleWhileRevalidate = minimum(staleWhileRevalidate, directive.deltaSeconds ?? 0)
            case "stale-if-error": staleIfError = minimum(staleIfError, directive.deltaSeconds ?? 0)
            default: extensions.append(directive)
            }
        }
    }

    /// Whether a shared cache must validate this response once it is stale: `must-revalidate`,
    /// `proxy-revalidate`, or `s-maxage` (RFC 9111 §5.2.2.10).
    public var requiresRevalidationWhenStale: Bool {
        mustRevalidate || proxyRevalidate || sharedMaxAge != nil
    }

    /// Whether the response must be validated before every use (an unqualified `no-cache`).
    public var requiresValidationBeforeUse: Bool { noCache == .wholeResponse }
}

private func minimum(_ existing: Int?, _ new: Int) -> Int {
    existing.map { min($0, new) } ?? new
}

extension StringProtocol {
    /// Drops optional whitespace (spaces and horizontal tabs) at both ends.
    func trimmingOWS() -> SubSequence {
        var slice = self[...]
        while let first = slice.first, first == " " || first == "\t" { slice = slice.dropFirst() }
        while let last = slice.last, last == " " || last == "\t" { slice = slice.dropLast() }
        return slice
    }
}

/// Reads delta-seconds (RFC 9111 §1.2.2): nil unless `text` is a non-empty run of decimal digits; values beyond
/// ``maximumDeltaSeconds`` read as that.
func parseDeltaSeconds(_ text: some StringProtocol) -> Int? {
    guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
    let significant = text.drop { $0 == "0" }
    if significant.count > 10 { return maximumDeltaSeconds }
    return min(Int(significant) ?? 0, maximumDeltaSeconds)
}
