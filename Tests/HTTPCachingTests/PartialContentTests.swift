import HTTPCaching
import HTTPTypes
import Testing

@Suite("Partial content: Content-Range and byte range sets (RFC 9110 §14.4, RFC 9111 §3.3–3.4)")
struct PartialContentTests {
    @Test("RFC 9110 §14.4: a single-part Content-Range with a known length is read",
          arguments: [
              ("bytes 0-499/1234", 0...499, 1234),
              ("bytes 1233-1233/1234", 1233...1233, 1234),
              (" Bytes  5-9/10 ", 5...9, 10),
          ] as [(String, ClosedRange<Int>, Int)])
    func contentRange(value: String, range: ClosedRange<Int>, length: Int) {
        let parsed = ContentRange(value)
        #expect(parsed?.range == range)
        #expect(parsed?.completeLength == length)
    }

    @Test("RFC 9110 §14.4: unknown length, unsatisfied-range, other units and impossible ranges are not read",
          arguments: [
              "bytes 0-499/*", "bytes */1234", "items 0-1/10", "bytes 5-4/10", "bytes 0-10/10", "bytes 0-1",
              "bytes=0-1/10", "bytes -1-2/10", "bytes 0-1/99999999999999999999999", "", "bytes a-b/10",
          ])
    func contentRangeInvalid(value: String) {
        #expect(ContentRange(value) == nil)
    }

    @Test("RFC 9110 §14.4: a response with two Content-Range field lines has none to read")
    func contentRangeTwice() {
        var fields = HTTPFields()
        fields.append(HTTPField(name: .contentRange, value: "bytes 0-1/10"))
        #expect(ContentRange(fields)?.range == 0...1)
        fields.append(HTTPField(name: .contentRange, value: "bytes 2-3/10"))
        #expect(ContentRange(fields) == nil)
        #expect(ContentRange.value(2...3, completeLength: 10) == "bytes 2-3/10")
    }

    @Test("RFC 9111 §3.4: inserted ranges stay sorted and disjoint; overlapping and adjacent ones merge")
    func merging() {
        var set = ByteRangeSet()
        set.insert(10...19)
        #expect(set.ranges == [10...19])
        set.insert(30...39)
        set.insert(0...4)
        #expect(set.ranges == [0...4, 10...19, 30...39])
        // Adjacent on the left: joined.
        set.insert(5...7)
        #expect(set.ranges == [0...7, 10...19, 30...39])
        // Overlapping two: one.
        set.insert(15...32)
        #expect(set.ranges == [0...7, 10...39])
        // Inside: unchanged.
        set.insert(11...12)
        #expect(set.ranges == [0...7, 10...39])
        // Adjacent on both sides: everything joined.
        set.insert(8...9)
        #expect(set.ranges == [0...39])
        #expect(set.byteCount == 40)
        #expect(ByteRangeSet([50...60, 0...1, 40...49, 2...3]).ranges == [0...3, 40...60])
    }

    @Test("RFC 9111 §3.3: coverage of a range, offsets of the held bytes, and completeness")
    func coverage() {
        let set = ByteRangeSet([0...3, 10...19])
        #expect(set.contains(0...3))
        #expect(set.contains(12...19))
        #expect(!set.contains(3...4))
        #expect(!set.contains(8...12))
        #expect(!set.contains(18...20))
        #expect(!set.contains(25...26))
        #expect(set.locate(12)?.range == 10...19)
        #expect(set.locate(12)?.offset == 4)
        #expect(set.locate(2)?.offset == 0)
        #expect(set.locate(5) == nil)
        #expect(set.locate(20) == nil)
        #expect(!set.isComplete(length: 20))
        #expect(ByteRangeSet([0...9]).isComplete(length: 10))
        #expect(!ByteRangeSet([0...9]).isComplete(length: 11))
        #expect(!ByteRangeSet().isComplete(length: 1))
    }

    @Test("RFC 9111 §3.4: parts combine only under strong entity tags that match strongly")
    func combinable() {
        func fields(_ etag: String?) -> HTTPFields {
            var fields = HTTPFields()
            if let etag { fields[.eTag] = etag }
            return fields
        }
        #expect(PartialContent.combinable(stored: fields("\"a\""), new: fields("\"a\"")))
        #expect(!PartialContent.combinable(stored: fields("\"a\""), new: fields("\"b\"")))
        #expect(!PartialContent.combinable(stored: fields("W/\"a\""), new: fields("W/\"a\"")))
        #expect(!PartialContent.combinable(stored: fields("\"a\""), new: fields("W/\"a\"")))
        #expect(!PartialContent.combinable(stored: fields(nil), new: fields(nil)))
        #expect(PartialContent.strongValidator(fields("\"x\""))?.opaqueTag == "\"x\"")
        #expect(PartialContent.strongValidator(fields("W/\"x\"")) == nil)
        #expect(PartialContent.strongValidator(fields("x")) == nil)
    }
}
