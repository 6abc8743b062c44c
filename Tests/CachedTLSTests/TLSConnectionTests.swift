import CachedTLS
import CachedTestSupport
import Foundation
import Testing

/// TLS contexts from Redis's settings, and connections driven in memory: a client and a server handing each other
/// their bytes, with no socket in between.
@Suite("TLS contexts and connections")
struct TLSConnectionTests {
    let certificates: TestCertificates

    init() throws { certificates = try TestCertificates.shared() }

    func serverSettings(_ change: (inout TLSConfiguration) -> Void = { _ in }) -> TLSConfiguration {
        var settings = TLSConfiguration(role: .server)
        settings.certificateFile = certificates.serverCertificate
        settings.keyFile = certificates.serverKey
        settings.caCertificateFile = certificates.caCertificate
        change(&settings)
        return settings
    }

    func clientSettings(_ change: (inout TLSConfiguration) -> Void = { _ in }) -> TLSConfiguration {
        var settings = TLSConfiguration(role: .client)
        settings.caCertificateFile = certificates.caCertificate
        settings.certificateFile = certificates.clientCertificate
        settings.keyFile = certificates.clientKey
        change(&settings)
        return settings
    }

    /// Moves every encrypted byte one side has to send to the other.
    static func transfer(from sender: TLSConnection, to receiver: TLSConnection) {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while sender.pendingOutput > 0 {
            let count = buffer.withUnsafeMutableBytes { sender.takeOutput(into: $0) }
            buffer.withUnsafeBytes { receiver.receive(UnsafeRawBufferPointer(rebasing: $0[..<count])) }
        }
    }

    /// Runs the handshake to its end on both sides: the outcomes of the client's and the server's last steps.
    static func handshake(_ client: TLSConnection, _ server: TLSConnection) -> (TLSConnection.Outcome, TLSConnection.Outcome) {
        var clientStep = client.handshake()
        var serverStep = TLSConnection.Outcome.needsInput
        for _ in 0..<10 {
            transfer(from: client, to: server)
            serverStep = server.handshake()
            transfer(from: server, to: client)
            clientStep = client.handshake()
            if case .failed = clientStep { break }
            if case .failed = serverStep { break }
            if clientStep == .done(0) && serverStep == .done(0) { break }
        }
        // The server learns of a refused certificate once the client's last flight arrives.
        transfer(from: client, to: server)
        if serverStep == .needsInput || serverStep == .done(0) { serverStep = server.handshake() }
        return (clientStep, serverStep)
    }

    /// Everything `receiver` can decrypt now.
    static func readAll(_ receiver: TLSConnection) -> [UInt8] {
        var result: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16_384)
        while true {
            let outcome = buffer.withUnsafeMutableBytes { receiver.read(into: $0) }
            guard case .done(let count) = outcome, count > 0 else { return result }
            result += buffer[..<count]
        }
    }

    @Test("a client and a server agree, then carry bytes both ways, large ones across several records")
    func roundTrip() throws {
        let server = try TLSConnection(context: TLSContext(serverSettings()))
        let client = try TLSConnection(context: TLSContext(clientSettings()), serverName: "localhost")
        let (clientStep, serverStep) = Self.handshake(client, server)
        #expect(clientStep == .done(0))
        #expect(serverStep == .done(0))
        #expect(client.isEstablished && server.isEstablished)
        let request = Array("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n".utf8)
        #expect(request.withUnsafeBytes { client.write($0) } == .done(request.count))
        Self.transfer(from: client, to: server)
        #expect(Self.readAll(server) == request)
        let reply = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        #expect(reply.withUnsafeBytes { server.write($0) } == .done(reply.count))
        Self.transfer(from: server, to: client)
        #expect(Self.readAll(client) == reply)
    }

    @Test("the server's name is checked: a certificate for another name is refused by the client")
    func hostnameMismatch() throws {
        let server = try TLSConnection(
            context: TLSContext(serverSettings { $0.certificateFile = certificates.otherNameCertificate }))
        let client = try TLSConnection(context: TLSContext(clientSettings()), serverName: "localhost")
        let (clientStep, _) = Self.handshake(client, server)
        guard case .failed(let reason) = clientStep else {
            Issue.record("the client accepted a certificate for elsewhere.test: \(clientStep)")
            return
        }
        #expect(reason.contains("certificate verify failed"), "\(reason)")
        // An IP address is checked against the certificate's addresses.
        let byAddress = try TLSConnection(context: TLSContext(clientSettings()), serverName: "127.0.0.1")
        let server2 = try TLSConnection(context: TLSContext(serverSettings()))
        #expect(Self.handshake(byAddress, server2).0 == .done(0))
    }

    @Test("without the name check a client accepts a certificate for another name, but still checks its chain")
    func serverNameNotChecked() throws {
        let otherName = { try TLSConnection(
            context: TLSContext(self.serverSettings { $0.certificateFile = self.certificates.otherNameCertificate })) }
        let unchecked = try TLSConnection(context: TLSContext(clientSettings()), serverName: "localhost", checksServerName: false)
        #expect(Self.handshake(unchecked, try otherName()).0 == .done(0))
        let untrusted = try TLSConnection(
            context: TLSContext(clientSettings { $0.caCertificateFile = certificates.otherCACertificate }),
            serverName: "localhost", checksServerName: false)
        guard case .failed(let reason) = Self.handshake(untrusted, try otherName()).0 else {
            Issue.record("a certificate from an untrusted CA was accepted")
            return
        }
        #expect(reason.contains("certificate verify failed"), "\(reason)")
    }

    @Test("a client without a certificate, or with one from another CA, is refused when one is required")
    func clientCertificates() throws {
        let none = try TLSConnection(
            context: TLSContext(clientSettings { $0.certificateFile = ""; $0.keyFile = "" }), serverName: "localhost")
        let server = try TLSConnection(context: TLSContext(serverSettings()))
        guard case .failed = Self.handshake(none, server).1 else {
            Issue.record("a client without a certificate was accepted")
            return
        }
        let foreign = try TLSConnection(
            context: TLSContext(clientSettings {
                $0.certificateFile = certificates.otherClientCertificate
                $0.keyFile = certificates.otherClientKey
            }), serverName: "localhost")
        let server2 = try TLSConnection(context: TLSContext(serverSettings()))
        guard case .failed = Self.handshake(foreign, server2).1 else {
            Issue.record("a client certificate from another CA was accepted")
            return
        }
        // optional: no certificate is fine.
        let optional = try TLSConnection(context: TLSContext(serverSettings { $0.peerVerification = .optional }))
        let bare = try TLSConnection(
            context: TLSContext(clientSettings { $0.certificateFile = ""; $0.keyFile = "" }), serverName: "localhost")
        #expect(Self.handshake(bare, optional) == (.done(0), .done(0)))
    }

    @Test("a server limited to TLS 1.3 refuses a client limited to TLS 1.2")
    func protocolVersions() throws {
        let server = try TLSConnection(context: TLSContext(serverSettings { $0.protocols = "TLSv1.3" }))
        let client = try TLSConnection(context: TLSContext(clientSettings { $0.protocols = "TLSv1.2" }), serverName: "localhost")
        guard case .failed = Self.handshake(client, server).0 else {
            Issue.record("the versions agreed although they share none")
            return
        }
    }

    @Test("settings that cannot be loaded are refused with the reason Redis logs")
    func refusedSettings() throws {
        #expect(throws: TLSError("No tls-cert-file configured!")) {
            try TLSContext(serverSettings { $0.certificateFile = "" })
        }
        #expect(throws: TLSError("No tls-key-file configured!")) {
            try TLSContext(serverSettings { $0.keyFile = "" })
        }
        #expect(throws: TLSError(
            "Either tls-ca-cert-file or tls-ca-cert-dir must be specified when tls-cluster, tls-replication or tls-auth-clients are enabled!"
        )) {
            try TLSContext(serverSettings { $0.caCertificateFile = "" })
        }
        // No CA is needed when clients are not asked for certificates.
        _ = try TLSContext(serverSettings { $0.caCertificateFile = ""; $0.peerVerification = .no })
        #expect(throws: TLSError(
            "Invalid tls-protocols specified. Use a combination of 'TLSv1', 'TLSv1.1', 'TLSv1.2' and 'TLSv1.3'."
        )) {
            try TLSContext(serverSettings { $0.protocols = "TLSv1.2 TLSv1.4" })
        }
        let missing = #expect(throws: TLSError.self) { try TLSContext(serverSettings { $0.certificateFile = "/nonexistent.crt" }) }
        #expect(missing?.description.hasPrefix("Failed to load certificate and key: /nonexistent.crt") == true)
        let wrongPassword = #expect(throws: TLSError.self) {
            try TLSContext(serverSettings {
                $0.keyFile = certificates.encryptedServerKey
                $0.keyFilePassword = "not the password"
            })
        }
        #expect(wrongPassword != nil)
        _ = try TLSContext(serverSettings {
            $0.keyFile = certificates.encryptedServerKey
            $0.keyFilePassword = certificates.encryptedKeyPassword
        })
        let ciphers = #expect(throws: TLSError.self) { try TLSContext(serverSettings { $0.ciphers = "NOT-A-CIPHER" }) }
        #expect(ciphers?.description.hasPrefix("Failed to configure ciphers: ") == true)
        let suites = #expect(throws: TLSError.self) { try TLSContext(serverSettings { $0.cipherSuites = "TLS_NOT_A_SUITE" }) }
        #expect(suites?.description.hasPrefix("Failed to configure ciphersuites: ") == true)
    }

    @Test("close_notify from one side reads as closed on the other")
    func closeNotify() throws {
        let server = try TLSConnection(context: TLSContext(serverSettings()))
        let client = try TLSConnection(context: TLSContext(clientSettings()), serverName: "localhost")
        #expect(Self.handshake(client, server) == (.done(0), .done(0)))
        client.shutdown()
        Self.transfer(from: client, to: server)
        var buffer = [UInt8](repeating: 0, count: 64)
        #expect(buffer.withUnsafeMutableBytes { server.read(into: $0) } == .closed)
    }
}
