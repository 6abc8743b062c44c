import Foundation
import HTTPCaching
import HTTPTypes
import Testing

@Suite("Reusing stored responses")
struct ReuseDecisionTests {
    /// A response stored at `epoch` with `Cache-Control: cacheControl`, evaluated `elapsed` seconds later.
    func decide(
        _ cacheControl: String,
        after elapsed: Double,
        request requestControl: String = "",
        extra: [(String, String)] = [],
        override: Int? = nil
    ) -> ReuseDecision {
        let stored = StoredResponseInfo(
            response: response(200, [("Cache-Control", cacheControl), ("Date", HTTPDate.format(epoch))] + extra),
            requestTime: epoch, responseTime: epoch, lifetimeOverride: override)
        return ReuseDecision.evaluate(stored: stored, requestDirectives: RequestCacheControl(parsing: requestControl), now: at(elapsed))
    }

    @Test("a fresh response is served with its remaining ttl")
    func fresh() {
        let decision = decide("max-age=60", after: 18)
        #expect(decision.action == .serveFresh)
        #expect(decision.timeToLive == 42)
        #expect(decision.currentAge == 18)
        #expect(decision.isFresh)
    }

    @Test("a response is stale once its age reaches the lifetime")
    func staleAtLifetime() {
        let decision = decide("max-age=60", after: 60)
        #expect(decision.action == .validate)
        #expect(!decision.isFresh)
        #expect(decision.staleness == 0)
        #expect(decision.timeToLive == 0)
    }

    @Test("RFC 9111 §4.3.5: a response marked stale is stale whatever its lifetime or an override; stale windows still apply")
    func markedStale() {
        func decide(_ cacheControl: String, override: Int? = nil, request: String = "") -> ReuseDecision {
            let stored = StoredResponseInfo(
                response: response(200, [("Cache-Control", cacheControl), ("Date", HTTPDate.format(epoch))]),
                requestTime: epoch, responseTime: epoch, lifetimeOverride: override, markedStale: true)
            return ReuseDecision.evaluate(stored: stored, requestDirectives: RequestCacheControl(parsing: request), now: at(5))
        }
        #expect(decide("max-age=600").action == .validate)
        #expect(!decide("max-age=600").isFresh)
        #expect(decide("max-age=600", override: 600).action == .validate)
        #expect(decide("max-age=600, stale-while-revalidate=60").action == .serveStaleWhileRevalidating)
        #expect(decide("max-age=600", request: "max-stale=10").action == .serveStale)
        #expect(PreparedStoredResponse(
            StoredResponseInfo(response: response(200), requestTime: epoch, responseTime: epoch, markedStale: true)
        ).freshnessLifetime.source == .markedStale)
    }

    @Test("request no-cache always validates")
    func requestNoCache() {
        #expect(decide("max-age=60", after: 1, request: "no-cache").action == .validate)
    }

    @Test("response no-cache always validates")
    func responseNoCache() {
        #expect(decide("max-age=60, no-cache", after: 1).action == .validate)
    }

    @Test("qualified no-cache serves without validation but omits the named fields")
    func qualifiedNoCache() {
        let decision = decide(#"max-age=60, no-cache="x-secret""#, after: 1)
        #expect(decision.action == .serveFresh)
        #expect(decision.fieldsToOmitWhenServed == ["x-secret"])
    }

    @Test("request max-age older than the response's age validates")
    func requestMaxAge() {
        #expect(decide("max-age=600", after: 30, request: "max-age=10").action == .validate)
        #expect(decide("max-age=600", after: 10, request: "max-age=10").action == .serveFresh)
    }

    @Test("request max-age=0 forces validation of a fresh response")
    func requestMaxAgeZero() {
        #expect(decide("max-age=600", after: 1, request: "max-age=0").action == .validate)
    }

    @Test("min-fresh requires that much freshness left")
    func minFresh() {
        #expect(decide("max-age=60", after: 50, request: "min-fresh=20").action == .validate)
        #expect(decide("max-age=60", after: 30, request: "min-fresh=20").action == .serveFresh)
    }

    @Test("max-stale accepts a stale response within its limit")
    func maxStale() {
        #expect(decide("max-age=60", after: 70, request: "max-stale=15").action == .serveStale)
        #expect(decide("max-age=60", after: 80, request: "max-stale=15").action == .validate)
        #expect(decide("max-age=60", after: 10_000, request: "max-stale").action == .serveStale)
    }

    @Test("must-revalidate forbids serving stale, even with max-stale or stale-while-revalidate")
    func mustRevalidate() {
        #expect(decide("max-age=60, must-revalidate, stale-while-revalidate=100", after: 70, request: "max-stale").action == .validate)
    }

    @Test("proxy-revalidate and s-maxage forbid serving stale in a shared cache", arguments: ["max-age=60, proxy-revalidate", "s-maxage=60"])
    func sharedRevalidation(cacheControl: String) {
        #expect(decide(cacheControl + ", stale-while-revalidate=100", after: 70, request: "max-stale").action == .validate)
    }

    @Test("stale-while-revalidate serves stale inside its window")
    func staleWhileRevalidate() {
        let decision = decide("max-age=60, stale-while-revalidate=30", after: 80)
        #expect(decision.action == .serveStaleWhileRevalidating)
        #expect(decision.timeToLive == -20)
        #expect(decide("max-age=60, stale-while-revalidate=30", after: 91).action == .validate)
    }

    @Test("stale-if-error allows serving stale on error inside its window")
    func staleIfError() {
        #expect(decide("max-age=60, stale-if-error=30", after: 80).staleIfErrorAllowed)
        #expect(!decide("max-age=60, stale-if-error=30", after: 91).staleIfErrorAllowed)
        #expect(!decide("max-age=60", after: 80).staleIfErrorAllowed)
    }

    @Test("a request's stale-if-error also allows it")
    func requestStaleIfError() {
        #expect(decide("max-age=60", after: 80, request: "stale-if-error=60").staleIfErrorAllowed)
    }

    @Test("must-revalidate forbids stale-if-error")
    func mustRevalidateForbidsStaleIfError() {
        #expect(!decide("max-age=60, must-revalidate, stale-if-error=30", after: 80).staleIfErrorAllowed)
    }

    @Test("RFC 9111 §4.2.4: a disconnected cache may serve stale unless a directive forbids it")
    func staleWhenDisconnected() {
        #expect(decide("max-age=60", after: 80).staleWhenDisconnectedAllowed)
        #expect(decide("max-age=60", after: 100_000).staleWhenDisconnectedAllowed)
        #expect(decide("no-cache=\"set-cookie\", max-age=60", after: 80).staleWhenDisconnectedAllowed)
        for forbidding in ["must-revalidate", "proxy-revalidate", "s-maxage=60"] {
            let directives = forbidding.hasPrefix("s-maxage") ? forbidding : "max-age=60, \(forbidding)"
            #expect(!decide(directives, after: 80).staleWhenDisconnectedAllowed, "\(forbidding)")
            // While fresh, the response is not stale: serving it is no staleness at all.
            #expect(decide(directives, after: 10).staleWhenDisconnectedAllowed, "\(forbidding)")
        }
        #expect(!decide("no-cache, max-age=60", after: 10).staleWhenDisconnectedAllowed)
        #expect(!decide("max-age=60", after: 80, request: "no-cache").staleWhenDisconnectedAllowed)
        #expect(decide("no-cache", after: 40, override: 30).staleWhenDisconnectedAllowed)
    }

    @Test("an unqualified no-cache forbids stale-if-error, the response's or the request's, fresh or stale")
    func noCacheForbidsStaleIfError() {
        #expect(!decide("no-cache, max-age=60, stale-if-error=60", after: 10).staleIfErrorAllowed)
        #expect(!decide("no-cache, stale-if-error=60", after: 10).staleIfErrorAllowed)
        #expect(!decide("no-cache, max-age=60", after: 10, request: "stale-if-error=60").staleIfErrorAllowed)
        // A qualified no-cache only leaves fields out: stale-if-error still applies.
        #expect(decide("no-cache=\"set-cookie\", max-age=60, stale-if-error=60", after: 80).staleIfErrorAllowed)
        // A configured lifetime replaces the origin's rules, no-cache included.
        #expect(decide("no-cache, stale-if-error=60", after: 40, override: 30).staleIfErrorAllowed)
    }

    @Test("a request's min-fresh is not met by a stale response, even inside stale-while-revalidate")
    func minFreshAndStaleWhileRevalidate() {
        #expect(decide("max-age=60, stale-while-revalidate=60", after: 70).action == .serveStaleWhileRevalidating)
        #expect(decide("max-age=60, stale-while-revalidate=60", after: 70, request: "min-fresh=1").action == .validate)
        #expect(decide("max-age=60, stale-while-revalidate=60", after: 70, request: "min-fresh=0").action == .validate)
    }

    @Test("a configured lifetime override makes a no-cache response fresh for that long")
    func override() {
        #expect(decide("no-cache", after: 10, override: 30).action == .serveFresh)
        #expect(decide("no-cache", after: 40, override: 30).action == .validate)
        #expect(decide("no-cache", after: 10, override: 30).freshnessLifetime.source == .override)
    }

    @Test("the stored Age header counts towards the current age")
    func storedAge() {
        #expect(decide("max-age=60", after: 20, extra: [("Age", "50")]).action == .validate)
    }
}

@Suite("Prepared stored responses")
struct PreparedStoredResponseTests {
    @Test("a prepared response decides as the header fields do, at every age")
    func sameDecisions() {
        let cases: [[(String, String)]] = [
            [("Cache-Control", "max-age=60, stale-while-revalidate=30, stale-if-error=90")],
            [("Cache-Control", "s-maxage=10, must-revalidate"), ("Age", "4")],
            [("Cache-Control", "no-cache=\"set-cookie\", max-age=100")],
            [("Last-Modified", HTTPDate.format(epoch.addingTimeInterval(-1_000)))],
            [("Expires", HTTPDate.format(epoch.addingTimeInterval(30)))],
        ]
        for extra in cases {
            let stored = StoredResponseInfo(
                response: response(200, [("Date", HTTPDate.format(epoch))] + extra),
                requestTime: epoch.addingTimeInterval(-2), responseTime: epoch)
            let prepared = PreparedStoredResponse(stored)
            #expect(PreparedStoredResponse(stored, directives: ResponseCacheControl(stored.response.headerFields)) == prepared)
            for elapsed in [0.0, 5, 59, 60, 89, 91, 200] {
                for request in ["", "max-stale=20", "min-fresh=10", "no-cache", "max-age=3"] {
                    let directives = RequestCacheControl(parsing: request)
                    let now = at(elapsed)
                    let expected = ReuseDecision.evaluate(stored: stored, requestDirectives: directives, now: now)
                    #expect(ReuseDecision.evaluate(prepared: prepared, requestDirectives: directives, now: now) == expected)
                    #expect(prepared.currentAge(now: now) == AgeCalculation(
                        headerFields: stored.response.headerFields, requestTime: stored.requestTime,
                        responseTime: stored.responseTime, now: now).currentAge)
                }
            }
        }
    }

    @Test("a heuristic lifetime is prepared for the rules it was worked out with")
    func heuristicRules() {
        let stored = StoredResponseInfo(
            response: response(200, [("Date", HTTPDate.format(epoch)), ("Last-Modified", HTTPDate.format(epoch.addingTimeInterval(-1_000)))]),
            requestTime: epoch, responseTime: epoch)
        var other = CachingRules()
        other.heuristicFraction = 0.5
        #expect(PreparedStoredResponse(stored).isPrepared(for: CachingRules()))
        #expect(!PreparedStoredResponse(stored).isPrepared(for: other))
        let explicit = StoredResponseInfo(
            response: response(200, [("Cache-Control", "max-age=5")]), requestTime: epoch, responseTime: epoch)
        #expect(PreparedStoredResponse(explicit).isPrepared(for: other))
    }
}
