public import AsyncHTTPClient
public import HTTPTypes
public import NIOCore
import NIOHTTP1
import NIOPosix

/// The default ``HTTPTransport``: AsyncHTTPClient, with redirects not followed and content not decoded.
///
/// The transport either owns its `HTTPClient` (``init(timeout:maximumBodySize:)``: call ``shutdown()`` when
/// done) or uses one the caller owns (``init(client:timeout:maximumBodySize:)``), which must be configured not to
/// follow redirects and not to decompress.
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

    /// Shuts the owned client down (nothing when the client belongs to the caller).
    public func shutdown() async throws {
        if ownsClient { try await client.shutdown() }
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
