import HTTPCaching
import HTTPTypes
import Testing

@Suite("Cache-Control parsing")
struct CacheControlTests {
    @Test("every response directive is recognised")
    func allResponseDirectives() {
        let directives = ResponseCacheControl(
            parsing: "public, max-age=60, s-maxage=30, no-cache, no-store, no-transform, must-revalidate, "
                + "proxy-revalidate, must-understand, immutable, stale-while-revalidate=10, stale-if-error=20")
        #expect(directives.public)
        #expect(directives.maxAge == 60)
        #expect(directives.sharedMaxAge == 30)
        #expect(directives.noCache == .wholeResponse)
        #expect(directives.noStore)
        #expect(directives.noTransform)
        #expect(directives.mustRevalidate)
        #expect(directives.proxyRevalidate)
        #expect(directives.mustUnderstand)
        #expect(directives.immutable)
        #expect(directives.staleWhileRevalidate == 10)
        #expect(directives.staleIfError == 20)
        #expect(directives.extensions.isEmpty)
    }

    @Test("every request directive is recognised")
    func allRequestDirectives() {
        let directives = RequestCacheControl(
            parsing: "max-age=5, max-stale=7, min-fresh=3, no-cache, no-store, no-transform, only-if-cached, stale-if-error=9")
        #expect(directives.maxAge == 5)
        #expect(directives.maxStale == .seconds(7))
        #expect(directives.minFresh == 3)
        #expect(directives.noCache)
        #expect(directives.noStore)
        #expect(directives.noTransform)
        #expect(directives.onlyIfCached)
        #expect(directives.staleIfError == 9)
    }

    @Test("max-stale without a value accepts any staleness")
    func bareMaxStale() {
        let directives = RequestCacheControl(parsing: "max-stale")
        #expect(directives.maxStale == .unlimited)
        #expect(directives.maxStale?.allows(staleness: 1_000_000) == true)
    }

    @Test("max-stale with a value limits staleness")
    func limitedMaxStale() {
        let limit = RequestCacheControl(parsing: "max-stale=10").maxStale
        #expect(limit?.allows(staleness: 10) == true)
        #expect(limit?.allows(staleness: 11) == false)
    }

    @Test("no-cache with field names lists them, lowercased")
    func qualifiedNoCache() {
        let directives = ResponseCacheControl(parsing: #"no-cache="Set-Cookie, X-Secret""#)
        #expect(directives.noCache == .fields(["set-cookie", "x-secret"]))
        #expect(!directives.requiresValidationBeforeUse)
    }

    @Test("private with a field name is qualified")
    func qualifiedPrivate() {
        #expect(ResponseCacheControl(parsing: #"private="x-user""#).private == .fields(["x-user"]))
        #expect(ResponseCacheControl(parsing: "private").private == .wholeResponse)
    }

    @Test("names are case-insensitive and spacing is tolerated")
    func oddSpacing() {
        let directives = ResponseCacheControl(parsing: "  MAX-AGE = 60 ,, \tPublic ,")
        #expect(directives.maxAge == 60)
        #expect(directives.public)
    }

    @Test("quoted values are unquoted")
    func quotedValues() {
        #expect(ResponseCacheControl(parsing: #"max-age="60""#).maxAge == 60)
    }

    @Test("commas inside quotes do not split directives")
    func commaInQuotes() {
        let directives = ResponseCacheControl(parsing: #"no-cache="a, b", max-age=5"#)
        #expect(directives.noCache == .fields(["a", "b"]))
        #expect(directives.maxAge == 5)
    }

    @Test("several field lines read as one list")
    func severalLines() {
        var headerFields = HTTPFields()
        headerFields.append(HTTPField(name: .cacheControl, value: "max-age=60"))
        headerFields.append(HTTPField(name: .cacheControl, value: "must-revalidate"))
        let directives = ResponseCacheControl(headerFields)
        #expect(directives.maxAge == 60)
        #expect(directives.mustRevalidate)
    }

    @Test("duplicate max-age keeps the smallest")
    func duplicateMaxAge() {
        #expect(ResponseCacheControl(parsing: "max-age=60, max-age=10, max-age=30").maxAge == 10)
    }

    @Test("invalid max-age reads as zero (stale)", arguments: ["max-age=abc", "max-age=-5", "max-age=", "max-age=1.5"])
    func invalidMaxAge(value: String) {
        #expect(ResponseCacheControl(parsing: value).maxAge == 0)
    }

    @Test("huge delta-seconds clamp to 2^31")
    func hugeDelta() {
        #expect(ResponseCacheControl(parsing: "max-age=99999999999999999999").maxAge == 2_147_483_648)
    }

    @Test("unqualified no-cache wins over a qualified one")
    func noCacheConflict() {
        #expect(ResponseCacheControl(parsing: #"no-cache="a", no-cache"#).noCache == .wholeResponse)
        #expect(ResponseCacheControl(parsing: #"no-cache="a", no-cache="b""#).noCache == .fields(["a", "b"]))
    }

    @Test("max-stale with a limit wins over a bare one, in either order")
    func maxStaleConflict() {
        #expect(RequestCacheControl(parsing: "max-stale, max-stale=5").maxStale == .seconds(5))
        #expect(RequestCacheControl(parsing: "max-stale=5, max-stale").maxStale == .seconds(5))
        #expect(RequestCacheControl(parsing: "max-stale=9, max-stale=5").maxStale == .seconds(5))
    }

    @Test("an invalid max-stale disables it")
    func invalidMaxStale() {
        #expect(RequestCacheControl(parsing: "max-stale=x, max-stale").maxStale == nil)
    }

    @Test("duplicate min-fresh keeps the largest; invalid is ignored")
    func minFreshConflict() {
        #expect(RequestCacheControl(parsing: "min-fresh=5, min-fresh=20, min-fresh=x").minFresh == 20)
    }

    @Test("duplicate stale windows keep the smallest")
    func staleWindowConflict() {
        let directives = ResponseCacheControl(parsing: "stale-while-revalidate=60, stale-while-revalidate=5, stale-if-error=9, stale-if-error=3")
        #expect(directives.staleWhileRevalidate == 5)
        #expect(directives.staleIfError == 3)
    }

    @Test("unknown directives are kept as extensions")
    func extensions() {
        let directives = ResponseCacheControl(parsing: #"max-age=1, community="UCI", foo"#)
        #expect(directives.extensions == [CacheDirective(name: "community", value: "UCI"), CacheDirective(name: "foo")])
    }

    @Test("s-maxage makes a stale response require revalidation")
    func sharedMaxAgeImpliesRevalidation() {
        #expect(ResponseCacheControl(parsing: "s-maxage=10").requiresRevalidationWhenStale)
        #expect(ResponseCacheControl(parsing: "proxy-revalidate").requiresRevalidationWhenStale)
        #expect(!ResponseCacheControl(parsing: "max-age=10").requiresRevalidationWhenStale)
    }

    @Test("backslash escapes in quoted values are undone")
    func escapes() {
        #expect(CacheDirective.parse([#"foo="a\"b""#]) == [CacheDirective(name: "foo", value: #"a"b"#)])
    }
}
