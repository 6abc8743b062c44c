import Synchronization

/// Joins concurrent calls with the same key into one: the first caller's operation runs, the others await
/// its result.
final class SingleFlight<Value: Sendable>: Sendable {
    private let flights = Mutex<[String: Task<Value, Never>]>([:])

    /// Runs `operation` for `key`, or joins the one already running.
    /// - Returns: The value, and whether this call ran the operation.
    func run(_ key: String, _ operation: @escaping @Sendable () async -> Value) async -> (value: Value, leader: Bool) {
        let (task, leader) = flights.withLock { flights -> (Task<Value, Never>, Bool) in
            if let existing = flights[key] { return (existing, false) }
            let task = Task<Value, Never> {
                let value = await operation()
                self.flights.withLock { _ = $0.removeValue(forKey: key) }
                return value
            }
            flights[key] = task
            return (task, true)
        }
        return (await task.value, leader)
    }

    /// Whether a flight for `key` is running.
    func isRunning(_ key: String) -> Bool {
        flights.withLock { $0[key] != nil }
    }
}
