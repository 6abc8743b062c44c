import HTTPTypes
import Testing

@testable import HTTPCaching

@Suite("Client conditions")
struct ClientConditionsTests {
    static let stored = response(200, [
        ("Date", "Mon, 01 Jan 2024 00:00:00 GMT"), ("ETag", "W/\"v1\""),
        ("Last-Modified", "Sun, 31 Dec 2023 00:00:00 GMT"), ("Content-Type", "text/plain"),
    ])

    /// Whether a request with `pairs` is answered 304 from `stored`.
    func notModified(_ pairs: [(String, String)], _ stored: HTTPResponse = Self.stored) -> Bool {
        ClientConditions(fields(pairs)).notModified(stored, responseTime: at(0))
    }

    @Test("RFC 9111 §4.3.2: If-None-Match and If-Modified-Since of a GET or HEAD are evaluated by the cache")
    func handling() {
        #expect(ClientConditions.handling(of: request(), method: .get) == .unconditional)
        for name in ["If-None-Match", "If-Modified-Since"] {
            #expect(ClientConditions.handling(of: request(.get, "/", [(name, "x")]), method: .get) == .evaluatedByCache)
            #expect(ClientConditions.handling(of: request(.head, "/", [(name, "x")]), method: .head) == .evaluatedByCache)
            // RFC 9110 §13.1.3: If-Modified-Since applies to GET and HEAD only; §13.1.2: If-None-Match on other
            // methods answers 412, which only the origin can decide.
            #expect(ClientConditions.handling(of: request(.post, "/", [(name, "x")]), method: .post) == .forwarded)
        }
    }

    @Test(
        "RFC 9111 §4.3.2: If-Match and If-Unmodified-Since are forwarded, even with an evaluated field",
        arguments: ["If-Match", "If-Unmodified-Since"])
    func forwarded(name: String) {
        #expect(ClientConditions.handling(of: request(.get, "/", [(name, "x")]), method: .get) == .forwarded)
        let both = request(.get, "/", [("If-None-Match", "\"a\""), (name, "x"), ("Range", "bytes=0-1")])
        #expect(ClientConditions.handling(of: both, method: .get) == .forwarded)
    }

    @Test("RFC 9110 §14.2: Range and If-Range on GET or HEAD are the cache's to evaluate", arguments: ["Range", "If-Range"])
    func rangesEvaluated(name: String) {
        #expect(ClientConditions.handling(of: request(.get, "/", [(name, "x")]), method: .get) == .evaluatedByCache)
        #expect(ClientConditions.handling(of: request(.head, "/", [(name, "x")]), method: .head) == .evaluatedByCache)
        let stripped = ClientConditions.removing(from: request(.get, "/", [(name, "x"), ("If-None-Match", "\"a\"")]))
        #expect(ClientConditions.handling(of: stripped, method: .get) == .unconditional)
    }

    @Test("RFC 9110 §13.1.2: If-None-Match matches by the weak comparison, any member of its list")
    func noneMatchWeak() {
        #expect(notModified([("If-None-Match", "\"v1\"")]))
        #expect(notModified([("If-None-Match", "W/\"v1\"")]))
        #expect(notModified([("If-None-Match", "\"x\", W/\"v1\"")]))
        #expect(notModified([("If-None-Match", "\"x\""), ("If-None-Match", "\"v1\"")]))
        #expect(!notModified([("If-None-Match", "\"v2\"")]))
        #expect(!notModified([("If-None-Match", "\"V1\"")]))
        // An unquoted value is no entity tag.
        #expect(!notModified([("If-None-Match", "v1")]))
        // A stored response without ETag matches no list.
        #expect(!notModified([("If-None-Match", "\"v1\"")], response(200, [("Date", "Mon, 01 Jan 2024 00:00:00 GMT")])))
    }

    @Test("RFC 9110 §13.1.2: If-None-Match: * matches any stored response")
    func noneMatchAny() {
        #expect(notModified([("If-None-Match", "*")]))
        #expect(notModified([("If-None-Match", " * ")], response(200, [("Date", "Mon, 01 Jan 2024 00:00:00 GMT")])))
    }

    @Test("RFC 9110 §8.8.3: commas inside an entity tag do not split it")
    func commaInsideTag() {
        #expect(EntityTag.list("\"a,b\", W/\"c\"").map(\.opaqueTag) == ["\"a,b\"", "\"c\""])
        #expect(EntityTag.list("\"a\" junk, \"b\"").map(\.opaqueTag) == ["\"b\""])
        let tagged = response(200, [("ETag", "\"a,b\"")])
        #expect(notModified([("If-None-Match", "\"x\", \"a,b\"")], tagged))
        #expect(!notModified([("If-None-Match", "\"a\"")], tagged))
    }

    @Test("RFC 9110 §13.2.2: If-None-Match takes precedence over If-Modified-Since")
    func precedence() {
        // The date alone would say "not modified"; the tag says otherwise, and wins.
        #expect(!notModified([("If-None-Match", "\"v2\""), ("If-Modified-Since", "Tue, 02 Jan 2024 00:00:00 GMT")]))
        #expect(notModified([("If-None-Match", "\"v1\""), ("If-Modified-Since", "Sat, 01 Jan 2000 00:00:00 GMT")]))
    }

    @Test("RFC 9110 §13.1.3: If-Modified-Since matches when the stored Last-Modified is not later")
    func modifiedSince() {
        #expect(notModified([("If-Modified-Since", "Sun, 31 Dec 2023 00:00:00 GMT")]))
        #expect(notModified([("If-Modified-Since", "Mon, 01 Jan 2024 00:00:00 GMT")]))
        #expect(!notModified([("If-Modified-Since", "Sat, 30 Dec 2023 23:59:59 GMT")]))
    }

    @Test("RFC 9110 §13.1.3: an If-Modified-Since that is not one HTTP-date is ignored")
    func invalidModifiedSince() {
        #expect(!notModified([("If-Modified-Since", "Mon, 01 Jan 2024 00:00:00 UTC")]))
        #expect(!notModified([("If-Modified-Since", "yesterday")]))
        #expect(
            !notModified([
                ("If-Modified-Since", "Mon, 01 Jan 2024 00:00:00 GMT"), ("If-Modified-Since", "Mon, 01 Jan 2024 00:00:00 GMT"),
            ]))
    }

    @Test("RFC 9111 §4.3.2: without Last-Modified, If-Modified-Since is evaluated against Date")
    func modifiedSinceByDate() {
        let dated = response(200, [("Date", "Mon, 01 Jan 2024 00:00:00 GMT")])
        #expect(notModified([("If-Modified-Since", "Mon, 01 Jan 2024 00:00:00 GMT")], dated))
        #expect(!notModified([("If-Modified-Since", "Sun, 31 Dec 2023 23:59:59 GMT")], dated))
        // A Last-Modified that is not a date is no modification date: the condition is ignored.
        let invalid = response(200, [("Date", "Mon, 01 Jan 2024 00:00:00 GMT"), ("Last-Modified", "recently")])
        #expect(!notModified([("If-Modified-Since", "Tue, 02 Jan 2024 00:00:00 GMT")], invalid))
    }

    @Test("RFC 9110 §13.2.1: conditions apply to 2xx responses only")
    func only2xx() {
        let missing = response(404, [("ETag", "\"v1\""), ("Date", "Mon, 01 Jan 2024 00:00:00 GMT")])
        #expect(!notModified([("If-None-Match", "*")], missing))
        #expect(!notModified([("If-None-Match", "\"v1\"")], missing))
    }

    @Test("RFC 9110 §15.4.5: a 304 carries the fields a 200 would have among those it lists, and no content metadata")
    func notModifiedFields() {
        let full = fields([
            ("Date", "d"), ("Cache-Control", "max-age=60"), ("ETag", "\"1\""), ("Expires", "e"), ("Vary", "Accept"),
            ("Content-Location", "/x"), ("Content-Type", "text/plain"), ("Content-Length", "12"),
            ("Last-Modified", "l"), ("Age", "3"), ("Cache-Status", "cached; hit"), ("X-Other", "o"),
        ])
        let kept = ClientConditions.notModifiedFields(from: full)
        #expect(kept.map(\.name.canonicalName) == [
            "date", "cache-control", "etag", "expires", "vary", "content-location", "age", "cache-status",
        ])
        // Without an ETag, Last-Modified guides the client's update.
        let untagged = ClientConditions.notModifiedFields(from: fields([("Date", "d"), ("Last-Modified", "l"), ("Content-Length", "1")]))
        #expect(untagged.map(\.name.canonicalName) == ["date", "last-modified"])
    }

    @Test("removing the evaluated fields keeps the others")
    func removing() {
        let stripped = ClientConditions.removing(
            from: request(.get, "/", [("If-None-Match", "\"a\""), ("If-Modified-Since", "x"), ("Accept", "text/plain")]))
        #expect(stripped.headerFields.map(\.name.canonicalName) == ["accept"])
    }
}
