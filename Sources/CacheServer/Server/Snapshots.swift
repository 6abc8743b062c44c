import CThreadName
import CacheCore
import Foundation
import Logging
import Synchronization

extension ServerConfiguration {
    /// Where snapshots are written and read: `dir`/`dbfilename`.
    package var snapshotPath: String {
        let directory = (try? ConfigurationDirective.resolveDirectory(directory)) ?? directory
        return directory.hasSuffix("/") ? directory + dbFilename : directory + "/" + dbFilename
    }
}

/// Snapshots of the keyspace: saves on request (SAVE, BGSAVE, SHUTDOWN), on the `save` schedule, and the
/// load at startup, with the state INFO persistence and LASTSAVE report.
///
/// One save runs at a time. A background save runs on a thread of its own; a synchronous one on the
/// caller's thread (SAVE blocks its client's event loop, as Redis's SAVE blocks the server).
package final class SnapshotCoordinator: @unchecked Sendable {
    /// What the last saves did; guarded by `condition`.
    package struct Status: Sendable {
        /// A save is being written (background or not).
        package var inProgress = false
        /// The save in progress is a background one.
        package var background = false
        /// When the save in progress began (Unix ms).
        package var currentStart: Int64 = 0
        /// When the last successful save finished, or the server started (Unix ms).
        package var lastSaveTime: Int64
        /// Whether the last save succeeded.
        package var lastSaveOK = true
        /// When the last failed save was tried (Unix ms), for the retry delay.
        package var lastFailureTime: Int64 = 0
        /// Seconds the last background save took; -1 before the first.
        package var lastBackgroundSeconds = -1
        /// The keyspace's change count when the last successful save began.
        package var changesAtLastSave = 0
        /// Successful saves since the server started.
        package var saves = 0
        /// Keys loaded and keys left out as expired by the startup load.
        package var loadedKeys = 0
        package var expiredOnLoad = 0
        /// A BGSAVE SCHEDULE is waiting for the save in progress to end.
        package var scheduled = false
        /// The file that holds the dataset as it was at ``changesAtLastSave``: the snapshot loaded at start or
        /// the last one saved; nil when there is none.
        package var inFile: String?

        package init(lastSaveTime: Int64) {
            self.lastSaveTime = lastSaveTime
        }
    }

    /// After a failed scheduled save, wait this long before the next try (Redis's CONFIG_BGSAVE_RETRY_DELAY).
    package static let retryDelay: Int64 = 5_000

    /// Whether the last background save failed (and no save succeeded since): with save points set and
    /// `stop-writes-on-bgsave-error`, writes are refused (see ``ServerState/refusesWrites``).
    private let failedInBackground = Atomic<Bool>(false)
    /// Set to call off the background save in progress (FLUSHALL, as Redis kills its saving child).
    private let cancelRequested = Atomic<Bool>(false)
    private let keyspace: Keyspace
    private let clock: any CacheClock
    private let logger: Logger
    private let condition = NSCondition()
    private var status: Status
    private var schedulerRunning = false
    private var schedulerStopped = true

    package init(keyspace: Keyspace, clock: any CacheClock, logger: Logger) {
        self.keyspace = keyspace
        self.clock = clock
        self.logger = logger
        self.status = Status(lastSaveTime: clock.nowMilliseconds())
    }

    /// A copy of the current state.
    package var current: Status {
        condition.lock()
        defer { condition.unlock() }
        return status
    }

    /// Changes to keys since the last successful save began (INFO's `rdb_changes_since_last_save`).
    package var changesSinceLastSave: Int {
        let total = keyspace.totalChanges
        return max(0, total - current.changesAtLastSave)
    }

    /// Whether the snapshot file at `path` holds the dataset as it is: loaded from it or saved to it, and
    /// nothing changed since. A final save would write the same keys again.
    package func fileHoldsDataset(_ path: String) -> Bool {
        current.inFile == path && changesSinceLastSave == 0 && access(path, F_OK) == 0
    }

    // MARK: saving

    /// How a request to save ended.
    package enum Outcome: Sendable {
        case saved(SnapshotSaveSummary)
        case failed(SnapshotError)
        /// Another save is being written.
        case busy
    }

    /// Whether the last background save failed, and no save succeeded since (``ServerState/refusesWrites``).
    @inline(__always)
    package var backgroundSaveFailed: Bool { failedInBackground.load(ordering: .relaxed) }

    /// Calls off the background save in progress, if any (FLUSHALL, as Redis kills its saving child): it
    /// stops at its next shard and leaves the previous snapshot in place. The next ``saveNow`` waits for it.
    package func callOffBackgroundSave() {
        condition.lock()
        if status.inProgress && status.background { cancelRequested.store(true, ordering: .relaxed) }
        condition.unlock()
    }

    /// Writes a snapshot on the calling thread. When another save is in progress it returns ``Outcome/busy``,
    /// or with `waitForOthers` waits for it to end and then saves.
    package func saveNow(_ config: ServerConfiguration, trigger: String, waitForOthers: Bool = false) -> Outcome {
        condition.lock()
        if status.inProgress && !waitForOthers {
            condition.unlock()
            return .busy
        }
        while status.inProgress { condition.wait() }
        begin(background: false)
        condition.unlock()
        return write(config, trigger: trigger)
    }

    /// How BGSAVE was answered.
    package enum BackgroundRequest: Sendable {
        case started
        case scheduled
        case alreadyInProgress
    }

    /// Starts a save on a thread of its own. With `schedule`, a request made while another save runs is
    /// remembered and started when that one ends (BGSAVE SCHEDULE).
    package func saveInBackground(
        _ config: @escaping @Sendable () -> ServerConfiguration, trigger: String, schedule: Bool = false
    ) -> BackgroundRequest {
        condition.lock()
        defer { condition.unlock() }
        if status.inProgress {
            guard schedule else { return .alreadyInProgress }
            status.scheduled = true
            return .scheduled
        }
        begin(background: true)
        startThread(config, trigger: trigger)
        return .started
    }

    /// Marks a save as begun. `condition` must be held.
    private func begin(background: Bool) {
        cancelRequested.store(false, ordering: .relaxed)
        status.inProgress = true
        status.background = background
        status.currentStart = clock.nowMilliseconds()
    }

    private func startThread(_ config: @escaping @Sendable () -> ServerConfiguration, trigger: String) {
        let thread = Thread { [self] in
            cached_name_current_thread("cached-snapshot")
            _ = write(config(), trigger: trigger)
            // A BGSAVE SCHEDULE that came in meanwhile runs now.
            condition.lock()
            if status.scheduled && !status.inProgress {
                status.scheduled = false
                begin(background: true)
                startThread(config, trigger: "BGSAVE SCHEDULE")
            }
            condition.unlock()
        }
        thread.name = "cached-snapshot"
        thread.start()
    }

    /// Writes the snapshot (the caller has marked the save as begun) and records how it went.
    private func write(_ config: ServerConfiguration, trigger: String) -> Outcome {
        let path = config.snapshotPath
        let changesBefore = keyspace.totalChanges
        let started = clock.nowMilliseconds()
        let monotonicStart = DispatchTime.now().uptimeNanoseconds
        let result: Result<SnapshotSaveSummary, SnapshotError>
        do throws(SnapshotError) {
            result = .success(try SnapshotWriter.save(keyspace, to: path, now: started) {
                self.cancelRequested.load(ordering: .relaxed)
            })
        } catch {
            result = .failure(error)
        }
        let milliseconds = Int((DispatchTime.now().uptimeNanoseconds - monotonicStart) / 1_000_000)
        let finished = clock.nowMilliseconds()

        condition.lock()
        let background = status.background
        status.inProgress = false
        status.background = false
        if background { status.lastBackgroundSeconds = milliseconds / 1000 }
        switch result {
        case .failure(let error) where error.kind == .cancelled:
            break  // neither a save nor a failure, as in Redis
        case .success:
            failedInBackground.store(false, ordering: .relaxed)
            status.lastSaveOK = true
            status.lastSaveTime = finished
            status.changesAtLastSave = changesBefore
            status.saves += 1
            status.inFile = path
        case .failure:
            if background { failedInBackground.store(true, ordering: .relaxed) }
            status.lastSaveOK = false
            status.lastFailureTime = finished
        }
        condition.broadcast()
        condition.unlock()

        switch result {
        case .success(let summary):
            logger.notice(
                "Snapshot saved",
                metadata: [
                    "keys": "\(summary.keys)", "bytes": "\(summary.bytes)", "duration_ms": "\(milliseconds)",
                    "trigger": "\(trigger)", "file": "\(path)",
                ])
            return .saved(summary)
        case .failure(let error) where error.kind == .cancelled:
            logger.notice("Background save called off", metadata: ["trigger": "\(trigger)"])
            return .failed(error)
        case .failure(let error):
            logger.error("Snapshot failed", metadata: ["trigger": "\(trigger)", "error": "\(error)"])
            return .failed(error)
        }
    }

    // MARK: the schedule

    /// The save point that makes a scheduled save due, if any: at least `changes` changes and more than
    /// `seconds` since the last save, as Redis's serverCron decides; after a failed save, not before
    /// ``retryDelay`` has passed.
    package static func duePoint(
        _ points: [ServerConfiguration.SavePoint], changes: Int, now: Int64, status: Status
    ) -> ServerConfiguration.SavePoint? {
        if !status.lastSaveOK && now - status.lastFailureTime <= retryDelay { return nil }
        return points.first { changes >= $0.changes && now - status.lastSaveTime > Int64($0.seconds) * 1000 }
    }

    /// Checks the `save` points every 100 ms on a thread of its own until ``stopScheduler()``; every second while
    /// there are none (a point set with CONFIG SET is then seen within a second), so that a server without
    /// persistence does not wake ten times a second for nothing.
    package func startScheduler(_ config: @escaping @Sendable () -> ServerConfiguration) {
        condition.lock()
        schedulerRunning = true
        schedulerStopped = false
        condition.unlock()
        let thread = Thread { [self] in
            cached_name_current_thread("cached-schedule")
            condition.lock()
            while schedulerRunning {
                let interval = config().savePoints.isEmpty ? 1.0 : 0.1
                _ = condition.wait(until: Date().addingTimeInterval(interval))
                guard schedulerRunning else { break }
                let points = config().savePoints
                let now = clock.nowMilliseconds()
                // Summing the change counters takes every shard's lock, so it waits for the time condition.
                guard !status.inProgress,
                    points.contains(where: { now - status.lastSaveTime > Int64($0.seconds) * 1000 })
                else { continue }
                let snapshot = status
                condition.unlock()
                let changes = max(0, keyspace.totalChanges - snapshot.changesAtLastSave)
                condition.lock()
                if let point = Self.duePoint(points, changes: changes, now: now, status: status), !status.inProgress {
                    begin(background: true)
                    startThread(config, trigger: "save \(point.seconds) \(point.changes)")
                }
            }
            schedulerStopped = true
            condition.broadcast()
            condition.unlock()
        }
        thread.name = "cached-schedule"
        thread.start()
    }

    /// Stops the schedule and waits for a save in progress to end.
    package func stopScheduler() {
        condition.lock()
        schedulerRunning = false
        status.scheduled = false
        condition.broadcast()
        while !schedulerStopped || status.inProgress { condition.wait() }
        condition.unlock()
    }

    // MARK: loading

    /// Loads the snapshot file at startup. Returns nil when there is none; throws ``SnapshotLoadError`` when
    /// the file cannot be used and `snapshot-load-corrupt` is `fail`, or when `cancelled` answered true (asked
    /// between blocks: a shutdown while loading) with ``SnapshotLoadError/isCancellation`` set.
    @discardableResult
    package func load(
        _ config: ServerConfiguration, cancelled: () -> Bool = { false }
    ) throws(SnapshotLoadError) -> SnapshotLoadSummary? {
        let path = config.snapshotPath
        let leftover = SnapshotWriter.temporaryPath(for: path)
        if unlink(leftover) == 0 {
            logger.notice("Removed the incomplete snapshot of an interrupted save", metadata: ["file": "\(leftover)"])
        }
        let keep = config.snapshotLoadCorrupt == .skip
        let monotonicStart = DispatchTime.now().uptimeNanoseconds
        if access(path, F_OK) == 0 { logger.notice("Loading the snapshot", metadata: ["file": "\(path)"]) }
        let summary: SnapshotLoadSummary?
        do throws(SnapshotError) {
            summary = try SnapshotReader.load(
                path, into: keyspace, now: clock.nowMilliseconds(), keepIntactPart: keep, cancelled: cancelled,
                keyLoadDelay: config.keyLoadDelay)
        } catch {
            throw SnapshotLoadError(underlying: error)
        }
        guard let summary else {
            logger.info("No snapshot to load", metadata: ["file": "\(path)"])
            return nil
        }
        let milliseconds = Int((DispatchTime.now().uptimeNanoseconds - monotonicStart) / 1_000_000)
        condition.lock()
        status.loadedKeys = summary.keys
        status.expiredOnLoad = summary.expired
        status.changesAtLastSave = keyspace.totalChanges
        // A damaged file is moved aside: it holds more than was loaded.
        status.inFile = summary.damage == nil ? path : nil
        condition.unlock()
        if let damage = summary.damage {
            let aside = path + ".corrupt"
            let moved = rename(path, aside) == 0
            logger.warning(
                "The snapshot is damaged: kept the keys before the damage (snapshot-load-corrupt skip)",
                metadata: [
                    "error": "\(damage)", "keys": "\(summary.keys)", "expired": "\(summary.expired)",
                    "moved_to": moved ? "\(aside)" : "(could not move it: \(String(cString: strerror(errno))))",
                ])
        } else {
            logger.notice(
                "Snapshot loaded",
                metadata: [
                    "keys": "\(summary.keys)", "expired": "\(summary.expired)", "bytes": "\(summary.bytes)",
                    "duration_ms": "\(milliseconds)", "file": "\(path)",
                ])
        }
        return summary
    }
}

/// The snapshot file could not be loaded at startup, and `snapshot-load-corrupt` is `fail`.
public struct SnapshotLoadError: Error, CustomStringConvertible {
    let underlying: SnapshotError

    /// Whether the load was called off (a shutdown while it ran) rather than failed.
    public var isCancellation: Bool { underlying.kind == .cancelled }

    /// Whether the file itself is at fault (damaged, of a newer format, or for more databases than
    /// configured), so that starting again cannot succeed; false for I/O errors and lack of memory.
    public var isDamage: Bool {
        switch underlying.kind {
        case .corrupt, .unsupportedVersion, .incompatible: true
        case .io, .outOfMemory, .cancelled: false
        }
    }

    public var description: String {
        var text = "Can't load the snapshot \(underlying)."
        switch underlying.kind {
        case .corrupt, .unsupportedVersion, .incompatible:
            text += " Refusing to start with data missing: move the file away to start empty, or set"
            text += " snapshot-load-corrupt skip to load the keys before the damage and start."
        case .io, .outOfMemory, .cancelled:
            break
        }
        return text
    }
}
