import CachedTLS
#if canImport(Glibc)
import Glibc
#endif
import Logging
import NIOCore

/// TLS on a connection accepted on `tls-port`, below the ``ConnectionHandler``: decrypts what the client sends
/// and encrypts the replies. The connection handler learns of the connection (`channelActive`) only once the
/// handshake has completed, so a client that fails it (a plain-text client, a certificate refused) never
/// becomes a client of the server: it is logged at debug and closed.
final class TLSServerHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let connection: TLSConnection
    private let logger: Logger
    /// The connection's socket, which encrypted replies are sent to directly while the channel has nothing
    /// queued (as ``ConnectionHandler`` does for plain connections); -1 to always go through the channel.
    private var descriptor: CInt
    /// Encrypted bytes handed to the channel that it has not written yet: while there are any, the next go
    /// behind them.
    private var channelWrites = 0
    private var established = false
    private var active = false
    private var closing = false
    /// Plaintext is decrypted into buffers of this size at most (a TLS record holds up to 16 KiB).
    private static let readChunk = 16 * 1024

    init(connection: TLSConnection, logger: Logger, descriptor: CInt = -1) {
        self.connection = connection
        self.logger = logger
        self.descriptor = descriptor
    }

    func channelActive(context: ChannelHandlerContext) {
        active = true
        // The client speaks first; nothing to do until it has.
    }

    func channelInactive(context: ChannelHandlerContext) {
        active = false
        descriptor = -1
        // The connection handler saw the connection open only if the handshake completed.
        if established { context.fireChannelInactive() }
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
    private var inbound = ByteBuffer()

    /// Passes on everything that can be decrypted now.
    private func readPlaintext(context: ChannelHandlerContext) {
        while !closing {
            inbound.clear()
            inbound.reserveCapacity(minimumWritableBytes: Self.readChunk)
            let outcome = inbound.writeWithUnsafeMutableBytes(minimumWritableBytes: 0) { raw -> Int in
                let outcome = connection.read(into: raw)
                if case .done(let count) = outcome { return count }
                self.lastReadOutcome = outcome
                return 0
            }
            if outcome > 0 {
                context.fireChannelRead(wrapInboundOut(inbound))
                // Another read would only say it needs input (one call fewer per request).
                if !connection.mayRead { return }
                continue
            }
            switch lastReadOutcome {
            case .closed:
                // close_notify from the client: answer it and close, as a plain connection's end of stream.
                connection.shutdown()
                flushOutput(context: context)
                context.close(promise: nil)
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

    private var lastReadOutcome: TLSConnection.Outcome = .needsInput

    func channelReadComplete(context: ChannelHandlerContext) {
        if established { context.fireChannelReadComplete() }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let plaintext = unwrapOutboundIn(data)
        guard established, !closing else {
            promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        let outcome = plaintext.withUnsafeReadableBytes { connection.write($0) }
        if case .failed(let reason) = outcome {
            promise?.fail(ChannelError.ioOnClosedChannel)
            fail(context: context, reason: reason)
            return
        }
        emit(context: context, promise: promise, flush: false)
    }

    /// Sends the encrypted bytes waiting: straight to the socket when the channel has nothing queued, else (and
    /// what the socket does not take) through the channel, counted so that later bytes queue behind them.
    private func emit(context: ChannelHandlerContext, promise: EventLoopPromise<Void>?, flush: Bool) {
        var encrypted = takeOutput(context: context)
        if descriptor >= 0 && channelWrites == 0 {
            // One non-blocking send, without the channel's bookkeeping: what the socket does not take goes to the
            // channel, which writes it when the socket is writable.
            let fd = descriptor
            let sent = encrypted.withUnsafeReadableBytes { send(fd, $0.baseAddress, $0.count, CInt(MSG_DONTWAIT | MSG_NOSIGNAL)) }
            if sent == encrypted.readableBytes {
                promise?.succeed(())
                return
            }
            if sent > 0 { encrypted.moveReaderIndex(forwardBy: sent) }
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
    private var outbound = ByteBuffer()

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
