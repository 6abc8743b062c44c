import CTLS

/// One TLS connection's state, without I/O: encrypted bytes from the peer go in with ``receive(_:)``, plaintext
/// comes out of ``read(into:)``; plaintext goes in with ``write(_:)``, and the encrypted bytes to send come out
/// of ``takeOutput(into:)``. The caller moves the bytes between it and the socket, so that an event loop or a
/// blocking client can drive it alike. Not thread-safe: one user at a time.
public final class TLSConnection {
    private let ssl: OpaquePointer
    /// Keeps the context alive as long as the connection.
    public let context: TLSContext

    /// What a step of the connection came to.
    public enum Outcome: Equatable, Sendable {
        /// Done: the handshake is complete, or that many bytes were read or written.
        case done(Int)
        /// More bytes from the peer are needed first.
        case needsInput
        /// The peer closed the TLS session (close_notify).
        case closed
        /// The connection failed; the reason as Redis logs it.
        case failed(String)
    }

    /// A connection in the role of `context` (server or client). For a client, `serverName` is sent as SNI (unless
    /// it is an IP address) and, when the context verifies peers and `checksServerName` is true, the server's
    /// certificate must be for it: a DNS name among the certificate's names, an IP address among its addresses.
    public init(context: TLSContext, serverName: String? = nil, checksServerName: Bool = true) throws(TLSError) {
        let server = context.configuration.role == .server
        guard let ssl = cached_tls_new(context.context, server ? 1 : 0) else {
            throw .openSSL("Failed to create a TLS connection: ")
        }
        if let serverName, !server {
            let verify = context.configuration.peerVerification == .yes && checksServerName ? Int32(1) : 0
            guard cached_tls_set_server_name(ssl, serverName, verify) == 0 else {
                SSL_free(ssl)
                throw .openSSL("Failed to set the server name \(serverName): ")
            }
        }
        self.ssl = ssl
        self.context = context
    }

    deinit { SSL_free(ssl) }

    /// Whether the handshake has completed.
    public var isEstablished: Bool { SSL_is_init_finished(ssl) == 1 }

    /// Hands encrypted bytes received from the peer to the connection (all of them: its buffer grows).
    public func receive(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        var offset = 0
        while offset < bytes.count {
            let chunk = Int32(clamping: bytes.count - offset)
            let taken = cached_tls_feed(ssl, base + offset, chunk)
            guard taken > 0 else { return }
            offset += Int(taken)
        }
    }

    /// Advances the handshake with what has been received; `.done(0)` once it is complete.
    public func handshake() -> Outcome {
        // A stale error of another connection on this thread would read as this one's failure.
        cached_tls_clear_errors()
        let result = SSL_do_handshake(ssl)
        return result == 1 ? .done(0) : outcome(of: result)
    }

    /// Decrypts received bytes into `buffer`: `.done(n)` with the count written, `.needsInput` when a whole
    /// record has not arrived yet.
    public func read(into buffer: UnsafeMutableRawBufferPointer) -> Outcome {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return .done(0) }
        cached_tls_clear_errors()
        let result = SSL_read(ssl, base, Int32(clamping: buffer.count))
        return result > 0 ? .done(Int(result)) : outcome(of: result)
    }

    /// Plaintext already decrypted and waiting to be read (a record is decrypted whole).
    public var pendingPlaintext: Int { Int(SSL_pending(ssl)) }

    /// Whether a ``read(into:)`` now could give anything: decrypted bytes are waiting, or received bytes OpenSSL
    /// has not taken yet (it takes a record at a time, and keeps none back beyond the record it is reading).
    public var mayRead: Bool { SSL_pending(ssl) > 0 || cached_tls_pending_input(ssl) > 0 }

    /// Encrypts `bytes` (all of them), to be taken with ``takeOutput(into:)``.
    public func write(_ bytes: UnsafeRawBufferPointer) -> Outcome {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return .done(0) }
        var offset = 0
        cached_tls_clear_errors()
        while offset < bytes.count {
            let result = SSL_write(ssl, base + offset, Int32(clamping: bytes.count - offset))
            guard result > 0 else { return outcome(of: result) }
            offset += Int(result)
        }
        return .done(offset)
    }

    /// Encrypted bytes waiting to be sent to the peer.
    public var pendingOutput: Int { Int(cached_tls_pending_output(ssl)) }

    /// Moves up to `buffer.count` encrypted bytes to send into `buffer`; returns the count.
    public func takeOutput(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return 0 }
        return Int(cached_tls_take_output(ssl, base, Int32(clamping: buffer.count)))
    }

    /// Starts closing the TLS session: a close_notify alert goes to ``takeOutput(into:)``.
    public func shutdown() {
        _ = SSL_shutdown(ssl)
        cached_tls_clear_errors()
    }

    /// The outcome of an OpenSSL call that returned `result` (not a success).
    private func outcome(of result: Int32) -> Outcome {
        switch SSL_get_error(ssl, result) {
        case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE:
            return .needsInput
        case SSL_ERROR_ZERO_RETURN:
            return .closed
        default:
            let verify = String(cString: cached_tls_verify_error(ssl))
            let reason = OpenSSLErrors.take()
            if !verify.isEmpty { return .failed("\(reason.isEmpty ? "certificate verify failed" : reason): \(verify)") }
            return .failed(reason.isEmpty ? "TLS connection failed" : reason)
        }
    }
}
