import CachedNetworking
import CachedNetworkingTesting
import HTTPCaching
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

    @Test("no-cache: a failed validation is passed on, never answered from the stored response, whatever stale-if-error says")
    func noCacheIsNotServedOnError() async throws {
        let h = try await Harness.make()
        let calls = Tally()
        h.serve("/nc") { _ in
            calls.next() == 1
                ? .init(status: 200, headers: [("Cache-Control", "no-cache, max-age=60, stale-if-error=60"), ("ETag", "\"v\"")], body: "good")
                : .init(status: 500, headers: [("Cache-Control", "no-store")], body: "down")
        }
        _ = try await h.get("/nc")
        let answer = try await h.get("/nc")
        #expect(answer.status.code == 500)
        #expect(answer.text == "down")
        let asked = try await h.get("/nc", [("Cache-Control", "stale-if-error=60")])
        #expect(asked.status.code == 500, "a request's stale-if-error does not lift the response's no-cache either")
        await h.stop()
    }

    @Test("no-cache: validating a fresh response reports fwd=stale, as the response (not the request) asked for it")
    func noCacheValidationStatus() async throws {
        let h = try await Harness.make()
        h.serve("/ncv", [("Cache-Control", "no-cache, max-age=60"), ("ETag", "\"v\"")])
        _ = try await h.get("/ncv")
        let validated = try await h.get("/ncv")
        #expect(validated.source == .revalidated || validated.source == .network)
        #expect(validated.cacheStatus.headerValue.hasPrefix("cached; fwd=stale"), "\(validated.cacheStatus.headerValue)")
        let requested = try await h.get("/ncv", [("Cache-Control", "no-cache")])
        #expect(requested.cacheStatus.headerValue.hasPrefix("cached; fwd=stale"), "the response would have required it anyway")
        await h.stop()
    }

    @Test("only-if-cached inside stale-while-revalidate: the stale response, and no background request to the origin")
    func onlyIfCachedStartsNoRefresh() async throws {
        let h = try await Harness.make()
        h.serve("/oic", [("Cache-Control", "max-age=10, stale-while-revalidate=60")])
        _ = try await h.get("/oic")
        h.advance(15)
        let answer = try await h.get("/oic", [("Cache-Control", "only-if-cached")])
        #expect(answer.source == .stale)
        await h.cache.waitForBackgroundRefreshes()
        #expect(h.origin.count("/oic") == 1)
        let min = try await h.get("/oic", [("Cache-Control", "min-fresh=1")])
        #expect(min.source != .stale, "min-fresh is not met by a stale response")
        #expect(h.origin.count("/oic") == 2)
        await h.stop()
    }

    @Test("a response without Date gets the time it was received, on the miss and on hits")
    func dateIsAppended() async throws {
        let h = try await Harness.make()
        // The origin's own route, not the harness's (which dates every reply).
        h.origin.route("/nodate") { _ in .init(status: 200, headers: [("Cache-Control", "max-age=60")], body: "x") }
        let received = HTTPDate.format(h.clock.now())
        let miss = try await h.get("/nodate")
        #expect(miss.headerFields[.date] == received)
        h.advance(5)
        let hit = try await h.get("/nodate")
        #expect(hit.source == .cache)
        #expect(hit.headerFields[.date] == received)
        #expect(hit.headerFields[.age] == "5")
        await h.stop()
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
