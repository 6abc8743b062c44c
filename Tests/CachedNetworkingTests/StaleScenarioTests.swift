import CachedNetworking
import CachedNetworkingTesting
import HTTPTypes
import Testing

@Suite("stale-while-revalidate and stale-if-error against a local origin")
struct StaleScenarioTests {
    @Test("inside stale-while-revalidate the stale response is served and refreshed once in the background")
    func staleWhileRevalidate() async throws {
        let h = try await Harness.make()
        let version = Tally()
        h.serve("/swr") { _ in
            .init(status: 200, headers: [("Cache-Control", "max-age=10, stale-while-revalidate=60")], body: "v\(version.next())")
        }
        _ = try await h.get("/swr")
        h.advance(15)
        let stale = try await h.get("/swr")
        _ = try await h.get("/swr")
        #expect(stale.source == .stale)
        #expect(stale.text == "v1")
        #expect(stale.cacheStatus.headerValue == "cached; hit; ttl=-5")
        await h.cache.waitForBackgroundRefreshes()
        #expect(h.origin.count("/swr") == 2)
        let refreshed = try await h.get("/swr")
        #expect(refreshed.source == .cache)
        #expect(refreshed.text == "v2")
        await h.stop()
    }

    @Test("past stale-while-revalidate the request waits for the origin")
    func pastWindow() async throws {
        let h = try await Harness.make()
        h.serve("/swr2", [("Cache-Control", "max-age=10, stale-while-revalidate=5")])
        _ = try await h.get("/swr2")
        h.advance(16)
        #expect(try await h.get("/swr2").source == .network)
        await h.stop()
    }

    @Test("stale-if-error serves the stale response when the origin answers 503")
    func staleIfErrorStatus() async throws {
        let h = try await Harness.make()
        let calls = Tally()
        h.serve("/sie") { _ in
            calls.next() == 1
                ? .init(status: 200, headers: [("Cache-Control", "max-age=10, stale-if-error=60")], body: "good")
                : .init(status: 503, body: "down")
        }
        _ = try await h.get("/sie")
        h.advance(20)
        let answer = try await h.get("/sie")
        #expect(answer.source == .stale)
        #expect(answer.text == "good")
        #expect(answer.cacheStatus.headerValue == "cached; fwd=stale; fwd-status=503; ttl=-10; detail=stale-if-error")
        await h.stop()
    }

    @Test("stale-if-error serves the stale response when the origin is unreachable")
    func staleIfErrorUnreachable() async throws {
        let h = try await Harness.make(transport: impatientTransport)
        h.serve("/gone", [("Cache-Control", "max-age=10, stale-if-error=60")], body: "kept")
        _ = try await h.get("/gone")
        await h.origin.stop()
        h.advance(20)
        let answer = try await h.get("/gone")
        #expect(answer.source == .stale)
        #expect(answer.text == "kept")
    }

    @Test("without stale-if-error the origin's 503 is passed on")
    func noStaleIfError() async throws {
        let h = try await Harness.make()
        let calls = Tally()
        h.serve("/e") { _ in
            calls.next() == 1 ? .init(status: 200, headers: [("Cache-Control", "max-age=10")], body: "good") : .init(status: 503, body: "down")
        }
        _ = try await h.get("/e")
        h.advance(20)
        let answer = try await h.get("/e")
        #expect(answer.status.code == 503)
        #expect(answer.text == "down")
        await h.stop()
    }

    @Test("must-revalidate: an unreachable origin is an error, not a stale answer")
    func mustRevalidate() async throws {
        let h = try await Harness.make(transport: impatientTransport)
        h.serve("/mr", [("Cache-Control", "max-age=10, must-revalidate, stale-if-error=60")])
        _ = try await h.get("/mr")
        await h.origin.stop()
        h.advance(20)
        await #expect(throws: CachedNetworkingError.self) { try await h.get("/mr") }
    }

    @Test("request max-stale accepts a stale response without contacting the origin")
    func maxStale() async throws {
        let h = try await Harness.make()
        h.serve("/ms", [("Cache-Control", "max-age=10")])
        _ = try await h.get("/ms")
        h.advance(15)
        let answer = try await h.get("/ms", [("Cache-Control", "max-stale=10")])
        #expect(answer.source == .stale)
        #expect(h.origin.count("/ms") == 1)
        await h.stop()
    }
}
