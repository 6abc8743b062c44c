public import HTTPTypes

extension HTTPField.Name {
    /// `Cache-Status` (RFC 9211).
    public static var cacheStatus: Self { cacheStatusName }

    /// Made once: a name's initializer validates and lowercases it on every call.
    private static let cacheStatusName = HTTPField.Name("Cache-Status")!
}

/// One cache's member of a `Cache-Status` header field (RFC 9211): how this cache handled the request.
///
/// ```swift
/// var status = CacheStatus(cacheName: "cached")
/// status.hit = true
/// status.timeToLive = 42
/// status.headerValue   // "cached; hit; ttl=42"
/// ```
public struct CacheStatus: Sendable, Hashable, CustomStringConvertible {
    /// Why the request went forward to the next hop (the `fwd` parameter).
    public struct ForwardReason: Sendable, Hashable, CustomStringConvertible {
        /// The parameter's token, for example `uri-miss`.
        public let token: String
        private init(_ token: String) { self.token = token }

        /// The cache was configured not to handle this request.
        public static let bypass = ForwardReason("bypass")
        /// The request method's responses are not stored.
        public static let method = ForwardReason("method")
        /// Nothing was stored for the target URI.
        public static let uriMiss = ForwardReason("uri-miss")
        /// Responses were stored for the URI but none matched the request's `Vary`'d fields.
        public static let varyMiss = ForwardReason("vary-miss")
        /// No response could be used, for an unspecified reason.
        public static let miss = ForwardReason("miss")
        /// A stored response could have been used but the request (its directives or policy) did not allow it.
        public static let request = ForwardReason("request")
        /// A stored response was stale and had to be validated.
        public static let stale = ForwardReason("stale")
        /// Only part of the response was stored.
        public static let partial = ForwardReason("partial")

        public var description: String { token }
    }

    /// The cache's name, the member's first item.
    public var cacheName: String
    /// `hit`: answered from storage without contacting the next hop.
    public var hit: Bool = false
    /// `fwd`: why the request went forward.
    public var forward: ForwardReason?
    /// `fwd-status`: the status code the next hop answered.
    public var forwardStatus: Int?
    /// `ttl`: seconds of freshness the response has left in this cache; negative when served stale.
    public var timeToLive: Int?
    /// `stored`: the response was stored.
    public var stored: Bool = false
    /// `collapsed`: the request was combined with another one for the same response.
    public var collapsed: Bool = false
    /// `key`: the cache key, for debugging.
    public var key: String?
    /// `detail`: implementation-specific detail.
    public var detail: String?

    /// A member for the cache named `cacheName` with no parameters.
    public init(cacheName: String) {
        self.cacheName = cacheName
    }

    /// The member as it appears in the field (`cached; fwd=uri-miss; stored`).
    public var headerValue: String {
        var text = Self.item(cacheName)
        if hit { text += "; hit" }
        if let forward { text += "; fwd=\(forward.token)" }
        if let forwardStatus { text += "; fwd-status=\(forwardStatus)" }
        if let timeToLive { text += "; ttl=\(timeToLive)" }
        if stored { text += "; stored" }
        if collapsed { text += "; collapsed" }
        if let key { text += "; key=\(Self.quoted(key))" }
        if let detail { text += "; detail=\(Self.item(detail))" }
        return text
    }

    public var description: String { headerValue }

    /// `fields` with this member appended to `Cache-Status` (caches closer to the user come last).
    public func appended(to fields: HTTPFields) -> HTTPFields {
        var result = fields
        append(to: &result)
        return result
    }

    /// Appends this member to the `Cache-Status` of `fields` in place (see ``appended(to:)``).
    public func append(to fields: inout HTTPFields) {
        if let existing = fields[.cacheStatus], !existing.isEmpty {
            fields[.cacheStatus] = existing + ", " + headerValue
        } else {
            fields[.cacheStatus] = headerValue
        }
    }

    /// A Structured Fields token when `text` is one, else a quoted string.
    private static func item(_ text: String) -> String {
        isToken(text) ? text : quoted(text)
    }

    private static func isToken(_ text: String) -> Bool {
        // sf-token = ( ALPHA / "*" ) *( tchar / ":" / "/" ), all ASCII: checked byte by byte.
        guard let first = text.utf8.first, isAlpha(first) || first == UInt8(ascii: "*") else { return false }
        return text.utf8.allSatisfy { byte in
            isAlpha(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || tokenPunctuation.contains(byte)
        }
    }

    private static func isAlpha(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte | 0x20)
    }

    private static let tokenPunctuation: [UInt8] = Array("!#$%&'*+-.^_`|~:/".utf8)

    private static func quoted(_ text: String) -> String {
        var result = "\""
        for scalar in text.unicodeScalars where scalar.value >= 0x20 && scalar.value < 0x7F {
            if scalar == "\"" || scalar == "\\" { result.append("\\") }
            result.unicodeScalars.append(scalar)
        }
        return result + "\""
    }
}
