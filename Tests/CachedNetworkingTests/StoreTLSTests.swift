import CachedOriginSupport
import CachedStoreContract
import CachedTestSupport
import Foundation
import NIOCore
import Testing

@testable import CachedNetworking
@testable import CachedNetworkingRedis

/// The stores' TLS settings as configured (no server needed).
struct StoreTLSConfigurationTests {
    @Test("rediss:// and rediss+cluster:// turn TLS on, verifying the server against the system's CAs")
    func redissURLs() throws {
        let single = try RESPStore.Configuration(url: "rediss://svc-a:s3cret@cache.internal:6380/2")
        #expect(single.tls == RESPStore.TLS())
        #expect(single.tls?.trustRoots == .system && single.tls?.certificateVerification == .fullVerification)
        #expect(single.tls?.serverName == nil && single.tls?.certificateChainFile == nil)
        #expect(single.host == "cache.internal" && single.port == 6380 && single.database == 2)
        #expect(single.username == "svc-a" && single.password == "s3cret")
        #expect(try RESPStore.Configuration(url: "REDISS://[::1]").tls == RESPStore.TLS())
        #expect(try RESPStore.Configuration(url: "redis://cache.internal").tls == nil)

        let cluster = try RESPClusterStore.Configuration(url: "rediss+cluster://:pw@10.0.0.1:7000,10.0.0.2:7000")
        #expect(cluster.tls == RESPStore.TLS())
        #expect(cluster.seeds.count == 2 && cluster.password == "pw")
        // Every node's connections use the cluster's TLS settings.
        #expect(cluster.nodeConfiguration(.init(host: "10.0.0.9", port: 7005), poolSize: 1).tls == RESPStore.TLS())
        #expect(try RESPClusterStore.Configuration(url: "redis+cluster://h:1").tls == nil)
    }

    @Test("a cluster URL given to RESPStore names RESPClusterStore, without showing the password")
    func clusterURLToRESPStore() {
        #expect {
            _ = try RESPStore.Configuration(url: "rediss+cluster://app:hunter2@h:1")
        } throws: { error in
            let message = "\(error)"
            return message.contains("use RESPClusterStore") && !message.contains("hunter2")
        }
    }

    @Test("descriptions say rediss:// and show the TLS settings, never a password")
    func descriptions() throws {
        var configuration = try RESPStore.Configuration(url: "rediss://app:hunter2@cache.internal:6380")
        configuration.tls?.certificateChainFile = "/etc/cached/client.crt"
        configuration.tls?.privateKeyFile = "/etc/cached/client.key"
        configuration.tls?.privateKeyPassword = "keypass"
        configuration.tls?.trustRoots = .file("/etc/cached/ca.crt")
        let text = configuration.description
        #expect(text.hasPrefix(
            "rediss://app:***@cache.internal:6380/0 (TLS (trust file /etc/cached/ca.crt, full verification, "
                + "client certificate /etc/cached/client.crt), pool 4"), "\(text)")
        #expect(!text.contains("hunter2") && !text.contains("keypass"))
        var insecure = try RESPClusterStore.Configuration(url: "rediss+cluster://h:1")
        insecure.tls?.certificateVerification = .insecureNoVerificationForTestsOnly
        #expect(insecure.description.hasPrefix("rediss+cluster://h:1 (TLS (trust system, NO VERIFICATION"), "\(insecure)")
        #expect(try RESPStore.Configuration(url: "redis://h").description.hasPrefix("redis://h:6379/0 (pool 4"))
    }

    @Test("TLS settings that cannot be used fail every call at once, saying why, before connecting")
    func unusableSettings() async throws {
        let certificates = try TestCertificates.shared()
        let cases: [(RESPStore.TLS, String)] = [
            (RESPStore.TLS(certificateChainFile: certificates.clientCertificate), "needs its private key"),
            (RESPStore.TLS(privateKeyFile: certificates.clientKey), "needs its private key"),
            (RESPStore.TLS(trustRoots: .file("/nonexistent/ca.crt")), "CA certificate"),
            (RESPStore.TLS(trustRoots: .file("")), "file name is empty"),
            (RESPStore.TLS(
                certificateChainFile: certificates.clientCertificate, privateKeyFile: certificates.otherClientKey),
             "Failed to load certificate and key"),
            (RESPStore.TLS(
                certificateChainFile: certificates.serverCertificate, privateKeyFile: certificates.encryptedServerKey,
                privateKeyPassword: "wrong"),
             "Failed to load certificate and key"),
        ]
        // Nothing listens on port 1: an attempt to connect would fail otherwise.
        for (tls, fragment) in cases {
            let store = RESPStore(configuration: RESPStore.Configuration(host: "127.0.0.1", port: 1, tls: tls))
            let error = await storeError { () async throws(CacheStoreError) in try await store.ping() }
            #expect(error?.kind == .unreachable, "\(tls)")
            #expect(error?.message.contains("the TLS settings cannot be used") == true, "\(String(describing: error))")
            #expect(error?.message.contains(fragment) == true, "\(fragment): \(String(describing: error))")
            await store.shutdown()
        }
    }
}

/// `RESPStore` over TLS against a live `cached-server` and `redis-server` listening on TLS ports only (client
/// certificates optional): the store contract, verification of the server's certificate and name, mutual TLS,
/// the insecure switch, timeouts, reply polling, the near cache, and stores refused with a clear error. Servers
/// set up otherwise are started by the tests that need them.
@Suite("RESPStore over TLS", .liveTLSServers)
struct StoreTLSLiveTests {
    static let kinds: [ServerProcess.Kind] = [.cached, .redis]
    let certificates: TestCertificates

    init() throws { certificates = try TestCertificates.shared() }

    /// A configuration for `rediss://host:port` (the suite's server of `kind` unless `port` is given), the test CA
    /// trusted, with lenient timeouts (the machine may be busy with builds), adjusted by `adjust`.
    func configuration(
        _ kind: ServerProcess.Kind, host: String = "localhost", port: Int? = nil,
        _ adjust: (inout RESPStore.Configuration) -> Void = { _ in }
    ) throws -> RESPStore.Configuration {
        let port = try port ?? LiveServersTrait.server(kind).port
        var configuration = try RESPStore.Configuration(url: "rediss://\(host):\(port)")
            .forTests(connectTimeout: .seconds(5), commandTimeout: .seconds(5))
        configuration.tls?.trustRoots = .file(certificates.caCertificate)
        adjust(&configuration)
        return configuration
    }

    /// What `PING` on a new store of `configuration` comes to: nil when it answered, else the error.
    func pingError(_ configuration: RESPStore.Configuration) async -> CacheStoreError? {
        let store = RESPStore(configuration: configuration)
        do throws(CacheStoreError) {
            try await store.ping()
            await store.shutdown()
            return nil
        } catch {
            await store.shutdown()
            return error
        }
    }

    /// redis-cli over TLS to the server on `port`, with the test client certificate.
    func cli(_ port: Int, _ arguments: [String]) async throws -> ProgramOutput {
        let options = certificates.cliOptions(port: port, certificate: (certificates.clientCertificate, certificates.clientKey))
        return try await offThread { try ExternalProgram.redisCli.run(options + arguments) }
    }

    // MARK: the contract

    @Test("the store contract over rediss://", arguments: StoreUnderTest.networked, StoreRequirement.allCases)
    func contract(_ kind: StoreUnderTest, _ requirement: StoreRequirement) async throws {
        try await withRESPStore(try configuration(kind.serverKind!)) { try await requirement.check($0) }
    }

    // MARK: verification

    @Test("by default the certificate is verified against the system's CAs, which do not include the test CA",
          arguments: kinds)
    func verifiedByDefault(_ kind: ServerProcess.Kind) async throws {
        let port = try LiveServersTrait.server(kind).port
        let error = await pingError(try RESPStore.Configuration(url: "rediss://localhost:\(port)"))
        #expect(error?.kind == .unreachable)
        let message = error?.message ?? ""
        #expect(message.contains("TLS handshake with localhost:\(port) failed"), "\(message)")
        #expect(message.contains("certificate verify failed"), "\(message)")
    }

    @Test("a certificate from a CA that is not trusted is refused; the insecure switch accepts it", arguments: kinds)
    func untrustedCertificate(_ kind: ServerProcess.Kind) async throws {
        let error = await pingError(try configuration(kind) { $0.tls?.trustRoots = .file(certificates.otherCACertificate) })
        #expect(error?.kind == .unreachable)
        #expect(error?.message.contains("certificate verify failed") == true, "\(String(describing: error))")

        let log = CapturedLog()
        var insecure = try configuration(kind) {
            $0.tls?.trustRoots = .file(certificates.otherCACertificate)
            $0.tls?.certificateVerification = .insecureNoVerificationForTestsOnly
        }
        insecure.poolSize = 1
        let store = RESPStore(configuration: insecure, logger: log.logger)
        try await store.set("insecure", to: ByteBuffer(string: "still encrypted"), ttl: .seconds(60))
        #expect(try await store.get("insecure")?.text == "still encrypted")
        await store.shutdown()
        #expect(log.warnings.filter { $0.contains("verification is off") }.count == 1, "\(log.warnings)")
    }

    @Test("the certificate must be for the name: an IP address among its addresses, or the server name set",
          arguments: kinds)
    func namesAreChecked(_ kind: ServerProcess.Kind) async throws {
        // The certificate is for localhost and 127.0.0.1.
        #expect(await pingError(try configuration(kind, host: "127.0.0.1")) == nil)
        let address = await pingError(try configuration(kind, host: "127.0.0.1") { $0.tls?.serverName = "127.0.0.2" })
        #expect(address?.message.contains("IP address mismatch") == true, "\(String(describing: address))")
        let name = await pingError(try configuration(kind) { $0.tls?.serverName = "elsewhere.test" })
        #expect(name?.message.contains("hostname mismatch") == true, "\(String(describing: name))")
        // Without hostname verification the name does not matter, the chain still does.
        #expect(await pingError(try configuration(kind) {
            $0.tls?.serverName = "elsewhere.test"
            $0.tls?.certificateVerification = .noHostnameVerification
        }) == nil)
        let chain = await pingError(try configuration(kind) {
            $0.tls?.trustRoots = .file(certificates.otherCACertificate)
            $0.tls?.certificateVerification = .noHostnameVerification
        })
        #expect(chain?.message.contains("certificate verify failed") == true, "\(String(describing: chain))")
    }

    @Test("a server whose certificate is for another name is refused, unless that name is the server name",
          arguments: kinds)
    func hostnameMismatch(_ kind: ServerProcess.Kind) async throws {
        let (server, port) = try await offThread {
            try ServerProcess.startTLS(
                kind, certificates: certificates,
                arguments: ["--tls-cert-file", certificates.otherNameCertificate, "--tls-auth-clients", "no"])
        }
        let refused = await pingError(try configuration(kind, port: port))
        #expect(refused?.kind == .unreachable)
        #expect(
            refused?.message == "TLS handshake with localhost:\(port) failed: certificate verify failed: hostname mismatch",
            "\(String(describing: refused))")
        #expect(await pingError(try configuration(kind, port: port) { $0.tls?.serverName = "elsewhere.test" }) == nil)
        #expect(await pingError(try configuration(kind, port: port) {
            $0.tls?.certificateVerification = .insecureNoVerificationForTestsOnly
        }) == nil)
        _ = try await offThread { server.stop() }
    }

    @Test("mutual TLS: the server requires a client certificate from its CA; one with an encrypted key works too",
          arguments: kinds)
    func mutualTLS(_ kind: ServerProcess.Kind) async throws {
        // tls-auth-clients yes, the servers' default.
        let (server, port) = try await offThread { try ServerProcess.startTLS(kind, certificates: certificates) }
        let none = await pingError(try configuration(kind, port: port))
        #expect(none?.kind == .unreachable, "\(String(describing: none))")
        #expect(
            none?.message == "TLS connection to localhost:\(port) failed: tlsv13 alert certificate required",
            "\(String(describing: none))")
        let foreign = await pingError(try configuration(kind, port: port) {
            $0.tls?.certificateChainFile = certificates.otherClientCertificate
            $0.tls?.privateKeyFile = certificates.otherClientKey
        })
        #expect(foreign?.kind == .unreachable, "\(String(describing: foreign))")
        #expect(foreign?.message.contains("alert unknown ca") == true, "\(String(describing: foreign))")

        let store = RESPStore(configuration: try configuration(kind, port: port) {
            $0.tls?.certificateChainFile = certificates.clientCertificate
            $0.tls?.privateKeyFile = certificates.clientKey
        })
        try await store.set("mtls", to: ByteBuffer(string: "client certificate"), ttl: .seconds(60))
        #expect(try await store.get("mtls")?.text == "client certificate")
        await store.shutdown()
        // The server's own certificate (signed by the same CA) with its encrypted key, as a client certificate.
        #expect(await pingError(try configuration(kind, port: port) {
            $0.tls?.certificateChainFile = certificates.serverCertificate
            $0.tls?.privateKeyFile = certificates.encryptedServerKey
            $0.tls?.privateKeyPassword = certificates.encryptedKeyPassword
        }) == nil)
        _ = try await offThread { server.stop() }
    }

    // MARK: the wrong kind of server

    @Test("rediss:// to a plain port, and redis:// to a TLS port, fail with an error, promptly", arguments: kinds)
    func wrongProtocol(_ kind: ServerProcess.Kind) async throws {
        let plain = try await offThread { try ServerProcess.start(kind) }
        let start = ContinuousClock.now
        let tlsToPlain = await pingError(try configuration(kind, port: plain.port) { $0.connectTimeout = .seconds(2) })
        #expect(tlsToPlain?.kind == .unreachable)
        // The server takes the ClientHello for the start of an inline command and waits for its end.
        #expect(
            tlsToPlain?.message == "TLS handshake with localhost:\(plain.port) failed: no answer within 2.0 seconds (is it a TLS port?)",
            "\(String(describing: tlsToPlain))")
        let tlsPort = try LiveServersTrait.server(kind).port
        let plainToTLS = await pingError(
            RESPStore.Configuration(host: "127.0.0.1", port: tlsPort).forTests(connectTimeout: .seconds(2), commandTimeout: .seconds(2)))
        #expect(plainToTLS != nil && plainToTLS?.kind != .server, "\(String(describing: plainToTLS))")
        // Bounded by the timeouts, not hung (the bound allows for a machine busy with other tests).
        #expect(ContinuousClock.now - start < .seconds(30))
        _ = try await offThread { plain.stop() }
    }

    @Test("a server that never answers the handshake: it fails within the connect timeout")
    func silentServer() async throws {
        let silent = try SilentListener()
        let start = ContinuousClock.now
        let error = await pingError(try configuration(.cached, port: silent.port) { $0.connectTimeout = .milliseconds(300) })
        let elapsed = ContinuousClock.now - start
        #expect(error?.kind == .unreachable)
        #expect(error?.message.contains("no answer within") == true, "\(String(describing: error))")
        // Not before the timeout; and not hung (the bound allows for a machine busy with other tests).
        #expect(elapsed >= .milliseconds(300) && elapsed < .seconds(20), "\(elapsed)")
    }

    // MARK: the connection

    @Test("a reply that does not come within the command timeout is a timeout; the next call reconnects",
          arguments: kinds)
    func commandTimeout(_ kind: ServerProcess.Kind) async throws {
        let (server, port) = try await offThread {
            try ServerProcess.startTLS(kind, certificates: certificates, arguments: ["--tls-auth-clients", "no"], plain: false)
        }
        let store = RESPStore(configuration: try configuration(kind, port: port) {
            $0.poolSize = 1
            $0.commandTimeout = .milliseconds(300)
        })
        try await store.ping()
        // Every client's commands wait 10 s (CLIENT UNPAUSE would wait too).
        #expect(try await cli(port, ["CLIENT", "PAUSE", "10000", "ALL"]).standardOutput == "OK\n")
        let start = ContinuousClock.now
        let error = await storeError { () async throws(CacheStoreError) in _ = try await store.get("paused") }
        let elapsed = ContinuousClock.now - start
        #expect(error?.kind == .timeout, "\(String(describing: error))")
        #expect(error?.message.contains("no reply within") == true, "\(String(describing: error))")
        #expect(elapsed >= .milliseconds(300) && elapsed < .seconds(10), "\(elapsed)")
        // Once the pause is over, calls work again on a new connection.
        let deadline = ContinuousClock.now + .seconds(40)
        while true {
            do throws(CacheStoreError) {
                try await store.ping()
                break
            } catch {
                #expect(error.kind == .timeout, "\(error)")
                guard ContinuousClock.now < deadline else { throw error }
            }
        }
        try await store.set("after", to: ByteBuffer(string: "unpaused"), ttl: .seconds(60))
        #expect(try await store.get("after")?.text == "unpaused")
        await store.shutdown()
        _ = try await offThread { server.stop() }
    }

    @Test("reply polling over TLS: loopback replies arrive within the poll; long ones are read on whole",
          arguments: kinds)
    func replyPolling(_ kind: ServerProcess.Kind) async throws {
        // A generous poll: the machine running the tests may be busy.
        let store = RESPStore(configuration: try configuration(kind) {
            $0.poolSize = 1
            $0.replyPolling = .milliseconds(5)
        })
        let prefix = "poll:\(UUID().uuidString):"
        for i in 0..<50 { try await store.set("\(prefix)\(i)", to: ByteBuffer(string: "v\(i)"), ttl: .seconds(60)) }
        for i in 0..<50 { #expect(try await store.get("\(prefix)\(i)")?.text == "v\(i)") }
        #expect(store.pool.replyPolls.answered > 0, "\(store.pool.replyPolls)")
        // Larger than a TLS record and than what a caller encrypts itself, with a poll too short for it.
        let short = RESPStore(configuration: try configuration(kind) {
            $0.poolSize = 1
            $0.replyPolling = .microseconds(20)
        })
        let large = ByteBuffer(bytes: (0..<(4 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        let medium = ByteBuffer(repeating: 0x6d, count: TLSChannel.eagerWriteLimit + 1)
        try await short.set("\(prefix)large", to: large, ttl: .seconds(60))
        try await short.set("\(prefix)medium", to: medium, ttl: .seconds(60))
        for _ in 0..<3 {
            async let big = short.get("\(prefix)large")
            async let middle = short.get("\(prefix)medium")
            async let small = short.get("\(prefix)1")
            #expect(try await big == large)
            #expect(try await middle == medium)
            #expect(try await small?.text == "v1")
        }
        await store.shutdown()
        await short.shutdown()
    }

    // MARK: the near cache

    @Test("near cache over TLS: an overwrite through one store reaches another store's near cache", arguments: kinds)
    func nearCacheOverwrites(_ kind: ServerProcess.Kind) async throws {
        let port = try LiveServersTrait.server(kind).port
        let tls = try configuration(kind).tls
        let reader = nearCacheStore(port: port, tls: tls)
        let writer = nearCacheStore(port: port, tls: tls)
        try await reader.waitUntilFilling()
        try await writer.waitUntilFilling()
        let key = "near-tls:\(UUID().uuidString)"
        var current = ByteBuffer(string: "v0")
        try await writer.set(key, to: current, ttl: .seconds(60))
        for round in 1...5 {
            #expect(try await reader.readUntilNearHit(key) == current)
            let next = ByteBuffer(string: "v\(round)")
            try await writer.set(key, to: next, ttl: .seconds(60))
            let gone = try await timeUntilGone(current, key: key, from: reader, since: .now)
            #expect(gone != nil, "round \(round): the overwrite never reached the near cache")
            current = next
        }
        #expect(reader.near.hits >= 5, "\(reader.near)")
        await reader.shutdown()
        await writer.shutdown()
    }

    @Test("near cache over TLS: the invalidation connection killed on the server, it subscribes again over TLS",
          arguments: kinds)
    func nearCacheResubscribes(_ kind: ServerProcess.Kind) async throws {
        let (server, port) = try await offThread {
            try ServerProcess.startTLS(kind, certificates: certificates, arguments: ["--tls-auth-clients", "optional"], plain: false)
        }
        let tls = try configuration(kind).tls
        let store = nearCacheStore(port: port, tls: tls)
        let writer = plainStore(port: port, tls: tls)
        try await store.waitUntilFilling()
        let key = "resubscribe:\(UUID().uuidString)"
        try await writer.set(key, to: ByteBuffer(string: "before"), ttl: .seconds(60))
        #expect(try await store.readUntilNearHit(key)?.text == "before")
        let killed = try await cli(port, ["CLIENT", "KILL", "TYPE", "pubsub"])
        #expect(killed.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines) == "1", "\(killed.summary)")
        // Flushed, then filling again once subscribed anew.
        try await store.waitUntilFilling()
        try await writer.set(key, to: ByteBuffer(string: "after"), ttl: .seconds(60))
        #expect(try await store.readUntilNearHit(key)?.text == "after")
        try await writer.set(key, to: ByteBuffer(string: "again"), ttl: .seconds(60))
        #expect(try await timeUntilGone(ByteBuffer(string: "after"), key: key, from: store, since: .now) != nil)
        await store.shutdown()
        await writer.shutdown()
        _ = try await offThread { server.stop() }
    }

    // MARK: the system's trust store

    @Test("cached-fetch with a rediss:// store: the system's CAs, as SSL_CERT_FILE names them, verify the server")
    func systemTrustStore() async throws {
        let port = try LiveServersTrait.server(.redis).port
        let origin = try await OriginServer.start()
        origin.route("/tls") { _ in OriginServer.Reply(headers: [("Cache-Control", "max-age=600")], body: "over tls") }
        let fetch = try ExternalProgram.cachedFetch.path()
        let arguments = [
            fetch, "--store", "rediss://localhost:\(port)", "--namespace", "tls-\(UUID().uuidString)", "--repeat", "2",
            origin.url("/tls"),
        ]
        let trusted = try await offThread {
            try ExternalProgram.env.run(["SSL_CERT_FILE=\(certificates.caCertificate)"] + arguments, timeout: 60)
        }
        #expect(trusted.status == 0, "\(trusted.summary)")
        #expect(trusted.standardOutput == "over tls", "\(trusted.summary)")
        // The second fetch is a hit from the store.
        #expect(trusted.standardError.contains("fetch=2") && trusted.standardError.contains("hit"), "\(trusted.summary)")
        // Without the test CA among the system's, the store is refused and the fetch goes to the origin.
        let untrusted = try await offThread {
            try ExternalProgram.env.run(["SSL_CERT_FILE=/nonexistent/ca.crt"] + arguments, timeout: 60)
        }
        #expect(untrusted.status == 0, "\(untrusted.summary)")
        #expect(untrusted.standardError.contains("certificate verify failed"), "\(untrusted.summary)")
        #expect(!untrusted.standardError.contains("hit"), "\(untrusted.summary)")
        await origin.stop()
    }
}

