import CachedNetworking
import CHiredis
import CThreadName
import Foundation
import Glibc
import Logging
import NIOCore
import Synchronization

/// What an ``InvalidationSubscriber`` reports. Called on the subscriber's thread, one call at a time.
protocol InvalidationListener: AnyObject, Sendable {
    /// Subscribed to the invalidation channel; `clientID` is the connection's `CLIENT ID`, the id that data
    /// connections name in `CLIENT TRACKING on REDIRECT`.
    func subscribed(clientID: Int64)
    /// The server says these keys changed.
    func invalidate(_ keys: [StoreKey])
    /// The server says everything changed (`FLUSHALL`, `FLUSHDB`).
    func invalidateAll()
    /// The subscription is gone: invalidations sent from now until the next ``subscribed(clientID:)`` are lost.
    func unsubscribed(reason: String)
    /// The server cannot deliver invalidations (`CLIENT ID` or `SUBSCRIBE` is an unknown command); the
    /// subscriber has stopped for good.
    func unsupported(reason: String)
}

/// The connection that receives a server's invalidation messages (Redis's client-side caching, RESP2): a hiredis
/// context (over TLS when the store's connections are) on a thread of its own that sends `CLIENT ID`, then `SUBSCRIBE __redis__:invalidate`, and reports
/// every message to its ``InvalidationListener``.
///
/// The thread waits in `poll(2)` on the socket and on a pipe that ``reconnect()`` and ``shutdown()`` write to.
/// When the socket is quiet for `healthCheckInterval` it sends `PING` (allowed while subscribed), and when
/// nothing at all comes back within another interval the connection counts as lost: a server that vanished
/// without closing the connection is noticed within two intervals, a closed connection at once. A lost
/// connection is reported, closed and opened again, with the store's reconnect back-off between failed
/// attempts.
///
/// One subscriber serves one server; a store on several servers (a cluster) needs one per node, since
/// `REDIRECT` names a client of the same server.
final class InvalidationSubscriber: Sendable {
    /// The channel Redis publishes invalidations on for RESP2 clients.
    static let channel = "__redis__:invalidate"

    private struct Control {
        var stopping = false
        var reconnectRequested = false
        var exited = false
        var exitWaiters: [CheckedContinuation<Void, Never>] = []
    }

    private let configuration: RESPStore.Configuration
    private let tlsContext: StoreTLSContext?
    private let healthCheckInterval: Duration
    private let logger: Logger
    private let listener: any InvalidationListener
    private let control = Mutex(Control())
    /// Read end and write end of the wake-up pipe.
    private let wakeRead: Int32
    private let wakeWrite: Int32

    /// Starts the subscriber's thread, which connects at once (over TLS with `tlsContext` when `configuration`
    /// asks for TLS, as the store's data connections do).
    init(
        configuration: RESPStore.Configuration, tlsContext: StoreTLSContext?, healthCheckInterval: Duration,
        logger: Logger, listener: any InvalidationListener
    ) {
        self.configuration = configuration
        self.tlsContext = tlsContext
        self.healthCheckInterval = max(.milliseconds(10), healthCheckInterval)
        self.logger = logger
        self.listener = listener
        var fds: [Int32] = [-1, -1]
        if pipe(&fds) != 0 { fds = [-1, -1] }
        for fd in fds where fd >= 0 { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }
        wakeRead = fds[0]
        wakeWrite = fds[1]
        let thread = Thread { [self] in
            cached_name_current_thread("cached-invalid")
            self.run()
        }
        thread.name = "cached-invalid"
        thread.start()
    }

    deinit {
        if wakeRead >= 0 { close(wakeRead) }
        if wakeWrite >= 0 { close(wakeWrite) }
    }

    /// Drops the current connection (if any) and subscribes again on a new one.
    func reconnect() {
        control.withLock { $0.reconnectRequested = true }
        wake()
    }

    /// Starts stopping without waiting for the thread.
    func beginShutdown() {
        control.withLock { $0.stopping = true }
        wake()
    }

    /// Whether the thread has exited.
    var hasExited: Bool { control.withLock { $0.exited } }

    /// Stops the thread and waits until it has exited.
    func shutdown() async {
        beginShutdown()
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            let exited: Bool = control.withLock {
                if $0.exited { return true }
                $0.exitWaiters.append(done)
                return false
            }
            if exited { done.resume() }
        }
    }

    // MARK: the thread

    private enum SessionEnd {
        case stopped
        case lost(String, wasSubscribed: Bool)
        case unsupported(String)
    }

    private var stopping: Bool { control.withLock { $0.stopping } }

    private func run() {
        // As on the pool's threads: a write to a closed socket fails with EPIPE instead of ending the process.
        var blocked = sigset_t()
        sigemptyset(&blocked)
        sigaddset(&blocked, SIGPIPE)
        pthread_sigmask(SIG_BLOCK, &blocked, nil)

        var failures = 0
        loop: while !stopping {
            control.withLock { $0.reconnectRequested = false }
            switch session() {
            case .stopped:
                break loop
            case .unsupported(let reason):
                listener.unsupported(reason: reason)
                break loop
            case .lost(let reason, let wasSubscribed):
                if wasSubscribed {
                    failures = 0
                    listener.unsubscribed(reason: reason)
                    logger.debug("invalidation channel lost", metadata: ["reason": "\(reason)"])
                } else {
                    failures += 1
                    logger.debug("cannot subscribe to invalidations", metadata: ["reason": "\(reason)"])
                    sleep(nanoseconds: reconnectDelay(afterFailures: failures))
                }
            }
        }
        let waiters: [CheckedContinuation<Void, Never>] = control.withLock { control in
            control.exited = true
            let waiters = control.exitWaiters
            control.exitWaiters = []
            return waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Connects, subscribes and listens until the connection is lost or the subscriber stops.
    private func session() -> SessionEnd {
        let connection: HiredisConnection
        switch HiredisConnection.open(configuration, tlsContext: tlsContext) {
        case .success(let opened): connection = opened
        case .failure(let error): return .lost(error.message, wasSubscribed: false)
        }
        defer { connection.close() }

        var clientIDCommand = RESPCommand("CLIENT", argumentCount: 1)
        clientIDCommand.append("ID")
        let clientID: Int64
        switch connection.roundTrip(clientIDCommand) {
        case .success(.integer(let id)): clientID = id
        case .success(.error(let text)) where Self.isPermanentRefusal(text): return .unsupported("CLIENT ID: \(text)")
        case .success(let other): return .lost("CLIENT ID answered \(other.typeName)", wasSubscribed: false)
        case .failure(let error): return .lost(error.message, wasSubscribed: false)
        }
        var subscribe = RESPCommand("SUBSCRIBE", argumentCount: 1)
        subscribe.append(Self.channel)
        switch connection.roundTrip(subscribe) {
        case .success(.array(let elements)) where elements.first.map(Self.isBulk("subscribe")) == true: break
        case .success(.error(let text)) where Self.isPermanentRefusal(text): return .unsupported("SUBSCRIBE: \(text)")
        case .success(let other): return .lost("SUBSCRIBE answered \(other.typeName)", wasSubscribed: false)
        case .failure(let error): return .lost(error.message, wasSubscribed: false)
        }
        listener.subscribed(clientID: clientID)
        logger.debug("subscribed to invalidations", metadata: ["client-id": "\(clientID)"])
        return listen(on: connection)
    }

    /// Reports messages until the connection fails, stays silent past the health check, or the subscriber is
    /// told to stop or reconnect.
    private func listen(on connection: HiredisConnection) -> SessionEnd {
        let interval = UInt64(clamping: healthCheckInterval.storeNanoseconds)
        var quietSince = monotonicNanoseconds()
        var pingSent = false
        while true {
            // Whatever the last read brought may hold several replies.
            while true {
                switch connection.bufferedReply() {
                case .success(nil): break
                case .success(let reply?):
                    handle(reply)
                    quietSince = monotonicNanoseconds()
                    pingSent = false
                    continue
                case .failure(let error): return .lost(error.message, wasSubscribed: true)
                }
                break
            }
            let (stop, reconnect) = control.withLock { ($0.stopping, $0.reconnectRequested) }
            if stop { return .stopped }
            if reconnect { return .lost("reconnect requested", wasSubscribed: true) }

            let elapsed = monotonicNanoseconds() &- quietSince
            if elapsed >= interval {
                if pingSent { return .lost("no answer to PING within \(healthCheckInterval)", wasSubscribed: true) }
                if let error = connection.append(RESPCommand("PING", argumentCount: 0)) ?? connection.flushOutput() {
                    return .lost(error.message, wasSubscribed: true)
                }
                pingSent = true
                quietSince = monotonicNanoseconds()
                continue
            }
            var fds = [
                pollfd(fd: connection.socket, events: Int16(POLLIN), revents: 0),
                pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0),
            ]
            let timeout = Int32(clamping: (interval - elapsed) / 1_000_000 + 1)
            let ready = poll(&fds, nfds_t(fds.count), timeout)
            if ready < 0 && errno != EINTR { return .lost("poll failed: errno \(errno)", wasSubscribed: true) }
            if fds[1].revents != 0 { drainWakePipe() }
            if fds[0].revents != 0, let error = connection.readInput() {
                return .lost(error.message, wasSubscribed: true)
            }
        }
    }

    private func handle(_ reply: RESPReply) {
        // ["message", "__redis__:invalidate", [key…] | nil]; also PING's ["pong", ""] and subscribe confirmations.
        guard case .array(let elements) = reply, elements.count == 3, Self.isBulk("message")(elements[0]) else { return }
        switch elements[2] {
        case .null:
            listener.invalidateAll()
        case .array(let keys):
            var invalidated: [StoreKey] = []
            invalidated.reserveCapacity(keys.count)
            for case .bulk(let key) in keys { invalidated.append(StoreKey(String(buffer: key))) }
            if invalidated.count == keys.count {
                listener.invalidate(invalidated)
            } else {
                // Not a list of keys: the safe reading is that anything may have changed.
                listener.invalidateAll()
            }
        case .bulk(let key):
            listener.invalidate([StoreKey(String(buffer: key))])
        default:
            listener.invalidateAll()
        }
    }

    // MARK: helpers

    /// Whether an error reply says that the server does not know the command or subcommand.
    static func isUnknownCommand(_ text: String) -> Bool {
        let lowered = text.lowercased()
        return lowered.contains("unknown command") || lowered.contains("unknown subcommand")
    }

    /// Whether an error reply refuses for good what the subscriber needs: an unknown command, or one the user's
    /// ACL does not allow (`NOPERM`: without `CLIENT`, or without access to the invalidation channel, as under
    /// Redis 7's default `acl-pubsub-default resetchannels`). Reconnecting would be refused the same way.
    static func isPermanentRefusal(_ text: String) -> Bool {
        isUnknownCommand(text) || text.hasPrefix("NOPERM")
    }

    private static func isBulk(_ text: String) -> (RESPReply) -> Bool {
        { reply in
            guard case .bulk(let bytes) = reply else { return false }
            return String(buffer: bytes).lowercased() == text
        }
    }

    private func wake() {
        guard wakeWrite >= 0 else { return }
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
    }

    private func drainWakePipe() {
        var buffer = [UInt8](repeating: 0, count: 64)
        while read(wakeRead, &buffer, buffer.count) > 0 {}
    }

    /// Waits `nanoseconds`, or less if woken.
    private func sleep(nanoseconds: UInt64) {
        var fds = [pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
        let timeout = Int32(clamping: nanoseconds / 1_000_000)
        if poll(&fds, 1, timeout) > 0 { drainWakePipe() }
    }

    /// The store's reconnect back-off: doubling from the minimum to the maximum delay.
    private func reconnectDelay(afterFailures failures: Int) -> UInt64 {
        let minimum = max(1, configuration.minReconnectDelay.storeNanoseconds)
        let maximum = max(minimum, configuration.maxReconnectDelay.storeNanoseconds)
        let doubled = minimum.multipliedReportingOverflow(by: Int64(1) << Int64(min(failures - 1, 30)))
        return UInt64(doubled.overflow ? maximum : min(maximum, doubled.partialValue))
    }
}
