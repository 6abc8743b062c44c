import CachedTestSupport
import Foundation
import Glibc
import Testing

/// TLS on `tls-port`, against both servers with the same settings: Redis's clients (redis-cli, redis-benchmark,
/// redis-py) over TLS, client certificates required, optional or refused, certificates that must be refused, and
/// certificate rotation with CONFIG SET. The certificates are made once by the openssl tool, and removed when the
/// test process exits.
@Suite("TLS")
struct TLSLiveTests {
    static let kinds: [ServerProcess.Kind] = [.redis, .cached]
    let certificates: TestCertificates

    init() throws { certificates = try TestCertificates.shared() }

    /// The server's TLS directives: its certificate and key, and the CA that signs client certificates.
    var serverTLS: [String] { certificates.serverArguments }

    /// Starts a server listening on a TLS port (and on its plain port, unless `plain` is false).
    func start(_ kind: ServerProcess.Kind, _ extra: [String] = [], plain: Bool = true) throws -> (ServerProcess, Int) {
        try ServerProcess.startTLS(kind, certificates: certificates, arguments: extra, plain: plain)
    }

    /// redis-cli over TLS to `port`, trusting the test CA, with the client certificate unless told otherwise.
    func cli(_ port: Int, _ arguments: [String], certificate: (String, String)? = nil, useClientCertificate: Bool = true)
        throws -> ProgramOutput
    {
        let chosen = certificate ?? (useClientCertificate ? (certificates.clientCertificate, certificates.clientKey) : nil)
        return try ExternalProgram.redisCli.run(certificates.cliOptions(port: port, certificate: chosen) + arguments)
    }

    @Test("redis-cli with a client certificate: commands work over TLS", arguments: kinds)
    func mutualTLS(_ kind: ServerProcess.Kind) throws {
        let (server, tlsPort) = try start(kind)
        defer { server.stop() }
        #expect(try cli(tlsPort, ["SET", "k", "over tls"]).standardOutput == "OK\n")
        #expect(try cli(tlsPort, ["GET", "k"]).standardOutput == "over tls\n")
        // The same keyspace on the plain port.
        #expect(try server.connect().command("GET", "k") == .bulk("over tls"))
    }

    @Test("without a client certificate, or with one from another CA, the handshake is refused", arguments: kinds)
    func clientCertificateRequired(_ kind: ServerProcess.Kind) throws {
        let (server, tlsPort) = try start(kind)
        defer { server.stop() }
        let none = try cli(tlsPort, ["PING"], useClientCertificate: false)
        #expect(!none.standardOutput.contains("PONG"), "\(none.summary)")
        let foreign = try cli(
            tlsPort, ["PING"], certificate: (certificates.otherClientCertificate, certificates.otherClientKey))
        #expect(!foreign.standardOutput.contains("PONG"), "\(foreign.summary)")
        #expect(try cli(tlsPort, ["PING"]).standardOutput == "PONG\n")
        #expect(server.isRunning)
    }

    @Test("tls-auth-clients optional: no certificate is fine, a foreign one is refused; no: none is asked for",
          arguments: kinds)
    func optionalClientCertificate(_ kind: ServerProcess.Kind) throws {
        let (server, tlsPort) = try start(kind, ["--tls-auth-clients", "optional"])
        defer { server.stop() }
        #expect(try cli(tlsPort, ["PING"], useClientCertificate: false).standardOutput == "PONG\n")
        #expect(try cli(tlsPort, ["PING"]).standardOutput == "PONG\n")
        let foreign = try cli(
            tlsPort, ["PING"], certificate: (certificates.otherClientCertificate, certificates.otherClientKey))
        #expect(!foreign.standardOutput.contains("PONG"), "\(foreign.summary)")
        #expect(try server.connect().command("CONFIG", "SET", "tls-auth-clients", "no") == .ok)
        #expect(try cli(tlsPort, ["PING"], useClientCertificate: false).standardOutput == "PONG\n")
    }

    @Test("a server whose certificate has expired is refused by the client", arguments: kinds)
    func expiredCertificate(_ kind: ServerProcess.Kind) throws {
        let (server, tlsPort) = try start(kind, ["--tls-cert-file", certificates.expiredServerCertificate])
        defer { server.stop() }
        let output = try cli(tlsPort, ["PING"])
        #expect(!output.standardOutput.contains("PONG"))
        #expect(output.standardError.contains("certificate verify failed"), "\(output.summary)")
        // Python's ssl module says why.
        let python = try ExternalProgram.python3.run([
            "-c",
            "import socket,ssl; c=ssl.create_default_context(cafile='\(certificates.caCertificate)'); "
                + "c.load_cert_chain('\(certificates.clientCertificate)','\(certificates.clientKey)'); "
                + "c.wrap_socket(socket.create_connection(('127.0.0.1',\(tlsPort))),server_hostname='localhost')",
        ])
        #expect(python.status != 0)
        #expect(python.standardError.contains("certificate has expired"), "\(python.summary)")
    }

    @Test("a plain-text client on the TLS port is closed without a reply; the server serves on", arguments: kinds)
    func plainTextOnTLSPort(_ kind: ServerProcess.Kind) throws {
        let (server, tlsPort) = try start(kind)
        defer { server.stop() }
        for request in ["PING\r\n", "*1\r\n$4\r\nPING\r\n", String(repeating: "x", count: 70_000)] {
            let connection = try RawConnection(port: tlsPort)
            _ = connection.trySend(Array(request.utf8))
            let answer = try connection.readUntilClosed()
            #expect(!String(decoding: answer, as: UTF8.self).contains("PONG"))
        }
        #expect(try cli(tlsPort, ["PING"]).standardOutput == "PONG\n")
        #expect(server.isRunning)
    }

    @Test("port 0 with tls-port: TLS only", arguments: kinds)
    func tlsOnly(_ kind: ServerProcess.Kind) throws {
        let (server, tlsPort) = try start(kind, plain: false)
        defer { server.stop() }
        #expect(try cli(tlsPort, ["PING"]).standardOutput == "PONG\n")
        #expect(try cli(tlsPort, ["CONFIG", "GET", "port"]).lines == ["port", "0"])
    }

    @Test("an encrypted key with tls-key-file-pass", arguments: kinds)
    func encryptedKey(_ kind: ServerProcess.Kind) throws {
        let (server, tlsPort) = try start(
            kind, ["--tls-key-file", certificates.encryptedServerKey, "--tls-key-file-pass", certificates.encryptedKeyPassword])
        defer { server.stop() }
        #expect(try cli(tlsPort, ["PING"]).standardOutput == "PONG\n")
    }

    @Test("a certificate that cannot be loaded at start: exit 1, as Redis says it", arguments: kinds)
    func unloadableAtStart(_ kind: ServerProcess.Kind) throws {
        let tlsPort = try freeLoopbackPort()
        let port = try freeLoopbackPort()
        let server = try ServerProcess.launch(
            kind,
            arguments: ["--port", String(port), "--tls-port", String(tlsPort), "--tls-cert-file", "/nonexistent/server.crt",
                        "--tls-key-file", certificates.serverKey, "--tls-ca-cert-file", certificates.caCertificate],
            port: port)
        defer { server.stop() }
        #expect(server.waitForExit(timeout: 10) == 1)
        #expect(server.standardError().contains("Failed to configure TLS. Check logs for more info."))
    }

    @Test("CONFIG SET of the certificate and key: new connections get the new one, open ones stay", arguments: kinds)
    func rotation(_ kind: ServerProcess.Kind) throws {
        let (server, tlsPort) = try start(kind, ["--tls-auth-clients", "no"])
        defer { server.stop() }
        #expect(try presentedCertificate(tlsPort).contains("CN=localhost") || presentedCertificate(tlsPort).contains("CN = localhost"))
        let admin = try server.connect()
        #expect(try admin.command("CONFIG", "SET", "tls-cert-file", certificates.otherNameCertificate) == .ok)
        let subject = try presentedCertificate(tlsPort)
        #expect(subject.contains("elsewhere.test"), "\(subject)")
        #expect(
            try admin.command("CONFIG", "GET", "tls-cert-file")
                == .array([.bulk("tls-cert-file"), .bulk(certificates.otherNameCertificate)]))
    }

    @Test("CONFIG SET of a certificate that cannot be loaded is refused, and the old one stays", arguments: kinds)
    func rotationRefused(_ kind: ServerProcess.Kind) throws {
        let (server, tlsPort) = try start(kind)
        defer { server.stop() }
        let admin = try server.connect()
        #expect(
            try admin.command("CONFIG", "SET", "maxmemory", "10mb", "tls-cert-file", "/nonexistent/server.crt")
                == .error(
                    "ERR CONFIG SET failed (possibly related to argument 'tls-cert-file') - Unable to update TLS configuration. Check server logs."))
        #expect(
            try admin.command("CONFIG", "GET", "tls-cert-file")
                == .array([.bulk("tls-cert-file"), .bulk(certificates.serverCertificate)]))
        #expect(try admin.command("CONFIG", "GET", "maxmemory") == .array([.bulk("maxmemory"), .bulk("0")]))
        #expect(try cli(tlsPort, ["PING"]).standardOutput == "PONG\n")
    }

    @Test("CONFIG SET tls-port opens a TLS port on a server started without one", arguments: kinds)
    func tlsPortAtRunTime(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind, arguments: serverTLS)
        defer { server.stop() }
        let tlsPort = try freeLoopbackPort()
        let admin = try server.connect()
        #expect(try admin.command("CONFIG", "SET", "tls-port", String(tlsPort)) == .ok)
        #expect(try cli(tlsPort, ["PING"]).standardOutput == "PONG\n")
        let taken = try listenOnLoopback()
        defer { close(taken.fd) }
        #expect(
            try admin.command("CONFIG", "SET", "tls-port", String(taken.port))
                == .error(
                    "ERR CONFIG SET failed (possibly related to argument 'tls-port') - Unable to listen on this port. Check server logs."))
        #expect(try cli(tlsPort, ["PING"]).standardOutput == "PONG\n")
        #expect(try admin.command("CONFIG", "SET", "tls-port", "0") == .ok)
        #expect(!acceptsConnections(port: tlsPort))
    }

    @Test("redis-py with ssl=True", arguments: kinds)
    func redisPy(_ kind: ServerProcess.Kind) throws {
        let (server, tlsPort) = try start(kind)
        defer { server.stop() }
        let output = try PythonScript.run(
            "tls_client.py",
            [String(tlsPort), certificates.caCertificate, certificates.clientCertificate, certificates.clientKey])
        #expect(output.status == 0, "\(output.summary)")
        #expect(output.standardOutput == "ok\n", "\(output.summary)")
    }

    @Test("redis-benchmark --tls runs to completion", arguments: kinds)
    func redisBenchmark(_ kind: ServerProcess.Kind) throws {
        let (server, tlsPort) = try start(kind)
        defer { server.stop() }
        let output = try ExternalProgram.redisBenchmark.run(
            ["-h", "127.0.0.1", "-p", String(tlsPort), "--tls", "--cacert", certificates.caCertificate, "--cert",
             certificates.clientCertificate, "--key", certificates.clientKey, "-n", "2000", "-c", "10", "-P", "4",
             "-t", "set,get", "-q"], timeout: 120)
        #expect(output.status == 0, "\(output.summary)")
        #expect(output.standardOutput.contains("SET:") && output.standardOutput.contains("GET:"), "\(output.summary)")
        #expect(try server.connect().infoInteger("stats", "total_commands_processed") ?? 0 >= 4000)
    }

    @Test("clients that reset the connection right after the handshake leave no client behind", arguments: kinds)
    func resetAfterHandshake(_ kind: ServerProcess.Kind) throws {
        let (server, tlsPort) = try start(kind, ["--tls-auth-clients", "no"])
        defer { server.stop() }
        let script = """
            import socket, ssl, struct
            context = ssl.create_default_context(cafile='\(certificates.caCertificate)')
            for _ in range(30):
                raw = socket.create_connection(('127.0.0.1', \(tlsPort)))
                tls = context.wrap_socket(raw, server_hostname='localhost')
                tls.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))
                tls.close()
            print('ok')
            """
        let output = try ExternalProgram.python3.run(["-c", script], timeout: 60)
        #expect(output.standardOutput == "ok\n", "\(output.summary)")
        let admin = try server.connect()
        // The resets reach the server a little later than the script ends.
        let deadline = Date().addingTimeInterval(10)
        while try admin.infoInteger("clients", "connected_clients") != 1 && Date() < deadline { usleep(20_000) }
        #expect(try admin.infoInteger("clients", "connected_clients") == 1)
        #expect(try cli(tlsPort, ["PING"]).standardOutput == "PONG\n")
    }

    @Test("a connection that never completes its handshake is closed after 10 s")
    func handshakeTimeout() throws {
        let (server, tlsPort) = try start(.cached)
        defer { server.stop() }
        let silent = try RawConnection(port: tlsPort)
        let started = Date()
        #expect(try silent.closedByServer(within: 30))
        let waited = Date().timeIntervalSince(started)
        #expect(waited >= 9, "closed after \(waited) s")
    }

    @Test("handshakes under way count against maxclients")
    func handshakesCountAsClients() throws {
        let (server, tlsPort) = try start(.cached, ["--maxclients", "3", "--tls-auth-clients", "no", "--io-threads", "1"])
        defer { server.stop() }
        let admin = try server.connect()
        // The connection that checked the server was up may not be gone yet: until it is, it counts too.
        let gone = Date().addingTimeInterval(10)
        while try admin.infoInteger("clients", "connected_clients") != 1 && Date() < gone { usleep(10_000) }
        // Two connections that never start a handshake. They are accepted in the order they connected and start
        // on the one event loop in that order, so both are counted before the client below.
        var silent = [try RawConnection(port: tlsPort), try RawConnection(port: tlsPort)]
        let refused = try cli(tlsPort, ["PING"], useClientCertificate: false)
        #expect(!refused.standardOutput.contains("PONG"), "\(refused.summary)")
        silent.removeAll()
        let deadline = Date().addingTimeInterval(10)
        var answered = ""
        while Date() < deadline {
            answered = try cli(tlsPort, ["PING"], useClientCertificate: false).standardOutput
            if answered == "PONG\n" { break }
            usleep(50_000)
        }
        #expect(answered == "PONG\n")
    }

    /// The subject of the certificate a server presents on `port` (read without checking it).
    func presentedCertificate(_ port: Int) throws -> String {
        let output = try ExternalProgram.python3.run([
            "-c",
            "import ssl,sys,subprocess; pem=ssl.get_server_certificate(('127.0.0.1', \(port))); "
                + "print(subprocess.run(['openssl','x509','-noout','-subject'],input=pem.encode(),capture_output=True).stdout.decode())",
        ])
        return output.standardOutput
    }
}
