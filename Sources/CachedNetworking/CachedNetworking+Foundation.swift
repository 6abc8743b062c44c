#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif
public import Foundation
public import HTTPTypes
import HTTPTypesFoundation
public import Logging
public import NIOCore

extension CachePolicy {
    /// The policy matching Foundation's `URLRequest.CachePolicy` (`reloadIgnoringLocalAndRemoteCacheData` and
    /// `reloadIgnoringCacheData` map to ``reloadIgnoringLocalCacheData``).
    public init(_ policy: URLRequest.CachePolicy) {
        switch policy {
        case .returnCacheDataElseLoad: self = .returnCacheDataElseLoad
        case .returnCacheDataDontLoad: self = .returnCacheDataDontLoad
        case .reloadIgnoringLocalCacheData, .reloadIgnoringLocalAndRemoteCacheData: self = .reloadIgnoringLocalCacheData
        case .reloadRevalidatingCacheData: self = .reloadRevalidatingCacheData
        default: self = .useProtocolCachePolicy
        }
    }
}

extension CachedResponse {
    /// The body as `Data`.
    public var bodyData: Data { Data(body.readableBytesView) }

    /// An `HTTPURLResponse` for Foundation-style callers, built with swift-http-types' conversion.
    /// - Parameter url: The request's URL.
    public func urlResponse(for url: URL) -> HTTPURLResponse? {
        HTTPURLResponse(httpResponse: response, url: url)
    }
}

extension URLRequest {
    /// The request as an `HTTPRequest` (swift-http-types' conversion), or the error of a request that has none.
    var cacheRequest: Result<HTTPRequest, CachedNetworkingError> {
        guard let request = httpRequest else {
            return .failure(CachedNetworkingError(.invalidRequest, "the URLRequest has no absolute HTTP URL"))
        }
        return .success(request)
    }

    /// The body, for the cache.
    var cacheBody: ByteBuffer? { httpBody.map { ByteBuffer(bytes: $0) } }
}

extension CachedNetworking {
    /// Answers a Foundation `URLRequest`: its method, URL, header fields and body are used, and its
    /// `cachePolicy` unless `policy` is given.
    /// - Parameters:
    ///   - urlRequest: The request.
    ///   - policy: How to use the cache for this request; nil for the request's `cachePolicy`.
    ///   - logger: Where the cache's lines about this request go; nil for the cache's logger (see
    ///     ``run(_:body:policy:transport:logger:)``).
    /// - Throws: ``CachedNetworkingError`` as ``run(_:body:policy:transport:logger:)`` does;
    ///   ``CachedNetworkingError/Kind/invalidRequest`` when the request has no absolute HTTP(S) URL.
    public func run(
        _ urlRequest: URLRequest, policy: CachePolicy? = nil, logger: Logger? = nil
    ) async throws(CachedNetworkingError) -> CachedResponse {
        let request = try urlRequest.cacheRequest.get()
        return try await run(
            request, body: urlRequest.cacheBody, policy: policy ?? CachePolicy(urlRequest.cachePolicy), logger: logger)
    }

    /// ``prefetch(_:logger:)`` of a Foundation `URLRequest` (its method, URL and header fields; its `cachePolicy` plays
    /// no part: prefetching always uses the HTTP rules).
    /// - Returns: Where the response came from (`.cache` when nothing had to be fetched).
    /// - Throws: ``CachedNetworkingError`` as ``prefetch(_:logger:)`` does;
    ///   ``CachedNetworkingError/Kind/invalidRequest`` when the request has no absolute HTTP(S) URL.
    @discardableResult
    public func prefetch(_ urlRequest: URLRequest, logger: Logger? = nil) async throws(CachedNetworkingError) -> CachedResponse.Source {
        try await prefetch(try urlRequest.cacheRequest.get(), logger: logger)
    }

    /// ``prefetch(_:maxConcurrency:logger:)`` of Foundation `URLRequest`s: at most `maxConcurrency` at a time, returning
    /// once each is stored or has failed (a request without an absolute HTTP(S) URL fails with
    /// ``CachedNetworkingError/Kind/invalidRequest``).
    /// - Returns: One outcome per request, in the order of `urlRequests`.
    @discardableResult
    public func prefetch(_ urlRequests: [URLRequest], maxConcurrency: Int = 8, logger: Logger? = nil) async -> [PrefetchOutcome] {
        await prefetch(urlRequests.map(\.cacheRequest), maxConcurrency: maxConcurrency, logger: logger)
    }

    /// ``invalidate(_:)`` of a Foundation `URLRequest`'s URL: removes its stored GET and HEAD responses.
    /// - Throws: ``CachedNetworkingError`` of kind ``CachedNetworkingError/Kind/store`` when the store fails;
    ///   ``CachedNetworkingError/Kind/invalidRequest`` when the request has no absolute HTTP(S) URL.
    public func invalidate(_ urlRequest: URLRequest) async throws(CachedNetworkingError) {
        try await invalidate(try urlRequest.cacheRequest.get())
    }

    /// Answers a `URLRequest` through a completion handler shaped like `URLSession`'s, plus whether the body came
    /// from the cache (``CachedResponse/Source/isFromCache``). `logger`: as for
    /// ``run(_:body:policy:transport:logger:)``.
    /// - Returns: The task doing the work; cancel it to cancel the request.
    @discardableResult
    public func run(
        _ urlRequest: URLRequest,
        policy: CachePolicy? = nil,
        logger: Logger? = nil,
        completionHandler: @escaping @Sendable (Data?, URLResponse?, (any Error)?, Bool) -> Void
    ) -> Task<Void, Never> {
        Task {
            do {
                let answer = try await self.run(urlRequest, policy: policy, logger: logger)
                let response = urlRequest.url.flatMap { answer.urlResponse(for: $0) }
                completionHandler(answer.bodyData, response, nil, answer.source.isFromCache)
            } catch {
                completionHandler(nil, nil, error, false)
            }
        }
    }

    /// Answers an `HTTPRequest` through a completion handler shaped like `URLSession`'s, plus whether the body
    /// came from the cache. `logger`: as for ``run(_:body:policy:transport:logger:)``.
    /// - Returns: The task doing the work; cancel it to cancel the request.
    @discardableResult
    public func run(
        _ request: HTTPRequest,
        body: ByteBuffer? = nil,
        policy: CachePolicy = .useProtocolCachePolicy,
        logger: Logger? = nil,
        completionHandler: @escaping @Sendable (Data?, URLResponse?, (any Error)?, Bool) -> Void
    ) -> Task<Void, Never> {
        Task {
            do {
                let answer = try await self.run(request, body: body, policy: policy, logger: logger)
                let response = request.url.flatMap { answer.urlResponse(for: $0) }
                completionHandler(answer.bodyData, response, nil, answer.source.isFromCache)
            } catch {
                completionHandler(nil, nil, error, false)
            }
        }
    }
}

extension CachedRepository {
    /// A repository of the resource a Foundation `URLRequest` names, read through `cache`, decoded with `decode`.
    ///
    /// The request's method, URL, header fields and body are used, and its `cachePolicy` is the policy of reads
    /// that give none. A request without an absolute HTTP(S) URL makes a repository whose reads fail with
    /// ``CachedNetworkingError/Kind/invalidRequest``.
    /// - Parameters:
    ///   - cache: The cache the requests go through; its ``CachedNetworking/Configuration/clock`` measures the
    ///     lifetime.
    ///   - request: The resource.
    ///   - lifetime: How long a value is held and answered without asking the cache; nil (the default) to ask the
    ///     cache on every read.
    ///   - decode: Decodes a 2xx response's body.
    public convenience init(
        _ cache: CachedNetworking, request: URLRequest, lifetime: Duration? = nil, decode: @escaping Decode
    ) {
        self.init(
            cache, request: request.cacheRequest, body: request.cacheBody, lifetime: lifetime,
            policy: CachePolicy(request.cachePolicy), decode: decode)
    }

    /// A repository of the resource a Foundation `URLRequest` names, read through `cache`, decoded as JSON.
    ///
    /// The request's method, URL, header fields and body are used, and its `cachePolicy` is the policy of reads
    /// that give none. A request without an absolute HTTP(S) URL makes a repository whose reads fail with
    /// ``CachedNetworkingError/Kind/invalidRequest``.
    /// - Parameters:
    ///   - cache: The cache the requests go through; its ``CachedNetworking/Configuration/clock`` measures the
    ///     lifetime.
    ///   - request: The resource.
    ///   - lifetime: How long a value is held and answered without asking the cache; nil (the default) to ask the
    ///     cache on every read.
    ///   - decoder: Decodes a 2xx response's body. Default: a `JSONDecoder` with its default settings.
    public convenience init(
        _ cache: CachedNetworking, request: URLRequest, lifetime: Duration? = nil,
        decoder: JSONDecoder = JSONDecoder()
    ) where Value: Decodable {
        self.init(cache, request: request, lifetime: lifetime) { data in try decoder.decode(Value.self, from: data) }
    }
}
