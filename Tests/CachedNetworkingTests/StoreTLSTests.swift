import CachedStoreContract
import CachedTestSupport
import Foundation
import NIOCore
import Testing

@testable import CachedNetworking

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
