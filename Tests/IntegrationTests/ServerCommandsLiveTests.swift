import CachedTestSupport
import Foundation
import Testing

/// INFO, CLIENT and COMMAND across real connections, checked against redis-server.
@Suite("INFO, CLIENT and COMMAND over the network")
struct ServerCommandsLiveTests {
    static let kinds: [ServerProcess.Kind] = [.redis, .cached]

    // MARK: INFO

    private func stat(_ connection: HiredisConnection, _ name: String) throws -> Int {
        let value = try connection.info("stats")[name] ?? connection.info("clients")[name]
        return try #require(value.flatMap { Int($0) }, "\(name) in INFO")
    }

    @Test("INFO: the default sections under # headers, every line ending in CRLF", arguments: kinds)
    func sections(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let text = try #require(try server.connect().command("INFO").text)

        for header in ["# Server", "# Clients", "# Memory", "# Stats", "# Keyspace"] {
            #expect(text.contains("\r\n\(header)\r\n") || text.hasPrefix("\(header)\r\n"), "\(header)")
        }
        #expect(text.hasSuffix("\r\n"))
        #expect(!text.replacingOccurrences(of: "\r\n", with: "").contains("\n"), "no bare LF")
        #expect(!text.replacingOccurrences(of: "\r\n", with: "").contains("\r"), "no bare CR")
        for line in text.split(separator: "\r\n") where !line.hasPrefix("# ") {
            #expect(line.contains(":"), "\(line)")
        }
    }

    /// Fields of Redis 7.0's INFO that cached-server leaves out: it does not measure them (see `info-fields` in
    /// docs/commands.md), or they describe Redis's build.
    static let fieldsNotReported: Set<String> = [
        "redis_git_sha1", "redis_git_dirty", "redis_build_id", "atomicvar_api", "gcc_version", "lru_clock",
        "client_recent_max_input_buffer", "client_recent_max_output_buffer", "mem_clients_normal",
        "current_save_keys_processed", "current_save_keys_total", "expired_stale_perc",
        "expired_time_cap_reached_count", "expire_cycle_cpu_milliseconds", "total_eviction_exceeded_time",
        "current_eviction_exceeded_time", "dump_payload_sanitizations", "total_reads_processed",
        "total_writes_processed", "io_threaded_reads_processed", "io_threaded_writes_processed",
        "reply_buffer_shrinks", "reply_buffer_expands", "repl_backlog_size", "used_cpu_sys_main_thread",
        "used_cpu_user_main_thread",
    ]

    /// The field names of `INFO everything` by section, commandstats, errorstats and latencystats left out.
    private func infoFields(_ server: ServerProcess) throws -> [String: Set<String>] {
        let text = try #require(try server.connect().command("INFO", "everything").text)
        var fields: [String: Set<String>] = [:]
        var section = ""
        for line in text.split(separator: "\r\n") {
            if line.hasPrefix("# ") {
                section = String(line.dropFirst(2))
            } else if !["Commandstats", "Errorstats", "Latencystats", "Keyspace"].contains(section),
                let colon = line.firstIndex(of: ":")
            {
                fields[section, default: []].insert(String(line[..<colon]))
            }
        }
        return fields
    }

    @Test("INFO everything: every field of Redis 7.0's in the same section, but those not measured here")
    func sameFieldsAsRedis() throws {
        let redis = try ServerProcess.start(.redis)
        defer { redis.stop() }
        let cached = try ServerProcess.start(.cached)
        defer { cached.stop() }
        let expected = try infoFields(redis)
        let actual = try infoFields(cached)
        #expect(Set(actual.keys) == Set(expected.keys))
        for (section, names) in expected {
            let missing = names.subtracting(actual[section] ?? []).subtracting(Self.fieldsNotReported)
            #expect(missing.isEmpty, "# \(section) lacks \(missing.sorted())")
        }
        let stats = try cached.connect().info("memory")
        #expect(stats["lazyfree_pending_objects"] == "0")
        #expect(stats["mem_not_counted_for_evict"] == "0")
    }

    @Test("INFO server / INFO SERVER CLIENTS: only the sections asked for, in any case", arguments: kinds)
    func chosenSections(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let connection = try server.connect()

        let one = try #require(try connection.command("INFO", "server").text)
        #expect(one.hasPrefix("# Server\r\n") && !one.contains("# Clients"))
        let two = try #require(try connection.command("INFO", "SERVER", "CLIENTS").text)
        #expect(two.hasPrefix("# Server\r\n") && two.contains("\r\n\r\n# Clients\r\n") && !two.contains("# Memory"))
    }

    @Test("INFO with an unknown section is an empty bulk string", arguments: kinds)
    func unknownSection(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let connection = try RawConnection(port: server.port)

        try connection.send(.respCommand(["INFO", "foo"]))

        #expect(try connection.read(count: 6) == Array("$0\r\n\r\n".utf8))
    }

    @Test("INFO keyspace: db<N>:keys=N,expires=M,avg_ttl=T for each non-empty database", arguments: kinds)
    func keyspace(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let connection = try server.connect()
        #expect(try connection.command("INFO", "keyspace") == .bulk("# Keyspace\r\n"))
        try connection.command("MSET", "a", "1", "b", "2", "c", "3")
        try connection.command("SET", "d", "4", "EX", "100")
        try connection.command("SELECT", "3")
        try connection.command("SET", "e", "5")

        let text = try #require(try connection.command("INFO", "keyspace").text)

        let lines = text.split(separator: "\r\n").map(String.init)
        #expect(lines.count == 3 && lines[0] == "# Keyspace", "\(text)")
        let db0 = try #require(lines[1].wholeMatch(of: try Regex(#"db0:keys=4,expires=1,avg_ttl=(\d+)"#)), "\(text)")
        let ttl = Int(db0.output[1].substring ?? "") ?? -1
        #expect((0...100_000).contains(ttl), "avg_ttl is in milliseconds")
        #expect(lines[2] == "db3:keys=1,expires=0,avg_ttl=0")
    }

    @Test("keyspace_hits and keyspace_misses count reads that found a key or not", arguments: kinds)
    func hitsAndMisses(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let connection = try server.connect()
        try connection.command("SET", "here", "1")

        try connection.command("GET", "here")
        try connection.command("GET", "here")
        try connection.command("GET", "missing")
        try connection.command("MGET", "here", "missing", "missing2")

        #expect(try stat(connection, "keyspace_hits") == 3)
        #expect(try stat(connection, "keyspace_misses") == 3)

        // Every command that reads a key counts, not only GET: EXISTS per key, TYPE, the TTL family, STRLEN,
        // and the old value GETSET and SET ... GET read. Writes (INCR, APPEND, DEL) do not.
        try connection.command("EXISTS", "here", "missing", "here")
        try connection.command("TYPE", "here")
        try connection.command("TYPE", "missing")
        try connection.command("TTL", "here")
        try connection.command("PTTL", "missing")
        try connection.command("EXPIRETIME", "here")
        try connection.command("STRLEN", "missing")
        try connection.command("GETSET", "here", "2")
        try connection.command("SET", "new", "1", "GET")
        try connection.command("INCR", "counter")
        try connection.command("APPEND", "here", "x")
        try connection.command("DEL", "missing")
        // OBJECT and COPY's source count; MEMORY USAGE does not.
        try connection.command("OBJECT", "ENCODING", "here")
        try connection.command("OBJECT", "REFCOUNT", "missing")
        try connection.command("COPY", "here", "copied")
        try connection.command("COPY", "missing", "copied2")
        try connection.command("MEMORY", "USAGE", "here")
        try connection.command("MEMORY", "USAGE", "missing")
        // Bitmap reads count; SETBIT, a write, does not.
        try connection.command("GETBIT", "here", "0")
        try connection.command("BITCOUNT", "missing")
        try connection.command("BITPOS", "here", "1")
        try connection.command("BITOP", "OR", "dest", "here", "missing")
        try connection.command("SETBIT", "bits", "3", "1")

        #expect(try stat(connection, "keyspace_hits") == 3 + 6 + 2 + 3)
        #expect(try stat(connection, "keyspace_misses") == 3 + 5 + 2 + 2)
    }

    /// Commands that look keys up, in order: each one's effect on keyspace_hits and keyspace_misses is compared
    /// with Redis's. Reads of present and missing keys, writes that also read (GETSET, SET ... GET), writes,
    /// multi-key commands, MIGRATE of a missing key (a read, answered NOKEY before any connection), and lookups
    /// that do not count (MEMORY USAGE, the bitmap writes).
    static let lookups: [[String]] = [
        ["SET", "here", "abc"], ["GET", "here"], ["GET", "missing"], ["MGET", "here", "missing", "here"],
        ["STRLEN", "here"], ["STRLEN", "missing"], ["GETRANGE", "here", "0", "-1"], ["GETRANGE", "missing", "0", "1"],
        ["GETEX", "here"], ["GETEX", "missing"], ["GETEX", "here", "PERSIST"], ["GETEX", "here", "EX", "x"],
        ["SET", "gone", "1"], ["GETDEL", "gone"], ["GETDEL", "gone"], ["GETSET", "here", "abcd"],
        ["GETSET", "new1", "1"], ["SET", "here", "abcde", "GET"], ["SET", "new2", "1", "GET"],
        ["SET", "here", "x", "NX", "GET"], ["SET", "new3", "x", "XX", "GET"], ["SETNX", "here", "x"],
        ["SET", "here", "abc", "XX"], ["EXISTS", "here", "missing", "here"], ["TOUCH", "here", "missing"],
        ["TYPE", "here"], ["TYPE", "missing"], ["TTL", "here"], ["PTTL", "missing"], ["EXPIRETIME", "here"],
        ["PEXPIRETIME", "missing"], ["EXPIRE", "here", "100"], ["EXPIRE", "missing", "100"], ["PERSIST", "here"],
        ["PERSIST", "missing"], ["DUMP", "here"], ["DUMP", "missing"], ["COPY", "here", "copied"],
        ["COPY", "missing", "copied2"], ["COPY", "here", "copied"], ["RENAME", "copied", "renamed"],
        ["RENAMENX", "renamed", "here"], ["MOVE", "renamed", "1"], ["OBJECT", "ENCODING", "here"],
        ["OBJECT", "FREQ", "here"], ["OBJECT", "IDLETIME", "missing"], ["MEMORY", "USAGE", "here"],
        ["MEMORY", "USAGE", "missing"], ["GETBIT", "here", "3"], ["GETBIT", "missing", "3"],
        ["SETBIT", "bits", "9", "1"], ["SETBIT", "bits", "1", "1"], ["BITCOUNT", "here"], ["BITCOUNT", "missing"],
        ["BITPOS", "here", "1"], ["BITPOS", "missing", "0"], ["BITOP", "AND", "dest", "here", "missing", "bits"],
        ["BITFIELD", "here", "GET", "u8", "0"], ["BITFIELD", "missing", "GET", "u8", "0"],
        ["BITFIELD_RO", "bits", "GET", "u8", "0"], ["BITFIELD", "bits", "SET", "u8", "0", "1"],
        ["LCS", "here", "missing"], ["LCS", "here", "bits"], ["APPEND", "here", "x"], ["APPEND", "new4", "x"],
        ["SETRANGE", "here", "1", "y"], ["INCR", "counter"], ["INCRBY", "counter", "2"],
        ["INCRBYFLOAT", "float", "1.5"], ["MSET", "a", "1", "b", "2"], ["MSETNX", "a", "1", "c", "3"],
        ["DEL", "missing", "a"], ["MIGRATE", "127.0.0.1", "1", "missing", "0", "100"], ["GET", "here"],
    ]

    @Test("every command that looks a key up counts keyspace hits and misses as Redis does")
    func hitsAndMissesPerCommand() throws {
        /// The hits and misses each command of ``lookups`` added, on a fresh server of `kind`.
        func counts(_ kind: ServerProcess.Kind) throws -> [[Int]] {
            let server = try ServerProcess.start(kind)
            defer { server.stop() }
            let connection = try server.connect()
            var last = [0, 0]
            return try Self.lookups.map { command in
                try connection.command(command)
                let now = [try stat(connection, "keyspace_hits"), try stat(connection, "keyspace_misses")]
                defer { last = now }
                return [now[0] - last[0], now[1] - last[1]]
            }
        }
        let redis = try counts(.redis)
        let cached = try counts(.cached)
        #expect(redis.contains([1, 0]) && redis.contains([0, 1]) && redis.contains([0, 0]))
        for (i, command) in Self.lookups.enumerated() {
            #expect(cached[i] == redis[i], "[hits, misses] of \(command.joined(separator: " "))")
        }
    }

    @Test("expired_keys counts a key that expired", arguments: kinds)
    func expiredKeys(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let connection = try server.connect()
        try connection.command("SET", "short", "1", "PX", "1")
        try connection.command("SET", "long", "1", "EX", "1000")

        try poll("the key to expire") { try connection.command("EXISTS", "short") == .integer(0) }

        #expect(try stat(connection, "expired_keys") == 1)
    }

    @Test("total_commands_processed counts every command, INFO included", arguments: kinds)
    func commandsProcessed(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let connection = try server.connect()
        let before = try stat(connection, "total_commands_processed")

        try connection.command("PING")
        try connection.command("SET", "k", "v")
        try connection.command("GET", "k")
        // Refused before they run, so not counted: an unknown command, the wrong number of arguments.
        try connection.command("NOSUCH")
        try connection.command("GET")
        try connection.command("CLIENT", "NOSUCH")
        // Run, though they answer with an error: counted.
        try connection.command("INCR", "k")

        // The four commands that ran, and the INFO that read `before`.
        #expect(try stat(connection, "total_commands_processed") == before + 5)
    }

    @Test("total_connections_received and connected_clients follow connections opening and closing", arguments: kinds)
    func connections(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let connection = try server.connect()
        try poll("the readiness probe to go") { try stat(connection, "connected_clients") == 1 }
        let received = try stat(connection, "total_connections_received")

        var others = [try server.connect(), try server.connect()]
        for other in others { #expect(try other.command("PING") == .status("PONG")) }
        #expect(try stat(connection, "total_connections_received") == received + 2)
        #expect(try stat(connection, "connected_clients") == 3)

        others.removeLast()
        try poll("the closed connection to go") { try stat(connection, "connected_clients") == 2 }
        #expect(try stat(connection, "total_connections_received") == received + 2)
        withExtendedLifetime(others) {}
    }

    @Test("CONFIG RESETSTAT zeroes the counters", arguments: kinds)
    func resetStat(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let connection = try server.connect()
        try connection.command("SET", "here", "1", "PX", "1")
        try poll("the key to expire") { try connection.command("GET", "here") == .null }
        try connection.command("SET", "here", "1")
        try connection.command("GET", "here")
        #expect(try stat(connection, "keyspace_hits") > 0)

        #expect(try connection.command("CONFIG", "RESETSTAT") == .ok)

        let stats = try connection.info("stats")
        #expect(stats["keyspace_hits"] == "0")
        #expect(stats["keyspace_misses"] == "0")
        #expect(stats["expired_keys"] == "0")
        #expect(stats["total_connections_received"] == "0")
        #expect(stats["rejected_connections"] == "0")
        #expect(stats["total_commands_processed"] == "1", "CONFIG RESETSTAT itself, counted once it finished")
        #expect(try stat(connection, "connected_clients") == 1, "connected clients are not a counter")
    }

    @Test("redis-cli --stat -i 0.1 prints its table without errors", arguments: kinds)
    func redisCliStat(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        try server.connect().command("MSET", "a", "1", "b", "2")

        // --stat never ends on its own: it is stopped after a second, about ten intervals.
        let output = try server.redisCliUntilKilled(["--stat", "-i", "0.1"], after: 1)

        let lines = output.lines
        #expect(lines.first?.contains("------- data ------") == true, "\(output.summary)")
        let rows = lines.filter { $0.first?.isNumber == true }
        #expect(rows.count >= 2, "\(output.summary)")
        #expect(rows.allSatisfy { $0.split(separator: " ", omittingEmptySubsequences: true).first == "2" }, "keys: \(rows)")
        #expect(!output.standardOutput.contains("rror") && output.standardError.isEmpty, "\(output.summary)")
    }

    // MARK: CLIENT

    @Test("CLIENT LIST's cmd is the last command: container|subcommand for subcommands, NULL after an unknown one",
          arguments: kinds)
    func clientListLastCommand(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let other = try RawConnection(port: server.port)
        try other.send(.respCommand(["CLIENT", "ID"]))
        guard case .integer(let otherID) = try other.readReplies(1)[0] else { throw TestEnvironmentError("CLIENT ID") }
        let viewer = try RawConnection(port: server.port)
        func lastCommand(after request: [String]) throws -> String? {
            try other.send(.respCommand(request))
            _ = try other.readReplies(1)
            try viewer.send(.respCommand(["CLIENT", "LIST", "ID", String(otherID)]))
            let line = try viewer.readReplies(1)[0].text ?? ""
            return line.split(separator: " ").first { $0.hasPrefix("cmd=") }.map { String($0.dropFirst(4)) }
        }

        #expect(try lastCommand(after: ["CLIENT", "ID"]) == "client|id")
        #expect(try lastCommand(after: ["CLIENT", "GETNAME"]) == "client|getname")
        #expect(try lastCommand(after: ["CONFIG", "GET", "hz"]) == "config|get")
        #expect(try lastCommand(after: ["COMMAND", "COUNT"]) == "command|count")
        #expect(try lastCommand(after: ["PUBSUB", "NUMPAT"]) == "pubsub|numpat")
        #expect(try lastCommand(after: ["GET", "k"]) == "get")
        #expect(try lastCommand(after: ["NOSUCH"]) == "NULL")
        #expect(try lastCommand(after: ["GET"]) == "get", "a known command with the wrong arity is still named")
        #expect(try lastCommand(after: ["CLIENT", "NOSUCH"]) == "NULL")
        #expect(try lastCommand(after: ["CLIENT", "ID", "extra"]) == "client|id")
        #expect(try lastCommand(after: ["CLIENT"]) == "client")
    }

    @Test("CLIENT LIST shows every connection with id, addr, laddr, name, db and cmd", arguments: kinds)
    func clientList(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let named = try RawConnection(port: server.port)
        try named.send(.respCommand(["CLIENT", "SETNAME", "worker-1"]) + .respCommand(["SELECT", "2"]))
        #expect(try named.readReplies(2) == [.ok, .ok])
        let viewer = try RawConnection(port: server.port)
        try viewer.send(.respCommand(["CLIENT", "ID"]))
        guard case .integer(let viewerID) = try viewer.readReplies(1)[0] else { throw TestEnvironmentError("CLIENT ID") }
        try poll("only the two connections to be left") {
            try viewer.send(.respCommand(["CLIENT", "LIST"]))
            return try viewer.readReplies(1)[0].text?.split(separator: "\n").count == 2
        }

        try viewer.send(.respCommand(["CLIENT", "LIST"]))
        let list = try #require(try viewer.readReplies(1)[0].text)

        #expect(list.hasSuffix("\n"))
        let lines = list.split(separator: "\n").map(String.init)
        let fields = lines.map { line in
            Dictionary(line.split(separator: " ").map { ($0.split(separator: "=", maxSplits: 1).map(String.init) + [""]) }
                .map { ($0[0], $0[1]) }, uniquingKeysWith: { a, _ in a })
        }
        let worker = try #require(fields.first { $0["name"] == "worker-1" }, "\(list)")
        #expect(worker["addr"] == named.localAddress)
        #expect(worker["laddr"] == "127.0.0.1:\(server.port)")
        #expect(worker["db"] == "2")
        #expect(worker["cmd"] == "select")
        #expect(worker["flags"] == "N")
        let me = try #require(fields.first { $0["id"] == String(viewerID) }, "\(list)")
        #expect(me["addr"] == viewer.localAddress)
        #expect(me["name"] == "" && me["db"] == "0" && me["cmd"] == "client|list")
        for line in lines {
            #expect(line.hasPrefix("id="), "\(line)")
            for field in [" addr=", " laddr=", " name=", " age=", " idle=", " flags=", " db=", " cmd=", " user=default", " resp=2"] {
                #expect(line.contains(field), "\(field) in \(line)")
            }
        }
    }

    @Test("CLIENT KILL ID closes that connection and returns the count", arguments: kinds)
    func killByID(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let target = try RawConnection(port: server.port)
        try target.send(.respCommand(["CLIENT", "ID"]))
        guard case .integer(let id) = try target.readReplies(1)[0] else { throw TestEnvironmentError("CLIENT ID") }
        let killer = try server.connect()

        #expect(try killer.command("CLIENT", "KILL", "ID", String(id)) == .integer(1))

        #expect(try target.closedByServer(within: 5))
        #expect(try killer.command("CLIENT", "KILL", "ID", String(id)) == .integer(0))
        #expect(try killer.command("PING") == .status("PONG"))
    }

    @Test("CLIENT KILL ADDR ip:port returns 1, and CLIENT KILL ip:port OK; each closes the target", arguments: kinds)
    func killByAddress(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let first = try RawConnection(port: server.port), second = try RawConnection(port: server.port)
        for connection in [first, second] {
            try connection.send(.respCommand(["PING"]))
            _ = try connection.readReplies(1)
        }
        let killer = try server.connect()

        #expect(try killer.command("CLIENT", "KILL", "ADDR", first.localAddress) == .integer(1))
        #expect(try killer.command("CLIENT", "KILL", second.localAddress) == .ok)

        #expect(try first.closedByServer(within: 5))
        #expect(try second.closedByServer(within: 5))
    }

    @Test("CLIENT KILL of an unknown ip:port is ERR No such client", arguments: kinds)
    func killUnknown(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let connection = try server.connect()

        #expect(try connection.command("CLIENT", "KILL", "10.1.2.3:4567") == .error("ERR No such client"))
        #expect(try connection.command("CLIENT", "KILL", "ADDR", "10.1.2.3:4567") == .integer(0))
    }

    @Test("CLIENT NO-EVICT on is OK and shows as flag e in CLIENT LIST; off clears it", arguments: kinds)
    func noEvict(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let connection = try server.connect()

        #expect(try connection.command("CLIENT", "NO-EVICT", "on") == .ok)
        #expect(try connection.command("CLIENT", "INFO").text?.contains(" flags=e ") == true)
        #expect(try connection.command("CLIENT", "NO-EVICT", "off") == .ok)
        #expect(try connection.command("CLIENT", "INFO").text?.contains(" flags=N ") == true)
        #expect(try connection.command("CLIENT", "NO-EVICT", "maybe") == .error("ERR syntax error"))
    }

    // MARK: COMMAND

    @Test("COMMAND COUNT is the number of entries COMMAND lists", arguments: kinds)
    func commandCount(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let connection = try server.connect()

        guard case .integer(let count) = try connection.command("COMMAND", "COUNT"),
            case .array(let entries) = try connection.command("COMMAND")
        else { throw TestEnvironmentError("COMMAND COUNT / COMMAND") }

        #expect(entries.count == Int(count))
        #expect(count > 40)
        guard case .array(let names) = try connection.command("COMMAND", "LIST") else { throw TestEnvironmentError("COMMAND LIST") }
        let subcommands = entries.reduce(0) { total, entry in
            guard case .array(let fields) = entry, case .array(let subs) = fields.last else { return total }
            return total + subs.count
        }
        #expect(names.count == Int(count) + subcommands, "COMMAND LIST names the subcommands too")
        #expect(names.contains(.bulk("client|kill")) && names.contains(.bulk("config|get")))
    }

    @Test("MEMORY DOCTOR: too little data to judge, then a report that names a memory limit about to be reached")
    func memoryDoctor() throws {
        let server = try ServerProcess.start(.cached)
        defer { server.stop() }
        let connection = try server.connect()
        #expect(try connection.command("MEMORY", "DOCTOR").text?.contains("holds little data") == true)

        try server.load(count: 60_000, name: { "key:\($0)" }, value: { _ in String(repeating: "v", count: 100) })
        let healthy = try connection.command("MEMORY", "DOCTOR").text ?? ""
        #expect(healthy.hasPrefix("No memory problems found"), "\(healthy)")

        guard case .bulk(let info) = try connection.command("INFO", "memory"),
            let line = String(decoding: info, as: UTF8.self).split(separator: "\r\n").first(where: { $0.hasPrefix("used_memory:") }),
            let used = Int(line.dropFirst("used_memory:".count))
        else { throw TestEnvironmentError("INFO memory has no used_memory") }
        #expect(try connection.command("CONFIG", "SET", "maxmemory-policy", "noeviction", "maxmemory", "\(used + used / 20)") == .ok)
        let near = try connection.command("MEMORY", "DOCTOR").text ?? ""
        #expect(near.contains("near maxmemory") && near.contains("noeviction"), "\(near)")
    }

    @Test("COMMAND INFO of every command and subcommand: name, arity, flags, keys and categories as redis-server's")
    func commandInfoMatchesRedis() throws {
        let redis = try ServerProcess.start(.redis), cached = try ServerProcess.start(.cached)
        defer { redis.stop(); cached.stop() }
        guard case .array(let names) = try cached.connect().command("COMMAND", "LIST") else {
            throw TestEnvironmentError("COMMAND LIST did not return an array")
        }
        let query = ["COMMAND", "INFO"] + names.compactMap(\.text) + ["no-such-command", "client|no-such"]

        guard case .array(let expected) = try redis.connect().command(query),
            case .array(let actual) = try cached.connect().command(query)
        else { throw TestEnvironmentError("COMMAND INFO did not return arrays") }

        #expect(actual.count == expected.count)
        for (got, want) in zip(actual, expected) {
            guard case .array(let g) = got, case .array(let w) = want else {
                #expect(got == want)
                continue
            }
            #expect(g.count == 10 && w.count == 10)
            #expect(Array(g.prefix(7)) == Array(w.prefix(7)), "\(w.first.map(\.description) ?? "")")
        }
    }

    @Test("COMMAND DOCS get: a map with summary, since and group", arguments: kinds)
    func commandDocs(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }

        guard case .array(let docs) = try server.connect().command("COMMAND", "DOCS", "get") else {
            throw TestEnvironmentError("COMMAND DOCS is not a map")
        }

        #expect(docs.count == 2 && docs[0] == .bulk("get"))
        guard case .array(let fields) = docs.last else { throw TestEnvironmentError("the docs of get are not a map") }
        var map: [String: RedisReply] = [:]
        for pair in stride(from: 0, to: fields.count - 1, by: 2) { map[fields[pair].text ?? "?"] = fields[pair + 1] }
        #expect(map["summary"] == .bulk("Get the value of a key"))
        #expect(map["since"] == .bulk("1.0.0"))
        #expect(map["group"] == .bulk("string"))
        #expect(map["complexity"] == .bulk("O(1)"))
    }

    // MARK: latency tracking

    @Test("LATENCY HISTOGRAM and INFO latencystats: calls, Redis's bucket labels, percentiles in microseconds", arguments: kinds)
    func latencyHistogram(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let connection = try server.connect()
        _ = try connection.command("CONFIG", "RESETSTAT")
        for i in 0..<40 { _ = try connection.command("SET", "k\(i)", "v") }
        guard case .array(let reply) = try connection.command("LATENCY", "HISTOGRAM", "set", "nosuch") else {
            Issue.record("LATENCY HISTOGRAM is not an array")
            return
        }
        #expect(reply.count == 2 && reply[0] == .bulk(Array("set".utf8)))
        guard reply.count == 2, case .array(let fields) = reply[1], fields.count == 4,
            case .array(let rows) = fields[3]
        else {
            Issue.record("set's histogram: \(reply)")
            return
        }
        #expect(fields[0] == .bulk(Array("calls".utf8)) && fields[1] == .integer(40))
        #expect(fields[2] == .bulk(Array("histogram_usec".utf8)))
        let labels = Set([1, 2, 4, 8, 16, 33, 66, 132, 264, 528, 1056, 2113, 4227, 8454, 16908, 33816, 67633])
        var previous: Int64 = 0
        for pair in stride(from: 0, to: rows.count - 1, by: 2) {
            guard case .integer(let label) = rows[pair], case .integer(let calls) = rows[pair + 1] else {
                Issue.record("row \(pair / 2): \(rows[pair]), \(rows[pair + 1])")
                continue
            }
            #expect(labels.contains(Int(label)), "label \(label)")
            #expect(calls > previous)
            previous = calls
        }
        #expect(previous == 40)

        let text = try #require(try connection.command("INFO", "latencystats").text)
        #expect(text.hasPrefix("# Latencystats\r\n"))
        let line = try #require(text.split(separator: "\r\n").first { $0.hasPrefix("latency_percentiles_usec_set:") })
        let values = line.dropFirst("latency_percentiles_usec_set:".count).split(separator: ",")
        #expect(values.map { $0.split(separator: "=")[0] } == ["p50", "p99", "p99.9"])
        for value in values {
            let number = String(value.split(separator: "=")[1])
            #expect(Double(number) != nil && number.split(separator: ".").last?.count == 3, "\(value)")
        }
    }

    // MARK: MEMORY STATS

    @Test("MEMORY STATS: Redis's fields in Redis's order; keys counted, the dataset growing with the values")
    func memoryStats() throws {
        func stats(_ connection: HiredisConnection) throws -> [(String, RedisReply)] {
            guard case .array(let items) = try connection.command("MEMORY", "STATS"), items.count % 2 == 0 else {
                throw TestEnvironmentError("MEMORY STATS is not an array of pairs")
            }
            return stride(from: 0, to: items.count, by: 2).map { (items[$0].text ?? "?", items[$0 + 1]) }
        }
        let cached = try ServerProcess.start(.cached)
        defer { cached.stop() }
        let redis = try ServerProcess.start(.redis)
        defer { redis.stop() }
        var names: [[String]] = []
        for server in [cached, redis] {
            let connection = try server.connect()
            for i in 0..<2_000 { _ = try connection.command("SET", "key:\(i)", String(repeating: "v", count: 200)) }
            _ = try connection.command("SELECT", "3")
            _ = try connection.command("SET", "other", "1", "EX", "100")
            names.append(try stats(connection).map(\.0))
        }
        #expect(names[0] == names[1])
        let fields = Dictionary(try stats(try cached.connect()), uniquingKeysWith: { a, _ in a })
        #expect(fields["keys.count"] == .integer(2_001))
        guard case .integer(let dataset) = fields["dataset.bytes"], case .integer(let total) = fields["total.allocated"],
            case .integer(let peak) = fields["peak.allocated"], case .integer(let overhead) = fields["overhead.total"]
        else {
            Issue.record("MEMORY STATS figures: \(fields)")
            return
        }
        #expect(dataset >= 2_000 * 200 && dataset < 2_000 * 400)
        #expect(peak >= total && dataset + overhead == total)
        guard case .array(let db3) = fields["db.3"] else {
            Issue.record("db.3: \(String(describing: fields["db.3"]))")
            return
        }
        #expect(db3.count == 6 && db3[2] == .bulk(Array("overhead.hashtable.expires".utf8)))
    }
}
