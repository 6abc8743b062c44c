import Synchronization

/// Joins concurrent calls with the same key into one: the first caller's operation runs, the others await
/// its result.
///
/// The operation runs in the first caller's own task, so that a call without followers costs no task creation
/// and no hop between tasks. A cancelled first caller must not pass its cancellation on to the others: when its
/// task was cancelled by the time the operation returned, the others run again (one of them leads).
final class SingleFlight<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    private let flights = Mutex<[Key: Flight]>([:])

    /// Runs `operation` for `key`, or joins the one already running.
    /// - Returns: The value, and whether this call ran the operation.
    func run(_ key: Key, _ operation: @Sendable () async -> Value) async -> (value: Value, leader: Bool) {
        while true {
            let (flight, leader) = flights.withLock { flights -> (Flight, Bool) in
                if let existing = flights[key] { return (existing, false) }
                let flight = Flight()
                flights[key] = flight
                return (flight, true)
            }
            if leader {
                let value = await operation()
                let cancelled = Task.isCancelled
                flights.withLock { _ = $0.removeValue(forKey: key) }
                flight.finish(value, leaderCancelled: cancelled)
                return (value, true)
            }
            let (value, leaderCancelled) = await flight.wait()
            if leaderCancelled && !Task.isCancelled { continue }
            return (value, false)
        }
    }

    /// Whether a flight for `key` is running.
    func isRunning(_ key: Key) -> Bool {
        flights.withLock { $0[key] != nil }
    }

    /// How many callers are waiting for the running flights' values (for tests).
    var waiting: Int {
        let running = flights.withLock { Array($0.values) }
        return running.reduce(0) { $0 + $1.waiting }
    }

    /// One running operation and the callers waiting for its value.
    private final class Flight: Sendable {
        private struct State {
            var outcome: (value: Value, leaderCancelled: Bool)?
            /// Resumed exactly once each, by ``finish(_:leaderCancelled:)`` (unchecked continuations: a checked
            /// one allocates a box per waiter, a thousand of them in a herd).
            var waiters: [UnsafeContinuation<(Value, Bool), Never>] = []
        }
        private let state = Mutex(State())

        /// How many callers wait for the value.
        var waiting: Int { state.withLock { $0.waiters.count } }

        /// The value, once the leader has it, and whether the leader's task had been cancelled.
        func wait() async -> (Value, Bool) {
            await withUnsafeContinuation { continuation in
                let outcome = state.withLock { state -> (Value, Bool)? in
                    if let outcome = state.outcome { return outcome }
                    state.waiters.append(continuation)
                    return nil
                }
                if let outcome { continuation.resume(returning: outcome) }
            }
        }

        func finish(_ value: Value, leaderCancelled: Bool) {
            let waiters = state.withLock { state in
                state.outcome = (value, leaderCancelled)
                defer { state.waiters = [] }
                return state.waiters
            }
            for waiter in waiters { waiter.resume(returning: (value, leaderCancelled)) }
        }
    }
}
