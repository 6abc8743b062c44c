import CBusyPoll
import CacheServer
import Dispatch
import Glibc
import NIOCore
import NIOPosix
import Synchronization
import Testing

/// What the server's I/O fast path (`ConnectionIO`, `Server/FastPath/`) relies on from SwiftNIO, beyond its
/// public API's documented meaning. A SwiftNIO release that changes any of it fails here: until the fast path is
/// adapted, servers run correctly with `io-fast-path no` (plain SwiftNIO), which relies on none of it.
@Suite("Fast path: what it relies on from SwiftNIO")
struct FastPathContractTests {
    /// A connected pair of stream sockets.
    private static func socketPair() throws -> (CInt, CInt) {
        var descriptors: [CInt] = [0, 0]
        try #require(socketpair(AF_UNIX, CInt(SOCK_STREAM.rawValue), 0, &descriptors) == 0, "socketpair: errno \(errno)")
        return (descriptors[0], descriptors[1])
    }

    /// One end of a socket pair made a channel on `loop` as the fast path makes its connections
    /// (`ClientBootstrap.withConnectedSocket`), with `handler`; the other end is returned to play the client.
    private static func connection(
        on loop: any EventLoop, handler: (any ChannelHandler & Sendable)? = nil
    ) throws -> (channel: any Channel, descriptor: CInt, peer: CInt) {
        let (local, peer) = try socketPair()
        let channel = try ClientBootstrap(group: loop)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    if let handler { try channel.pipeline.syncOperations.addHandler(handler) }
                }
            }
            .withConnectedSocket(local).wait()
        return (channel, local, peer)
    }

    /// Reads from `socket` until `count` bytes came (or 5 s passed).
    private static func receive(_ socket: CInt, count: Int) -> [UInt8] {
        var received: [UInt8] = []
        var ready = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
        while received.count < count, poll(&ready, 1, 5000) == 1 {
            var bytes = [UInt8](repeating: 0, count: 256)
            let n = recv(socket, &bytes, bytes.count, 0)
            guard n > 0 else { break }
            received += bytes.prefix(n)
        }
        return received
    }

    @Test("a channel made from a descriptor is in an epoll set of its loop's own, the same for all its channels")
    func oneEpollSetPerLoop() throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        defer { try? group.syncShutdownGracefully() }
        let loops = Array(group.makeIterator())
        let first = try Self.connection(on: loops[0])
        let second = try Self.connection(on: loops[0])
        let other = try Self.connection(on: loops[1])
        defer {
            for connection in [first, second, other] {
                try? connection.channel.close().wait()
                close(connection.peer)
            }
        }
        // Looked up on each loop, as BusyPoll does, once the channel is registered there.
        let sets = try [first, second, other].map { connection in
            try connection.channel.eventLoop.submit { cached_epoll_set_holding(connection.descriptor) }.wait()
        }
        #expect(sets[0] >= 0, "no epoll set of this process holds a connection's descriptor")
        #expect(sets[1] == sets[0], "two connections of one loop are in different epoll sets")
        #expect(sets[2] >= 0 && sets[2] != sets[0], "connections of two loops share an epoll set")
    }

    @Test("the channel's socket is the descriptor it was given: direct sends and channel writes interleave in order")
    func keepsTheDescriptor() throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { try? group.syncShutdownGracefully() }
        let reads = ReadCollector()
        let (channel, descriptor, peer) = try Self.connection(on: group.next(), handler: reads)
        defer { close(peer) }

        var direct = ByteBuffer(string: "direct-")
        #expect(DirectSend.send(&direct, to: descriptor), "the socket did not take a small send")
        try channel.writeAndFlush(ByteBuffer(string: "channel-")).wait()
        var after = ByteBuffer(string: "direct")
        #expect(DirectSend.send(&after, to: descriptor))
        #expect(String(decoding: Self.receive(peer, count: 21), as: UTF8.self) == "direct-channel-direct")

        // What the client sends reaches the channel through that same socket.
        #expect(send(peer, "ping", 4, 0) == 4)
        #expect(reads.wait(for: "ping"), "the channel did not read what came to its descriptor")

        // Closing the channel closes the descriptor, and no other one for the socket stays open: the client sees
        // the end of the stream.
        try channel.close().wait()
        var ready = pollfd(fd: peer, events: Int16(POLLIN), revents: 0)
        #expect(poll(&ready, 1, 5000) == 1)
        var byte: UInt8 = 0
        #expect(recv(peer, &byte, 1, 0) == 0, "the socket stayed open after its channel closed")
    }

    @Test("a callback due now, scheduled during a read, runs once the loop has handled that read")
    func callbackAfterTheRead() throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { try? group.syncShutdownGracefully() }
        let order = OrderRecorder()
        let (channel, _, peer) = try Self.connection(on: group.next(), handler: order)
        defer {
            try? channel.close().wait()
            close(peer)
        }
        #expect(send(peer, "x", 1, 0) == 1)
        #expect(order.wait(for: 3), "the callback did not run")
        #expect(order.events == ["read", "readComplete", "callback"])
    }

    /// Collects what its channel reads.
    private final class ReadCollector: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        private let received = Mutex("")
        private let arrived = DispatchSemaphore(value: 0)

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let bytes = unwrapInboundIn(data)
            received.withLock { $0 += String(buffer: bytes) }
            arrived.signal()
        }

        func wait(for text: String) -> Bool {
            let deadline = DispatchTime.now() + 5
            while received.withLock({ $0 }) != text {
                if arrived.wait(timeout: deadline) == .timedOut { return false }
            }
            return true
        }
    }

    /// Records a read, the end of the read burst, and a callback due at once that the read scheduled, in the
    /// order they happen.
    private final class OrderRecorder: ChannelInboundHandler, NIOScheduledCallbackHandler, Sendable {
        typealias InboundIn = ByteBuffer
        private let recorded = Mutex<[String]>([])
        private let done = DispatchSemaphore(value: 0)

        var events: [String] { recorded.withLock { $0 } }

        private func record(_ event: String) {
            recorded.withLock { $0.append(event) }
            done.signal()
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            if recorded.withLock({ $0.isEmpty }) {
                _ = try? context.eventLoop.scheduleCallback(at: .uptimeNanoseconds(0), handler: self)
            }
            record("read")
        }

        func channelReadComplete(context: ChannelHandlerContext) { record("readComplete") }

        func handleScheduledCallback(eventLoop: some EventLoop) { record("callback") }

        func wait(for count: Int) -> Bool {
            let deadline = DispatchTime.now() + 5
            while events.count < count {
                if done.wait(timeout: deadline) == .timedOut { return false }
            }
            return true
        }
    }
}
