#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import HTTPTypes

/// A `Range` request field in the `bytes` unit (RFC 9110 §14.1.1, §14.2).
public struct ByteRanges: Sendable, Hashable {
    /// One range-spec as written.
    public enum Spec: Sendable, Hashable {
        /// `first-last` (`last` nil for `first-`).
        case from(first: Int, last: Int?)
        /// `-length`: the last `length` bytes.
        case suffix(length: Int)
    }

    /// The range-specs in the order written.
    public let specs: [Spec]

    /// Reads a `Range` field value; nil for another unit or a value that is not a valid ranges-specifier,
    /// which a recipient ignores (RFC 9110 §14.2).
    public init?(_ value: String) {
        var text = Substring(value).trimmingOWS()
        guard let equals = text.firstIndex(of: "="), text[..<equals].lowercased() == "bytes" else { return nil }
        text = text[text.index(after: equals)...]
        var specs: [Spec] = []
        for element in text.split(separator: ",", omittingEmptySubsequences: false) {
            let member = element.trimmingOWS()
            // Empty list members are allowed and ignored (RFC 9110 §5.6.1.2).
            if member.isEmpty { continue }
            guard let dash = member.firstIndex(of: "-") else { return nil }
            let first = member[..<dash]
            let last = member[member.index(after: dash)...]
            if first.isEmpty {
                guard let length = Self.position(last) else { return nil }
                specs.append(.suffix(length: length))
            } else {
                guard let start = Self.position(first) else { return nil }
                if last.isEmpty {
                    specs.append(.from(first: start, last: nil))
                } else {
                    guard let end = Self.position(last), end >= start else { return nil }
                    specs.append(.from(first: start, last: end))
                }
            }
        }
        guard !specs.isEmpty else { return nil }
        self.specs = specs
    }

    /// The request's `Range`, when it has one field line with a valid `bytes` value.
    public init?(_ request: HTTPRequest) {
        let values = request.headerFields[values: .range]
        guard values.count == 1 else { return nil }
        self.init(values[0])
    }

    /// A position (1*DIGIT); values too large for `Int` are clamped, as any of them lies past any body.
    private static func position(_ text: Substring) -> Int? {
        guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return Int(text) ?? Int.max
    }

    /// The satisfiable ranges for a representation of `length` bytes, in order, each as offsets of its first
    /// and last byte (RFC 9110 §14.1.1): a `first-` range whose first position is before the end, `last`
    /// clamped to the end; a suffix of non-zero length, clamped to the whole.
    public func satisfiable(length: Int) -> [ClosedRange<Int>] {
        specs.compactMap { spec in
            switch spec {
            case .from(let first, let last):
                guard first < length else { return nil }
                return first...min(last ?? Int.max, length - 1)
            case .suffix(let suffix):
                guard suffix > 0, length > 0 else { return nil }
                return max(0, length - suffix)...(length - 1)
            }
        }
    }
}

/// `If-Range` (RFC 9110 §13.1.5).
public enum IfRange {
    /// Whether `value` matches the representation whose header fields are `fields`, so that the range is
    /// served: an entity-tag by strong comparison with its `ETag` (a weak one never matches); an HTTP-date
    /// only when it equals its `Last-Modified` and that is a strong validator, at least 60 s before its `Date`
    /// (RFC 9110 §8.8.2.2). Anything else does not match, and the whole representation is sent.
    public static func matches(_ value: String, representation fields: HTTPFields) -> Bool {
        let condition = Substring(value).trimmingOWS()
        if condition.hasPrefix("\"") || condition.hasPrefix("W/") {
            guard !condition.hasPrefix("W/"), let etag = fields[.eTag].map({ Substring($0).trimmingOWS() }) else {
                return false
            }
            return !etag.hasPrefix("W/") && etag == condition
        }
        guard let date = HTTPDate.parse(String(condition)),
            let lastModified = fields[.lastModified].flatMap({ HTTPDate.parse($0) }),
            let responseDate = fields[.date].flatMap({ HTTPDate.parse($0) })
        else { return false }
        return date == lastModified && responseDate.timeIntervalSince(lastModified) >= 60
    }
}
