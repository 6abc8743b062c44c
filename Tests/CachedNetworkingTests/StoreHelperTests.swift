import Testing

@testable import CachedNetworking

/// The small conversions the stores share.
struct StoreHelperTests {
    @Test func ttlsBecomeWholeMillisecondsRoundedUp() {
        #expect(Duration.milliseconds(150).storeMilliseconds == 150)
        #expect(Duration.microseconds(1500).storeMilliseconds == 2)
        #expect(Duration.nanoseconds(1).storeMilliseconds == 1)
        #expect(Duration.zero.storeMilliseconds == 1)
        #expect(Duration.seconds(-5).storeMilliseconds == 1)
        #expect(Duration.seconds(86_400).storeMilliseconds == 86_400_000)
        #expect(Duration.seconds(Int64.max).storeMilliseconds > 0)
    }

    @Test func nanosecondsSaturate() {
        #expect(Duration.milliseconds(3).storeNanoseconds == 3_000_000)
        #expect(Duration.seconds(Int64.max).storeNanoseconds == .max)
        #expect(Duration.seconds(Int64.min).storeNanoseconds == .min)
    }

    @Test func integersParseAsRedisParsesThem() {
        func parse(_ s: String) -> Int64? { parseRedisInteger(Array(s.utf8)) }
        #expect(parse("0") == 0)
        #expect(parse("42") == 42)
        #expect(parse("-42") == -42)
        #expect(parse("9223372036854775807") == .max)
        #expect(parse("-9223372036854775808") == .min)
        for bad in ["", "-", "-0", "007", "+1", " 1", "1 ", "1.0", "9223372036854775808", "-9223372036854775809", "abc"] {
            #expect(parse(bad) == nil, "\(bad.debugDescription)")
        }
    }

    @Test func keysCompareByBytes() {
        #expect(StoreKey("caf\u{E9}") != StoreKey("cafe\u{301}"))
        #expect(StoreKey("abc") == StoreKey("abc"))
        #expect(Set([StoreKey("caf\u{E9}"), StoreKey("cafe\u{301}"), StoreKey("caf\u{E9}")]).count == 2)
        #expect(StoreKey("") == StoreKey(""))
    }
}
