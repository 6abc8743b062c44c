import CachedTestSupport
import Foundation
import Synchronization
import Testing

/// maxmemory on a running daemon: resident memory stays bounded under sustained writes past the limit, and
/// noeviction refuses writes as redis-server does.
@Suite("maxmemory on a live server")
struct EvictionLiveTests {
    @Test("--maxmemory 20mb: 100 MB of writes keep RSS within 1.1 × 20 MB of the idle server's, with evictions")
    func residentMemoryStaysBounded() throws {
        let limit = 20 * 1024 * 1024
        let server = try ServerProcess.start(.cached, arguments: ["--maxmemory", "20mb"])
        defer { server.stop() }
        let connection = try server.connect()

        // The base: the server after the same clients have connected and pipelined, holding no data.
        let warmUp = try server.redisBenchmark(["-t", "ping", "-n", "50000", "-c", "20", "-P", "16", "-q"])
        #expect(warmUp.status == 0, "\(warmUp.standardError)")
        let base = try server.residentBytes()

        // 100,000 SETs of 1000-byte values on random keys (100 MB), sampling RSS all along.
        let finished = Mutex(false)
        let result = Mutex<ProgramOutput?>(nil)
        let thread = Thread {
            let output = try? server.redisBenchmark(
                ["-t", "set", "-d", "1000", "-n", "100000", "-r", "100000000", "-c", "20", "-P", "16", "-q"],
                timeout: 180)
            result.withLock { $0 = output }
            finished.withLock { $0 = true }
        }
        thread.start()
        var peak = 0
        while !finished.withLock({ $0 }) {
            peak = max(peak, try server.residentBytes())
            usleep(20_000)
        }
        guard let output = result.withLock({ $0 }) else { throw TestEnvironmentError("redis-benchmark did not run") }
        #expect(output.status == 0, "\(output.standardError)")
        peak = max(peak, try server.residentBytes())

        let bound = limit + limit / 10 + base
        #expect(peak <= bound, "peak RSS \(peak) > 1.1 × \(limit) + base \(base)")
        let stats = try connection.info("stats")
        let memory = try connection.info("memory")
        #expect(Int(stats["evicted_keys"] ?? "") ?? 0 > 50_000, "\(stats)")
        #expect(memory["maxmemory"] == String(limit))
        #expect(memory["maxmemory_policy"] == "allkeys-sieve")
        #expect(Int(memory["used_memory"] ?? "") ?? .max <= limit + limit / 100, "\(memory)")
        let keys = try connection.command("DBSIZE")
        guard case .integer(let count) = keys else { throw TestEnvironmentError("DBSIZE: \(keys)") }
        // 20 MB holds about 19,000 entries of 1,000 bytes (1,024-byte class, and their share of the tables).
        #expect(count > 15_000 && count < 21_000, "\(count) keys")
        print("eviction live: base RSS \(base), peak RSS \(peak), bound \(bound), keys \(count), evicted \(stats["evicted_keys"] ?? "?")")
    }

    @Test("CONFIG SET maxmemory below the memory in use evicts down to it with no write; keys read since survive",
          arguments: [ServerProcess.Kind.redis, .cached])
    func loweredLimitEvictsWithoutWrites(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind, arguments: ["--maxmemory-policy", "allkeys-lru"])
        defer { server.stop() }
        let connection = try server.connect()
        let value = String(repeating: "v", count: 1_000)
        for start in stride(from: 0, to: 10_000, by: 500) {
            for i in start..<(start + 500) { try connection.append("SET", "key:\(i)", value) }
            for _ in 0..<500 { #expect(try connection.reply() == .ok) }
        }
        func used() throws -> Int { Int(try connection.info("memory")["used_memory"] ?? "") ?? 0 }
        let before = try used()
        // The last thousand keys are read after the others: an LRU keeps them.
        Thread.sleep(forTimeInterval: 1.1)
        for i in 9_000..<10_000 { try connection.append("GET", "key:\(i)") }
        for _ in 9_000..<10_000 { _ = try connection.reply() }
        let limit = before / 2
        #expect(try connection.command("CONFIG", "SET", "maxmemory", String(limit)) == .ok)
        // Only reads and INFO from here on.
        try poll("used_memory within maxmemory", timeout: 5) { try used() <= limit }
        // Every key is either still there or counted as evicted. The background eviction may still take a few
        // keys (the heap beyond the keys is measured again as it goes), so the two are read where the evicted
        // count is the same before and after DBSIZE.
        func evictedKeys() throws -> Int { Int(try connection.info("stats")["evicted_keys"] ?? "") ?? 0 }
        var evicted = try evictedKeys()
        var keys = try connection.command("DBSIZE")
        let settled = Date().addingTimeInterval(10)
        while case let after = try evictedKeys(), after != evicted, Date() < settled {
            evicted = after
            keys = try connection.command("DBSIZE")
        }
        #expect(evicted > 2_000, "\(evicted) evicted")
        #expect(keys == .integer(Int64(10_000 - evicted)))
        var kept = 0
        for i in 9_000..<10_000 where try connection.command("EXISTS", "key:\(i)") == .integer(1) { kept += 1 }
        #expect(kept > 900, "\(kept) of the 1,000 keys read last are kept")
    }

    @Test("--maxmemory-policy noeviction: writes past the limit get the OOM error; GET and DEL still work",
          arguments: [ServerProcess.Kind.redis, .cached])
    func noEviction(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind, arguments: ["--maxmemory", "4mb", "--maxmemory-policy", "noeviction"])
        defer { server.stop() }
        let connection = try server.connect()
        let value = String(repeating: "v", count: 10_000)

        var refused: RedisReply?
        var stored = 0
        for i in 0..<2000 {
            let reply = try connection.command("SET", "key:\(i)", value)
            if reply != .ok {
                refused = reply
                break
            }
            stored += 1
        }
        #expect(refused == .error("OOM command not allowed when used memory > 'maxmemory'."))
        #expect(stored > 0 && stored < 500, "\(stored) values of 10 kB stored under 4 MB")
        #expect(try connection.command("GET", "key:0") == .bulk(value))
        #expect(try connection.command("INCR", "counter") == .error("OOM command not allowed when used memory > 'maxmemory'."))
        #expect(try connection.command("DEL", "key:0") == .integer(1))
        #expect(try connection.info("stats")["evicted_keys"] == "0")
    }

    @Test("A limit set with CONFIG SET holds from the next command: an idle server's own memory is over 1 byte",
          arguments: [ServerProcess.Kind.redis, .cached])
    func limitHoldsAtOnce(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let connection = try server.connect()
        #expect(try connection.command("CONFIG", "SET", "maxmemory-policy", "noeviction", "maxmemory", "1") == .ok)
        #expect(try connection.command("SET", "k", "v") == .error("OOM command not allowed when used memory > 'maxmemory'."))
        #expect(try connection.command("CONFIG", "SET", "maxmemory", "0") == .ok)
        #expect(try connection.command("SET", "k", "v") == .ok)
    }

    @Test("A limit given at start holds from the first command on the first connection", arguments: [ServerProcess.Kind.redis, .cached])
    func limitHoldsFromStart(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind, arguments: ["--maxmemory", "1", "--maxmemory-policy", "noeviction"])
        defer { server.stop() }
        let connection = try server.connect()
        #expect(try connection.command("SET", "k", "v") == .error("OOM command not allowed when used memory > 'maxmemory'."))
        #expect(try connection.command("GET", "k") == .null)
    }
}
