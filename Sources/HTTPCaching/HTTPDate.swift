#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// HTTP dates (RFC 9110 §5.6.7): parsing of exactly the three forms the grammar defines, and formatting as
/// IMF-fixdate.
///
/// Parsing works on the value's bytes, with no locale or formatter involved, so it is cheap and gives the same
/// answer everywhere. It accepts:
///
/// - IMF-fixdate, `Sun, 06 Nov 1994 08:49:37 GMT`: a three-letter day name, a comma and one space, a two-digit
///   day, a month name, a four-digit year, the time and `GMT`, each separated by one space;
/// - the obsolete RFC 850 form, `Sunday, 06-Nov-94 08:49:37 GMT`: the full day name, the day, month and
///   two-digit year joined by dashes;
/// - ANSI C's asctime form, `Sun Nov  6 08:49:37 1994`: the day as two digits or as a space and one digit,
///   the year last, no zone.
///
/// Everything else is not an HTTP date: another zone (`UTC`, `+0000`), a two-digit year in IMF-fixdate, a
/// missing comma, doubled spaces, dashes in IMF-fixdate, a day out of its month, a time out of range. Names
/// (days, months, `GMT`) are matched without regard to case, as RFC 9111 §4.2 asks of a cache. A day name must
/// be one of the grammar's, but it is not checked against the date: RFC 9110 gives it no meaning of its own,
/// and the numbers say which day it is. A leap second (`:60`) reads as `:59`. Optional whitespace around the
/// whole value (not part of a field value, RFC 9110 §5.5) is ignored.
public enum HTTPDate {
    /// Parses an HTTP date in one of the three forms of RFC 9110 §5.6.7, reading an RFC 850 two-digit year
    /// relative to the current time (see ``parse(_:relativeTo:)``).
    /// - Parameter text: A field value.
    /// - Returns: The instant, or nil when `text` is not a valid HTTP date (callers treat that as "in the past"
    ///   where RFC 9111 says so, for example for `Expires`).
    public static func parse(_ text: some StringProtocol) -> Date? {
        parse(text, relativeTo: nil)
    }

    /// Parses an HTTP date in one of the three forms of RFC 9110 §5.6.7.
    ///
    /// The two-digit year of the RFC 850 form is the year with those last two digits that is not more than 50
    /// years after `reference` (RFC 9110 §5.6.7: a timestamp that appears to be more than 50 years in the future
    /// is the most recent year in the past with the same last two digits).
    /// - Parameters:
    ///   - text: A field value.
    ///   - reference: The time an RFC 850 date is read against, such as when the response was received; nil for
    ///     the current time.
    /// - Returns: The instant, or nil when `text` is not a valid HTTP date.
    public static func parse(_ text: some StringProtocol, relativeTo reference: Date?) -> Date? {
        if let parsed = text.utf8.withContiguousStorageIfAvailable({ parse(bytes: $0, relativeTo: reference) }) {
            return parsed
        }
        return Array(text.utf8).withUnsafeBufferPointer { parse(bytes: $0, relativeTo: reference) }
    }

    /// ``parse(_:relativeTo:)`` over the value's bytes.
    static func parse(bytes whole: UnsafeBufferPointer<UInt8>, relativeTo reference: Date?) -> Date? {
        var start = 0
        var end = whole.count
        while start < end, whole[start] == space || whole[start] == tab { start += 1 }
        while end > start, whole[end - 1] == space || whole[end - 1] == tab { end -= 1 }
        let bytes = UnsafeBufferPointer(rebasing: whole[start..<end])
        guard bytes.count >= 24 else { return nil }
        if bytes[3] == UInt8(ascii: ",") { return parseFixdate(bytes) }
        if bytes[3] == space { return parseAsctime(bytes) }
        return parseRFC850(bytes, relativeTo: reference)
    }

    /// IMF-fixdate, `Sun, 06 Nov 1994 08:49:37 GMT`: exactly 29 bytes.
    static func parseFixdate(_ bytes: UnsafeBufferPointer<UInt8>) -> Date? {
        guard bytes.count == 29, bytes[3] == UInt8(ascii: ","), bytes[4] == space, bytes[7] == space,
            bytes[11] == space, bytes[16] == space, bytes[25] == space,
            matchesName(bytes, at: 0, in: shortDayNames) != nil, matchesName(bytes, at: 26, in: zoneNames) != nil,
            let day = number(bytes, at: 5, digits: 2), let month = matchesName(bytes, at: 8, in: monthNames),
            let year = number(bytes, at: 12, digits: 4), let time = timeOfDay(bytes, at: 17)
        else { return nil }
        return instant(year: year, month: month + 1, day: day, time: time)
    }

    /// RFC 850, `Sunday, 06-Nov-94 08:49:37 GMT`: a full day name, then 24 bytes.
    static func parseRFC850(_ bytes: UnsafeBufferPointer<UInt8>, relativeTo reference: Date?) -> Date? {
        let nameLength = bytes.count - 24
        guard nameLength >= 6, nameLength <= 9, matchesName(bytes, at: 0, in: longDayNames, length: nameLength) != nil
        else { return nil }
        let at = nameLength
        guard bytes[at] == UInt8(ascii: ","), bytes[at + 1] == space, bytes[at + 4] == UInt8(ascii: "-"),
            bytes[at + 8] == UInt8(ascii: "-"), bytes[at + 11] == space, bytes[at + 20] == space,
            matchesName(bytes, at: at + 21, in: zoneNames) != nil,
            let day = number(bytes, at: at + 2, digits: 2), let month = matchesName(bytes, at: at + 5, in: monthNames),
            let twoDigitYear = number(bytes, at: at + 9, digits: 2), let time = timeOfDay(bytes, at: at + 12)
        else { return nil }
        let year = fullYear(twoDigitYear, month: month + 1, day: day, time: time, relativeTo: reference ?? Date())
        return instant(year: year, month: month + 1, day: day, time: time)
    }

    /// asctime, `Sun Nov  6 08:49:37 1994`: exactly 24 bytes, the day as two digits or a space and a digit.
    static func parseAsctime(_ bytes: UnsafeBufferPointer<UInt8>) -> Date? {
        guard bytes.count == 24, bytes[3] == space, bytes[7] == space, bytes[10] == space, bytes[19] == space,
            matchesName(bytes, at: 0, in: shortDayNames) != nil, let month = matchesName(bytes, at: 4, in: monthNames),
            let day = bytes[8] == space ? number(bytes, at: 9, digits: 1) : number(bytes, at: 8, digits: 2),
            let time = timeOfDay(bytes, at: 11), let year = number(bytes, at: 20, digits: 4)
        else { return nil }
        return instant(year: year, month: month + 1, day: day, time: time)
    }

    /// The instant of a date whose parts were read, or nil when the day is not in its month.
    private static func instant(year: Int, month: Int, day: Int, time: Int) -> Date? {
        guard day >= 1, day <= daysIn(month: month, year: year) else { return nil }
        return Date(timeIntervalSince1970: TimeInterval(daysFromCivil(year: year, month: month, day: day) * 86_400 + time))
    }

    /// The year whose last two digits are `twoDigits` and which puts the date no more than 50 years after
    /// `reference` (RFC 9110 §5.6.7), nor 50 years or more before it.
    static func fullYear(_ twoDigits: Int, month: Int, day: Int, time: Int, relativeTo reference: Date) -> Int {
        let seconds = Int(reference.timeIntervalSince1970.rounded(.down))
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let now = civilFromDays(days)
        let nowTime = seconds - days * 86_400
        // Dates compared as (year, month, day, second of the day).
        func isAfter(_ year: Int, than limitYear: Int) -> Bool {
            (year, month, day, time) > (limitYear, now.month, now.day, nowTime)
        }
        var year = now.year - ((now.year % 100) + 100) % 100 + twoDigits
        if isAfter(year, than: now.year + 50) {
            year -= 100
        } else if !isAfter(year + 100, than: now.year + 50) {
            year += 100
        }
        return year
    }

    /// `HH:MM:SS` at `offset` as seconds of the day: hours to 23, minutes to 59, seconds to 60 (a leap second,
    /// read as 59).
    private static func timeOfDay(_ bytes: UnsafeBufferPointer<UInt8>, at offset: Int) -> Int? {
        guard bytes[offset + 2] == UInt8(ascii: ":"), bytes[offset + 5] == UInt8(ascii: ":"),
            let hour = number(bytes, at: offset, digits: 2), let minute = number(bytes, at: offset + 3, digits: 2),
            let second = number(bytes, at: offset + 6, digits: 2), hour < 24, minute < 60, second <= 60
        else { return nil }
        return hour * 3_600 + minute * 60 + min(second, 59)
    }

    /// The decimal number of exactly `digits` digits at `offset`.
    private static func number(_ bytes: UnsafeBufferPointer<UInt8>, at offset: Int, digits: Int) -> Int? {
        var value = 0
        for index in offset..<(offset + digits) {
            let digit = bytes[index] &- UInt8(ascii: "0")
            guard digit < 10 else { return nil }
            value = value * 10 + Int(digit)
        }
        return value
    }

    /// The index in `names` (lowercase ASCII letters) of the name spelled at `offset`, in any case, taking
    /// `length` bytes (nil: the name's own length); nil when none is.
    private static func matchesName(
        _ bytes: UnsafeBufferPointer<UInt8>, at offset: Int, in names: [[UInt8]], length: Int? = nil
    ) -> Int? {
        names.firstIndex { name in
            guard length.map({ $0 == name.count }) ?? true, offset + name.count <= bytes.count else { return false }
            for (index, letter) in name.enumerated() where bytes[offset + index] | 0x20 != letter { return false }
            return true
        }
    }

    private static let space = UInt8(ascii: " ")
    private static let tab = UInt8(ascii: "\t")

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
        return "\(shortWeekdays[weekday]), \(two(day)) \(monthTexts[month - 1]) \(yearText) "
            + "\(two(secondOfDay / 3_600)):\(two(secondOfDay / 60 % 60)):\(two(secondOfDay % 60)) GMT"
    }

    private static let shortWeekdays = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    private static let monthTexts = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
    // The grammar's names, lowercased for matching in any case.
    private static let shortDayNames = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"].map { Array($0.utf8) }
    private static let longDayNames = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
        .map { Array($0.utf8) }
    private static let monthNames = monthTexts.map { Array($0.lowercased().utf8) }
    private static let zoneNames = [Array("gmt".utf8)]

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
