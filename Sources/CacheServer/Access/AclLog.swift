import Synchronization

/// ACL LOG: failed authentications (AUTH, HELLO ... AUTH) and commands refused for a command, key or channel
/// permission, as Redis logs them. A refusal like one of the ten most recent entries (the same reason,
/// object, username and context) within a minute of it counts in that entry, which becomes the newest,
/// instead of adding one. The newest entries are kept: when one is added, the oldest beyond
/// ``maxEntries`` (`acllog-max-len`) go.
package final class AclLog: Sendable {
    package struct Entry: Sendable {
        package var count: Int
        /// `auth`, `command`, `key` or `channel`.
        package let reason: String
        /// `toplevel`, or `multi` inside a transaction.
        package let context: String
        /// For `auth`, the command's name as the client sent it; else the command's full name, or the key or
        /// channel refused.
        package let object: String
        package let username: String
        /// When the entry was last counted, in the server clock's milliseconds.
        package var time: Int64
        /// CLIENT LIST's line for the client that failed last.
        package var clientInfo: String
    }

    /// `acllog-max-len`.
    package var maxEntries: Int {
        get { limit.load(ordering: .relaxed) }
        set { limit.store(newValue, ordering: .relaxed) }
    }
    private let limit = Atomic<Int>(128)
    /// How far apart two failures may be and still count in one entry.
    static let groupingWindow: Int64 = 60_000

    /// Newest first.
    private let entries = Mutex<[Entry]>([])

    package init() {}

    package func record(reason: String, context: String, object: String, username: String, clientInfo: String, now: Int64) {
        entries.withLock { entries in
            if let i = entries.prefix(10).firstIndex(where: {
                $0.reason == reason && $0.context == context && $0.object == object && $0.username == username
                    && now - $0.time <= Self.groupingWindow
            }) {
                // Counted, and moved to the front: it is the newest now.
                var entry = entries.remove(at: i)
                entry.count += 1
                entry.time = now
                entry.clientInfo = clientInfo
                entries.insert(entry, at: 0)
                return
            }
            entries.insert(
                Entry(count: 1, reason: reason, context: context, object: object, username: username, time: now, clientInfo: clientInfo),
                at: 0)
            let maxEntries = self.maxEntries
            if entries.count > maxEntries { entries.removeLast(entries.count - maxEntries) }
        }
    }

    /// The newest `limit` entries, newest first.
    package func newest(_ limit: Int) -> [Entry] { entries.withLock { Array($0.prefix(max(0, limit))) } }

    package func reset() { entries.withLock { $0.removeAll() } }
}
