import Foundation
import Glibc

extension TestCertificates {
    /// A server's TLS directives for this set: its certificate and key (for `localhost` and 127.0.0.1), and the
    /// CA that signs client certificates.
    public var serverArguments: [String] {
        ["--tls-cert-file", serverCertificate, "--tls-key-file", serverKey, "--tls-ca-cert-file", caCertificate]
    }

    /// redis-cli's options for a TLS connection to `port` on 127.0.0.1 trusting this set's CA, with `certificate`
    /// (a certificate and its key) if given.
    public func cliOptions(port: Int, certificate: (String, String)?) -> [String] {
        var options = ["-h", "127.0.0.1", "-p", String(port), "--tls", "--cacert", caCertificate]
        if let (cert, key) = certificate { options += ["--cert", cert, "--key", key] }
        return options
    }
}

extension ServerProcess {
    /// Starts a server of `kind` listening on a free TLS port with the TLS directives of `certificates` (which
    /// `arguments` may override), and on its plain port too unless `plain` is false; waits until it is up (the TLS
    /// port accepts connections, for a server without a plain port).
    /// - Returns: the server (whose ``port`` is the TLS port when `plain` is false) and its TLS port.
    public static func startTLS(
        _ kind: Kind, certificates: TestCertificates, arguments: [String] = [], plain: Bool = true
    ) throws -> (server: ServerProcess, tlsPort: Int) {
        let tlsPort = try freeLoopbackPort()
        let tlsArguments = ["--tls-port", String(tlsPort)] + certificates.serverArguments + arguments
        guard !plain else { return (try start(kind, arguments: tlsArguments), tlsPort) }
        let server = try launch(kind, arguments: ["--port", "0", "--bind", "127.0.0.1"] + tlsArguments, port: tlsPort)
        let deadline = Date().addingTimeInterval(15)
        while !acceptsConnections(port: tlsPort) {
            guard Date() < deadline, server.isRunning else {
                server.stop()
                throw TestEnvironmentError("\(kind.rawValue) did not listen on its TLS port: \(server.standardError())")
            }
            usleep(10_000)
        }
        return (server, tlsPort)
    }
}
