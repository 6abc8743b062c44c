import CacheCore
import Testing

/// Each string stands for its bytes: every scalar is one byte (U+0000...U+00FF).
private func latin1(_ string: String) -> [UInt8] {
    string.unicodeScalars.map { UInt8($0.value) }
}

private func matches(_ pattern: String, _ subject: String, caseInsensitive: Bool = false) -> Bool {
    Glob.matches(pattern: latin1(pattern), subject: latin1(subject), caseInsensitive: caseInsensitive)
}

@Suite("Glob matching")
struct GlobTests {
    @Test("a star matches any run of bytes, including none inside a subject")
    func starMatchesAnyRun() {
        #expect(matches("a*c", "ac"))
        #expect(matches("a*c", "abbbc"))
        #expect(!matches("a*c", "abbbd"))
    }

    @Test("an empty subject matches only the empty pattern, as in stringmatchlen")
    func emptySubjectMatchesOnlyEmptyPattern() {
        #expect(matches("", ""))
        #expect(!matches("*", ""))
        #expect(!matches("", "a"))
    }

    @Test("trailing stars match the end of the subject")
    func trailingStarsMatchEnd() {
        #expect(matches("abc***", "abc"))
    }

    @Test("a question mark matches exactly one byte, not one character")
    func questionMarkMatchesOneByte() {
        #expect(!Glob.matches(pattern: "?", subject: "é"))
        #expect(Glob.matches(pattern: "??", subject: "é"))
    }

    @Test("a bracket set matches one listed byte, a range, or with ^ anything else")
    func bracketSets() {
        #expect(matches("[xyz]", "y"))
        #expect(matches("[a-c0-9]", "7"))
        #expect(matches("[^a-c]", "d"))
        #expect(!matches("[^a-c]", "b"))
    }

    @Test("a backslash makes the next byte literal, inside and outside sets")
    func backslashEscapes() {
        #expect(matches("\\*", "*"))
        #expect(!matches("\\*", "x"))
        #expect(matches("[\\]]", "]"))
        #expect(matches("a\\", "a\\"))
    }

    @Test("without the case-insensitive flag, letters must match exactly")
    func caseSensitiveByDefault() {
        #expect(!matches("HELLO", "hello"))
        #expect(!matches("[A-Z]", "q"))
    }

    // The case-insensitive results below were checked with CONFIG GET, which
    // matches with nocase on redis-server 7.0.15 (for example `CONFIG GET "[o-q]ORT"`).
    @Test("with the case-insensitive flag, ASCII letters and ranges match either case")
    func caseInsensitiveLettersAndRanges() {
        #expect(matches("PORT*", "port", caseInsensitive: true))
        #expect(matches("[O-Q]ort", "port", caseInsensitive: true))
        #expect(matches("[o-q]ORT", "port", caseInsensitive: true))
        #expect(matches("\\Por?", "port", caseInsensitive: true))
        #expect(matches("[\\p]or?", "port", caseInsensitive: true))
    }

    @Test("with the case-insensitive flag, an escaped byte inside a set still matches exactly")
    func caseInsensitiveEscapeInSetIsExact() {
        #expect(!matches("[\\P]or?", "port", caseInsensitive: true))
    }

    @Test("with the case-insensitive flag, negated sets and reversed case ranges behave as in Redis")
    func caseInsensitiveNegationAndRangeQuirks() {
        #expect(!matches("p[^O]r?", "port", caseInsensitive: true))
        // The ends are ordered before lowering: Z-a becomes z..a, which holds nothing.
        #expect(!matches("[Z-a]or?", "port", caseInsensitive: true))
        #expect(!matches("[a-Z]or?", "port", caseInsensitive: true))
    }

    @Test("case-insensitive comparison leaves bytes beyond ASCII alone")
    func caseInsensitiveIsASCIIOnly() {
        #expect(!matches("\u{C9}", "\u{E9}", caseInsensitive: true))
        #expect(matches("\u{E9}", "\u{E9}", caseInsensitive: true))
    }

    @Test("a pattern buffer is read only within its bounds")
    func patternBufferIsReadWithinBounds() {
        // The set "[b" is unterminated within the three bytes given, even though the
        // surrounding memory continues with "c]".
        let storage = latin1("a[bc]")
        let subjectB = bytes("ab")
        let subjectC = bytes("ac")
        storage.withUnsafeBytes { all in
            let pattern = UnsafeRawBufferPointer(rebasing: all[0..<3])
            subjectB.withUnsafeBytes { #expect(Glob.matches(pattern: pattern, subject: $0)) }
            subjectC.withUnsafeBytes { #expect(!Glob.matches(pattern: pattern, subject: $0)) }
        }
    }

    @Test("hostile star patterns finish quickly", .timeLimit(.minutes(1)))
    func hostileStarPatternsFinishQuickly() {
        let subject = String(repeating: "a", count: 20_000)
        let pattern = String(repeating: "*a", count: 200) + "*b"
        #expect(!matches(pattern, subject))
        #expect(matches(pattern.dropLast().description + "a", subject))
    }

    @Test("patterns with thousands of stars are matched without recursion limits")
    func thousandsOfStars() {
        // redis-server answers "no match" beyond 1000 nested stars; this matcher answers correctly.
        let pattern = String(repeating: "a*", count: 5_000)
        let subject = String(repeating: "a", count: 5_000)
        #expect(matches(pattern, subject))
        #expect(!matches(pattern, String(repeating: "a", count: 4_999)))
    }

    @Test("the String overload matches UTF-8 bytes")
    func stringOverload() {
        #expect(Glob.matches(pattern: "user:*", subject: "user:Ø"))
        #expect(Glob.matches(pattern: "CACHE:[a-z]*", subject: "cache:x", caseInsensitive: true))
    }
}

/// Results of `KEYS pattern` on redis-server 7.0.15 holding exactly `keys`.
enum RedisKEYSReference {
    static let keys: [String] = [
        "", "a", "b", "ab", "abc", "aXc", "abbc", "hello", "hallo", "hxllo", "heeeello", "hllo", "A", "ABC",
        "-", "]", "[", "\\", "*", "?", "^", "a*c", "a?c", "a]", "a-", "x-y", "\u{FF}", "\u{C3}\u{A9}",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaab", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "foo:bar:baz", "foo::baz",
        "user:1000", "z",
    ]
    static let cases: [(pattern: String, matches: [String])] = [
        ("", [""]),
        // KEYS answers a lone "*" without matching (it lists every key, "" included);
        // the matcher itself, like stringmatchlen, does not match "" against "*".
        ("*", ["a", "b", "ab", "abc", "aXc", "abbc", "hello", "hallo", "hxllo", "heeeello", "hllo", "A", "ABC", "-", "]", "[", "\\", "*", "?", "^", "a*c", "a?c", "a]", "a-", "x-y", "\u{FF}", "\u{C3}\u{A9}", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaab", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "foo:bar:baz", "foo::baz", "user:1000", "z"]),
        ("**", ["a", "b", "ab", "abc", "aXc", "abbc", "hello", "hallo", "hxllo", "heeeello", "hllo", "A", "ABC", "-", "]", "[", "\\", "*", "?", "^", "a*c", "a?c", "a]", "a-", "x-y", "\u{FF}", "\u{C3}\u{A9}", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaab", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "foo:bar:baz", "foo::baz", "user:1000", "z"]),
        ("?", ["a", "b", "A", "-", "]", "[", "\\", "*", "?", "^", "\u{FF}", "z"]),
        ("??", ["ab", "a]", "a-", "\u{C3}\u{A9}"]),
        ("*?", ["a", "b", "ab", "abc", "aXc", "abbc", "hello", "hallo", "hxllo", "heeeello", "hllo", "A", "ABC", "-", "]", "[", "\\", "*", "?", "^", "a*c", "a?c", "a]", "a-", "x-y", "\u{FF}", "\u{C3}\u{A9}", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaab", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "foo:bar:baz", "foo::baz", "user:1000", "z"]),
        ("?*", ["a", "b", "ab", "abc", "aXc", "abbc", "hello", "hallo", "hxllo", "heeeello", "hllo", "A", "ABC", "-", "]", "[", "\\", "*", "?", "^", "a*c", "a?c", "a]", "a-", "x-y", "\u{FF}", "\u{C3}\u{A9}", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaab", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "foo:bar:baz", "foo::baz", "user:1000", "z"]),
        ("a", ["a"]),
        ("a*", ["a", "ab", "abc", "aXc", "abbc", "a*c", "a?c", "a]", "a-", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaab", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"]),
        ("*c", ["abc", "aXc", "abbc", "a*c", "a?c"]),
        ("a*c", ["abc", "aXc", "abbc", "a*c", "a?c"]),
        ("a?c", ["abc", "aXc", "a*c", "a?c"]),
        ("a??c", ["abbc"]),
        ("h?llo", ["hello", "hallo", "hxllo"]),
        ("h*llo", ["hello", "hallo", "hxllo", "heeeello", "hllo"]),
        ("h[ae]llo", ["hello", "hallo"]),
        ("h[^e]llo", ["hallo", "hxllo"]),
        ("h[a-b]llo", ["hallo"]),
        ("h[b-a]llo", ["hallo"]),
        ("[a-c]", ["a", "b"]),
        ("[c-a]", ["a", "b"]),
        ("[^a]", ["b", "A", "-", "]", "[", "\\", "*", "?", "^", "\u{FF}", "z"]),
        ("[^a-c]", ["A", "-", "]", "[", "\\", "*", "?", "^", "\u{FF}", "z"]),
        ("[]", []),
        ("[]]", []),
        ("[", []),
        ("[^", ["a", "b", "A", "-", "]", "[", "\\", "*", "?", "^", "\u{FF}", "z"]),
        ("[a", ["a"]),
        ("[ab", ["a", "b"]),
        ("[^a", ["b", "A", "-", "]", "[", "\\", "*", "?", "^", "\u{FF}", "z"]),
        ("a[", []),
        ("[a-]", ["a", "]", "^"]),
        ("a[-]", ["a-"]),
        ("[-a]", ["a", "-"]),
        ("[\\]]", ["]"]),
        ("[\\-]", ["-"]),
        ("[a\\-c]", ["a", "-"]),
        ("\\*", ["*"]),
        ("\\?", ["?"]),
        ("\\[", ["["]),
        ("a\\*c", ["a*c"]),
        ("a\\?c", ["a?c"]),
        ("\\", ["\\"]),
        ("a\\", []),
        ("\\a", ["a"]),
        ("\\\\", ["\\"]),
        ("[\\\\]", ["\\"]),
        ("*\\", ["\\"]),
        ("[*]", ["*"]),
        ("[?]", ["?"]),
        ("[\\^]", ["^"]),
        ("[\\]", ["]"]),
        ("A", ["A"]),
        ("a*C", []),
        ("[A-Z]*", ["A", "ABC"]),
        ("*a*a*a*a*a*b", ["aaaaaaaaaaaaaaaaaaaaaaaaaaaaab"]),
        ("*a*a*a*a*a*a*a*a*a*a*a*a*a*b", ["aaaaaaaaaaaaaaaaaaaaaaaaaaaaab"]),
        ("foo:*:baz", ["foo:bar:baz", "foo::baz"]),
        ("foo:?*:baz", ["foo:bar:baz"]),
        ("user:[0-9]*", ["user:1000"]),
        ("user:[0-9][0-9][0-9][0-9]", ["user:1000"]),
        ("*:*", ["foo:bar:baz", "foo::baz", "user:1000"]),
        ("\u{FF}", ["\u{FF}"]),
        ("?\u{A9}", ["\u{C3}\u{A9}"]),
        ("[\u{C3}]*", ["\u{C3}\u{A9}"]),
        ("\u{C3}?", ["\u{C3}\u{A9}"]),
        ("[^\u{FF}]", ["a", "b", "A", "-", "]", "[", "\\", "*", "?", "^", "z"]),
        ("a*b*c", ["abc", "abbc"]),
        ("*b*", ["b", "ab", "abc", "abbc", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaab", "foo:bar:baz", "foo::baz"]),
        ("a*bc", ["abc", "abbc"]),
        ("ab*c", ["abc", "abbc"]),
        ("*bb*", ["abbc"]),
        ("[abc][abc]*", ["ab", "abc", "abbc", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaab", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"]),
        ("*[", []),
        ("a*[", []),
        ("*]", ["]", "a]"]),
    ]
}

@Suite("Glob matching agrees with redis-server 7.0 KEYS")
struct GlobRedisReferenceTests {
    @Test("selects the same keys as KEYS", arguments: RedisKEYSReference.cases.indices)
    func selectsTheSameKeysAsKEYS(index: Int) {
        let (pattern, expected) = RedisKEYSReference.cases[index]
        let selected = RedisKEYSReference.keys.filter { matches(pattern, $0) }
        #expect(selected == expected, "pattern \(pattern.debugDescription)")
    }
}
