import CacheCore
import CacheServer
import RESP
import Testing

@Suite("Key commands")
struct KeyCommandTests {
    // MARK: DEL / UNLINK / EXISTS / TYPE

    @Test("DEL and UNLINK count the keys they removed, once per key", arguments: ["DEL", "UNLINK"])
    func delete(command: String) {
        let h = Harness()
        h.run("MSET", "a", "1", "b", "2")
        #expect(h.run(command, "a", "b", "a", "missing") == .integer(2))
        #expect(h.run("DBSIZE") == .integer(0))
        #expect(h.run(command, "a") == .integer(0))
    }

    @Test("DEL does not count an expired key")
    func deleteExpired() {
        let h = Harness()
        h.run("SET", "a", "1", "PX", "10")
        h.advance(11)
        #expect(h.run("DEL", "a") == .integer(0))
    }

    @Test("EXISTS counts a key each time it is named")
    func existsRepeats() {
        let h = Harness()
        h.run("SET", "a", "1")
        #expect(h.run("EXISTS", "a", "a", "missing", "a") == .integer(3))
        #expect(h.run("EXISTS", "missing") == .integer(0))
    }

    @Test("TYPE is string for a key and none for a missing or expired one")
    func type() {
        let h = Harness()
        h.run("SET", "a", "1", "PX", "5")
        #expect(h.run("TYPE", "a") == .simple("string"))
        h.advance(6)
        #expect(h.run("TYPE", "a") == .simple("none"))
    }

    // MARK: EXPIRE family

    @Test("EXPIRE / PEXPIRE / EXPIREAT / PEXPIREAT set the expiry; missing keys reply 0")
    func expireVariants() {
        let h = Harness()
        h.run("MSET", "a", "1", "b", "1", "c", "1", "d", "1")
        #expect(h.run("EXPIRE", "a", "10") == .integer(1))
        #expect(h.run("PTTL", "a") == .integer(10_000))
        #expect(h.run("PEXPIRE", "b", "1234") == .integer(1))
        #expect(h.run("PTTL", "b") == .integer(1_234))
        let at = h.now / 1000 + 50
        #expect(h.run("EXPIREAT", "c", String(at)) == .integer(1))
        #expect(h.run("PEXPIRETIME", "c") == .integer(Int(at * 1000)))
        #expect(h.run("PEXPIREAT", "d", String(h.now + 99)) == .integer(1))
        #expect(h.run("PTTL", "d") == .integer(99))
        #expect(h.run("EXPIRE", "missing", "10") == .integer(0))
        #expect(h.run("PEXPIREAT", "missing", "1") == .integer(0))
    }

    @Test("A key with a TTL is readable through its expiry millisecond and gone after it")
    func expiryBoundary() {
        let h = Harness()
        h.run("SET", "k", "v", "PX", "100")
        h.advance(100)
        #expect(h.run("PTTL", "k") == .integer(0))
        #expect(h.run("GET", "k") == .bulk("v"))
        h.advance(1)
        #expect(h.run("GET", "k") == .nullBulkString)
        #expect(h.run("PTTL", "k") == .integer(-2))
    }

    @Test("An expire time at or before now deletes the key at once and replies 1", arguments: [
        ["EXPIRE", "k", "0"], ["EXPIRE", "k", "-10"], ["PEXPIRE", "k", "0"], ["EXPIREAT", "k", "1"], ["PEXPIREAT", "k", "0"],
    ])
    func expireInThePast(command: [String]) {
        let h = Harness()
        h.run("SET", "k", "v")
        #expect(h.run(command.map { Array($0.utf8) }) == .integer(1))
        #expect(h.run("EXISTS", "k") == .integer(0))
    }

    @Test("EXPIRE NX sets only when there is no TTL, XX only when there is one")
    func expireNXXX() {
        let h = Harness()
        h.run("SET", "k", "v")
        #expect(h.run("EXPIRE", "k", "100", "XX") == .integer(0))
        #expect(h.run("TTL", "k") == .integer(-1))
        #expect(h.run("EXPIRE", "k", "100", "NX") == .integer(1))
        #expect(h.run("EXPIRE", "k", "200", "NX") == .integer(0))
        #expect(h.run("TTL", "k") == .integer(100))
        #expect(h.run("EXPIRE", "k", "300", "xx") == .integer(1))
        #expect(h.run("TTL", "k") == .integer(300))
    }

    @Test("EXPIRE GT needs a later time (no TTL counts as infinite); LT an earlier one")
    func expireGTLT() {
        let h = Harness()
        h.run("SET", "k", "v")
        #expect(h.run("EXPIRE", "k", "100", "GT") == .integer(0))
        #expect(h.run("TTL", "k") == .integer(-1))
        #expect(h.run("EXPIRE", "k", "100", "LT") == .integer(1))
        #expect(h.run("EXPIRE", "k", "50", "GT") == .integer(0))
        #expect(h.run("EXPIRE", "k", "100", "GT") == .integer(0))
        #expect(h.run("EXPIRE", "k", "150", "GT") == .integer(1))
        #expect(h.run("EXPIRE", "k", "150", "LT") == .integer(0))
        #expect(h.run("EXPIRE", "k", "120", "LT") == .integer(1))
        #expect(h.run("TTL", "k") == .integer(120))
        #expect(h.run("EXPIRE", "k", "200", "XX", "GT") == .integer(1))
        #expect(h.run("TTL", "k") == .integer(200))
    }

    @Test("EXPIRE option errors, checked before the key", arguments: [
        (["NX", "XX"], "ERR NX and XX, GT or LT options at the same time are not compatible"),
        (["NX", "GT"], "ERR NX and XX, GT or LT options at the same time are not compatible"),
        (["LT", "NX"], "ERR NX and XX, GT or LT options at the same time are not compatible"),
        (["GT", "LT"], "ERR GT and LT options at the same time are not compatible"),
        (["FOO"], "ERR Unsupported option FOO"),
    ])
    func expireOptionErrors(options: [String], message: String) {
        let h = Harness()
        #expect(h.run((["EXPIRE", "missing", "10"] + options).map { Array($0.utf8) }) == .error(message))
    }

    @Test("EXPIRE rejects times that are not integers or overflow")
    func expireBadTimes() {
        let h = Harness()
        h.run("SET", "k", "v")
        #expect(h.run("EXPIRE", "k", "abc") == .error("ERR value is not an integer or out of range"))
        #expect(h.run("EXPIRE", "k", "9223372036854775807") == .error("ERR invalid expire time in 'expire' command"))
        #expect(h.run("EXPIRE", "k", "-9223372036854775808") == .error("ERR invalid expire time in 'expire' command"))
        #expect(h.run("PEXPIRE", "k", "9223372036854775807") == .error("ERR invalid expire time in 'pexpire' command"))
        #expect(h.run("EXPIREAT", "k", "9223372036854775807") == .error("ERR invalid expire time in 'expireat' command"))
        #expect(h.run("TTL", "k") == .integer(-1))
        #expect(h.run("PEXPIREAT", "k", "9223372036854775807") == .integer(1))
        // The farthest expiry there is still reads back, in seconds rounded to the nearest (no overflow).
        #expect(h.run("PEXPIRETIME", "k") == .integer(Int.max))
        #expect(h.run("EXPIRETIME", "k") == .integer(9_223_372_036_854_776))
        #expect(h.run("TTL", "k") == .integer(Int((Int64.max - h.now) / 1000 + ((Int64.max - h.now) % 1000 >= 500 ? 1 : 0))))
    }

    // MARK: TTL family

    @Test("TTL rounds to the nearest second; -1 without TTL, -2 for a missing key")
    func ttl() {
        let h = Harness()
        h.run("SET", "k", "v", "PX", "1499")
        #expect(h.run("TTL", "k") == .integer(1))
        h.run("SET", "k", "v", "PX", "1500")
        #expect(h.run("TTL", "k") == .integer(2))
        h.run("SET", "p", "v")
        #expect(h.run("TTL", "p") == .integer(-1))
        #expect(h.run("PTTL", "p") == .integer(-1))
        #expect(h.run("TTL", "missing") == .integer(-2))
        #expect(h.run("PTTL", "missing") == .integer(-2))
    }

    @Test("EXPIRETIME and PEXPIRETIME give the absolute time; -1 and -2 as TTL does")
    func expiretime() {
        let h = Harness()
        h.run("SET", "k", "v", "PXAT", String(h.now + 2_400))
        #expect(h.run("PEXPIRETIME", "k") == .integer(Int(h.now + 2_400)))
        #expect(h.run("EXPIRETIME", "k") == .integer(Int((h.now + 2_400 + 500) / 1000)))
        h.run("SET", "p", "v")
        #expect(h.run("EXPIRETIME", "p") == .integer(-1))
        #expect(h.run("PEXPIRETIME", "missing") == .integer(-2))
    }

    @Test("PERSIST removes a TTL (1), and replies 0 without one or without the key")
    func persist() {
        let h = Harness()
        h.run("SET", "k", "v", "EX", "10")
        #expect(h.run("PERSIST", "k") == .integer(1))
        #expect(h.run("TTL", "k") == .integer(-1))
        #expect(h.run("PERSIST", "k") == .integer(0))
        #expect(h.run("PERSIST", "missing") == .integer(0))
        h.advance(20_000)
        #expect(h.run("GET", "k") == .bulk("v"))
    }

    // MARK: RENAME / RENAMENX / MOVE

    @Test("RENAME moves the value and its TTL, replacing the target")
    func rename() {
        let h = Harness()
        h.run("SET", "a", "1", "EX", "100")
        h.run("SET", "b", "2")
        #expect(h.run("RENAME", "a", "b") == .ok)
        #expect(h.run("EXISTS", "a") == .integer(0))
        #expect(h.run("GET", "b") == .bulk("1"))
        #expect(h.run("TTL", "b") == .integer(100))
    }

    @Test("RENAME onto a key with a TTL leaves the target without TTL when the source had none")
    func renameDropsTargetTTL() {
        let h = Harness()
        h.run("SET", "a", "1")
        h.run("SET", "b", "2", "EX", "100")
        #expect(h.run("RENAME", "a", "b") == .ok)
        #expect(h.run("TTL", "b") == .integer(-1))
    }

    @Test("RENAME of a missing or expired key is an error; renaming a key to itself is a no-op")
    func renameEdges() {
        let h = Harness()
        #expect(h.run("RENAME", "missing", "x") == .error("ERR no such key"))
        #expect(h.run("RENAMENX", "missing", "x") == .error("ERR no such key"))
        #expect(h.run("RENAME", "missing", "missing") == .error("ERR no such key"))
        h.run("SET", "e", "1", "PX", "1")
        h.advance(2)
        #expect(h.run("RENAME", "e", "x") == .error("ERR no such key"))
        h.run("SET", "k", "v", "EX", "30")
        #expect(h.run("RENAME", "k", "k") == .ok)
        #expect(h.run("RENAMENX", "k", "k") == .integer(0))
        #expect(h.run("GET", "k") == .bulk("v"))
        #expect(h.run("TTL", "k") == .integer(30))
    }

    @Test("RENAMENX renames only onto a missing key")
    func renamenx() {
        let h = Harness()
        h.run("MSET", "a", "1", "b", "2")
        #expect(h.run("RENAMENX", "a", "b") == .integer(0))
        #expect(h.run("MGET", "a", "b") == .bulks("1", "2"))
        h.run("PEXPIRE", "a", "500")
        #expect(h.run("RENAMENX", "a", "c") == .integer(1))
        #expect(h.run("EXISTS", "a") == .integer(0))
        #expect(h.run("PTTL", "c") == .integer(500))
    }

    @Test("RENAME keeps every other key of a crowded database reachable")
    func renameInCrowdedDatabase() {
        let h = Harness()
        for i in 0..<2_000 { h.run("SET", "k\(i)", "\(i)") }
        for i in 0..<1_000 { #expect(h.run("RENAME", "k\(i)", "r\(i)") == .ok) }
        #expect(h.run("DBSIZE") == .integer(2_000))
        for i in 0..<1_000 { #expect(h.run("GET", "r\(i)") == .bulk("\(i)")) }
        for i in 1_000..<2_000 { #expect(h.run("GET", "k\(i)") == .bulk("\(i)")) }
    }

    @Test("MOVE moves a key and its TTL to another database, unless it exists there")
    func move() {
        let h = Harness()
        h.run("SET", "k", "v", "EX", "100")
        #expect(h.run("MOVE", "k", "1") == .integer(1))
        #expect(h.run("EXISTS", "k") == .integer(0))
        h.run("SELECT", "1")
        #expect(h.run("GET", "k") == .bulk("v"))
        #expect(h.run("TTL", "k") == .integer(100))
        h.run("SELECT", "0")
        h.run("SET", "k", "other")
        #expect(h.run("MOVE", "k", "1") == .integer(0))
        #expect(h.run("GET", "k") == .bulk("other"))
        #expect(h.run("MOVE", "missing", "1") == .integer(0))
    }

    @Test("MOVE errors: same database, out of range, not an integer")
    func moveErrors() {
        let h = Harness()
        h.run("SET", "k", "v")
        #expect(h.run("MOVE", "k", "0") == .error("ERR source and destination objects are the same"))
        #expect(h.run("MOVE", "k", "16") == .error("ERR DB index is out of range"))
        #expect(h.run("MOVE", "k", "-1") == .error("ERR DB index is out of range"))
        #expect(h.run("MOVE", "k", "abc") == .error("ERR value is not an integer or out of range"))
        #expect(h.run("MOVE", "k", "99999999999")
            == .error("ERR value is out of range, value must between -2147483648 and 2147483647"))
    }

    // MARK: RANDOMKEY / KEYS / SCAN

    @Test("RANDOMKEY returns nil for an empty database, and some live key otherwise")
    func randomkey() {
        let h = Harness()
        #expect(h.run("RANDOMKEY") == .nullBulkString)
        h.run("MSET", "a", "1", "b", "2", "c", "3")
        var seen = Set<String>()
        for _ in 0..<100 { if let key = h.run("RANDOMKEY").text { seen.insert(key) } }
        #expect(seen == ["a", "b", "c"])
    }

    @Test("RANDOMKEY never returns an expired key, and nil when every key expired")
    func randomkeyExpired() {
        let h = Harness()
        for i in 0..<50 { h.run("SET", "e\(i)", "v", "PX", "10") }
        h.run("SET", "live", "v")
        h.advance(11)
        for _ in 0..<20 { #expect(h.run("RANDOMKEY") == .bulk("live")) }
        h.run("DEL", "live")
        #expect(h.run("RANDOMKEY") == .nullBulkString)
    }

    @Test("KEYS returns the live keys matching the pattern")
    func keys() {
        let h = Harness()
        h.run("MSET", "user:1", "a", "user:2", "b", "item:1", "c")
        h.run("SET", "user:3", "d", "PX", "5")
        h.advance(6)
        #expect(Set(h.run("KEYS", "user:*").texts ?? []) == ["user:1", "user:2"])
        #expect(Set(h.run("KEYS", "*").texts ?? []) == ["user:1", "user:2", "item:1"])
        #expect(h.run("KEYS", "*:1").texts?.sorted() == ["item:1", "user:1"])
        #expect(h.run("KEYS", "nothing*") == .array([]))
    }

    @Test("A full SCAN iteration returns every key")
    func scanFull() {
        let h = Harness()
        for i in 0..<1_000 { h.run("SET", "k\(i)", "v") }
        let (keys, calls) = h.scanAll()
        #expect(Set(keys) == Set((0..<1_000).map { "k\($0)" }))
        #expect(calls > 1)
    }

    @Test("A few keys left of many are scanned in one call, as from Redis's shrunk table")
    func scanAfterMostKeysLeft() {
        let h = Harness()
        for i in 0..<20_000 { h.run("SET", "k\(i)", "v") }
        for i in 6..<20_000 { h.run("DEL", "k\(i)") }
        let reply = h.run("SCAN", "0")
        guard case .array(let parts) = reply, parts.count == 2 else {
            Issue.record("SCAN replied \(reply)")
            return
        }
        #expect(parts[0] == .bulk("0"))
        #expect(Set(parts[1].texts ?? []) == Set((0..<6).map { "k\($0)" }))
        #expect(h.run("SCAN", "0", "TYPE", "list") == .array([.bulk("0"), .array([])]))
    }

    @Test("SCAN returns every key present for the whole iteration while keys are added and removed")
    func scanWhileChanging() {
        let h = Harness()
        for i in 0..<600 { h.run("SET", "stable\(i)", "v") }
        for i in 0..<600 { h.run("SET", "gone\(i)", "v") }
        var cursor = "0"
        var seen = Set<String>()
        var step = 0
        repeat {
            let parts = h.run("SCAN", cursor, "COUNT", "20").elements ?? []
            cursor = parts.first?.text ?? "0"
            seen.formUnion(parts.last?.texts ?? [])
            for j in 0..<30 { h.run("SET", "new\(step)-\(j)", "v") }
            for j in 0..<10 { h.run("DEL", "gone\(step * 10 + j)") }
            step += 1
        } while cursor != "0" && step < 10_000
        #expect(cursor == "0")
        #expect(Set((0..<600).map { "stable\($0)" }).isSubset(of: seen))
    }

    @Test("SCAN MATCH filters keys; COUNT bounds the work; TYPE string keeps all and another type none")
    func scanOptions() {
        let h = Harness()
        for i in 0..<300 { h.run("SET", i.isMultiple(of: 3) ? "a\(i)" : "b\(i)", "v") }
        #expect(Set(h.scanAll("MATCH", "a*").keys) == Set(stride(from: 0, to: 300, by: 3).map { "a\($0)" }))
        #expect(Set(h.scanAll("COUNT", "1000").keys).count == 300)
        #expect(h.scanAll("COUNT", "1000").calls <= 2)
        #expect(Set(h.scanAll("TYPE", "STRING").keys).count == 300)
        #expect(h.scanAll("TYPE", "hash").keys.isEmpty)
        #expect(h.scanAll("MATCH", "a*", "MATCH", "zzz").keys.isEmpty)
    }

    @Test("SCAN skips expired keys and, as Redis, removes those matching its MATCH, whatever TYPE asks for")
    func scanExpired() {
        let h = Harness()
        h.run("SET", "live", "v")
        h.run("SET", "dead", "v", "PX", "10")
        h.run("SET", "other", "v", "PX", "10")
        h.advance(11)
        #expect(h.scanAll("MATCH", "d*").keys.isEmpty)
        #expect(h.run("DBSIZE") == .integer(2), "the expired key SCAN passed is gone; the one MATCH left out is not")
        #expect(h.scanAll("TYPE", "hash").keys.isEmpty)
        #expect(h.run("DBSIZE") == .integer(1), "TYPE's lookup removes an expired key")
        #expect(h.scanAll().keys == ["live"])
        let stats = h.run("INFO", "stats").text ?? ""
        #expect(stats.contains("expired_keys:2\r\n"), "\(stats)")
    }

    @Test("SCAN with a huge COUNT returns everything in one call")
    func scanHugeCount() {
        let h = Harness()
        for i in 0..<50 { h.run("SET", "k\(i)", "v") }
        let reply = h.run("SCAN", "0", "COUNT", "9223372036854775807")
        #expect(reply.elements?.first == .bulk("0"))
        #expect(reply.elements?.last?.texts?.count == 50)
    }

    @Test("SCAN option errors", arguments: [
        (["COUNT", "0"], "ERR syntax error"), (["COUNT", "-1"], "ERR syntax error"),
        (["COUNT", "abc"], "ERR value is not an integer or out of range"), (["MATCH"], "ERR syntax error"),
        (["TYPE"], "ERR syntax error"), (["FOO", "bar"], "ERR syntax error"),
    ])
    func scanErrors(options: [String], message: String) {
        let h = Harness()
        #expect(h.run((["SCAN", "0"] + options).map { Array($0.utf8) }) == .error(message))
    }

    @Test("SCAN reads its cursor as strtoul does: sign and empty string accepted, spaces and junk refused", arguments: [
        ("", true), ("+0", true), ("-0", true), ("00", true), ("-1", true), ("18446744073709551615", true),
        ("-18446744073709551615", true), (" 0", false), ("0 ", false), ("-", false), ("+", false), ("0x1", false),
        ("18446744073709551616", false), ("-18446744073709551616", false), ("abc", false),
    ])
    func scanCursorSyntax(cursor: String, valid: Bool) {
        let h = Harness()
        h.run("SET", "k", "v")
        let reply = h.run("SCAN", cursor, "COUNT", "1000")
        if valid {
            #expect(reply.elements?.count == 2)
        } else {
            #expect(reply == .error("ERR invalid cursor"))
        }
    }
}

@Suite("COPY")
struct CopyCommandTests {
    @Test("COPY into another database: the copy keeps value, TTL and encoding; a watcher there sees it, one here does not")
    func copyToAnotherDatabase() {
        let h = Harness()
        let watcherThere = h.newSession(), watcherHere = h.newSession()
        h.run("SET", "k", "12", "EX", "100")
        h.run("APPEND", "k", "3")
        #expect(h.run("SELECT", "1", as: watcherThere) == .ok)
        #expect(h.run("WATCH", "copy", as: watcherThere) == .ok)
        #expect(h.run("WATCH", "copy", as: watcherHere) == .ok)
        #expect(h.run("COPY", "k", "copy", "DB", "1") == .integer(1))
        #expect(h.run("GET", "copy", as: watcherThere) == .bulk("123"))
        #expect(h.run("TTL", "copy", as: watcherThere) == .integer(100))
        #expect(h.run("OBJECT", "ENCODING", "copy", as: watcherThere) == .bulk("raw"))
        for (watcher, aborted) in [(watcherThere, true), (watcherHere, false)] {
            #expect(h.run("MULTI", as: watcher) == .ok)
            h.run("PING", as: watcher)
            #expect(h.run("EXEC", as: watcher) == (aborted ? .nullArray : .array([.simple("PONG")])))
        }
    }

    @Test("COPY with REPLACE over a key a client tracks invalidates it, in this database and in another")
    func copyInvalidatesTrackedKeys() {
        let (h, writer) = TrackingTests.tracking()
        #expect(h.run("SET", "source", "v", as: writer) == .ok)
        #expect(h.run("SET", "target", "old", as: writer) == .ok)
        #expect(h.run("GET", "target") == .bulk("old"))
        #expect(h.run("COPY", "source", "target", as: writer) == .integer(0))
        #expect(h.pushes().isEmpty, "nothing was copied")
        #expect(h.run("COPY", "source", "target", "REPLACE", as: writer) == .integer(1))
        #expect(h.pushes() == [TrackingTests.invalidate("target")])
        #expect(h.run("GET", "target") == .bulk("v"))
        #expect(h.run("COPY", "source", "target", "DB", "2", as: writer) == .integer(1))
        #expect(h.pushes() == [TrackingTests.invalidate("target")], "tracking does not tell databases apart")
    }
}
