import CacheCore
import NIOCore
import RESP

/// Commands on whole databases: SELECT, SWAPDB, DBSIZE, FLUSHDB, FLUSHALL.
package enum DatabaseCommands {
    static func select(_ c: inout CommandContext) {
        guard let index = c.integerArgument(1) else { return }
        guard index >= Int(Int32.min) && index <= Int(Int32.max) else { return c.error(ReplyError.notInt32) }
        guard index >= 0 && index < c.server.keyspace.databases.count else {
            return c.error(ReplyError.dbIndexOutOfRange)
        }
        c.session.db = index
        c.ok()
    }

    static func swapdb(_ c: inout CommandContext) {
        guard let a = c.arguments.integer(1), a >= Int(Int32.min), a <= Int(Int32.max) else {
            return c.error("ERR invalid first DB index")
        }
        guard let b = c.arguments.integer(2), b >= Int(Int32.min), b <= Int(Int32.max) else {
            return c.error("ERR invalid second DB index")
        }
        let count = c.server.keyspace.databases.count
        guard a >= 0 && a < count && b >= 0 && b < count else { return c.error(ReplyError.dbIndexOutOfRange) }
        if a != b { c.server.touchWatchedKeys(swapping: a, b, now: c.now) }
        c.server.keyspace.swapDatabases(a, b)
        c.ok()
    }

    static func dbsize(_ c: inout CommandContext) {
        c.integer(c.database.count)
    }

    /// Parses FLUSHDB/FLUSHALL's optional ASYNC|SYNC, replying with a syntax error when it is anything else.
    static func flushMode(_ c: inout CommandContext) -> Bool {
        if c.arguments.count > 2 {
            c.error(ReplyError.syntax)
            return false
        }
        if c.arguments.count == 2 && !c.arguments.matches(1, "async") && !c.arguments.matches(1, "sync") {
            c.error(ReplyError.syntax)
            return false
        }
        return true
    }

    static func flushdb(_ c: inout CommandContext) {
        guard flushMode(&c) else { return }
        c.server.touchWatchedKeys(flushing: c.session.db, now: c.now)
        c.database.removeAll()
        EntryMemory.purgeAll()
        c.keysFlushed()
        c.ok()
    }

    static func flushall(_ c: inout CommandContext) {
        guard flushMode(&c) else { return }
        let config = c.server.config
        // As Redis: with save points set, the empty dataset is saved at once, so that a restart (after a crash
        // before the next save point) does not bring the flushed keys back. A background save under way is
        // called off first (Redis kills its child); a failure is logged, and the flush stands.
        let saves = !config.savePoints.isEmpty
        // With or without save points: a save of the keys being flushed must not land after the flush.
        c.server.snapshots.callOffBackgroundSave()
        for db in c.server.keyspace.databases.indices { c.server.touchWatchedKeys(flushing: db, now: c.now) }
        for db in c.server.keyspace.databases { db.removeAll() }
        EntryMemory.purgeAll()
        c.keysFlushed()
        if saves { _ = c.server.snapshots.saveNow(config, trigger: "FLUSHALL", waitForOthers: true) }
        c.ok()
    }
}
