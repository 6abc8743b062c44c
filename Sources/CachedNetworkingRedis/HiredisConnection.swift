import CachedNetworking
import CHiredis
import CachedTLS
import Glibc
import NIOCore
import RESP

/// A reply from the server, copied out of hiredis's reply objects.
enum RESPReply: Sendable, Equatable {
    case status(String)
    case bulk(ByteBuffer)
    case integer(Int64)
    case null
    case error(String)
    case array([RESPReply])

    /// The reply's type, for error messages.
    var typeName: String {
        switch self {
        case .status: "a status"
        case .bulk: "a bulk string"
        case .integer: "an integer"
        case .null: "nil"
        case .error: "an error"
        case .array: "an array"
        }
    }
}

/// A command in the RESP request format (`*<n>\r\n$<len>\r\n<bytes>\r\n…`), encoded by the RESP module as
/// the caller builds it, so that the connection thread only copies it. Arguments are binary-safe.
struct RESPCommand {
    /// The encoded command: what goes on the wire.
    private(set) var bytes: ByteBuffer
    /// The command's name, as given: for logs (``name``).
    private let givenName: String

    init(_ name: String, argumentCount: Int, reserving capacity: Int = 64) {
        bytes = ByteBufferAllocator().buffer(capacity: capacity)
        bytes.writeRESPArrayHeader(argumentCount + 1)
        bytes.writeRESPBulkString(name)
        givenName = name
    }

    mutating func append(_ argument: String) {
        bytes.writeRESPBulkString(argument)
    }

    mutating func append(_ argument: ByteBuffer) {
        bytes.writeRESPBulkString(argument)
    }

    /// The command's name, upper-cased: for logs.
    var name: String { givenName.uppercased() }

    /// `commands` back to back, each after `prefix` when there is one (`ASKING`), for one write.
    static func pipeline(_ commands: [RESPCommand], eachAfter prefix: ByteBuffer? = nil) -> ByteBuffer {
        if prefix == nil && commands.count == 1 { return commands[0].bytes }
        let size = commands.reduce(0) { $0 + $1.bytes.readableBytes + (prefix?.readableBytes ?? 0) }
        var bytes = ByteBufferAllocator().buffer(capacity: size)
        for command in commands {
            if let prefix { bytes.writeImmutableBuffer(prefix) }
            bytes.writeImmutableBuffer(command.bytes)
        }
        return bytes
    }
}

/// One blocking hiredis connection, plain or over TLS. Used by one thread at a time (its pool thread, or an
/// invalidation subscriber's thread, or a caller that took it to poll for its reply).
///
/// hiredis connects the socket and parses replies with its reader either way. On a plain connection hiredis also
/// writes and reads the socket; over TLS (``RESPStore/Configuration/tls``) a ``TLSChannel`` does, handing what it
/// decrypts to the same reader. Each operation takes one branch on ``tls``; the plain path is hiredis's own.
final class HiredisConnection {
    let context: UnsafeMutablePointer<redisContext>
    private let commandTimeout: Duration
    /// The TLS layer under the reader; nil on a plain connection.
    private var tls: TLSChannel?
    private var closed = false

    /// The connection's socket descriptor.
    var socket: Int32 { context.pointee.fd }

    private init(context: UnsafeMutablePointer<redisContext>, commandTimeout: Duration) {
        self.context = context
        self.commandTimeout = commandTimeout
    }

    deinit { close() }

    /// Frees the context and closes its socket (after a TLS close_notify, if the socket takes it at once).
    func close() {
        guard !closed else { return }
        closed = true
        tls?.close()
        redisFree(context)
    }

    /// Connects, sets the socket timeouts, runs the TLS handshake when ``RESPStore/Configuration/tls`` is set,
    /// then sends `AUTH` and `SELECT` as configured.
    ///
    /// Blocks (DNS, connect, the handshake, two round trips at most): call it on a connection thread.
    /// - Parameters:
    ///   - configuration: the server and the timeouts.
    ///   - tlsContext: the store's TLS context, made once for all its connections; one is made for this
    ///     connection when it is nil or made for other settings.
    static func open(
        _ configuration: RESPStore.Configuration, tlsContext: StoreTLSContext?
    ) -> Result<HiredisConnection, CacheStoreError> {
        let endpoint = "\(configuration.host):\(configuration.port)"
        guard (1...65535).contains(configuration.port) else {
            return .failure(CacheStoreError(.unreachable, "invalid port \(configuration.port)"))
        }
        // The TLS settings are checked before anything is connected: settings that cannot be used fail at once.
        var tlsConnection: TLSConnection?
        if let settings = configuration.tls {
            let shared = tlsContext.flatMap { $0.settings == settings ? $0 : nil } ?? StoreTLSContext(settings)
            switch shared.connection(host: configuration.host) {
            case .success(let made): tlsConnection = made
            case .failure(let error): return .failure(error)
            }
        }
        guard let context = redisConnectWithTimeout(
            configuration.host, Int32(configuration.port), makeTimeval(configuration.connectTimeout))
        else {
            return .failure(CacheStoreError(.unreachable, "cannot allocate a connection to \(endpoint)"))
        }
        let connection = HiredisConnection(context: context, commandTimeout: configuration.commandTimeout)
        if context.pointee.err != 0 {
            return .failure(CacheStoreError(.unreachable, "cannot connect to \(endpoint): \(connection.errorText)"))
        }
        guard redisSetTimeout(context, makeTimeval(configuration.commandTimeout)) == REDIS_OK else {
            return .failure(CacheStoreError(.unreachable, "cannot set socket timeouts: \(connection.errorText)"))
        }
        _ = redisEnableKeepAlive(context)
        if let tlsConnection {
            // The handshake gets the connect timeout of its own, as one deadline.
            let deadline = monotonicNanoseconds() &+ UInt64(clamping: configuration.connectTimeout.storeNanoseconds)
            let channel = TLSChannel(
                tlsConnection, socket: context.pointee.fd, endpoint: endpoint, commandTimeout: configuration.commandTimeout)
            if let error = channel.handshake(until: deadline, timeout: configuration.connectTimeout) { return .failure(error) }
            connection.tls = channel
        }

        if let password = configuration.password {
            var auth = RESPCommand("AUTH", argumentCount: configuration.username == nil ? 1 : 2)
            if let username = configuration.username { auth.append(username) }
            auth.append(password)
            switch connection.roundTrip(auth) {
            case .success(.status): break
            case .success(.error(let text)):
                return .failure(CacheStoreError(.server, "authentication to \(endpoint) failed: \(text)"))
            case .success(let other):
                return .failure(CacheStoreError(.protocolViolation, "AUTH answered \(other.typeName)"))
            case .failure(let error):
                return .failure(error)
            }
        } else if configuration.username != nil {
            return .failure(CacheStoreError(.server, "a user name was configured without a password"))
        }
        if configuration.database != 0 {
            var select = RESPCommand("SELECT", argumentCount: 1)
            select.append(String(configuration.database))
            switch connection.roundTrip(select) {
            case .success(.status): break
            case .success(.error(let text)):
                return .failure(CacheStoreError(.server, "SELECT \(configuration.database) on \(endpoint) failed: \(text)"))
            case .success(let other):
                return .failure(CacheStoreError(.protocolViolation, "SELECT answered \(other.typeName)"))
            case .failure(let error):
                return .failure(error)
            }
        }
        return .success(connection)
    }

    /// Why a batch stopped: the error, and the first request that got no reply.
    struct BatchFailure {
        let firstFailed: Int
        let error: CacheStoreError
    }

    /// Writes every command of `batch` (the part its caller has not written already), then reads their replies
    /// in order, resuming each request as its replies arrive (its last reply, or its first error reply) — except
    /// the last request's, which is left in `last` for the caller to resume, so that it can first mark the
    /// connection idle (a caller resumed before that would find it busy). Blocks.
    /// - Returns: nil when every request got its reply; otherwise the failure, after which the connection
    ///   must be discarded and the requests from `firstFailed` on have not been resumed.
    func send(_ batch: [RESPConnectionPool.Request], last: inout Result<RESPReply, CacheStoreError>?) -> BatchFailure? {
        for request in batch where request.written < request.command.readableBytes {
            if let error = append(request.command, from: request.written) {
                return BatchFailure(firstFailed: 0, error: error)
            }
        }
        for (position, request) in batch.enumerated() {
            let result: Result<RESPReply, CacheStoreError>
            if request.replies == 1 {
                switch readReply() {
                case .success(let reply): result = .success(reply)
                case .failure(let error): return BatchFailure(firstFailed: position, error: error)
                }
            } else {
                var replies: [RESPReply] = []
                for _ in 0..<request.replies {
                    switch readReply() {
                    case .success(let reply): replies.append(reply)
                    case .failure(let error): return BatchFailure(firstFailed: position, error: error)
                    }
                }
                result = .success(.array(replies))
            }
            if position == batch.count - 1 {
                last = result
            } else {
                request.completion.resume(returning: result)
            }
        }
        return nil
    }

    /// Sends one command and reads its reply.
    func roundTrip(_ command: RESPCommand) -> Result<RESPReply, CacheStoreError> {
        if let error = append(command) { return .failure(error) }
        return readReply()
    }

    /// Queues `command` in the output buffer without writing it.
    func append(_ command: RESPCommand) -> CacheStoreError? {
        append(command.bytes, from: 0)
    }

    /// Queues `bytes[offset...]` (whole commands, or the rest of one whose start was written) for the next write:
    /// in hiredis's output buffer, or the TLS channel's.
    private func append(_ bytes: ByteBuffer, from offset: Int) -> CacheStoreError? {
        bytes.withUnsafeReadableBytes { all in
            let unsent = UnsafeRawBufferPointer(rebasing: all[offset...])
            if let tls { return tls.append(unsent) }
            let status = redisAppendFormattedCommand(context, unsent.baseAddress?.assumingMemoryBound(to: CChar.self), unsent.count)
            return status == REDIS_OK ? nil : CacheStoreError(.unreachable, "cannot queue a command: \(errorText)")
        }
    }

    /// Writes as much of `bytes` (whole commands) as the socket takes without blocking, while the connection is
    /// idle (nothing queued, nothing unread); the connection's next write or read sends the rest. Over TLS the
    /// bytes are encrypted whole (unless larger than ``TLSChannel/eagerWriteLimit``) and what the socket does not
    /// take waits in the TLS output.
    /// - Returns: the bytes of `bytes` written or encrypted; 0 on any error, which the connection's thread then
    ///   meets itself.
    func writeWithoutBlocking(_ bytes: ByteBuffer) -> Int {
        if let tls { return tls.writeWithoutBlocking(bytes) }
        return sendWithoutBlocking(bytes, to: socket)
    }

    /// Reads what the server has sent without blocking, into hiredis's reader, until one reply is whole or
    /// `deadline` (``monotonicNanoseconds()``) passes.
    /// - Returns: the reply (taken out of the reader), or nil when none was whole by the deadline, the socket
    ///   reported an error or end of file, or the reader found a protocol error. What arrived stays in the
    ///   reader, and ``readReply()`` carries on from there (and reports any error itself).
    func pollReply(until deadline: UInt64) -> Result<RESPReply, CacheStoreError>? {
        guard let reader = context.pointee.reader else { return nil }
        if let tls { return pollReply(over: tls, reader: reader, until: deadline) }
        let fd = context.pointee.fd
        return withUnsafeTemporaryAllocation(byteCount: 16 * 1024, alignment: 16) { buffer in
            while true {
                var raw: UnsafeMutableRawPointer?
                guard redisReaderGetReply(reader, &raw) == REDIS_OK else { return nil }
                if let raw {
                    defer { freeReplyObject(raw) }
                    return Self.copy(raw.assumingMemoryBound(to: redisReply.self))
                }
                let received = recv(fd, buffer.baseAddress, buffer.count, Int32(MSG_DONTWAIT))
                if received > 0 {
                    guard redisReaderFeed(reader, buffer.baseAddress?.assumingMemoryBound(to: CChar.self), received)
                        == REDIS_OK
                    else { return nil }
                    continue
                }
                if received < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
                    if monotonicNanoseconds() >= deadline { return nil }
                    // The server may have been woken on this core (the kernel favours the waker's core): let
                    // it run rather than spin in its way.
                    sched_yield()
                    continue
                }
                return nil
            }
        }
    }

    /// Flushes pending commands and reads the next reply (blocking, within the socket timeouts).
    func readReply() -> Result<RESPReply, CacheStoreError> {
        if let tls { return readReply(over: tls) }
        var raw: UnsafeMutableRawPointer?
        let status = redisGetReply(context, &raw)
        let savedErrno = errno
        guard status == REDIS_OK, let raw else { return .failure(contextError(errno: savedErrno)) }
        defer { freeReplyObject(raw) }
        return Self.copy(raw.assumingMemoryBound(to: redisReply.self))
    }

    /// The context's error as a ``CacheStoreError``.
    func contextError(errno savedErrno: Int32) -> CacheStoreError {
        switch context.pointee.err {
        case REDIS_ERR_IO where savedErrno == EAGAIN || savedErrno == EWOULDBLOCK:
            return CacheStoreError(.timeout, "no reply within \(commandTimeout)")
        case REDIS_ERR_EOF:
            return CacheStoreError(.unreachable, "the server closed the connection")
        case REDIS_ERR_PROTOCOL:
            return CacheStoreError(.protocolViolation, "the server's reply is not RESP: \(errorText)")
        default:
            return CacheStoreError(.unreachable, errorText.isEmpty ? "connection failed" : errorText)
        }
    }

    /// Converts a hiredis reply (recursively).
    static func copy(_ reply: UnsafePointer<redisReply>) -> Result<RESPReply, CacheStoreError> {
        let r = reply.pointee
        switch r.type {
        case REDIS_REPLY_STRING:
            return .success(.bulk(ByteBuffer(bytes: UnsafeRawBufferPointer(start: r.str, count: r.len))))
        case REDIS_REPLY_STATUS:
            return .success(.status(text(r)))
        case REDIS_REPLY_ERROR:
            return .success(.error(text(r)))
        case REDIS_REPLY_INTEGER:
            return .success(.integer(r.integer))
        case REDIS_REPLY_NIL:
            return .success(.null)
        case REDIS_REPLY_ARRAY:
            var elements: [RESPReply] = []
            elements.reserveCapacity(r.elements)
            for i in 0..<r.elements {
                guard let element = r.element[i] else {
                    return .failure(CacheStoreError(.protocolViolation, "an array reply with a missing element"))
                }
                switch copy(element) {
                case .success(let value): elements.append(value)
                case .failure(let error): return .failure(error)
                }
            }
            return .success(.array(elements))
        default:
            return .failure(CacheStoreError(.protocolViolation, "a reply of unknown type \(r.type)"))
        }
    }

    private static func text(_ r: redisReply) -> String {
        String(decoding: UnsafeRawBufferPointer(start: r.str, count: r.len), as: UTF8.self)
    }

    var errorText: String {
        withUnsafeBytes(of: context.pointee.errstr) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
    }
}

extension HiredisConnection {
    /// Writes the whole output buffer (blocking, within the socket timeout).
    func flushOutput() -> CacheStoreError? {
        if let tls {
            if case .failed(let error) = tls.flush(blocking: true) { return error }
            return nil
        }
        var done: Int32 = 0
        while done == 0 {
            if redisBufferWrite(context, &done) != REDIS_OK { return contextError(errno: errno) }
        }
        return nil
    }

    /// Reads once from the socket into the reply reader. Blocks when nothing is there: call it when `poll(2)`
    /// says the socket is readable. (Over TLS everything decrypted goes to the reader, so that nothing waits
    /// unseen by `poll(2)` above the socket.)
    func readInput() -> CacheStoreError? {
        if let tls {
            guard let reader = context.pointee.reader else { return Self.noReader }
            if case .failed(let error) = tls.receive(into: reader, blocking: true) { return error }
            return nil
        }
        return redisBufferRead(context) == REDIS_OK ? nil : contextError(errno: errno)
    }

    /// The next complete reply among the bytes already read, or nil when they hold none.
    func bufferedReply() -> Result<RESPReply?, CacheStoreError> {
        var raw: UnsafeMutableRawPointer?
        guard redisGetReplyFromReader(context, &raw) == REDIS_OK else { return .failure(contextError(errno: errno)) }
        guard let raw else { return .success(nil) }
        defer { freeReplyObject(raw) }
        return Self.copy(raw.assumingMemoryBound(to: redisReply.self)).map(Optional.some)
    }

    // MARK: TLS

    private static let noReader = CacheStoreError(.unreachable, "the connection has no reply reader")

    /// ``readReply()`` over TLS: sends what is queued, then reads and decrypts until the reader holds a reply.
    private func readReply(over tls: TLSChannel) -> Result<RESPReply, CacheStoreError> {
        guard let reader = context.pointee.reader else { return .failure(Self.noReader) }
        if case .failed(let error) = tls.flush(blocking: true) { return .failure(error) }
        while true {
            switch bufferedReply() {
            case .success(let reply?): return .success(reply)
            case .success(nil): break
            case .failure(let error): return .failure(error)
            }
            if case .failed(let error) = tls.receive(into: reader, blocking: true) { return .failure(error) }
        }
    }

    /// ``pollReply(until:)`` over TLS: the same polling, the socket's bytes decrypted on the way to the reader (and
    /// the command's encrypted bytes that the socket did not take at once sent as it takes them).
    private func pollReply(
        over tls: TLSChannel, reader: UnsafeMutablePointer<redisReader>, until deadline: UInt64
    ) -> Result<RESPReply, CacheStoreError>? {
        while true {
            switch bufferedReply() {
            case .success(let reply?): return .success(reply)
            case .success(nil): break
            case .failure: return nil
            }
            if case .failed = tls.flush(blocking: false) { return nil }
            switch tls.receive(into: reader, blocking: false) {
            case .received:
                continue
            case .wouldBlock:
                if monotonicNanoseconds() >= deadline { return nil }
                // As on a plain connection: let the server run rather than spin in its way.
                sched_yield()
            case .failed:
                return nil
            }
        }
    }
}

/// Writes as much of `bytes` to `socket` as fits without blocking (and without raising SIGPIPE); 0 on any error.
private func sendWithoutBlocking(_ bytes: ByteBuffer, to socket: Int32) -> Int {
    let sent = bytes.withUnsafeReadableBytes { Glibc.send(socket, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT) | Int32(MSG_NOSIGNAL)) }
    return max(0, sent)
}

private func makeTimeval(_ duration: Duration) -> timeval {
    let micros = max(1000, duration.storeNanoseconds / 1000)
    return timeval(tv_sec: Int(micros / 1_000_000), tv_usec: Int(micros % 1_000_000))
}
