#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif
public import Foundation
public import HTTPTypes
import HTTPTypesFoundation
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

extension CachedNetworking {
    /// Answers a Foundation `URLRequest`: its method, URL, header fields and body are used, and its
    /// `cachePolicy` unless `policy` is given.
    /// - Throws: ``CachedNetworkingError`` as ``run(_:body:policy:transport:)`` does;
    ///   ``CachedNetworkingError/Kind/invalidRequest`` when the request has no absolute HTTP(S) URL.
    public func run(_ urlRequest: URLRequest, policy: CachePolicy? = nil) async throws(CachedNetworkingError) -> CachedResponse {
        guard let request = urlRequest.httpRequest else {
            throw CachedNetworkingError(.invalidRequest, "the URLRequest has no absolute HTTP URL")
        }
        let body = urlRequest.httpBody.map { ByteBuffer(bytes: $0) }
        return try await run(request, body: body, policy: policy ?? CachePolicy(urlRequest.cachePolicy))
    }

    /// Answers a `URLRequest` through a completion handler shaped like `URLSession`'s, plus whether the body came
    /// from the cache (``CachedResponse/Source/isFromCache``).
    /// - Returns: The task doing the work; cancel it to cancel the request.
    @discardableResult
    public func run(
        _ urlRequest: URLRequest,
        policy: CachePolicy? = nil,
        completionHandler: @escaping @Sendable (Data?, URLResponse?, (any Error)?, Bool) -> Void
    ) -> Task<Void, Never> {
        Task {
            do {
                let answer = try await self.run(urlRequest, policy: policy)
                let response = urlRequest.url.flatMap { answer.urlResponse(for: $0) }
                completionHandler(answer.bodyData, response, nil, answer.source.isFromCache)
            } catch {
                completionHandler(nil, nil, error, false)
            }
        }
    }

    /// Answers an `HTTPRequest` through a completion handler shaped like `URLSession`'s, plus whether the body
    /// came from the cache.
    /// - Returns: The task doing the work; cancel it to cancel the request.
    @discardableResult
    public func run(
        _ request: HTTPRequest,
        body: ByteBuffer? = nil,
        policy: CachePolicy = .useProtocolCachePolicy,
        completionHandler: @escaping @Sendable (Data?, URLResponse?, (any Error)?, Bool) -> Void
    ) -> Task<Void, Never> {
        Task {
            do {
                let answer = try await self.run(request, body: body, policy: policy)
                let response = request.url.flatMap { answer.urlResponse(for: $0) }
                completionHandler(answer.bodyData, response, nil, answer.source.isFromCache)
            } catch {
                completionHandler(nil, nil, error, false)
            }
        }
    }
}
