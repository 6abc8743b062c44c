import CacheCore
import CacheServer
import RESP
import Testing

/// INFO commandstats and errorstats, and SLOWLOG, inside the server.
@Suite("INFO commandstats, errorstats and SLOWLOG")
struct CommandStatisticsTests {
    func fields(_ h: Harness, _ section: String) -> [String: String] { h.infoFields(section) }

    /// `calls=...,usec=...` as a dictionary of integers (usec_per_call left out).
    func counters(_ line: String?) -> [String: Int] {
        var result: [String: Int] = [:]
        for part in (line ?? "").split(separator: ",") {
            let pair = part.split(separator: "=")
            if pair.count == 2, let value = Int(pair[1]) { result[String(pair[0])] = value }
        }
        return result
    }

    @Test("commandstats counts calls, failures (error replies) and refusals (before running), per subcommand too")
    func commandCounters() {
        let h = Harness()
        h.run("SET", "k", "v")
        h.run("GET", "k")
        h.run("GET", "missing")
        h.run("INCR", "k")  // runs, answers an error
        h.run("GET")  // refused: arity
        h.run("CLIENT", "ID")
        h.run("CLIENT", "ID", "extra")  // refused: the subcommand's arity
        h.run("CLIENT", "NOSUCH")  // no command to count it on
        let stats = fields(h, "commandstats")
        #expect(counters(stats["cmdstat_get"]) == ["calls": 2, "usec": counters(stats["cmdstat_get"])["usec"] ?? -1, "rejected_calls": 1, "failed_calls": 0])
        #expect(counters(stats["cmdstat_incr"])["failed_calls"] == 1)
        #expect(counters(stats["cmdstat_incr"])["calls"] == 1)
        #expect(counters(stats["cmdstat_client|id"])["calls"] == 1)
        #expect(counters(stats["cmdstat_client|id"])["rejected_calls"] == 1)
        #expect(stats["cmdstat_client"] == nil && stats["cmdstat_del"] == nil, "commands never called are not listed")
        #expect(fields(h, "errorstats") == ["errorstat_ERR": "count=4"])
        #expect(fields(h, "stats")["total_error_replies"] == "4")
        #expect(fields(h, "default")["cmdstat_get"] == nil, "not a default section")
        #expect(fields(h, "all")["cmdstat_get"] != nil)
    }

    @Test("errorstats names each error by its first word; EXEC's queued commands count on their own")
    func errorPrefixes() {
        let h = Harness(requirePass: "secret")
        h.run("GET", "k")  // NOAUTH
        h.run("AUTH", "wrong")  // WRONGPASS
        #expect(h.run("AUTH", "secret") == .ok)
        h.run("MULTI")
        h.run("SET", "k", "v")
        h.run("INCR", "k")
        h.run("EXEC")
        h.run("MULTI")
        h.run("GET")  // refused while queuing: EXEC is aborted
        h.run("EXEC")
        let errors = fields(h, "errorstats")
        #expect(errors["errorstat_NOAUTH"] == "count=1")
        #expect(errors["errorstat_WRONGPASS"] == "count=1")
        #expect(errors["errorstat_EXECABORT"] == "count=1")
        #expect(errors["errorstat_ERR"] == "count=2")  // INCR inside EXEC, GET's arity
        let stats = fields(h, "commandstats")
        #expect(counters(stats["cmdstat_incr"])["failed_calls"] == 1)
        #expect(counters(stats["cmdstat_set"])["calls"] == 1)
        // As Redis: an EXEC that answers EXECABORT ran, and failed.
        #expect(counters(stats["cmdstat_exec"])["calls"] == 2)
        #expect(counters(stats["cmdstat_exec"])["failed_calls"] == 1)
        #expect(counters(stats["cmdstat_get"])["rejected_calls"] == 2)  // NOAUTH, and the arity while queuing
    }

    @Test("CONFIG RESETSTAT starts commandstats and errorstats again")
    func resetStatistics() {
        let h = Harness()
        h.run("GET", "k")
        h.run("NOSUCH")
        #expect(h.run("CONFIG", "RESETSTAT") == .ok)
        let stats = fields(h, "commandstats")
        #expect(stats["cmdstat_get"] == nil)
        #expect(counters(stats["cmdstat_config|resetstat"])["calls"] == 1)
        #expect(fields(h, "errorstats").isEmpty)
        h.run("GET", "k")
        #expect(counters(fields(h, "commandstats")["cmdstat_get"])["calls"] == 1)
    }

    @Test("SLOWLOG keeps the newest commands over the threshold, cut as Redis cuts them, credentials redacted")
    func slowLogEntries() {
        let h = Harness()
        #expect(h.run("CONFIG", "SET", "slowlog-log-slower-than", "0", "slowlog-max-len", "3") == .ok)
        #expect(h.run("CLIENT", "SETNAME", "worker") == .ok)
        let long = String(repeating: "x", count: 200)
        h.run("SET", "k", long)
        h.run((["MSET"] + (0..<40).map { "a\($0)" }).map { Array($0.utf8) })
        h.run("AUTH", "default", "hunter2")
        guard case .array(let entries) = h.run("SLOWLOG", "GET", "-1") else {
            Issue.record("SLOWLOG GET is not an array")
            return
        }
        #expect(entries.count == 3)
        #expect(h.run("SLOWLOG", "LEN") == .integer(3))
        guard entries.count == 3, case .array(let auth) = entries[0], case .array(let mset) = entries[1],
            case .array(let set) = entries[2]
        else { return }
        #expect(auth[3] == .bulks("AUTH", "(redacted)", "(redacted)"), "\(entries)")
        guard case .array(let msetArguments) = mset[3] else { return }
        #expect(msetArguments.count == 32)
        #expect(msetArguments.last == .bulk("... (10 more arguments)"))
        #expect(set[3] == .bulks("SET", "k", String(repeating: "x", count: 128) + "... (72 more bytes)"))
        #expect(set[5] == .bulk("worker"))
        guard case .integer(let first) = set[0], case .integer(let last) = auth[0] else { return }
        #expect(last == first + 2, "ids increase")
        // As Redis: a lower length applies when the next entry is added (this CONFIG SET's own).
        #expect(h.run("CONFIG", "SET", "slowlog-max-len", "1") == .ok)
        #expect(h.run("SLOWLOG", "LEN") == .integer(1))
        #expect(h.run("CONFIG", "SET", "requirepass", "s3cret", "slowlog-max-len", "2") == .ok)
        guard case .array(let latest) = h.run("SLOWLOG", "GET", "1"), case .array(let config) = latest.first else {
            Issue.record("SLOWLOG GET 1 is not an array of entries")
            return
        }
        #expect(config[3] == .bulks("CONFIG", "SET", "requirepass", "(redacted)", "slowlog-max-len", "2"))
        #expect(h.run("CONFIG", "SET", "requirepass", "") == .ok)
        #expect(h.run("CONFIG", "SET", "slowlog-log-slower-than", "-1") == .ok)
        #expect(h.run("SLOWLOG", "RESET") == .ok)
        h.run("SET", "k", "v")
        #expect(h.run("SLOWLOG", "LEN") == .integer(0))
    }
}

@Suite("SLOWLOG and renamed commands")
struct SlowLogRenamedTests {
    @Test("Credentials stay redacted when CONFIG and AUTH go by other names")
    func renamedCommandsStayRedacted() {
        let h = Harness { configuration in
            configuration.renamedCommands = [.init(name: "config", newName: "cfg"), .init(name: "auth", newName: "login")]
        }
        #expect(h.run("cfg", "SET", "slowlog-log-slower-than", "0") == .ok)
        #expect(h.run("cfg", "SET", "requirepass", "s3cret") == .ok)
        #expect(h.run("login", "s3cret") == .ok)
        guard case .array(let entries) = h.run("SLOWLOG", "GET", "2"), entries.count == 2,
            case .array(let login) = entries[0], case .array(let config) = entries[1]
        else {
            Issue.record("SLOWLOG GET 2 does not hold two entries")
            return
        }
        #expect(login[3] == .bulks("login", "(redacted)"))
        #expect(config[3] == .bulks("cfg", "SET", "requirepass", "(redacted)"))
    }

    @Test("INFO commandstats and CLIENT LIST name a renamed command by its own name, as Redis does")
    func renamedCommandsKeepTheirNameInStatistics() {
        let h = Harness { configuration in
            configuration.renamedCommands = [.init(name: "get", newName: "fetch"), .init(name: "client", newName: "conn")]
        }
        h.run("fetch", "k")
        h.run("fetch")  // refused: arity, in Redis's words with the command's own name
        let stats = h.infoFields("commandstats")
        #expect(stats["cmdstat_get"]?.hasPrefix("calls=1,") == true)
        #expect(stats["cmdstat_fetch"] == nil)
        #expect(h.run("fetch") == .error("ERR wrong number of arguments for 'get' command"))
        let list = h.run("conn", "LIST").text ?? ""
        #expect(list.contains(" cmd=client|list "), "CLIENT LIST said: \(list)")
    }
}
