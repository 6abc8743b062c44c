import CachedNetworking
extension RESPStore {
    /// How a store's connections use TLS (`rediss://`): which certificates the server's must lead to, how much of
    /// it is checked, the name checked, and a client certificate for servers that require one.
    ///
    /// The defaults verify the server: its chain must lead to a CA the system trusts, be valid now, and the
    /// certificate must be for the host the store connects to. Set ``RESPStore/Configuration/tls`` to one, or use
    /// a `rediss://` URL, which sets the defaults:
    ///
    /// ```swift
    /// var configuration = try RESPStore.Configuration(url: "rediss://app:s3cret@cache.internal:6380")
    /// configuration.tls = RESPStore.TLS(
    ///     trustRoots: .file("/etc/cached/tls/ca.crt"),           // your own CA instead of the system's
    ///     certificateChainFile: "/etc/cached/tls/client.crt",     // mutual TLS (tls-auth-clients yes)
    ///     privateKeyFile: "/etc/cached/tls/client.key")
    /// let store = RESPStore(configuration: configuration)
    /// ```
    ///
    /// The files are read once, when the store is created; a store made after a certificate is renewed reads the
    /// new one. Settings that cannot be used (a missing file, a key that does not match its certificate) make
    /// every call fail with ``CacheStoreError/Kind/unreachable`` and the reason.
    ///
    /// TLS 1.2 and 1.3 are allowed, with OpenSSL's default ciphers (the system's `libssl`, OpenSSL 3 on Debian 12).
    public struct TLS: Sendable, Hashable, CustomStringConvertible {
        /// The certificates that the server's chain must lead to.
        public struct TrustRoots: Sendable, Hashable, CustomStringConvertible {
            enum Base: Sendable, Hashable {
                case system
                case file(String)
                case directory(String)
            }

            let base: Base

            /// The CAs the system trusts: OpenSSL's default locations (`/etc/ssl/certs` on Debian, kept by the
            /// `ca-certificates` package), which the `SSL_CERT_FILE` and `SSL_CERT_DIR` environment variables
            /// override. The default.
            public static let system = TrustRoots(base: .system)

            /// The CA certificates in a PEM file (one or several), instead of the system's.
            /// - Parameter path: the file's path.
            public static func file(_ path: String) -> TrustRoots { TrustRoots(base: .file(path)) }

            /// A directory of CA certificates in PEM files, named by hash as `openssl rehash` names them, instead of
            /// the system's.
            /// - Parameter path: the directory's path.
            public static func directory(_ path: String) -> TrustRoots { TrustRoots(base: .directory(path)) }

            /// `system`, or the file or directory, for logs.
            public var description: String {
                switch base {
                case .system: "system"
                case .file(let path): "file \(path)"
                case .directory(let path): "directory \(path)"
                }
            }
        }

        /// How much of the server's certificate is checked.
        public struct CertificateVerification: Sendable, Hashable, CustomStringConvertible {
            enum Base: Sendable, Hashable {
                case full
                case noHostname
                case none
            }

            let base: Base

            /// The chain must lead to one of ``TLS/trustRoots`` and be valid now, and the certificate must be for
            /// the server's name (``TLS/serverName``, else the host the store connects to): a host name among the
            /// certificate's DNS names, an IP address among its IP addresses. The default.
            public static let fullVerification = CertificateVerification(base: .full)

            /// The chain is checked, the name is not: any certificate that ``TLS/trustRoots`` vouch for is
            /// accepted. For servers reached at addresses their certificates do not name (cluster nodes announced
            /// by IP address, with certificates for host names) when the CA is one of your own that signs only
            /// such servers.
            public static let noHostnameVerification = CertificateVerification(base: .noHostname)

            /// **For tests only.** Nothing is checked: the traffic is encrypted, but anyone between the store and
            /// the server can pose as the server and read the passwords and values. Never use it in production;
            /// trust the test's own CA with ``TrustRoots/file(_:)`` where you can. A store configured with it
            /// logs a warning when it is created.
            public static let insecureNoVerificationForTestsOnly = CertificateVerification(base: .none)

            /// The setting's name, for logs.
            public var description: String {
                switch base {
                case .full: "full verification"
                case .noHostname: "no hostname verification"
                case .none: "NO VERIFICATION (insecure, for tests only)"
                }
            }
        }

        /// The certificates that the server's chain must lead to. Default ``TrustRoots/system``.
        public var trustRoots: TrustRoots
        /// How much of the server's certificate is checked. Default ``CertificateVerification/fullVerification``.
        public var certificateVerification: CertificateVerification
        /// The client certificate chain (PEM, the certificate first), for servers that require one (mutual TLS:
        /// Redis's and cached-server's `tls-auth-clients yes`, their default); nil for none. Set
        /// ``privateKeyFile`` with it.
        public var certificateChainFile: String?
        /// The private key (PEM) of ``certificateChainFile``; nil for none.
        public var privateKeyFile: String?
        /// The password that decrypts ``privateKeyFile``, when it is encrypted; nil when it is not. Never logged.
        public var privateKeyPassword: String?
        /// The name sent to the server (SNI) and checked against its certificate; nil for the host the store
        /// connects to (for a cluster, each node's host as the cluster announces it). An IP address is checked
        /// against the certificate's addresses and not sent (SNI carries host names only). Default nil.
        public var serverName: String?

        /// TLS settings; the defaults verify the server against the system's CAs and present no certificate.
        /// - Parameters:
        ///   - trustRoots: the certificates the server's chain must lead to. Default the system's.
        ///   - certificateChainFile: a client certificate chain (PEM) for mutual TLS. Default none.
        ///   - privateKeyFile: its private key (PEM). Default none.
        ///   - privateKeyPassword: the key's password, when it is encrypted. Default none.
        ///   - serverName: the name sent and checked instead of the host. Default the host.
        ///   - certificateVerification: how much is checked. Default ``CertificateVerification/fullVerification``.
        public init(
            trustRoots: TrustRoots = .system, certificateChainFile: String? = nil, privateKeyFile: String? = nil,
            privateKeyPassword: String? = nil, serverName: String? = nil,
            certificateVerification: CertificateVerification = .fullVerification
        ) {
            self.trustRoots = trustRoots
            self.certificateChainFile = certificateChainFile
            self.privateKeyFile = privateKeyFile
            self.privateKeyPassword = privateKeyPassword
            self.serverName = serverName
            self.certificateVerification = certificateVerification
        }

        /// The settings, without the key's password (safe to log).
        public var description: String {
            var parts = ["trust \(trustRoots)", "\(certificateVerification)"]
            if let serverName { parts.append("server name \(serverName)") }
            if let certificateChainFile { parts.append("client certificate \(certificateChainFile)") }
            return "TLS (" + parts.joined(separator: ", ") + ")"
        }
    }
}
