/// Glob-style pattern matching with the semantics of Redis's `stringmatchlen`,
/// as used by `KEYS`, `SCAN ... MATCH`, `PSUBSCRIBE` and `CONFIG GET`.
///
/// Patterns and subjects are raw bytes; nothing is decoded or normalised.
///
/// - `*` matches any sequence of bytes, including none.
/// - `?` matches exactly one byte.
/// - `[abc]` matches one byte from the set; `[^abc]` one byte not in it;
///   `[a-z]` one byte in the inclusive range (the ends may be given in either order).
///   Inside brackets `\x` matches `x` exactly. A set that is never closed
///   extends to the end of the pattern.
/// - `\x` matches the byte `x` literally; a trailing lone `\` matches a backslash.
/// - Every other byte matches itself, or, when `caseInsensitive` is set, itself
///   modulo ASCII case.
///
/// Like Redis, an empty subject matches only the empty pattern (so `*` does not
/// match an empty subject; `KEYS *` special-cases that before matching).
///
/// Unlike Redis, matching is iterative: it never recurses, never allocates, and
/// takes at most O(pattern length × subject length) steps however many `*` the
/// pattern holds, so hostile patterns such as `*a*a*a*a*a*b` cannot exhaust the
/// stack or run in exponential time. Redis gives up (no match) on patterns with
/// more than 1000 nested `*`; this matcher just answers correctly.
///
/// Bytes are compared as unsigned values, so a range such as `[a-\xff]` covers
/// every byte from `a` to `0xff`, as Redis does on platforms where `char` is unsigned.
package enum Glob {
    private static let star = UInt8(ascii: "*")
    private static let question = UInt8(ascii: "?")
    private static let openBracket = UInt8(ascii: "[")
    private static let closeBracket = UInt8(ascii: "]")
    private static let caret = UInt8(ascii: "^")
    private static let dash = UInt8(ascii: "-")
    private static let backslash = UInt8(ascii: "\\")

    /// Whether `subject` matches the glob `pattern`.
    ///
    /// - Parameters:
    ///   - pattern: The glob pattern, as raw bytes.
    ///   - subject: The bytes to test, for example a key.
    ///   - caseInsensitive: Compare ASCII letters without regard to case (Redis's `nocase`).
    /// - Returns: `true` if the whole subject matches the whole pattern.
    package static func matches(
        pattern: UnsafeRawBufferPointer,
        subject: UnsafeRawBufferPointer,
        caseInsensitive: Bool = false
    ) -> Bool {
        let patternCount = pattern.count
        let subjectCount = subject.count
        if subjectCount == 0 {
            return patternCount == 0
        }
        var p = 0
        var s = 0
        // Where to resume after the most recent `*`: the pattern index just past it,
        // and the subject index it was last tried at. Each token other than `*`
        // consumes exactly one byte, so backtracking to the latest `*` suffices.
        var resumePattern = -1
        var resumeSubject = 0
        while s < subjectCount {
            if p < patternCount && pattern[p] == star {
                while p < patternCount && pattern[p] == star { p += 1 }
                if p == patternCount { return true }
                resumePattern = p
                resumeSubject = s
                continue
            }
            if p < patternCount {
                let (matched, next) = matchToken(
                    pattern, at: p, byte: subject[s], caseInsensitive: caseInsensitive)
                if matched {
                    p = next
                    s += 1
                    continue
                }
            }
            guard resumePattern >= 0 else { return false }
            resumeSubject += 1
            s = resumeSubject
            p = resumePattern
        }
        while p < patternCount && pattern[p] == star { p += 1 }
        return p == patternCount
    }

    /// Whether `subject` matches the glob `pattern`; see ``matches(pattern:subject:caseInsensitive:)-(UnsafeRawBufferPointer,_,_)``.
    package static func matches(pattern: [UInt8], subject: [UInt8], caseInsensitive: Bool = false) -> Bool {
        pattern.withUnsafeBytes { patternBytes in
            subject.withUnsafeBytes { subjectBytes in
                matches(pattern: patternBytes, subject: subjectBytes, caseInsensitive: caseInsensitive)
            }
        }
    }

    /// Whether the UTF-8 bytes of `subject` match the UTF-8 bytes of the glob `pattern`.
    ///
    /// `?` and bracket sets match single bytes, not characters, as in Redis.
    package static func matches(pattern: String, subject: String, caseInsensitive: Bool = false) -> Bool {
        var pattern = pattern
        var subject = subject
        return pattern.withUTF8 { patternBytes in
            subject.withUTF8 { subjectBytes in
                matches(
                    pattern: UnsafeRawBufferPointer(patternBytes),
                    subject: UnsafeRawBufferPointer(subjectBytes),
                    caseInsensitive: caseInsensitive)
            }
        }
    }

    /// Matches the single-byte token (anything but `*`) starting at `start` against `byte`.
    /// Returns whether it matched and the index just past the token.
    private static func matchToken(
        _ pattern: UnsafeRawBufferPointer, at start: Int, byte: UInt8, caseInsensitive: Bool
    ) -> (matched: Bool, next: Int) {
        let count = pattern.count
        switch pattern[start] {
        case question:
            return (true, start + 1)
        case openBracket:
            return matchSet(pattern, openingAt: start, byte: byte, caseInsensitive: caseInsensitive)
        case backslash where start + 1 < count:
            return (equal(pattern[start + 1], byte, caseInsensitive), start + 2)
        case let literal:
            return (equal(literal, byte, caseInsensitive), start + 1)
        }
    }

    /// Matches a bracket set, following `stringmatchlen`'s reading of it byte for byte,
    /// including its handling of unterminated sets and ranges that end in `]`.
    private static func matchSet(
        _ pattern: UnsafeRawBufferPointer, openingAt start: Int, byte: UInt8, caseInsensitive: Bool
    ) -> (matched: Bool, next: Int) {
        let count = pattern.count
        var i = start + 1
        let negated = i < count && pattern[i] == caret
        if negated { i += 1 }
        var matched = false
        while true {
            if i >= count {
                // Unterminated: the set runs to the end of the pattern.
                break
            }
            let current = pattern[i]
            if current == backslash && count - i >= 2 {
                i += 1
                // Escaped bytes inside a set compare exactly, even without case sensitivity.
                if pattern[i] == byte { matched = true }
            } else if current == closeBracket {
                i += 1
                break
            } else if count - i >= 3 && pattern[i + 1] == dash {
                var low = current
                var high = pattern[i + 2]
                var value = byte
                if low > high { swap(&low, &high) }
                if caseInsensitive {
                    low = lowercased(low)
                    high = lowercased(high)
                    value = lowercased(value)
                }
                if value >= low && value <= high { matched = true }
                i += 2
            } else if equal(current, byte, caseInsensitive) {
                matched = true
            }
            i += 1
        }
        return (matched != negated, i)
    }

    @inline(__always)
    private static func equal(_ a: UInt8, _ b: UInt8, _ caseInsensitive: Bool) -> Bool {
        caseInsensitive ? lowercased(a) == lowercased(b) : a == b
    }

    @inline(__always)
    private static func lowercased(_ byte: UInt8) -> UInt8 {
        byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte + 32 : byte
    }
}
