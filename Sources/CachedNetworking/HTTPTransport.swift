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
/// own) and must not decode content codings (the stored body must match its `Content-Encoding`).
/// ``AsyncHTTPClientTransport`` and ``URLSessionTransport`` are provided; tests use
/// `CachedNetworkingTesting`'s `FakeHTTPTransport`.
public protocol HTTPTransport: Sendable {
    /// Sends `request` with `body` and returns the complete response.
    /// - Throws: Any error when the origin cannot be reached or the exchange fails; ``CachedNetworking``
    ///   wraps it as ``CachedNetworkingError/Kind/transport``.
    func send(_ request: HTTPRequest, body: ByteBuffer?) async throws -> HTTPTransportResponse

    /// Releases what the transport holds (connections, an HTTP client it made). ``CachedNetworking/shutdown()``
    /// calls it only for a transport the cache made itself.
    func shutdown() async throws
}

extension HTTPTransport {
    /// Nothing to release.
    public func shutdown() async throws {}
}
