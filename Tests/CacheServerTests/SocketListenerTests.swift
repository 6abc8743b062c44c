import CacheServer
import CachedTestSupport
import Dispatch
import Foundation
import Glibc
import Logging
import NIOPosix
import Synchronization
import Testing

/// The server's own listeners (TCP and the Unix socket): each accepts on a thread of its own and hands each
/// connection's descriptor on.
@Suite("Socket listener")
struct SocketListenerTests {
    private static let logger = Logger(label: "test")

    /// An event loop for the close future, and a listener on a free loopback port.
    private static func loopbackListener() throws -> (MultiThreadedEventLoopGroup, SocketListener) {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        do {
            return (group, try SocketListener(host: "127.0.0.1", port: 0, backlog: 16, eventLoop: group.next()))
        } catch {
            try? group.syncShutdownGracefully()
            throw error
        }
    }

    /// Closes `listener` and waits until its accepting thread has closed the socket: the thread completes the
    /// close future on the listener's event loop, which must still be running then.
    private static func closeAndWait(_ listener: SocketListener) {
        listener.close()
        try? listener.closeFuture.wait()
    }

    /// Starts `listener`, connects with `connect` and sends "ping": the descriptor handed over must be that
    /// connection's, non-blocking and close-on-exec.
    private static func expectHandsOver(_ listener: SocketListener, connect: () throws -> CInt) throws {
        let accepted = Mutex<[CInt]>([])
        let arrived = DispatchSemaphore(value: 0)
        listener.start(logger: Self.logger) { descriptor in
            accepted.withLock { $0.append(descriptor) }
            arrived.signal()
        }
        let client = try connect()
        defer { close(client) }
        #expect(send(client, "ping", 4, 0) == 4)
        #expect(arrived.wait(timeout: .now() + 5) == .success, "no connection handed over")
        let descriptor = try #require(accepted.withLock { $0.first })
        defer { close(descriptor) }
        #expect(fcntl(descriptor, F_GETFL) & O_NONBLOCK != 0)
        #expect(fcntl(descriptor, F_GETFD) & FD_CLOEXEC != 0)
        var ready = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        #expect(poll(&ready, 1, 5000) == 1)
        var bytes = [UInt8](repeating: 0, count: 16)
        #expect(recv(descriptor, &bytes, bytes.count, 0) == 4)
        #expect(bytes.prefix(4) == [UInt8]("ping".utf8)[...], "the descriptor is the client's connection")
    }

    @Test("port 0 gets a free port; a connection's descriptor is handed over non-blocking and close-on-exec")
    func handsOverConnections() throws {
        let (group, listener) = try Self.loopbackListener()
        defer { try? group.syncShutdownGracefully() }
        defer { Self.closeAndWait(listener) }
        #expect(listener.port! > 0 && listener.path == nil)
        try Self.expectHandsOver(listener) { try connectLoopback(port: listener.port!) }
    }

    @Test("close stops accepting: the close future completes and new connections are refused")
    func closeStopsAccepting() throws {
        let (group, listener) = try Self.loopbackListener()
        defer { try? group.syncShutdownGracefully() }
        listener.start(logger: Self.logger) { close($0) }

        listener.close()
        try listener.closeFuture.wait()
        #expect(throws: (any Error).self, "the port no longer listens") { try connectLoopback(port: listener.port!) }
        listener.close()  // again: nothing happens
    }

    @Test("a listener closed before it started releases its port")
    func closeBeforeStart() throws {
        let (group, listener) = try Self.loopbackListener()
        defer { try? group.syncShutdownGracefully() }
        listener.close()
        try listener.closeFuture.wait()
        let again = try SocketListener(host: "127.0.0.1", port: listener.port!, backlog: 16, eventLoop: group.next())
        again.close()
    }

    @Test("a port that is taken is an error with the system's reason; IPv4 and IPv6 loopback can share a port")
    func bindErrors() throws {
        let (group, first) = try Self.loopbackListener()
        defer { try? group.syncShutdownGracefully() }
        defer { first.close() }

        let error = #expect(throws: ListenError.self) {
            try SocketListener(host: "127.0.0.1", port: first.port!, backlog: 16, eventLoop: group.next())
        }
        #expect(
            error?.description == "Could not create server TCP listening socket 127.0.0.1:\(first.port!): Address already in use")

        // An IPv6 listener takes IPv6 only (as Redis's does), so it does not collide with the IPv4 one.
        do {
            let v6 = try SocketListener(host: "::1", port: first.port!, backlog: 16, eventLoop: group.next())
            v6.close()
        } catch let error as ListenError where "\(error)".hasSuffix("Cannot assign requested address") {
            // No IPv6 loopback on this machine: nothing to check.
        }
    }

    // MARK: Unix sockets

    /// A path for a socket in a new temporary directory, removed by `cleanup`.
    private static func socketPath() throws -> (path: String, cleanup: () -> Void) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("sl-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return (directory.appendingPathComponent("s.sock").path, { try? FileManager.default.removeItem(at: directory) })
    }

    @Test("a Unix socket listener replaces a stale socket file and hands each connection's descriptor over")
    func unixSocketHandsOverConnections() throws {
        let (path, cleanup) = try Self.socketPath()
        defer { cleanup() }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { try? group.syncShutdownGracefully() }
        // A listener that closed without removing its file leaves a stale socket behind.
        let stale = try SocketListener(unixPath: path, backlog: 16, eventLoop: group.next())
        stale.close()
        try stale.closeFuture.wait()
        #expect(FileManager.default.fileExists(atPath: path))

        let listener = try SocketListener(unixPath: path, backlog: 16, eventLoop: group.next())
        defer { Self.closeAndWait(listener) }
        #expect(listener.port == nil && listener.path == path)
        try Self.expectHandsOver(listener) { try connectUnixSocket(path: path) }
    }

    @Test("closing a Unix socket listener stops accepting; its close future completes")
    func unixSocketClose() throws {
        let (path, cleanup) = try Self.socketPath()
        defer { cleanup() }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { try? group.syncShutdownGracefully() }
        let listener = try SocketListener(unixPath: path, backlog: 16, eventLoop: group.next())
        listener.start(logger: Self.logger) { close($0) }
        listener.close()
        try listener.closeFuture.wait()
        #expect(throws: (any Error).self, "the socket no longer accepts") { try connectUnixSocket(path: path) }
    }

    @Test("a file that is not a socket is left alone, and a path too long for a socket is refused, with reasons")
    func unixSocketErrors() throws {
        let (path, cleanup) = try Self.socketPath()
        defer { cleanup() }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { try? group.syncShutdownGracefully() }
        #expect(FileManager.default.createFile(atPath: path, contents: Data("keep".utf8)))
        let taken = #expect(throws: ListenError.self) {
            try SocketListener(unixPath: path, backlog: 16, eventLoop: group.next())
        }
        #expect(taken?.description == "Failed opening Unix socket \(path): Address already in use")
        #expect(FileManager.default.contents(atPath: path) == Data("keep".utf8), "the file was touched")

        let long = "/tmp/" + String(repeating: "x", count: 200)
        let tooLong = #expect(throws: ListenError.self) {
            try SocketListener(unixPath: long, backlog: 16, eventLoop: group.next())
        }
        #expect(tooLong?.description == "Failed opening Unix socket \(long): File name too long")
    }
}
