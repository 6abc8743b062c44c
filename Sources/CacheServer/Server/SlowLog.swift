import Synchronization

/// SLOWLOG: the commands that ran for at least `slowlog-log-slower-than` microseconds, newest last, at most
/// `slowlog-max-len` of them. Checking a command costs one relaxed load; only slow commands take the lock.
package final class SlowLog: Sendable {
    package struct Entry: Sendable, Equatable {
        package let id: Int
        /// Unix time in seconds when the command was logged.
        package let time: Int
        package let microseconds: Int
        /// The arguments as Redis logs them: at most 32, each at most 128 bytes, with a note of what was cut.
        package let arguments: [[UInt8]]
        package let client: String
        package let name: String
    }

    private struct State {
        var entries: [Entry] = []
        var nextID = 0
    }

    private let state = Mutex(State())
    private let threshold = Atomic<Int>(10_000)
    private let maxLength = Atomic<Int>(128)

    /// Redis's limits on what one entry keeps.
    package static let maxArguments = 32
    package static let maxArgumentBytes = 128

    package init() {}

    /// Applies `slowlog-log-slower-than` (microseconds; negative turns the log off) and `slowlog-max-len`. As in
    /// Redis, a lower length trims the log when the next entry is added.
    package func configure(thresholdMicroseconds: Int, maxLength length: Int) {
        threshold.store(thresholdMicroseconds, ordering: .relaxed)
        maxLength.store(length, ordering: .relaxed)
    }

    /// Whether a command that ran for `nanoseconds` belongs in the log.
    @inline(__always)
    package func isSlow(nanoseconds: Int) -> Bool {
        let limit = threshold.load(ordering: .relaxed)
        return limit >= 0 && nanoseconds / 1000 >= limit
    }

    /// Logs a command. The arguments at `redacted` (credentials) are logged as `(redacted)`.
    package func record(
        _ arguments: Arguments, redacted: Set<Int>, microseconds: Int, time: Int, client: String, name: String
    ) {
        let count = min(arguments.count, Self.maxArguments)
        var kept: [[UInt8]] = []
        kept.reserveCapacity(count)
        for j in 0..<count {
            if count < arguments.count && j == count - 1 {
                kept.append(Array("... (\(arguments.count - count + 1) more arguments)".utf8))
            } else if redacted.contains(j) {
                kept.append(Array("(redacted)".utf8))
            } else if arguments[j].count > Self.maxArgumentBytes {
                let more = arguments[j].count - Self.maxArgumentBytes
                kept.append(Array(arguments[j].prefix(Self.maxArgumentBytes)) + Array("... (\(more) more bytes)".utf8))
            } else {
                kept.append(Array(arguments[j]))
            }
        }
        let length = maxLength.load(ordering: .relaxed)
        state.withLock { state in
            let entry = Entry(id: state.nextID, time: time, microseconds: microseconds, arguments: kept, client: client, name: name)
            state.nextID += 1
            state.entries.append(entry)
            if state.entries.count > length { state.entries.removeFirst(state.entries.count - length) }
        }
    }

    /// The newest `count` entries, newest first (all of them for nil).
    package func newest(_ count: Int?) -> [Entry] {
        state.withLock { state in Array(state.entries.reversed().prefix(count ?? state.entries.count)) }
    }

    package var count: Int { state.withLock { $0.entries.count } }

    package func reset() { state.withLock { $0.entries.removeAll() } }
}
