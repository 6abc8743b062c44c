import Synchronization
import CachedNetworking
import CachedNetworkingTesting
import HTTPTypes
import Testing

@Suite("Freshness, Age and validation against a local origin")
struct FreshnessScenarioTests {
    @Test("a miss is fetched and stored, then served from the cache")
    func missThenHit() async throws {
        let h = try await Harness.make()
        h.serve("/a", [("Cache-Control", "max-age=60")], body: "hello")
        let first = try await h.get("/a")
        #expect(first.source == .network)
        #expect(first.cacheStatus.headerValue == "cached; fwd=uri-miss; stored")
        let second = try await h.get("/a")
        #expect(second.source == .cache)
        #expect(second.text == "hello")
        #expect(second.cacheStatus.headerValue == "cached; hit; ttl=60")
        #expect(second.headerFields[.cacheStatus] == "cached; hit; ttl=60")
        #expect(h.origin.count("/a") == 1)
        await h.stop()
    }

    @Test("a response from the cache carries Age and a shrinking ttl")
    func ageHeader() async throws {
        let h = try await Harness.make()
        h.serve("/a", [("Cache-Control", "max-age=60")])
        _ = try await h.get("/a")
        h.advance(18)
        let hit = try await h.get("/a")
        #expect(hit.headerFields[.age] == "18")
        #expect(hit.cacheStatus.timeToLive == 42)
        await h.stop()
    }

    @Test("a stale response is validated with If-None-Match and a 304 is merged")
    func etagValidation() async throws {
        let h = try await Harness.make()
        h.serve("/v") { received in
            if received.header("If-None-Match") == "\"v1\"" {
                return .init(status: 304, headers: [("Cache-Control", "max-age=100"), ("X-Version", "2")])
            }
            return .init(status: 200, headers: [("Cache-Control", "max-age=10"), ("ETag", "\"v1\""), ("X-Version", "1")], body: "content")
        }
        _ = try await h.get("/v")
        h.advance(11)
        let revalidated = try await h.get("/v")
        #expect(revalidated.source == .revalidated)
        #expect(revalidated.cacheStatus.headerValue == "cached; fwd=stale; fwd-status=304")
        #expect(revalidated.status.code == 200)
        #expect(revalidated.text == "content")
        #expect(revalidated.headerFields[HTTPField.Name("X-Version")!] == "2")
        #expect(h.origin.received("/v").last?.header("If-None-Match") == "\"v1\"")
        h.advance(50)
        let hit = try await h.get("/v")
        #expect(hit.source == .cache)
        #expect(hit.cacheStatus.timeToLive == 50)
        #expect(h.origin.count("/v") == 2)
        await h.stop()
    }

    @Test("Last-Modified is validated with If-Modified-Since")
    func lastModifiedValidation() async throws {
        let h = try await Harness.make()
        let lastModified = "Sun, 06 Nov 1994 08:49:37 GMT"
        h.serve("/lm") { received in
            if received.header("If-Modified-Since") == lastModified { return .init(status: 304) }
            return .init(status: 200, headers: [("Cache-Control", "max-age=5"), ("Last-Modified", lastModified)], body: "old")
        }
        _ = try await h.get("/lm")
        h.advance(6)
        let answer = try await h.get("/lm")
        #expect(answer.source == .revalidated)
        #expect(answer.text == "old")
        await h.stop()
    }

    @Test("a changed resource answers the validation with 200 and replaces the entry")
    func modified() async throws {
        let h = try await Harness.make()
        let version = Tally()
        h.serve("/m") { _ in
            let n = version.next()
            return .init(status: 200, headers: [("Cache-Control", "max-age=5"), ("ETag", "\"\(n)\"")], body: "v\(n)")
        }
        _ = try await h.get("/m")
        h.advance(6)
        let changed = try await h.get("/m")
        #expect(changed.source == .network)
        #expect(changed.text == "v2")
        #expect(changed.cacheStatus.headerValue == "cached; fwd=stale; stored")
        #expect(try await h.get("/m").text == "v2")
        await h.stop()
    }

    @Test("request no-cache validates even a fresh response")
    func requestNoCache() async throws {
        let h = try await Harness.make()
        h.serve("/n", [("Cache-Control", "max-age=600"), ("ETag", "\"1\"")])
        _ = try await h.get("/n")
        _ = try await h.get("/n", [("Cache-Control", "no-cache")])
        #expect(h.origin.count("/n") == 2)
        #expect(h.origin.received("/n").last?.header("If-None-Match") == "\"1\"")
        await h.stop()
    }

    @Test("HEAD responses are stored apart from GET")
    func headSeparate() async throws {
        let h = try await Harness.make()
        h.serve("/h", [("Cache-Control", "max-age=60")], body: "full")
        let head = try await h.get("/h", method: .head)
        #expect(head.body.readableBytes == 0)
        let get = try await h.get("/h")
        #expect(get.source == .network)
        #expect(get.text == "full")
        #expect(try await h.get("/h", method: .head).source == .cache)
        await h.stop()
    }

    @Test("a lifetime override makes a no-cache endpoint fresh for its lifetime")
    func lifetimeOverride() async throws {
        let h = try await Harness.make { $0.lifetimeOverrides = [LifetimeOverride(pathPrefix: "/pinned", lifetime: .seconds(30))] }
        h.serve("/pinned/x", [("Cache-Control", "no-cache")])
        _ = try await h.get("/pinned/x")
        h.advance(20)
        #expect(try await h.get("/pinned/x").source == .cache)
        h.advance(20)
        #expect(try await h.get("/pinned/x").source == .network)
        await h.stop()
    }

    @Test("a lifetime override never stores no-store")
    func overrideRespectsNoStore() async throws {
        let h = try await Harness.make { $0.lifetimeOverrides = [LifetimeOverride(lifetime: .seconds(30))] }
        h.serve("/secret", [("Cache-Control", "no-store")])
        _ = try await h.get("/secret")
        #expect(try await h.get("/secret").source == .network)
        await h.stop()
    }
}

/// A thread-safe counter for scripted origins and decoders.
final class Tally: Sendable {
    private let count = Mutex(0)

    /// Adds one and returns the new count.
    @discardableResult
    func next() -> Int { count.withLock { $0 += 1; return $0 } }

    /// The count.
    var value: Int { count.withLock { $0 } }
}
