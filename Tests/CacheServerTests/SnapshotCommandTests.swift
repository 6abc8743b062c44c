import CacheCore
import CacheServer
import Foundation
import Glibc
import Testing

/// SAVE, BGSAVE, LASTSAVE, INFO persistence, the save schedule and the startup load, on a manual clock.
@Suite("Snapshot commands")
struct SnapshotCommandTests {
    /// A harness whose snapshots go to a scratch directory of its own.
    final class Fixture {
        let directory: String
        let harness: Harness

        init(configure: (inout ServerConfiguration) -> Void = { _ in }) {
            directory = FileManager.default.temporaryDirectory.appendingPathComponent("cached-cmd-\(UUID().uuidString)").path
            try! FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let directory = self.directory
            harness = Harness(databases: 4) { config in
                config.directory = directory
                configure(&config)
            }
        }

        deinit { try? FileManager.default.removeItem(atPath: directory) }

        var path: String { directory + "/cached.snapshot" }

        /// One field of INFO persistence.
        func info(_ field: String) -> String? {
            let text = harness.run("INFO", "persistence").text ?? ""
            for line in text.split(separator: "\r\n") where line.hasPrefix(field + ":") {
                return String(line.dropFirst(field.count + 1))
            }
            return nil
        }

        /// Polls until no save is in progress (a background save runs on a thread of its own).
        func waitForSaves() throws {
            let deadline = Date().addingTimeInterval(10)
            while harness.server.snapshots.current.inProgress || harness.server.snapshots.current.scheduled {
                guard Date() < deadline else { throw CancellationError() }
                usleep(2_000)
            }
        }
    }

    @Test("SAVE writes dir/dbfilename, answers OK, and moves LASTSAVE and INFO persistence")
    func save() throws {
        let f = Fixture()
        let h = f.harness
        let started = Int(h.now / 1000)
        #expect(h.run("LASTSAVE") == .integer(started), "before any save, LASTSAVE is the start time, as in Redis")
        h.run("SET", "a", "1")
        h.run("SET", "b", "2")
        h.run("SELECT", "2")
        h.run("SET", "c", "3", "PX", "60000")
        #expect(f.info("rdb_changes_since_last_save") == "3")
        h.advance(5_000)

        #expect(h.run("SAVE") == .ok)

        #expect(FileManager.default.fileExists(atPath: f.path))
        #expect(h.run("LASTSAVE") == .integer(started + 5))
        #expect(f.info("rdb_changes_since_last_save") == "0")
        #expect(f.info("rdb_last_save_time") == String(started + 5))
        #expect(f.info("rdb_last_bgsave_status") == "ok")
        #expect(f.info("rdb_saves") == "1")
        #expect(f.info("rdb_bgsave_in_progress") == "0")
        #expect(f.info("snapshot_file") == f.path)
        h.run("DEL", "c")
        #expect(f.info("rdb_changes_since_last_save") == "1")

        let loaded = Keyspace(databases: 4)
        #expect(try SnapshotReader.load(f.path, into: loaded, now: h.now)?.keys == 3)
    }

    @Test("a failed SAVE is an error; LASTSAVE stays, the status says err, and the next good save clears it")
    func saveFails() throws {
        let f = Fixture()
        let h = f.harness
        h.run("SET", "a", "1")
        try FileManager.default.removeItem(atPath: f.directory)
        h.advance(1_000)

        let reply = h.run("SAVE")

        #expect(reply.errorText?.hasPrefix("ERR Error saving the snapshot: could not create") == true, "\(reply)")
        #expect(h.run("LASTSAVE") == .integer(Int((h.now - 1_000) / 1000)))
        #expect(f.info("rdb_last_bgsave_status") == "err")
        #expect(f.info("rdb_changes_since_last_save") == "1")
        try FileManager.default.createDirectory(atPath: f.directory, withIntermediateDirectories: true)
        #expect(h.run("SAVE") == .ok)
        #expect(f.info("rdb_last_bgsave_status") == "ok")
    }

    @Test("BGSAVE starts a background save; while it runs BGSAVE and SAVE are refused and BGSAVE SCHEDULE queues one")
    func bgsave() throws {
        let f = Fixture()
        let h = f.harness
        h.run("SET", "a", "1")
        // Hold one shard's lock: the background save stops there until it is released. (Nothing below may
        // take that lock on this thread meanwhile: INFO persistence sums every shard's change counter.)
        let shard = h.server.keyspace.databases[0].shards[0]
        shard.lock.lock()

        #expect(h.run("BGSAVE") == .simple("Background saving started"))
        let status = h.server.snapshots.current
        #expect(status.inProgress && status.background)
        #expect(h.run("BGSAVE") == .error("ERR Background save already in progress"))
        #expect(h.run("SAVE") == .error("ERR Background save already in progress"))
        #expect(h.run("BGSAVE", "SCHEDULE") == .simple("Background saving scheduled"))
        #expect(h.run("BGSAVE", "NOW") == .error("ERR syntax error"))
        shard.lock.unlock()
        try f.waitForSaves()

        #expect(f.info("rdb_saves") == "2", "the scheduled save ran after the first")
        #expect(f.info("rdb_bgsave_in_progress") == "0")
        #expect(f.info("rdb_last_bgsave_time_sec") == "0")
        #expect(f.info("rdb_last_bgsave_status") == "ok")
        #expect(try SnapshotReader.load(f.path, into: Keyspace(databases: 4), now: h.now)?.keys == 1)
    }

    @Test("the schedule: a point is due after more than its seconds with at least its changes; 5 s between retries")
    func schedule() {
        typealias C = SnapshotCoordinator
        let points: [ServerConfiguration.SavePoint] = [.init(seconds: 900, changes: 1), .init(seconds: 60, changes: 100)]
        var status = C.Status(lastSaveTime: 1_000_000)
        #expect(C.duePoint(points, changes: 0, now: 1_000_000 + 3_600_000, status: status) == nil)
        #expect(C.duePoint(points, changes: 1, now: 1_000_000 + 900_000, status: status) == nil, "more than 900 s")
        #expect(C.duePoint(points, changes: 1, now: 1_000_000 + 900_001, status: status) == points[0])
        #expect(C.duePoint(points, changes: 99, now: 1_000_000 + 61_000, status: status) == nil)
        #expect(C.duePoint(points, changes: 100, now: 1_000_000 + 61_000, status: status) == points[1])
        #expect(C.duePoint([.init(seconds: 10, changes: 0)], changes: 0, now: 1_000_000 + 10_001, status: status) != nil)
        #expect(C.duePoint([], changes: 1_000_000, now: .max / 2, status: status) == nil)
        status.lastSaveOK = false
        status.lastFailureTime = 1_000_000 + 61_000
        #expect(C.duePoint(points, changes: 100, now: 1_000_000 + 65_000, status: status) == nil, "retry delay")
        #expect(C.duePoint(points, changes: 100, now: 1_000_000 + 66_001, status: status) == points[1])
    }

    @Test("the scheduler thread saves once a save point is due")
    func scheduler() throws {
        let f = Fixture { $0.savePoints = [.init(seconds: 1, changes: 2)] }
        let h = f.harness
        let server = h.server
        server.snapshots.startScheduler { server.config }
        defer { server.snapshots.stopScheduler() }
        h.run("SET", "a", "1")
        h.advance(2_000)
        // One change after 2 s: not due. (The check runs every 100 ms; give it several chances.)
        usleep(300_000)
        #expect(f.info("rdb_saves") == "0")

        h.run("SET", "b", "1")

        let deadline = Date().addingTimeInterval(10)
        while f.info("rdb_saves") != "1" && Date() < deadline { usleep(10_000) }
        #expect(f.info("rdb_saves") == "1")
        try f.waitForSaves()
        #expect(f.info("rdb_changes_since_last_save") == "0")
    }

    @Test("loading at start: keys come back in their databases, keys expired meanwhile are dropped and counted")
    func load() throws {
        let f = Fixture()
        let h = f.harness
        h.run("SET", "kept", "v")
        h.run("SET", "short", "v", "PX", "1000")
        h.run("SELECT", "3")
        h.run("SET", "long", "v", "PX", "60000")
        #expect(h.run("SAVE") == .ok)

        let later = Harness(databases: 4) { $0.directory = f.directory }
        later.clock.set(milliseconds: h.now + 5_000)
        let summary = try later.server.snapshots.load(later.server.config)

        #expect(summary?.keys == 2 && summary?.expired == 1)
        #expect(later.run("GET", "kept") == .bulk("v"))
        #expect(later.run("EXISTS", "short") == .integer(0))
        later.run("SELECT", "3")
        #expect(later.run("PEXPIRETIME", "long") == .integer(Int(h.now + 60_000)))
        let info = later.run("INFO", "persistence").text ?? ""
        #expect(info.contains("rdb_last_load_keys_loaded:2\r\n") && info.contains("rdb_last_load_keys_expired:1\r\n"), "\(info)")
        #expect(info.contains("rdb_changes_since_last_save:0\r\n"), "loading is not a change to save")
    }

    @Test("a damaged file: with fail, load throws a message naming the file, the damage and the way out")
    func loadFails() throws {
        let f = Fixture()
        f.harness.run("SET", "a", "1")
        #expect(f.harness.run("SAVE") == .ok)
        let handle = try #require(FileHandle(forUpdatingAtPath: f.path))
        try handle.truncate(atOffset: 40)
        try handle.close()

        let later = Harness(databases: 4) { $0.directory = f.directory }
        let error = #expect(throws: SnapshotLoadError.self) { try later.server.snapshots.load(later.server.config) }
        let text = error.map { "\($0)" } ?? ""
        #expect(text.contains(f.path) && text.contains("truncated"), "\(text)")
        #expect(text.contains("snapshot-load-corrupt skip"), "\(text)")
        #expect(FileManager.default.fileExists(atPath: f.path), "the file is left as it is")
    }

    @Test("a damaged file: with skip, the intact keys load and the file is moved to .corrupt")
    func loadSkips() throws {
        let f = Fixture()
        f.harness.run("SET", "a", "1")
        #expect(f.harness.run("SAVE") == .ok)
        var bytes = try Data(contentsOf: URL(fileURLWithPath: f.path))
        bytes[bytes.count - 5] ^= 0x40  // inside the end block
        try bytes.write(to: URL(fileURLWithPath: f.path))

        let later = Harness(databases: 4) {
            $0.directory = f.directory
            $0.snapshotLoadCorrupt = .skip
        }
        let summary = try later.server.snapshots.load(later.server.config)

        #expect(summary?.damage != nil && summary?.keys == 1)
        #expect(later.run("GET", "a") == .bulk("1"))
        #expect(!FileManager.default.fileExists(atPath: f.path))
        #expect(FileManager.default.fileExists(atPath: f.path + ".corrupt"))
    }

    @Test("snapshot-load-corrupt is fail or skip, set at startup only; dbfilename defaults to cached.snapshot")
    func directive() throws {
        var config = ServerConfiguration()
        #expect(config.dbFilename == "cached.snapshot")
        #expect(config.snapshotLoadCorrupt == .fail)
        try config.apply(directive: "snapshot-load-corrupt", arguments: ["SKIP"])
        #expect(config.snapshotLoadCorrupt == .skip)
        #expect(throws: ConfigurationDirectiveError.self) { try config.apply(directive: "snapshot-load-corrupt", arguments: ["maybe"]) }
        #expect(throws: ConfigurationDirectiveError.self) { try config.configSet([("snapshot-load-corrupt", "fail")]) }
    }
}
