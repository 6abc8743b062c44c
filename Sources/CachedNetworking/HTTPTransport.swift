public import HTTPTypes
public import NIOCore

/// A complete response from an ``HTTPTransport``.
public struct HTTPTransportResponse: Sendable {
    /// Status and header fields as received.
    public var response: HTTPResponse
    /// The whole content.
    public var body: ByteBuffer

    /// A response with `body`.
    public init(response: HTTPResponse, body: ByteBuffer = ByteBuffer()) {
        self.response = response
        self.body = body
    }
}

/// Sends requests to origins for ``CachedNetworking``.
///
/// A transport must not cache, must not follow redirects (the cache stores redirects as responses of their
/// own) and must not decode content codings (the stored body must match its `Content-Encoding`). Its timeout,
/// if it has one, should bound the whole exchange, response body included.
/// ``AsyncHTTPClientTransport`` and ``URLSessionTransport`` are provided; tests use
/// `CachedNetworkingTesting`'s `FakeHTTPTransport`.
public protocol HTTPTransport: Sendable {
    /// Sends `request` with `body` and returns the complete response.
    /// - Throws: Any error when the origin cannot be reached or the exchange fails, preferably an
    ///   ``HTTPTransportError`` for the failures it names (a timeout, a refused connection…), so that callers can
    ///   tell them apart; ``CachedNetworking`` wraps it as ``CachedNetworkingError/Kind/transport``.
    func send(_ request: HTTPRequest, body: ByteBuffer?) async throws -> HTTPTransportResponse

    /// Releases what the transport holds (connections, an HTTP client it made). ``CachedNetworking/shutdown()``
    /// calls it only for a transport the cache made itself.
    func shutdown() async throws
}

extension HTTPTransport {
    /// Nothing to release.
    public func shutdown() async throws {}
}

/// Why an exchange with an origin failed, for the failures a caller may want to tell apart.
///
/// ``AsyncHTTPClientTransport`` and ``URLSessionTransport`` throw it for the kinds below, with their HTTP
/// client's own error as ``underlying``; other failures come as the client's error itself. ``CachedNetworking``
/// passes it on as the ``CachedNetworkingError/underlying`` error of a ``CachedNetworkingError/Kind/transport``
/// error:
///
/// ```swift
/// func timedOut(_ error: CachedNetworkingError) -> Bool {
///     (error.underlying as? HTTPTransportError)?.kind == .timeout
/// }
/// ```
///
/// A struct over a private enum, so that new kinds are not a breaking change.
public struct HTTPTransportError: Error, Sendable, CustomStringConvertible {
    /// What went wrong.
    public struct Kind: Sendable, Hashable, CustomStringConvertible {
        enum Base: Sendable, Hashable {
            case timeout, hostNotFound, connectionFailed, connectionLost, invalidResponse, bodyTooLarge
        }
        let base: Base

        /// The exchange did not complete within the transport's timeout, which covers the whole exchange:
        /// connecting, sending the request, and receiving the response head and body.
        public static let timeout = Kind(base: .timeout)
        /// The origin's host name could not be resolved.
        public static let hostNotFound = Kind(base: .hostNotFound)
        /// No connection to the origin could be made (refused, unreachable).
        public static let connectionFailed = Kind(base: .connectionFailed)
        /// The connection ended before the response was complete.
        public static let connectionLost = Kind(base: .connectionLost)
        /// What the origin sent is not a valid HTTP response.
        public static let invalidResponse = Kind(base: .invalidResponse)
        /// The response body is larger than the transport's maximum.
        public static let bodyTooLarge = Kind(base: .bodyTooLarge)

        public var description: String {
            switch base {
            case .timeout: "timeout"
            case .hostNotFound: "host not found"
            case .connectionFailed: "connection failed"
            case .connectionLost: "connection lost"
            case .invalidResponse: "invalid response"
            case .bodyTooLarge: "body too large"
            }
        }
    }

    /// The kind of failure.
    public let kind: Kind
    /// Details for people: which origin, what happened.
    public let message: String
    /// The HTTP client's own error, if any.
    public let underlying: (any Error & Sendable)?

    /// An error of `kind` with `message` and an optional cause.
    public init(_ kind: Kind, _ message: String, underlying: (any Error & Sendable)? = nil) {
        self.kind = kind
        self.message = message
        self.underlying = underlying
    }

    public var description: String { "\(kind): \(message)" }
}

extension HTTPTransportError {
    /// The error of an exchange with `origin` that did not complete within `timeout`.
    package static func timedOut(_ origin: String, after timeout: Duration, underlying: (any Error & Sendable)? = nil) -> Self {
        HTTPTransportError(.timeout, "no complete response from \(origin) within \(timeout)", underlying: underlying)
    }
}

/// Runs `exchange`, and gives up on it at `deadline`: the exchange is cancelled, and once it has ended
/// `timedOut()` is thrown. Cancelling the calling task cancels the exchange too (which then throws what it
/// throws on cancellation).
///
/// For transports whose HTTP client bounds only part of an exchange (a response head, an idle period), so that
/// the body is bounded too.
package func withExchangeDeadline<Value: Sendable>(
    _ deadline: ContinuousClock.Instant,
    timedOut: @escaping @Sendable () -> any Error,
    _ exchange: @escaping @Sendable () async throws -> Value
) async throws -> Value {
    try await withThrowingTaskGroup(of: Value?.self) { group in
        group.addTask { try await exchange() }
        group.addTask {
            try await Task.sleep(until: deadline, clock: .continuous)
            return nil
        }
        // The first to end decides; the other is cancelled, and the group waits for it to end.
        defer { group.cancelAll() }
        guard let first = try await group.next(), let value = first else { throw timedOut() }
        return value
    }
}
