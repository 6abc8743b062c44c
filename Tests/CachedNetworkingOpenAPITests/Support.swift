import CachedNetworking
import CachedNetworkingOpenAPI
import CachedNetworkingTesting
import CachedOriginSupport
import Foundation
import HTTPTypes
import NIOCore
import OpenAPIAsyncHTTPClient
import OpenAPIRuntime
import Synchronization

/// A generated client with a ``CachingMiddleware`` over a cache in memory, and a local origin.
struct ClientSetup {
    let origin: OriginServer
    let clock: ManualCacheClock
    let cache: CachedNetworking
    let client: Client

    /// A client of `origin` at `basePath`, with `before`, the caching middleware, then `after`.
    static func make(
        basePath: String = "/v1",
        before: [any ClientMiddleware] = [],
        after: [any ClientMiddleware] = [],
        policy: @escaping @Sendable (String) -> CachePolicy = { _ in .useProtocolCachePolicy },
        configure: (inout CachedNetworking.Configuration) -> Void = { _ in }
    ) async throws -> ClientSetup {
        let origin = try await OriginServer.start()
        let clock = ManualCacheClock()
        var configuration = CachedNetworking.Configuration()
        configuration.clock = clock
        configure(&configuration)
        // The cache's own transport answers nothing: every origin request must go through the client.
        let cache = CachedNetworking(
            store: InMemoryCacheStore(clock: clock), transport: FakeHTTPTransport(), configuration: configuration)
        let setup = ClientSetup(
            origin: origin, clock: clock, cache: cache, client: Client(origin: origin, basePath: basePath))
        return setup.with(basePath: basePath, before: before, after: after, policy: policy)
    }

    /// This setup with another client: at `basePath`, with `before`, the caching middleware, then `after`.
    func with(
        basePath: String = "/v1",
        before: [any ClientMiddleware] = [],
        after: [any ClientMiddleware] = [],
        policy: @escaping @Sendable (String) -> CachePolicy = { _ in .useProtocolCachePolicy }
    ) -> ClientSetup {
        let middlewares = before + [CachingMiddleware(cache: cache, policy: policy)] + after
        return ClientSetup(
            origin: origin, clock: clock, cache: cache,
            client: Client(origin: origin, basePath: basePath, middlewares: middlewares))
    }

    /// Answers GET and POST for `path` with `reply(method)`, and JSON's content type.
    func serve(_ path: String, _ reply: @escaping @Sendable (_ method: String) -> OriginServer.Reply) {
        origin.route(path) { received in
            var answer = reply(received.method)
            answer.headers.append(("Content-Type", "application/json"))
            return answer
        }
    }

    /// The requests the origin received for `path` with `method`.
    func received(_ path: String, method: String = "GET") -> [OriginServer.Received] {
        origin.received(path).filter { $0.method == method }
    }

    func stop() async { await origin.stop() }
}

extension Client {
    /// A client of `origin` at `basePath` over swift-openapi-async-http-client's transport, which gives up after
    /// `timeout` (AsyncHTTPClient retries a refused connection until then).
    init(
        origin: OriginServer, basePath: String, middlewares: [any ClientMiddleware] = [],
        timeout: TimeAmount = .seconds(10)
    ) {
        self.init(
            serverURL: URL(string: origin.url(basePath))!,
            transport: AsyncHTTPClientTransport(configuration: .init(timeout: timeout)), middlewares: middlewares)
    }
}

/// A middleware that counts the requests that reach it and adds a header field to them.
struct CountingMiddleware: ClientMiddleware {
    private let counter = Counter()
    let field: (HTTPField.Name, String)?

    init(adding field: (HTTPField.Name, String)? = nil) {
        self.field = field
    }

    var count: Int { counter.value }

    func intercept(
        _ request: HTTPRequest,
        body: HTTPBody?,
        baseURL: URL,
        operationID: String,
        next: @Sendable (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPResponse, HTTPBody?) {
        counter.increment()
        var request = request
        if let (name, value) = field { request.headerFields[name] = value }
        return try await next(request, body, baseURL)
    }

    private final class Counter: Sendable {
        private let count = Mutex(0)
        var value: Int { count.withLock { $0 } }
        func increment() { count.withLock { $0 += 1 } }
    }
}

/// A middleware that keeps the last response that came back through it.
struct RecordingMiddleware: ClientMiddleware {
    private let last = Recorded()

    var lastResponse: HTTPResponse? { last.response.withLock { $0 } }

    func intercept(
        _ request: HTTPRequest,
        body: HTTPBody?,
        baseURL: URL,
        operationID: String,
        next: @Sendable (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPResponse, HTTPBody?) {
        let (response, body) = try await next(request, body, baseURL)
        last.response.withLock { $0 = response }
        return (response, body)
    }

    private final class Recorded: Sendable {
        let response = Mutex<HTTPResponse?>(nil)
    }
}

/// The error of ``FailingMiddleware``.
struct OriginUnreachable: Error, Equatable {}

/// A middleware that fails every request with ``OriginUnreachable``.
struct FailingMiddleware: ClientMiddleware {
    func intercept(
        _ request: HTTPRequest,
        body: HTTPBody?,
        baseURL: URL,
        operationID: String,
        next: @Sendable (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPResponse, HTTPBody?) {
        throw OriginUnreachable()
    }
}

/// The bytes of `body`.
func text(_ body: HTTPBody?) async throws -> String {
    guard let body else { return "" }
    return try await String(collecting: body, upTo: 1 << 20)
}
