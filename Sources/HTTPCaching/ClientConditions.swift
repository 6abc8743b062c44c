#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import HTTPTypes

/// The conditions of a client's own GET or HEAD that a cache evaluates itself against the response it chose
/// (RFC 9111 §4.3.2): `If-None-Match`, or without it `If-Modified-Since` (RFC 9110 §13.2.2); and a GET's `Range`
/// with its `If-Range` (RFC 9110 §14.2, §13.1.5; see ``ByteRanges`` and ``IfRange``), applied after them.
///
/// `If-Match` and `If-Unmodified-Since` only apply to an origin: a request with either is forwarded as it is
/// (``Handling/forwarded``).
public struct ClientConditions: Sendable, Hashable {
    /// How a cache treats a request's conditional and range header fields.
    public enum Handling: Sendable, Hashable {
        /// The request has none.
        case unconditional
        /// A GET or HEAD with `If-None-Match`, `If-Modified-Since`, `Range` or `If-Range` only: the cache answers
        /// it from the response it chose, with `304 Not Modified` when the condition says the client's copy is
        /// current, else with the range (`Range` on HEAD is ignored).
        case evaluatedByCache
        /// `If-Match` or `If-Unmodified-Since`, or conditions on a method other than GET and HEAD: the request
        /// goes to the origin as it is.
        case forwarded
    }

    /// The fields that only an origin evaluates.
    public static let forwardedFields: [HTTPField.Name] = [.ifMatch, .ifUnmodifiedSince]
    /// The fields a cache evaluates (RFC 9111 §4.3.2, RFC 9110 §14.2).
    public static let evaluatedFields: [HTTPField.Name] = [.ifNoneMatch, .ifModifiedSince, .range, .ifRange]

    /// How a cache treats `request`, whose method is `method`. One pass over the request's fields (none, for most
    /// requests), comparing names only.
    public static func handling(of request: HTTPRequest, method: HTTPRequest.Method) -> Handling {
        var evaluated = false
        for field in request.headerFields {
            let name = field.name
            if name == .ifNoneMatch || name == .ifModifiedSince || name == .range || name == .ifRange {
                evaluated = true
            } else if name == .ifMatch || name == .ifUnmodifiedSince {
                return .forwarded
            }
        }
        guard evaluated else { return .unconditional }
        return method == .get || method == .head ? .evaluatedByCache : .forwarded
    }

    /// The entity tags of `If-None-Match`; nil without one.
    public let noneMatch: EntityTagCondition?
    /// The date of `If-Modified-Since`, when the request has no `If-None-Match` (which takes precedence, RFC 9110
    /// §13.1.3) and the field is one valid HTTP date; nil otherwise (the field is then ignored).
    public let modifiedSince: Date?

    /// The conditions of a request with `fields`.
    public init(_ fields: HTTPFields) {
        let noneMatch = fields[values: .ifNoneMatch]
        if !noneMatch.isEmpty {
            self.noneMatch = EntityTagCondition(noneMatch)
            self.modifiedSince = nil
            return
        }
        self.noneMatch = nil
        // More than one field line is more than one member: ignored, as is a value that is not a date.
        let modifiedSince = fields[values: .ifModifiedSince]
        self.modifiedSince = modifiedSince.count == 1 ? HTTPDate.parse(modifiedSince[0]) : nil
    }

    /// `request` without the fields a cache evaluates: what the cache asks the origin for on the client's
    /// behalf when it will evaluate the conditions itself.
    public static func removing(from request: HTTPRequest) -> HTTPRequest {
        var stripped = request
        for name in evaluatedFields { stripped.headerFields[name] = nil }
        return stripped
    }

    /// Whether the conditions say the client's copy is current for `response`, the response the cache chose
    /// (stored, validated or fetched) with status 2xx, received at `responseTime`: then the answer is
    /// `304 Not Modified`.
    ///
    /// - `If-None-Match: *` matches any such response; a list of entity tags matches when one of them equals the
    ///   response's `ETag` by the weak comparison (RFC 9110 §8.8.3.2, §13.1.2).
    /// - `If-Modified-Since` (only without `If-None-Match`) matches when the response's modification date is not
    ///   after it: its `Last-Modified`, or without one its `Date` (or the time it was received), as RFC 9111
    ///   §4.3.2 asks of a cache. A `Last-Modified` that is not an HTTP date gives no modification date, and the
    ///   condition is ignored (RFC 9110 §13.1.3).
    /// - Preconditions apply to a 2xx response only (RFC 9110 §13.2.1): for any other status this is false.
    public func notModified(_ response: HTTPResponse, responseTime: Date) -> Bool {
        guard (200...299).contains(response.status.code) else { return false }
        let fields = response.headerFields
        if let noneMatch {
            switch noneMatch {
            case .any: return true
            case .tags(let tags):
                guard let etag = fields[.eTag], let stored = EntityTag(etag) else { return false }
                return tags.contains { $0.weaklyMatches(stored) }
            }
        }
        guard let modifiedSince else { return false }
        let modified: Date
        if let lastModified = fields[.lastModified] {
            guard let date = HTTPDate.parse(lastModified) else { return false }
            modified = date
        } else {
            modified = fields[.date].flatMap { HTTPDate.parse($0) } ?? responseTime
        }
        return modified <= modifiedSince
    }

    /// The header fields of a `304 Not Modified` made from `fields`, those of the response a `200` would have
    /// carried (RFC 9110 §15.4.5, RFC 9111 §4.3.2): `Cache-Control`, `Content-Location`, `Date`, `ETag`, `Expires`
    /// and `Vary`; `Last-Modified` when there is no `ETag` (metadata that guides the client's cache update); and
    /// `Age` and `Cache-Status`, which say where the answer came from. No representation metadata else, and no
    /// `Content-Length`: a 304 has no content.
    public static func notModifiedFields(from fields: HTTPFields) -> HTTPFields {
        let hasETag = fields[.eTag] != nil
        var kept = HTTPFields()
        for field in fields where notModifiedFieldNames.contains(field.name) || (!hasETag && field.name == .lastModified) {
            kept.append(field)
        }
        return kept
    }

    /// The fields ``notModifiedFields(from:)`` keeps whatever else the response has.
    public static let notModifiedFieldNames: Set<HTTPField.Name> = [
        .cacheControl, .contentLocation, .date, .eTag, .expires, .vary, .age, .cacheStatus,
    ]
}

/// The value of `If-None-Match` (RFC 9110 §13.1.2): `*`, or a list of entity tags.
public enum EntityTagCondition: Sendable, Hashable {
    /// `*`: any current representation.
    case any
    /// The listed entity tags; those that are not entity tags are left out (they match nothing).
    case tags([EntityTag])

    /// Reads the field lines of `If-None-Match`. `*` counts only as the field's whole value.
    public init(_ values: [String]) {
        var tags: [EntityTag] = []
        for value in values {
            let trimmed = value.trimmingOWS()
            if trimmed == "*" && values.count == 1 {
                self = .any
                return
            }
            tags.append(contentsOf: EntityTag.list(trimmed))
        }
        self = .tags(tags)
    }
}

/// An entity tag (RFC 9110 §8.8.3): `"opaque"` or `W/"opaque"`.
public struct EntityTag: Sendable, Hashable {
    /// Whether it is weak (`W/`).
    public let isWeak: Bool
    /// The opaque tag, quotes included.
    public let opaqueTag: String

    /// Reads one entity tag; nil when `text` (whitespace around it aside) is not one.
    public init?(_ text: some StringProtocol) {
        var rest = Substring(text).trimmingOWS()
        isWeak = rest.hasPrefix("W/")
        if isWeak { rest = rest.dropFirst(2) }
        guard let (tag, after) = Self.opaque(rest), after.isEmpty else { return nil }
        opaqueTag = String(tag)
    }

    private init(isWeak: Bool, opaqueTag: String) {
        self.isWeak = isWeak
        self.opaqueTag = opaqueTag
    }

    /// Whether the two tags match by the weak comparison (RFC 9110 §8.8.3.2): their opaque tags are equal, weak
    /// or not.
    public func weaklyMatches(_ other: EntityTag) -> Bool { opaqueTag == other.opaqueTag }

    /// Whether the two tags match by the strong comparison (RFC 9110 §8.8.3.2): neither is weak and their opaque
    /// tags are equal.
    public func stronglyMatches(_ other: EntityTag) -> Bool { !isWeak && !other.isWeak && opaqueTag == other.opaqueTag }

    /// The entity tags of a comma-separated list; members that are not entity tags are skipped (up to the next
    /// comma outside quotes). Commas may appear inside an opaque tag.
    public static func list(_ text: some StringProtocol) -> [EntityTag] {
        var tags: [EntityTag] = []
        var rest = Substring(text)
        while !rest.isEmpty {
            rest = rest.drop { $0 == " " || $0 == "\t" || $0 == "," }
            if rest.isEmpty { break }
            var member = rest
            let weak = member.hasPrefix("W/")
            if weak { member = member.dropFirst(2) }
            if let (tag, after) = opaque(member) {
                let next = after.drop { $0 == " " || $0 == "\t" }
                if next.isEmpty || next.first == "," {
                    tags.append(EntityTag(isWeak: weak, opaqueTag: String(tag)))
                    rest = next
                    continue
                }
            }
            // Not an entity tag: skip to the next comma.
            guard let comma = rest.firstIndex(of: ",") else { break }
            rest = rest[rest.index(after: comma)...]
        }
        return tags
    }

    /// The opaque tag at the start of `text` (`"` etagc* `"`, etagc being %x21 / %x23-7E / obs-text) and what
    /// follows it.
    private static func opaque(_ text: Substring) -> (tag: Substring, rest: Substring)? {
        guard text.first == "\"" else { return nil }
        let bytes = text.utf8
        var index = bytes.index(after: bytes.startIndex)
        while index < bytes.endIndex {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let end = bytes.index(after: index)
                return (text[text.startIndex..<end], text[end...])
            }
            guard byte == 0x21 || (0x23...0x7E).contains(byte) || byte >= 0x80 else { return nil }
            index = bytes.index(after: index)
        }
        return nil
    }
}
