#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import HTTPTypes
import Logging
import NIOCore
import Tracing

extension CachedNetworking {
    /// ``run(_:body:policy:transport:logger:)`` with `logger` bound as the request's logger (when given), in a
    /// `cached.run` span (when tracing). `shutDown`: the cache was shut down before the call.
    func scoped(
        _ request: HTTPRequest, body: ByteBuffer?, policy: CachePolicy, transport: (any HTTPTransport)?,
        logger: Logger?, shutDown: Bool
    ) async -> Result<CachedResponse, CachedNetworkingError> {
        guard let logger else {
            return await traced(request, body: body, policy: policy, transport: transport, shutDown: shutDown)
        }
        return await RequestLogging.with(logger) {
            await traced(request, body: body, policy: policy, transport: transport, shutDown: shutDown)
        }
    }

    /// The answer to `request`, in a `cached.run` span when tracing, its store calls and origin fetches in child
    /// spans.
    private func traced(
        _ request: HTTPRequest, body: ByteBuffer?, policy: CachePolicy, transport: (any HTTPTransport)?,
        shutDown: Bool
    ) async -> Result<CachedResponse, CachedNetworkingError> {
        func answering() async -> Result<CachedResponse, CachedNetworkingError> {
            if shutDown { return .failure(CachedNetworkingError(.shutDown, "the cache was shut down")) }
            do throws(CachedNetworkingError) {
                return .success(try await answer(request, body: body, policy: policy, transport: transport))
            } catch {
                return .failure(error)
            }
        }
        guard let span = tracing.start(CachedNetworkingSpans.run) else { return await answering() }
        defer { span.end() }
        CacheTracing.describe(request, on: span)
        let result = await ServiceContext.withValue(span.context) { await answering() }
        switch result {
        case .success(let response):
            span.updateAttributes { attributes in
                attributes[CachedNetworkingSpans.Attribute.statusCode] = response.status.code
                attributes[CachedNetworkingSpans.Attribute.cacheStatus] = response.cacheStatus.headerValue
                attributes[CachedNetworkingSpans.Attribute.source] = response.source.description
            }
        case .failure(let error):
            CacheTracing.fail(span, error, type: error.kind.token)
        }
        return result
    }

    /// ``sendUntraced(_:body:through:)`` in `span` (a `cached.origin.fetch` span), which it ends: the fetch runs
    /// with the span's context, so that an instrumented transport's span nests under it.
    func fetch(
        _ request: HTTPRequest, body: ByteBuffer?, through callTransport: (any HTTPTransport)?, in span: any Span
    ) async -> Result<(HTTPTransportResponse, Date, Date), CachedNetworkingError> {
        defer { span.end() }
        CacheTracing.describe(request, on: span)
        let result = await ServiceContext.withValue(span.context) {
            () async -> Result<(HTTPTransportResponse, Date, Date), CachedNetworkingError> in
            do throws(CachedNetworkingError) {
                return .success(try await sendUntraced(request, body: body, through: callTransport))
            } catch {
                return .failure(error)
            }
        }
        switch result {
        case .success(let (response, _, _)):
            span.attributes[CachedNetworkingSpans.Attribute.statusCode] = response.response.status.code
        case .failure(let error):
            CacheTracing.fail(span, error, type: error.kind.token)
        }
        return result
    }
}
