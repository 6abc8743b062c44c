import Glibc
import Logging
import NIOCore
import Synchronization

/// Where the server listens: a TCP socket for each `bind` address on `port`, another on `tls-port` for TLS
/// connections, and the Unix socket. Opened at start; when CONFIG SET changes `port`, `tls-port` or `bind`, the
/// TCP sockets change at once, as in Redis, or, when a new one cannot be opened, stay as they were.
package final class Listeners: Sendable {
    /// A TCP address to listen on.
    struct Address: Hashable, Sendable {
        let host: String
        let port: Int
        /// Given with Redis's `-` prefix: failing to listen there is not an error.
        let optional: Bool
        /// Connections to it speak TLS.
        let tls: Bool

        static func == (a: Address, b: Address) -> Bool { a.host == b.host && a.port == b.port && a.tls == b.tls }
        func hash(into hasher: inout Hasher) {
            hasher.combine(host)
            hasher.combine(port)
            hasher.combine(tls)
        }
    }

    private struct Sockets {
        var tcp: [(address: Address, listener: any ConnectionListener)] = []
        var unix: (any ConnectionListener)?
        var started = false
        var stopped = false
    }

    private let io: ConnectionIO
    private let logger: Logger
    private let backlog: Int32
    /// Sets up each accepted connection's channel: given what the fast path knows of its socket, the Unix
    /// socket's path for its connections, and whether it came to the TLS port.
    private let setup: @Sendable (any Channel, FastPathSocket?, String?, Bool) throws -> Void
    private let sockets = Mutex(Sockets())
    private let done: EventLoopPromise<Void>

    /// Succeeds once ``stop()`` has closed every socket.
    package var stopped: EventLoopFuture<Void> { done.futureResult }

    package init(
        io: ConnectionIO, eventLoops: any EventLoopGroup, backlog: Int, logger: Logger,
        setup: @escaping @Sendable (any Channel, FastPathSocket?, String?, Bool) throws -> Void
    ) {
        self.io = io
        self.backlog = Int32(clamping: backlog)
        self.logger = logger
        self.setup = setup
        self.done = eventLoops.next().makePromise(of: Void.self)
    }

    /// The TCP addresses `config` listens on, in its order, `port`'s then `tls-port`'s (none for a port 0). Each
    /// address once.
    static func addresses(_ config: ServerConfiguration) -> [Address] {
        var seen: Set<Address> = []
        return [(config.port, false), (config.tlsPort, true)].flatMap { (port, tls) -> [Address] in
            guard port != 0 else { return [] }
            return config.bind.compactMap { entry in
                let optional = entry.hasPrefix("-")
                let address = Address(
                    host: optional ? String(entry.dropFirst()) : entry, port: port, optional: optional, tls: tls)
                return seen.insert(address).inserted ? address : nil
            }
        }
    }

    /// The TCP ports listened on for plain-text connections.
    package var tcpPorts: [Int] { sockets.withLock { $0.tcp.filter { !$0.address.tls }.compactMap(\.listener.port) } }

    /// The TCP ports listened on for TLS connections.
    package var tlsPorts: [Int] { sockets.withLock { $0.tcp.filter { $0.address.tls }.compactMap(\.listener.port) } }

    /// Opens every socket of `config`, as at start: nothing is accepted before ``start()``.
    /// - Throws: ``ListenError`` when a socket cannot be opened (those opened are closed again, and the listeners
    ///   are stopped), or when `config` listens nowhere.
    package func open(_ config: ServerConfiguration) throws {
        var tcp: [(address: Address, listener: any ConnectionListener)] = []
        var unix: (any ConnectionListener)?
        do {
            for address in Self.addresses(config) {
                do {
                    tcp.append((address, try makeTCP(address)))
                } catch where address.optional {
                    logger.warning("Could not bind optional address", metadata: ["address": "\(address.host)", "error": "\(error)"])
                }
            }
            if !config.unixSocket.isEmpty {
                let path = config.unixSocket
                unix = try io.listen(unixPath: path, backlog: backlog)
                if config.unixSocketPermissions != 0 && chmod(path, mode_t(config.unixSocketPermissions)) != 0 {
                    throw ListenError.unixSocket(path: path, reason: String(cString: strerror(errno)))
                }
            }
            if tcp.isEmpty && unix == nil { throw ListenError.nowhere }
        } catch {
            for (_, listener) in tcp { listener.closeAndWait() }
            if let unix {
                unix.closeAndWait()
                // The socket file goes only if this server made it (a file already there is left alone).
                unlink(config.unixSocket)
            }
            stop()
            throw error
        }
        sockets.withLock {
            $0.tcp = tcp
            $0.unix = unix
        }
    }

    /// Starts accepting on every socket.
    package func start() {
        sockets.withLock { sockets in
            guard !sockets.started else { return }
            sockets.started = true
            for (address, listener) in sockets.tcp { accept(listener, tls: address.tls) }
            if let unix = sockets.unix { accept(unix, tls: false) }
        }
    }

    /// Listens on the TCP addresses of `config` (its `port`, `tls-port` and `bind`), keeping the sockets whose address stays,
    /// closing those whose address goes and opening the new ones. When a new one (not optional) cannot be
    /// opened, the sockets are put back as they were and it returns false; the reason is logged.
    package func change(to config: ServerConfiguration) -> Bool {
        sockets.withLock { sockets in
            guard !sockets.stopped else { return true }
            let wanted = Self.addresses(config)
            let retired = sockets.tcp.filter { !wanted.contains($0.address) }
            // Closed first: a new socket may need the address (a wildcard address covers the specific ones).
            for (_, listener) in retired { listener.closeAndWait() }
            var opened: [(address: Address, listener: any ConnectionListener)] = []
            for address in wanted where !sockets.tcp.contains(where: { $0.address == address }) {
                do {
                    opened.append((address, try makeTCP(address)))
                } catch where address.optional {
                    logger.warning("Could not bind optional address", metadata: ["address": "\(address.host)", "error": "\(error)"])
                } catch {
                    logger.warning("Warning: \(error)")
                    for (_, listener) in opened { listener.closeAndWait() }
                    sockets.tcp = sockets.tcp.compactMap { entry in
                        guard retired.contains(where: { $0.address == entry.address }) else { return entry }
                        return reopen(entry.address, started: sockets.started)
                    }
                    return false
                }
            }
            sockets.tcp = sockets.tcp.filter { entry in !retired.contains(where: { $0.address == entry.address }) }
            for entry in opened {
                if sockets.started { accept(entry.listener, tls: entry.address.tls) }
                sockets.tcp.append(entry)
            }
            if sockets.tcp.isEmpty && sockets.unix == nil {
                logger.warning("No longer listening anywhere: no TCP port and no Unix socket. Only clients already connected can reach the server.")
            }
            return true
        }
    }

    /// Stops accepting and closes every socket; ``stopped`` then succeeds. Connections already accepted are not
    /// affected. Safe to call more than once, from any thread.
    package func stop() {
        let stopping: [any ConnectionListener]? = sockets.withLock { sockets in
            guard !sockets.stopped else { return nil }
            sockets.stopped = true
            return sockets.tcp.map(\.listener) + (sockets.unix.map { [$0] } ?? [])
        }
        guard let all = stopping else { return }
        guard !all.isEmpty else {
            done.succeed(())
            return
        }
        for listener in all { listener.close() }
        EventLoopFuture.andAllComplete(all.map(\.closeFuture), on: done.futureResult.eventLoop).cascade(to: done)
    }

    private func makeTCP(_ address: Address) throws -> any ConnectionListener {
        try io.listen(host: address.host, port: address.port, backlog: backlog)
    }

    /// Opens `address` again after a failed change; nil (logged) when even that fails.
    private func reopen(_ address: Address, started: Bool) -> (address: Address, listener: any ConnectionListener)? {
        do {
            let listener = try makeTCP(address)
            if started { accept(listener, tls: address.tls) }
            return (address, listener)
        } catch {
            logger.error("Could not listen again where the server listened before: \(error)")
            return nil
        }
    }

    private func accept(_ listener: any ConnectionListener, tls: Bool) {
        let setup = self.setup
        let path = listener.path
        listener.start(logger: logger) { channel, socket in try setup(channel, socket, path, tls) }
    }
}
