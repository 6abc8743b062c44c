#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// HTTP dates (RFC 9110 §5.6.7): parsing of the three formats a recipient must accept, and formatting as
/// IMF-fixdate.
///
/// Parsing is written out by hand, with no locale or formatter involved, so it is cheap and gives the same
/// answer everywhere.
public enum HTTPDate {
    /// Parses an HTTP date in IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the obsolete RFC 850 format
    /// (`Sunday, 06-Nov-94 08:49:37 GMT`) or ANSI C's asctime format (`Sun Nov  6 08:49:37 1994`).
    ///
    /// Two-digit years of the RFC 850 format are read as 1970–2069. A date that names a time zone other than
    /// GMT (or UTC) is not an HTTP date.
    /// - Parameter text: A field value.
    /// - Returns: The instant, or nil when `text` is not a valid HTTP date (callers treat that as "in the past"
    ///   where RFC 9111 says so, for example for `Expires`).
    public static func parse(_ text: some StringProtocol) -> Date? {
        // IMF-fixdate, what every current server sends, read in place; anything else takes the general path.
        if let fixed = text.utf8.withContiguousStorageIfAvailable({ parseFixdate($0) }), let fixed { return fixed }
        var tokens: [Substring] = []
        let string = Substring(text)
        var start: Substring.Index? = nil
        var index = string.startIndex
        while index < string.endIndex {
            let character = string[index]
            if character == " " || character == "," || character == "-" || character == "\t" {
                if let begin = start {
                    tokens.append(string[begin..<index])
                    start = nil
                }
            } else if start == nil {
                start = index
            }
            index = string.index(after: index)
        }
        if let begin = start { tokens.append(string[begin...]) }
        guard tokens.count >= 4, tokens.count <= 6 else { return nil }

        var month: Int? = nil
        var numbers: [Substring] = []
        var time: (Int, Int, Int)? = nil
        for (position, token) in tokens.enumerated() {
            if token.contains(":") {
                guard time == nil, let parsed = parseTime(token) else { return nil }
                time = parsed
            } else if token.allSatisfy({ $0.isASCII && $0.isNumber }) {
                numbers.append(token)
            } else if let parsedMonth = monthNumber(token), month == nil, position > 0 {
                month = parsedMonth
            } else if position == 0, weekdayNames.contains(where: { token.lowercased().hasPrefix($0) }) {
                continue
            } else if position == tokens.count - 1, token == "GMT" || token == "UTC" {
                continue
            } else {
                return nil
            }
        }
        guard let month, let time, numbers.count == 2,
            let day = Int(numbers[0]), numbers[0].count <= 2,
            var year = Int(numbers[1])
        else { return nil }
        switch numbers[1].count {
        case 2: year += year < 70 ? 2000 : 1900
        case 4: break
        default: return nil
        }
        guard day >= 1, day <= daysIn(month: month, year: year) else { return nil }
        let days = daysFromCivil(year: year, month: month, day: day)
        let seconds = days * 86_400 + time.0 * 3_600 + time.1 * 60 + min(time.2, 59)
        return Date(timeIntervalSince1970: TimeInterval(seconds))
    }

    /// `Sun, 06 Nov 1994 08:49:37 GMT` exactly (29 bytes, the weekday and month as written there), or nil.
    static func parseFixdate(_ bytes: UnsafeBufferPointer<UInt8>) -> Date? {
        guard bytes.count == 29, bytes[3] == UInt8(ascii: ","), bytes[4] == UInt8(ascii: " "), bytes[7] == UInt8(ascii: " "),
            bytes[11] == UInt8(ascii: " "), bytes[16] == UInt8(ascii: " "), bytes[19] == UInt8(ascii: ":"),
            bytes[22] == UInt8(ascii: ":"), bytes[25] == UInt8(ascii: " "), bytes[26] == UInt8(ascii: "G"),
            bytes[27] == UInt8(ascii: "M"), bytes[28] == UInt8(ascii: "T")
        else { return nil }
        func number(_ from: Int, _ count: Int) -> Int? {
            var value = 0
            for i in from..<(from + count) {
                let digit = bytes[i] &- UInt8(ascii: "0")
                guard digit < 10 else { return nil }
                value = value * 10 + Int(digit)
            }
            return value
        }
        func matches(_ name: String, at offset: Int) -> Bool {
            var i = offset
            for byte in name.utf8 {
                guard bytes[i] == byte else { return false }
                i += 1
            }
            return true
        }
        guard shortWeekdays.contains(where: { matches($0, at: 0) }),
            let monthIndex = monthNames.firstIndex(where: { matches($0, at: 8) }),
            let day = number(5, 2), let year = number(12, 4), let hour = number(17, 2), let minute = number(20, 2),
            let second = number(23, 2), hour < 24, minute < 60, second <= 60, day >= 1,
            day <= daysIn(month: monthIndex + 1, year: year)
        else { return nil }
        let days = daysFromCivil(year: year, month: monthIndex + 1, day: day)
        return Date(timeIntervalSince1970: TimeInterval(days * 86_400 + hour * 3_600 + minute * 60 + min(second, 59)))
    }

    /// Formats `date` as an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), dropping fractions of a second.
    public static func format(_ date: Date) -> String {
        let total = Int(date.timeIntervalSince1970.rounded(.down))
        let days = total >= 0 ? total / 86_400 : (total - 86_399) / 86_400
        let secondOfDay = total - days * 86_400
        let (year, month, day) = civilFromDays(days)
        let weekday = ((days % 7) + 7 + 4) % 7
        func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
        var yearText = String(year)
        while yearText.count < 4 { yearText = "0" + yearText }
        return "\(shortWeekdays[weekday]), \(two(day)) \(monthNames[month - 1]) \(yearText) "
            + "\(two(secondOfDay / 3_600)):\(two(secondOfDay / 60 % 60)):\(two(secondOfDay % 60)) GMT"
    }

    private static let monthNames = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
    private static let shortWeekdays = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    private static let weekdayNames = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]

    private static func monthNumber(_ token: Substring) -> Int? {
        guard token.count == 3 else { return nil }
        let lowered = token.lowercased()
        return monthNames.firstIndex { $0.lowercased() == lowered }.map { $0 + 1 }
    }

    private static func parseTime(_ token: Substring) -> (Int, Int, Int)? {
        let parts = token.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 3, parts.allSatisfy({ $0.count == 2 && $0.allSatisfy { $0.isASCII && $0.isNumber } }),
            let hour = Int(parts[0]), let minute = Int(parts[1]), let second = Int(parts[2]),
            hour < 24, minute < 60, second <= 60
        else { return nil }
        return (hour, minute, second)
    }

    private static func isLeap(_ year: Int) -> Bool { (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 }

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: isLeap(year) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (the era-based civil calendar arithmetic).
    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let shiftedYear = month <= 2 ? year - 1 : year
        let era = (shiftedYear >= 0 ? shiftedYear : shiftedYear - 399) / 400
        let yearOfEra = shiftedYear - era * 400
        let shiftedMonth = (month + 9) % 12
        let dayOfYear = (153 * shiftedMonth + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    static func civilFromDays(_ days: Int) -> (year: Int, month: Int, day: Int) {
        let shifted = days + 719_468
        let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
        let month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
