import Synchronization

/// Runs asynchronous sections one at a time per key, within this process: a section for a key starts once the
/// one before it for that key has ended, in the order they asked. Sections for different keys run side by side.
///
/// For read-modify-write sequences on one store entry (combining partial responses, recording a variant's use in a
/// `Vary` index), whose steps suspend and so cannot hold a `Mutex`. Another process writing the same entry is not
/// held back.
final class KeyedLock: Sendable {
    /// The keys whose section is running, with the sections waiting for each.
    private let waiting = Mutex<[String: [CheckedContinuation<Void, Never>]]>([:])

    /// `body`'s result, run when no other section for `key` runs.
    func withLock<T: Sendable>(_ key: String, _ body: () async -> T) async -> T {
        await acquire(key)
        defer { release(key) }
        return await body()
    }

    private func acquire(_ key: String) async {
        let free = waiting.withLock { waiting -> Bool in
            guard waiting[key] == nil else { return false }
            waiting[key] = []
            return true
        }
        if free { return }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let freed = waiting.withLock { waiting -> Bool in
                // The holder may have left between the two looks.
                guard waiting[key] != nil else {
                    waiting[key] = []
                    return true
                }
                waiting[key]?.append(continuation)
                return false
            }
            if freed { continuation.resume() }
        }
    }

    /// Hands `key` to the next waiting section, or frees it.
    private func release(_ key: String) {
        let next = waiting.withLock { waiting -> CheckedContinuation<Void, Never>? in
            guard var queue = waiting[key], !queue.isEmpty else {
                waiting[key] = nil
                return nil
            }
            let next = queue.removeFirst()
            waiting[key] = queue
            return next
        }
        next?.resume()
    }
}
