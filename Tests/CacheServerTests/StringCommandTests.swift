import CacheCore
import CacheServer
import RESP
import Testing

@Suite("String commands")
struct StringCommandTests {
    // MARK: GET / SET

    @Test("SET then GET returns the value; GET of a missing key is nil")
    func setGet() {
        let h = Harness()
        #expect(h.run("SET", "k", "v") == .ok)
        #expect(h.run("GET", "k") == .bulk("v"))
        #expect(h.run("GET", "missing") == .nullBulkString)
    }

    @Test("Binary values and keys round-trip byte for byte")
    func binarySafe() {
        let h = Harness()
        let key: [UInt8] = [0, 0xFF, 13, 10]
        let value: [UInt8] = [0, 1, 0x80, 13, 10, 0]
        #expect(h.run([Array("SET".utf8), key, value]) == .ok)
        #expect(h.run([Array("GET".utf8), key]).bytes == value)
        #expect(h.run([Array("SET".utf8), [], []]) == .ok)
        #expect(h.run([Array("GET".utf8), []]).bytes == [])
    }

    @Test("SET NX sets only a missing key, SET XX only an existing one")
    func setNXXX() {
        let h = Harness()
        #expect(h.run("SET", "k", "1", "XX") == .nullBulkString)
        #expect(h.run("EXISTS", "k") == .integer(0))
        #expect(h.run("SET", "k", "1", "NX") == .ok)
        #expect(h.run("SET", "k", "2", "nx") == .nullBulkString)
        #expect(h.run("GET", "k") == .bulk("1"))
        #expect(h.run("SET", "k", "3", "XX") == .ok)
        #expect(h.run("GET", "k") == .bulk("3"))
    }

    @Test("SET GET returns the old value (nil when missing) and sets the new one, also with NX/XX")
    func setGetOption() {
        let h = Harness()
        #expect(h.run("SET", "k", "v", "GET") == .nullBulkString)
        #expect(h.run("SET", "k", "w", "GET") == .bulk("v"))
        #expect(h.run("SET", "k", "x", "NX", "GET") == .bulk("w"))
        #expect(h.run("GET", "k") == .bulk("w"))
        #expect(h.run("SET", "nk", "x", "XX", "GET") == .nullBulkString)
        #expect(h.run("EXISTS", "nk") == .integer(0))
        #expect(h.run("SET", "k", "y", "XX", "GET") == .bulk("w"))
        #expect(h.run("GET", "k") == .bulk("y"))
    }

    @Test("SET EX / PX / EXAT / PXAT set the TTL; the key expires when the clock passes it")
    func setExpiryOptions() {
        let h = Harness()
        #expect(h.run("SET", "ex", "v", "EX", "10") == .ok)
        #expect(h.run("PTTL", "ex") == .integer(10_000))
        #expect(h.run("SET", "px", "v", "PX", "1500") == .ok)
        #expect(h.run("PTTL", "px") == .integer(1_500))
        #expect(h.run("SET", "exat", "v", "EXAT", String(h.now / 1000 + 20)) == .ok)
        #expect(h.run("PEXPIRETIME", "exat") == .integer(Int((h.now / 1000 + 20) * 1000)))
        #expect(h.run("SET", "pxat", "v", "PXAT", String(h.now + 2_500)) == .ok)
        #expect(h.run("PEXPIRETIME", "pxat") == .integer(Int(h.now + 2_500)))
        h.advance(1_500)
        #expect(h.run("GET", "px") == .bulk("v"))
        h.advance(1)
        #expect(h.run("GET", "px") == .nullBulkString)
        #expect(h.run("GET", "ex") == .bulk("v"))
        h.advance(10_000)
        #expect(h.run("GET", "ex") == .nullBulkString)
    }

    @Test("A repeated EX takes the last value")
    func repeatedEX() {
        let h = Harness()
        #expect(h.run("SET", "k", "v", "EX", "10", "EX", "20") == .ok)
        #expect(h.run("TTL", "k") == .integer(20))
    }

    @Test("SET without options clears the TTL; SET KEEPTTL keeps it")
    func setKeepTTL() {
        let h = Harness()
        h.run("SET", "k", "v", "EX", "100")
        #expect(h.run("SET", "k", "w", "KEEPTTL") == .ok)
        #expect(h.run("TTL", "k") == .integer(100))
        #expect(h.run("GET", "k") == .bulk("w"))
        #expect(h.run("SET", "k", "x") == .ok)
        #expect(h.run("TTL", "k") == .integer(-1))
    }

    @Test("SET with an EXAT/PXAT in the past stores a key that is already gone")
    func setPastAbsoluteTime() {
        let h = Harness()
        #expect(h.run("SET", "k", "v", "EXAT", "1") == .ok)
        #expect(h.run("GET", "k") == .nullBulkString)
        #expect(h.run("SET", "k", "v", "PXAT", "1") == .ok)
        #expect(h.run("EXISTS", "k") == .integer(0))
    }

    @Test("SET rejects illegal option combinations with a syntax error", arguments: [
        ["NX", "XX"], ["XX", "NX"], ["EX", "10", "PX", "100"], ["PX", "1", "EXAT", "5"], ["EXAT", "5", "PXAT", "5"],
        ["KEEPTTL", "EX", "10"], ["EX", "10", "KEEPTTL"], ["PERSIST"], ["EX"], ["FOO"], ["GET", "GET", "BAR"],
    ])
    func setSyntaxErrors(options: [String]) {
        let h = Harness()
        h.run("SET", "k", "old")
        #expect(h.run((["SET", "k", "v"] + options).map { Array($0.utf8) }) == .error("ERR syntax error"))
        #expect(h.run("GET", "k") == .bulk("old"))
    }

    @Test("SET rejects expire times that are not positive or that overflow", arguments: [
        ["EX", "0"], ["EX", "-1"], ["PX", "0"], ["PXAT", "-5"], ["EXAT", "0"], ["PX", "9223372036854775807"],
        ["EX", "9223372036854775"],
    ])
    func setInvalidExpire(options: [String]) {
        let h = Harness()
        #expect(h.run((["SET", "k", "v"] + options).map { Array($0.utf8) }) == .error("ERR invalid expire time in 'set' command"))
        #expect(h.run("EXISTS", "k") == .integer(0))
    }

    @Test("SET with a non-integer expire time is a 'not an integer' error")
    func setExpireNotInteger() {
        let h = Harness()
        #expect(h.run("SET", "k", "v", "EX", "abc") == .error("ERR value is not an integer or out of range"))
        #expect(h.run("SET", "k", "v", "PX", "1.5") == .error("ERR value is not an integer or out of range"))
    }

    // MARK: SETNX / SETEX / PSETEX / GETSET

    @Test("SETNX replies 1 when it sets and 0 when the key exists")
    func setnx() {
        let h = Harness()
        #expect(h.run("SETNX", "k", "a") == .integer(1))
        #expect(h.run("SETNX", "k", "b") == .integer(0))
        #expect(h.run("GET", "k") == .bulk("a"))
    }

    @Test("SETNX treats an expired key as missing")
    func setnxExpired() {
        let h = Harness()
        h.run("SET", "k", "a", "PX", "10")
        h.advance(11)
        #expect(h.run("SETNX", "k", "b") == .integer(1))
        #expect(h.run("TTL", "k") == .integer(-1))
    }

    @Test("SETEX and PSETEX set value and TTL")
    func setexPsetex() {
        let h = Harness()
        #expect(h.run("SETEX", "a", "10", "v") == .ok)
        #expect(h.run("TTL", "a") == .integer(10))
        #expect(h.run("PSETEX", "b", "250", "w") == .ok)
        #expect(h.run("PTTL", "b") == .integer(250))
        h.advance(251)
        #expect(h.run("GET", "b") == .nullBulkString)
        #expect(h.run("GET", "a") == .bulk("v"))
    }

    @Test("SETEX and PSETEX reject bad times with their own command name")
    func setexErrors() {
        let h = Harness()
        #expect(h.run("SETEX", "a", "0", "v") == .error("ERR invalid expire time in 'setex' command"))
        #expect(h.run("SETEX", "a", "-1", "v") == .error("ERR invalid expire time in 'setex' command"))
        #expect(h.run("PSETEX", "a", "0", "v") == .error("ERR invalid expire time in 'psetex' command"))
        #expect(h.run("SETEX", "a", "abc", "v") == .error("ERR value is not an integer or out of range"))
        #expect(h.run("EXISTS", "a") == .integer(0))
    }

    @Test("GETSET returns the old value, sets the new one and clears the TTL")
    func getset() {
        let h = Harness()
        #expect(h.run("GETSET", "k", "a") == .nullBulkString)
        h.run("EXPIRE", "k", "100")
        #expect(h.run("GETSET", "k", "b") == .bulk("a"))
        #expect(h.run("GET", "k") == .bulk("b"))
        #expect(h.run("TTL", "k") == .integer(-1))
    }

    // MARK: MGET / MSET / MSETNX

    @Test("MGET returns values in order with nil for missing and expired keys")
    func mget() {
        let h = Harness()
        h.run("MSET", "a", "1", "b", "2")
        h.run("SET", "c", "3", "PX", "5")
        h.advance(6)
        #expect(h.run("MGET", "a", "missing", "b", "c", "a") == .array([
            .bulk("1"), .nullBulkString, .bulk("2"), .nullBulkString, .bulk("1"),
        ]))
    }

    @Test("MSET sets every pair, the last one winning for a repeated key, and clears TTLs")
    func mset() {
        let h = Harness()
        h.run("SET", "a", "old", "EX", "100")
        #expect(h.run("MSET", "a", "1", "b", "2", "a", "3") == .ok)
        #expect(h.run("MGET", "a", "b") == .bulks("3", "2"))
        #expect(h.run("TTL", "a") == .integer(-1))
    }

    @Test("MSET and MSETNX need key/value pairs")
    func msetArity() {
        let h = Harness()
        #expect(h.run("MSET", "a") == .error("ERR wrong number of arguments for 'mset' command"))
        #expect(h.run("MSET", "a", "1", "b") == .error("ERR wrong number of arguments for 'mset' command"))
        #expect(h.run("MSETNX", "a", "1", "b") == .error("ERR wrong number of arguments for 'msetnx' command"))
        #expect(h.run("DBSIZE") == .integer(0))
    }

    @Test("MSETNX sets all keys only when none exists")
    func msetnx() {
        let h = Harness()
        #expect(h.run("MSETNX", "a", "1", "b", "2") == .integer(1))
        #expect(h.run("MSETNX", "c", "3", "b", "x") == .integer(0))
        #expect(h.run("EXISTS", "c") == .integer(0))
        #expect(h.run("GET", "b") == .bulk("2"))
        #expect(h.run("MSETNX", "d", "1", "d", "2") == .integer(1))
        #expect(h.run("GET", "d") == .bulk("2"))
    }

    // MARK: GETDEL / GETEX

    @Test("GETDEL returns the value and removes the key")
    func getdel() {
        let h = Harness()
        h.run("SET", "k", "v")
        #expect(h.run("GETDEL", "k") == .bulk("v"))
        #expect(h.run("EXISTS", "k") == .integer(0))
        #expect(h.run("GETDEL", "k") == .nullBulkString)
    }

    @Test("GETEX without options returns the value and keeps the TTL")
    func getexPlain() {
        let h = Harness()
        h.run("SET", "k", "v", "EX", "50")
        #expect(h.run("GETEX", "k") == .bulk("v"))
        #expect(h.run("TTL", "k") == .integer(50))
        #expect(h.run("GETEX", "missing") == .nullBulkString)
    }

    @Test("GETEX EX / PX / EXAT / PXAT set the TTL, PERSIST removes it")
    func getexOptions() {
        let h = Harness()
        h.run("SET", "k", "v")
        #expect(h.run("GETEX", "k", "EX", "30") == .bulk("v"))
        #expect(h.run("TTL", "k") == .integer(30))
        #expect(h.run("GETEX", "k", "PX", "1200") == .bulk("v"))
        #expect(h.run("PTTL", "k") == .integer(1_200))
        #expect(h.run("GETEX", "k", "EXAT", String(h.now / 1000 + 100)) == .bulk("v"))
        #expect(h.run("EXPIRETIME", "k") == .integer(Int(h.now / 1000 + 100)))
        #expect(h.run("GETEX", "k", "PXAT", String(h.now + 777)) == .bulk("v"))
        #expect(h.run("PEXPIRETIME", "k") == .integer(Int(h.now + 777)))
        #expect(h.run("GETEX", "k", "PERSIST") == .bulk("v"))
        #expect(h.run("TTL", "k") == .integer(-1))
    }

    @Test("GETEX with an EXAT/PXAT in the past returns the value and deletes the key")
    func getexPastTime() {
        let h = Harness()
        h.run("SET", "k", "v")
        #expect(h.run("GETEX", "k", "EXAT", "1") == .bulk("v"))
        #expect(h.run("EXISTS", "k") == .integer(0))
        h.run("SET", "k", "v")
        #expect(h.run("GETEX", "k", "PXAT", String(h.now)) == .bulk("v"))
        #expect(h.run("EXISTS", "k") == .integer(0))
    }

    @Test("GETEX rejects SET-only and conflicting options", arguments: [
        ["PERSIST", "EX", "10"], ["EX", "10", "PX", "10"], ["KEEPTTL"], ["NX"], ["GET"], ["EX", "10", "PERSIST"],
    ])
    func getexSyntax(options: [String]) {
        let h = Harness()
        h.run("SET", "k", "v", "EX", "40")
        #expect(h.run((["GETEX", "k"] + options).map { Array($0.utf8) }) == .error("ERR syntax error"))
        #expect(h.run("TTL", "k") == .integer(40))
    }

    @Test("GETEX checks the expire time only for an existing key")
    func getexInvalidTime() {
        let h = Harness()
        #expect(h.run("GETEX", "missing", "EX", "-5") == .nullBulkString)
        h.run("SET", "k", "v")
        #expect(h.run("GETEX", "k", "EX", "-5") == .error("ERR invalid expire time in 'getex' command"))
        #expect(h.run("GETEX", "k", "EX", "0") == .error("ERR invalid expire time in 'getex' command"))
        #expect(h.run("TTL", "k") == .integer(-1))
    }

    // MARK: counters

    @Test("INCR / DECR / INCRBY / DECRBY count from a missing key as 0")
    func counters() {
        let h = Harness()
        #expect(h.run("INCR", "n") == .integer(1))
        #expect(h.run("INCRBY", "n", "41") == .integer(42))
        #expect(h.run("DECR", "n") == .integer(41))
        #expect(h.run("DECRBY", "n", "50") == .integer(-9))
        #expect(h.run("GET", "n") == .bulk("-9"))
        #expect(h.run("DECRBY", "m", "5") == .integer(-5))
        #expect(h.run("INCRBY", "p", "-3") == .integer(-3))
    }

    @Test("Counters keep the key's TTL")
    func countersKeepTTL() {
        let h = Harness()
        h.run("SET", "n", "1", "EX", "100")
        h.run("INCR", "n")
        #expect(h.run("TTL", "n") == .integer(100))
        #expect(h.run("GET", "n") == .bulk("2"))
    }

    @Test("Counters refuse values that are not 64-bit integers in Redis's strict syntax", arguments: [
        "1.5", " 1", "1 ", "abc", "", "99999999999999999999", "+1", "01", "-0",
    ])
    func countersRejectNonIntegers(value: String) {
        let h = Harness()
        h.run("SET", "n", value)
        #expect(h.run("INCR", "n") == .error("ERR value is not an integer or out of range"))
        #expect(h.run("GET", "n") == .bulk(value))
    }

    @Test("Counter increments that are not integers are refused")
    func counterArgumentNotInteger() {
        let h = Harness()
        #expect(h.run("INCRBY", "n", "abc") == .error("ERR value is not an integer or out of range"))
        #expect(h.run("DECRBY", "n", "1.0") == .error("ERR value is not an integer or out of range"))
        #expect(h.run("EXISTS", "n") == .integer(0))
    }

    @Test("Counters refuse to overflow and leave the value alone")
    func counterOverflow() {
        let h = Harness()
        h.run("SET", "max", "9223372036854775807")
        #expect(h.run("INCR", "max") == .error("ERR increment or decrement would overflow"))
        #expect(h.run("GET", "max") == .bulk("9223372036854775807"))
        h.run("SET", "min", "-9223372036854775808")
        #expect(h.run("DECR", "min") == .error("ERR increment or decrement would overflow"))
        #expect(h.run("INCRBY", "min", "-1") == .error("ERR increment or decrement would overflow"))
        #expect(h.run("DECRBY", "n", "-9223372036854775808") == .error("ERR decrement would overflow"))
        #expect(h.run("INCRBY", "min", "9223372036854775807") == .integer(-1))
    }

    // MARK: APPEND / STRLEN / GETRANGE

    @Test("APPEND creates or extends the value, returns the new length and keeps the TTL")
    func append() {
        let h = Harness()
        #expect(h.run("APPEND", "k", "hello") == .integer(5))
        h.run("EXPIRE", "k", "60")
        #expect(h.run("APPEND", "k", " world") == .integer(11))
        #expect(h.run("GET", "k") == .bulk("hello world"))
        #expect(h.run("TTL", "k") == .integer(60))
        #expect(h.run("APPEND", "k", "") == .integer(11))
    }

    @Test("A value grown by APPENDs and by SETRANGE past its end keeps its bytes, zero padding and TTL")
    func growthInPlaceAndMoved() {
        let h = Harness()
        h.run("SET", "k", "ab", "EX", "100")
        var expected = "ab"
        for i in 0..<300 {
            let part = String(repeating: Character(UnicodeScalar(UInt8(97 + i % 26))), count: i % 7)
            expected += part
            #expect(h.run("APPEND", "k", part) == .integer(expected.utf8.count))
            if i % 50 == 49 {
                // Three bytes past the end: two zero bytes, then "Z".
                #expect(h.run("SETRANGE", "k", String(expected.utf8.count + 2), "Z") == .integer(expected.utf8.count + 3))
                expected += "\0\0Z"
            }
        }
        #expect(h.run("GET", "k") == .bulk(expected))
        #expect(h.run("STRLEN", "k") == .integer(expected.utf8.count))
        #expect(h.run("TTL", "k") == .integer(100))
        #expect(h.run("SETRANGE", "k", "0", "XY") == .integer(expected.utf8.count))
        #expect(h.run("GETRANGE", "k", "0", "3") == .bulk("XY" + expected.dropFirst(2).prefix(2)))
    }

    @Test("STRLEN is the value's length, 0 for a missing key")
    func strlen() {
        let h = Harness()
        h.run("SET", "k", "hello")
        #expect(h.run("STRLEN", "k") == .integer(5))
        #expect(h.run("STRLEN", "missing") == .integer(0))
    }

    @Test("GETRANGE with positive and negative indexes", arguments: [
        ("0", "-1", "hello"), ("-3", "-1", "llo"), ("0", "100", "hello"), ("-100", "-1", "hello"), ("1", "3", "ell"),
        ("3", "1", ""), ("-1", "-3", ""), ("5", "5", ""), ("4", "4", "o"), ("-100", "-50", "h"),
    ])
    func getrange(start: String, end: String, expected: String) {
        let h = Harness()
        h.run("SET", "k", "hello")
        #expect(h.run("GETRANGE", "k", start, end) == .bulk(expected))
    }

    @Test("GETRANGE of a missing key is an empty string; bad indexes are an error")
    func getrangeEdges() {
        let h = Harness()
        #expect(h.run("GETRANGE", "missing", "0", "-1") == .bulk(""))
        h.run("SET", "empty", "")
        #expect(h.run("GETRANGE", "empty", "0", "-1") == .bulk(""))
        #expect(h.run("GETRANGE", "k", "a", "1") == .error("ERR value is not an integer or out of range"))
    }

    @Test("SETRANGE inside the value and APPEND of nothing count as changes (save points), as any write does")
    func setrangeInPlaceCountsAChange() {
        let h = Harness()
        #expect(h.run("SET", "k", "value", "EX", "100") == .ok)
        let before = h.server.keyspace.totalChanges
        #expect(h.run("SETRANGE", "k", "0", "V") == .integer(5))
        #expect(h.run("APPEND", "k", "") == .integer(5))
        #expect(h.server.keyspace.totalChanges == before + 2)
        #expect(h.run("GET", "k") == .bulk("Value"))
        #expect(h.run("TTL", "k") == .integer(100))
        #expect(h.run("SETRANGE", "k", "5", "!") == .integer(6), "past the end: a new entry")
        #expect(h.server.keyspace.totalChanges == before + 3)
        #expect(h.run("GET", "k") == .bulk("Value!"))
    }
}


@Suite("Growing a value near the largest lengths")
struct GrowthLimitTests {
    @Test("SETRANGE far past the end with proto-max-bulk-len at its largest is refused, not a crash")
    func offsetNearIntMax() {
        let h = Harness()
        #expect(h.run("CONFIG", "SET", "proto-max-bulk-len", "9223372036854775807") == .ok)
        h.run("SET", "k", "v")
        #expect(h.run("SETRANGE", "k", "9223372036854775000", "x").isError)
        #expect(h.run("GET", "k") == .bulk("v"))
    }
}
