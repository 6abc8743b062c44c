import Foundation
import Testing

@testable import HTTPCaching

@Suite("HTTP dates")
struct HTTPDateTests {
    static let expected = Date(timeIntervalSince1970: 784_111_777)  // Sun, 06 Nov 1994 08:49:37 GMT

    @Test("the three formats of RFC 9110 §5.6.7 parse to the same instant", arguments: [
        "Sun, 06 Nov 1994 08:49:37 GMT",
        "Sunday, 06-Nov-94 08:49:37 GMT",
        "Sun Nov  6 08:49:37 1994",
    ])
    func threeFormats(text: String) {
        #expect(HTTPDate.parse(text) == Self.expected)
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

    @Test("invalid values are not dates", arguments: [
        "0", "-1", "", "tomorrow", "Sun, 31 Feb 2024 00:00:00 GMT", "Sun, 06 Nov 1994 25:00:00 GMT",
        "Sun, 06 Nov 1994 08:49:37 PST", "Sun, 06 Foo 1994 08:49:37 GMT", "Sun, 06 Nov 194 08:49:37 GMT",
    ])
    func invalid(text: String) {
        #expect(HTTPDate.parse(text) == nil)
    }

    @Test("IMF-fixdate is read in place, and whatever it does not accept still gets the general reading", arguments: [
        ("Sun, 06 Nov 1994 08:49:37 GMT", 784_111_777.0),
        ("Sun, 06 Nov 1994 08:49:60 GMT", 784_111_799.0),  // a leap second counts as :59
        ("sun, 06 nov 1994 08:49:37 GMT", 784_111_777.0),  // case, general path
        ("Sun,  6 Nov 1994 08:49:37 GMT", 784_111_777.0),  // one-digit day, general path
        ("Tue, 29 Feb 2000 00:00:00 GMT", 951_782_400.0),
    ])
    func fixdate(text: String, seconds: Double) {
        #expect(HTTPDate.parse(text) == Date(timeIntervalSince1970: seconds))
        #expect(HTTPDate.parse(Substring(text)) == Date(timeIntervalSince1970: seconds))
    }

    @Test("the in-place reader takes exact IMF-fixdates only, and agrees with the general reading")
    func inPlaceReader() {
        func inPlace(_ text: String) -> Date? { Array(text.utf8).withUnsafeBufferPointer { HTTPDate.parseFixdate($0) } }
        #expect(inPlace("Sun, 06 Nov 1994 08:49:37 GMT") == Date(timeIntervalSince1970: 784_111_777))
        #expect(inPlace("Tue, 29 Feb 2000 00:00:00 GMT") == Date(timeIntervalSince1970: 951_782_400))
        for other in ["sun, 06 nov 1994 08:49:37 GMT", "Sun,  6 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT",
                      "Sun Nov  6 08:49:37 1994", "Sun, 06 Nov 1994 08:49:37 UTC", "Sun, 29 Feb 1900 08:49:37 GMT"] {
            #expect(inPlace(other) == nil, "\(other)")
        }
        for seconds in stride(from: 0.0, to: 4_102_444_800, by: 86_400 * 97 + 3_607) {
            let text = HTTPDate.format(Date(timeIntervalSince1970: seconds))
            #expect(inPlace(text) == Date(timeIntervalSince1970: seconds), "\(text)")
        }
    }

    @Test("fixdate-shaped values with a bad field are not dates", arguments: [
        "Sun, 06 Nov 1994 08:49:3x GMT", "Xyz, 06 Nov 1994 08:49:37 GMT", "Sun, 00 Nov 1994 08:49:37 GMT",
        "Sun, 29 Feb 1900 08:49:37 GMT", "Sun, 06 Nov 1994 24:00:00 GMT", "Sun, 06 Nov 1994 08:60:00 GMT",
    ])
    func badFixdate(text: String) {
        #expect(HTTPDate.parse(text) == nil)
    }

    @Test("RFC 850 two-digit years below 70 are in the 2000s")
    func twoDigitYears() {
        #expect(HTTPDate.parse("Monday, 01-Jan-24 00:00:00 GMT") == Date(timeIntervalSince1970: 1_704_067_200))
    }
}
