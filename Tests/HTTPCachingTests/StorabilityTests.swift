import HTTPCaching
import HTTPTypes
import Testing

@Suite("Storability for a shared cache")
struct StorabilityTests {
    /// The decision, checked to be the same with the directives parsed by the caller.
    func decide(_ request: HTTPRequest, _ response: HTTPResponse) -> StorageDecision.Reason {
        let decision = StorageDecision.evaluate(request: request, response: response)
        let parsed = StorageDecision.evaluate(
            request: request, requestDirectives: RequestCacheControl(request.headerFields), response: response,
            responseDirectives: ResponseCacheControl(response.headerFields))
        #expect(parsed == decision)
        return decision.reason
    }

    func decide(_ response: HTTPResponse) -> StorageDecision.Reason {
        decide(request(), response)
    }

    @Test("status codes cacheable by default are storable without explicit freshness",
          arguments: [200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501])
    func cacheableByDefault(status: Int) {
        #expect(decide(response(status)) == .storable)
    }

    @Test("other status codes need explicit freshness", arguments: [201, 302, 307, 400, 403, 500, 503])
    func notCacheableByDefault(status: Int) {
        #expect(decide(response(status)) == .noFreshnessInformation)
        #expect(decide(response(status, [("Cache-Control", "max-age=60")])) == .storable)
    }

    @Test("public, s-maxage or Expires make any final status storable", arguments: [
        ("Cache-Control", "public"), ("Cache-Control", "s-maxage=5"), ("Expires", "Sun, 06 Nov 2044 08:49:37 GMT"),
    ])
    func explicitPermission(name: String, value: String) {
        #expect(decide(response(302, [(name, value)])) == .storable)
    }

    @Test("only GET and HEAD are stored by default", arguments: [HTTPRequest.Method.post, .put, .delete, .patch, .options])
    func methods(method: HTTPRequest.Method) {
        #expect(decide(request(method), response(200, [("Cache-Control", "max-age=60")])) == .methodNotCacheable)
    }

    @Test("HEAD responses are storable")
    func head() {
        #expect(decide(request(.head), response(200)) == .storable)
    }

    @Test("response no-store is never stored")
    func responseNoStore() {
        #expect(decide(response(200, [("Cache-Control", "max-age=60, no-store")])) == .responseNoStore)
    }

    @Test("request no-store prevents storing the response")
    func requestNoStore() {
        #expect(decide(request(.get, "/", [("Cache-Control", "no-store")]), response(200)) == .requestNoStore)
    }

    @Test("must-understand overrides no-store for an understood status")
    func mustUnderstand() {
        #expect(decide(response(200, [("Cache-Control", "must-understand, no-store, max-age=5")])) == .storable)
        #expect(decide(response(304, [("Cache-Control", "must-understand, no-store")])) == .responseNoStore)
        // RFC 9111 §3.3: the cache stores partial responses, so it understands 206.
        #expect(decide(response(206, [("Cache-Control", "must-understand, no-store, max-age=5")])) == .storable)
    }

    @Test("must-understand with a status code the cache does not implement: never stored, no-store or not",
          arguments: [226, 299, 425, 599])
    func mustUnderstandUnknownStatus(code: Int) {
        #expect(decide(response(code, [("Cache-Control", "must-understand, no-store, max-age=60")])) == .responseNoStore)
        #expect(decide(response(code, [("Cache-Control", "must-understand, max-age=60")])) == .statusNotUnderstood)
        // Without must-understand, an explicit lifetime makes any final status storable (RFC 9111 §3).
        #expect(decide(response(code, [("Cache-Control", "max-age=60")])) == .storable)
    }

    @Test("private responses are not stored by a shared cache", arguments: ["private", #"private="x-user""#])
    func privateResponses(value: String) {
        #expect(decide(response(200, [("Cache-Control", "max-age=60, " + value)])) == .privateResponse)
    }

    @Test("Authorization forbids storing unless the response allows sharing")
    func authorization() {
        let authorized = request(.get, "/", [("Authorization", "Bearer x")])
        #expect(decide(authorized, response(200, [("Cache-Control", "max-age=60")])) == .authorization)
        for allowed in ["public", "s-maxage=10", "must-revalidate, max-age=10"] {
            #expect(decide(authorized, response(200, [("Cache-Control", allowed)])) == .storable)
        }
    }

    @Test("RFC 9111 §3.3: a 206 may be stored (heuristically cacheable too); a 304 is not stored")
    func partialAndNotModified() {
        #expect(decide(response(206, [("Cache-Control", "max-age=60")])) == .storable)
        #expect(decide(response(206, [("Last-Modified", "Mon, 01 Jan 2024 00:00:00 GMT")])) == .storable)
        #expect(decide(response(206, [("Cache-Control", "no-store")])) == .responseNoStore)
        #expect(decide(response(304, [("Cache-Control", "max-age=60")])) == .statusNotUnderstood)
    }

    @Test("informational responses are not final")
    func informational() {
        #expect(decide(response(103)) == .statusNotFinal)
    }

    @Test("Vary: * is not stored")
    func varyStar() {
        #expect(decide(response(200, [("Vary", "Accept, *")])) == .varyWildcard)
    }

    @Test("Set-Cookie is stored only when explicitly shareable, unless configured")
    func setCookie() {
        #expect(decide(response(200, [("Set-Cookie", "a=b"), ("Cache-Control", "max-age=5")])) == .setCookie)
        #expect(decide(response(200, [("Set-Cookie", "a=b"), ("Cache-Control", "public, max-age=5")])) == .storable)
        var rules = CachingRules()
        rules.storesSetCookieWithoutExplicitPermission = true
        let reason = StorageDecision.evaluate(request: request(), response: response(200, [("Set-Cookie", "a=b")]), rules: rules).reason
        #expect(reason == .storable)
    }

    @Test("no-cache responses are storable (they are validated on use)")
    func noCacheIsStorable() {
        #expect(decide(response(200, [("Cache-Control", "no-cache"), ("ETag", "\"1\"")])) == .storable)
    }
}
