import CacheCore
import Logging
import NIOCore
import RESP

/// One client connection: parses commands straight out of the receive buffer, runs each on the event loop,
/// appends its reply, and flushes once per read burst.
package final class ConnectionHandler: ChannelInboundHandler, RemovableChannelHandler {
    package typealias InboundIn = ByteBuffer
    package typealias OutboundOut = ByteBuffer

    private let server: ServerState
    // The state below is touched only on the channel's event loop, one callback at a time, so the per-command
    // path skips Swift's run-time exclusivity checks on it.
    @exclusivity(unchecked) private var session: ClientSession?
    @exclusivity(unchecked) private var parser = RESPRequestParser()
    /// Bytes of a command that has not arrived whole yet.
    @exclusivity(unchecked) private var pending: ByteBuffer?
    @exclusivity(unchecked) private var output: ByteBuffer
    @exclusivity(unchecked) private var closing = false
    @exclusivity(unchecked) private var limits: RESPRequestLimits
    @exclusivity(unchecked) private var queryBufferLimit: Int
    @exclusivity(unchecked) private var outputLimits: ServerConfiguration.OutputBufferLimits
    /// The context, kept to write messages that are not replies (pub/sub, invalidations) between reads.
    @exclusivity(unchecked) private var context: ChannelHandlerContext?
    @exclusivity(unchecked) private var limitsGeneration = 0

    /// Redis 7.0's reply to a non-local client while protected mode is on and no password is set.
    static let protectedModeMessage =
        "DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Redis you may adopt one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. 4) Set up an authentication password for the default user. NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside."

    /// The channel's write buffer marks (NIO's defaults, set explicitly because the output limit check relies
    /// on them): the channel turns unwritable above `high` bytes waiting.
    package static let writeBufferWaterMark = ChannelOptions.Types.WriteBufferWaterMark(low: 32 * 1024, high: 64 * 1024)

    /// Replies are handed to the channel once they pass this size, even in the middle of a read burst.
    private static let writeThreshold = 64 * 1024

    /// The path of the Unix socket this connection came through, or nil for TCP.
    private let unixSocketPath: String?

    /// The connection's socket, when the server accepted it itself (TCP or the Unix socket), while replies may
    /// be written to it directly; -1 otherwise. See ``write(context:flush:)``.
    @exclusivity(unchecked) private var descriptor: CInt
    /// The socket replies are sent to directly: ``descriptor``, unless a handler below this one (TLS) must see
    /// every byte; -1 then.
    @exclusivity(unchecked) private var sendDescriptor: CInt
    /// Replies handed to the channel that it has not finished writing. While there are any, later replies go
    /// through the channel too, behind them.
    @exclusivity(unchecked) private var channelWrites = 0
    /// On a TLS connection, the handler below this one: replies are handed to it directly, not through the
    /// pipeline (one encryption and usually one `send`, without the pipeline's write and flush).
    private let tls: TLSServerHandler?

    /// The poller of the connection's event loop, which watches the socket and is told of every read (see
    /// ``BusyPoll``); connections the server accepted itself only, as it needs the descriptor.
    private let busyPoll: BusyPoll?

    /// A handler for a connection: `unixSocketPath` names the Unix socket it came through (nil for TCP);
    /// `descriptor` is its socket, when the server accepted it itself (without one, as in tests on an embedded
    /// channel, every reply goes through the channel); `busyPoll` is the poller of the event loop the connection
    /// lives on (used with `descriptor` only). On a TLS connection, `tls` is the handler below this one, which
    /// encrypts the replies and sends them.
    package convenience init(
        server: ServerState, unixSocketPath: String? = nil, descriptor: CInt? = nil, busyPoll: BusyPoll? = nil
    ) {
        self.init(server: server, unixSocketPath: unixSocketPath, descriptor: descriptor, busyPoll: busyPoll, tls: nil)
    }

    init(server: ServerState, unixSocketPath: String?, descriptor: CInt?, busyPoll: BusyPoll?, tls: TLSServerHandler?) {
        self.server = server
        self.unixSocketPath = unixSocketPath
        self.descriptor = descriptor ?? -1
        self.sendDescriptor = tls == nil ? descriptor ?? -1 : -1
        self.tls = tls
        self.busyPoll = descriptor == nil ? nil : busyPoll
        self.output = ByteBuffer()
        self.limitsGeneration = server.limitsGeneration
        (self.limits, self.queryBufferLimit, self.outputLimits) = server.requestLimits
        tls?.upstream = self
    }

    package func channelActive(context: ChannelHandlerContext) {
        let channel = context.channel
        // Redis shows a Unix socket client's address and local address both as `<path>:0`.
        let remote = unixSocketPath.map { "\($0):0" } ?? channel.remoteAddress.map(Self.describe) ?? "?:0"
        let local = unixSocketPath.map { "\($0):0" } ?? channel.localAddress.map(Self.describe) ?? "?:0"
        let isLocal = unixSocketPath != nil || remote.hasPrefix("127.") || remote.hasPrefix("[::1]")
        let config = server.config
        let session = ClientSession(
            id: server.clients.makeID(),
            remoteAddress: remote,
            localAddress: local,
            isLocal: isLocal,
            now: server.clock.nowMilliseconds(),
            authenticated: server.users.defaultAuthenticates,
            user: server.users.defaultUser,
            channel: channel,
            unixSocketPath: unixSocketPath
        )
        let reference = HandlerReference(self)
        self.reference = reference
        session.outlet = Outlet(reference: NIOLoopBound(reference, eventLoop: context.eventLoop))
        self.session = session
        lane = server.transactions.lane(for: context.eventLoop)
        session.lane = lane
        session.statistics = server.commandStatistics.statistics(for: context.eventLoop)
        session.replyLimits = Self.replyLimits(outputLimits)
        self.context = context
        output = context.channel.allocator.buffer(capacity: 4096)
        server.stats.connectionsReceived.wrappingAdd(1, ordering: .relaxed)
        if config.protectedMode && server.users.defaultHasNoPassword && !isLocal {
            server.logger.notice("Refused a connection in protected mode", metadata: ["client": "\(remote)"])
            var reply = context.channel.allocator.buffer(capacity: 1024)
            reply.writeRESPError(Self.protectedModeMessage)
            closing = true
            let channel = context.channel
            context.writeAndFlush(wrapOutboundOut(reply)).whenComplete { _ in channel.close(promise: nil) }
            return
        }
        if server.clients.count >= config.maxClients {
            server.stats.rejectedConnections.wrappingAdd(1, ordering: .relaxed)
            var reply = context.channel.allocator.buffer(capacity: 64)
            reply.writeRESPError("ERR max number of clients reached")
            closing = true
            let channel = context.channel
            context.writeAndFlush(wrapOutboundOut(reply)).whenComplete { _ in channel.close(promise: nil) }
            return
        }
        server.clients.add(session)
        if descriptor >= 0 { busyPoll?.watch(descriptor: descriptor) }
        context.fireChannelActive()
    }

    package func channelInactive(context: ChannelHandlerContext) {
        descriptor = -1
        sendDescriptor = -1
        closing = true
        reference?.handler = nil
        reference = nil
        blockTimer?.cancel()
        blockTimer = nil
        if let session {
            server.clients.remove(session.id)
            server.monitors.remove(id: session.id)
            if session.isBlocked { server.blocked.remove(session.id) }
            if session.tracking != nil { server.tracking.disable(session.id) }
            if !session.watchedKeys.isEmpty { server.unwatchAll(session) }
            if session.modes.contains(.subscribed) {
                server.pubsub.remove(session.id, channels: session.channels, patterns: session.patterns)
            }
            server.stats.commandsOfClosedClients.wrappingAdd(session.commandsProcessed, ordering: .relaxed)
            server.stats.netInputBytes.wrappingAdd(session.inputBytes, ordering: .relaxed)
            server.stats.netOutputBytes.wrappingAdd(session.outputBytes, ordering: .relaxed)
        }
        self.context = nil
        context.fireChannelInactive()
    }

    // MARK: messages that are not replies

    /// Writes on the connection's event loop for other connections and the sweeper.
    private struct Outlet: SessionOutlet {
        let reference: NIOLoopBound<HandlerReference>

        func send(_ write: @escaping @Sendable (ClientSession, inout ByteBuffer) -> Void) {
            let reference = self.reference
            reference.eventLoop.execute { reference.value.handler?.deliver(write) }
        }

        func release(_ release: BlockedClients.Release) {
            let reference = self.reference
            reference.eventLoop.execute { reference.value.handler?.release(release) }
        }
    }

    /// The session holds its outlet and the handler holds the session: the handler drops the outlet's reference
    /// to it when the channel goes inactive or the handler is removed, which ends the cycle. (A weak reference
    /// would do the same, but an object that is referenced weakly keeps its reference count in a side table, and
    /// every retain and release of the handler, several per read, would take the slower path through it.)
    private final class HandlerReference {
        var handler: ConnectionHandler?
        init(_ handler: ConnectionHandler) { self.handler = handler }
    }

    /// The outlet's reference to this handler, until the channel goes inactive.
    @exclusivity(unchecked) private var reference: HandlerReference?

    package func handlerRemoved(context: ChannelHandlerContext) {
        reference?.handler = nil
        reference = nil
    }

    /// Appends a pub/sub message or an invalidation to the output and sends it. Runs between reads, so any
    /// reply already in the output goes first.
    private func deliver(_ write: (ClientSession, inout ByteBuffer) -> Void) {
        guard !closing, let context, let session else { return }
        refreshLimits()  // a subscriber may send nothing for a long time
        // A message written to the client is interaction, for `timeout` (a tracking client that only receives).
        session.noteInteraction(server.clock.nowMilliseconds())
        write(session, &output)
        flush(context: context)
    }

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        read(unwrapInboundIn(data), context: context)
    }

    /// Plaintext from the TLS handler below, as ``channelRead(context:data:)`` would get it, without the trip
    /// through the pipeline.
    func receive(_ plaintext: ByteBuffer) {
        guard let context else { return }
        read(plaintext, context: context)
    }

    @inline(__always)
    private func read(_ bytes: ByteBuffer, context: ChannelHandlerContext) {
        var incoming = bytes
        guard !closing, let session else { return }
        // While this read's commands run, a transaction on another event loop waits (and the other way round).
        if let lane { server.transactions.enter(lane) }
        defer { if let lane { server.transactions.leave(lane) } }
        session.noteTraffic(input: incoming.readableBytes)
        refreshLimits()
        let now = server.clock.nowMilliseconds()
        session.noteInteraction(now)
        // A client that waits (WAIT, a pause) sends on; what it sends runs once it is released.
        if session.blockKind != .none {
            holdInput(&incoming, context: context)
            return
        }
        if var assembly = pending {
            pending = nil
            guard complete(&assembly, from: &incoming, session: session, now: now, context: context) else { return }
        }
        process(&incoming, session: session, now: now, context: context)
    }

    /// CONFIG SET applies to connections that are already open, as in Redis; one relaxed load tells.
    @inline(__always)
    private func refreshLimits() {
        let generation = server.limitsGeneration
        if generation != limitsGeneration {
            limitsGeneration = generation
            (limits, queryBufferLimit, outputLimits) = server.requestLimits
            session?.replyLimits = Self.replyLimits(outputLimits)
        }
    }

    /// How much a command's reply may grow the connection's replies, for a normal client and for a subscriber:
    /// the class's hard limit (none when 0), and never past ``CommandContext/maxReplyBytes``.
    private static func replyLimits(_ limits: ServerConfiguration.OutputBufferLimits) -> (normal: Int, pubsub: Int) {
        func bound(_ limit: ServerConfiguration.OutputBufferLimit) -> Int {
            limit.hard > 0 ? min(limit.hard, CommandContext.maxReplyBytes) : CommandContext.maxReplyBytes
        }
        return (bound(limits.normal), bound(limits.pubsub))
    }

    package func channelReadComplete(context: ChannelHandlerContext) {
        flush(context: context)
        busyPoll?.noteRead()
    }

    package func errorCaught(context: ChannelHandlerContext, error: any Error) {
        server.logger.debug("client connection error", metadata: ["error": "\(error)"])
        closing = true
        context.close(promise: nil)
    }

    // MARK: the command loop

    private enum Step {
        case consumed(Int)
        /// The command made the client wait (``ClientSession/blockKind``): the bytes it consumed (none when a
        /// pause holds it back, to run it again later).
        case blocked(Int)
        case needMore
        case failed(RESPProtocolError)
    }

    /// Parses the next command at the start of `buffer` and runs it; does not move the reader index.
    @inline(__always)
    private func step(_ buffer: ByteBuffer, session: ClientSession, now: Int64) -> Step {
        buffer.withUnsafeReadableBytes { bytes -> Step in
            do throws(RESPProtocolError) {
                switch try parser.parse(bytes, limits: limits, authenticated: session.authenticated) {
                case .command(let consumed, let isInline):
                    run(bytes, isInline: isInline, session: session, now: now)
                    if session.blockKind != .none { return .blocked(session.blockKind == .postponed ? 0 : consumed) }
                    return .consumed(consumed)
                case .skip(let consumed):
                    return .consumed(consumed)
                case .incomplete:
                    return .needMore
                }
            } catch {
                return .failed(error)
            }
        }
    }

    /// Runs every whole command in `buffer`, straight out of the bytes NIO read, and keeps a trailing part.
    private func process(_ buffer: inout ByteBuffer, session: ClientSession, now: Int64, context: ChannelHandlerContext) {
        prefetchKeys(buffer, session: session)
        while buffer.readableBytes > 0 && !closing {
            switch step(buffer, session: session, now: now) {
            case .consumed(let n):
                buffer.moveReaderIndex(forwardBy: n)
                afterCommand(session: session, context: context)
            case .blocked(let n):
                buffer.moveReaderIndex(forwardBy: n)
                if buffer.readableBytes > 0 { keepPending(&buffer, context: context) }
                startWaiting(session: session, context: context)
                return
            case .needMore:
                keepPending(&buffer, context: context)
                return
            case .failed(let error):
                protocolError(error, session: session, context: context)
                return
            }
        }
    }

    /// How many commands of a pipeline have their keys prefetched ahead of running them.
    private static let prefetchDepth = 16

    /// Starts loading the table slots of the keys of the commands after the first in `buffer` (the first runs
    /// at once): while the earlier commands run, the processor brings in the slots the later ones will read,
    /// instead of waiting for each in turn. Only a hint; the commands are parsed and run as usual.
    @inline(__always)
    private func prefetchKeys(_ buffer: ByteBuffer, session: ClientSession) {
        let database = server.keyspace.databases[session.db]
        buffer.withUnsafeReadableBytes { bytes in
            var first = true
            RESPKeyScanner.forEachKey(in: bytes, limit: Self.prefetchDepth + 1) { key in
                if first {
                    first = false
                    return
                }
                let hash = Keyspace.hasher.hash(key)
                database.shard(for: hash).prefetch(hash: hash)
            }
        }
    }

    /// Completes the command that the previous read cut in two. Rather than appending the whole new read to
    /// it (a copy, and a reallocation of a large buffer on every read of a pipelined stream), it appends only
    /// what the command still needs — the rest of a bulk payload when the parser knows its length, else a
    /// little at a time — runs it, and hands the unused part of the last piece back to `incoming`.
    /// - Returns: true when `incoming` is ready to be processed; false when it ran out first (the partial
    ///   command is kept) or the connection is closing.
    private func complete(
        _ assembly: inout ByteBuffer,
        from incoming: inout ByteBuffer,
        session: ClientSession,
        now: Int64,
        context: ChannelHandlerContext
    ) -> Bool {
        while true {
            switch step(assembly, session: session, now: now) {
            case .consumed(let n):
                // The bytes after the command came from the last piece taken from `incoming`: give them back.
                incoming.moveReaderIndex(to: incoming.readerIndex - (assembly.readableBytes - n))
                afterCommand(session: session, context: context)
                return !closing
            case .blocked(let n):
                // Keep what follows the command: the rest of the assembly, then the rest of the read.
                assembly.moveReaderIndex(forwardBy: n)
                assembly.writeBuffer(&incoming)
                if assembly.readableBytes > 0 { keepPending(&assembly, context: context) }
                startWaiting(session: session, context: context)
                return false
            case .needMore:
                guard incoming.readableBytes > 0 else {
                    keepPending(&assembly, context: context)
                    return false
                }
                let missing = assembly.withUnsafeReadableBytes {
                    parser.missingBulkBytes(available: $0.count, peek: $0)
                }
                if let missing, missing > assembly.writableBytes {
                    // A command that cannot fit in the query buffer limit is refused before its memory is taken.
                    guard assembly.readableBytes &+ missing <= queryBufferLimit else {
                        closeForQueryBufferLimit(assembly.readableBytes &+ missing, context: context)
                        return false
                    }
                    assembly.reserveCapacity(minimumWritableBytes: missing)
                }
                let take: Int
                if let missing {
                    take = min(incoming.readableBytes, max(missing, Self.assemblyStep))
                } else {
                    // A count line not complete yet: hand the parser the rest of the line at once (up to the line
                    // limit), so that it judges the whole line as Redis does, not a prefix that looks too long.
                    let window = min(incoming.readableBytes, limits.maxInlineLength &+ 2)
                    let lineEnd = incoming.withUnsafeReadableBytes {
                        UnsafeRawBufferPointer(rebasing: $0[..<window]).firstIndex(of: UInt8(ascii: "\n"))
                    }
                    take = lineEnd.map { $0 + 1 } ?? max(window, min(incoming.readableBytes, Self.assemblyStep))
                }
                var piece = incoming.readSlice(length: take)!
                assembly.writeBuffer(&piece)
            case .failed(let error):
                protocolError(error, session: session, context: context)
                return false
            }
        }
    }

    /// How much of a new read is appended at a time to a command whose length is not known yet.
    private static let assemblyStep = 1024

    private func protocolError(_ error: RESPProtocolError, session: ClientSession, context: ChannelHandlerContext) {
        output.writeRESPError(error.message)
        server.logger.debug(
            "protocol error from client", metadata: ["client": "\(session.remoteAddress)", "error": "\(error.message)"])
        closeAfterFlush(context: context)
    }

    @inline(__always)
    private func run(_ bytes: UnsafeRawBufferPointer, isInline: Bool, session: ClientSession, now: Int64) {
        parser.arguments.withUnsafeBufferPointer { spans in
            if isInline {
                parser.inlineStorage.withUnsafeBytes { storage in
                    let arguments = Arguments(base: storage.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!, spans: spans)
                    CommandExecutor.execute(arguments, session: session, server: server, now: now, reply: &output)
                }
            } else {
                let arguments = Arguments(base: bytes.baseAddress!, spans: spans)
                CommandExecutor.execute(arguments, session: session, server: server, now: now, reply: &output)
            }
        }
    }

    @inline(__always)
    private func afterCommand(session: ClientSession, context: ChannelHandlerContext) {
        if session.isMonitor != registeredMonitor {
            registeredMonitor = session.isMonitor
            // The feed reaches the connection through its outlet, on this event loop, like pub/sub messages.
            if registeredMonitor { server.monitors.add(session) } else { server.monitors.remove(id: session.id) }
        }
        if session.replyOverflowed {
            closeForOutputLimit(pending: output.readableBytes, context: context)
        } else if session.closeAfterReply {
            closeAfterFlush(context: context)
        } else if output.readableBytes >= Self.writeThreshold {
            write(context: context)
        }
    }

    @exclusivity(unchecked) private var registeredMonitor = false
    /// The transaction gate's lane of this connection's event loop.
    @exclusivity(unchecked) private var lane: TransactionGate.Lane?

    private func closeForQueryBufferLimit(_ length: Int, context: ChannelHandlerContext) {
        closeOverLimit("Closing client that reached max query buffer length", ("qbuf", length), context: context)
    }

    private func keepPending(_ buffer: inout ByteBuffer, context: ChannelHandlerContext) {
        if buffer.readableBytes > queryBufferLimit {
            closeForQueryBufferLimit(buffer.readableBytes, context: context)
            return
        }
        if buffer.readableBytes <= Self.assemblyStep * 8 && buffer.capacity > 2 * buffer.readableBytes + 4096 {
            // A short tail of a large read: copy it, rather than keep the whole read buffer alive.
            var tail = context.channel.allocator.buffer(capacity: buffer.readableBytes + Self.assemblyStep)
            tail.writeBuffer(&buffer)
            pending = tail
        } else {
            if buffer.readerIndex > 0 && buffer.readerIndex >= buffer.readableBytes { buffer.discardReadBytes() }
            pending = buffer
        }
    }

    /// Sends the replies in `output`: straight to the socket when the server knows it and the channel has
    /// nothing queued, else through the channel (flushed at once when `flush` is set).
    ///
    /// The direct write (``DirectSend``) is one non-blocking `send`, without the channel's bookkeeping for pending
    /// writes (about a microsecond per reply, as much as a GET costs otherwise). What the socket does not take at
    /// once (its buffer is full, or the send failed)
    /// goes to the channel, which writes it when the socket is writable, applies backpressure and handles the
    /// error; until the channel has written it, later replies queue behind it in the channel.
    private func write(context: ChannelHandlerContext, flush: Bool = false) {
        guard output.readableBytes > 0 else { return }
        guard withinOutputLimits(context: context) else { return }
        session?.noteTraffic(output: output.readableBytes)
        if sendDescriptor >= 0 && channelWrites == 0 && !closing && DirectSend.send(&output, to: sendDescriptor) {
            output.clear()
            return
        }
        if let tls {
            tls.sendReplies(output, promise: longReplyPromise(context))
            output.clear()
            return
        }
        var promise: EventLoopPromise<Void>?
        // Counted only while direct sends must wait for the channel (not for TLS, whose handler sends all).
        if sendDescriptor >= 0 {
            channelWrites += 1
            promise = context.eventLoop.makePromise(of: Void.self)
            promise!.futureResult.assumeIsolated().whenComplete { _ in
                self.channelWrites -= 1
                self.noteReplyTaken()
            }
        } else {
            // On plain SwiftNIO every reply goes through the channel.
            promise = longReplyPromise(context)
        }
        if flush {
            // One trip down the pipeline instead of a write and a flush.
            context.writeAndFlush(wrapOutboundOut(output), promise: promise)
            unflushed = false
        } else {
            context.write(wrapOutboundOut(output), promise: promise)
            unflushed = true
        }
        // Keep the storage: once the channel has written it (usually within the flush that follows), the
        // next replies go into the same memory instead of a new allocation.
        output.clear()
    }

    /// Replies from this size on are watched to their end on plain SwiftNIO (``noteReplyTaken()``): beyond
    /// what a socket's buffer takes at once.
    private static let longReply = 64 << 10

    /// A reply the client has taken to its end: interaction, for `timeout`, as Redis counts writes.
    private func noteReplyTaken() {
        session?.noteInteraction(server.clock.nowMilliseconds())
    }

    /// For replies that go through the channel (plain SwiftNIO, TLS): a promise that notes interaction once the
    /// channel has written the reply in ``output``, when the socket will not take it at once (it is long, or the
    /// channel is full), as the direct path's remainder is watched. Nil for others: a promise per reply costs
    /// more than the reply.
    private func longReplyPromise(_ context: ChannelHandlerContext) -> EventLoopPromise<Void>? {
        guard output.readableBytes >= Self.longReply || !writable else { return nil }
        let promise = context.eventLoop.makePromise(of: Void.self)
        promise.futureResult.assumeIsolated().whenComplete { _ in self.noteReplyTaken() }
        return promise
    }

    // MARK: waiting clients

    /// When a waiting client's wait ends on its own (the pause's end, WAIT's timeout), if it does.
    @exclusivity(unchecked) private var blockTimer: Scheduled<Void>?

    /// The command just run made the client wait: replies so far go out, and a timer is set for the wait's end.
    private func startWaiting(session: ClientSession, context: ChannelHandlerContext) {
        guard !closing else { return }
        flush(context: context)
        scheduleWaitEnd(session: session, context: context)
    }

    private func scheduleWaitEnd(session: ClientSession, context: ChannelHandlerContext) {
        blockTimer?.cancel()
        blockTimer = nil
        let deadline = session.blockDeadline
        guard deadline > 0 else { return }
        let delay = max(1, deadline - server.clock.nowMilliseconds() + 1)
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        blockTimer = context.eventLoop.scheduleTask(in: .milliseconds(delay)) { handler.value.waitEnded() }
    }

    /// The timer of the wait fired: WAIT times out; a pause that has run out ends (releasing every client it
    /// held, this one included), and one that was extended is waited for again.
    private func waitEnded() {
        blockTimer = nil
        guard !closing, let session, let context else { return }
        switch session.blockKind {
        case .none:
            return
        case .waiting:
            if server.blocked.endWait(session.id) { release(.timeout) }
        case .postponed:
            let now = server.clock.nowMilliseconds()
            if let end = server.blocked.pauseEnd(now: now) {
                session.block(.postponed, until: end)
                scheduleWaitEnd(session: session, context: context)
            }
        }
    }

    /// Ends the client's wait: WAIT is answered (0 replicas; an error for CLIENT UNBLOCK ... ERROR), a held
    /// command runs now, and so do the commands that arrived meanwhile.
    private func release(_ release: BlockedClients.Release) {
        guard !closing, let session, let context else { return }
        switch (session.blockKind, release) {
        case (.waiting, .timeout), (.waiting, .error), (.postponed, .resume):
            break
        default:
            return
        }
        blockTimer?.cancel()
        blockTimer = nil
        refreshLimits()
        if session.blockKind == .waiting {
            let start = output.writerIndex
            if release == .error {
                output.writeRESPError(BlockingCommands.unblockedError)
                // As Redis: the error counts for errorstats and as a failed WAIT.
                BlockingCommands.countUnblockError(session: session, server: server)
            } else {
                output.writeRESPInteger(0)
            }
            // CLIENT REPLY OFF or SKIP (set before WAIT) applies to the reply now.
            if session.replyOff || session.replySkip || session.replySkipNext {
                CommandExecutor.dropReply(&output, session, from: start, to: output.writerIndex)
            }
        }
        session.unblock()
        if var buffer = pending {
            pending = nil
            if let lane { server.transactions.enter(lane) }
            process(&buffer, session: session, now: server.clock.nowMilliseconds(), context: context)
            if let lane { server.transactions.leave(lane) }
        }
        flush(context: context)
    }

    /// Keeps what a waiting client sends, within the query buffer limit.
    private func holdInput(_ incoming: inout ByteBuffer, context: ChannelHandlerContext) {
        if pending == nil {
            pending = incoming
        } else {
            pending!.writeBuffer(&incoming)
        }
        if let held = pending?.readableBytes, held > queryBufferLimit { closeForQueryBufferLimit(held, context: context) }
    }

    // MARK: slow readers

    /// When the soft output limit was first exceeded, while it still is.
    @exclusivity(unchecked) private var softLimitSince: Int64?

    /// Checks replies waiting for the client (in the channel and in `output`) against
    /// `client-output-buffer-limit`, and closes the connection when they are over it. Returns false then.
    private func withinOutputLimits(context: ChannelHandlerContext) -> Bool {
        // Subscribers are held to the pubsub class, as in Redis.
        let limit = session?.isSubscribed == true ? outputLimits.pubsub : outputLimits.normal
        guard limit.hard > 0 || limit.soft > 0 else { return true }
        // While the channel is writable it holds at most the high water mark: when that bound and the
        // replies in hand are under both limits, there is nothing to ask the channel (the usual case; asking
        // costs more than running a GET).
        let bound = Self.writeBufferWaterMark.high + output.readableBytes
        if (limit.hard == 0 || bound <= limit.hard) && (limit.soft == 0 || bound <= limit.soft) && writable {
            softLimitSince = nil
            return true
        }
        let queued = (try? context.channel.syncOptions?.getOption(ChannelOptions.bufferedWritableBytes)) ?? 0
        let waiting = queued + output.readableBytes
        var over = limit.hard > 0 && waiting > limit.hard
        if limit.soft > 0 && waiting > limit.soft {
            let now = server.clock.nowMilliseconds()
            let since = softLimitSince ?? now
            softLimitSince = since
            over = over || now - since >= Int64(limit.softSeconds) * 1000
        } else {
            softLimitSince = nil
        }
        guard over else { return true }
        closeForOutputLimit(pending: waiting, context: context)
        return false
    }

    /// Closes the connection, dropping the replies not sent yet, because they are over its output limit.
    private func closeForOutputLimit(pending waiting: Int, context: ChannelHandlerContext) {
        closeOverLimit("Client closed for overcoming of output buffer limits", ("pending", waiting), context: context)
    }

    /// Closes the connection at once, dropping what it sent and the replies not sent yet, with a warning in
    /// Redis's words and the figure that went over the limit.
    private func closeOverLimit(_ message: Logger.Message, _ figure: (String, Int), context: ChannelHandlerContext) {
        server.logger.warning(message, metadata: ["client": "\(session?.remoteAddress ?? "?")", figure.0: "\(figure.1)"])
        closing = true
        pending = nil
        output = ByteBuffer()
        context.close(promise: nil)
    }

    /// Stops reading from a client that does not read its replies, and starts again when it catches up, so
    /// that its requests wait in the kernel instead of turning into replies in memory.
    package func channelWritabilityChanged(context: ChannelHandlerContext) {
        let writable = context.channel.isWritable
        self.writable = writable
        context.channel.setOption(ChannelOptions.autoRead, value: writable).whenFailure { _ in }
        if writable { context.read() }
        context.fireChannelWritabilityChanged()
    }

    /// The channel's writability, as last reported to ``channelWritabilityChanged(context:)``.
    @exclusivity(unchecked) private var writable = true

    /// Whether replies were handed to the channel since the last flush.
    @exclusivity(unchecked) private var unflushed = false

    private func flush(context: ChannelHandlerContext) {
        // BCAST invalidations of the commands just run go out together, after their replies.
        if server.tracking.hasPendingBroadcast {
            server.sendBroadcastInvalidations(current: session, reply: &output)
        }
        write(context: context, flush: true)
        if unflushed {
            unflushed = false
            context.flush()
        }
    }

    private func closeAfterFlush(context: ChannelHandlerContext) {
        closing = true
        pending = nil
        if session?.abortConnection == true {
            output.clear()
            context.close(promise: nil)
            return
        }
        session?.noteTraffic(output: output.readableBytes)
        let reply = output
        output = ByteBuffer()
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(reply)).whenComplete { _ in channel.close(promise: nil) }
    }

    static func describe(_ address: SocketAddress) -> String {
        switch address {
        case .v4: return "\(address.ipAddress ?? "?"):\(address.port ?? 0)"
        case .v6: return "[\(address.ipAddress ?? "?")]:\(address.port ?? 0)"
        case .unixDomainSocket: return "unix:\(address.pathname ?? "")"
        }
    }
}
