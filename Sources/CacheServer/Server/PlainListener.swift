import Dispatch
import Glibc
import Logging
import NIOCore
import NIOPosix
import Synchronization

/// Where a listening socket goes, checked the same way for either kind of connection I/O.
enum ListenAddress {
    /// The address of `host`:`port`; as Redis 7, `*` is every IPv4 address and `::*` every IPv6 address.
    /// - Throws: ``ListenError/tcp(address:port:reason:)`` when `host` does not resolve.
    static func tcp(host: String, port: Int) throws -> SocketAddress {
        do {
            let resolved = host == "*" ? "0.0.0.0" : host == "::*" ? "::" : host
            return try SocketAddress.makeAddressResolvingHost(resolved, port: port)
        } catch {
            throw ListenError.tcp(address: host, port: port, reason: "\(error)")
        }
    }

    /// The address of the Unix socket at `path`, once a socket file left there (by a server that did not exit
    /// cleanly) is removed. Any other file at `path` is left alone, and refused.
    /// - Throws: ``ListenError/unixSocket(path:reason:)``.
    static func unix(path: String) throws -> sockaddr_un {
        func failure(_ code: CInt) -> ListenError { .unixSocket(path: path, reason: String(cString: strerror(code))) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        let bytes = Array(path.utf8)
        guard !bytes.isEmpty, bytes.count < capacity else { throw failure(ENAMETOOLONG) }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        var status = stat()
        if lstat(path, &status) == 0 {
            guard status.st_mode & S_IFMT == S_IFSOCK else { throw failure(EADDRINUSE) }
            unlink(path)
        }
        return address
    }

    /// The system's reason for `error`, as the fast path's listeners word it (`strerror`).
    static func reason(_ error: any Error) -> String {
        if let error = error as? IOError { return String(cString: strerror(error.errnoCode)) }
        return "\(error)"
    }
}

/// Plain SwiftNIO's listener (`io-fast-path no`): a `ServerBootstrap` server channel, bound at once and reading
/// (accepting) from ``start(logger:setup:)`` on, on an event loop of its own; the connections it accepts go to the
/// server's loops.
///
/// Binding and closing wait for the accepting loop, so that a `CONFIG SET port` answers whether it worked and
/// frees an address before it takes another; the wait is on a semaphore, not `EventLoopFuture.wait()`, as it may
/// happen on one of the server's loops (never on the accepting loop, which runs no commands).
final class PlainListener: ConnectionListener {
    let port: Int?
    let path: String?
    var closeFuture: EventLoopFuture<Void> { channel.closeFuture }

    private let channel: any Channel
    /// The handlers' set-up, from ``start(logger:setup:)`` on (nothing is accepted before).
    private let setup: SetupSlot
    private let started = Atomic<Bool>(false)
    /// Set by ``close()``: the socket closing is then no failure to report.
    private let closing = Flag()

    init(host: String, port: Int, backlog: Int32, acceptLoop: any EventLoop, group: any EventLoopGroup) throws {
        let address = try ListenAddress.tcp(host: host, port: port)
        let setup = SetupSlot()
        var bootstrap = Self.bootstrap(acceptLoop: acceptLoop, group: group, backlog: backlog, tcp: true, setup: setup)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
        // As Redis does: an IPv6 address takes only IPv6 connections, so `::` and `0.0.0.0` can share a port.
        if address.protocol == .inet6 { bootstrap = bootstrap.serverChannelOption(ChannelOptions.Types.SocketOption(level: .ipv6, name: .ipv6_v6only), value: 1) }
        do {
            channel = try Self.bound(bootstrap.bind(to: address))
        } catch {
            throw ListenError.tcp(address: host, port: port, reason: ListenAddress.reason(error))
        }
        self.port = channel.localAddress?.port
        self.path = nil
        self.setup = setup
    }

    init(unixPath path: String, backlog: Int32, acceptLoop: any EventLoop, group: any EventLoopGroup) throws {
        _ = try ListenAddress.unix(path: path)
        let setup = SetupSlot()
        let bootstrap = Self.bootstrap(acceptLoop: acceptLoop, group: group, backlog: backlog, tcp: false, setup: setup)
        do {
            channel = try Self.bound(bootstrap.bind(unixDomainSocketPath: path, cleanupExistingSocketFile: false))
        } catch {
            throw ListenError.unixSocket(path: path, reason: ListenAddress.reason(error))
        }
        self.port = nil
        self.path = path
        self.setup = setup
    }

    private static func bootstrap(
        acceptLoop: any EventLoop, group: any EventLoopGroup, backlog: Int32, tcp: Bool, setup: SetupSlot
    ) -> ServerBootstrap {
        ConnectionIO.clientOptions(ServerBootstrap(group: acceptLoop, childGroup: group), tcp: tcp)
            .serverChannelOption(.backlog, value: backlog)
            .serverChannelOption(.autoRead, value: false)
            .serverChannelInitializer { channel in
                // Out of descriptors or memory, accepting waits 10 ms, as the fast path's listeners do, instead of
                // failing at once again (the pending connection keeps the socket readable); the failure still
                // reaches the logger.
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(AcceptBackoffHandler(backoffProvider: backoff))
                }
            }
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    guard let setup = setup.value.withLock({ $0 }) else { throw ChannelError.ioOnClosedChannel }
                    try setup(channel, nil)
                }
            }
    }

    func start(logger: Logger, setup: @escaping ConnectionSetup) {
        guard !started.exchange(true, ordering: .acquiringAndReleasing) else { return }
        self.setup.value.withLock { $0 = setup }
        let channel = self.channel
        let place: Logger.Metadata = path.map { ["unixsocket": "\($0)"] } ?? ["port": "\(port ?? 0)"]
        let closing = self.closing
        channel.eventLoop.execute {
            try? channel.pipeline.syncOperations.addHandler(
                AcceptFailureLogger(logger: logger, place: place) { closing.isSet })
            channel.setOption(.autoRead, value: true).whenSuccess { channel.read() }
        }
    }

    func close() {
        closing.set()
        channel.close(promise: nil)
    }

    func closeAndWait(timeout: Double) {
        close()
        _ = Self.waitFor(channel.closeFuture, timeout: timeout)
    }

    /// The channel `bind` makes, blocking the calling thread until it is bound (at most 30 seconds: a bind that
    /// ends later is closed then, and this one fails).
    private static func bound(_ bind: EventLoopFuture<any Channel>) throws -> any Channel {
        guard let outcome = waitFor(bind, timeout: 30) else {
            bind.whenSuccess { $0.close(promise: nil) }
            throw BindTimeout()
        }
        return try outcome.get()
    }

    private struct BindTimeout: Error, CustomStringConvertible {
        var description: String { "the bind did not complete within 30 seconds" }
    }

    /// The outcome of `future`, blocking the calling thread (at most `timeout` seconds); nil when it took longer.
    private static func waitFor<T: Sendable>(_ future: EventLoopFuture<T>, timeout: Double) -> Result<T, any Error>? {
        let done = DispatchSemaphore(value: 0)
        let result = Mutex<Result<T, any Error>?>(nil)
        future.whenComplete { outcome in
            result.withLock { $0 = outcome }
            done.signal()
        }
        guard done.wait(timeout: .now() + timeout) == .success else { return nil }
        return result.withLock { $0 }
    }
}

/// How long a server channel waits before accepting again after `error`: 10 ms when the process is out of
/// descriptors or memory (connections may close meanwhile), none otherwise (a connection that went away).
private func backoff(_ error: IOError) -> TimeAmount? {
    switch error.errnoCode {
    case EMFILE, ENFILE, ENOBUFS, ENOMEM: .milliseconds(10)
    default: nil
    }
}

/// A flag set once, readable from any thread.
final class Flag: Sendable {
    private let value = Atomic<Bool>(false)
    var isSet: Bool { value.load(ordering: .acquiring) }
    func set() { value.store(true, ordering: .releasing) }
}

/// Where a ``PlainListener`` keeps its set-up for the channel initializer it gives SwiftNIO before it has one.
final class SetupSlot: Sendable {
    let value = Mutex<ConnectionSetup?>(nil)
}

/// Logs what goes wrong on a server channel, in the fast path's words: accepting failing for want of
/// descriptors or memory (at most once a second), a connection whose set-up failed, and the socket closing
/// when ``PlainListener/close()`` did not ask for it (it then accepts no more).
private final class AcceptFailureLogger: ChannelInboundHandler {
    typealias InboundIn = any Channel
    private let logger: Logger
    private let place: Logger.Metadata
    private let closing: () -> Bool
    private var lastWarning: NIODeadline?

    init(logger: Logger, place: Logger.Metadata, closing: @escaping () -> Bool) {
        self.logger = logger
        self.place = place
        self.closing = closing
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let error = error as? IOError {
            switch error.errnoCode {
            case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                let now = NIODeadline.now()
                if lastWarning.map({ now - $0 >= .seconds(1) }) ?? true {
                    lastWarning = now
                    logger.warning("Accepting client connection: accept: \(ListenAddress.reason(error))", metadata: place)
                }
            case ECONNABORTED, EINTR, EAGAIN, EPROTO, EPERM:
                // The connection went away before it was accepted, or a signal: nothing to report.
                break
            default:
                logger.warning("Accepting client connection: accept: \(ListenAddress.reason(error))", metadata: place)
            }
        } else {
            // A connection's set-up failed (SwiftNIO closed it and reports it here).
            logger.warning("Could not set up a client connection", metadata: ["error": "\(error)"])
        }
        context.fireErrorCaught(error)
    }

    func channelInactive(context: ChannelHandlerContext) {
        if !closing() {
            logger.error("Accepting client connection failed, no longer accepting on this socket", metadata: place)
        }
        context.fireChannelInactive()
    }
}
