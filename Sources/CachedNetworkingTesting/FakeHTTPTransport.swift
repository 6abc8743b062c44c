public import CachedNetworking
public import HTTPTypes
public import NIOCore
import Synchronization

/// A scripted ``HTTPTransport``: replies per URL and method, a log of every request, delays and failures, so
/// that code using ``CachedNetworking`` can be tested without a network.
///
/// ```swift
/// let transport = FakeHTTPTransport()
/// transport.script("https://api.example.com/items", replies: [
///     .init(status: .ok, headerFields: [.cacheControl: "max-age=60"], body: "[]"),
/// ])
/// ```
///
/// Replies for a URL are used in order; the last one repeats. A request with no script fails with
/// ``Unscripted``.
public final class FakeHTTPTransport: HTTPTransport {
    /// One scripted answer.
    public struct Reply: Sendable {
        /// The status.
        public var status: HTTPResponse.Status
        /// The header fields.
        public var headerFields: HTTPFields
        /// The content.
        public var body: ByteBuffer
        /// A wait before answering (real time, cancellable).
        public var delay: Duration?
        /// When set, the request fails with this error instead of answering.
        public var failure: (any Error & Sendable)?

        /// An answer with `status`, `headerFields` and a text `body`.
        public init(
            status: HTTPResponse.Status = .ok,
            headerFields: HTTPFields = [:],
            body: String = "",
            delay: Duration? = nil
        ) {
            self.status = status
            self.headerFields = headerFields
            self.body = ByteBuffer(string: body)
            self.delay = delay
        }

        /// A failure, as when the origin cannot be reached.
        public static func failure(_ error: any Error & Sendable, delay: Duration? = nil) -> Reply {
            var reply = Reply(delay: delay)
            reply.failure = error
            return reply
        }
    }

    /// A request as the transport received it.
    public struct RecordedRequest: Sendable {
        /// The request.
        public var request: HTTPRequest
        /// Its content.
        public var body: ByteBuffer?
        /// `scheme://authority/path`, as scripts are keyed.
        public var url: String
    }

    /// The error for a request that no script covers.
    public struct Unscripted: Error, Sendable, CustomStringConvertible {
        /// The request's method and URL.
        public let request: String
        public var description: String { "no scripted reply for \(request)" }
    }

    /// The error of ``Reply/failure(_:delay:)`` when none is given: the origin is unreachable.
    public struct ConnectionRefused: Error, Sendable {
        /// An error.
        public init() {}
    }

    private struct Script {
        var replies: [Reply]
        var handler: (@Sendable (HTTPRequest, ByteBuffer?) -> Reply)?
    }

    private struct State {
        var scripts: [String: Script] = [:]
        var log: [RecordedRequest] = []
    }

    private let state = Mutex(State())

    /// A transport with no scripts.
    public init() {}

    /// Answers requests for `url` with `method` with `replies` in order, repeating the last one.
    public func script(_ url: String, method: HTTPRequest.Method = .get, replies: [Reply]) {
        state.withLock { $0.scripts[Self.scriptKey(method, Self.normalize(url))] = Script(replies: replies) }
    }

    /// Answers requests for `url` with `method` by calling `handler`.
    public func script(
        _ url: String,
        method: HTTPRequest.Method = .get,
        handler: @escaping @Sendable (HTTPRequest, ByteBuffer?) -> Reply
    ) {
        state.withLock { $0.scripts[Self.scriptKey(method, Self.normalize(url))] = Script(replies: [], handler: handler) }
    }

    /// Every request received, in order.
    public var requests: [RecordedRequest] {
        state.withLock { $0.log }
    }

    /// How many requests for `url` (any method) were received.
    public func requestCount(for url: String) -> Int {
        let normalized = Self.normalize(url)
        return state.withLock { $0.log.filter { $0.url == normalized }.count }
    }

    public func send(_ request: HTTPRequest, body: ByteBuffer?) async throws -> HTTPTransportResponse {
        let url = Self.normalize(
            "\(request.scheme ?? "")://\(request.authority ?? "")\(request.path ?? "/")")
        let key = Self.scriptKey(request.method, url)
        let reply = state.withLock { state -> Reply? in
            state.log.append(RecordedRequest(request: request, body: body, url: url))
            guard var script = state.scripts[key] else { return nil }
            if let handler = script.handler { return handler(request, body) }
            guard let next = script.replies.first else { return nil }
            if script.replies.count > 1 {
                script.replies.removeFirst()
                state.scripts[key] = script
            }
            return next
        }
        guard let reply else { throw Unscripted(request: "\(request.method) \(url)") }
        if let delay = reply.delay { try await Task.sleep(for: delay) }
        if let failure = reply.failure { throw failure }
        return HTTPTransportResponse(
            response: HTTPResponse(status: reply.status, headerFields: reply.headerFields),
            body: request.method == .head ? ByteBuffer() : reply.body)
    }

    private static func scriptKey(_ method: HTTPRequest.Method, _ url: String) -> String {
        "\(method.rawValue) \(url)"
    }

    /// Lowercases scheme and authority; keeps the path and query as they are.
    static func normalize(_ url: String) -> String {
        guard let separator = url.firstRange(of: "://") else { return url }
        let rest = url[separator.upperBound...]
        let pathStart = rest.firstIndex { $0 == "/" || $0 == "?" } ?? rest.endIndex
        let path = rest[pathStart...]
        return url[..<separator.lowerBound].lowercased() + "://" + rest[..<pathStart].lowercased()
            + (path.isEmpty ? "/" : String(path))
    }
}
