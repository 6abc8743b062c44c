import HTTPCaching
import HTTPTypes
import Testing

@Suite("Byte ranges and If-Range (RFC 9110 §14, §13.1.5)")
struct RangesTests {
    @Test("RFC 9110 §14.1.1: byte ranges parse to their specs",
          arguments: [
              ("bytes=0-499", [ByteRanges.Spec.from(first: 0, last: 499)]),
              ("bytes=500-", [.from(first: 500, last: nil)]),
              ("bytes=-500", [.suffix(length: 500)]),
              ("BYTES = 1-2", nil),
              ("Bytes=1-2, 4-5 ,,-1", [.from(first: 1, last: 2), .from(first: 4, last: 5), .suffix(length: 1)]),
              ("bytes=0-99999999999999999999999", [.from(first: 0, last: Int.max)]),
          ] as [(String, [ByteRanges.Spec]?)])
    func parse(value: String, specs: [ByteRanges.Spec]?) {
        #expect(ByteRanges(value)?.specs == specs)
    }

    @Test("RFC 9110 §14.2: an invalid ranges-specifier or another unit is no range",
          arguments: ["bytes=", "bytes=5-1", "bytes=a-b", "bytes=1", "bytes=--1", "items=0-1", "bytes 0-1", "bytes=1-2-3", "bytes=,"])
    func invalid(value: String) {
        #expect(ByteRanges(value) == nil)
    }

    @Test("RFC 9110 §14.1.1: which ranges a representation satisfies")
    func satisfiable() {
        func ranges(_ value: String, _ length: Int) -> [ClosedRange<Int>] { ByteRanges(value)!.satisfiable(length: length) }
        #expect(ranges("bytes=0-499", 10_000) == [0...499])
        #expect(ranges("bytes=9500-", 10_000) == [9500...9999])
        #expect(ranges("bytes=-500", 10_000) == [9500...9999])
        #expect(ranges("bytes=0-99999", 100) == [0...99])
        #expect(ranges("bytes=-500", 100) == [0...99])
        #expect(ranges("bytes=100-", 100) == [])
        #expect(ranges("bytes=-0", 100) == [])
        #expect(ranges("bytes=0-0,-1", 100) == [0...0, 99...99])
        #expect(ranges("bytes=200-300, 5-6", 100) == [5...6])
    }

    @Test("RFC 9110 §13.1.5: If-Range matches a strong ETag by strong comparison, and a date only when strong")
    func ifRange() {
        let etagged = fields([("ETag", "\"v1\"")])
        #expect(IfRange.matches("\"v1\"", representation: etagged))
        #expect(!IfRange.matches("\"v2\"", representation: etagged))
        #expect(!IfRange.matches("W/\"v1\"", representation: etagged))
        #expect(!IfRange.matches("W/\"v1\"", representation: fields([("ETag", "W/\"v1\"")])))
        #expect(!IfRange.matches("\"v1\"", representation: fields([("ETag", "W/\"v1\"")])))
        #expect(!IfRange.matches("\"v1\"", representation: fields([])))

        let modified = "Mon, 01 Jan 2024 00:00:00 GMT"
        let strong = fields([("Last-Modified", modified), ("Date", "Mon, 01 Jan 2024 00:01:00 GMT")])
        let weak = fields([("Last-Modified", modified), ("Date", "Mon, 01 Jan 2024 00:00:59 GMT")])
        #expect(IfRange.matches(modified, representation: strong))
        #expect(!IfRange.matches("Mon, 01 Jan 2024 00:00:01 GMT", representation: strong))
        #expect(!IfRange.matches(modified, representation: weak))
        #expect(!IfRange.matches(modified, representation: fields([("Last-Modified", modified)])))
        #expect(!IfRange.matches("yesterday", representation: strong))
    }
}
