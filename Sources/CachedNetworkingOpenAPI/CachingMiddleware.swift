public import CachedNetworking
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import HTTPTypes
public import OpenAPIRuntime

/// Serves the requests of a client made by swift-openapi-generator through a ``CachedNetworking``, so that the
/// client shares its cache.
///
/// ```swift
/// let client = Client(
///     serverURL: URL(string: "https://api.example.com/v1")!,
///     transport: AsyncHTTPClientTransport(),
///     middlewares: [CachingMiddleware(cache: cache)])
/// ```
///
/// Each request is made absolute (the client's server URL and the operation's path and query) and answered by
/// ``CachedNetworking/run(_:body:policy:transport:logger:)``: from storage when the cache holds a response it may use,
/// otherwise from the origin, with RFC 9111's rules for a shared cache. An unsafe request (POST, PUT, DELETE, …)
/// goes to the origin and its success invalidates what is stored for its target. The cache reaches the origin
/// through the rest of the client's middlewares and its transport, not through the cache's own transport.
///
/// Put the middleware after the middlewares that add credentials or other header fields the response depends
/// on, so that the cache sees them (a shared cache does not reuse responses to requests with `Authorization`
/// unless the origin allows it, and never joins the fetches of requests with different credentials); and before
/// the middlewares that concern only the exchange with the origin (retries, logging of origin calls), so that
/// they run only when the origin is asked.
///
/// The answer keeps the origin's status and header fields, plus the cache's `Cache-Status` member, and `Age`
/// when it came from storage (and `Date` when the origin sent none). Request content goes to the origin as it
/// is, never read by the middleware. Response content is read into memory, up to the cache's
/// ``CachedNetworking/Configuration/maximumStoredBodySize``; a larger response, which the cache could not store
/// anyway, is passed on as it streams from the origin, uncached and without a `Cache-Status`. So is the
/// response to a method the cache never stores (see ``CachingRules/cacheableMethods``): only its head goes
/// through the cache, for invalidation. A request whose server URL has no scheme or host cannot be cached and is
/// passed on unchanged.
///
/// Errors thrown by the next step (another middleware, the transport) are rethrown unchanged, unless the cache
/// answers with a stale response instead (`stale-if-error`). Other failures are ``CachedNetworkingError``s.
public struct CachingMiddleware: ClientMiddleware {
    /// The cache that answers the client's requests.
    public let cache: CachedNetworking
    private let policy: @Sendable (_ operationID: String) -> CachePolicy

    /// A middleware that serves requests through `cache`.
    /// - Parameters:
    ///   - cache: The cache; it stays yours to shut down. Its own transport is not used for these requests.
    ///   - policy: How each operation (by its `operationId`) uses the cache; the HTTP caching rules for every
    ///     operation by default.
    public init(
        cache: CachedNetworking,
        policy: @escaping @Sendable (_ operationID: String) -> CachePolicy = { _ in .useProtocolCachePolicy }
    ) {
        self.cache = cache
        self.policy = policy
    }

    /// Answers `request` from the cache, or from the origin through `next`.
    /// - Parameters:
    ///   - request: The operation's request, its path relative to `baseURL`.
    ///   - body: The request content, passed to `next` as it is.
    ///   - baseURL: The client's server URL.
    ///   - operationID: The operation's `operationId`, given to the policy.
    ///   - next: The rest of the client's middlewares and its transport.
    /// - Returns: The response, its content in memory unless it was too large to store.
    /// - Throws: What `next` throws, or a ``CachedNetworkingError`` (the task was cancelled, the cache was shut
    ///   down).
    public func intercept(
        _ request: HTTPRequest,
        body: HTTPBody?,
        baseURL: URL,
        operationID: String,
        next: @Sendable (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPResponse, HTTPBody?) {
        guard let absolute = Self.absoluteRequest(request, baseURL: baseURL) else {
            return try await next(request, body, baseURL)
        }
        let cache = self.cache
        let policy = self.policy(operationID)
        // `next` may be called only during this call: the transport holds it until the call ends, and the cache
        // uses a call's own transport only while the call runs.
        return try await withoutActuallyEscaping(next) { next in
            let origin = NextStepTransport(
                request: request, body: body, baseURL: baseURL, next: next,
                streamsResponse: !cache.configuration.rules.cacheableMethods.contains(request.method),
                maximumBodySize: cache.configuration.maximumStoredBodySize)
            defer { origin.end() }
            let answer: CachedResponse
            do throws(CachedNetworkingError) {
                answer = try await cache.run(absolute, policy: policy, transport: origin)
            } catch {
                if case .tooLarge(let response, let content) = origin.takePassedOn() { return (response, content) }
                if error.underlying is ResponseTooLarge {
                    // Another request's fetch, which this one joined, was too large to store: ask the origin.
                    return try await next(request, body, baseURL)
                }
                if let failure = error.underlying as? NextStepFailure { throw failure.error }
                throw error
            }
            switch origin.takePassedOn() {
            case .streamed(let content):
                // Only the head went through the cache: its answer, with the content as the origin sends it.
                return (answer.response, content)
            case .tooLarge(let response, let content):
                // Too large to store, yet the cache answered (with a stale response, the fetch having failed as
                // far as it knows): the origin's newer response is the better answer.
                return (response, content)
            case nil:
                break
            }
            return (answer.response, request.method == .head ? nil : HTTPBody(answer.body.readableBytesView))
        }
    }

    /// `request` (its path relative to `baseURL`) as an absolute request, the URL built as the
    /// swift-openapi-generator transports build it (the base URL's path, then the request's path and query);
    /// nil when `baseURL` has no scheme or host.
    static func absoluteRequest(_ request: HTTPRequest, baseURL: URL) -> HTTPRequest? {
        guard var components = URLComponents(string: baseURL.absoluteString),
            let relative = URLComponents(string: request.path ?? "")
        else { return nil }
        components.percentEncodedPath += relative.percentEncodedPath
        components.percentEncodedQuery = relative.percentEncodedQuery
        guard let url = components.url, url.scheme != nil, let host = url.host, !host.isEmpty else { return nil }
        return HTTPRequest(method: request.method, url: url, headerFields: request.headerFields)
    }
}
