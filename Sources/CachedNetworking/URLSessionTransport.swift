#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
public import Foundation
public import HTTPTypes
import HTTPTypesFoundation
public import NIOCore

/// An ``HTTPTransport`` over Foundation's `URLSession`, with its own cache disabled.
///
/// The session is ephemeral, has no `URLCache` and loads with `.reloadIgnoringLocalCacheData`, so that this SDK
/// is the only cache. Note that `URLSession` follows redirects and may decode content codings; prefer
/// `AsyncHTTPClientTransport` (the `CachedNetworkingAsyncHTTPClient` product) on servers.
public final class URLSessionTransport: HTTPTransport {
    private let session: URLSession

    /// A transport with a new ephemeral session.
    /// - Parameter timeout: The request timeout interval.
    public init(timeout: TimeInterval = 30) {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.timeoutIntervalForRequest = timeout
        self.session = URLSession(configuration: configuration)
    }

    deinit { session.invalidateAndCancel() }

    /// Cancels the session's tasks and invalidates it; the transport must not be used afterwards.
    public func shutdown() async throws { session.invalidateAndCancel() }

    /// Sends `request` through the session.
    public func send(_ request: HTTPRequest, body: ByteBuffer?) async throws -> HTTPTransportResponse {
        guard var urlRequest = URLRequest(httpRequest: request) else {
            throw CachedNetworkingError(.invalidRequest, "request cannot be converted to URLRequest")
        }
        urlRequest.cachePolicy = .reloadIgnoringLocalCacheData
        if let body { urlRequest.httpBody = Data(body.readableBytesView) }
        let (data, response) = try await session.data(for: urlRequest)
        guard let httpResponse = (response as? HTTPURLResponse)?.httpResponse else {
            throw CachedNetworkingError(.transport, "not an HTTP response")
        }
        return HTTPTransportResponse(response: httpResponse, body: ByteBuffer(bytes: data))
    }
}
