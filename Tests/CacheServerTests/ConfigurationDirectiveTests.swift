import CacheServer
import Logging
import NIOCore
import Testing

private func configGet(_ configuration: ServerConfiguration, _ patterns: String...) -> [String] {
    configuration.configGet(patterns).flatMap { [$0.name, $0.value] }
}

private func configSetReply(_ configuration: inout ServerConfiguration, _ pairs: (String, String)...) -> String {
    do {
        try configuration.configSet(pairs.map { (name: $0.0, value: $0.1) })
        return "OK"
    } catch {
        return error.configSetReply
    }
}

/// The value CONFIG GET reports after CONFIG SET name value, or the error reply.
private func setThenGet(_ name: String, _ value: String) -> String {
    var configuration = ServerConfiguration()
    let reply = configSetReply(&configuration, (name, value))
    return reply == "OK" ? configuration.configGet([name])[0].value : reply
}

@Suite("Directive table: defaults and CONFIG GET rendering")
struct ConfigurationDefaultsTests {
    // Each value is what `CONFIG GET` printed on redis-server 7.0.15 started without a
    // config file, except port, bind, io-threads and dbfilename, whose defaults here are
    // this server's (redis.conf's shipped bind line, one event loop per core, and a
    // snapshot file name that does not claim to be RDB), maxmemory-policy, whose
    // default here is allkeys-sieve (a cache makes room by default; see docs/commands.md),
    // and busy-poll and io-fast-path, which Redis does not have.
    @Test(
        "renders each default as redis-server does",
        arguments: [
            ("port", "6379"), ("bind", "127.0.0.1"), ("databases", "16"), ("hz", "10"),
            ("loglevel", "notice"), ("maxclients", "10000"), ("timeout", "0"),
            ("tcp-keepalive", "300"), ("tcp-backlog", "511"), ("proto-max-bulk-len", "536870912"),
            ("client-query-buffer-limit", "1073741824"), ("maxmemory", "0"),
            ("maxmemory-policy", "allkeys-sieve"), ("maxmemory-samples", "5"), ("requirepass", ""),
            ("protected-mode", "yes"), ("save", ""), ("appendonly", "no"), ("dbfilename", "cached.snapshot"),
            ("stop-writes-on-bgsave-error", "yes"),
            ("pidfile", ""), ("logfile", ""), ("daemonize", "no"), ("unixsocket", ""), ("unixsocketperm", "0"),
            ("snapshot-load-corrupt", "fail"), ("tracking-table-max-keys", "1000000"),
            ("busy-poll", "20"), ("io-fast-path", "yes"),
        ])
    func rendersDefault(name: String, value: String) {
        #expect(configGet(ServerConfiguration(), name) == [name, value])
    }

    @Test("io-threads defaults to one loop on up to two cores, then three quarters of the cores, within 1...128")
    func ioThreadsDefault() {
        let expected = [0: 1, 1: 1, 2: 1, 3: 2, 4: 3, 8: 6, 16: 12, 64: 48, 256: 128]
        for (cores, threads) in expected {
            #expect(ServerConfiguration.defaultIOThreads(cores: cores) == threads, "\(cores) cores")
        }
        #expect(ServerConfiguration().ioThreads == ServerConfiguration.defaultIOThreads(cores: System.coreCount))
    }

    @Test("dir is reported as an absolute path")
    func directoryIsAbsolute() throws {
        let value = try #require(ServerConfiguration().configGet(["dir"]).first?.value)
        #expect(value.hasPrefix("/"))
    }

    @Test("every directive has a unique lowercase name")
    func uniqueNames() {
        let names = ServerConfiguration.directiveNames
        #expect(Set(names).count == names.count)
        #expect(names.allSatisfy { $0 == $0.lowercased() })
        #expect(names.contains("maxmemory") && names.contains("io-threads") && names.contains("save"))
    }
}

@Suite("Directive table: CONFIG GET patterns")
struct ConfigurationGetTests {
    @Test("a glob pattern lists every matching directive, without regard to case")
    func globPattern() {
        let names = ServerConfiguration().configGet(["MAXMEMORY*"]).map(\.name)
        #expect(names == ["maxmemory", "maxmemory-policy", "maxmemory-samples"])
    }

    @Test("several patterns are answered together, each directive once")
    func severalPatternsNoDuplicates() {
        let names = ServerConfiguration().configGet(["hz", "h*", "maxmemory", "*memory"]).map(\.name)
        #expect(names == ["hz", "maxmemory"])
    }

    // redis-server 7.0.15: `CONFIG GET PORT port` answers only "PORT"; `CONFIG GET p*rt PORT` only "port".
    @Test("an exact name is reported as spelled, and a later spelling of it is not repeated")
    func exactNameKeepsSpelling() {
        #expect(configGet(ServerConfiguration(), "PORT", "port") == ["PORT", "6379"])
        #expect(configGet(ServerConfiguration(), "p*rt", "PORT") == ["port", "6379"])
    }

    @Test("a name without glob characters must match exactly")
    func exactNameIsNotAPattern() {
        #expect(configGet(ServerConfiguration(), "\\port").isEmpty)
        #expect(configGet(ServerConfiguration(), "por").isEmpty)
    }

    @Test("unknown names and unmatched patterns give an empty answer")
    func nothingMatches() {
        #expect(configGet(ServerConfiguration(), "nosuch", "zz*").isEmpty)
    }

    @Test(
        "* lists every directive but rename-command and user, which Redis does not keep as parameters either, and the hidden key-load-delay"
    )
    func everything() {
        #expect(
            ServerConfiguration().configGet(["*"]).map(\.name)
                == ServerConfiguration.directiveNames.filter { !["rename-command", "user", "key-load-delay"].contains($0) })
        #expect(configGet(ServerConfiguration(), "rename-command").isEmpty)
        #expect(configGet(ServerConfiguration(), "user").isEmpty)
    }
}

@Suite("Directive table: CONFIG SET")
struct ConfigurationSetTests {
    // Replies below were produced by redis-cli against redis-server 7.0.15.
    @Test(
        "rejects bad values with redis-server's replies",
        arguments: [
            ("maxmemory", "foo", "argument must be a memory value"),
            ("maxmemory", "-1", "argument must be a memory value"),
            ("maxmemory", "1.5gb", "argument must be a memory value"),
            ("maxmemory", " 12", "argument must be a memory value"),
            ("maxmemory", "+12", "argument must be a memory value"),
            ("hz", "abc", "argument couldn't be parsed into an integer"),
            ("hz", "5k", "argument couldn't be parsed into an integer"),
            ("timeout", " 5", "argument couldn't be parsed into an integer"),
            ("timeout", "+5", "argument couldn't be parsed into an integer"),
            ("timeout", "05", "argument couldn't be parsed into an integer"),
            ("timeout", "", "argument couldn't be parsed into an integer"),
            ("timeout", "-0", "argument couldn't be parsed into an integer"),
            ("timeout", "-1", "argument must be between 0 and 2147483647 inclusive"),
            ("timeout", "2147483648", "argument must be between 0 and 2147483647 inclusive"),
            ("tcp-keepalive", "-5", "argument must be between 0 and 2147483647 inclusive"),
            ("maxclients", "0", "argument must be between 1 and 4294967295 inclusive"),
            ("maxclients", "99999999999", "argument must be between 1 and 4294967295 inclusive"),
            ("port", "70000", "argument must be between 0 and 65535 inclusive"),
            ("port", "-1", "argument must be between 0 and 65535 inclusive"),
            ("port", "abc", "argument couldn't be parsed into an integer"),
            ("maxmemory-samples", "0", "argument must be between 1 and 2147483647 inclusive"),
            ("proto-max-bulk-len", "1000", "argument must be between 1048576 and 9223372036854775807 inclusive"),
            ("client-query-buffer-limit", "1000", "argument must be between 1048576 and 9223372036854775807 inclusive"),
            ("loglevel", "foo", "argument(s) must be one of the following: debug, verbose, notice, warning, nothing"),
            ("protected-mode", "maybe", "argument must be 'yes' or 'no'"),
            ("protected-mode", "1", "argument must be 'yes' or 'no'"),
            (
                "maxmemory-policy", "foo",
                "argument(s) must be one of the following: volatile-lru, volatile-lfu, volatile-random, volatile-ttl, allkeys-lru, allkeys-lfu, allkeys-random, noeviction, allkeys-sieve"
            ),
            ("save", "900 1 300", "Invalid save parameters"),
            ("save", "900 x", "Invalid save parameters"),
            ("save", "900  1", "Invalid save parameters"),
            ("save", " 900 1", "Invalid save parameters"),
            ("bind", "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17", "Too many bind addresses specified."),
        ])
    func rejectsBadValue(name: String, value: String, reason: String) {
        #expect(setThenGet(name, value) == "ERR CONFIG SET failed (possibly related to argument '\(name)') - \(reason)")
    }

    @Test(
        "accepts values as redis-server does and reports them the same way",
        arguments: [
            ("maxmemory", "1kb", "1024"), ("maxmemory", "1K", "1000"), ("maxmemory", "1Gb", "1073741824"),
            ("maxmemory", "12B", "12"), ("maxmemory", "kb", "0"), ("maxmemory", "3m", "3000000"),
            ("maxmemory", "2MB", "2097152"), ("maxmemory", "1g", "1000000000"),
            ("maxmemory", "99999999999999999999", "18446744073709551615"),
            ("maxmemory", "18446744073709551615", "18446744073709551615"),
            ("hz", "1000", "500"), ("hz", "0", "1"), ("hz", "100", "100"),
            ("loglevel", "WARNING", "warning"), ("maxmemory-policy", "ALLKEYS-LRU", "allkeys-lru"),
            ("protected-mode", "NO", "no"), ("appendonly", "yes", "yes"), ("stop-writes-on-bgsave-error", "no", "no"),
            ("save", "900 1 300 10", "900 1 300 10"), ("save", "", ""),
            ("bind", "127.0.0.1 ::1", "127.0.0.1 ::1"), ("bind", "127.0.0.1  ::1", "127.0.0.1  ::1"),
            ("bind", "", ""), ("bind", "* -::*", "* -::*"), ("requirepass", "s3cret", "(hidden)"),
            ("proto-max-bulk-len", "1mb", "1048576"),
        ])
    func acceptsValue(name: String, value: String, reported: String) {
        #expect(setThenGet(name, value) == reported)
    }

    @Test("sets typed fields")
    func setsTypedFields() throws {
        var configuration = ServerConfiguration()
        try configuration.configSet([
            ("maxmemory", "100mb"), ("maxmemory-policy", "allkeys-lfu"), ("save", "60 1000"), ("loglevel", "debug"),
        ])
        #expect(configuration.maxMemory == 100 * 1024 * 1024)
        #expect(configuration.maxMemoryPolicy == .allKeysLFU)
        #expect(configuration.savePoints == [.init(seconds: 60, changes: 1000)])
        #expect(configuration.logLevel == .debug)
    }

    @Test(
        "refuses directives fixed at startup, as redis-server does",
        arguments: [
            ("databases", "3", "can't set immutable config"), ("DATABASES", "1", "can't set immutable config"),
            ("daemonize", "yes", "can't set immutable config"), ("io-threads", "4", "can't set immutable config"),
            ("unixsocketperm", "700", "can't set immutable config"), ("tcp-backlog", "5", "can't set immutable config"),
            ("dbfilename", "a/b", "can't set protected config"), ("dir", "/nonexistent", "can't set protected config"),
        ])
    func refusesStartupOnly(name: String, value: String, reason: String) {
        #expect(setThenGet(name, value) == "ERR CONFIG SET failed (possibly related to argument '\(name)') - \(reason)")
    }

    @Test("names an unknown directive")
    func unknownDirective() {
        var configuration = ServerConfiguration()
        #expect(configSetReply(&configuration, ("nosuch", "1")) == "ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'")
    }

    @Test("refuses the same directive twice, naming the second spelling")
    func duplicate() {
        var configuration = ServerConfiguration()
        #expect(
            configSetReply(&configuration, ("maxmemory", "1"), ("MAXMEMORY", "2"))
                == "ERR CONFIG SET failed (possibly related to argument 'MAXMEMORY') - duplicate parameter")
    }

    @Test("names the directive canonically when its value is bad")
    func canonicalNameInValueError() {
        #expect(setThenGet("MAXMEMORY", "foo") == "ERR CONFIG SET failed (possibly related to argument 'maxmemory') - argument must be a memory value")
    }

    @Test("changes nothing when any pair is rejected")
    func atomic() {
        var configuration = ServerConfiguration()
        _ = configSetReply(&configuration, ("maxmemory", "1mb"), ("hz", "abc"))
        #expect(configuration == ServerConfiguration())
    }

    @Test("replaces save points rather than adding to them")
    func saveReplacesAtRuntime() throws {
        var configuration = ServerConfiguration()
        try configuration.configSet([("save", "900 1")])
        try configuration.configSet([("save", "300 10")])
        #expect(configuration.savePoints == [.init(seconds: 300, changes: 10)])
    }
}

@Suite("Directive table: applying directives at startup")
struct ConfigurationApplyTests {
    private func reason(_ name: String, _ arguments: [String]) -> String? {
        var configuration = ServerConfiguration()
        do {
            try configuration.apply(directive: name, arguments: arguments)
            return nil
        } catch {
            return error.configFileReason
        }
    }

    @Test("single-value directives need exactly one argument")
    func wrongNumberOfArguments() {
        #expect(reason("port", []) == "wrong number of arguments")
        #expect(reason("port", ["1", "2"]) == "wrong number of arguments")
        #expect(reason("requirepass", []) == "wrong number of arguments")
    }

    @Test("an unknown directive is named")
    func unknownDirective() {
        #expect(reason("nosuch", ["1"]) == "Bad directive or wrong number of arguments: 'nosuch' is not a known directive")
    }

    @Test("startup-only directives may be set at startup")
    func startupOnlyAllowed() throws {
        var configuration = ServerConfiguration()
        try configuration.apply(directive: "databases", arguments: ["4"])
        try configuration.apply(directive: "io-threads", arguments: ["3"])
        try configuration.apply(directive: "unixsocket", arguments: ["/run/cached.sock"])
        #expect(configuration.databases == 4 && configuration.ioThreads == 3)
        #expect(configuration.unixSocket == "/run/cached.sock")
    }

    @Test("unixsocketperm is octal, as in redis-server")
    func unixSocketPermissions() throws {
        var configuration = ServerConfiguration()
        try configuration.apply(directive: "unixsocketperm", arguments: ["770"])
        #expect(configuration.unixSocketPermissions == 0o770)
        #expect(configuration.configGet(["unixsocketperm"])[0].value == "770")
        #expect(reason("unixsocketperm", ["1000"]) == "argument must be between 0 and 777 inclusive")
        #expect(reason("unixsocketperm", ["8"]) == "argument couldn't be parsed as an octal number")
    }

    @Test("io-fast-path is yes or no, read at start only")
    func ioFastPath() throws {
        var configuration = ServerConfiguration()
        try configuration.apply(directive: "io-fast-path", arguments: ["no"])
        #expect(!configuration.ioFastPath)
        #expect(configGet(configuration, "io-fast-path") == ["io-fast-path", "no"])
        #expect(reason("io-fast-path", ["maybe"]) == "argument must be 'yes' or 'no'")
        #expect(ConfigurationDirective.all.first { $0.name == "io-fast-path" }?.mutability == .startupOnly)
    }

    @Test("key-load-delay: any 32-bit number, 0 by default, got by its name only (hidden from patterns)")
    func keyLoadDelay() throws {
        var configuration = ServerConfiguration()
        #expect(configGet(configuration, "key-load-delay") == ["key-load-delay", "0"])
        try configuration.apply(directive: "key-load-delay", arguments: ["-2147483648"])
        #expect(configuration.keyLoadDelay == -2_147_483_648)
        try configuration.apply(directive: "key-load-delay", arguments: ["250000"])
        #expect(configGet(configuration, "key-load-delay") == ["key-load-delay", "250000"])
        #expect(configGet(configuration, "key-load*").isEmpty)
        #expect(!configGet(configuration, "*").contains("key-load-delay"))
        #expect(
            reason("key-load-delay", ["2147483648"]) == "argument must be between -2147483648 and 2147483647 inclusive")
    }

    @Test("busy-poll takes microseconds from 0 (off) to 100000")
    func busyPollRange() throws {
        var configuration = ServerConfiguration()
        try configuration.apply(directive: "busy-poll", arguments: ["0"])
        #expect(configuration.busyPoll == 0)
        try configuration.apply(directive: "busy-poll", arguments: ["100000"])
        #expect(configuration.busyPoll == 100_000)
        #expect(reason("busy-poll", ["-1"]) == "argument must be between 0 and 100000 inclusive")
        #expect(reason("busy-poll", ["100001"]) == "argument must be between 0 and 100000 inclusive")
        #expect(reason("busy-poll", ["20us"]) == "argument couldn't be parsed into an integer")
    }

    @Test("io-threads accepts 1 to 128")
    func ioThreadsRange() {
        #expect(reason("io-threads", ["200"]) == "argument must be between 1 and 128 inclusive")
        #expect(reason("io-threads", ["0"]) == "argument must be between 1 and 128 inclusive")
    }

    @Test("daemonize yes is refused with the reason; daemonize no is accepted")
    func daemonize() throws {
        let refusal = try #require(reason("daemonize", ["yes"]))
        #expect(refusal.contains("does not daemonize"))
        #expect(reason("daemonize", ["no"]) == nil)
        #expect(reason("daemonize", ["maybe"]) == "argument must be 'yes' or 'no'")
    }

    @Test("dir must name an existing directory and is stored resolved")
    func directory() throws {
        #expect(reason("dir", ["/nonexistent-directory-for-test"]) == "No such file or directory")
        #expect(reason("dir", ["/dev/null"]) == "Not a directory")
        var configuration = ServerConfiguration()
        try configuration.apply(directive: "dir", arguments: ["/tmp/"])
        #expect(configuration.configGet(["dir"])[0].value.hasPrefix("/"))
        #expect(!configuration.directory.hasSuffix("/"))
    }

    @Test("dbfilename must be a plain file name")
    func dbFilename() {
        #expect(reason("dbfilename", ["a/b"]) == "dbfilename can't be a path, just a filename")
        #expect(reason("dbfilename", ["cache.rdb"]) == nil)
    }

    @Test("save accepts what strtoll accepts, and requires seconds ≥ 1 and changes ≥ 0")
    func saveValues() {
        #expect(reason("save", ["10", "+1"]) == nil)
        #expect(reason("save", [" 10", "1"]) == nil)
        #expect(reason("save", ["0", "1"]) == "Invalid save parameters")
        #expect(reason("save", ["-1", "1"]) == "Invalid save parameters")
        #expect(reason("save", ["10", "-1"]) == "Invalid save parameters")
    }

    @Test("at startup each save line adds points, and save \"\" clears them")
    func saveAccumulatesAtStartup() throws {
        var configuration = ServerConfiguration()
        try configuration.apply(directive: "save", arguments: ["900", "1"])
        try configuration.apply(directive: "save", arguments: ["300", "10"])
        #expect(configuration.configGet(["save"])[0].value == "900 1 300 10")
        try configuration.apply(directive: "save", arguments: [""])
        #expect(configuration.savePoints.isEmpty)
    }

    @Test("a later bind line replaces the earlier one, and bind alone means no TCP address")
    func bindReplaces() throws {
        var configuration = ServerConfiguration()
        try configuration.apply(directive: "bind", arguments: ["10.0.0.1", "::1"])
        #expect(configuration.bind == ["10.0.0.1", "::1"])
        try configuration.apply(directive: "bind", arguments: [])
        #expect(configuration.bind.isEmpty)
    }

    @Test("directive names are case-insensitive")
    func caseInsensitiveNames() throws {
        var configuration = ServerConfiguration()
        try configuration.apply(directive: "MaxMemory", arguments: ["2gb"])
        #expect(configuration.maxMemory == 2 * 1024 * 1024 * 1024)
    }
}

@Suite("Log levels")
struct ConfigurationLogLevelTests {
    @Test("loglevel maps onto swift-log levels; nothing disables logging")
    func mapping() {
        #expect(ServerConfiguration.LogLevel.debug.loggerLevel == .trace)
        #expect(ServerConfiguration.LogLevel.verbose.loggerLevel == .debug)
        #expect(ServerConfiguration.LogLevel.notice.loggerLevel == .notice)
        #expect(ServerConfiguration.LogLevel.warning.loggerLevel == .warning)
        #expect(ServerConfiguration.LogLevel.nothing.loggerLevel == nil)
    }
}
