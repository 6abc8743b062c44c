public import HTTPTypes

/// The `Content-Range` of a single-part `206 Partial Content` response (RFC 9110 §14.4, §15.3.7.1): the range of
/// the selected representation it carries and that representation's complete length.
///
/// Only the `bytes first-last/complete-length` form is read: an unknown length (`*`), the unsatisfied-range form
/// (`*/length`, for a 416), another unit, or a range that does not fit in the length is nil, and a cache does
/// not store such a response (a multipart/byteranges 206 has no `Content-Range` of its own, so it is nil too).
public struct ContentRange: Sendable, Hashable {
    /// The offsets of the first and last byte carried.
    public let range: ClosedRange<Int>
    /// The complete length of the representation.
    public let completeLength: Int

    /// Reads a `Content-Range` value.
    public init?(_ value: String) {
        let text = Substring(value).trimmingOWS()
        guard let space = text.firstIndex(of: " "), text[..<space].lowercased() == "bytes" else { return nil }
        let spec = text[text.index(after: space)...].trimmingOWS()
        guard let slash = spec.firstIndex(of: "/"), let dash = spec[..<slash].firstIndex(of: "-"),
            let first = Self.position(spec[..<dash]),
            let last = Self.position(spec[spec.index(after: dash)..<slash]),
            let length = Self.position(spec[spec.index(after: slash)...]),
            first <= last, last < length
        else { return nil }
        range = first...last
        completeLength = length
    }

    /// The `Content-Range` of a response with `fields`, when it has one field line that ``init(_:)`` reads.
    public init?(_ fields: HTTPFields) {
        let values = fields[values: .contentRange]
        guard values.count == 1 else { return nil }
        self.init(values[0])
    }

    /// The field value for `range` of a representation of `completeLength` bytes.
    public static func value(_ range: ClosedRange<Int>, completeLength: Int) -> String {
        "bytes \(range.lowerBound)-\(range.upperBound)/\(completeLength)"
    }

    /// 1*DIGIT that fits in `Int`.
    private static func position(_ text: Substring) -> Int? {
        guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return Int(text)
    }
}

/// A set of byte offsets kept as sorted, disjoint ranges, adjacent ones joined: the parts of a representation a
/// cache holds from partial responses (RFC 9111 §3.3, §3.4).
public struct ByteRangeSet: Sendable, Hashable {
    /// The ranges, in order; no two overlap or touch.
    public private(set) var ranges: [ClosedRange<Int>] = []

    /// The empty set.
    public init() {}

    /// The union of `ranges`.
    public init(_ ranges: some Sequence<ClosedRange<Int>>) {
        for range in ranges { insert(range) }
    }

    /// Adds `range`, merging it with the ranges it overlaps or touches.
    public mutating func insert(_ range: ClosedRange<Int>) {
        var lower = range.lowerBound
        var upper = range.upperBound
        // The byte before `range` and the one after it (or its ends, at the ends of `Int`): ranges that reach
        // them touch `range`.
        let before = lower == .min ? lower : lower - 1
        let after = upper == .max ? upper : upper + 1
        // The first range that ends at or after the byte before `range`: those before it stay apart.
        let start = ranges.partitionPoint { $0.upperBound < before }
        var end = start
        while end < ranges.count, ranges[end].lowerBound <= after {
            lower = min(lower, ranges[end].lowerBound)
            upper = max(upper, ranges[end].upperBound)
            end += 1
        }
        ranges.replaceSubrange(start..<end, with: [lower...upper])
    }

    /// The range of the set that holds `position`, and the offset of its first byte in the concatenation of the
    /// set's bytes (in order); nil when `position` is not in the set.
    public func locate(_ position: Int) -> (range: ClosedRange<Int>, offset: Int)? {
        var offset = 0
        for range in ranges {
            if range.contains(position) { return (range, offset) }
            if range.lowerBound > position { return nil }
            offset += range.count
        }
        return nil
    }

    /// Whether every byte of `range` is in the set (it lies within one of its ranges).
    public func contains(_ range: ClosedRange<Int>) -> Bool {
        locate(range.lowerBound).map { $0.range.upperBound >= range.upperBound } ?? false
    }

    /// Whether the set holds every byte of a representation of `length` bytes, and no other.
    public func isComplete(length: Int) -> Bool {
        ranges.count == 1 && ranges[0] == 0...(length - 1)
    }

    /// The number of bytes in the set.
    public var byteCount: Int { ranges.reduce(0) { $0 + $1.count } }
}

/// When partial responses may be stored and combined (RFC 9111 §3.3, §3.4).
public enum PartialContent {
    /// The strong entity tag of a response with `fields`; nil without `ETag`, for a weak one or an invalid one.
    ///
    /// A cache combines partial responses only when both carry this strong validator and they match by the strong
    /// comparison (RFC 9111 §3.4, RFC 9110 §8.8.3.2); a `Last-Modified` that is a strong validator would also do,
    /// but this cache stores partial responses only with a strong `ETag`.
    public static func strongValidator(_ fields: HTTPFields) -> EntityTag? {
        guard let value = fields[.eTag], let tag = EntityTag(value), !tag.isWeak else { return nil }
        return tag
    }

    /// Whether the parts of responses with `stored` and `new` header fields are parts of the same representation:
    /// both have strong entity tags that match by the strong comparison (RFC 9111 §3.4).
    public static func combinable(stored: HTTPFields, new: HTTPFields) -> Bool {
        guard let stored = strongValidator(stored), let new = strongValidator(new) else { return false }
        return stored.stronglyMatches(new)
    }

    /// Whether a response with `fields` is a multipart/byteranges one (RFC 9110 §14.6): several parts, each with
    /// its own `Content-Range`, which this cache does not store (a top-level `Content-Range` on it is invalid).
    public static func isMultipart(_ fields: HTTPFields) -> Bool {
        guard let type = fields[.contentType] else { return false }
        return type.drop(while: { $0 == " " || $0 == "\t" }).lowercased().hasPrefix("multipart/byteranges")
    }

    /// The fields that describe a message's content bytes (`Content-Digest`, RFC 9530, and the obsolete
    /// `Content-MD5`): true of the one part they came with, not of another part or of the parts combined.
    /// `Repr-Digest`, which describes the whole representation, stays true and is kept.
    public static let contentDigestFields: [HTTPField.Name] = [
        HTTPField.Name("Content-Digest")!, HTTPField.Name("Content-MD5")!,
    ]

    /// `fields` without ``contentDigestFields``.
    public static func removeContentDigests(from fields: inout HTTPFields) {
        for name in contentDigestFields where fields[name] != nil { fields[name] = nil }
    }
}

extension Array {
    /// The index of the first element for which `belongs` is false, in an array where it is true of a prefix.
    fileprivate func partitionPoint(_ belongs: (Element) -> Bool) -> Int {
        var low = 0
        var high = count
        while low < high {
            let middle = (low + high) / 2
            if belongs(self[middle]) { low = middle + 1 } else { high = middle }
        }
        return low
    }
}
