import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// A local origin for the miss benchmarks: HTTP/1.1 on 127.0.0.1 (a free port), keep-alive, answering every GET
/// with 200, `Cache-Control: max-age=3600` and the same body, and counting the requests for each path.
///
/// (A trimmed copy of the test suite's origin server: benchmarks cannot import test targets.)
final class Origin: Sendable {
    private let channel: any Channel
    private let requests = Mutex<[String: Int]>([:])
    let port: Int
    let body: ByteBuffer

    private init(channel: any Channel, body: ByteBuffer) {
        self.channel = channel
        self.port = channel.localAddress?.port ?? 0
        self.body = body
    }

    /// Starts an origin whose responses carry `bodySize` bytes.
    static func start(bodySize: Int) async throws -> Origin {
        let body = ByteBuffer(repeating: UInt8(ascii: "x"), count: bodySize)
        let box = Mutex<Origin?>(nil)
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 1024)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.pipeline.configureHTTPServerPipeline().flatMap {
                    channel.pipeline.addHandler(OriginHandler(origin: { box.withLock { $0 } }))
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        let origin = Origin(channel: channel, body: body)
        box.withLock { $0 = origin }
        return origin
    }

    func stop() async {
        try? await channel.close()
    }

    /// How many requests arrived for `path`.
    func count(_ path: String) -> Int { requests.withLock { $0[path] ?? 0 } }

    fileprivate func received(_ path: String) {
        requests.withLock { $0[path, default: 0] += 1 }
    }
}

private final class OriginHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let origin: @Sendable () -> Origin?
    private var head: HTTPRequestHead?

    init(origin: @escaping @Sendable () -> Origin?) { self.origin = origin }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
        case .body:
            break
        case .end:
            guard let head, let origin = origin() else { return }
            origin.received(head.uri)
            var headers = HTTPHeaders()
            headers.add(name: "Cache-Control", value: "max-age=3600")
            headers.add(name: "Content-Type", value: "application/octet-stream")
            headers.add(name: "Content-Length", value: String(origin.body.readableBytes))
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(origin.body))), promise: nil)
            if head.isKeepAlive {
                context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            } else {
                let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
                context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in loopBound.value.close(promise: nil) }
            }
            self.head = nil
        }
    }
}
