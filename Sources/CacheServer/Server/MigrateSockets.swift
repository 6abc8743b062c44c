import Synchronization

/// MIGRATE's connections to its targets, kept for the next MIGRATE to the same `host:port` as Redis keeps them:
/// at most 64 (the one unused longest makes room), each closed once it has been unused for 10 seconds (checked
/// by the server's cron once a second) or when a MIGRATE through it fails.
///
/// A connection remembers the database it last selected, so that a MIGRATE into the same one sends no SELECT.
/// While a MIGRATE uses a connection, the connection is out of the cache.
package final class MigrateSockets: Sendable {
    /// How many connections are kept, and for how long unused (milliseconds), as in Redis.
    package static let capacity = 64
    package static let idleLimit: Int64 = 10_000

    /// A connection that is not in use.
    package struct Idle: Sendable {
        package let connection: OutboundConnection
        /// The database it selected last; nil when unknown (a SELECT failed).
        package let database: Int?
        /// When it was last used (milliseconds).
        package let lastUse: Int64
    }

    private let idle = Mutex<[String: Idle]>([:])

    package init() {}

    /// The connections kept now.
    package var count: Int { idle.withLock { $0.count } }

    /// The kept connection to `target` (`host:port`), taken out of the cache; nil when there is none.
    package func take(_ target: String) -> Idle? {
        idle.withLock { $0.removeValue(forKey: target) }
    }

    /// Keeps `connection` to `target` after a MIGRATE succeeded through it, having selected `database` (nil:
    /// unknown), at `now` (milliseconds). A full cache lets its least recently used connection go.
    package func keep(_ connection: OutboundConnection, to target: String, database: Int?, now: Int64) {
        let dropped: Idle? = idle.withLock { idle in
            var dropped: Idle?
            if idle[target] == nil, idle.count >= Self.capacity, let oldest = idle.min(by: { $0.value.lastUse < $1.value.lastUse }) {
                dropped = idle.removeValue(forKey: oldest.key)
            }
            idle[target] = Idle(connection: connection, database: database, lastUse: now)
            return dropped
        }
        _ = dropped  // closed here, outside the lock, as it is released
    }

    /// Closes the connections unused for longer than ``idleLimit`` at `now` (milliseconds).
    package func closeIdle(now: Int64) {
        let expired: [Idle] = idle.withLock { idle in
            let expired = idle.filter { now - $0.value.lastUse > Self.idleLimit }
            for key in expired.keys { idle.removeValue(forKey: key) }
            return Array(expired.values)
        }
        _ = expired  // closed outside the lock, as they are released
    }
}
