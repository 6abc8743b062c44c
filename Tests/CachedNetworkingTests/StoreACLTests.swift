import CachedNetworkingTesting
import CachedStoreContract
import CachedTestSupport
import Foundation
import HTTPTypes
import NIOCore
import Testing

@testable import CachedNetworking
@testable import CachedNetworkingRedis

/// ACL users named in the store's URL, against `redis-server` (whose ACLs are the reference) and `cached-server`:
/// a user confined to its own keys, over plain TCP and over TLS. A command the ACL refuses fails with `NOPERM` like any error reply,
/// the cache fails open, and the store warns once per command name.
@Suite("RESPStore with an ACL user")
struct StoreACLTests {
    static let kinds: [ServerProcess.Kind] = [.redis, .cached]

    /// A server of `kind` with a TLS port (no client certificates asked for) and `svc-a`, who may use every command
    /// but FLUSHALL, on keys under `svc-a:` only; and the store's URL as `svc-a` with `password`.
    func start(_ kind: ServerProcess.Kind, tls: Bool, password: String = "secret") async throws -> (ServerProcess, RESPStore.Configuration) {
        let certificates = try TestCertificates.shared()
        let (server, tlsPort) = try await offThread {
            try ServerProcess.startTLS(kind, certificates: certificates, arguments: ["--tls-auth-clients", "no"])
        }
        let set = try await offThread {
            try ExternalProgram.redisCli.run(
                ["-p", String(server.port), "ACL", "SETUSER", "svc-a", "on", ">secret", "~svc-a:*", "+@all", "-flushall"])
        }
        #expect(set.standardOutput == "OK\n", "\(set.summary)")
        var configuration = try RESPStore.Configuration(
            url: tls ? "rediss://svc-a:\(password)@localhost:\(tlsPort)" : "redis://svc-a:\(password)@127.0.0.1:\(server.port)")
        configuration.tls?.trustRoots = .file(certificates.caCertificate)
        configuration.commandTimeout = .seconds(5)
        configuration.poolSize = 2
        return (server, configuration)
    }

    /// The warnings about ACL refusals in `log`.
    func refusals(_ log: CapturedLog) -> [String] { log.warnings.filter { $0.contains("ACL refuses") } }

    @Test("the user's own keys work; other keys fail with NOPERM, warned once per command", arguments: kinds, [false, true])
    func confinedUser(_ kind: ServerProcess.Kind, tls: Bool) async throws {
        let (server, configuration) = try await start(kind, tls: tls)
        let log = CapturedLog()
        let store = RESPStore(configuration: configuration, logger: log.logger)
        try await store.set("svc-a:k", to: ByteBuffer(string: "mine"), ttl: .seconds(60))
        #expect(try await store.get("svc-a:k")?.text == "mine")
        #expect(try await store.increment("svc-a:counter") == 1)
        for _ in 0..<3 {
            let error = await storeError { () async throws(CacheStoreError) in _ = try await store.get("other:k") }
            #expect(error?.kind == .server, "\(String(describing: error))")
            #expect(error?.message.hasPrefix("NOPERM") == true, "\(String(describing: error))")
        }
        let set = await storeError { () async throws(CacheStoreError) in
            try await store.set("other:k", to: ByteBuffer(string: "theirs"), ttl: .seconds(60))
        }
        #expect(set?.message.hasPrefix("NOPERM") == true, "\(String(describing: set))")
        let mget = await storeError { () async throws(CacheStoreError) in _ = try await store.get(["svc-a:k", "other:k"]) }
        #expect(mget?.message.hasPrefix("NOPERM") == true, "\(String(describing: mget))")
        // Still readable after the refusals: an error reply leaves the connection in step.
        #expect(try await store.get("svc-a:k")?.text == "mine")
        #expect(store.errorReplies.warnedCommands == ["GET", "SET", "MGET"])
        let warnings = refusals(log)
        #expect(warnings.count == 3, "\(warnings)")
        for command in ["GET", "SET", "MGET"] {
            let naming = warnings.filter { $0.contains("\"command\": \(command),") || $0.contains("\"command\": \(command)]") }
            #expect(naming.count == 1, "\(command): \(warnings)")
        }
        #expect(warnings.allSatisfy { $0.contains("svc-a") && $0.contains("NOPERM") }, "\(warnings)")
        await store.shutdown()
        _ = try await offThread { server.stop() }
    }

    @Test("a cache whose namespace the user may not touch fails open to the origin; its own namespace hits",
          arguments: kinds, [false, true])
    func cacheFailsOpen(_ kind: ServerProcess.Kind, tls: Bool) async throws {
        let (server, configuration) = try await start(kind, tls: tls)
        let log = CapturedLog()
        let store = RESPStore(configuration: configuration, logger: log.logger)
        let url = "https://api.example.com/items"
        let transport = FakeHTTPTransport()
        transport.script(url, replies: [.init(headerFields: [.cacheControl: "max-age=600"], body: "fresh")])
        let request = HTTPRequest(method: .get, scheme: "https", authority: "api.example.com", path: "/items")
        func cache(namespace: String) -> CachedNetworking {
            var settings = CachedNetworking.Configuration()
            settings.namespace = namespace
            settings.storeTimeout = .seconds(5)
            return CachedNetworking(store: store, transport: transport, configuration: settings)
        }

        let outside = cache(namespace: "other")
        for _ in 0..<3 {
            let answer = try await outside.run(request)
            #expect(answer.text == "fresh")
            #expect(!answer.cacheStatus.hit)
        }
        #expect(transport.requestCount(for: url) == 3)
        let warnings = refusals(log)
        #expect(!warnings.isEmpty && warnings.count == store.errorReplies.warnedCommands.count, "\(warnings)")

        let inside = cache(namespace: "svc-a")
        #expect(try await inside.run(request).text == "fresh")
        let second = try await inside.run(request)
        #expect(second.cacheStatus.hit, "\(second.cacheStatus.headerValue)")
        #expect(transport.requestCount(for: url) == 4)
        await store.shutdown()
        _ = try await offThread { server.stop() }
    }

    @Test("the near cache works for a confined user given the invalidation channel, as docs/sdk.md says",
          arguments: kinds, [false, true])
    func nearCacheForAConfinedUser(_ kind: ServerProcess.Kind, tls: Bool) async throws {
        let (server, configuration) = try await start(kind, tls: tls)
        let rule = ["ACL", "SETUSER", "svc-a", "&__redis__:invalidate"]
        let set = try await offThread { try ExternalProgram.redisCli.run(["-p", String(server.port)] + rule) }
        #expect(set.standardOutput == "OK\n", "\(set.summary)")
        var nearCached = configuration
        nearCached.nearCache = RESPStore.NearCache(maxBytes: 1 << 20)
        let log = CapturedLog()
        let store = RESPStore(configuration: nearCached, logger: log.logger)
        try await store.waitUntilFilling()
        try await store.set("svc-a:near", to: ByteBuffer(string: "kept"), ttl: .seconds(60))
        #expect(try await store.readUntilNearHit("svc-a:near")?.text == "kept")
        #expect(store.near.disabledReason == nil && log.warnings.isEmpty, "\(store.near) \(log.warnings)")
        await store.shutdown()
        _ = try await offThread { server.stop() }
    }

    /// The `user svc-a ...` line docs/operations.md gives a service of the SDK, as ACL SETUSER arguments.
    static func documentedServiceRules() throws -> [String] {
        let document = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("docs/operations.md")
        let text = try String(contentsOf: document, encoding: .utf8)
        let line = try #require(
            text.split(separator: "\n").first { $0.trimmingCharacters(in: .whitespaces).hasPrefix("user svc-a on >") })
        return line.split(separator: " ").dropFirst(2).map(String.init)
    }

    @Test("the user docs/operations.md gives a service is all the SDK needs: cache, invalidation, near cache",
          arguments: kinds, [false, true])
    func documentedServiceUser(_ kind: ServerProcess.Kind, tls: Bool) async throws {
        let (server, base) = try await start(kind, tls: tls)
        let rules = try Self.documentedServiceRules().map { $0.hasPrefix(">") ? ">secret" : $0 }
        let set = try await offThread {
            try ExternalProgram.redisCli.run(["-p", String(server.port), "ACL", "SETUSER", "svc-a", "reset"] + rules)
        }
        #expect(set.standardOutput == "OK\n", "\(set.summary)")
        var configuration = base
        configuration.nearCache = RESPStore.NearCache(maxBytes: 1 << 20)
        let log = CapturedLog()
        let store = RESPStore(configuration: configuration, logger: log.logger)
        try await store.waitUntilFilling()
        let url = "https://api.example.com/items"
        let transport = FakeHTTPTransport()
        transport.script(url, replies: [.init(headerFields: [.cacheControl: "max-age=600"], body: "fresh")])
        let request = HTTPRequest(method: .get, scheme: "https", authority: "api.example.com", path: "/items")
        var settings = CachedNetworking.Configuration()
        settings.namespace = "svc-a"
        settings.storeTimeout = .seconds(5)
        let cache = CachedNetworking(store: store, transport: transport, configuration: settings)
        #expect(try await cache.run(request).text == "fresh")
        #expect(try await cache.run(request).cacheStatus.hit)
        try await cache.invalidateAll()
        #expect(try await cache.run(request).text == "fresh")
        #expect(transport.requestCount(for: url) == 2)
        try await store.set("svc-a:near", to: ByteBuffer(string: "kept"), ttl: .seconds(60))
        #expect(try await store.readUntilNearHit("svc-a:near")?.text == "kept")
        #expect(store.near.disabledReason == nil, "\(store.near)")
        #expect(refusals(log).isEmpty && store.errorReplies.warnedCommands.isEmpty, "\(log.warnings)")
        // Another service's keys stay out of reach.
        let error = await storeError { () async throws(CacheStoreError) in _ = try await store.get("svc-b:k") }
        #expect(error?.message.hasPrefix("NOPERM") == true, "\(String(describing: error))")
        await store.shutdown()
        _ = try await offThread { server.stop() }
    }

    @Test("a wrong password, or a user switched off, fails with the server's words", arguments: kinds, [false, true])
    func refusedUser(_ kind: ServerProcess.Kind, tls: Bool) async throws {
        let (server, wrong) = try await start(kind, tls: tls, password: "nope")
        let store = RESPStore(configuration: wrong)
        let error = await storeError { () async throws(CacheStoreError) in try await store.ping() }
        #expect(error?.kind == .server)
        #expect(error?.message.contains("authentication") == true && error?.message.contains("WRONGPASS") == true,
                "\(String(describing: error))")
        await store.shutdown()

        _ = try await offThread { try ExternalProgram.redisCli.run(["-p", String(server.port), "ACL", "SETUSER", "svc-a", "off"]) }
        var right = wrong
        right.password = "secret"
        let off = RESPStore(configuration: right)
        let offError = await storeError { () async throws(CacheStoreError) in try await off.ping() }
        #expect(offError?.kind == .server && offError?.message.contains("WRONGPASS") == true, "\(String(describing: offError))")
        await off.shutdown()
        _ = try await offThread { server.stop() }
    }
}
