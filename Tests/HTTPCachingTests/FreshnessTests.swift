import Foundation
import HTTPCaching
import HTTPTypes
import Testing

@Suite("Freshness lifetime and age")
struct FreshnessTests {
    let date = HTTPDate.format(epoch)

    func lifetime(_ response: HTTPResponse, rules: CachingRules = CachingRules()) -> FreshnessLifetime {
        FreshnessLifetime.of(response, responseTime: epoch, rules: rules)
    }

    @Test("s-maxage wins over max-age and Expires")
    func sharedMaxAgeFirst() {
        let value = lifetime(response(200, [("Cache-Control", "max-age=60, s-maxage=30"), ("Expires", HTTPDate.format(at(500))), ("Date", date)]))
        #expect(value == FreshnessLifetime(seconds: 30, source: .sharedMaxAge))
    }

    @Test("max-age wins over Expires")
    func maxAgeOverExpires() {
        let value = lifetime(response(200, [("Cache-Control", "max-age=60"), ("Expires", HTTPDate.format(at(500))), ("Date", date)]))
        #expect(value == FreshnessLifetime(seconds: 60, source: .maxAge))
    }

    @Test("Expires minus Date")
    func expiresMinusDate() {
        let value = lifetime(response(200, [("Expires", HTTPDate.format(at(500))), ("Date", HTTPDate.format(at(100)))]))
        #expect(value == FreshnessLifetime(seconds: 400, source: .expires))
    }

    @Test("Expires without Date counts from the response time")
    func expiresWithoutDate() {
        #expect(lifetime(response(200, [("Expires", HTTPDate.format(at(90)))])).seconds == 90)
    }

    @Test("invalid Expires means already expired", arguments: ["0", "-1", "soon"])
    func invalidExpires(value: String) {
        #expect(lifetime(response(200, [("Expires", value), ("Last-Modified", HTTPDate.format(at(-10_000)))])) == FreshnessLifetime(seconds: 0, source: .expires))
    }

    @Test("RFC 9111 §5.3: an Expires in a zone other than GMT is invalid, so the response is stale")
    func expiresInAnotherZone() {
        // Before: read leniently as 2050, fresh for 26 years.
        let value = lifetime(response(200, [("Expires", "Thu, 18 Aug 2050 02:01:18 UTC"), ("Date", date)]))
        #expect(value == FreshnessLifetime(seconds: 0, source: .expires))
    }

    @Test("RFC 9111 §5.3: an Expires that is not an HTTP-date is a time in the past, and no heuristic applies",
        arguments: [
            "Thu, 18 Aug 50 02:01:18 GMT",  // two-digit year in IMF-fixdate
            "Thu 18 Aug 2050 02:01:18 GMT",  // no comma
            "Thu,  18 Aug 2050 02:01:18 GMT",  // doubled space
            "Thu, 18-Aug-2050 02:01:18 GMT",  // dashes in IMF-fixdate
            "Thu, 18 Aug 2050 02:01:18 +0000",
            "Thursday, 18 Aug 2050 02:01:18 GMT",
        ])
    func malformedExpires(value: String) {
        let stale = lifetime(response(200, [("Expires", value), ("Date", date), ("Last-Modified", HTTPDate.format(at(-100_000)))]))
        #expect(stale == FreshnessLifetime(seconds: 0, source: .expires))
    }

    @Test("RFC 9111 §5.3: Expires in each of RFC 9110's three forms gives the same lifetime", arguments: [
        "Mon, 01 Jan 2024 00:10:00 GMT", "Monday, 01-Jan-24 00:10:00 GMT", "Mon Jan  1 00:10:00 2024",
    ])
    func expiresForms(value: String) {
        #expect(lifetime(response(200, [("Expires", value), ("Date", date)])) == FreshnessLifetime(seconds: 600, source: .expires))
    }

    @Test("RFC 9110 §6.6.1: a Date that is not an HTTP-date counts as the response time")
    func invalidDate() {
        let value = lifetime(response(200, [("Expires", HTTPDate.format(at(300))), ("Date", "Mon, 01 Jan 2024 00:00:00 UTC")]))
        #expect(value == FreshnessLifetime(seconds: 300, source: .expires))
    }

    @Test("RFC 9111 §4.2.2: a Last-Modified that is not an HTTP-date gives no heuristic lifetime")
    func invalidLastModified() {
        let value = lifetime(response(200, [("Date", date), ("Last-Modified", "Sun, 01 Oct 23 00:00:00 GMT")]))
        #expect(value == FreshnessLifetime(seconds: 0, source: .none))
    }

    @Test("Expires in the past gives zero")
    func pastExpires() {
        #expect(lifetime(response(200, [("Expires", HTTPDate.format(at(-50))), ("Date", date)])).seconds == 0)
    }

    @Test("heuristic: 10% of Date minus Last-Modified")
    func heuristic() {
        let value = lifetime(response(200, [("Date", date), ("Last-Modified", HTTPDate.format(at(-1_000)))]))
        #expect(value == FreshnessLifetime(seconds: 100, source: .heuristic))
    }

    @Test("heuristic is capped at one day by default")
    func heuristicCap() {
        let value = lifetime(response(200, [("Date", date), ("Last-Modified", HTTPDate.format(at(-100 * 86_400)))]))
        #expect(value.seconds == 86_400)
    }

    @Test("heuristic fraction and cap are configurable")
    func heuristicConfigurable() {
        var rules = CachingRules()
        rules.heuristicFraction = 0.5
        rules.heuristicLimit = 300
        #expect(lifetime(response(200, [("Date", date), ("Last-Modified", HTTPDate.format(at(-100)))]), rules: rules).seconds == 50)
        #expect(lifetime(response(200, [("Date", date), ("Last-Modified", HTTPDate.format(at(-1_000)))]), rules: rules).seconds == 300)
    }

    @Test("no heuristic for a status not cacheable by default, unless public")
    func heuristicOnlyWhenAllowed() {
        let lastModified = HTTPDate.format(at(-1_000))
        #expect(lifetime(response(302, [("Date", date), ("Last-Modified", lastModified)])) == FreshnessLifetime(seconds: 0, source: .none))
        #expect(lifetime(response(302, [("Date", date), ("Last-Modified", lastModified), ("Cache-Control", "public")])).seconds == 100)
    }

    @Test("no explicit freshness and no Last-Modified gives zero")
    func nothing() {
        #expect(lifetime(response(200)) == FreshnessLifetime(seconds: 0, source: .none))
    }

    @Test("age: a response with no delays and no Age is as old as its resident time")
    func residentOnly() {
        let age = AgeCalculation(headerFields: fields([("Date", date)]), requestTime: epoch, responseTime: epoch, now: at(42))
        #expect(age.currentAge == 42)
        #expect(age.residentTime == 42)
        #expect(age.apparentAge == 0)
    }

    @Test("age: the Age header and the response delay add up (corrected age value)")
    func correctedAgeValue() {
        let age = AgeCalculation(headerFields: fields([("Date", date), ("Age", "30")]), requestTime: at(0), responseTime: at(2), now: at(10))
        #expect(age.responseDelay == 2)
        #expect(age.correctedAgeValue == 32)
        #expect(age.correctedInitialAge == 32)
        #expect(age.currentAge == 40)
    }

    @Test("age: apparent age wins when the origin's clock says the response is older")
    func apparentAge() {
        let age = AgeCalculation(headerFields: fields([("Date", HTTPDate.format(at(-100))), ("Age", "5")]), requestTime: at(0), responseTime: at(1), now: at(1))
        #expect(age.apparentAge == 101)
        #expect(age.correctedInitialAge == 101)
        #expect(age.currentAge == 101)
    }

    @Test("age: a Date in the future gives no negative apparent age")
    func futureDate() {
        let age = AgeCalculation(headerFields: fields([("Date", HTTPDate.format(at(1_000)))]), requestTime: epoch, responseTime: epoch, now: epoch)
        #expect(age.apparentAge == 0)
        #expect(age.currentAge == 0)
    }

    @Test("age: an invalid Age is ignored")
    func invalidAge() {
        let age = AgeCalculation(headerFields: fields([("Date", date), ("Age", "-3")]), requestTime: epoch, responseTime: epoch, now: at(1))
        #expect(age.currentAge == 1)
    }

    @Test("RFC 9111 §5.1: a list-valued Age uses its first member", arguments: [
        [("Age", "7200, 0")], [("Age", "7200,0")], [("Age", " , 7200, 0")], [("Age", "7200"), ("Age", "0")],
    ])
    func listAge(pairs: [(String, String)]) {
        let age = AgeCalculation(headerFields: fields([("Date", date)] + pairs), requestTime: epoch, responseTime: epoch, now: at(10))
        #expect(age.correctedAgeValue == 7200)
        #expect(age.currentAge == 7210)
    }

    @Test("RFC 9111 §5.1: an Age that is not delta-seconds is ignored", arguments: [
        "-5", "1.5", "soon", "0x10", "", "5 s", "abc, 7200", "+5",
    ])
    func invalidAgeValues(value: String) {
        let age = AgeCalculation(headerFields: fields([("Date", date), ("Age", value)]), requestTime: epoch, responseTime: epoch, now: at(10))
        #expect(age.correctedAgeValue == 0)
        #expect(age.currentAge == 10)
    }

    @Test("the Age header value is the current age in whole seconds")
    func ageHeaderValue() {
        let age = AgeCalculation(headerFields: fields([("Date", date), ("Age", "7")]), requestTime: epoch, responseTime: epoch, now: at(3.9))
        #expect(age.headerValue == "10")
    }
}
