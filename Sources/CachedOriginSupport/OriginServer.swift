import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// A local origin HTTP/1.1 server for the tests: binds 127.0.0.1 on port 0, answers each path from a script,
/// counts requests, and can delay answers or trickle their bodies.
public final class OriginServer: Sendable {
    /// A scripted answer.
    public struct Reply: Sendable {
        public var status: Int = 200
        public var headers: [(String, String)] = []
        /// The body's bytes (sent with a `Content-Length` unless the headers have one).
        public var content: ByteBuffer
        /// Time before the answer starts.
        public var delay: Duration? = nil
        /// When set, the head goes at once and the body one byte at a time, this far apart: an origin that
        /// holds a fetch with a slow body. (The bytes stop when the client closes the connection.)
        public var trickle: Duration? = nil

        /// The body as text.
        public var body: String {
            get { String(buffer: content) }
            set { content = ByteBuffer(string: newValue) }
        }

        public init(
            status: Int = 200, headers: [(String, String)] = [], body: String = "", delay: Duration? = nil,
            trickle: Duration? = nil
        ) {
            self.init(status: status, headers: headers, content: ByteBuffer(string: body), delay: delay, trickle: trickle)
        }

        /// An answer with `content` as its body (shared, not copied, by every answer made from it).
        public init(
            status: Int = 200, headers: [(String, String)] = [], content: ByteBuffer, delay: Duration? = nil,
            trickle: Duration? = nil
        ) {
            self.status = status
            self.headers = headers
            self.content = content
            self.delay = delay
            self.trickle = trickle
        }
    }

    /// A request as the origin received it.
    public struct Received: Sendable {
        public var method: String
        public var path: String
        public var headers: [(String, String)]

        public func header(_ name: String) -> String? {
            headers.first { $0.0.lowercased() == name.lowercased() }?.1
        }
    }

    public typealias Handler = @Sendable (Received) -> Reply

    private struct State {
        var handlers: [String: Handler] = [:]
        var received: [Received] = []
        var connections: [any Channel] = []
        var stopped = false
    }

    private let state = Mutex(State())
    private let channel: any Channel
    public let port: Int

    private init(channel: any Channel) {
        self.channel = channel
        self.port = channel.localAddress?.port ?? 0
    }

    /// Starts a server; stop it with ``stop()``.
    public static func start() async throws -> OriginServer {
        let box = Mutex<OriginServer?>(nil)
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 512)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                guard box.withLock({ $0 })?.accept(channel) ?? true else {
                    return channel.close()
                }
                return channel.pipeline.configureHTTPServerPipeline().flatMap {
                    channel.pipeline.addHandler(OriginHandler(server: { box.withLock { $0 } }))
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        let server = OriginServer(channel: channel)
        box.withLock { $0 = server }
        return server
    }

    /// Stops listening and closes every open connection, so that the origin is unreachable.
    public func stop() async {
        let connections = state.withLock { state -> [any Channel] in
            state.stopped = true
            return state.connections
        }
        try? await channel.close()
        for connection in connections { try? await connection.close() }
    }

    fileprivate func accept(_ connection: any Channel) -> Bool {
        state.withLock { state in
            guard !state.stopped else { return false }
            state.connections.append(connection)
            return true
        }
    }

    /// Answers `path` (path and query) with `handler`.
    public func route(_ path: String, _ handler: @escaping Handler) {
        state.withLock { $0.handlers[path] = handler }
    }

    /// Answers `path` with `reply` every time.
    public func route(_ path: String, reply: Reply) {
        route(path) { _ in reply }
    }

    /// The URL of `path` on this server.
    public func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

    /// A request for `path` on this server.
    public func request(_ path: String, method: HTTPRequest.Method = .get, headers: [(String, String)] = []) -> HTTPRequest {
        var fields = HTTPFields()
        for (name, value) in headers { fields.append(HTTPField(name: HTTPField.Name(name)!, value: value)) }
        return HTTPRequest(method: method, scheme: "http", authority: "127.0.0.1:\(port)", path: path, headerFields: fields)
    }

    /// Requests received for `path` (all methods).
    public func received(_ path: String) -> [Received] {
        state.withLock { $0.received.filter { $0.path == path } }
    }

    /// How many requests were received for `path`.
    public func count(_ path: String) -> Int { received(path).count }

    fileprivate func handle(_ request: Received) -> Reply {
        state.withLock { state in
            state.received.append(request)
            return state.handlers[request.path]?(request) ?? Reply(status: 404, headers: [], body: "no route")
        }
    }
}

private final class OriginHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let server: @Sendable () -> OriginServer?
    private var head: HTTPRequestHead?

    init(server: @escaping @Sendable () -> OriginServer?) {
        self.server = server
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
        case .body:
            break
        case .end:
            guard let head, let server = server() else { return }
            let received = OriginServer.Received(
                method: head.method.rawValue, path: head.uri, headers: head.headers.map { ($0.name, $0.value) })
            let reply = server.handle(received)
            let keepAlive = head.isKeepAlive
            let isHead = head.method == .HEAD
            if let delay = reply.delay {
                let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
                context.eventLoop.scheduleTask(in: TimeAmount(delay)) {
                    let (handler, context) = loopBound.value
                    handler.write(reply, context: context, keepAlive: keepAlive, isHead: isHead)
                }
            } else {
                write(reply, context: context, keepAlive: keepAlive, isHead: isHead)
            }
        }
    }

    private func write(_ reply: OriginServer.Reply, context: ChannelHandlerContext, keepAlive: Bool, isHead: Bool) {
        var headers = HTTPHeaders()
        for (name, value) in reply.headers { headers.add(name: name, value: value) }
        let body = reply.content
        if !headers.contains(name: "content-length") && reply.status != 304 && reply.status != 204 {
            headers.add(name: "Content-Length", value: String(body.readableBytes))
        }
        let head = HTTPResponseHead(version: .http1_1, status: .init(statusCode: reply.status), headers: headers)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        let hasBody = !isHead && reply.status != 304 && reply.status != 204 && body.readableBytes > 0
        if hasBody, let trickle = reply.trickle {
            context.flush()
            self.trickle(body, every: TimeAmount(trickle), context: context, keepAlive: keepAlive)
            return
        }
        if hasBody {
            context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        }
        end(context: context, keepAlive: keepAlive)
    }

    /// Sends `rest` one byte per `interval`, then ends the response; stops when the connection is gone.
    private func trickle(_ rest: ByteBuffer, every interval: TimeAmount, context: ChannelHandlerContext, keepAlive: Bool) {
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        context.eventLoop.scheduleTask(in: interval) {
            let (handler, context) = loopBound.value
            guard context.channel.isActive else { return }
            var rest = rest
            if let byte = rest.readSlice(length: 1) {
                context.writeAndFlush(handler.wrapOutboundOut(.body(.byteBuffer(byte))), promise: nil)
            }
            if rest.readableBytes > 0 {
                handler.trickle(rest, every: interval, context: context, keepAlive: keepAlive)
            } else {
                handler.end(context: context, keepAlive: keepAlive)
            }
        }
    }

    /// Ends the response, and closes the connection unless it is kept alive.
    private func end(context: ChannelHandlerContext, keepAlive: Bool) {
        let promise = context.eventLoop.makePromise(of: Void.self)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: promise)
        if !keepAlive {
            let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
            promise.futureResult.whenComplete { _ in loopBound.value.close(promise: nil) }
        }
    }
}
