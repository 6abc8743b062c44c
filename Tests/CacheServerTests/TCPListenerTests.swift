import CacheServer
import CachedTestSupport
import Dispatch
import Glibc
import Logging
import NIOPosix
import Synchronization
import Testing

/// The server's own TCP listener: it accepts on a thread of its own and hands each connection's descriptor on.
@Suite("TCP listener")
struct TCPListenerTests {
    private static let logger = Logger(label: "test")

    /// An event loop for the close future, and a listener on a free loopback port.
    private static func loopbackListener() throws -> (MultiThreadedEventLoopGroup, TCPListener) {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        do {
            return (group, try TCPListener(host: "127.0.0.1", port: 0, backlog: 16, eventLoop: group.next()))
        } catch {
            try? group.syncShutdownGracefully()
            throw error
        }
    }

    @Test("port 0 gets a free port; a connection's descriptor is handed over non-blocking and close-on-exec")
    func handsOverConnections() throws {
        let (group, listener) = try Self.loopbackListener()
        defer { try? group.syncShutdownGracefully() }
        defer { listener.close() }
        #expect(listener.port > 0)
        let accepted = Mutex<[CInt]>([])
        let arrived = DispatchSemaphore(value: 0)
        listener.start(logger: Self.logger) { descriptor in
            accepted.withLock { $0.append(descriptor) }
            arrived.signal()
        }

        let client = try connectLoopback(port: listener.port)
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

    @Test("close stops accepting: the close future completes and new connections are refused")
    func closeStopsAccepting() throws {
        let (group, listener) = try Self.loopbackListener()
        defer { try? group.syncShutdownGracefully() }
        listener.start(logger: Self.logger) { close($0) }

        listener.close()
        try listener.closeFuture.wait()
        #expect(throws: (any Error).self, "the port no longer listens") { try connectLoopback(port: listener.port) }
        listener.close()  // again: nothing happens
    }

    @Test("a listener closed before it started releases its port")
    func closeBeforeStart() throws {
        let (group, listener) = try Self.loopbackListener()
        defer { try? group.syncShutdownGracefully() }
        listener.close()
        try listener.closeFuture.wait()
        let again = try TCPListener(host: "127.0.0.1", port: listener.port, backlog: 16, eventLoop: group.next())
        again.close()
    }

    @Test("a port that is taken is an error with the system's reason; IPv4 and IPv6 loopback can share a port")
    func bindErrors() throws {
        let (group, first) = try Self.loopbackListener()
        defer { try? group.syncShutdownGracefully() }
        defer { first.close() }

        let error = #expect(throws: ListenError.self) {
            try TCPListener(host: "127.0.0.1", port: first.port, backlog: 16, eventLoop: group.next())
        }
        #expect(
            error?.description == "Could not create server TCP listening socket 127.0.0.1:\(first.port): Address already in use")

        // An IPv6 listener takes IPv6 only (as Redis's does), so it does not collide with the IPv4 one.
        do {
            let v6 = try TCPListener(host: "::1", port: first.port, backlog: 16, eventLoop: group.next())
            v6.close()
        } catch let error as ListenError where "\(error)".hasSuffix("Cannot assign requested address") {
            // No IPv6 loopback on this machine: nothing to check.
        }
    }
}
