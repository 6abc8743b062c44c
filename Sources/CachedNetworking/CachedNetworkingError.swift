/// Why ``CachedNetworking`` could not answer a request.
///
/// A struct over a private enum, so that new cases are not a breaking change; compare kinds with the static
/// members (`error.kind == .transport`). Store failures never surface from
/// ``CachedNetworking/run(_:body:policy:transport:logger:)`` (the cache fails open); they surface only from explicit cache
/// operations such as ``CachedNetworking/invalidateAll()``.
public struct CachedNetworkingError: Error, Sendable, CustomStringConvertible {
    /// What went wrong, broadly.
    public struct Kind: Sendable, Hashable, CustomStringConvertible {
        enum Base: Sendable, Hashable { case invalidRequest, transport, store, cancelled, shutDown }
        let base: Base

        /// The request cannot be sent: it lacks a scheme or authority, or cannot be converted.
        public static let invalidRequest = Kind(base: .invalidRequest)
        /// The origin could not be reached or the exchange failed. The transport's error is the
        /// ``CachedNetworkingError/underlying`` error: an ``HTTPTransportError`` for the failures it names (a
        /// timeout, a refused connection…).
        public static let transport = Kind(base: .transport)
        /// The cache store failed during an explicit cache operation (invalidation).
        public static let store = Kind(base: .store)
        /// The calling task was cancelled.
        public static let cancelled = Kind(base: .cancelled)
        /// The cache was shut down (``CachedNetworking/shutdown()``) before the call.
        public static let shutDown = Kind(base: .shutDown)

        public var description: String {
            switch base {
            case .invalidRequest: "invalid request"
            case .transport: "transport"
            case .store: "store"
            case .cancelled: "cancelled"
            case .shutDown: "shut down"
            }
        }

        /// The kind as one token (`invalid_request`, `shut_down`), for span attributes.
        var token: String {
            switch base {
            case .invalidRequest: "invalid_request"
            case .transport: "transport"
            case .store: "store"
            case .cancelled: "cancelled"
            case .shutDown: "shut_down"
            }
        }
    }

    /// The broad kind of failure.
    public let kind: Kind
    /// Details for logs.
    public let message: String
    /// The error that caused this one (the transport's, the store's), if any.
    public let underlying: (any Error & Sendable)?

    /// An error of `kind` with `message` and an optional cause.
    public init(_ kind: Kind, _ message: String, underlying: (any Error & Sendable)? = nil) {
        self.kind = kind
        self.message = message
        self.underlying = underlying
    }

    public var description: String { "\(kind): \(message)" }
}
