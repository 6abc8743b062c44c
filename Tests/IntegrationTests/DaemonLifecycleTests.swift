import CachedTestSupport
import Foundation
import Glibc
import Testing

/// The daemon as an operator runs it: signals, SHUTDOWN, flags, config files, and failures to start.
@Suite("Daemon lifecycle")
struct DaemonLifecycleTests {
    static let kinds: [ServerProcess.Kind] = [.redis, .cached]

    @Test(
        "SIGTERM or SIGINT: idle clients are closed, the process exits 0 and says so on stderr",
        arguments: kinds, [SIGTERM, SIGINT])
    func signalStopsTheServer(_ kind: ServerProcess.Kind, _ signal: Int32) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let idle = try RawConnection(port: server.port)
        let pipelining = try RawConnection(port: server.port)
        try pipelining.send((0..<50).flatMap { _ in [UInt8].respCommand(["INCR", "n"]) })
        #expect(try pipelining.readReplies(50).last == .integer(50))

        server.send(signal: signal)

        #expect(try idle.closedByServer(within: 10))
        #expect(try pipelining.closedByServer(within: 10))
        #expect(server.waitForExit(timeout: 10) == 0)
        #expect(server.refusesConnections())
        let log = server.standardError()
        #expect(!log.contains("\u{1B}"), "no ANSI escapes when stderr is not a terminal: \(log.debugDescription)")
        #expect(log.split(separator: "\n").last?.contains("ready to exit") == true, "\(log)")
    }

    @Test("pidfile holds the pid while the server runs and goes at exit; after logrotate moves the log file away and sends SIGHUP, the server keeps serving and logs to a new file at the path", arguments: kinds)
    func pidFileAndLogRotation(_ kind: ServerProcess.Kind) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cached-rotate-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let log = directory.appendingPathComponent("server.log"), pid = directory.appendingPathComponent("server.pid")
        let server = try ServerProcess.start(kind, arguments: ["--logfile", log.path, "--pidfile", pid.path])
        defer { server.stop() }
        #expect(try String(contentsOf: pid, encoding: .utf8) == "\(server.pid)\n")
        // A second server with the same settings cannot bind the port: it neither takes nor removes the file.
        let second = try ServerProcess.launch(
            kind, arguments: ["--port", String(server.port), "--bind", "127.0.0.1", "--pidfile", pid.path], port: server.port)
        #expect(second.waitForExit(timeout: 10) == 1)
        #expect(try String(contentsOf: pid, encoding: .utf8) == "\(server.pid)\n")

        try FileManager.default.moveItem(at: log, to: directory.appendingPathComponent("server.log.1"))
        server.send(signal: SIGHUP)
        try poll("the server to answer after SIGHUP") { try server.connect().command("PING") == .status("PONG") }
        #expect(server.isRunning)

        server.send(signal: SIGTERM)
        #expect(server.waitForExit(timeout: 10) == 0)
        let fresh = try String(contentsOf: log, encoding: .utf8)
        #expect(fresh.contains("ready to exit"), "the lines after the rotation are in the new file: \(fresh)")
        #expect(!FileManager.default.fileExists(atPath: pid.path), "the pid file is removed at exit")
    }

    @Test("cached-server's stderr: one line per event, `<ISO 8601 time> <level> cached-server: <message>`")
    func logLines() throws {
        let server = try ServerProcess.start(.cached)
        server.send(signal: SIGTERM)
        #expect(server.waitForExit(timeout: 10) == 0)
        let lines = server.standardError().split(separator: "\n", omittingEmptySubsequences: false).map(String.init)

        #expect(lines.last == "", "the log ends with a newline")
        let events = lines.dropLast()
        let format = try Regex(#"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (trace|debug|info|notice|warning|error|critical) cached-server: \S.*"#)
        for line in events {
            #expect(line.wholeMatch(of: format) != nil, "\(line.debugDescription)")
        }
        #expect(events.contains { $0.contains("Ready to accept connections") })
        #expect(events.contains { $0.contains("Shutting down") })
        #expect(events.last?.contains("ready to exit") == true)
    }

    @Test("SIGTERM: replies not yet taken by a client are delivered before it is closed; nobody new gets in meanwhile")
    func shutdownDeliversPendingReplies() throws {
        let server = try ServerProcess.start(.cached)
        defer { server.stop() }
        let setup = try server.connect()
        #expect(try setup.command(["SET", "big", String(repeating: "x", count: 1 << 20)]) == .ok)
        // 32 MB of replies: far more than the socket buffers hold while the client does not read.
        let slowReader = try RawConnection(port: server.port)
        try slowReader.send((0..<32).flatMap { _ in [UInt8].respCommand(["GET", "big"]) } + .respCommand(["INCR", "answered"]))
        try poll("the pipeline to run") { try setup.command("GET", "answered") == .bulk("1") }

        server.send(signal: SIGTERM)
        try poll("the listener to close") { server.refusesConnections() }
        #expect(server.waitForExit(timeout: 0.2) == nil, "the server waits for the client to take its replies")

        let replies = try slowReader.readReplies(33, timeout: 20)
        #expect(replies.dropLast().allSatisfy { $0.text?.count == 1 << 20 })
        #expect(replies.last == .integer(1))
        #expect(try slowReader.closedByServer(within: 10))
        #expect(server.waitForExit(timeout: 10) == 0)
    }

    @Test("SIGTERM: a client that never takes its replies is closed after shutdown-timeout seconds, and the exit is 0")
    func shutdownTimeoutBoundsTheWait() throws {
        let server = try ServerProcess.start(.cached, arguments: ["--shutdown-timeout", "1"])
        defer { server.stop() }
        let stuck = try stuckClient(server)
        let started = Date()

        server.send(signal: SIGTERM)

        #expect(server.waitForExit(timeout: 10) == 0)
        #expect(Date().timeIntervalSince(started) >= 0.9, "it waited for the client first")
        #expect(server.standardError().contains("did not take their replies within shutdown-timeout"))
        withExtendedLifetime(stuck) {}
    }

    @Test("a second SIGTERM during a slow graceful shutdown exits at once, with status 1")
    func secondSignalExitsAtOnce() throws {
        let server = try ServerProcess.start(.cached)  // shutdown-timeout 10
        defer { server.stop() }
        let stuck = try stuckClient(server)
        server.send(signal: SIGTERM)
        try poll("the listener to close") { server.refusesConnections() }
        #expect(server.waitForExit(timeout: 0.3) == nil, "the graceful shutdown waits for the stuck client")

        server.send(signal: SIGTERM)

        #expect(server.waitForExit(timeout: 3) == 1)
        #expect(server.standardError().contains("Second signal received"))
        withExtendedLifetime(stuck) {}
    }

    /// A client with 32 MB of replies pending that it never reads.
    private func stuckClient(_ server: ServerProcess) throws -> RawConnection {
        let setup = try server.connect()
        #expect(try setup.command(["SET", "big", String(repeating: "x", count: 1 << 20)]) == .ok)
        let stuck = try RawConnection(port: server.port)
        try stuck.send((0..<32).flatMap { _ in [UInt8].respCommand(["GET", "big"]) } + .respCommand(["INCR", "answered"]))
        try poll("the pipeline to run") { try setup.command("GET", "answered") == .bulk("1") }
        return stuck
    }

    @Test("SHUTDOWN and SHUTDOWN NOSAVE from redis-cli stop the server with status 0", arguments: kinds, ["", "NOSAVE"])
    func shutdownCommand(_ kind: ServerProcess.Kind, _ option: String) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let other = try RawConnection(port: server.port)

        let cli = try server.redisCli(["SHUTDOWN"] + (option.isEmpty ? [] : [option]))

        #expect(cli.status == 0, "\(cli.summary)")
        #expect(cli.standardOutput == "", "a successful SHUTDOWN has no reply: \(cli.summary)")
        #expect(try other.closedByServer(within: 10))
        #expect(server.waitForExit(timeout: 10) == 0)
    }

    @Test("--version prints the version and exits 0")
    func version() throws {
        let out = try ExternalProgram.server(.cached).run(["--version"], timeout: 10)
        #expect(out.status == 0, "\(out.summary)")
        #expect(out.standardOutput.wholeMatch(of: try Regex(#"cached-server v=\d+\.\d+\.\d+\n"#)) != nil, "\(out.summary)")
    }

    @Test("--help prints the usage with every directive and exits 0")
    func help() throws {
        let out = try ExternalProgram.server(.cached).run(["--help"], timeout: 10)
        #expect(out.status == 0, "\(out.summary)")
        #expect(out.standardOutput.contains("cached-server [<configfile>]"), "\(out.summary)")
        for directive in ["port", "bind", "databases", "maxmemory", "requirepass", "shutdown-timeout"] {
            #expect(out.standardOutput.contains(directive), "\(directive) in \(out.summary)")
        }
    }

    @Test("a config file named first is honoured: port, bind, databases", arguments: kinds)
    func configFile(_ kind: ServerProcess.Kind) throws {
        try checkConfigFile(ServerProcess.start(kind, config: .file(contents: "databases 4\nhz 20\n")))
    }

    @Test("--config path.conf is honoured like a config file named first")
    func configFlag() throws {
        try checkConfigFile(ServerProcess.start(.cached, config: .configFlag(contents: "databases 4\nhz 20\n")))
    }

    private func checkConfigFile(_ server: ServerProcess) throws {
        defer { server.stop() }
        let connection = try server.connect()  // on the file's port
        #expect(try connection.command("CONFIG", "GET", "port") == .array([.bulk("port"), .bulk(String(server.port))]))
        #expect(try connection.command("CONFIG", "GET", "databases") == .array([.bulk("databases"), .bulk("4")]))
        #expect(try connection.command("CONFIG", "GET", "hz") == .array([.bulk("hz"), .bulk("20")]))
        #expect(try connection.command("SELECT", "3") == .ok)
        #expect(try connection.command("SELECT", "4") == .error("ERR DB index is out of range"))
    }

    @Test("an unknown directive in the config file: exit 1, naming the line and the directive", arguments: kinds)
    func unknownDirectiveInFile(_ kind: ServerProcess.Kind) throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("cached-test-\(UUID().uuidString).conf")
        try Data("port 0\nno-such-directive 12\n".utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }

        let out = try ExternalProgram.server(kind).run([file.path], timeout: 10)

        #expect(out.status == 1, "\(out.summary)")
        #expect(out.standardError.contains("*** FATAL CONFIG FILE ERROR"), "\(out.summary)")
        #expect(out.standardError.contains("at line 2\n>>> 'no-such-directive 12'\nBad directive"), "\(out.summary)")
    }

    @Test("under systemd (JOURNAL_STREAM set, stderr not a terminal) each line starts with its journald priority, config errors too")
    func journaldPriorities() throws {
        let journal = ["JOURNAL_STREAM": "8:12345"]
        let server = try ServerProcess.start(.cached, environment: journal)
        server.send(signal: SIGTERM)
        #expect(server.waitForExit(timeout: 10) == 0)
        let lines = server.standardError().split(separator: "\n").map(String.init)
        #expect(lines.contains { $0.hasPrefix("<5>cached-server: Ready to accept connections") }, "\(lines)")
        for line in lines { #expect(line.wholeMatch(of: try Regex(#"<[0-7]>cached-server: \S.*"#)) != nil, "\(line)") }

        let refused = try ServerProcess.launch(.cached, arguments: ["--port", "0", "--no-such-directive", "12"], environment: journal)
        #expect(refused.waitForExit(timeout: 10) == 1)
        let errors = refused.standardError().split(separator: "\n").map(String.init)
        #expect(errors.contains { $0.hasPrefix("<3>*** FATAL CONFIG FILE ERROR") }, "\(errors)")
        #expect(!errors.isEmpty && errors.allSatisfy { $0.hasPrefix("<3>") }, "every line of the error has the err priority: \(errors)")
    }

    @Test("started with a config file: INFO names it (config_file), and CONFIG REWRITE says it does not rewrite it")
    func configFileInInfoAndRewrite() throws {
        let server = try ServerProcess.start(.cached, config: .file(contents: "hz 10\n"))
        defer { server.stop() }
        let connection = try server.connect()
        let file = server.directory.appendingPathComponent("server.conf").path

        let info = try #require(try connection.command("INFO", "server").text)
        #expect(info.contains("config_file:\(file)\r\n"), "\(info)")
        #expect(try connection.command("CONFIG", "REWRITE")
            == .error("ERR CONFIG REWRITE is not supported by this server: make the change in \(file) too"))
    }

    @Test("a maxmemory below what an idle server uses is warned about, at start and on CONFIG SET")
    func maxMemoryTooSmall() throws {
        let server = try ServerProcess.start(.cached, arguments: ["--maxmemory", "1mb"])
        defer { server.stop() }
        let warning = "maxmemory is below the memory the server uses without its keys"
        try poll("the warning at start") { server.standardErrorSoFar().contains(warning) }
        let connection = try server.connect()
        #expect(try connection.command("SET", "k", "v") == .error("OOM command not allowed when used memory > 'maxmemory'."))

        #expect(try connection.command("CONFIG", "SET", "maxmemory", "1gb") == .status("OK"))
        #expect(try connection.command("SET", "k", "v") == .status("OK"))
        #expect(server.standardErrorSoFar().components(separatedBy: warning).count == 2, "no warning for a limit that fits")
        #expect(try connection.command("CONFIG", "SET", "maxmemory", "100kb") == .status("OK"))
        try poll("the warning on CONFIG SET") { server.standardErrorSoFar().components(separatedBy: warning).count == 3 }
    }

    @Test("an unknown directive as a flag: exit 1, quoting the flag", arguments: kinds)
    func unknownDirectiveFlag(_ kind: ServerProcess.Kind) throws {
        let out = try ExternalProgram.server(kind).run(["--port", "0", "--no-such-directive", "12"], timeout: 10)

        #expect(out.status == 1, "\(out.summary)")
        #expect(out.standardError.contains(">>> 'no-such-directive \"12\"'\nBad directive"), "\(out.summary)")
    }

    /// redis-server treats port 0 as "no TCP listener" (not "any free port"), and refuses to run listening
    /// nowhere; cached-server does the same, so a redis.conf that serves only a Unix socket keeps working.
    @Test("--port 0 without a Unix socket: exit 1, 'Configured to not listen anywhere'", arguments: kinds)
    func portZeroAlone(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.launch(kind, arguments: ["--port", "0"])
        defer { server.stop() }

        #expect(server.waitForExit(timeout: 10) == 1)
        #expect(server.standardError().contains("Configured to not listen anywhere, exiting."))
    }

    @Test("--port 0 with --unixsocket serves the socket only, with its permissions; the file goes at exit", arguments: kinds)
    func unixSocketOnly(_ kind: ServerProcess.Kind) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cs-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let socket = directory.appendingPathComponent("s.sock").path
        let server = try ServerProcess.launch(
            kind, arguments: ["--port", "0", "--unixsocket", socket, "--unixsocketperm", "700"])
        defer { server.stop() }
        try poll("the socket to answer") { try ExternalProgram.redisCli.run(["-s", socket, "PING"]).standardOutput == "PONG\n" }

        // Both servers set the permissions just after the socket starts listening (bind, then chmod), so the
        // first PING can come before them.
        try poll("the socket's permissions to be 0700", timeout: 5) {
            try FileManager.default.attributesOfItem(atPath: socket)[.posixPermissions] as? Int == 0o700
        }
        #expect(try ExternalProgram.redisCli.run(["-s", socket, "CONFIG", "GET", "port"]).lines == ["port", "0"])
        let list = try ExternalProgram.redisCli.run(["-s", socket, "CLIENT", "LIST"]).standardOutput
        #expect(list.contains("addr=\(socket):0 laddr=\(socket):0 "), "\(list)")
        #expect(list.contains(" flags=U "), "\(list)")

        server.send(signal: SIGTERM)
        #expect(server.waitForExit(timeout: 10) == 0)
        #expect(!FileManager.default.fileExists(atPath: socket))
    }

    @Test("an address already in use: exit 1, naming the address and the reason", arguments: kinds)
    func addressInUse(_ kind: ServerProcess.Kind) throws {
        let occupant = try ServerProcess.start(.cached)
        defer { occupant.stop() }

        let server = try ServerProcess.launch(kind, arguments: ["--port", String(occupant.port), "--bind", "127.0.0.1"])
        defer { server.stop() }

        #expect(server.waitForExit(timeout: 10) == 1)
        let log = server.standardError()
        #expect(log.contains("Could not create server TCP listening socket 127.0.0.1:\(occupant.port)"), "\(log)")
        #expect(log.contains("Address already in use"), "\(log)")
    }

    @Test("cached-server's threads carry their names (top -H, ps -L); without save points the schedule wakes once a second")
    func threadNames() throws {
        let server = try ServerProcess.start(.cached, arguments: ["--save", ""])
        defer { server.stop() }
        let tasks = "/proc/\(server.pid)/task"
        func threads() throws -> [String: String] {
            var names: [String: String] = [:]
            for id in try FileManager.default.contentsOfDirectory(atPath: tasks) {
                let name = try String(contentsOfFile: "\(tasks)/\(id)/comm", encoding: .utf8)
                names[name.trimmingCharacters(in: .newlines)] = id
            }
            return names
        }
        let names = try threads()
        for expected in ["cached-accept", "cached-sweeper", "cached-schedule"] {
            #expect(names[expected] != nil, "\(names.keys.sorted())")
        }
        #expect(names.keys.contains { $0.hasPrefix("NIO-ELT-") }, "\(names.keys.sorted())")

        // Sleeps the schedule thread took in 2.5 s: 2 or 3 at one wake-up a second (25 at ten a second).
        let schedule = try #require(names["cached-schedule"])
        func sleeps() throws -> Int {
            let status = try String(contentsOfFile: "\(tasks)/\(schedule)/status", encoding: .utf8)
            let line = try #require(status.split(separator: "\n").first { $0.hasPrefix("voluntary_ctxt_switches:") })
            return try #require(Int(line.split(separator: "\t").last?.trimmingCharacters(in: .whitespaces) ?? ""))
        }
        let before = try sleeps()
        Thread.sleep(forTimeInterval: 2.5)
        let woken = try sleeps() - before
        #expect((1...4).contains(woken), "the schedule thread woke \(woken) times in 2.5 s")
    }
}
