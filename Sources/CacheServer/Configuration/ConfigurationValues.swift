/// Parsers for directive arguments, each accepting exactly what redis-server 7.0
/// accepts and failing with its wording.
enum ConfigurationValues {
    /// A strict decimal integer as Redis's `string2ll` reads it: an optional `-`,
    /// no `+`, no spaces, no leading zeros, no overflow.
    static func integer(_ text: String) -> Int64? {
        let bytes = Array(text.utf8)
        guard !bytes.isEmpty, bytes.count <= 20 else { return nil }
        if bytes == [UInt8(ascii: "0")] { return 0 }
        var index = 0
        let negative = bytes[0] == UInt8(ascii: "-")
        if negative { index = 1 }
        guard index < bytes.count, (UInt8(ascii: "1")...UInt8(ascii: "9")).contains(bytes[index]) else {
            return nil
        }
        var magnitude: UInt64 = 0
        while index < bytes.count {
            let byte = bytes[index]
            guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
            let (times10, overflow1) = magnitude.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = times10.addingReportingOverflow(UInt64(byte - UInt8(ascii: "0")))
            guard !overflow1, !overflow2 else { return nil }
            magnitude = sum
            index += 1
        }
        if negative {
            guard magnitude <= UInt64(Int64.max) + 1 else { return nil }
            return magnitude == UInt64(Int64.max) + 1 ? Int64.min : -Int64(magnitude)
        }
        guard magnitude <= UInt64(Int64.max) else { return nil }
        return Int64(magnitude)
    }

    /// A memory amount as Redis's `memtoull` reads it: digits followed by an
    /// optional case-insensitive unit, `b` (1), `k` (1000), `kb` (1024), `m`
    /// (1000²), `mb` (1024²), `g` (1000³) or `gb` (1024³).
    ///
    /// Like Redis, no digits count as 0 (`kb` is 0) and a value too large for 64 bits
    /// saturates. Redis wraps around when the unit multiplication overflows; this
    /// saturates there too.
    static func memory(_ text: String) -> UInt64? {
        let bytes = Array(text.utf8)
        let digitCount = bytes.prefix { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }.count
        let unit = String(decoding: bytes[digitCount...], as: UTF8.self).lowercased()
        let multiplier: UInt64
        switch unit {
        case "", "b": multiplier = 1
        case "k": multiplier = 1000
        case "kb": multiplier = 1024
        case "m": multiplier = 1000 * 1000
        case "mb": multiplier = 1024 * 1024
        case "g": multiplier = 1000 * 1000 * 1000
        case "gb": multiplier = 1024 * 1024 * 1024
        default: return nil
        }
        // Redis copies the digits into a 128-byte buffer and rejects longer ones.
        guard digitCount < 128 else { return nil }
        var value: UInt64 = 0
        for byte in bytes[..<digitCount] {
            let (times10, overflow1) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = times10.addingReportingOverflow(UInt64(byte - UInt8(ascii: "0")))
            if overflow1 || overflow2 { value = .max; break }
            value = sum
        }
        let (product, overflow) = value.multipliedReportingOverflow(by: multiplier)
        return overflow ? .max : product
    }

    /// A number as C's `strtoll(text, &end, base)` reads it when the whole text must
    /// be consumed: leading white space, an optional sign, digits (none reads as 0);
    /// out-of-range values saturate. Redis reads `save` points and octal values this way.
    static func cInteger(_ text: String, base: Int) -> Int64? {
        var bytes = Array(text.utf8)[...]
        while let first = bytes.first, isCSpace(first) { bytes = bytes.dropFirst() }
        var negative = false
        if let first = bytes.first, first == UInt8(ascii: "-") || first == UInt8(ascii: "+") {
            negative = first == UInt8(ascii: "-")
            bytes = bytes.dropFirst()
        }
        var magnitude: UInt64 = 0
        var saturated = false
        for byte in bytes {
            guard byte >= UInt8(ascii: "0"), Int(byte - UInt8(ascii: "0")) < base else { return nil }
            let (times, overflow1) = magnitude.multipliedReportingOverflow(by: UInt64(base))
            let (sum, overflow2) = times.addingReportingOverflow(UInt64(byte - UInt8(ascii: "0")))
            if overflow1 || overflow2 { saturated = true } else { magnitude = sum }
        }
        if negative {
            return saturated || magnitude > UInt64(Int64.max) ? Int64.min : -Int64(magnitude)
        }
        return saturated || magnitude > UInt64(Int64.max) ? Int64.max : Int64(magnitude)
    }

    /// `yes` or `no`, in any case.
    static func boolean(_ text: String) -> Bool? {
        switch text.lowercased() {
        case "yes": true
        case "no": false
        default: nil
        }
    }

    /// C's `isspace` in the C locale.
    static func isCSpace(_ byte: UInt8) -> Bool {
        byte == 0x20 || (0x09...0x0D).contains(byte)
    }

    /// Renders like `printf("%o")`.
    static func octal(_ value: Int) -> String {
        String(value, radix: 8)
    }
}
