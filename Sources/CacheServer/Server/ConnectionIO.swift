import CThreadName
import Logging
import NIOCore
import NIOPosix

/// How the server takes its connections and writes its replies: through its own fast path, or through plain
/// SwiftNIO (`io-fast-path`). The one place that chooses between them; nothing else in the server knows which
/// it runs.
///
/// **The fast path** (`Server/FastPath/`, the default) does three things SwiftNIO does not offer:
/// - its own listening sockets, each with a thread blocked in `accept` (``SocketListener``), so that it knows
///   each connection's descriptor, which it hands to SwiftNIO with `ClientBootstrap.withConnectedSocket`;
/// - replies sent straight to that descriptor with one non-blocking `send` while the channel has nothing queued
///   for the connection (``DirectSend``, in `ConnectionHandler` and `TLSServerHandler`);
/// - after a read, the event loop's own epoll set, found through `/proc/self/fdinfo`, watched for up to
///   `busy-poll` microseconds before the loop may sleep (``BusyPoll``).
///
/// What it relies on from SwiftNIO, checked by `FastPathContractTests` so that an upgrade that changes it fails
/// loudly: a channel made with `withConnectedSocket` keeps that descriptor as its socket until it closes it, and
/// registers it with an epoll set of its event loop's own, one set per loop; a channel writes nothing it was not
/// given, so bytes sent to the socket directly and bytes written through the channel arrive in the order they
/// were handed over when the direct ones go first only while the channel has nothing queued; and a
/// `NIOScheduledCallbackHandler` due now runs after the loop has handled its I/O.
///
/// **Plain SwiftNIO** (`io-fast-path no`): a `ServerBootstrap` server channel per listening socket, on an event
/// loop of its own, accepting into the server's event loops; every reply written through the channel; no busy
/// polling (`busy-poll` has no effect). It is the fallback should a SwiftNIO release break the fast path's
/// assumptions, and the reference the fast path is measured against.
package final class ConnectionIO: Sendable {
    /// Whether the fast path runs.
    package let fastPath: Bool
    /// The loops connections live on.
    private let group: MultiThreadedEventLoopGroup
    /// The pollers of `group`'s loops (fast path only).
    private let polls: BusyPolls?
    /// The loop the server channels of plain SwiftNIO accept on (plain only).
    private let acceptGroup: MultiThreadedEventLoopGroup?

    /// Connection I/O on `group`'s loops; `busyPollWindow` tells the current `busy-poll` in nanoseconds.
    package init(fastPath: Bool, group: MultiThreadedEventLoopGroup, busyPollWindow: @escaping @Sendable () -> Int64) {
        self.fastPath = fastPath
        self.group = group
        self.polls = fastPath ? BusyPolls(group: group, window: busyPollWindow) : nil
        if fastPath {
            self.acceptGroup = nil
        } else {
            let acceptGroup = MultiThreadedEventLoopGroup(numberOfThreads: 1)
            // Named as the fast path's accepting threads are, for `top -H` and `ps -L`.
            acceptGroup.next().execute { cached_name_current_thread("cached-accept") }
            self.acceptGroup = acceptGroup
        }
    }

    /// A TCP socket listening on `host`:`port`, accepting nothing before it is started.
    /// - Throws: ``ListenError/tcp(address:port:reason:)`` with the system's reason.
    package func listen(host: String, port: Int, backlog: Int32) throws -> any ConnectionListener {
        if let acceptGroup {
            return try PlainListener(host: host, port: port, backlog: backlog, acceptLoop: acceptGroup.next(), group: group)
        }
        return FastPathListener(
            socket: try SocketListener(host: host, port: port, backlog: backlog, eventLoop: group.next()),
            group: group, polls: polls)
    }

    /// A Unix socket listening at `path` (a socket file left there is replaced; any other file is not),
    /// accepting nothing before it is started.
    /// - Throws: ``ListenError/unixSocket(path:reason:)`` with the system's reason.
    package func listen(unixPath path: String, backlog: Int32) throws -> any ConnectionListener {
        if let acceptGroup {
            return try PlainListener(unixPath: path, backlog: backlog, acceptLoop: acceptGroup.next(), group: group)
        }
        return FastPathListener(
            socket: try SocketListener(unixPath: path, backlog: backlog, eventLoop: group.next()), group: group, polls: polls)
    }

    /// Stops what the connection I/O runs besides the connections' loops (plain SwiftNIO's accepting loop), once
    /// every listener is closed.
    package func shutdown() async {
        try? await acceptGroup?.shutdownGracefully()
    }

    /// TCP_NODELAY (TCP only), reads per wake-up and the write-buffer marks of every client connection.
    static func clientOptions(_ bootstrap: ClientBootstrap, tcp: Bool) -> ClientBootstrap {
        (tcp ? bootstrap.channelOption(.socketOption(.tcp_nodelay), value: 1) : bootstrap)
            .channelOption(.maxMessagesPerRead, value: 16)
            .channelOption(.writeBufferWaterMark, value: ConnectionHandler.writeBufferWaterMark)
    }

    /// ``clientOptions(_:tcp:)`` for the connections a server channel accepts.
    static func clientOptions(_ bootstrap: ServerBootstrap, tcp: Bool) -> ServerBootstrap {
        (tcp ? bootstrap.childChannelOption(.socketOption(.tcp_nodelay), value: 1) : bootstrap)
            .childChannelOption(.maxMessagesPerRead, value: 16)
            .childChannelOption(.writeBufferWaterMark, value: ConnectionHandler.writeBufferWaterMark)
    }
}

/// What the fast path knows of a connection it accepted: its socket, which replies may be sent to directly, and
/// the poller of the loop the connection lives on.
package struct FastPathSocket: Sendable {
    package let descriptor: CInt
    package let busyPoll: BusyPoll?
}

/// Adds the server's handlers to an accepted connection's channel (on its event loop): `socket` when the fast
/// path accepted it, nil under plain SwiftNIO. A thrown error closes the connection.
package typealias ConnectionSetup = @Sendable (_ channel: any Channel, _ socket: FastPathSocket?) throws -> Void

/// A listening socket, TCP or Unix, of either kind of connection I/O (see ``ConnectionIO``).
package protocol ConnectionListener: AnyObject, Sendable {
    /// The TCP port: the configured one, or the one the system chose for port 0; nil for a Unix socket.
    var port: Int? { get }
    /// The Unix socket's path; nil for TCP.
    var path: String? { get }
    /// Succeeds once the socket is closed, after ``close()``.
    var closeFuture: EventLoopFuture<Void> { get }
    /// Starts accepting: `setup` makes each connection's handlers.
    func start(logger: Logger, setup: @escaping ConnectionSetup)
    /// Stops accepting and closes the socket. Connections already accepted are not affected. Safe from any
    /// thread, more than once.
    func close()
    /// ``close()``, returning once the socket is closed, so that its address is free for another socket (at
    /// most `timeout` seconds later). Blocks the calling thread, which may be an event loop of the server's.
    func closeAndWait(timeout: Double)
}

extension ConnectionListener {
    package func closeAndWait() { closeAndWait(timeout: 5) }
}

/// The fast path's listener: a ``SocketListener`` whose connections become channels with
/// `ClientBootstrap.withConnectedSocket`, on the next of the server's loops.
final class FastPathListener: ConnectionListener {
    private let socket: SocketListener
    private let group: MultiThreadedEventLoopGroup
    private let polls: BusyPolls?

    init(socket: SocketListener, group: MultiThreadedEventLoopGroup, polls: BusyPolls?) {
        self.socket = socket
        self.group = group
        self.polls = polls
    }

    var port: Int? { socket.port }
    var path: String? { socket.path }
    var closeFuture: EventLoopFuture<Void> { socket.closeFuture }
    func close() { socket.close() }
    func closeAndWait(timeout: Double) { socket.closeAndWait(timeout: timeout) }

    func start(logger: Logger, setup: @escaping ConnectionSetup) {
        let group = self.group
        let polls = self.polls
        let tcp = socket.path == nil
        socket.start(logger: logger) { descriptor in
            ConnectionIO.clientOptions(ClientBootstrap(group: group), tcp: tcp)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try setup(channel, FastPathSocket(descriptor: descriptor, busyPoll: polls?.poll(for: channel.eventLoop)))
                    }
                }
                .withConnectedSocket(descriptor)
                .whenFailure { error in
                    // The channel, once made, closes the socket when its set-up fails.
                    logger.warning("Could not set up a client connection", metadata: ["error": "\(error)"])
                }
        }
    }
}
