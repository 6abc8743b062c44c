import CachedNetworking
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import HTTPTypes
import NIOCore
import OpenAPIRuntime
import Synchronization

/// The rest of a client's middlewares and its transport, as a ``CachingMiddleware`` call is given them.
typealias NextStep = @Sendable (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)

/// The cache's way to the origin during one ``CachingMiddleware`` call: the call's next step.
///
/// The cache sends the call's own request, with header fields of its own when it validates a stored response;
/// the request goes on with its path relative to the base URL and with the call's content, as the client made
/// them. The next step can be called only until ``end()``, when the call ends.
final class NextStepTransport: HTTPTransport {
    /// A response whose content did not go through the cache.
    enum PassedOn: Sendable {
        /// The response to a method the cache never stores: the cache had its head; the content is as the next
        /// step gave it.
        case streamed(HTTPBody?)
        /// A response too large for the cache to store, as the next step gave it.
        case tooLarge(HTTPResponse, HTTPBody)
    }

    private struct State {
        var next: NextStep?
        var passedOn: PassedOn?
    }

    private let state: Mutex<State>
    private let request: HTTPRequest
    private let body: HTTPBody?
    private let baseURL: URL
    /// Whether responses go to the cache without their content (see ``PassedOn/streamed(_:)``).
    let streamsResponse: Bool
    private let maximumBodySize: Int

    init(
        request: HTTPRequest, body: HTTPBody?, baseURL: URL, next: @escaping NextStep, streamsResponse: Bool,
        maximumBodySize: Int
    ) {
        self.state = Mutex(State(next: next))
        self.request = request
        self.body = body
        self.baseURL = baseURL
        self.streamsResponse = streamsResponse
        self.maximumBodySize = maximumBodySize
    }

    func send(_ request: HTTPRequest, body _: ByteBuffer?) async throws -> HTTPTransportResponse {
        guard let next = state.withLock({ $0.next }) else { throw CallEnded() }
        var forwarded = self.request
        forwarded.method = request.method
        forwarded.headerFields = request.headerFields
        let response: HTTPResponse
        let collected: Collected?
        do {
            let content: HTTPBody?
            (response, content) = try await next(forwarded, self.body, baseURL)
            if streamsResponse {
                state.withLock { $0.passedOn = .streamed(content) }
                return HTTPTransportResponse(response: response)
            }
            collected = if let content { try await Self.collect(content, upTo: maximumBodySize) } else { nil }
        } catch {
            throw NextStepFailure(error: error)
        }
        switch collected {
        case .complete(let buffer):
            return HTTPTransportResponse(response: response, body: buffer)
        case .tooLarge(let content):
            state.withLock { $0.passedOn = .tooLarge(response, content) }
            throw ResponseTooLarge()
        case nil:
            return HTTPTransportResponse(response: response)
        }
    }

    /// Forgets the next step: the call is over.
    func end() {
        state.withLock { $0.next = nil }
    }

    /// The response whose content did not go through the cache, if any; taken once.
    func takePassedOn() -> PassedOn? {
        state.withLock { state in
            defer { state.passedOn = nil }
            return state.passedOn
        }
    }

    /// A response's content, read.
    enum Collected {
        /// All of it, within the limit.
        case complete(ByteBuffer)
        /// More than the limit: the content as it was given (nothing read when its length was declared), or what
        /// was read followed by the rest.
        case tooLarge(HTTPBody)
    }

    /// Reads `body` while it stays within `limit` bytes. A declared length over the limit is believed and nothing
    /// is read; a body that runs over the limit while being read is given back whole, what was read followed by
    /// the rest.
    static func collect(_ body: HTTPBody, upTo limit: Int) async throws -> Collected {
        if case .known(let length) = body.length, length > limit { return .tooLarge(body) }
        var buffer = ByteBuffer()
        var iterator = body.makeAsyncIterator()
        while let chunk = try await iterator.next() {
            guard buffer.readableBytes + chunk.count <= limit else {
                var read = [chunk]
                if buffer.readableBytes > 0 { read.insert(HTTPBody.ByteChunk(buffer.readableBytesView), at: 0) }
                let whole = ReadThenRest(read: read, rest: iterator)
                return .tooLarge(HTTPBody(whole, length: body.length, iterationBehavior: .single))
            }
            buffer.writeBytes(chunk)
        }
        return .complete(buffer)
    }
}

/// A body that outgrew the limit while being read: the chunks read, then the rest of the body it came from.
struct ReadThenRest: AsyncSequence, Sendable {
    typealias Element = HTTPBody.ByteChunk

    /// Unchecked: the body is iterated once (`.single`), by its one consumer, one `next()` at a time, so the
    /// iterator is never used from two places at once.
    fileprivate final class Source: @unchecked Sendable {
        var read: [HTTPBody.ByteChunk]
        var rest: HTTPBody.Iterator

        init(read: [HTTPBody.ByteChunk], rest: HTTPBody.Iterator) {
            self.read = read.reversed()
            self.rest = rest
        }
    }

    struct AsyncIterator: AsyncIteratorProtocol {
        fileprivate let source: Source

        mutating func next() async throws -> HTTPBody.ByteChunk? {
            if let chunk = source.read.popLast() { return chunk }
            return try await source.rest.next()
        }
    }

    private let source: Source

    init(read: [HTTPBody.ByteChunk], rest: consuming HTTPBody.Iterator) {
        self.source = Source(read: read, rest: rest)
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(source: source) }
}

/// What the transport throws when the next step failed; the middleware rethrows `error`.
struct NextStepFailure: Error, CustomStringConvertible {
    let error: any Error
    var description: String { "\(error)" }
}

/// What the transport throws for a response too large to store; the middleware passes the response on.
struct ResponseTooLarge: Error, CustomStringConvertible {
    var description: String { "the response is larger than the cache stores (maximumStoredBodySize)" }
}

/// What the transport throws when the cache uses it after its call ended (it must not).
struct CallEnded: Error, CustomStringConvertible {
    var description: String { "the call that made this transport has ended" }
}
