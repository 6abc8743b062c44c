import HTTPCaching
import HTTPTypes
import Testing

@Suite("Validation and 304 merge")
struct ValidationTests {
    @Test("the conditional request carries the ETag in If-None-Match")
    func ifNoneMatch() {
        let conditional = Validation.conditionalRequest(for: request(), stored: fields([("ETag", "\"v1\"")]))
        #expect(conditional?.headerFields[.ifNoneMatch] == "\"v1\"")
        #expect(conditional?.headerFields[.ifModifiedSince] == nil)
    }

    @Test("the conditional request carries Last-Modified in If-Modified-Since")
    func ifModifiedSince() {
        let lastModified = "Sun, 06 Nov 1994 08:49:37 GMT"
        let conditional = Validation.conditionalRequest(for: request(), stored: fields([("Last-Modified", lastModified)]))
        #expect(conditional?.headerFields[.ifModifiedSince] == lastModified)
    }

    @Test("both validators are sent when both are stored; the client's own conditions are replaced")
    func both() {
        let client = request(.get, "/", [("If-None-Match", "\"other\""), ("Accept", "text/plain")])
        let conditional = Validation.conditionalRequest(for: client, stored: fields([("ETag", "W/\"v1\""), ("Last-Modified", "Sun, 06 Nov 1994 08:49:37 GMT")]))
        #expect(conditional?.headerFields[.ifNoneMatch] == "W/\"v1\"")
        #expect(conditional?.headerFields[.ifModifiedSince] != nil)
        #expect(conditional?.headerFields[.accept] == "text/plain")
    }

    @Test("no validator, no conditional request")
    func noValidator() {
        #expect(Validation.conditionalRequest(for: request(), stored: fields([("Cache-Control", "max-age=1")])) == nil)
    }

    @Test("client conditionals and ranges are recognised", arguments: ["If-None-Match", "If-Modified-Since", "If-Match", "If-Unmodified-Since", "If-Range", "Range"])
    func conditionalClients(name: String) {
        #expect(Validation.isConditionalOrPartial(request(.get, "/", [(name, "x")])))
        #expect(!Validation.isConditionalOrPartial(request()))
    }

    @Test("a 304 updates stored fields, keeping those it does not mention")
    func mergeUpdates() {
        let stored = fields([("Cache-Control", "max-age=10"), ("Content-Type", "text/plain"), ("ETag", "\"1\""), ("X-Old", "a"), ("X-Old", "b")])
        let notModified = fields([("Cache-Control", "max-age=99"), ("X-Old", "c"), ("X-New", "d")])
        let merged = Validation.merging(stored, with: notModified)
        #expect(merged[.cacheControl] == "max-age=99")
        #expect(merged[.contentType] == "text/plain")
        #expect(merged[values: HTTPField.Name("X-Old")!] == ["c"])
        #expect(merged[HTTPField.Name("X-New")!] == "d")
    }

    @Test("a 304 does not replace Content-Length, Content-Encoding or hop-by-hop fields")
    func mergeExclusions() {
        let stored = fields([("Content-Length", "5"), ("Content-Encoding", "gzip")])
        let notModified = fields([("Content-Length", "0"), ("Content-Encoding", "br"), ("Connection", "close, X-Hop"), ("X-Hop", "1"), ("Keep-Alive", "timeout=5")])
        let merged = Validation.merging(stored, with: notModified)
        #expect(merged[.contentLength] == "5")
        #expect(merged[.contentEncoding] == "gzip")
        #expect(merged[.connection] == nil)
        #expect(merged[HTTPField.Name("X-Hop")!] == nil)
        #expect(merged[HTTPField.Name("Keep-Alive")!] == nil)
    }

    @Test("a 304 selects the stored response by ETag")
    func selectByETag() {
        #expect(Validation.notModified(fields([("ETag", "\"1\"")]), selects: fields([("ETag", "\"1\"")])))
        #expect(!Validation.notModified(fields([("ETag", "\"2\"")]), selects: fields([("ETag", "\"1\"")])))
        #expect(Validation.notModified(fields([("ETag", "W/\"1\"")]), selects: fields([("ETag", "\"1\"")])))
    }

    @Test("a 304 selects by Last-Modified when it has no ETag")
    func selectByLastModified() {
        let lastModified = "Sun, 06 Nov 1994 08:49:37 GMT"
        #expect(Validation.notModified(fields([("Last-Modified", lastModified)]), selects: fields([("Last-Modified", lastModified)])))
        #expect(!Validation.notModified(fields([("Last-Modified", "Mon, 07 Nov 1994 08:49:37 GMT")]), selects: fields([("Last-Modified", lastModified)])))
    }

    @Test("RFC 9110 §13.1.3: a Last-Modified that is not an HTTP-date is not sent as If-Modified-Since")
    func invalidLastModifiedIsNoValidator() {
        let stored = fields([("Last-Modified", "Sun, 06 Nov 1994 08:49:37 UTC")])
        #expect(Validation.conditionalRequest(for: request(), stored: stored) == nil)
        #expect(!Validation.hasValidator(stored))
        let withTag = Validation.conditionalRequest(for: request(), stored: stored + fields([("ETag", "\"1\"")]))
        #expect(withTag?.headerFields[.ifNoneMatch] == "\"1\"")
        #expect(withTag?.headerFields[.ifModifiedSince] == nil)
    }

    @Test("RFC 9111 §4.3.4: two Last-Modified values that are not dates do not select each other")
    func invalidLastModifiedSelectsNothing() {
        #expect(!Validation.notModified(fields([("Last-Modified", "yesterday")]), selects: fields([("Last-Modified", "today")])))
        #expect(!Validation.notModified(fields([("Last-Modified", "yesterday")]), selects: fields([("Last-Modified", "yesterday")])))
    }

    @Test("a 304 without validators selects the one response validated")
    func selectWithoutValidators() {
        #expect(Validation.notModified(fields([("Date", "x")]), selects: fields([("ETag", "\"1\"")])))
    }

    @Test("hop-by-hop fields and the fields Connection names are removed")
    func hopByHop() {
        let input = fields([
            ("Connection", "X-Foo, close"), ("X-Foo", "1"), ("Keep-Alive", "timeout=5"), ("TE", "trailers"),
            ("Transfer-Encoding", "chunked"), ("Upgrade", "h2c"), ("Proxy-Authenticate", "Basic"),
            ("Proxy-Connection", "keep-alive"), ("Proxy-Whatever", "1"), ("Trailer", "X"), ("Content-Type", "text/plain"),
        ])
        let kept = HopByHop.removing(from: input)
        #expect(kept.map(\.name.canonicalName) == ["content-type"])
    }

    @Test("fields without hop-by-hop fields come back as they are")
    func noHopByHop() {
        let input = fields([("Content-Type", "text/plain"), ("ETag", "\"1\""), ("X-Connection", "close")])
        #expect(HopByHop.removing(from: input) == input)
    }

    static let storedGET = fields([
        ("ETag", "\"v1\""), ("Last-Modified", "Sun, 31 Dec 2023 00:00:00 GMT"), ("Content-Length", "4"),
    ])

    @Test("RFC 9111 §4.3.5: a HEAD response whose validators and Content-Length agree may update the stored GET")
    func headAgrees() {
        #expect(Validation.headResponse(fields([("ETag", "\"v1\"")]), canUpdate: Self.storedGET, storedContentLength: 4))
        #expect(Validation.headResponse(
            fields([("ETag", " \"v1\""), ("Last-Modified", "Sunday, 31-Dec-23 00:00:00 GMT"), ("Content-Length", "4")]),
            canUpdate: Self.storedGET, storedContentLength: 4))
        // Without a stored Content-Length, the stored content's length counts.
        #expect(Validation.headResponse(
            fields([("Content-Length", "4")]), canUpdate: fields([("ETag", "\"v1\"")]), storedContentLength: 4))
    }

    @Test("RFC 9111 §4.3.5: a HEAD response whose validators or Content-Length differ, or that has none, may not")
    func headDisagrees() {
        for head in [
            [("ETag", "\"v2\"")], [("ETag", "W/\"v1\"")], [("Last-Modified", "Mon, 01 Jan 2024 00:00:00 GMT")],
            [("ETag", "\"v1\""), ("Content-Length", "5")], [("Last-Modified", "not a date")], [("Content-Type", "text/plain")],
        ] {
            #expect(!Validation.headResponse(fields(head), canUpdate: Self.storedGET, storedContentLength: 4), "\(head)")
        }
        #expect(!Validation.headResponse(
            fields([("Content-Length", "5")]), canUpdate: fields([("ETag", "\"v1\"")]), storedContentLength: 4))
        #expect(!Validation.headResponse(fields([("ETag", "\"v1\"")]), canUpdate: fields([]), storedContentLength: 4))
    }
}
