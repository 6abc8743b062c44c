import HTTPTypes
import NIOCore
import NIOPosix

/// A local origin that is not a well-behaved HTTP server: on 127.0.0.1 and port 0, it answers the first bytes of
/// every connection with `answer`, as it is, then closes the connection. For the tests of what a client does
/// with a reply that is not HTTP, or that ends early.
public final class RawOrigin: Sendable {
    private let channel: any Channel
    public let port: Int

    private init(channel: any Channel) {
        self.channel = channel
        self.port = channel.localAddress?.port ?? 0
    }

    /// Starts a server that answers `answer`; stop it with ``stop()``.
    public static func start(answering answer: String) async throws -> RawOrigin {
        let bytes = ByteBuffer(string: answer)
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(RawAnswerHandler(answer: bytes))
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        return RawOrigin(channel: channel)
    }

    /// The URL of `path` on this server.
    public func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

    /// A GET request for `path` on this server.
    public func request(_ path: String) -> HTTPRequest {
        HTTPRequest(method: .get, scheme: "http", authority: "127.0.0.1:\(port)", path: path)
    }

    /// Stops listening.
    public func stop() async {
        try? await channel.close()
    }
}

private final class RawAnswerHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let answer: ByteBuffer
    private var answered = false

    init(answer: ByteBuffer) {
        self.answer = answer
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !answered else { return }
        answered = true
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(answer)).whenComplete { _ in channel.close(promise: nil) }
    }
}
