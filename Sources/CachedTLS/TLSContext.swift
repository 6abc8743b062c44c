import CTLS

/// TLS settings, with the meaning of Redis's `tls-*` directives: for the server's listeners and for the SDK's
/// connections to a server alike.
public struct TLSConfiguration: Sendable, Equatable {
    /// Which side of the connection the context is for.
    public enum Role: Sendable, Equatable {
        case server
        case client
    }

    /// Whether the peer must present a certificate signed by a trusted CA (`tls-auth-clients`).
    public enum PeerVerification: String, Sendable, Equatable, CaseIterable {
        /// No certificate is asked for (a client: the server's is not checked).
        case no
        /// A certificate is required and checked.
        case yes
        /// A certificate is checked if the peer presents one (servers only).
        case optional
    }

    public var role: Role
    /// The certificate chain (PEM), leaf first; empty for none.
    public var certificateFile: String = ""
    /// The private key (PEM) of the certificate; empty for none.
    public var keyFile: String = ""
    /// The password that decrypts ``keyFile``, if it is encrypted.
    public var keyFilePassword: String = ""
    /// Trusted CA certificates (PEM): a file, a directory hashed as `c_rehash` does, or both.
    public var caCertificateFile: String = ""
    public var caCertificateDirectory: String = ""
    /// Whether to use the system's trusted CAs when neither CA setting is given (clients).
    public var useSystemTrustStore = false
    /// The protocol versions allowed, as Redis spells them (`"TLSv1.2 TLSv1.3"`); empty for TLS 1.2 and 1.3.
    public var protocols: String = ""
    /// OpenSSL's cipher list for TLS 1.2 and below; empty for OpenSSL's default.
    public var ciphers: String = ""
    /// OpenSSL's TLS 1.3 cipher suites; empty for OpenSSL's default.
    public var cipherSuites: String = ""
    public var preferServerCiphers = false
    public var sessionCaching = true
    public var sessionCacheSize = 20480
    public var sessionCacheTimeout = 300
    /// Diffie-Hellman parameters (PEM); empty to let OpenSSL choose.
    public var dhParamsFile: String = ""
    public var peerVerification: PeerVerification

    /// A configuration for `role` with Redis's defaults: a server requires client certificates, a client checks
    /// the server's.
    public init(role: Role) {
        self.role = role
        self.peerVerification = .yes
    }

    /// The protocol versions of ``protocols``, or the reason they are not acceptable.
    func protocolVersions() -> Result<Int32, TLSError> {
        let names = protocols.split(separator: " ", omittingEmptySubsequences: true)
        guard !names.isEmpty else { return .success(Int32(CACHED_TLS_V1_2 | CACHED_TLS_V1_3)) }
        var versions: Int32 = 0
        for name in names {
            switch name.lowercased() {
            case "tlsv1": versions |= Int32(CACHED_TLS_V1)
            case "tlsv1.1": versions |= Int32(CACHED_TLS_V1_1)
            case "tlsv1.2": versions |= Int32(CACHED_TLS_V1_2)
            case "tlsv1.3": versions |= Int32(CACHED_TLS_V1_3)
            default:
                return .failure(TLSError(
                    "Invalid tls-protocols specified. Use a combination of 'TLSv1', 'TLSv1.1', 'TLSv1.2' and 'TLSv1.3'."))
            }
        }
        return .success(versions)
    }
}

/// Why a TLS context could not be made, or a connection failed, in the words Redis logs.
public struct TLSError: Error, CustomStringConvertible, Sendable, Equatable {
    public let description: String
    public init(_ description: String) { self.description = description }

    /// `prefix`, then the first error in OpenSSL's queue (which is cleared).
    static func openSSL(_ prefix: String) -> TLSError {
        TLSError(prefix + OpenSSLErrors.take())
    }
}

enum OpenSSLErrors {
    /// The first error in OpenSSL's queue as text, clearing the queue; empty when there is none.
    static func take() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        let length = buffer.withUnsafeMutableBufferPointer { cached_tls_error_text($0.baseAddress, $0.count) }
        guard length > 0 else { return "" }
        return String(decoding: buffer.prefix(Int(length)).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// An OpenSSL context made from a ``TLSConfiguration``: what every connection made from it shares (certificate,
/// key, trusted CAs, protocols, ciphers, session cache). Connections may be made from several threads at once.
public final class TLSContext: @unchecked Sendable {
    let context: OpaquePointer
    public let configuration: TLSConfiguration

    /// Makes a context; the files are read now, so a later change to them takes a new context.
    /// - Throws: ``TLSError`` saying what is missing or could not be loaded, as Redis logs it.
    public init(_ configuration: TLSConfiguration) throws(TLSError) {
        let server = configuration.role == .server
        if server {
            guard !configuration.certificateFile.isEmpty else { throw TLSError("No tls-cert-file configured!") }
            guard !configuration.keyFile.isEmpty else { throw TLSError("No tls-key-file configured!") }
            if configuration.peerVerification != .no && configuration.caCertificateFile.isEmpty
                && configuration.caCertificateDirectory.isEmpty
            {
                throw TLSError(
                    "Either tls-ca-cert-file or tls-ca-cert-dir must be specified when tls-cluster, tls-replication or tls-auth-clients are enabled!")
            }
        }
        let versions = try configuration.protocolVersions().get()
        guard let context = cached_tls_ctx_new(server ? 1 : 0) else { throw .openSSL("Failed to create TLS context: ") }
        do throws(TLSError) {
            guard cached_tls_ctx_set_protocols(context, versions) == 0 else {
                throw .openSSL("Failed to configure protocols: ")
            }
            if server {
                cached_tls_ctx_prefer_server_ciphers(context, configuration.preferServerCiphers ? 1 : 0)
                cached_tls_ctx_set_session_cache(
                    context, configuration.sessionCaching ? 1 : 0, configuration.sessionCacheSize,
                    configuration.sessionCacheTimeout)
            }
            if !configuration.certificateFile.isEmpty || !configuration.keyFile.isEmpty {
                let password = configuration.keyFilePassword
                let loaded = password.isEmpty
                    ? cached_tls_ctx_use_certificate(context, configuration.certificateFile, configuration.keyFile, nil)
                    : cached_tls_ctx_use_certificate(
                        context, configuration.certificateFile, configuration.keyFile, password)
                guard loaded == 0 else {
                    throw .openSSL(
                        "Failed to load certificate and key: \(configuration.certificateFile), \(configuration.keyFile): ")
                }
            }
            let caFile = configuration.caCertificateFile
            let caDirectory = configuration.caCertificateDirectory
            if !caFile.isEmpty || !caDirectory.isEmpty {
                guard SSL_CTX_load_verify_locations(
                    context, caFile.isEmpty ? nil : caFile, caDirectory.isEmpty ? nil : caDirectory) == 1
                else { throw .openSSL("Failed to configure CA certificate(s) file/directory: ") }
            } else if configuration.useSystemTrustStore {
                guard SSL_CTX_set_default_verify_paths(context) == 1 else {
                    throw .openSSL("Failed to load the system's trusted CA certificates: ")
                }
            }
            if !configuration.ciphers.isEmpty {
                guard SSL_CTX_set_cipher_list(context, configuration.ciphers) == 1 else {
                    throw .openSSL("Failed to configure ciphers: ")
                }
            }
            if !configuration.cipherSuites.isEmpty {
                guard SSL_CTX_set_ciphersuites(context, configuration.cipherSuites) == 1 else {
                    throw .openSSL("Failed to configure ciphersuites: ")
                }
            }
            if server {
                let dh = configuration.dhParamsFile
                guard cached_tls_ctx_set_dh_params(context, dh.isEmpty ? nil : dh) == 0 else {
                    throw .openSSL("Failed to load DH params file: \(dh): ")
                }
            }
            switch configuration.peerVerification {
            case .no: cached_tls_ctx_set_verify(context, 0)
            case .yes: cached_tls_ctx_set_verify(context, 1)
            case .optional: cached_tls_ctx_set_verify(context, 2)
            }
        } catch {
            SSL_CTX_free(context)
            throw error
        }
        self.context = context
        self.configuration = configuration
    }

    deinit { SSL_CTX_free(context) }
}
