import CachedNetworking
import CachedNetworkingTesting
import HTTPTypes
import Testing

@Suite("Cache policies and request directives")
struct PolicyScenarioTests {
    @Test("returnCacheDataElseLoad serves a stale response without the origin")
    func returnCacheDataElseLoad() async throws {
        let h = try await Harness.make()
        h.serve("/p", [("Cache-Control", "max-age=10, must-revalidate"), ("ETag", "\"1\"")])
        _ = try await h.get("/p")
        h.advance(1_000)
        let answer = try await h.get("/p", policy: .returnCacheDataElseLoad)
        #expect(answer.source == .stale)
        #expect(h.origin.count("/p") == 1)
        await h.stop()
    }

    @Test("returnCacheDataElseLoad loads when nothing is stored")
    func returnCacheDataElseLoadMiss() async throws {
        let h = try await Harness.make()
        h.serve("/p", [("Cache-Control", "max-age=10")])
        #expect(try await h.get("/p", policy: .returnCacheDataElseLoad).source == .network)
        await h.stop()
    }

    @Test("returnCacheDataDontLoad answers 504 when nothing is stored")
    func dontLoad() async throws {
        let h = try await Harness.make()
        h.serve("/p", [("Cache-Control", "max-age=10")])
        let answer = try await h.get("/p", policy: .returnCacheDataDontLoad)
        #expect(answer.status.code == 504)
        #expect(answer.cacheStatus.headerValue == "cached; detail=only-if-cached")
        #expect(h.origin.count("/p") == 0)
        await h.stop()
    }

    @Test("returnCacheDataDontLoad serves what is stored")
    func dontLoadHit() async throws {
        let h = try await Harness.make()
        h.serve("/p", [("Cache-Control", "max-age=10")])
        _ = try await h.get("/p")
        #expect(try await h.get("/p", policy: .returnCacheDataDontLoad).source == .cache)
        await h.stop()
    }

    @Test("only-if-cached answers 504 on a miss and on a response that needs validation")
    func onlyIfCached() async throws {
        let h = try await Harness.make()
        h.serve("/o", [("Cache-Control", "max-age=10"), ("ETag", "\"1\"")])
        #expect(try await h.get("/o", [("Cache-Control", "only-if-cached")]).status.code == 504)
        _ = try await h.get("/o")
        #expect(try await h.get("/o", [("Cache-Control", "only-if-cached")]).source == .cache)
        h.advance(20)
        #expect(try await h.get("/o", [("Cache-Control", "only-if-cached")]).status.code == 504)
        #expect(h.origin.count("/o") == 1)
        await h.stop()
    }

    @Test("reloadIgnoringLocalCacheData always goes to the origin and stores the answer")
    func reload() async throws {
        let h = try await Harness.make()
        let version = Tally()
        h.serve("/r") { _ in .init(status: 200, headers: [("Cache-Control", "max-age=60")], body: "v\(version.next())") }
        _ = try await h.get("/r")
        let reloaded = try await h.get("/r", policy: .reloadIgnoringLocalCacheData)
        #expect(reloaded.source == .network)
        #expect(reloaded.text == "v2")
        #expect(reloaded.cacheStatus.forward == .request)
        #expect(try await h.get("/r").text == "v2")
        await h.stop()
    }

    @Test("reloadRevalidatingCacheData validates a fresh response")
    func reloadRevalidating() async throws {
        let h = try await Harness.make()
        h.serve("/rr") { received in
            received.header("If-None-Match") == "\"1\""
                ? .init(status: 304)
                : .init(status: 200, headers: [("Cache-Control", "max-age=60"), ("ETag", "\"1\"")], body: "x")
        }
        _ = try await h.get("/rr")
        let answer = try await h.get("/rr", policy: .reloadRevalidatingCacheData)
        #expect(answer.source == .revalidated)
        #expect(answer.cacheStatus.headerValue == "cached; fwd=request; fwd-status=304")
        await h.stop()
    }

    @Test("requests with conditions only an origin evaluates are forwarded untouched")
    func clientConditional() async throws {
        let h = try await Harness.make()
        h.serve("/c", [("Cache-Control", "max-age=60")])
        _ = try await h.get("/c")
        let answer = try await h.get("/c", [("If-Match", "\"zzz\"")])
        #expect(answer.source == .network)
        #expect(answer.cacheStatus.forward == .bypass)
        #expect(h.origin.received("/c").last?.header("If-Match") == "\"zzz\"")
        // If-None-Match is the cache's to evaluate: no tag matches a response without ETag, so the full one.
        let evaluated = try await h.get("/c", [("If-None-Match", "\"zzz\"")])
        #expect(evaluated.source == .cache && evaluated.status == .ok)
        await h.stop()
    }
}
