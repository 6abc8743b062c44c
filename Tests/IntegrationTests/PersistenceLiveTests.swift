import CachedTestSupport
import Foundation
import Glibc
import Testing

/// Snapshots as an operator sees them: warm restarts, saves on shutdown and on a schedule, a `kill -9` in
/// the middle of a save, damaged files.
@Suite("Snapshots, live")
struct PersistenceLiveTests {
    /// A directory that outlives the servers started on it (each ServerProcess removes only its own).
    final class DataDirectory {
        let path: String
        init() throws {
            path = FileManager.default.temporaryDirectory.appendingPathComponent("cached-data-\(UUID().uuidString)").path
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        }
        deinit { try? FileManager.default.removeItem(atPath: path) }

        var snapshot: String { path + "/cached.snapshot" }
        var temporary: String { snapshot + ".tmp" }
        var exists: Bool { FileManager.default.fileExists(atPath: snapshot) }
        func contents() throws -> Data { try Data(contentsOf: URL(fileURLWithPath: snapshot)) }
    }

    private func start(_ data: DataDirectory, _ arguments: [String] = []) throws -> ServerProcess {
        try ServerProcess.start(.cached, arguments: ["--dir", data.path] + arguments)
    }

    private var nowMilliseconds: Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

    @Test("SAVE, restart: every key is back in its database with its value and absolute expiry; the log says how many")
    func warmRestart() throws {
        let data = try DataDirectory()
        let expiry = nowMilliseconds + 3_600_000
        let first = try start(data)
        let c = try first.connect()
        #expect(try c.command("SET", "a", "1") == .ok)
        #expect(try c.command(["SET", "binary\u{0}key", "v\r\n"]) == .ok)
        #expect(try c.command("SET", "empty", "") == .ok)
        #expect(try c.command("SET", "ttl", "x", "PXAT", String(expiry)) == .ok)
        #expect(try c.command("SELECT", "5") == .ok)
        #expect(try c.command("SET", "elsewhere", "y") == .ok)
        #expect(try c.command("SAVE") == .ok)
        #expect(try first.redisCli("SHUTDOWN", "NOSAVE").status == 0)
        #expect(first.waitForExit(timeout: 10) == 0)
        let firstLog = first.standardError()
        #expect(firstLog.contains("Snapshot saved") && firstLog.contains("keys=5"), "\(firstLog)")
        #expect(firstLog.contains("trigger=SAVE") && firstLog.contains("bytes=") && firstLog.contains("duration_ms="))

        let second = try start(data)
        defer { second.stop() }
        let d = try second.connect()
        #expect(try d.command("DBSIZE") == .integer(4))
        #expect(try d.command("GET", "a") == .bulk("1"))
        #expect(try d.command(["GET", "binary\u{0}key"]) == .bulk("v\r\n"))
        #expect(try d.command("GET", "empty") == .bulk(""))
        #expect(try d.command("PEXPIRETIME", "ttl") == .integer(expiry))
        #expect(try d.command("SELECT", "5") == .ok)
        #expect(try d.command("GET", "elsewhere") == .bulk("y"))
        #expect(try d.info("persistence")["rdb_last_load_keys_loaded"] == "5")
        #expect(try d.info("persistence")["rdb_changes_since_last_save"] == "0")
        let log = second.standardError()
        #expect(log.contains("Snapshot loaded") && log.contains("keys=5") && log.contains("expired=0"), "\(log)")
    }

    enum Stop: String, CaseIterable, Sendable {
        case sigterm = "SIGTERM"
        case shutdown = "SHUTDOWN"
        case shutdownSave = "SHUTDOWN SAVE"
        case shutdownNoSave = "SHUTDOWN NOSAVE"
    }

    /// (how the server stops, whether save points are set) → whether it writes a snapshot, as Redis does.
    static let stopCases: [(Stop, Bool, Bool)] = [
        (.sigterm, true, true), (.sigterm, false, false),
        (.shutdown, true, true), (.shutdown, false, false),
        (.shutdownSave, false, true), (.shutdownNoSave, true, false),
    ]

    @Test("stopping: a snapshot on SIGTERM or SHUTDOWN with save points, on SHUTDOWN SAVE, never on SHUTDOWN NOSAVE",
          arguments: stopCases)
    func saveOnStop(_ stop: Stop, _ savePoints: Bool, _ saves: Bool) throws {
        let data = try DataDirectory()
        let server = try start(data, savePoints ? ["--save", "3600", "1"] : [])
        defer { server.stop() }
        let c = try server.connect()
        #expect(try c.command("SET", "last", "write") == .ok)

        switch stop {
        case .sigterm:
            server.send(signal: SIGTERM)
        default:
            let cli = try server.redisCli(stop.rawValue.split(separator: " ").map(String.init))
            #expect(cli.standardOutput == "", "\(cli.summary)")
        }

        #expect(server.waitForExit(timeout: 15) == 0)
        #expect(data.exists == saves)
        let log = server.standardError()
        #expect(log.contains("Snapshot saved") == saves, "\(log)")
        guard saves else { return }
        let again = try start(data)
        defer { again.stop() }
        #expect(try again.connect().command("GET", "last") == .bulk("write"))
    }

    @Test("SHUTDOWN when the snapshot cannot be written: an error, and the server stays up; SHUTDOWN FORCE exits")
    func shutdownSaveFails() throws {
        let data = try DataDirectory()
        let server = try start(data, ["--save", "3600", "1"])
        defer { server.stop() }
        let c = try server.connect()
        #expect(try c.command("SET", "k", "v") == .ok)
        try FileManager.default.removeItem(atPath: data.path)

        #expect(try c.command("SHUTDOWN") == .error("ERR Errors trying to SHUTDOWN. Check logs."))
        #expect(try c.command("PING") == .status("PONG"))
        #expect(try c.command("INFO", "persistence").text?.contains("rdb_last_bgsave_status:err") == true)

        _ = try server.redisCli("SHUTDOWN", "NOSAVE", "FORCE")
        #expect(server.waitForExit(timeout: 10) == 0)
    }

    @Test(
        "a background save that fails: writes and PING get MISCONF in Redis's words, reads work, until a save succeeds",
        arguments: [ServerProcess.Kind.cached, .redis])
    func writesRefusedWhileSavesFail(_ kind: ServerProcess.Kind) throws {
        let data = try DataDirectory()
        let server = try ServerProcess.start(
            kind, arguments: ["--dir", data.path, "--dbfilename", "snap.db", "--save", "3600 1"])
        defer { server.stop() }
        let c = try server.connect()
        #expect(try c.command("SET", "k", "v") == .ok)
        // A non-empty directory where the snapshot goes: renaming the written file over it fails.
        try FileManager.default.createDirectory(atPath: data.path + "/snap.db/in-the-way", withIntermediateDirectories: true)
        func saveFinished(_ status: String) throws {
            try poll("the background save to end (\(status))", timeout: 15) {
                try c.info("persistence")["rdb_bgsave_in_progress"] == "0" && c.info("persistence")["rdb_last_bgsave_status"] == status
            }
        }
        #expect(try c.command("BGSAVE") == .status("Background saving started"))
        try saveFinished("err")

        let refusal = RedisReply.error(
            "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. Commands that may modify the data set are disabled, because this instance is configured to report errors during writes if RDB snapshotting fails (stop-writes-on-bgsave-error option). Please check the Redis logs for details about the RDB error.")
        #expect(try c.command("SET", "k", "w") == refusal)
        #expect(try c.command("DEL", "k") == refusal)
        #expect(try c.command("PING") == refusal)
        #expect(try c.command("GET", "k") == .bulk("v"))
        #expect(try c.command("DBSIZE") == .integer(1))
        // Turned off, writes go through; without save points there is nothing to protect.
        #expect(try c.command("CONFIG", "SET", "stop-writes-on-bgsave-error", "no") == .ok)
        #expect(try c.command("SET", "k", "w") == .ok)
        #expect(try c.command("CONFIG", "SET", "stop-writes-on-bgsave-error", "yes") == .ok)
        #expect(try c.command("SET", "k", "x") == refusal)
        #expect(try c.command("CONFIG", "SET", "save", "") == .ok)
        #expect(try c.command("SET", "k", "x") == .ok)
        #expect(try c.command("CONFIG", "SET", "save", "3600 1") == .ok)
        #expect(try c.command("SET", "k", "y") == refusal)

        // Once a save succeeds, writes are accepted again.
        try FileManager.default.removeItem(atPath: data.path + "/snap.db")
        #expect(try c.command("BGSAVE") == .status("Background saving started"))
        try saveFinished("ok")
        #expect(try c.command("SET", "k", "z") == .ok)
        #expect(try c.command("PING") == .status("PONG"))
    }

    @Test("FLUSHALL with save points saves the empty dataset at once: killed right after, the server restarts empty",
        arguments: [ServerProcess.Kind.cached, .redis])
    func flushAllSaves(_ kind: ServerProcess.Kind) throws {
        let data = try DataDirectory()
        let arguments = ["--dir", data.path, "--dbfilename", "snap.db", "--save", "3600 1"]
        let server = try ServerProcess.start(kind, arguments: arguments)
        let c = try server.connect()
        #expect(try c.command("SET", "a", "1") == .ok)
        #expect(try c.command("SET", "b", "2") == .ok)
        #expect(try c.command("SAVE") == .ok)
        #expect(try c.command("SELECT", "3") == .ok)
        #expect(try c.command("FLUSHALL") == .ok)
        #expect(try c.info("persistence")["rdb_changes_since_last_save"] == "0")
        kill(server.pid, SIGKILL)
        #expect(server.waitForExit(timeout: 10) == 128 + SIGKILL)
        server.stop()

        let restarted = try ServerProcess.start(kind, arguments: arguments)
        defer { restarted.stop() }
        #expect(try restarted.connect().command("DBSIZE") == .integer(0))
    }

    /// Writes about 400 MB of keys: a dataset whose save or load takes long enough to be caught in the middle.
    private func writeLargeDataset(_ c: HiredisConnection) throws {
        let value = String(repeating: "v", count: 200_000)
        for start in stride(from: 0, to: 2_000, by: 100) {
            for i in start..<(start + 100) { try c.append("SET", "big:\(i)", value) }
            for _ in 0..<100 { #expect(try c.reply() == .ok) }
        }
    }

    /// Writes about 400 MB of keys, starts a BGSAVE of them, and returns once it is writing: a save that takes
    /// long enough to be caught in the middle.
    private func startLargeBackgroundSave(_ c: HiredisConnection, _ data: DataDirectory) throws {
        try writeLargeDataset(c)
        #expect(try c.command("BGSAVE") == .status("Background saving started"))
        try poll("the save to start writing", timeout: 10) {
            ((try? FileManager.default.attributesOfItem(atPath: data.temporary)[.size] as? Int) ?? 0) > 0
        }
    }

    @Test("FLUSHALL during a large BGSAVE calls the save off, as Redis kills its child, and saves the empty dataset")
    func flushAllCallsOffABackgroundSave() throws {
        let data = try DataDirectory()
        let server = try start(data, ["--save", "3600 1"])
        defer { server.stop() }
        let c = try server.connect()
        try startLargeBackgroundSave(c, data)
        #expect(try c.command("FLUSHALL") == .ok)
        try poll("the log to say the save was called off", timeout: 5) {
            server.standardErrorSoFar().contains("Background save called off")
        }
        #expect(try c.info("persistence")["rdb_last_bgsave_status"] == "ok", "a save called off is not a failure")
        #expect(try c.command("SET", "after", "flush") == .ok, "no MISCONF")
        kill(server.pid, SIGKILL)
        #expect(server.waitForExit(timeout: 10) == 128 + SIGKILL)
        let restarted = try start(data)
        defer { restarted.stop() }
        #expect(try restarted.connect().command("DBSIZE") == .integer(0))
    }

    @Test("save 1 1: a write is saved in the background within seconds; the log names the save point")
    func schedule() throws {
        let data = try DataDirectory()
        let server = try start(data, ["--save", "1", "1"])
        defer { server.stop() }
        let c = try server.connect()
        let before = try c.command("LASTSAVE")
        #expect(try c.command("SET", "k", "v") == .ok)

        try poll("the scheduled snapshot", timeout: 15) { try c.info("persistence")["rdb_saves"] == "1" }

        #expect(data.exists)
        #expect(try c.command("LASTSAVE") != before)
        #expect(try c.info("persistence")["rdb_changes_since_last_save"] == "0")
        #expect(try c.info("persistence")["rdb_last_bgsave_status"] == "ok")
        #expect(server.standardError().contains("trigger=\"save 1 1\""))
    }

    @Test("kill -9 in the middle of a large BGSAVE: the previous snapshot is intact and is what the next start loads")
    func killDuringSave() throws {
        let data = try DataDirectory()
        let server = try start(data)
        defer { server.stop() }
        let c = try server.connect()
        #expect(try c.command("SET", "before", "the big save") == .ok)
        #expect(try c.command("SAVE") == .ok)
        let previous = try data.contents()
        try startLargeBackgroundSave(c, data)
        kill(server.pid, SIGKILL)
        #expect(server.waitForExit(timeout: 10) == 128 + SIGKILL)

        #expect(FileManager.default.fileExists(atPath: data.temporary), "the save was interrupted")
        #expect(try data.contents() == previous, "the snapshot is the one from before")
        let restarted = try start(data)
        defer { restarted.stop() }
        let d = try restarted.connect()
        #expect(try d.command("DBSIZE") == .integer(1))
        #expect(try d.command("GET", "before") == .bulk("the big save"))
        #expect(!FileManager.default.fileExists(atPath: data.temporary))
        #expect(restarted.standardError().contains("Removed the incomplete snapshot of an interrupted save"))
    }

    @Test("SIGTERM while the snapshot loads at start: the load stops, the server exits 0 without saving; the file is untouched")
    func signalWhileLoading() throws {
        let data = try DataDirectory()
        let first = try start(data)
        // 40 keys of 600 kB: a few to a block of the file, and the load checks for a shutdown between blocks.
        let c = try first.connect()
        let value = String(repeating: "v", count: 600_000)
        for i in 0..<40 { #expect(try c.command("SET", "big:\(i)", value) == .ok) }
        #expect(try c.command("SAVE") == .ok)
        #expect(try first.redisCli("SHUTDOWN", "NOSAVE").status == 0)
        #expect(first.waitForExit(timeout: 10) == 0)
        func identity() throws -> [FileAttributeKey: AnyHashable] {
            let attributes = try FileManager.default.attributesOfItem(atPath: data.snapshot)
            return [.size: attributes[.size] as? Int, .modificationDate: attributes[.modificationDate] as? Date,
                    .systemFileNumber: attributes[.systemFileNumber] as? Int]
        }
        let before = try identity()

        // Save points are set: a shutdown after the load would save on a signal. key-load-delay (as in Redis)
        // makes the load sleep half a second after each key, so it lasts 20 s: the signal, sent as soon as the
        // load has begun, comes in the middle of it, and the load stops at the next block, within 2 s.
        let port = try freeLoopbackPort()
        let server = try ServerProcess.launch(
            .cached,
            arguments: [
                "--port", String(port), "--bind", "127.0.0.1", "--dir", data.path, "--save", "3600 1",
                "--key-load-delay", "500000",
            ],
            port: port)
        defer { server.stop() }
        #expect(server.waitForLog("Loading the snapshot"))
        let signalled = Date()
        server.send(signal: SIGTERM)
        #expect(server.waitForExit(timeout: 30) == 0)
        let took = Date().timeIntervalSince(signalled)
        #expect(took < 10, "exited \(took) s after the signal")
        #expect(try identity() == before, "the snapshot was not written again")
        #expect(!FileManager.default.fileExists(atPath: data.temporary))
        let log = server.standardError()
        #expect(log.contains("Received shutdown signal during loading, scheduling shutdown."), "\(log)")
        #expect(log.contains("stopped loading, exiting without saving"), "\(log)")
        #expect(!log.contains("Snapshot loaded"), "\(log)")
        #expect(!log.contains("Ready to accept connections"), "\(log)")
        #expect(!log.contains("Saving the final snapshot"), "\(log)")
    }

    enum Damage: String, CaseIterable, Sendable {
        case truncated
        case flippedByte = "flipped byte"
        case notASnapshot = "not a snapshot"
    }

    /// A snapshot with keys in database 0, damaged as `damage` says.
    private func damagedSnapshot(_ damage: Damage) throws -> DataDirectory {
        let data = try DataDirectory()
        let server = try start(data)
        let c = try server.connect()
        for i in 0..<1_000 { try c.append("SET", "key:\(i)", String(repeating: "x", count: 100)) }
        for _ in 0..<1_000 { _ = try c.reply() }
        #expect(try c.command("SAVE") == .ok)
        _ = try server.redisCli("SHUTDOWN", "NOSAVE")
        #expect(server.waitForExit(timeout: 10) == 0)
        var bytes = try data.contents()
        switch damage {
        case .truncated: bytes = bytes.prefix(bytes.count / 2)
        case .flippedByte: bytes[bytes.count / 2] ^= 0x10
        case .notASnapshot: bytes = Data("REDIS0009 this is no snapshot".utf8)
        }
        try bytes.write(to: URL(fileURLWithPath: data.snapshot))
        return data
    }

    @Test("a damaged snapshot: the daemon refuses to start, exit 65, saying which file, what is wrong and what to do",
          arguments: Damage.allCases)
    func damagedRefused(_ damage: Damage) throws {
        let data = try damagedSnapshot(damage)
        let before = try data.contents()
        let server = try ServerProcess.launch(.cached, arguments: ["--port", "0", "--unixsocket", data.path + "/s.sock", "--dir", data.path])
        defer { server.stop() }

        #expect(server.waitForExit(timeout: 15) == 65)
        let log = server.standardError()
        #expect(log.contains("Can't load the snapshot \(data.snapshot)"), "\(log)")
        let reason = switch damage {
        case .truncated: "truncated"
        case .flippedByte: "checksum does not match"
        case .notASnapshot: "not a cached-server snapshot"
        }
        #expect(log.contains(reason), "\(log)")
        #expect(log.contains("snapshot-load-corrupt skip"), "\(log)")
        #expect(!log.contains("Ready to accept connections"))
        #expect(try data.contents() == before, "the file is left for the operator")
    }

    @Test("a damaged snapshot with snapshot-load-corrupt skip: the daemon starts with the intact keys, the file is moved aside")
    func damagedSkipped() throws {
        let data = try damagedSnapshot(.truncated)
        let server = try start(data, ["--snapshot-load-corrupt", "skip"])
        defer { server.stop() }
        let c = try server.connect()
        guard case .integer(let keys) = try c.command("DBSIZE") else { throw TestEnvironmentError("DBSIZE") }
        #expect(keys < 1_000)
        #expect(!data.exists)
        #expect(FileManager.default.fileExists(atPath: data.snapshot + ".corrupt"))
        let log = server.standardError()
        #expect(log.contains("The snapshot is damaged") && log.contains("moved_to="), "\(log)")
    }
}
