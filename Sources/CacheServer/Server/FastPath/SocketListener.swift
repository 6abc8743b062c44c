import CThreadName
import Foundation
import Glibc
import Logging
import NIOCore
import Synchronization

/// A listening socket (TCP, or a Unix socket) with a thread of its own that accepts connections and hands each
/// connected socket's descriptor on.
///
/// The server accepts connections itself, rather than through a NIO server channel, so that it knows each
/// connection's descriptor (NIO does not expose it): it writes replies straight to the socket while the channel
/// has nothing queued for it (`ConnectionHandler`), and its event loops watch the sockets while they poll
/// (`BusyPoll`). The connections are still NIO channels, registered with `ClientBootstrap.withConnectedSocket`.
package final class SocketListener: Sendable {
    /// The TCP port it listens on: the configured one, or the one the system chose for port 0; nil for a Unix
    /// socket.
    package let port: Int?
    /// The Unix socket's path; nil for TCP.
    package let path: String?
    /// Succeeds once the socket is closed, after ``close()``.
    package let closeFuture: EventLoopFuture<Void>

    private let descriptor: CInt
    private let closed: EventLoopPromise<Void>
    /// One of the `State` values.
    private let state = Atomic<Int>(State.idle)
    /// Condition 1 once the socket is closed, for ``closeAndWait()``.
    private let finished = NSConditionLock(condition: 0)

    private enum State {
        static let idle = 0
        static let accepting = 1
        static let closing = 2
        static let closed = 3
    }

    /// Creates a TCP socket bound to `host`:`port`, listening with room for `backlog` connections not yet
    /// accepted. Nothing is accepted before ``start(logger:onAccept:)``.
    /// - Throws: ``ListenError/tcp(address:port:reason:)`` with the system's reason.
    package init(host: String, port: Int, backlog: Int32, eventLoop: any EventLoop) throws {
        func failure(_ reason: String) -> ListenError { .tcp(address: host, port: port, reason: reason) }
        let address = try ListenAddress.tcp(host: host, port: port)
        let family = address.protocol.rawValue
        let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw failure(String(cString: strerror(errno))) }
        var one: CInt = 1
        let size = socklen_t(MemoryLayout<CInt>.size)
        // As Redis does: an IPv6 address takes only IPv6 connections, so `::` and `0.0.0.0` can share a port.
        let ready =
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, size) == 0
            && (family != AF_INET6 || setsockopt(fd, CInt(IPPROTO_IPV6), IPV6_V6ONLY, &one, size) == 0)
            && address.withSockAddr({ bind(fd, $0, socklen_t($1)) }) == 0
            && listen(fd, backlog) == 0
        guard ready else {
            let reason = String(cString: strerror(errno))
            Glibc.close(fd)
            throw failure(reason)
        }
        var bound = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &bound) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        self.port = withUnsafeBytes(of: &bound) { raw in
            // sin_port and sin6_port sit at the same offset, in network byte order.
            Int(UInt16(bigEndian: raw.load(fromByteOffset: 2, as: UInt16.self)))
        }
        self.path = nil
        self.descriptor = fd
        self.closed = eventLoop.makePromise(of: Void.self)
        self.closeFuture = closed.futureResult
    }

    /// Creates a Unix socket at `path`, listening with room for `backlog` connections not yet accepted. A socket
    /// file left at `path` (by a server that did not exit cleanly) is replaced; any other file is not.
    /// - Throws: ``ListenError/unixSocket(path:reason:)`` with the system's reason.
    package init(unixPath path: String, backlog: Int32, eventLoop: any EventLoop) throws {
        func failure(_ reason: String) -> ListenError { .unixSocket(path: path, reason: reason) }
        var address = try ListenAddress.unix(path: path)
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw failure(String(cString: strerror(errno))) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0, listen(fd, backlog) == 0 else {
            let reason = String(cString: strerror(errno))
            Glibc.close(fd)
            throw failure(reason)
        }
        self.port = nil
        self.path = path
        self.descriptor = fd
        self.closed = eventLoop.makePromise(of: Void.self)
        self.closeFuture = closed.futureResult
    }

    /// Where it listens, for log lines.
    private var place: Logger.Metadata {
        if let path { return ["unixsocket": "\(path)"] }
        return ["port": "\(port ?? 0)"]
    }

    /// Starts the accepting thread. Each accepted connection's descriptor (non-blocking, close-on-exec) goes
    /// to `onAccept` on that thread, which then owns it.
    package func start(logger: Logger, onAccept: @escaping @Sendable (CInt) -> Void) {
        guard state.compareExchange(expected: State.idle, desired: State.accepting, ordering: .acquiringAndReleasing).exchanged
        else { return }
        let thread = Thread { [self] in
            cached_name_current_thread("cached-accept")
            acceptLoop(logger: logger, onAccept: onAccept)
            finish()
        }
        thread.name = "cached-accept"
        thread.start()
    }

    /// Stops accepting and closes the socket; ``closeFuture`` succeeds when it is closed. Connections already
    /// accepted are not affected. Safe to call from any thread, more than once.
    package func close() {
        if state.compareExchange(expected: State.idle, desired: State.closed, ordering: .acquiringAndReleasing).exchanged {
            Glibc.close(descriptor)
            closed.succeed(())
            markFinished()
        } else if state.compareExchange(
            expected: State.accepting, desired: State.closing, ordering: .acquiringAndReleasing
        ).exchanged {
            // Wakes the thread blocked in accept (which then fails with EINVAL); it closes the socket.
            shutdown(descriptor, CInt(SHUT_RDWR))
        }
    }

    /// Stops accepting and closes the socket, returning once it is closed (at most `timeout` later), so that
    /// its address is free for another socket. Blocks the calling thread for as long as the accepting thread
    /// takes to leave `accept`: microseconds.
    package func closeAndWait(timeout: TimeInterval = 5) {
        close()
        if finished.lock(whenCondition: 1, before: Date(timeIntervalSinceNow: timeout)) { finished.unlock() }
    }

    private func markFinished() {
        finished.lock()
        finished.unlock(withCondition: 1)
    }

    private var isClosing: Bool { state.load(ordering: .acquiring) == State.closing }

    private func acceptLoop(logger: Logger, onAccept: @Sendable (CInt) -> Void) {
        var lastWarning = ContinuousClock.now - .seconds(2)
        while true {
            let connection = accept(descriptor, nil, nil)
            if connection >= 0 {
                _ = fcntl(connection, F_SETFD, FD_CLOEXEC)
                _ = fcntl(connection, F_SETFL, fcntl(connection, F_GETFL) | O_NONBLOCK)
                onAccept(connection)
                continue
            }
            let error = errno
            if isClosing { return }
            switch error {
            case EINTR, ECONNABORTED, EAGAIN, EPROTO, EPERM:
                // The connection went away before it was accepted, or a signal: nothing to report.
                continue
            case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                // Out of descriptors or memory: say so (at most once a second) and try again shortly, as the
                // connections waiting in the backlog may be accepted once some close.
                if ContinuousClock.now - lastWarning >= .seconds(1) {
                    lastWarning = .now
                    logger.warning(
                        "Accepting client connection: accept: \(String(cString: strerror(error)))",
                        metadata: place)
                }
                usleep(10_000)
            default:
                logger.error(
                    "Accepting client connection failed, no longer accepting on this socket: \(String(cString: strerror(error)))",
                    metadata: place)
                return
            }
        }
    }

    private func finish() {
        state.store(State.closed, ordering: .releasing)
        Glibc.close(descriptor)
        // Completed before ``closeAndWait()`` returns, so that the completion is on its way to the loop before a
        // caller that then shuts the loop down does so.
        closed.succeed(())
        markFinished()
    }
}
