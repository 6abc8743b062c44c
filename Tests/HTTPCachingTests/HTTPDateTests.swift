import Foundation
import Testing

@testable import HTTPCaching

@Suite("HTTP dates")
struct HTTPDateTests {
    static let expected = Date(timeIntervalSince1970: 784_111_777)  // Sun, 06 Nov 1994 08:49:37 GMT

    /// Parses `text` as a field value read at the tests' epoch (2024-01-01), in place and from a copy.
    static func parsed(_ text: String) -> Date? {
        let inPlace = HTTPDate.parse(text, relativeTo: epoch)
        #expect(HTTPDate.parse(Substring(text), relativeTo: epoch) == inPlace, "\(text)")
        return inPlace
    }

    @Test("RFC 9110 §5.6.7: the three forms of HTTP-date parse to the same instant", arguments: [
        "Sun, 06 Nov 1994 08:49:37 GMT",
        "Sunday, 06-Nov-94 08:49:37 GMT",
        "Sun Nov  6 08:49:37 1994",
    ])
    func threeFormats(text: String) {
        #expect(Self.parsed(text) == Self.expected)
    }

    @Test("formatting writes IMF-fixdate")
    func formatsIMFFixdate() {
        #expect(HTTPDate.format(Self.expected) == "Sun, 06 Nov 1994 08:49:37 GMT")
    }

    @Test("format and parse round-trip across leap days and centuries", arguments: [
        0.0, 951_782_400, 4_107_542_399, 1_709_164_800, 253_402_300_799,
    ])
    func roundTrip(seconds: Double) {
        let date = Date(timeIntervalSince1970: seconds)
        #expect(HTTPDate.parse(HTTPDate.format(date)) == date)
    }

    @Test("RFC 9110 §5.6.7: valid values of each form, at the edges of their ranges", arguments: [
        // IMF-fixdate
        ("Thu, 01 Jan 1970 00:00:00 GMT", 0.0),
        ("Tue, 29 Feb 2000 00:00:00 GMT", 951_782_400),
        ("Fri, 31 Dec 9999 23:59:59 GMT", 253_402_300_799),
        ("Sun, 06 Nov 1994 23:59:59 GMT", 784_166_399),
        ("Sun, 06 Nov 1994 08:49:60 GMT", 784_111_799),  // a leap second reads as :59
        // RFC 850 (two-digit years read against 2024-01-01)
        ("Monday, 01-Jan-24 00:00:00 GMT", 1_704_067_200),
        ("Wednesday, 31-Dec-99 23:59:59 GMT", 946_684_799),
        ("Saturday, 01-Jan-00 00:00:00 GMT", 946_684_800),
        ("Tuesday, 29-Feb-00 12:00:00 GMT", 951_825_600),
        // asctime: the day as a space and a digit, or as two digits
        ("Sun Nov 06 08:49:37 1994", 784_111_777),
        ("Thu Feb 29 12:00:00 2024", 1_709_208_000),
        ("Thu Jan  1 00:00:00 1970", 0),
    ])
    func validForms(text: String, seconds: Double) {
        #expect(Self.parsed(text) == Date(timeIntervalSince1970: seconds), "\(text)")
    }

    @Test("RFC 9111 §4.2: a cache matches day names, month names and GMT in any case", arguments: [
        "sun, 06 nov 1994 08:49:37 gmt", "SUN, 06 NOV 1994 08:49:37 GMT", "SUNDAY, 06-NOV-94 08:49:37 Gmt",
        "sun nov  6 08:49:37 1994",
    ])
    func caseInsensitive(text: String) {
        #expect(Self.parsed(text) == Self.expected)
    }

    @Test("whitespace around the value is not part of it (RFC 9110 §5.5)", arguments: [
        " Sun, 06 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:37 GMT\t", "  Sun Nov  6 08:49:37 1994  ",
    ])
    func surroundingWhitespace(text: String) {
        #expect(Self.parsed(text) == Self.expected)
    }

    @Test("a day name that does not match the date is accepted: the numbers name the day")
    func dayNameNotChecked() {
        #expect(Self.parsed("Mon, 06 Nov 1994 08:49:37 GMT") == Self.expected)
        #expect(Self.parsed("Friday, 06-Nov-94 08:49:37 GMT") == Self.expected)
    }

    @Test("RFC 9110 §5.6.7: anything that is not one of the three forms is not a date", arguments: [
        // Zones other than GMT (RFC 9111 §4.2: a cache should consider them invalid)
        "Thu, 18 Aug 2050 02:01:18 UTC", "Sun, 06 Nov 1994 08:49:37 PST", "Sun, 06 Nov 1994 08:49:37 +0000",
        "Sun, 06 Nov 1994 08:49:37 Z", "Sun, 06 Nov 1994 08:49:37", "Sunday, 06-Nov-94 08:49:37 UTC",
        "Sun Nov  6 08:49:37 1994 GMT",
        // IMF-fixdate bent out of shape
        "Sun, 06 Nov 94 08:49:37 GMT",  // two-digit year
        "Sun 06 Nov 1994 08:49:37 GMT",  // no comma
        "Sun,  06 Nov 1994 08:49:37 GMT", "Sun, 06  Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994  08:49:37 GMT",
        "Sun, 06 Nov 1994 08:49:37  GMT",  // doubled spaces
        "Sun, 06-Nov-1994 08:49:37 GMT",  // dashes
        "Sun,  6 Nov 1994 08:49:37 GMT", "Sun, 6 Nov 1994 08:49:37 GMT",  // one-digit day
        "Sunday, 06 Nov 1994 08:49:37 GMT",  // the long day name
        "Sun,\t06 Nov 1994 08:49:37 GMT",  // a tab for a space
        "Sun, 06 Nov 01994 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:37.5 GMT", "Sun, 06 Nov 1994 08:49:37 GMT,",
        "Sun, 06 Nov 1994 08:49:37 GMTX", "Su, 06 Nov 1994 08:49:37 GMT", "Sun, 06 November 1994 08:49:37 GMT",
        // RFC 850 bent out of shape
        "Sun, 06-Nov-94 08:49:37 GMT",  // the short day name
        "Sunday, 06-Nov-1994 08:49:37 GMT",  // a four-digit year
        "Sunday, 06 Nov 94 08:49:37 GMT",  // no dashes
        "Sunday 06-Nov-94 08:49:37 GMT",  // no comma
        "Sunday,  06-Nov-94 08:49:37 GMT", "Sunny, 06-Nov-94 08:49:37 GMT", "Sundays, 06-Nov-94 08:49:37 GMT",
        "Sunday, 6-Nov-94 08:49:37 GMT",
        // asctime bent out of shape
        "Sun Nov 6 08:49:37 1994",  // one space before a one-digit day
        "Sun Nov  6 08:49:37 94",  // a two-digit year
        "Sun Nov   6 08:49:37 1994", "Sunday Nov  6 08:49:37 1994", "Sun, Nov  6 08:49:37 1994",
        "Sun Nov  0 08:49:37 1994",
        // Times and days out of range
        "Sun, 06 Nov 1994 24:00:00 GMT", "Sun, 06 Nov 1994 08:60:00 GMT", "Sun, 06 Nov 1994 08:49:61 GMT",
        "Sun, 06 Nov 1994 8:49:37 GMT", "Sun, 06 Nov 1994 08:49 GMT", "Sun, 06 Nov 1994 08:49:3x GMT",
        "Sun, 00 Nov 1994 08:49:37 GMT", "Sun, 31 Nov 1994 08:49:37 GMT", "Sun, 31 Feb 2024 00:00:00 GMT",
        "Sun, 29 Feb 1900 08:49:37 GMT", "Sunday, 29-Feb-01 08:49:37 GMT", "Sun Feb 30 08:49:37 1994",
        // Names that are not the grammar's
        "Xyz, 06 Nov 1994 08:49:37 GMT", "Sun, 06 Foo 1994 08:49:37 GMT",
        // Not dates at all
        "0", "-1", "", "tomorrow", "1994-11-06T08:49:37Z", "784111777", "Sun, 06 Nov 1994 08:49:37 GMT GMT",
    ])
    func invalid(text: String) {
        #expect(Self.parsed(text) == nil)
    }

    @Test("RFC 9110 §5.6.7: an RFC 850 year more than 50 years ahead is the most recent past year with its digits",
        arguments: [
            // (value, reference, expected year)
            ("Monday, 01-Jan-74 00:00:00 GMT", "Mon, 01 Jan 2024 00:00:00 GMT", 2074),  // exactly 50 years ahead
            ("Wednesday, 02-Jan-74 00:00:00 GMT", "Mon, 01 Jan 2024 00:00:00 GMT", 1974),  // a day more
            ("Friday, 01-Jan-99 00:00:00 GMT", "Mon, 01 Jan 2024 00:00:00 GMT", 1999),
            ("Friday, 01-Jan-99 00:00:00 GMT", "Sat, 01 Jan 2050 00:00:00 GMT", 2099),
            ("Friday, 01-Jan-10 00:00:00 GMT", "Sun, 01 Jan 2090 00:00:00 GMT", 2110),
            ("Friday, 01-Jan-41 00:00:00 GMT", "Sun, 01 Jan 2090 00:00:00 GMT", 2041),
        ])
    func twoDigitYears(text: String, reference: String, year: Int) throws {
        let now = try #require(HTTPDate.parse(reference))
        let date = try #require(HTTPDate.parse(text, relativeTo: now))
        #expect(HTTPDate.format(date).contains(" \(year) "), "\(HTTPDate.format(date))")
    }

    @Test("the IMF-fixdate reader agrees with formatting over four centuries")
    func fixdateAgreesWithFormat() {
        for seconds in stride(from: -2_208_988_800.0, to: 4_102_444_800, by: 86_400 * 97 + 3_607) {
            let text = HTTPDate.format(Date(timeIntervalSince1970: seconds))
            #expect(HTTPDate.parse(text) == Date(timeIntervalSince1970: seconds), "\(text)")
        }
    }
}
