public import HTTPTypes
public import NIOCore

/// A response answered by ``CachedNetworking``, with where it came from.
public struct CachedResponse: Sendable {
    /// Where a response came from.
    ///
    /// A struct over a private enum so that sources can be added without breaking callers.
    public struct Source: Sendable, Hashable, CustomStringConvertible {
        enum Base: Sendable, Hashable { case network, cache, revalidated, stale, coalesced }
        let base: Base

        /// Fetched from the origin by this request.
        public static let network = Source(base: .network)
        /// A fresh stored response (or one the policy accepted as it was).
        public static let cache = Source(base: .cache)
        /// A stored response the origin confirmed with `304 Not Modified`.
        public static let revalidated = Source(base: .revalidated)
        /// A stale stored response: allowed by `max-stale`, `stale-while-revalidate`, `stale-if-error` or the
        /// policy.
        public static let stale = Source(base: .stale)
        /// The result of another request's fetch: an identical request in this process was already fetching,
        /// or another process held the fetch lease and stored the response.
        public static let coalesced = Source(base: .coalesced)

        /// Whether the body came from storage (`cache`, `revalidated`, `stale`).
        public var isFromCache: Bool { base == .cache || base == .revalidated || base == .stale }

        public var description: String {
            switch base {
            case .network: "network"
            case .cache: "cache"
            case .revalidated: "revalidated"
            case .stale: "stale"
            case .coalesced: "coalesced"
            }
        }
    }

    /// Identifies the stored entry a response's body belongs to: equal identities mean the same body bytes.
    public struct EntryIdentity: Sendable, Hashable {
        /// The entry's store key.
        public let key: String
        /// The entry's strong validator (`ETag`), or the time its body was stored.
        public let version: String
    }

    /// Everything but the body. Answers that carry the same status, fields, source and `Cache-Status` member
    /// share one (the hits on an entry within one second of its age), so that making, copying and dropping an
    /// answer retains and releases two references instead of every string and buffer in it. Copy-on-write: a
    /// setter changes the head in place only while no other answer holds it.
    final class Head: @unchecked Sendable {
        var response: HTTPResponse
        var source: Source
        var cacheStatus: CacheStatus
        var entry: EntryIdentity?

        init(response: HTTPResponse, source: Source, cacheStatus: CacheStatus, entry: EntryIdentity?) {
            self.response = response
            self.source = source
            self.cacheStatus = cacheStatus
            self.entry = entry
        }

        func copy() -> Head { Head(response: response, source: source, cacheStatus: cacheStatus, entry: entry) }
    }

    private(set) var head: Head

    /// The content (empty for HEAD and for statuses without content).
    public var body: ByteBuffer

    init(head: Head, body: ByteBuffer) {
        self.head = head
        self.body = body
    }

    init(response: HTTPResponse, body: ByteBuffer, source: Source, cacheStatus: CacheStatus, entry: EntryIdentity?) {
        self.init(head: Head(response: response, source: source, cacheStatus: cacheStatus, entry: entry), body: body)
    }

    private mutating func uniqueHead() -> Head {
        if !isKnownUniquelyReferenced(&head) { head = head.copy() }
        return head
    }

    /// The status and header fields (including `Age` when served from storage, and `Cache-Status`).
    public var response: HTTPResponse {
        get { head.response }
        _modify { yield &uniqueHead().response }
        set { uniqueHead().response = newValue }
    }

    /// Where the response came from.
    public var source: Source {
        get { head.source }
        set { uniqueHead().source = newValue }
    }

    /// This cache's `Cache-Status` member (RFC 9211), also appended to the `Cache-Status` header field.
    public var cacheStatus: CacheStatus {
        get { head.cacheStatus }
        _modify { yield &uniqueHead().cacheStatus }
        set { uniqueHead().cacheStatus = newValue }
    }

    /// The stored entry this body belongs to, when it was read from or written to the store.
    public var entry: EntryIdentity? {
        get { head.entry }
        set { uniqueHead().entry = newValue }
    }

    /// The status.
    public var status: HTTPResponse.Status { response.status }
    /// The header fields.
    public var headerFields: HTTPFields { response.headerFields }
}
