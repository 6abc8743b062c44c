import HTTPCaching
import HTTPTypes
import Testing

/// Targeted cache-control fields (RFC 9213).
@Suite("Targeted Cache-Control (RFC 9213)")
struct TargetedCacheControlTests {
    static let cdn: CachingRules = {
        var rules = CachingRules()
        rules.targetedCacheControlFields = [.cdnCacheControl]
        return rules
    }()

    static let ownThenCDN: CachingRules = {
        var rules = CachingRules()
        rules.targetedCacheControlFields = [HTTPField.Name("Service-Cache-Control")!, .cdnCacheControl]
        return rules
    }()

    @Test("RFC 9213 §2.2: with no targeted field configured, CDN-Cache-Control is ignored")
    func offByDefault() {
        let headers = fields([("Cache-Control", "max-age=10"), ("CDN-Cache-Control", "max-age=600")])
        let directives = ResponseCacheControl(headers, rules: CachingRules())
        #expect(directives.maxAge == 10)
        #expect(directives.targetedField == nil)
        #expect(FreshnessLifetime.of(response(200, [("Cache-Control", "max-age=10"), ("CDN-Cache-Control", "max-age=600")]),
                                     responseTime: epoch).seconds == 10)
    }

    @Test("RFC 9213 §2.2: a valid targeted field replaces Cache-Control")
    func replacesCacheControl() {
        let headers = fields([("Cache-Control", "no-store"), ("CDN-Cache-Control", "max-age=600, must-revalidate")])
        let directives = ResponseCacheControl(headers, rules: Self.cdn)
        #expect(directives.maxAge == 600)
        #expect(directives.mustRevalidate)
        #expect(!directives.noStore)
        #expect(directives.targetedField == .cdnCacheControl)
        let stored = StorageDecision.evaluate(
            request: request(), response: response(200, [("Cache-Control", "no-store"), ("CDN-Cache-Control", "max-age=600")]),
            rules: Self.cdn)
        #expect(stored.reason == .storable)
    }

    @Test("RFC 9213 §2.2: the targeted field's no-store and private forbid storing what Cache-Control allows")
    func targetedForbids() {
        for value in ["no-store", "private"] {
            let decision = StorageDecision.evaluate(
                request: request(), response: response(200, [("Cache-Control", "public, max-age=600"), ("CDN-Cache-Control", value)]),
                rules: Self.cdn)
            #expect(!decision.isStorable, "\(value)")
        }
    }

    @Test("RFC 9213 §2.2: under a targeted field, Expires is ignored too")
    func expiresIgnored() {
        let headers: [(String, String)] = [
            ("Date", "Mon, 01 Jan 2024 00:00:00 GMT"), ("Expires", "Mon, 01 Jan 2024 01:00:00 GMT"),
            ("CDN-Cache-Control", "no-cache"),
        ]
        #expect(FreshnessLifetime.of(response(200, headers), responseTime: epoch).seconds == 3_600)
        let targeted = FreshnessLifetime.of(response(200, headers), responseTime: epoch, rules: Self.cdn)
        #expect(targeted.source != .expires)
        // A 302 is storable with Expires, but not when a targeted field without freshness replaces it.
        #expect(StorageDecision.evaluate(request: request(), response: response(302, headers)).isStorable)
        #expect(StorageDecision.evaluate(request: request(), response: response(302, headers), rules: Self.cdn).reason
            == .noFreshnessInformation)
    }

    @Test("RFC 9213 §2.2: the first listed field with a valid value wins")
    func precedence() {
        let both = fields([("CDN-Cache-Control", "max-age=600"), ("Service-Cache-Control", "max-age=5")])
        #expect(ResponseCacheControl(both, rules: Self.ownThenCDN).maxAge == 5)
        let invalidFirst = fields([("CDN-Cache-Control", "max-age=600"), ("Service-Cache-Control", "max-age=5,")])
        let directives = ResponseCacheControl(invalidFirst, rules: Self.ownThenCDN)
        #expect(directives.maxAge == 600)
        #expect(directives.targetedField == .cdnCacheControl)
    }

    @Test("RFC 9213 §2.1: a field that is not a Structured Fields Dictionary, or is empty, is ignored",
          arguments: [
              "", "   ", "max-age=600,", "Max-Age=600", "max-age=\"unterminated", "max-age=600 private",
              "max-age==1", "max-age=1234567890123456", "private=\"a\\b\"", "max-age=:AAA", "max-age=?2",
          ])
    func invalidFallsBack(value: String) {
        let headers = fields([("Cache-Control", "max-age=7"), ("CDN-Cache-Control", value)])
        let directives = ResponseCacheControl(headers, rules: Self.cdn)
        #expect(directives.targetedField == nil)
        #expect(directives.maxAge == 7)
    }

    @Test("RFC 9213 §2.1: member values map to Cache-Control arguments",
          arguments: [
              ("max-age=60", 60, false), ("max-age=60;foo=bar, no-cache", 60, true), ("no-cache=?1, max-age=1", 1, true),
              ("no-cache=?0, max-age=2", 2, false), ("max-age=3, max-age=4", 4, false), ("max-age=1.5, no-cache", nil, true),
              ("max-age=(1 2), no-cache", nil, true), ("max-age=-1", 0, false),
          ] as [(String, Int?, Bool)])
    func memberValues(value: String, maxAge: Int?, noCache: Bool) {
        let directives = ResponseCacheControl(fields([("CDN-Cache-Control", value)]), rules: Self.cdn)
        #expect(directives.targetedField == .cdnCacheControl)
        #expect(directives.maxAge == maxAge)
        #expect((directives.noCache == .wholeResponse) == noCache)
    }

    @Test("RFC 9213 §2.2: a valid field whose members are all unusable still replaces Cache-Control")
    func unusableMembers() {
        let headers = fields([("Cache-Control", "max-age=600"), ("Expires", "Sun, 06 Nov 2044 08:49:37 GMT"),
                              ("CDN-Cache-Control", "max-age=1.5, no-store=?0")])
        let directives = ResponseCacheControl(headers, rules: Self.cdn)
        #expect(directives.targetedField == .cdnCacheControl)
        #expect(directives.maxAge == nil)
        #expect(!directives.noStore)
        #expect(FreshnessLifetime.of(response(200, [("Cache-Control", "max-age=600"), ("CDN-Cache-Control", "max-age=1.5")]),
                                     responseTime: epoch, rules: Self.cdn).source != .maxAge)
    }

    @Test("RFC 9213 §2.1: String and Token arguments, and several field lines as one Dictionary")
    func stringsAndLines() {
        var headers = HTTPFields()
        headers.append(HTTPField(name: .cdnCacheControl, value: "private=\"set-cookie\""))
        headers.append(HTTPField(name: .cdnCacheControl, value: "s-maxage=30, x-ext=tok/en"))
        let directives = ResponseCacheControl(headers, rules: Self.cdn)
        #expect(directives.private == .fields(["set-cookie"]))
        #expect(directives.sharedMaxAge == 30)
        #expect(directives.extensions == [CacheDirective(name: "x-ext", value: "tok/en")])
    }

    @Test("a stored response prepared under other targeted fields is prepared again")
    func preparation() {
        let info = StoredResponseInfo(
            response: response(200, [("CDN-Cache-Control", "max-age=600"), ("Cache-Control", "max-age=1")]),
            requestTime: epoch, responseTime: epoch)
        let prepared = PreparedStoredResponse(info, rules: Self.cdn)
        #expect(prepared.freshnessLifetime.seconds == 600)
        #expect(prepared.isPrepared(for: Self.cdn))
        #expect(!prepared.isPrepared(for: CachingRules()))
        #expect(PreparedStoredResponse(info).freshnessLifetime.seconds == 1)
    }
}
