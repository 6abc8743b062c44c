import CacheCore
import CacheServer
import RESP
import Testing

/// maxmemory and maxmemory-policy as clients see them: the OOM error, what still works over the limit,
/// eviction before writes, CONFIG SET at run time and INFO. On a harness, so used memory is the dataset
/// alone (no sweeper adds the heap's other allocations).
@Suite("maxmemory and eviction")
struct EvictionCommandTests {
    let oom = RESPValue.error("OOM command not allowed when used memory > 'maxmemory'.")

    /// Writes `count` keys `key:<i>` with `size`-byte values and brings the memory total up to date.
    func fill(_ h: Harness, count: Int, size: Int = 100, prefix: String = "key") {
        let value = String(repeating: "x", count: size)
        for i in 0..<count { #expect(h.run("SET", "\(prefix):\(i)", value) == .ok) }
        h.server.keyspace.flushAccounting()
    }

    func info(_ h: Harness, _ section: String) -> [String: String] { h.infoFields(section) }

    @Test("noeviction over the limit: denyoom writes get the OOM error; reads, DEL and other writes still work")
    func noEviction() {
        let h = Harness()
        fill(h, count: 50)
        #expect(h.run("CONFIG", "SET", "maxmemory-policy", "noeviction", "maxmemory", "1000") == .ok)

        #expect(h.run("SET", "new", "v") == oom)
        #expect(h.run("SET", "key:1", "overwrite") == oom)
        #expect(h.run("INCR", "counter") == oom)
        #expect(h.run("APPEND", "key:2", "more") == oom)
        #expect(h.run("MSET", "a", "1", "b", "2") == oom)
        #expect(h.run("SETEX", "t", "10", "v") == oom)
        #expect(h.run("GET", "key:1") == .bulk(String(repeating: "x", count: 100)))
        #expect(h.run("EXISTS", "new") == .integer(0))
        #expect(h.run("DEL", "key:3") == .integer(1))
        #expect(h.run("EXPIRE", "key:4", "100") == .integer(1))
        #expect(h.run("GETDEL", "key:5") == .bulk(String(repeating: "x", count: 100)))
        #expect(h.run("DBSIZE") == .integer(48))
        #expect(info(h, "stats")["evicted_keys"] == "0")

        // Raising the limit at run time lets writes through again.
        #expect(h.run("CONFIG", "SET", "maxmemory", "0") == .ok)
        #expect(h.run("SET", "new", "v") == .ok)
    }

    @Test("an evicting policy makes room before the write: the write succeeds and memory is back under the limit",
          arguments: ["allkeys-lru", "allkeys-lfu", "allkeys-random", "allkeys-sieve"])
    func evictsBeforeWrite(_ policy: String) {
        let h = Harness()
        fill(h, count: 2000)
        let budget = h.server.keyspace.budget
        let full = budget.usedBytes
        #expect(h.run("CONFIG", "SET", "maxmemory-policy", policy, "maxmemory", String(full / 2)) == .ok)

        #expect(h.run("SET", "new", "value") == .ok)
        #expect(h.run("GET", "new") == .bulk("value"))
        h.server.keyspace.flushAccounting()
        #expect(budget.usedBytes <= full / 2 + 1024)
        let keys = h.run("DBSIZE").int ?? 0
        #expect(keys > 800 && keys < 1200, "\(keys) keys left")
        // evicted_keys counts exactly the keys that went.
        #expect(info(h, "stats")["evicted_keys"] == String(2001 - keys))
        #expect(h.run("CONFIG", "RESETSTAT") == .ok)
        #expect(info(h, "stats")["evicted_keys"] == "0")
    }

    /// Gives `key` a TTL in the engine directly, as a write on another connection would without telling this
    /// one (a client's own EXPIRE would invalidate the key, and it would be tracked no more).
    func giveTTL(_ h: Harness, _ key: String) {
        let bytes = Array(key.utf8)
        let hash = Keyspace.hasher.hash(bytes)
        let shard = h.server.keyspace.databases[0].shard(for: hash)
        let given = shard.lock.withLock {
            bytes.withUnsafeBytes { k -> Bool in
                guard let index = shard.lookup(k, hash: hash, now: h.now) else { return false }
                shard.setExpiry(at: index, to: h.now + 100_000, hash: hash)
                return true
            }
        }
        #expect(given)
    }

    @Test("an invalidation ahead of an OOM refusal: the refusal counts as an error; CLIENT REPLY OFF drops only it")
    func pushAheadOfRefusal() {
        let h = Harness()
        _ = h.run("HELLO", "3")
        for key in ["a", "b", "c"] { #expect(h.run("SET", key, "v") == .ok) }
        h.server.keyspace.flushAccounting()
        #expect(h.run("CLIENT", "TRACKING", "on") == .ok)
        for key in ["a", "b"] { #expect(h.run("GET", key) == .bulk("v")) }
        #expect(h.run("CONFIG", "SET", "maxmemory-policy", "volatile-random", "maxmemory", "1") == .ok)
        #expect(h.run("CONFIG", "RESETSTAT") == .ok)
        #expect(h.run("SET", "x", "y") == oom)

        giveTTL(h, "a")
        #expect(h.runAll("SET", "x", "y") == [.push([.bulk("invalidate"), .array([.bulk("a")])]), oom])
        #expect(info(h, "errorstats") == ["errorstat_OOM": "count=2"])
        #expect(info(h, "commandstats")["cmdstat_set"]?.contains("rejected_calls=2,failed_calls=0") == true)

        #expect(h.runAll("CLIENT", "REPLY", "OFF") == [])
        giveTTL(h, "b")
        #expect(h.runAll("SET", "x", "y") == [.push([.bulk("invalidate"), .array([.bulk("b")])])])
        #expect(h.runAll("SET", "x", "y") == [])
        #expect(h.runAll("CLIENT", "REPLY", "ON") == [.ok])
        #expect(info(h, "errorstats") == ["errorstat_OOM": "count=4"])
    }

    @Test("over the limit, any command evicts before it runs, a read too; evicted keys the client tracks are invalidated ahead of its reply")
    func evictsBeforeAnyCommand() {
        let h = Harness()
        _ = h.run("HELLO", "3")
        fill(h, count: 200)
        #expect(h.run("CLIENT", "TRACKING", "on") == .ok)
        for i in 0..<200 { _ = h.run("GET", "key:\(i)") }
        let used = h.server.keyspace.budget.usedBytes
        #expect(h.run("CONFIG", "SET", "maxmemory-policy", "allkeys-random", "maxmemory", String(used + 1000)) == .ok)
        // Within the limit before it runs, over it after: nothing is evicted until the next command.
        #expect(h.runAll("SET", "big", String(repeating: "b", count: 20_000)) == [.ok])
        h.server.keyspace.flushAccounting()
        #expect(h.server.keyspace.budget.isOverLimit)
        #expect(h.server.keyspace.evictedKeys == 0)

        let replies = h.runAll("PING")
        #expect(replies.last == .simple("PONG"))
        let pushes = replies.dropLast()
        #expect(!pushes.isEmpty, "the invalidations of the evicted keys come before PONG")
        for push in pushes {
            guard case .push(let items) = push, items.first == .bulk("invalidate") else {
                Issue.record("not an invalidation: \(push)")
                continue
            }
        }
        h.server.keyspace.flushAccounting()
        #expect(!h.server.keyspace.budget.isOverLimit)
        let evicted = h.server.keyspace.evictedKeys
        #expect(evicted > 0)
        // Every evicted key the client had read is invalidated (the big one, never read, may go unannounced).
        #expect(pushes.count >= evicted - 1 && pushes.count <= evicted)
    }

    @Test("volatile policies evict only keys with a TTL, and answer OOM when none is left",
          arguments: ["volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl"])
    func volatilePolicies(_ policy: String) {
        let h = Harness()
        fill(h, count: 500, prefix: "persistent")
        for i in 0..<500 { h.run("SET", "temporary:\(i)", String(repeating: "y", count: 100), "EX", "3600") }
        h.server.keyspace.flushAccounting()
        let full = h.server.keyspace.budget.usedBytes
        #expect(h.run("CONFIG", "SET", "maxmemory-policy", policy, "maxmemory", String(full * 3 / 4)) == .ok)

        #expect(h.run("SET", "new", "v") == .ok)
        #expect(h.run("KEYS", "persistent:*").elements?.count == 500)
        let temporary = h.run("KEYS", "temporary:*").elements?.count ?? 0
        #expect(temporary > 0 && temporary < 500)

        // Below what the persistent keys alone take, nothing can be evicted: OOM.
        #expect(h.run("CONFIG", "SET", "maxmemory", String(full / 4)) == .ok)
        #expect(h.run("SET", "other", "v") == oom)
        #expect(h.run("KEYS", "temporary:*").elements?.count == 0)
        #expect(h.run("KEYS", "persistent:*").elements?.count == 500)
    }

    @Test("CONFIG SET maxmemory and maxmemory-policy at run time; CONFIG GET and INFO memory report them")
    func configAtRunTime() {
        let h = Harness()
        #expect(h.run("CONFIG", "GET", "maxmemory-policy") == .bulks("maxmemory-policy", "allkeys-sieve"))
        #expect(info(h, "memory")["maxmemory_policy"] == "allkeys-sieve")
        fill(h, count: 2000)
        #expect(h.run("CONFIG", "SET", "maxmemory-policy", "noeviction") == .ok)
        #expect(h.run("CONFIG", "SET", "maxmemory", "100kb") == .ok)
        #expect(h.run("CONFIG", "GET", "maxmemory") == .bulks("maxmemory", "102400"))
        #expect(h.run("SET", "k", "v") == oom)

        #expect(h.run("CONFIG", "SET", "maxmemory-policy", "allkeys-random") == .ok)
        #expect(h.run("SET", "k", "v") == .ok)
        let memory = info(h, "memory")
        #expect(memory["maxmemory"] == "102400")
        #expect(memory["maxmemory_policy"] == "allkeys-random")
        #expect(Int(memory["used_memory"] ?? "") ?? 0 >= Int(memory["used_memory_dataset"] ?? "") ?? .max)
        #expect(Int(memory["used_memory_dataset"] ?? "") ?? .max <= 102400 + 1024)
        #expect(Int(info(h, "stats")["evicted_keys"] ?? "") ?? 0 > 1000)

        #expect(h.run("CONFIG", "SET", "maxmemory-policy", "allkeys-fifo")
            == .error("ERR CONFIG SET failed (possibly related to argument 'maxmemory-policy') - argument(s) must be one of the following: volatile-lru, volatile-lfu, volatile-random, volatile-ttl, allkeys-lru, allkeys-lfu, allkeys-random, noeviction, allkeys-sieve"))
    }

    @Test("allkeys-sieve over the limit keeps the keys clients read and evicts keys written once")
    func sieveKeepsReadKeys() {
        let h = Harness()
        // Values of 250 bytes (256-byte blocks), so that entries rather than tables make up most of the memory.
        fill(h, count: 4000, size: 250, prefix: "hot")
        for _ in 0..<3 {
            for i in 0..<4000 { h.run("GET", "hot:\(i)") }
        }
        let full = h.server.keyspace.budget.usedBytes
        #expect(h.run("CONFIG", "SET", "maxmemory", String(full + full * 2 / 3)) == .ok)
        // Half as many one-off keys again as there is room for: about a third of these writes evict. A
        // policy blind to reads would take about half of its victims from the hot keys.
        fill(h, count: 4000, size: 250, prefix: "once")
        let evicted = Int(info(h, "stats")["evicted_keys"] ?? "") ?? 0
        let hot = h.run("KEYS", "hot:*").elements?.count ?? 0
        #expect(evicted > 1000)
        #expect(hot >= 3900, "\(4000 - hot) of \(evicted) evicted keys were read three times")
        #expect(h.run("KEYS", "once:*").elements?.count == 4000 - (evicted - (4000 - hot)))
    }

    @Test("TOUCH counts as a read for eviction: touched keys outlive untouched ones (allkeys-sieve)")
    func touchKeepsKeys() {
        let policy = "allkeys-sieve"
        let h = Harness()
        fill(h, count: 4000, size: 250, prefix: "k")
        h.advance(10_000)
        // The first half is touched (and one key that does not exist is not counted).
        for i in stride(from: 0, to: 2000, by: 100) {
            let keys = (i..<(i + 100)).map { "k:\($0)" } + ["absent"]
            #expect(h.run((["TOUCH"] + keys).map { Array($0.utf8) }) == .integer(100))
        }
        h.advance(10_000)
        let full = h.server.keyspace.budget.usedBytes
        // A quarter of the memory has to go: the untouched half should give it.
        #expect(h.run("CONFIG", "SET", "maxmemory-policy", policy, "maxmemory", String(full * 3 / 4)) == .ok)
        let evicted = Int(info(h, "stats")["evicted_keys"] ?? "") ?? 0
        let touched = (0..<2000).filter { h.run("EXISTS", "k:\($0)") == .integer(1) }.count
        #expect(evicted > 500)
        #expect(touched >= 1950, "\(2000 - touched) of \(evicted) evicted keys were touched")
    }
}
