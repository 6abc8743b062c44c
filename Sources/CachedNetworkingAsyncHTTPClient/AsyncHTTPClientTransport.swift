public import CachedNetworking
public import AsyncHTTPClient
public import HTTPTypes
public import NIOCore
import Glibc
import NIOHTTP1
import NIOPosix
import Synchronization

/// The default ``HTTPTransport``: AsyncHTTPClient, with redirects not followed and content not decoded.
///
/// The transport either owns its `HTTPClient` (``init(timeout:maximumBodySize:)``) or uses one the caller owns
/// (``init(client:timeout:maximumBodySize:)``), which must be configured not to follow redirects and not to
/// decompress. An owned client is shut down by ``shutdown()``, or, when the transport is released without it,
/// in the background as the transport goes: dropping a transport is never fatal.
///
/// Failures to resolve the host, connect, or receive a complete and valid response within the timeout and the
/// maximum body size are thrown as ``HTTPTransportError``s, with AsyncHTTPClient's (or SwiftNIO's) error as
/// their ``HTTPTransportError/underlying`` error.
public final class AsyncHTTPClientTransport: HTTPTransport {
    /// The client configuration the owning initializer uses: no redirects, no decompression.
    public static var clientConfiguration: HTTPClient.Configuration {
        var configuration = HTTPClient.Configuration()
        configuration.redirectConfiguration = .disallow
        configuration.decompression = .disabled
        return configuration
    }

    /// The largest response body a transport collects, and its default maximum: 4 GiB − 1, the most a
    /// `ByteBuffer` holds (AsyncHTTPClient's own limit for the responses it collects).
    public static let largestBodySize = Int(UInt32.max)

    private let client: HTTPClient
    private let ownsClient: Bool
    /// Whether ``shutdown()`` has shut the owned client down (or begun to).
    private let shutDown = Atomic(false)
    private let timeout: Duration
    private let maximumBodySize: Int

    /// A transport with its own `HTTPClient` on NIO's shared event loop group.
    /// - Parameters:
    ///   - timeout: Deadline for a whole exchange: connecting, sending the request, and receiving the response
    ///     head and the whole body. Past it the exchange is abandoned (its connection closed) and
    ///     ``HTTPTransportError/Kind/timeout`` thrown.
    ///   - maximumBodySize: Larger response bodies fail the request with ``HTTPTransportError/Kind/bodyTooLarge``
    ///     (a `Content-Length` above it before any of the body is read). At most ``largestBodySize``, the
    ///     default.
    public init(timeout: Duration = .seconds(30), maximumBodySize: Int = largestBodySize) {
        self.client = HTTPClient(
            eventLoopGroup: MultiThreadedEventLoopGroup.singleton,
            configuration: Self.clientConfiguration
        )
        self.ownsClient = true
        self.timeout = timeout
        self.maximumBodySize = min(maximumBodySize, Self.largestBodySize)
    }

    /// A transport over `client`, which the caller keeps and shuts down.
    /// - Parameters:
    ///   - client: The HTTP client, configured not to follow redirects and not to decompress (see
    ///     ``clientConfiguration``).
    ///   - timeout: Deadline for a whole exchange, response body included, as in ``init(timeout:maximumBodySize:)``.
    ///   - maximumBodySize: The largest response body accepted, as in ``init(timeout:maximumBodySize:)``.
    public init(client: HTTPClient, timeout: Duration = .seconds(30), maximumBodySize: Int = largestBodySize) {
        self.client = client
        self.ownsClient = false
        self.timeout = timeout
        self.maximumBodySize = min(maximumBodySize, Self.largestBodySize)
    }

    deinit {
        // AsyncHTTPClient traps when a client is released without being shut down: start its shutdown instead.
        if ownsClient, !shutDown.load(ordering: .relaxed) { _ = client.shutdown() }
    }

    /// Shuts the owned client down (nothing when the client belongs to the caller). Calling it again does nothing.
    public func shutdown() async throws {
        guard ownsClient, !shutDown.exchange(true, ordering: .relaxed) else { return }
        try await client.shutdown()
    }

    /// Sends `request` and collects the response, all of it within the timeout.
    /// - Throws: ``HTTPTransportError`` for a timeout, a host not found, a failed or lost connection, an invalid
    ///   response or a body over the maximum; otherwise AsyncHTTPClient's error.
    public func send(_ request: HTTPRequest, body: ByteBuffer?) async throws -> HTTPTransportResponse {
        guard let scheme = request.scheme, let authority = request.authority else {
            throw CachedNetworkingError(.invalidRequest, "request has no scheme or authority")
        }
        let origin = "\(scheme)://\(authority)"
        var outgoing = HTTPClientRequest(url: "\(origin)\(request.path ?? "/")")
        outgoing.method = HTTPMethod(rawValue: request.method.rawValue)
        for field in request.headerFields {
            outgoing.headers.add(name: field.name.rawName, value: field.value)
        }
        if let body { outgoing.body = .bytes(body) }
        // One deadline for the whole exchange. AsyncHTTPClient keeps it until the response head (and then fails
        // with the last connection error if it never connected); the body is held to it here.
        let timeout = self.timeout
        let deadline = ContinuousClock.now + timeout
        let clientDeadline = NIODeadline.now() + TimeAmount(timeout)
        let maximumBodySize = self.maximumBodySize
        do {
            let response = try await client.execute(outgoing, deadline: clientDeadline)
            var fields = HTTPFields()
            fields.reserveCapacity(response.headers.count)
            for (name, value) in response.headers {
                guard let fieldName = HTTPField.Name(name) else { continue }
                fields.append(HTTPField(name: fieldName, value: value))
            }
            let status = HTTPResponse.Status(code: Int(response.status.code), reasonPhrase: response.status.reasonPhrase)
            let content = response.body
            let collected = try await withExchangeDeadline(
                deadline, timedOut: { HTTPTransportError.timedOut(origin, after: timeout) }
            ) {
                try await content.collect(upTo: maximumBodySize)
            }
            return HTTPTransportResponse(response: HTTPResponse(status: status, headerFields: fields), body: collected)
        } catch {
            throw Self.classify(error, origin: origin, timeout: timeout, maximumBodySize: maximumBodySize)
        }
    }

    /// `error` as an ``HTTPTransportError`` when it is one of the failures that type names, else as it is.
    static func classify(_ error: any Error, origin: String, timeout: Duration, maximumBodySize: Int) -> any Error {
        switch error {
        case is HTTPTransportError, is CancellationError:
            return error
        case let error as HTTPClientError:
            switch error {
            case .deadlineExceeded, .connectTimeout, .readTimeout, .writeTimeout, .tlsHandshakeTimeout,
                .getConnectionFromPoolTimeout:
                return HTTPTransportError.timedOut(origin, after: timeout, underlying: error)
            case .remoteConnectionClosed:
                return HTTPTransportError(.connectionLost, "\(origin) closed the connection before the response was complete", underlying: error)
            default:
                return error
            }
        case let error as NIOConnectionError:
            if error.connectionErrors.isEmpty, let dnsError = error.dnsAError ?? error.dnsAAAAError {
                return HTTPTransportError(.hostNotFound, "could not resolve \(error.host): \(dnsError)", underlying: error)
            }
            let cause = error.connectionErrors.first.map { reason(of: $0.error) } ?? "no address to connect to"
            return HTTPTransportError(.connectionFailed, "could not connect to \(origin): \(cause)", underlying: error)
        case let error as ChannelError:
            switch error {
            case .connectTimeout:
                return HTTPTransportError.timedOut(origin, after: timeout, underlying: error)
            case .eof, .ioOnClosedChannel, .alreadyClosed, .inputClosed:
                return HTTPTransportError(.connectionLost, "the connection to \(origin) ended before the response was complete", underlying: error)
            default:
                return error
            }
        case let error as IOError where [ECONNREFUSED, ENETUNREACH, EHOSTUNREACH].contains(error.errnoCode):
            return HTTPTransportError(.connectionFailed, "could not connect to \(origin): \(reason(of: error))", underlying: error)
        case let error as IOError where [ECONNRESET, EPIPE].contains(error.errnoCode):
            return HTTPTransportError(.connectionLost, "the connection to \(origin) failed: \(reason(of: error))", underlying: error)
        case HTTPParserError.invalidEOFState:
            return HTTPTransportError(.connectionLost, "\(origin) closed the connection before the response was complete", underlying: error)
        case let error as HTTPParserError:
            return HTTPTransportError(.invalidResponse, "\(origin) sent an invalid HTTP response (\(error))", underlying: error)
        case let error as NIOTooManyBytesError:
            return HTTPTransportError(
                .bodyTooLarge, "the response body from \(origin) is larger than \(maximumBodySize) bytes", underlying: error)
        default:
            return error
        }
    }

    /// A socket error's text (`Connection refused`), or the error's description.
    private static func reason(of error: any Error) -> String {
        guard let error = error as? IOError else { return "\(error)" }
        return String(cString: strerror(error.errnoCode))
    }
}
