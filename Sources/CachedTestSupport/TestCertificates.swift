import Foundation

/// Certificates for TLS tests, made by the openssl command-line tool in a fresh directory: a CA and a server
/// certificate it signed (for `localhost` and 127.0.0.1), a client certificate it signed, a second CA with a
/// client certificate of its own, an expired server certificate, and the server's key encrypted with a password.
/// Nothing here is a secret: each run makes new keys, removed with the directory.
public struct TestCertificates: Sendable {
    public let directory: URL
    public var caCertificate: String { path("ca.crt") }
    public var serverCertificate: String { path("server.crt") }
    public var serverKey: String { path("server.key") }
    /// ``serverKey`` encrypted (AES-256) with ``encryptedKeyPassword``.
    public var encryptedServerKey: String { path("server-encrypted.key") }
    public let encryptedKeyPassword = "test-only-password"
    public var clientCertificate: String { path("client.crt") }
    public var clientKey: String { path("client.key") }
    /// A CA the server does not trust, and a client certificate it signed.
    public var otherCACertificate: String { path("other-ca.crt") }
    public var otherClientCertificate: String { path("other-client.crt") }
    public var otherClientKey: String { path("other-client.key") }
    /// A server certificate for `localhost` signed by ``caCertificate`` whose validity ended yesterday.
    public var expiredServerCertificate: String { path("expired.crt") }
    /// A server certificate signed by ``caCertificate`` for another name only (`elsewhere.test`).
    public var otherNameCertificate: String { path("other-name.crt") }

    private func path(_ name: String) -> String { directory.appendingPathComponent(name).path }

    /// Makes the set in a new temporary directory (RSA 2048 keys: about a second in all).
    public static func make() throws -> TestCertificates {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cached-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let set = TestCertificates(directory: directory)
        func file(_ name: String) -> String { directory.appendingPathComponent(name).path }
        func run(_ arguments: [String]) throws {
            let output = try ExternalProgram.openssl.run(arguments, timeout: 60)
            guard output.status == 0 else {
                throw TestEnvironmentError("openssl \(arguments.joined(separator: " ")) failed: \(output.summary)")
            }
        }
        func authority(_ name: String, subject: String) throws {
            try run(["req", "-x509", "-new", "-nodes", "-newkey", "rsa:2048", "-keyout", file("\(name).key"),
                     "-out", file("\(name).crt"), "-days", "2", "-subj", "/CN=\(subject)"])
        }
        func leaf(_ name: String, key: String? = nil, subject: String, ca: String, days: String = "2", names: String? = nil) throws {
            let keyFile = file(key ?? "\(name).key")
            if key == nil {
                try run(["req", "-new", "-nodes", "-newkey", "rsa:2048", "-keyout", keyFile, "-out", file("\(name).csr"),
                         "-subj", "/CN=\(subject)"])
            } else {
                try run(["req", "-new", "-key", keyFile, "-out", file("\(name).csr"), "-subj", "/CN=\(subject)"])
            }
            var arguments = ["x509", "-req", "-in", file("\(name).csr"), "-CA", file("\(ca).crt"), "-CAkey", file("\(ca).key"),
                             "-CAcreateserial", "-out", file("\(name).crt"), "-days", days]
            if let names {
                try Data("subjectAltName=\(names)\n".utf8).write(to: URL(fileURLWithPath: file("\(name).ext")))
                arguments += ["-extfile", file("\(name).ext")]
            }
            try run(arguments)
        }
        try authority("ca", subject: "cached test CA")
        try authority("other-ca", subject: "cached other test CA")
        try leaf("server", subject: "localhost", ca: "ca", names: "DNS:localhost,IP:127.0.0.1")
        try leaf("client", subject: "cached test client", ca: "ca")
        try leaf("other-client", subject: "cached other test client", ca: "other-ca")
        try leaf("expired", key: "server.key", subject: "localhost", ca: "ca", days: "-1", names: "DNS:localhost,IP:127.0.0.1")
        try leaf("other-name", key: "server.key", subject: "elsewhere.test", ca: "ca", names: "DNS:elsewhere.test")
        try run(["pkey", "-in", file("server.key"), "-out", file("server-encrypted.key"), "-aes256", "-passout",
                 "pass:\(set.encryptedKeyPassword)"])
        return set
    }

    /// One set for the whole test process, made on first use and removed when the process exits.
    public static func shared() throws -> TestCertificates { try sharedSet.get() }

    private static let sharedSet: Result<TestCertificates, any Error> = {
        let result = Result { try TestCertificates.make() }
        atexit { if case .success(let certificates) = TestCertificates.sharedSet { certificates.remove() } }
        return result
    }()

    /// Removes the directory and everything in it.
    public func remove() {
        try? FileManager.default.removeItem(at: directory)
    }
}
