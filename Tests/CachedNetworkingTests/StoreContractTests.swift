import CachedStoreContract
import CachedTestSupport
import Foundation
import NIOCore
import Testing

@testable import CachedNetworking
@testable import CachedNetworkingRedis

/// What every ``CacheStore`` must do (``StoreRequirement``), run against the memory store, a live `cached-server`
/// and a live `redis-server` (both started for the suite on free loopback ports); and what the networked stores
/// do with a database number and a password.
@Suite(.liveServers)
struct StoreContractTests {
    @Test(arguments: StoreUnderTest.allCases, StoreRequirement.allCases)
    func contract(_ kind: StoreUnderTest, _ requirement: StoreRequirement) async throws {
        try await withStore(kind) { try await requirement.check($0) }
    }

    // MARK: networked stores

    @Test(arguments: StoreUnderTest.networked)
    func urlDatabaseSelectsADatabase(_ kind: StoreUnderTest) async throws {
        let server = try LiveServersTrait.server(kind.serverKind!)
        let key = "db-test:\(UUID().uuidString)"
        let db3 = try RESPStore(url: "redis://127.0.0.1:\(server.port)/3", poolSize: 1)
        let db0 = try RESPStore(url: "redis://127.0.0.1:\(server.port)/0", poolSize: 1)
        let db3Again = try RESPStore(url: "redis://127.0.0.1:\(server.port)/3", poolSize: 1)
        do {
            try await db3.set(key, to: ByteBuffer(string: "in three"), ttl: .seconds(60))
            #expect(try await db0.get(key) == nil)
            #expect(try await db3Again.get(key)?.text == "in three")
            try await db0.set(key, to: ByteBuffer(string: "in zero"), ttl: .seconds(60))
            #expect(try await db3.get(key)?.text == "in three")
            #expect(try await db3.remove([key]) == 1)
            #expect(try await db0.get(key)?.text == "in zero")
            #expect(try await db0.remove([key]) == 1)
        } catch {
            Issue.record(error)
        }
        await db3.shutdown()
        await db0.shutdown()
        await db3Again.shutdown()
    }

    @Test(arguments: StoreUnderTest.networked)
    func authenticatesWithPasswordAndRejectsAWrongOne(_ kind: StoreUnderTest) async throws {
        let server = try await offThread { try ServerProcess.start(kind.serverKind!, arguments: ["--requirepass", "s3cr:t@"]) }
        let base = "127.0.0.1:\(server.port)"
        for url in ["redis://:s3cr%3At%40@\(base)", "redis://default:s3cr%3At%40@\(base)/1", "redis://s3cr%3At%40@\(base)"] {
            let store = try RESPStore(url: url, poolSize: 1)
            do {
                try await store.ping()
                try await store.set("auth-test", to: ByteBuffer(string: "ok"), ttl: .seconds(5))
                #expect(try await store.get("auth-test")?.text == "ok", "\(url)")
            } catch {
                Issue.record("\(url): \(error)")
            }
            await store.shutdown()
        }

        let wrong = try RESPStore(url: "redis://:nope@\(base)", poolSize: 1)
        let error = await storeError { () async throws(CacheStoreError) in _ = try await wrong.get("k") }
        #expect(error?.kind == .server)
        #expect(error?.message.contains("authentication") == true, "\(String(describing: error))")
        #expect(error?.message.contains("WRONGPASS") == true || error?.message.contains("invalid password") == true)
        await wrong.shutdown()

        let anonymous = try RESPStore(url: "redis://\(base)", poolSize: 1)
        let noAuth = await storeError { () async throws(CacheStoreError) in _ = try await anonymous.get("k") }
        #expect(noAuth?.kind == .server)
        #expect(noAuth?.message.hasPrefix("NOAUTH") == true, "\(String(describing: noAuth))")
        await anonymous.shutdown()
        _ = try await offThread { server.stop() }
    }
}
