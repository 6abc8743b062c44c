import CachedNetworking
import CHiredis
import CachedTLS
import Glibc
import Logging

/// A store's ``RESPStore/TLS`` settings made ready for its connections: the OpenSSL context, its files read once
/// and shared by every connection of the store (its pools, and its near cache's invalidation connections).
final class StoreTLSContext: Sendable {
    let settings: RESPStore.TLS
    private let context: Result<TLSContext, CacheStoreError>

    /// Reads the files `settings` name now; settings that cannot be used fail every connection with the reason.
    init(_ settings: RESPStore.TLS) {
        self.settings = settings
        self.context = Self.makeContext(settings)
    }

    /// The context for a store's `settings` (nil for none), with a warning when they verify nothing.
    static func make(_ settings: RESPStore.TLS?, logger: Logger) -> StoreTLSContext? {
        guard let settings else { return nil }
        if settings.certificateVerification == .insecureNoVerificationForTestsOnly {
            logger.warning("TLS certificate verification is off (insecureNoVerificationForTestsOnly): for tests only")
        }
        return StoreTLSContext(settings)
    }

    /// A client connection to `host`, ready for its handshake: it sends ``RESPStore/TLS/serverName`` (else `host`)
    /// as SNI and, with full verification, checks the certificate against that name.
    func connection(host: String) -> Result<TLSConnection, CacheStoreError> {
        let made: TLSContext
        switch context {
        case .success(let context): made = context
        case .failure(let error): return .failure(error)
        }
        do {
            return .success(try TLSConnection(
                context: made, serverName: settings.serverName ?? host,
                checksServerName: settings.certificateVerification.base == .full))
        } catch {
            return .failure(CacheStoreError(.unreachable, "cannot start TLS with \(host): \(error.description)"))
        }
    }

    private static func makeContext(_ settings: RESPStore.TLS) -> Result<TLSContext, CacheStoreError> {
        func unusable(_ reason: String) -> Result<TLSContext, CacheStoreError> {
            .failure(CacheStoreError(.unreachable, "the TLS settings cannot be used: \(reason)"))
        }
        if (settings.certificateChainFile == nil) != (settings.privateKeyFile == nil) {
            return unusable("a client certificate (certificateChainFile) needs its private key (privateKeyFile), and a key its certificate")
        }
        var configuration = CachedTLS.TLSConfiguration(role: .client)
        configuration.certificateFile = settings.certificateChainFile ?? ""
        configuration.keyFile = settings.privateKeyFile ?? ""
        configuration.keyFilePassword = settings.privateKeyPassword ?? ""
        switch settings.trustRoots.base {
        case .system:
            configuration.useSystemTrustStore = true
        case .file(let path):
            guard !path.isEmpty else { return unusable("the trust roots' file name is empty") }
            configuration.caCertificateFile = path
        case .directory(let path):
            guard !path.isEmpty else { return unusable("the trust roots' directory name is empty") }
            configuration.caCertificateDirectory = path
        }
        configuration.peerVerification = settings.certificateVerification.base == .none ? .no : .yes
        do {
            return .success(try TLSContext(configuration))
        } catch {
            return unusable(error.description)
        }
    }
}

/// TLS between a connection's hiredis context and its socket (hiredis 0.14 has none): the context connects the
/// socket and parses replies with its reader; this channel runs the handshake, encrypts commands into its
/// ``TLSConnection`` and writes them to the socket, and decrypts what the socket brings into the reader.
///
/// The socket stays blocking, with the socket timeouts hiredis set (``RESPStore/Configuration/commandTimeout``):
/// a blocking read or write that times out fails with ``CacheStoreError/Kind/timeout``, as on a plain connection.
/// The handshake runs without blocking instead, against one deadline. Commands queue as plaintext (as in hiredis's
/// output buffer) and are encrypted together when flushed, so that a pipeline takes as few records as its size
/// allows. The first failure sticks: every later operation reports it. Used by one thread at a time.
final class TLSChannel {
    private let tls: TLSConnection
    private let socket: Int32
    /// `host:port`, for errors.
    private let endpoint: String
    private let commandTimeout: Duration
    /// Plaintext queued by ``append(_:)``, encrypted by the next flush.
    private var queued: [UInt8] = []
    /// Encrypted bytes taken from the TLS connection that the socket has not taken yet: `[unsentStart, unsentEnd)`.
    private let unsent: UnsafeMutableRawBufferPointer
    private var unsentStart = 0
    private var unsentEnd = 0
    private var failure: CacheStoreError?

    /// Room for a TLS record (16 KiB of plaintext and its overhead) and more.
    private static let bufferSize = 32 * 1024
    /// The largest command a caller encrypts on its own thread (``writeWithoutBlocking(_:)``); larger ones are left
    /// to the connection's thread.
    static let eagerWriteLimit = 16 * 1024

    init(_ tls: TLSConnection, socket: Int32, endpoint: String, commandTimeout: Duration) {
        self.tls = tls
        self.socket = socket
        self.endpoint = endpoint
        self.commandTimeout = commandTimeout
        self.unsent = .allocate(byteCount: Self.bufferSize, alignment: 16)
    }

    deinit { unsent.deallocate() }

    // MARK: handshake and close

    /// Runs the handshake to its end by `deadline` (``monotonicNanoseconds()``).
    /// - Returns: nil when it completed; else why not (``CacheStoreError/Kind/unreachable``), in OpenSSL's words
    ///   (`certificate verify failed: hostname mismatch`, `wrong version number`).
    func handshake(until deadline: UInt64, timeout: Duration) -> CacheStoreError? {
        while true {
            let step = tls.handshake()
            if case .failed(let reason) = step {
                // The alert that says why, if the socket takes it.
                _ = flush(blocking: false)
                return fail(CacheStoreError(.unreachable, "TLS handshake with \(endpoint) failed: \(Self.readable(reason))"))
            }
            // What the step produced (the ClientHello, the Finished message) goes out first.
            while true {
                switch flush(blocking: false) {
                case .done: break
                case .wouldBlock:
                    if let error = wait(for: Int16(POLLOUT), until: deadline, timeout: timeout) { return fail(error) }
                    continue
                case .failed(let error): return error
                }
                break
            }
            switch step {
            case .done:
                return nil
            case .closed:
                return fail(closedDuringHandshake)
            default:
                if let error = wait(for: Int16(POLLIN), until: deadline, timeout: timeout) { return fail(error) }
                let error: CacheStoreError? = withUnsafeTemporaryAllocation(byteCount: Self.bufferSize, alignment: 16) {
                    buffer in
                    let count = recv(socket, buffer.baseAddress, buffer.count, Int32(MSG_DONTWAIT))
                    if count > 0 {
                        tls.receive(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
                        return nil
                    }
                    if count == 0 { return closedDuringHandshake }
                    let code = errno
                    if code == EINTR || code == EAGAIN || code == EWOULDBLOCK { return nil }
                    return CacheStoreError(.unreachable, "TLS handshake with \(endpoint) failed: \(Self.text(ofErrno: code))")
                }
                if let error { return fail(error) }
            }
        }
    }

    /// Starts closing the TLS session (close_notify), sent if the socket takes it without blocking.
    func close() {
        guard failure == nil else { return }
        tls.shutdown()
        _ = flush(blocking: false)
    }

    // MARK: writing

    /// Queues `bytes` (commands) to be encrypted and sent by the next ``flush(blocking:)``.
    func append(_ bytes: UnsafeRawBufferPointer) -> CacheStoreError? {
        if let failure { return failure }
        queued.append(contentsOf: bytes)
        return nil
    }

    /// Encrypts `bytes` (a command of at most ``eagerWriteLimit`` bytes) and sends what the socket takes without
    /// blocking; the rest waits for the next flush.
    /// - Returns: the bytes of `bytes` consumed: all of them, or 0 when the command is too large or the channel
    ///   failed (the connection's thread then meets the failure itself).
    func writeWithoutBlocking(_ bytes: ByteBuffer) -> Int {
        guard bytes.readableBytes <= Self.eagerWriteLimit, failure == nil else { return 0 }
        bytes.withUnsafeReadableBytes { queued.append(contentsOf: $0) }
        if case .failed = flush(blocking: false) { return 0 }
        return bytes.readableBytes
    }

    /// Encrypts the queued plaintext into the TLS output.
    private func encryptQueued() -> CacheStoreError? {
        guard !queued.isEmpty else { return nil }
        let outcome = queued.withUnsafeBytes { tls.write($0) }
        // A large command's buffer is not kept.
        queued.removeAll(keepingCapacity: queued.count <= Self.bufferSize)
        guard case .failed(let reason) = outcome else { return nil }
        return fail(CacheStoreError(.unreachable, "TLS connection to \(endpoint) failed: \(Self.readable(reason))"))
    }

    enum FlushOutcome {
        case done
        /// The socket takes no more now (without blocking only).
        case wouldBlock
        case failed(CacheStoreError)
    }

    /// Encrypts what is queued and sends the encrypted bytes waiting: blocking (within the socket's send timeout),
    /// or as many as the socket takes at once.
    func flush(blocking: Bool) -> FlushOutcome {
        if let failure { return .failed(failure) }
        if let error = encryptQueued() { return .failed(error) }
        while true {
            if unsentStart == unsentEnd {
                guard tls.pendingOutput > 0 else { return .done }
                unsentStart = 0
                unsentEnd = tls.takeOutput(into: unsent)
                if unsentEnd == 0 { return .done }
            }
            let flags = (blocking ? 0 : Int32(MSG_DONTWAIT)) | noSignal
            let sent = send(socket, unsent.baseAddress! + unsentStart, unsentEnd - unsentStart, flags)
            if sent > 0 {
                unsentStart += sent
                continue
            }
            let code = errno
            if sent < 0 && code == EINTR { continue }
            if sent < 0 && (code == EAGAIN || code == EWOULDBLOCK) {
                guard blocking else { return .wouldBlock }
                return .failed(fail(CacheStoreError(.timeout, "cannot send to \(endpoint) within \(commandTimeout)")))
            }
            return .failed(fail(reasonGiven(or: CacheStoreError(.unreachable, "cannot send to \(endpoint): \(Self.text(ofErrno: code))"))))
        }
    }

    // MARK: reading

    enum ReceiveOutcome {
        /// Bytes arrived; whatever they completed is in the reader.
        case received
        /// Nothing to read now (without blocking only).
        case wouldBlock
        case failed(CacheStoreError)
    }

    /// Reads once from the socket (blocking, within the socket's receive timeout, or not) and hands everything it
    /// decrypts to `reader`.
    func receive(into reader: UnsafeMutablePointer<redisReader>, blocking: Bool) -> ReceiveOutcome {
        if let failure { return .failed(failure) }
        return withUnsafeTemporaryAllocation(byteCount: Self.bufferSize, alignment: 16) { buffer in
            while true {
                let count = recv(socket, buffer.baseAddress, buffer.count, blocking ? 0 : Int32(MSG_DONTWAIT))
                if count > 0 {
                    tls.receive(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
                    // The encrypted bytes are in the TLS connection's buffer now: the space holds plaintext next.
                    return decrypt(into: reader, using: buffer, blocking: blocking)
                }
                if count == 0 { return .failed(fail(CacheStoreError(.unreachable, "the server closed the connection"))) }
                let code = errno
                if code == EINTR { continue }
                if code == EAGAIN || code == EWOULDBLOCK {
                    guard blocking else { return .wouldBlock }
                    return .failed(fail(CacheStoreError(.timeout, "no reply within \(commandTimeout)")))
                }
                return .failed(fail(reasonGiven(or: CacheStoreError(.unreachable, "cannot read from \(endpoint): \(Self.text(ofErrno: code))"))))
            }
        }
    }

    /// Decrypts every whole record received into `reader`.
    private func decrypt(
        into reader: UnsafeMutablePointer<redisReader>, using buffer: UnsafeMutableRawBufferPointer, blocking: Bool
    ) -> ReceiveOutcome {
        while true {
            switch tls.read(into: buffer) {
            case .done(let count):
                guard count > 0 else { return .received }
                redisReaderFeed(reader, buffer.baseAddress?.assumingMemoryBound(to: CChar.self), count)
                // Nothing left to decrypt: spare the read that would say so.
                if !tls.mayRead { return .received }
            case .needsInput:
                // Reading may have produced messages for the server (a key update's answer).
                if case .failed(let error) = flush(blocking: blocking) { return .failed(error) }
                return .received
            case .closed:
                return .failed(fail(CacheStoreError(.unreachable, "the server closed the connection (TLS close_notify)")))
            case .failed(let reason):
                return .failed(fail(CacheStoreError(.unreachable, "TLS connection to \(endpoint) failed: \(Self.readable(reason))")))
            }
        }
    }

    // MARK: private

    private var closedDuringHandshake: CacheStoreError {
        CacheStoreError(.unreachable, "TLS handshake with \(endpoint) failed: the server closed the connection (is it a TLS port?)")
    }

    /// After the socket failed (the server reset the connection): the TLS alert the server sent first, if it is
    /// still in the socket's buffer, says why better than the socket's error does (a server that refused the
    /// client certificate after the handshake, as TLS 1.3 servers do, resets the connection when a command
    /// arrives); else `socketError`.
    private func reasonGiven(or socketError: CacheStoreError) -> CacheStoreError {
        withUnsafeTemporaryAllocation(byteCount: Self.bufferSize, alignment: 16) { buffer in
            while true {
                let count = recv(socket, buffer.baseAddress, buffer.count, Int32(MSG_DONTWAIT))
                guard count > 0 else { break }
                tls.receive(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
            }
            while true {
                switch tls.read(into: buffer) {
                case .failed(let reason):
                    return CacheStoreError(.unreachable, "TLS connection to \(endpoint) failed: \(Self.readable(reason))")
                case .done(let count) where count > 0:
                    continue
                default:
                    return socketError
                }
            }
        }
    }

    /// Records the channel's first failure; later operations report it.
    private func fail(_ error: CacheStoreError) -> CacheStoreError {
        if failure == nil { failure = error }
        return failure!
    }

    /// Waits until the socket is ready for `events` (POLLIN, POLLOUT), at most until `deadline`.
    private func wait(for events: Int16, until deadline: UInt64, timeout: Duration) -> CacheStoreError? {
        while true {
            let now = monotonicNanoseconds()
            guard now < deadline else {
                return CacheStoreError(
                    .unreachable, "TLS handshake with \(endpoint) failed: no answer within \(timeout) (is it a TLS port?)")
            }
            var descriptor = pollfd(fd: socket, events: events, revents: 0)
            let milliseconds = Int32(clamping: (deadline - now + 999_999) / 1_000_000)
            let ready = poll(&descriptor, 1, milliseconds)
            if ready > 0 { return nil }
            if ready < 0 && errno != EINTR {
                return CacheStoreError(.unreachable, "TLS handshake with \(endpoint) failed: \(Self.text(ofErrno: errno))")
            }
        }
    }

    /// OpenSSL's reason without its error code and library (`error:0A000086:SSL routines::certificate verify
    /// failed: hostname mismatch` reads `certificate verify failed: hostname mismatch`).
    static func readable(_ reason: String) -> String {
        guard reason.hasPrefix("error:") else { return reason }
        let fields = reason.split(separator: ":", maxSplits: 4, omittingEmptySubsequences: false)
        guard fields.count == 5, !fields[4].isEmpty else { return reason }
        return String(fields[4])
    }

    private static func text(ofErrno code: Int32) -> String {
        String(cString: strerror(code))
    }
}

/// `send(2)` flags that keep a write to a socket the server closed from raising SIGPIPE.
private let noSignal = Int32(MSG_NOSIGNAL)
