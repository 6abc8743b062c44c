import CachedTestSupport
import Foundation
import Glibc
import Synchronization
import Testing

/// MIGRATE between the two servers, both ways: cached-server's MIGRATE into redis-server, and redis-server's
/// into cached-server (its RESTORE). What a one-connection corpus cannot show.
@Suite("MIGRATE between servers", .serialized)
struct MigrateLiveTests {
    /// (source, target) pairs: each server moves keys into the other.
    static let pairs: [(ServerProcess.Kind, ServerProcess.Kind)] = [(.cached, .redis), (.redis, .cached)]

    /// Starts a `source` and a `target` server, and runs `body` with a connection to each and the target's port.
    private static func withServers(
        _ source: ServerProcess.Kind, _ target: ServerProcess.Kind,
        _ body: (_ a: HiredisConnection, _ b: HiredisConnection, _ port: String) throws -> Void
    ) throws {
        let from = try ServerProcess.start(source)
        defer { from.stop() }
        let to = try ServerProcess.start(target)
        defer { to.stop() }
        try body(try from.connect(), try to.connect(), String(to.port))
    }

    @Test("keys move with their values and TTLs; COPY keeps them, REPLACE overwrites, KEYS moves several", arguments: pairs)
    func moveKeys(_ source: ServerProcess.Kind, _ target: ServerProcess.Kind) throws {
        try Self.withServers(source, target) { a, b, port in
            let big = String(repeating: "0123456789", count: 50_000)
            #expect(try a.command("SET", "plain", "value") == .status("OK"))
            #expect(try a.command("SET", "counter", "12345") == .status("OK"))
            #expect(try a.command("SET", "timed", big, "PX", "600000") == .status("OK"))

            #expect(try a.command("MIGRATE", "127.0.0.1", port, "plain", "0", "5000") == .status("OK"))
            #expect(try a.command("EXISTS", "plain") == .integer(0))
            #expect(try b.command("GET", "plain") == .bulk("value"))
            #expect(try a.command("MIGRATE", "127.0.0.1", port, "plain", "0", "5000") == .status("NOKEY"))

            // Into database 2, keeping the source's key; the TTL goes with it.
            #expect(try a.command("MIGRATE", "127.0.0.1", port, "timed", "2", "5000", "COPY") == .status("OK"))
            #expect(try a.command("STRLEN", "timed") == .integer(500_000))
            #expect(try b.command("SELECT", "2") == .status("OK"))
            #expect(try b.command("GET", "timed") == .bulk(big))
            guard case .integer(let ttl) = try b.command("PTTL", "timed") else {
                Issue.record("PTTL is not an integer")
                return
            }
            #expect(ttl > 590_000 && ttl <= 600_000)
            #expect(try b.command("SELECT", "0") == .status("OK"))

            // An existing key at the target: BUSYKEY, and the source keeps its key; REPLACE overwrites.
            #expect(try b.command("SET", "counter", "old") == .status("OK"))
            #expect(
                try a.command("MIGRATE", "127.0.0.1", port, "counter", "0", "5000")
                    == .error("ERR Target instance replied with error: BUSYKEY Target key name already exists."))
            #expect(try a.command("EXISTS", "counter") == .integer(1))
            #expect(try a.command("MIGRATE", "127.0.0.1", port, "counter", "0", "5000", "REPLACE") == .status("OK"))
            #expect(try b.command("GET", "counter") == .bulk("12345"))

            // KEYS: the ones the target took leave the source, the one it refused stays.
            for key in ["k1", "k2", "k3"] { #expect(try a.command("SET", key, "v-" + key) == .status("OK")) }
            #expect(try b.command("SET", "k2", "taken") == .status("OK"))
            #expect(
                try a.command("MIGRATE", "127.0.0.1", port, "", "0", "5000", "KEYS", "k1", "k2", "k3", "missing")
                    == .error("ERR Target instance replied with error: BUSYKEY Target key name already exists."))
            #expect(try a.command("EXISTS", "k1", "k2", "k3") == .integer(1))
            #expect(try b.command("MGET", "k1", "k2", "k3") == .array([.bulk("v-k1"), .bulk("taken"), .bulk("v-k3")]))
        }
    }

    @Test("AUTH and AUTH2 reach a target with a password; a wrong one leaves every key where it was", arguments: pairs)
    func authenticatedTarget(_ source: ServerProcess.Kind, _ target: ServerProcess.Kind) throws {
        let from = try ServerProcess.start(source)
        defer { from.stop() }
        let to = try ServerProcess.start(target, arguments: ["--requirepass", "secret"])
        defer { to.stop() }
        let a = try from.connect()
        let port = String(to.port)
        #expect(try a.command("MSET", "x", "1", "y", "2") == .status("OK"))
        #expect(
            try a.command("MIGRATE", "127.0.0.1", port, "x", "0", "5000", "AUTH", "wrong")
                == .error("ERR Target instance replied with error: WRONGPASS invalid username-password pair or user is disabled."))
        #expect(try a.command("EXISTS", "x") == .integer(1))
        #expect(try a.command("MIGRATE", "127.0.0.1", port, "x", "0", "5000", "AUTH", "secret") == .status("OK"))
        #expect(try a.command("MIGRATE", "127.0.0.1", port, "y", "0", "5000", "AUTH2", "default", "secret") == .status("OK"))
        #expect(try a.command("EXISTS", "x", "y") == .integer(0))
        let b = try to.connect()
        #expect(try b.command("AUTH", "secret") == .status("OK"))
        #expect(try b.command("MGET", "x", "y") == .array([.bulk("1"), .bulk("2")]))
    }

    @Test("a target that does not answer times out after the timeout, and the key stays", arguments: [ServerProcess.Kind.redis, .cached])
    func silentTarget(_ source: ServerProcess.Kind) throws {
        let from = try ServerProcess.start(source)
        defer { from.stop() }
        let (listener, port) = try listenOnLoopback()
        defer { close(listener) }
        let a = try from.connect()
        #expect(try a.command("SET", "k", "v") == .status("OK"))
        let start = Date()
        #expect(
            try a.command("MIGRATE", "127.0.0.1", String(port), "k", "0", "300")
                == .error("IOERR error or timeout reading to target instance"))
        let waited = Date().timeIntervalSince(start)
        #expect(waited >= 0.25 && waited < 5, "MIGRATE gave up after \(waited) s")
        #expect(try a.command("GET", "k") == .bulk("v"))
        // A step that timed out is not tried again on a new connection: one connection waits to be accepted.
        _ = fcntl(listener, F_SETFL, fcntl(listener, F_GETFL) | O_NONBLOCK)
        let first = accept(listener, nil, nil)
        let second = accept(listener, nil, nil)
        #expect(first >= 0 && second < 0, "connections made: \(first >= 0 ? 1 : 0) + \(second >= 0 ? 1 : 0)")
        if first >= 0 { close(first) }
        if second >= 0 { close(second) }
    }

    @Test("a connection the target closes before answering is replaced by a new one, once", arguments: [ServerProcess.Kind.redis, .cached])
    func targetClosesFirstConnection(_ source: ServerProcess.Kind) throws {
        let from = try ServerProcess.start(source)
        defer { from.stop() }
        // A target (fault injection) that reads the first connection's request and closes it unanswered, then
        // answers SELECT and RESTORE on the second with +OK each.
        let (listener, port) = try listenOnLoopback()
        defer { close(listener) }
        let accepted = Mutex(0)
        let finished = Mutex(false)
        Thread.detachNewThread {
            var buffer = [UInt8](repeating: 0, count: 65536)
            for attempt in 1...2 {
                let connection = accept(listener, nil, nil)
                guard connection >= 0 else { return }
                accepted.withLock { $0 = attempt }
                _ = recv(connection, &buffer, buffer.count, 0)
                if attempt == 2 {
                    _ = send(connection, "+OK\r\n+OK\r\n", 10, 0)
                    while !finished.withLock({ $0 }) { usleep(10_000) }
                }
                close(connection)
            }
        }
        defer { finished.withLock { $0 = true } }
        let a = try from.connect()
        #expect(try a.command("SET", "k", "v") == .status("OK"))
        #expect(try a.command("MIGRATE", "127.0.0.1", String(port), "k", "0", "5000") == .status("OK"))
        #expect(accepted.withLock { $0 } == 2)
        #expect(try a.command("EXISTS", "k") == .integer(0))
    }

    /// The calls of `command` the server has run (INFO commandstats).
    private static func calls(_ connection: HiredisConnection, _ command: String) throws -> Int {
        let stat = try connection.info("commandstats")["cmdstat_\(command)"] ?? "calls=0"
        return Int(stat.dropFirst("calls=".count).prefix { $0.isNumber }) ?? 0
    }

    @Test("MIGRATEs to one target share a connection, which selects only another database; one the target closed is replaced", arguments: pairs)
    func keptConnection(_ source: ServerProcess.Kind, _ target: ServerProcess.Kind) throws {
        try Self.withServers(source, target) { a, b, port in
            #expect(try a.command("MSET", "k1", "1", "k2", "2", "k3", "3", "k4", "4", "k5", "5") == .status("OK"))
            let connections = try #require(try b.infoInteger("stats", "total_connections_received"))
            let selects = try Self.calls(b, "select")

            for (key, database) in [("k1", "0"), ("k2", "1"), ("k3", "0")] {
                #expect(try a.command("MIGRATE", "127.0.0.1", port, key, database, "5000") == .status("OK"))
            }
            #expect(try b.infoInteger("stats", "total_connections_received") == connections + 1, "one connection for three")
            #expect(try b.infoInteger("clients", "connected_clients") == 2)
            #expect(try a.infoInteger("stats", "migrate_cached_sockets") == 1)

            // The target closes the kept connection: the next MIGRATE finds out and makes a new one.
            #expect(try b.command("CLIENT", "KILL", "TYPE", "normal") == .integer(1))
            // The kill takes effect on the connection's own thread: wait for it.
            let killed = Date()
            while try b.infoInteger("clients", "connected_clients") != 1 && Date().timeIntervalSince(killed) < 10 {
                usleep(10_000)
            }
            #expect(try a.command("MIGRATE", "127.0.0.1", port, "k4", "1", "5000") == .status("OK"))
            #expect(try a.command("MIGRATE", "127.0.0.1", port, "k5", "1", "5000") == .status("OK"))
            #expect(try b.infoInteger("stats", "total_connections_received") == connections + 2)
            // SELECT 0, 1, 0 on the first connection, 1 on the second; none for k5 (database 1 already).
            #expect(try Self.calls(b, "select") - selects == 4)

            #expect(try a.command("EXISTS", "k1", "k2", "k3", "k4", "k5") == .integer(0))
            #expect(try b.command("MGET", "k1", "k2", "k3") == .array([.bulk("1"), .null, .bulk("3")]))
            #expect(try b.command("SELECT", "1") == .status("OK"))
            #expect(try b.command("MGET", "k2", "k4", "k5") == .array([.bulk("2"), .bulk("4"), .bulk("5")]))
        }
    }

    @Test("a kept connection unused for 10 seconds is closed (both directions side by side)")
    func keptConnectionCloses() throws {
        var servers: [(from: ServerProcess, to: ServerProcess)] = []
        defer { for pair in servers { pair.from.stop(); pair.to.stop() } }
        for (source, target) in Self.pairs {
            servers.append((try ServerProcess.start(source), try ServerProcess.start(target)))
        }
        var connections: [(a: HiredisConnection, b: HiredisConnection, migrated: Date)] = []
        for (from, to) in servers {
            let a = try from.connect()
            let b = try to.connect()
            #expect(try a.command("SET", "k", "v") == .status("OK"))
            #expect(try a.command("MIGRATE", "127.0.0.1", String(to.port), "k", "0", "5000") == .status("OK"))
            connections.append((a, b, Date()))
        }
        for (a, b, _) in connections {
            #expect(try b.infoInteger("clients", "connected_clients") == 2)
            #expect(try a.infoInteger("stats", "migrate_cached_sockets") == 1)
        }
        for (source, (a, b, migrated)) in zip(Self.pairs.map(\.0), connections) {
            while try b.infoInteger("clients", "connected_clients") == 2 && Date().timeIntervalSince(migrated) < 30 {
                usleep(100_000)
            }
            let kept = Date().timeIntervalSince(migrated)
            #expect(try b.infoInteger("clients", "connected_clients") == 1)
            #expect(try a.infoInteger("stats", "migrate_cached_sockets") == 0)
            #expect(kept > 9 && kept < 20, "\(source)'s connection was closed after \(kept) s")
        }
    }
}
