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
///
/// A timeout, a host not found, a failed or lost connection and an invalid response are thrown as
/// ``HTTPTransportError``s, with the `URLError` as their ``HTTPTransportError/underlying`` error.
public final class URLSessionTransport: HTTPTransport {
    private let session: URLSession
    private let timeout: TimeInterval

    /// A transport with a new ephemeral session.
    /// - Parameter timeout: Deadline in seconds for a whole exchange, response body included (and so also the
    ///   longest the session waits for data). Past it the exchange is cancelled and
    ///   ``HTTPTransportError/Kind/timeout`` thrown.
    public init(timeout: TimeInterval = 30) {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        // The deadline is kept in `send`. The session's own timeouts are a backstop, in whole seconds:
        // swift-corelibs-foundation truncates them to whole seconds (so that 0.3 would time out at once).
        configuration.timeoutIntervalForRequest = max(1, timeout.rounded(.up))
        configuration.timeoutIntervalForResource = max(1, timeout.rounded(.up))
        self.session = URLSession(configuration: configuration)
        self.timeout = timeout
    }

    deinit { session.invalidateAndCancel() }

    /// Cancels the session's tasks and invalidates it; the transport must not be used afterwards.
    public func shutdown() async throws { session.invalidateAndCancel() }

    /// Sends `request` through the session, all of the exchange within the timeout.
    /// - Throws: ``HTTPTransportError`` for a timeout, a host not found, a failed or lost connection or an invalid
    ///   response; otherwise the session's error.
    public func send(_ request: HTTPRequest, body: ByteBuffer?) async throws -> HTTPTransportResponse {
        guard var urlRequest = URLRequest(httpRequest: request) else {
            throw CachedNetworkingError(.invalidRequest, "request cannot be converted to URLRequest")
        }
        urlRequest.cachePolicy = .reloadIgnoringLocalCacheData
        if let body { urlRequest.httpBody = Data(body.readableBytesView) }
        let origin = "\(request.scheme ?? "http")://\(request.authority ?? "")"
        let timeout = Duration.milliseconds(Int64((self.timeout * 1_000).rounded()))
        let session = self.session
        let prepared = urlRequest
        let (data, response): (Data, URLResponse)
        do {
            (data, response) = try await withExchangeDeadline(
                .now + timeout, timedOut: { HTTPTransportError.timedOut(origin, after: timeout) }
            ) {
                try await session.data(for: prepared)
            }
        } catch let error as URLError {
            throw Self.classify(error, origin: origin, timeout: timeout)
        }
        guard let httpResponse = (response as? HTTPURLResponse)?.httpResponse else {
            throw CachedNetworkingError(.transport, "not an HTTP response")
        }
        return HTTPTransportResponse(response: httpResponse, body: ByteBuffer(bytes: data))
    }

    /// `error` as an ``HTTPTransportError`` when it is one of the failures that type names, else as it is.
    static func classify(_ error: URLError, origin: String, timeout: Duration) -> any Error {
        switch error.code {
        case .timedOut:
            HTTPTransportError.timedOut(origin, after: timeout, underlying: error)
        case .cannotFindHost, .dnsLookupFailed:
            HTTPTransportError(.hostNotFound, "could not resolve the host of \(origin)", underlying: error)
        case .cannotConnectToHost, .notConnectedToInternet:
            HTTPTransportError(.connectionFailed, "could not connect to \(origin)", underlying: error)
        case .networkConnectionLost:
            HTTPTransportError(.connectionLost, "the connection to \(origin) ended before the response was complete", underlying: error)
        case .badServerResponse:
            HTTPTransportError(.invalidResponse, "\(origin) sent an invalid HTTP response", underlying: error)
        default:
            error
        }
    }
}
