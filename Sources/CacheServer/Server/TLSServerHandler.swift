import CachedTLS
import Logging
import NIOCore
import Synchronization

/// TLS on a connection accepted on `tls-port`, below the ``ConnectionHandler``: decrypts what the client sends
/// and encrypts the replies. The connection handler learns of the connection (`channelActive`) only once the
/// handshake has completed, so a client that fails it (a plain-text client, a certificate refused) never
/// becomes a client of the server: it is logged at debug and closed. A handshake must end within
/// ``handshakeTimeout``, and handshakes under way count against `maxclients`, so that connections that never
/// finish one cannot hold the server's descriptors.
final class TLSServerHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let connection: TLSConnection
    private let logger: Logger
    /// The connection's socket, which encrypted replies are sent to directly while the channel has nothing
    /// queued (as ``ConnectionHandler`` does for plain connections); -1 to always go through the channel.
    @exclusivity(unchecked) private var descriptor: CInt
    /// Encrypted bytes handed to the channel that it has not written yet: while there are any, the next go
    /// behind them.
    @exclusivity(unchecked) private var channelWrites = 0
    @exclusivity(unchecked) private var established = false
    /// The connection handler has been told the connection is open (and so must be told when it closes).
    @exclusivity(unchecked) private var announced = false
    @exclusivity(unchecked) private var active = false
    @exclusivity(unchecked) private var closing = false
    /// The client sent close_notify: once the replies to what came before it are out, the session ends.
    @exclusivity(unchecked) private var peerClosed = false
    private let handshakes: PendingHandshakes
    /// Counted in ``handshakes`` until the handshake ends.
    @exclusivity(unchecked) private var counted = false
    private var handshakeTimer: Scheduled<Void>?
    /// How long a client has to complete the handshake.
    static let handshakeTimeout: TimeAmount = .seconds(10)
    /// Plaintext is decrypted into buffers of this size at most (a TLS record holds up to 16 KiB).
    private static let readChunk = 16 * 1024

    private let clientCount: () -> Int
    private let maxClients: () -> Int

    /// A handler for `connection`; `server` gives the handshakes' count, the clients and `maxclients`.
    init(connection: TLSConnection, server: ServerState, descriptor: CInt = -1) {
        self.connection = connection
        self.logger = server.logger
        self.handshakes = server.handshakes
        self.clientCount = { server.clients.count }
        self.maxClients = { server.config.maxClients }
        self.descriptor = descriptor
    }

    func channelActive(context: ChannelHandlerContext) {
        active = true
        counted = handshakes.begin(clients: clientCount(), maxClients: maxClients())
        guard counted else {
            // Past maxclients, counting the handshakes under way: refused before any TLS work.
            logger.debug("TLS handshake refused: max number of clients reached")
            closing = true
            descriptor = -1
            context.close(promise: nil)
            return
        }
        let channel = context.channel
        handshakeTimer = context.eventLoop.scheduleTask(in: Self.handshakeTimeout) {
            channel.close(promise: nil)
        }
        // The client speaks first; nothing to do until it has.
    }

    func channelInactive(context: ChannelHandlerContext) {
        active = false
        descriptor = -1
        endHandshake()
        // The connection handler saw the connection open only if it was told so.
        if announced { context.fireChannelInactive() }
    }

    /// The handshake is over (done, failed, or the connection closed): no longer counted, no deadline.
    private func endHandshake() {
        handshakeTimer?.cancel()
        handshakeTimer = nil
        if counted {
            counted = false
            handshakes.end()
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let incoming = unwrapInboundIn(data)
        guard !closing else { return }
        incoming.withUnsafeReadableBytes { connection.receive($0) }
        if !established {
            switch connection.handshake() {
            case .done:
                established = true
                flushOutput(context: context)
                // The flush may have found the connection gone (and closed it): then it never opened.
                guard active && !closing && context.channel.isActive else { return }
                endHandshake()
                announced = true
                context.fireChannelActive()
            case .needsInput:
                flushOutput(context: context)
                return
            case .closed:
                fail(context: context, reason: "the client closed the connection during the handshake")
                return
            case .failed(let reason):
                fail(context: context, reason: reason)
                return
            }
        }
        readPlaintext(context: context)
    }

    /// Where plaintext is decrypted: one buffer for the connection, reused once the connection handler has let
    /// go of what it was given (it keeps only an incomplete command's bytes).
    @exclusivity(unchecked) private var inbound = ByteBuffer()

    /// Passes on everything that can be decrypted now.
    private func readPlaintext(context: ChannelHandlerContext) {
        while announced && !closing && !peerClosed {
            inbound.clear()
            inbound.reserveCapacity(minimumWritableBytes: Self.readChunk)
            let outcome = inbound.writeWithUnsafeMutableBytes(minimumWritableBytes: 0) { raw -> Int in
                let outcome = connection.read(into: raw)
                if case .done(let count) = outcome { return count }
                self.lastReadOutcome = outcome
                return 0
            }
            if outcome > 0 {
                if let upstream { upstream.receive(inbound) } else { context.fireChannelRead(wrapInboundOut(inbound)) }
                // Another read would only say it needs input (one call fewer per request).
                if !connection.mayRead { return }
                continue
            }
            switch lastReadOutcome {
            case .closed:
                // close_notify from the client: as a plain connection's end of stream, the replies to what came
                // before it go out (at the end of this read), then the session ends.
                peerClosed = true
            case .failed(let reason):
                fail(context: context, reason: reason)
            default:
                // Renegotiation or post-handshake messages may have produced bytes to send.
                if connection.pendingOutput > 0 { flushOutput(context: context) }
            }
            lastReadOutcome = .needsInput
            return
        }
    }

    @exclusivity(unchecked) private var lastReadOutcome: TLSConnection.Outcome = .needsInput

    func channelReadComplete(context: ChannelHandlerContext) {
        if announced { context.fireChannelReadComplete() }
        if peerClosed && !closing { context.close(promise: nil) }
    }

    /// The connection handler above, which plaintext is handed to directly. Both live in the channel's pipeline
    /// until it is torn down, after which no read comes; the connection handler holds this one.
    unowned(unsafe) var upstream: ConnectionHandler?

    /// The handler's place in the pipeline, while it is in one: what ``sendReplies(_:)`` writes through when
    /// the socket does not take everything.
    @exclusivity(unchecked) private var context: ChannelHandlerContext?

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    /// Encrypts replies of the ``ConnectionHandler`` above and sends them (straight to the socket when it can),
    /// as a write and a flush down the pipeline would, without going through the pipeline (the connection
    /// handler is the only handler above this one). On the event loop. `promise`, when given, completes when the
    /// encrypted replies are written (or fails with the connection).
    func sendReplies(_ plaintext: ByteBuffer, promise: EventLoopPromise<Void>? = nil) {
        guard let context else {
            promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        encrypt(plaintext, context: context, promise: promise, flush: true)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        encrypt(unwrapOutboundIn(data), context: context, promise: promise, flush: false)
    }

    private func encrypt(_ plaintext: ByteBuffer, context: ChannelHandlerContext, promise: EventLoopPromise<Void>?, flush: Bool) {
        guard established, !closing else {
            promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        let outcome = plaintext.withUnsafeReadableBytes { connection.write($0) }
        guard outcome == .done(plaintext.readableBytes) else {
            promise?.fail(ChannelError.ioOnClosedChannel)
            if case .failed(let reason) = outcome {
                fail(context: context, reason: reason)
            } else {
                fail(context: context, reason: "the TLS session ended while a reply was written")
            }
            return
        }
        emit(context: context, promise: promise, flush: flush)
    }

    /// Sends the encrypted bytes waiting: straight to the socket when the channel has nothing queued, else (and
    /// what the socket does not take) through the channel, counted so that later bytes queue behind them.
    private func emit(context: ChannelHandlerContext, promise: EventLoopPromise<Void>?, flush: Bool) {
        var encrypted = takeOutput(context: context)
        if descriptor >= 0 && channelWrites == 0 && DirectSend.send(&encrypted, to: descriptor) {
            promise?.succeed(())
            return
        }
        var written = promise
        if descriptor >= 0 {
            channelWrites += 1
            written = promise ?? context.eventLoop.makePromise(of: Void.self)
            written!.futureResult.assumeIsolated().whenComplete { _ in self.channelWrites -= 1 }
        }
        if flush {
            context.writeAndFlush(wrapOutboundOut(encrypted), promise: written)
        } else {
            context.write(wrapOutboundOut(encrypted), promise: written)
        }
    }

    func flush(context: ChannelHandlerContext) {
        context.flush()
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        if mode == .all && established && !closing && active {
            closing = true
            descriptor = -1
            // Tell the client the session ends (close_notify), without waiting for its answer.
            connection.shutdown()
            if connection.pendingOutput > 0 {
                context.writeAndFlush(wrapOutboundOut(takeOutput(context: context)), promise: nil)
            }
        }
        context.close(mode: mode, promise: promise)
    }

    /// Where encrypted bytes go out: one buffer for the connection, reused once the channel has written it (a new
    /// one while the channel still holds it).
    @exclusivity(unchecked) private var outbound = ByteBuffer()

    /// The encrypted bytes waiting to be sent, in one buffer.
    private func takeOutput(context: ChannelHandlerContext) -> ByteBuffer {
        let pending = connection.pendingOutput
        outbound.clear()
        outbound.writeWithUnsafeMutableBytes(minimumWritableBytes: pending) { connection.takeOutput(into: $0) }
        return outbound
    }

    private func flushOutput(context: ChannelHandlerContext) {
        guard connection.pendingOutput > 0 else { return }
        emit(context: context, promise: nil, flush: true)
    }

    /// A handshake or a record that failed: logged (at debug, as Redis logs at its verbose level), and the
    /// connection closed after any alert that tells the client why.
    private func fail(context: ChannelHandlerContext, reason: String) {
        guard !closing else { return }
        closing = true
        descriptor = -1
        let client = context.channel.remoteAddress.map { "\($0)" } ?? "?"
        if established {
            logger.debug("TLS error on a client connection", metadata: ["client": "\(client)", "error": "\(reason)"])
        } else {
            logger.debug("Error accepting a client connection", metadata: ["client": "\(client)", "error": "\(reason)"])
        }
        if connection.pendingOutput > 0 {
            let channel = context.channel
            context.writeAndFlush(wrapOutboundOut(takeOutput(context: context))).whenComplete { _ in
                channel.close(promise: nil)
            }
        } else {
            context.close(promise: nil)
        }
    }
}

/// TLS handshakes under way, counted with the clients against `maxclients` (a connection becomes a client only
/// once its handshake is done).
package final class PendingHandshakes: Sendable {
    private let count = Atomic<Int>(0)

    init() {}

    /// Handshakes under way now.
    package var current: Int { count.load(ordering: .relaxed) }

    /// Counts a new handshake; false (not counted) when `clients` and the handshakes already reach `maxClients`.
    func begin(clients: Int, maxClients: Int) -> Bool {
        let started = count.wrappingAdd(1, ordering: .relaxed).newValue
        if clients + started > maxClients {
            count.wrappingSubtract(1, ordering: .relaxed)
            return false
        }
        return true
    }

    func end() {
        count.wrappingSubtract(1, ordering: .relaxed)
    }
}
