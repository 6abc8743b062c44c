public import HTTPTypes

extension HTTPField.Name {
    /// `CDN-Cache-Control` (RFC 9213 §3): the targeted field for all CDNs.
    public static let cdnCacheControl = HTTPField.Name("CDN-Cache-Control")!
}

extension ResponseCacheControl {
    /// The directives this cache obeys in `headerFields` (RFC 9213 §2.2): those of the first field in
    /// `rules.targetedCacheControlFields` that is present with a valid, non-empty value, else `Cache-Control`'s.
    ///
    /// A targeted field replaces `Cache-Control` and `Expires` for this cache's decisions; such directives
    /// have ``targetedField`` set. A targeted field that does not parse as a Structured Fields Dictionary
    /// (RFC 8941) is ignored, as if absent.
    public init(_ headerFields: HTTPFields, rules: CachingRules) {
        for name in rules.targetedCacheControlFields {
            let values = headerFields[values: name]
            guard !values.isEmpty, let directives = TargetedCacheControl.parse(values) else {
                continue
            }
            self.init(directives: directives)
            targetedField = name
            return
        }
        self.init(headerFields)
    }
}

/// The Structured Fields reading of a targeted cache-control field (RFC 9213 §2.1, RFC 8941 §4.2).
enum TargetedCacheControl {
    /// The field lines' directives, or nil when they are not one valid, non-empty Dictionary. A Dictionary whose
    /// members are all left out is still the field's value: it gives no directives, and still replaces
    /// `Cache-Control` (RFC 9213 §2.2 falls back only on an empty or invalid field).
    ///
    /// A member's value maps to the `Cache-Control` argument it stands for: `true` to none, an Integer to its
    /// digits, a String or Token to its text. Members a cache directive cannot be (`?0`, Decimals, Byte
    /// Sequences, Inner Lists) are left out; parameters are ignored (RFC 9213 §2.1).
    static func parse(_ values: [String]) -> [CacheDirective]? {
        var parser = Parser(Array(values.joined(separator: ",").utf8))
        return parser.dictionary()
    }

    private enum Value {
        case directive(String?)
        case ignored
    }

    private struct Parser {
        let bytes: [UInt8]
        var index = 0

        init(_ bytes: [UInt8]) { self.bytes = bytes }

        var current: UInt8? { index < bytes.count ? bytes[index] : nil }

        mutating func skip(_ predicate: (UInt8) -> Bool) {
            while let byte = current, predicate(byte) { index += 1 }
        }

        /// RFC 8941 §4.2.2. Later duplicates of a key replace earlier ones.
        mutating func dictionary() -> [CacheDirective]? {
            skip { $0 == 0x20 }
            var members: [(key: String, value: Value)] = []
            while current != nil {
                guard let key = key() else { return nil }
                let value: Value
                if current == UInt8(ascii: "=") {
                    index += 1
                    guard let parsed = itemOrInnerList() else { return nil }
                    value = parsed
                } else {
                    value = .directive(nil)
                    guard parameters() else { return nil }
                }
                if let existing = members.firstIndex(where: { $0.key == key }) {
                    members[existing].value = value
                } else {
                    members.append((key, value))
                }
                skip { $0 == 0x20 || $0 == 0x09 }
                guard current != nil else { break }
                guard current == UInt8(ascii: ",") else { return nil }
                index += 1
                skip { $0 == 0x20 || $0 == 0x09 }
                guard current != nil else { return nil }  // a trailing comma
            }
            guard !members.isEmpty else { return nil }
            return members.compactMap { member in
                guard case .directive(let argument) = member.value else { return nil }
                return CacheDirective(name: member.key, value: argument)
            }
        }

        mutating func key() -> String? {
            guard let first = current, isLowercaseAlpha(first) || first == UInt8(ascii: "*") else { return nil }
            let start = index
            skip { isLowercaseAlpha($0) || isDigit($0) || $0 == 0x5F || $0 == 0x2D || $0 == 0x2E || $0 == 0x2A }
            return String(decoding: bytes[start..<index], as: UTF8.self)
        }

        mutating func parameters() -> Bool {
            while current == UInt8(ascii: ";") {
                index += 1
                skip { $0 == 0x20 }
                guard key() != nil else { return false }
                if current == UInt8(ascii: "=") {
                    index += 1
                    guard bareItem() != nil else { return false }
                }
            }
            return true
        }

        mutating func itemOrInnerList() -> Value? {
            if current == UInt8(ascii: "(") {
                index += 1
                while true {
                    skip { $0 == 0x20 }
                    if current == UInt8(ascii: ")") {
                        index += 1
                        return parameters() ? .ignored : nil
                    }
                    guard bareItem() != nil, parameters() else { return nil }
                    guard current == 0x20 || current == UInt8(ascii: ")") else { return nil }
                }
            }
            guard let item = bareItem(), parameters() else { return nil }
            return item
        }

        mutating func bareItem() -> Value? {
            guard let first = current else { return nil }
            switch first {
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return number()
            case UInt8(ascii: "\""): return string()
            case UInt8(ascii: ":"): return byteSequence()
            case UInt8(ascii: "?"):
                index += 1
                switch current {
                case UInt8(ascii: "1"):
                    index += 1
                    return .directive(nil)
                case UInt8(ascii: "0"):
                    index += 1
                    return .ignored
                default: return nil
                }
            default:
                guard isAlpha(first) || first == UInt8(ascii: "*") else { return nil }
                let start = index
                skip { isTokenCharacter($0) || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: "/") }
                return .directive(String(decoding: bytes[start..<index], as: UTF8.self))
            }
        }

        /// RFC 8941 §4.2.4: an Integer of at most 15 digits, or a Decimal (ignored here).
        mutating func number() -> Value? {
            let start = index
            if current == UInt8(ascii: "-") { index += 1 }
            let digitsStart = index
            skip(isDigit)
            let integerDigits = index - digitsStart
            guard integerDigits > 0 else { return nil }
            if current == UInt8(ascii: ".") {
                index += 1
                let fractionStart = index
                skip(isDigit)
                let fractionDigits = index - fractionStart
                guard integerDigits <= 12, (1...3).contains(fractionDigits) else { return nil }
                return .ignored
            }
            guard integerDigits <= 15 else { return nil }
            return .directive(String(decoding: bytes[start..<index], as: UTF8.self))
        }

        mutating func string() -> Value? {
            index += 1
            var text: [UInt8] = []
            while let byte = current {
                index += 1
                switch byte {
                case UInt8(ascii: "\""): return .directive(String(decoding: text, as: UTF8.self))
                case UInt8(ascii: "\\"):
                    guard let escaped = current, escaped == UInt8(ascii: "\"") || escaped == UInt8(ascii: "\\") else {
                        return nil
                    }
                    text.append(escaped)
                    index += 1
                case 0x20...0x7E: text.append(byte)
                default: return nil
                }
            }
            return nil
        }

        mutating func byteSequence() -> Value? {
            index += 1
            skip { isAlpha($0) || isDigit($0) || $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "=") }
            guard current == UInt8(ascii: ":") else { return nil }
            index += 1
            return .ignored
        }
    }
}

private func isDigit(_ byte: UInt8) -> Bool { byte >= 0x30 && byte <= 0x39 }
private func isLowercaseAlpha(_ byte: UInt8) -> Bool { byte >= 0x61 && byte <= 0x7A }
private func isAlpha(_ byte: UInt8) -> Bool { isLowercaseAlpha(byte) || (byte >= 0x41 && byte <= 0x5A) }

/// `tchar` (RFC 9110 §5.6.2).
private func isTokenCharacter(_ byte: UInt8) -> Bool {
    if isAlpha(byte) || isDigit(byte) { return true }
    switch byte {
    case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"),
        UInt8(ascii: "'"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."),
        UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
        return true
    default: return false
    }
}
