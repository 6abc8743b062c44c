import CacheCore
import CacheServer
import RESP
import Testing

/// OBJECT and MEMORY on a harness with a manual clock: idle time and frequency follow the accesses, sharing
/// follows the settings, the size follows the value.
@Suite("OBJECT and MEMORY")
struct IntrospectionCommandTests {
    @Test(
        "OBJECT IDLETIME counts the seconds since the last read or write, under every policy but LFU",
        arguments: ["allkeys-sieve", "allkeys-lru", "volatile-ttl", "noeviction", "allkeys-random"])
    func idleTime(policy: String) {
        let h = Harness()
        #expect(h.run("CONFIG", "SET", "maxmemory-policy", policy) == .ok)
        h.run("SET", "k", "v")
        h.run("SET", "same", "abc")
        #expect(h.run("OBJECT", "IDLETIME", "k") == .integer(0))
        h.advance(10_000)
        #expect(h.run("OBJECT", "IDLETIME", "k") == .integer(10), "looking is not an access")
        #expect(h.run("OBJECT", "IDLETIME", "same") == .integer(10))
        h.run("GET", "k")
        h.run("SET", "same", "xyz")  // the same length: overwritten in place
        #expect(h.run("OBJECT", "IDLETIME", "k") == .integer(0))
        #expect(h.run("OBJECT", "IDLETIME", "same") == .integer(0))
        h.advance(125_000)
        h.run("MGET", "k")
        #expect(h.run("OBJECT", "IDLETIME", "k") == .integer(0))
        #expect(h.run("OBJECT", "IDLETIME", "same") == .integer(125))
        #expect(h.run("OBJECT", "FREQ", "k").isError)
    }

    @Test("OBJECT FREQ under LFU: a new key starts at 5, reads raise it, idle minutes lower it; IDLETIME is refused")
    func frequency() {
        let h = Harness()
        #expect(h.run("CONFIG", "SET", "maxmemory-policy", "allkeys-lfu") == .ok)
        h.run("SET", "k", "v")
        #expect(h.run("OBJECT", "FREQ", "k") == .integer(5))
        for _ in 0..<2_000 { h.run("GET", "k") }
        guard case .integer(let raised) = h.run("OBJECT", "FREQ", "k") else {
            Issue.record("OBJECT FREQ is not an integer")
            return
        }
        #expect(raised > 5 && raised < 255, "logarithmic: \(raised)")
        h.advance(3 * 60_000)
        #expect(h.run("OBJECT", "FREQ", "k") == .integer(raised - 3))
        #expect(h.run("OBJECT", "IDLETIME", "k") == .error(
            "ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust."))
        #expect(h.run("OBJECT", "FREQ", "missing") == .nullBulkString)
    }

    @Test(
        "Under LFU every command that reads or writes an existing key counts one access, as Redis's lookups do",
        arguments: [
            ["STRLEN", "k"], ["GETRANGE", "k", "0", "1"], ["APPEND", "k", "x"], ["SETRANGE", "k", "0", "x"],
            ["SETRANGE", "k", "100", "x"], ["INCR", "k"], ["INCRBYFLOAT", "k", "1.5"], ["SET", "k", "9"],
            ["SET", "k", "a longer value"], ["GETSET", "k", "1"], ["GETEX", "k"], ["EXPIRE", "k", "100"],
            ["MSET", "k", "2"], ["GET", "k"], ["TOUCH", "k"],
        ])
    func everyAccessCounts(command: [String]) {
        let h = Harness()
        #expect(h.run("CONFIG", "SET", "maxmemory-policy", "allkeys-lfu") == .ok)
        h.run("SET", "k", "12")
        // At the initial count, an access raises the counter with probability 1.
        #expect(h.run("OBJECT", "FREQ", "k") == .integer(5))
        h.run(command.map { Array($0.utf8) })
        #expect(h.run("OBJECT", "FREQ", "k") == .integer(6), "\(command.joined(separator: " "))")
    }

    @Test("Looking at a key (TTL, TYPE, EXISTS, OBJECT, MEMORY USAGE) is not an access")
    func lookingIsNotAnAccess() {
        let h = Harness()
        #expect(h.run("CONFIG", "SET", "maxmemory-policy", "allkeys-lfu") == .ok)
        h.run("SET", "k", "v")
        for command in [["TTL", "k"], ["TYPE", "k"], ["EXISTS", "k"], ["OBJECT", "ENCODING", "k"], ["MEMORY", "USAGE", "k"]] {
            h.run(command.map { Array($0.utf8) })
        }
        #expect(h.run("OBJECT", "FREQ", "k") == .integer(5))
    }

    @Test("RENAME and MOVE keep the key's access history; COPY's copy starts afresh")
    func renameKeepsHistory() {
        let h = Harness()
        #expect(h.run("CONFIG", "SET", "maxmemory-policy", "allkeys-lfu") == .ok)
        h.run("SET", "k", "v")
        h.run("GET", "k")  // 6
        #expect(h.run("RENAME", "k", "r") == .ok)  // an access to the source: 6, or 7 with probability 1/11
        guard case .integer(let renamed) = h.run("OBJECT", "FREQ", "r") else {
            Issue.record("OBJECT FREQ after RENAME is not an integer")
            return
        }
        #expect(renamed == 6 || renamed == 7)
        #expect(h.run("COPY", "r", "c") == .integer(1))
        #expect(h.run("OBJECT", "FREQ", "c") == .integer(5))
        guard case .integer(let before) = h.run("OBJECT", "FREQ", "r") else { return }
        #expect(h.run("MOVE", "r", "1") == .integer(1))
        h.run("SELECT", "1")
        guard case .integer(let after) = h.run("OBJECT", "FREQ", "r") else {
            Issue.record("OBJECT FREQ after MOVE is not an integer")
            return
        }
        #expect(after >= before && after <= before + 1)
    }

    @Test("Under LRU a key last written, incremented or measured is not idle; a NO-TOUCH client's reads do not count")
    func idleAfterOtherAccesses() {
        let h = Harness()
        #expect(h.run("CONFIG", "SET", "maxmemory-policy", "allkeys-lru") == .ok)
        h.run("SET", "counter", "1")
        h.run("SET", "text", "abc")
        h.run("SET", "read", "abc")
        h.advance(30_000)
        h.run("INCR", "counter")
        h.run("STRLEN", "text")
        let quiet = h.newSession()
        #expect(h.run("CLIENT", "NO-TOUCH", "on", as: quiet) == .ok)
        #expect(h.run("GET", "read", as: quiet) == .bulk("abc"))
        #expect(h.run("OBJECT", "IDLETIME", "counter") == .integer(0))
        #expect(h.run("OBJECT", "IDLETIME", "text") == .integer(0))
        #expect(h.run("OBJECT", "IDLETIME", "read") == .integer(30))
        #expect(h.run("TOUCH", "read", as: quiet) == .integer(1), "TOUCH counts even in NO-TOUCH mode")
        #expect(h.run("OBJECT", "IDLETIME", "read") == .integer(0))
    }

    @Test("OBJECT REFCOUNT: small integers are shared unless a memory limit with LRU or LFU is set")
    func referenceCount() {
        let h = Harness()
        h.run("SET", "small", "42")
        h.run("SET", "large", "10000")
        h.run("SET", "text", "abc")
        let shared = RESPValue.integer(2_147_483_647)
        #expect(h.run("OBJECT", "REFCOUNT", "small") == shared)
        #expect(h.run("OBJECT", "REFCOUNT", "large") == .integer(1))
        #expect(h.run("OBJECT", "REFCOUNT", "text") == .integer(1))
        #expect(h.run("CONFIG", "SET", "maxmemory", "1gb", "maxmemory-policy", "allkeys-lru") == .ok)
        #expect(h.run("OBJECT", "REFCOUNT", "small") == .integer(1))
        #expect(h.run("CONFIG", "SET", "maxmemory-policy", "allkeys-random") == .ok)
        #expect(h.run("OBJECT", "REFCOUNT", "small") == shared)
    }

    @Test("OBJECT ENCODING after APPEND survives a TTL being added and removed, and a SET starts over")
    func encodingKeptAcrossRebuilds() {
        let h = Harness()
        h.run("SET", "k", "12")
        h.run("APPEND", "k", "3")
        #expect(h.run("OBJECT", "ENCODING", "k") == .bulk("raw"))
        h.run("EXPIRE", "k", "100")
        #expect(h.run("OBJECT", "ENCODING", "k") == .bulk("raw"))
        h.run("PERSIST", "k")
        #expect(h.run("OBJECT", "ENCODING", "k") == .bulk("raw"))
        h.run("SET", "k", "456")
        #expect(h.run("OBJECT", "ENCODING", "k") == .bulk("int"))
    }

    @Test("MEMORY USAGE: the entry's bytes and its slot, growing with the value; an expired key still answers")
    func memoryUsage() {
        let h = Harness()
        h.run("SET", "small", "v")
        h.run("SET", "large", String(repeating: "x", count: 10_000))
        guard case .integer(let small) = h.run("MEMORY", "USAGE", "small"),
            case .integer(let large) = h.run("MEMORY", "USAGE", "large")
        else {
            Issue.record("MEMORY USAGE is not an integer")
            return
        }
        #expect(small >= 8 + 5 + 1 && small <= 64)
        #expect(large >= 10_000 + 5 && large <= 10_000 + 10_000 / 4 + 64)
        h.run("SET", "short", "v", "PX", "10")
        h.advance(100)
        #expect(h.run("MEMORY", "USAGE", "short") != .nullBulkString)
        #expect(h.run("GET", "short") == .nullBulkString)
        #expect(h.run("MEMORY", "USAGE", "short") == .nullBulkString)
    }

    @Test("MEMORY MALLOC-STATS is the allocator's report; MEMORY PURGE answers OK")
    func allocator() {
        let h = Harness()
        #expect(h.run("MEMORY", "MALLOC-STATS").text?.contains("jemalloc statistics") == true)
        #expect(h.run("MEMORY", "PURGE") == .ok)
    }
}
