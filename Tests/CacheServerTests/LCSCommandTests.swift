import CacheServer
import Testing

/// LCS's computation on its own. Replies, tie-breaking and errors are compared with Redis's by the differential
/// corpus (lcs.corpus).
@Suite("LCS")
struct LCSCommandTests {
    @Test("The subsequence of Redis's documented example, its runs, and its length by two rows of the table")
    func documentedExample() throws {
        let (common, ranges) = try #require(LCSCommand.Table<UInt16>(Array("ohmytext".utf8), Array("mynewtext".utf8)))
            .walkBack(minimumMatch: 0)
        #expect(String(decoding: common, as: UTF8.self) == "mytext")
        #expect(ranges == [
            LCSCommand.Range(firstStart: 4, firstEnd: 7, secondStart: 5, secondEnd: 8),
            LCSCommand.Range(firstStart: 2, firstEnd: 3, secondStart: 0, secondEnd: 1),
        ])
        #expect(LCSCommand.length(Array("ohmytext".utf8), Array("mynewtext".utf8)) == 6)
    }

    @Test("16- and 32-bit tables and the two-row length agree; the subsequence is common to both strings")
    func cellWidthsAgree() throws {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<300 {
            let alphabet = [UInt8](Array("abcd".utf8).prefix(Int.random(in: 1...4, using: &generator)))
            func string() -> [UInt8] {
                (0..<Int.random(in: 0...60, using: &generator)).map { _ in alphabet.randomElement(using: &generator)! }
            }
            let (a, b) = (string(), string())
            let narrow = try #require(LCSCommand.Table<UInt16>(a, b)).walkBack(minimumMatch: 2)
            let wide = try #require(LCSCommand.Table<UInt32>(a, b)).walkBack(minimumMatch: 2)
            #expect(narrow.common == wide.common && narrow.ranges == wide.ranges)
            #expect(LCSCommand.length(a, b) == narrow.common.count)
            #expect(isSubsequence(narrow.common, of: a) && isSubsequence(narrow.common, of: b))
            for range in narrow.ranges {
                #expect(range.length >= 2)
                #expect(a[range.firstStart...range.firstEnd] == b[range.secondStart...range.secondEnd])
            }
        }
    }

    private func isSubsequence(_ small: [UInt8], of large: [UInt8]) -> Bool {
        var i = 0
        for byte in large where i < small.count && small[i] == byte { i += 1 }
        return i == small.count
    }
}
