public import CachedNetworking
public import AsyncHTTPClient
public import HTTPTypes
public import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// The default ``HTTPTransport``: AsyncHTTPClient, with redirects not followed and content not decoded.
///
/// The transport either owns its `HTTPClient` (``init(timeout:maximumBodySize:)``) or uses one the caller owns
/// (``init(client:timeout:maximumBodySize:)``), which must be configured not to follow redirects and not to
/// decompress. An owned client is shut down by ``shutdown()``, or, when the transport is released without it,
/// in the background as the transport goes: dropping a transport is never fatal.
public final class AsyncHTTPClientTransport: HTTPTransport {
    /// The client configuration the owning initializer uses: no redirects, no decompression.
    public static var clientConfiguration: HTTPClient.Configuration {
        var configuration = HTTPClient.Configuration()
        configuration.redirectConfiguration = .disallow
        configuration.decompression = .disabled
        return configuration
    }

    private let client: HTTPClient
    private let ownsClient: Bool
    /// Whether ``shutdown()`` has shut the owned client down (or begun to).
    private let shutDown = Atomic(false)
    private let timeout: Duration
    private let maximumBodySize: Int

    /// A transport with its own `HTTPClient` on NIO's shared event loop group.
    /// - Parameters:
    ///   - timeout: Deadline for a whole exchange, response body included.
    ///   - maximumBodySize: Larger response bodies fail the request.
    public init(timeout: Duration = .seconds(30), maximumBodySize: Int = 64 << 20) {
        self.client = HTTPClient(
            eventLoopGroup: MultiThreadedEventLoopGroup.singleton,
            configuration: Self.clientConfiguration
        )
        self.ownsClient = true
        self.timeout = timeout
        self.maximumBodySize = maximumBodySize
    }

    /// A transport over `client`, which the caller keeps and shuts down.
    public init(client: HTTPClient, timeout: Duration = .seconds(30), maximumBodySize: Int = 64 << 20) {
        self.client = client
        self.ownsClient = false
        self.timeout = timeout
        self.maximumBodySize = maximumBodySize
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

    /// Sends `request` and collects the response.
    public func send(_ request: HTTPRequest, body: ByteBuffer?) async throws -> HTTPTransportResponse {
        guard let scheme = request.scheme, let authority = request.authority else {
            throw CachedNetworkingError(.invalidRequest, "request has no scheme or authority")
        }
        var outgoing = HTTPClientRequest(url: "\(scheme)://\(authority)\(request.path ?? "/")")
        outgoing.method = HTTPMethod(rawValue: request.method.rawValue)
        for field in request.headerFields {
            outgoing.headers.add(name: field.name.rawName, value: field.value)
        }
        if let body { outgoing.body = .bytes(body) }
        let deadline = NIODeadline.now() + TimeAmount(timeout)
        let response = try await client.execute(outgoing, deadline: deadline)
        var fields = HTTPFields()
        fields.reserveCapacity(response.headers.count)
        for (name, value) in response.headers {
            guard let fieldName = HTTPField.Name(name) else { continue }
            fields.append(HTTPField(name: fieldName, value: value))
        }
        let collected = try await response.body.collect(upTo: maximumBodySize)
        let status = HTTPResponse.Status(code: Int(response.status.code), reasonPhrase: response.status.reasonPhrase)
        return HTTPTransportResponse(response: HTTPResponse(status: status, headerFields: fields), body: collected)
    }
}
