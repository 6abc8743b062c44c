import CacheServer
import CachedTestSupport
import Foundation
import Glibc
import Logging
import NIOCore
import NIOPosix
import Synchronization
import Testing

/// The listeners of both kinds of connection I/O (`io-fast-path` yes and no) behave alike: where they listen,
/// the connections they set up, how they close, and the errors they give, in the same words.
@Suite("Connection listeners, fast path and plain SwiftNIO")
struct ConnectionListenerTests {
    private static let logger = Logger(label: "test")

    /// Runs `body` with connection I/O of the kind `fastPath` tells on a loop of its own, shut down after.
    private static func withIO(fastPath: Bool, _ body: (ConnectionIO) async throws -> Void) async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let io = ConnectionIO(fastPath: fastPath, group: group) { 0 }
        do {
            try await body(io)
        } catch {
            await io.shutdown()
            try? await group.shutdownGracefully()
            throw error
        }
        await io.shutdown()
        try await group.shutdownGracefully()
    }

    /// Closes `listener` and waits until its close future has completed: before its event loop shuts down, which
    /// would leave the future's promise unfulfilled.
    private static func closed(_ listener: any ConnectionListener) async {
        listener.closeAndWait()
        try? await listener.closeFuture.get()
    }

    /// Starts `listener` with a set-up that echoes what each connection sends, and records whether the fast path
    /// told the connection's socket.
    private static func startEchoing(_ listener: any ConnectionListener) -> Sockets {
        let sockets = Sockets()
        listener.start(logger: logger) { channel, socket in
            sockets.told.withLock { $0.append(socket != nil) }
            try channel.pipeline.syncOperations.addHandler(Echo())
        }
        return sockets
    }

    /// For each connection set up so far, whether the fast path told its socket.
    private final class Sockets: Sendable {
        let told = Mutex<[Bool]>([])
    }

    /// Sends "ping" on `client` and expects it back.
    private static func expectEcho(_ client: CInt) {
        #expect(send(client, "ping", 4, 0) == 4)
        var ready = pollfd(fd: client, events: Int16(POLLIN), revents: 0)
        var bytes = [UInt8](repeating: 0, count: 16)
        #expect(poll(&ready, 1, 5000) == 1, "no reply")
        #expect(recv(client, &bytes, bytes.count, 0) == 4)
        #expect(bytes.prefix(4) == [UInt8]("ping".utf8)[...])
    }

    /// Binds a Unix socket at `path` and closes it, leaving its file behind.
    private static func leaveStaleSocket(at path: String) throws {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        try #require(fd >= 0)
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        try #require(bound == 0, "bind: errno \(errno)")
    }

    private final class Echo: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            context.writeAndFlush(data, promise: nil)
        }
    }

    @Test("port 0 gets a free port; connections are set up, with their socket on the fast path only", arguments: [true, false])
    func servesConnections(fastPath: Bool) async throws {
        try await Self.withIO(fastPath: fastPath) { io in
            let listener = try io.listen(host: "127.0.0.1", port: 0, backlog: 16)
            let port = listener.port ?? 0
            #expect(port > 0 && listener.path == nil)
            let sockets = Self.startEchoing(listener)
            let client = try connectLoopback(port: port)
            Self.expectEcho(client)
            close(client)
            #expect(sockets.told.withLock { $0 } == [fastPath])
            await Self.closed(listener)
        }
    }

    @Test("closing frees the address at once, started or not; the close future completes", arguments: [true, false])
    func closeFreesTheAddress(fastPath: Bool) async throws {
        try await Self.withIO(fastPath: fastPath) { io in
            let first = try io.listen(host: "127.0.0.1", port: 0, backlog: 16)
            let port = try #require(first.port)
            first.closeAndWait()
            try await first.closeFuture.get()
            let second = try io.listen(host: "127.0.0.1", port: port, backlog: 16)
            _ = Self.startEchoing(second)
            second.closeAndWait()
            try await second.closeFuture.get()
            #expect(throws: (any Error).self, "the port still listens") { try connectLoopback(port: port) }
            let third = try io.listen(host: "127.0.0.1", port: port, backlog: 16)
            third.close()
            third.close()  // again: nothing happens
            try await third.closeFuture.get()
        }
    }

    @Test("a port that is taken is an error with the system's reason", arguments: [true, false])
    func bindErrors(fastPath: Bool) async throws {
        try await Self.withIO(fastPath: fastPath) { io in
            let first = try io.listen(host: "127.0.0.1", port: 0, backlog: 16)
            let port = first.port ?? 0
            let error = #expect(throws: ListenError.self) { try io.listen(host: "127.0.0.1", port: port, backlog: 16) }
            #expect(error?.description == "Could not create server TCP listening socket 127.0.0.1:\(port): Address already in use")
            // An IPv6 listener takes IPv6 only (as Redis's does), so it does not collide with the IPv4 one.
            do {
                await Self.closed(try io.listen(host: "::1", port: port, backlog: 16))
            } catch let error as ListenError where "\(error)".hasSuffix("Cannot assign requested address") {
                // No IPv6 loopback on this machine: nothing to check.
            }
            await Self.closed(first)
        }
    }

    @Test("a Unix socket replaces a stale socket file, leaves other files alone, and serves", arguments: [true, false])
    func unixSocket(fastPath: Bool) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cl-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("s.sock").path
        try await Self.withIO(fastPath: fastPath) { io in
            // A server that did not exit cleanly leaves a stale socket file behind.
            try Self.leaveStaleSocket(at: path)
            #expect(FileManager.default.fileExists(atPath: path))
            let listener = try io.listen(unixPath: path, backlog: 16)
            #expect(listener.port == nil && listener.path == path)
            let sockets = Self.startEchoing(listener)
            let client = try connectUnixSocket(path: path)
            Self.expectEcho(client)
            close(client)
            await Self.closed(listener)
            #expect(sockets.told.withLock { $0 } == [fastPath])

            let file = directory.appendingPathComponent("file").path
            #expect(FileManager.default.createFile(atPath: file, contents: Data("keep".utf8)))
            let taken = #expect(throws: ListenError.self) { try io.listen(unixPath: file, backlog: 16) }
            #expect(taken?.description == "Failed opening Unix socket \(file): Address already in use")
            #expect(FileManager.default.contents(atPath: file) == Data("keep".utf8), "the file was touched")
            let long = "/tmp/" + String(repeating: "x", count: 200)
            let tooLong = #expect(throws: ListenError.self) { try io.listen(unixPath: long, backlog: 16) }
            #expect(tooLong?.description == "Failed opening Unix socket \(long): File name too long")
        }
    }
}
