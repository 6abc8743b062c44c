import CachedNetworking
import NIOCore

/// Which store `--store` names.
enum StoreSpec: Equatable {
    case memory
    case redis(String)

    /// Reads `memory` or a `redis://[user:password@]host:port[/db]` URL.
    init(parsing text: String) throws(StoreSpecError) {
        if text == "memory" {
            self = .memory
        } else if text.hasPrefix("redis://") && text.count > "redis://".count {
            self = .redis(text)
        } else {
            throw StoreSpecError(message: "unknown store '\(text)': use memory or redis://host:port[/db]")
        }
    }
}

/// A store specification that cannot be used.
struct StoreSpecError: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}

/// Makes the store `spec` names.
///
/// `redis://` needs the RESP store, which this build does not include yet.
func makeStore(_ spec: StoreSpec) throws(StoreSpecError) -> any CacheStore {
    switch spec {
    case .memory:
        return ProcessMemoryStore()
    case .redis(let url):
        throw StoreSpecError(message: "the redis store (\(url)) is not available in this build")
    }
}

/// The `memory` store: a dictionary that lives as long as this process (one fetch), so every run is a miss
/// that shows what would be stored. TTLs are kept as deadlines on the continuous clock.
actor ProcessMemoryStore: CacheStore {
    private var entries: [String: (value: ByteBuffer, deadline: ContinuousClock.Instant?)] = [:]

    private func live(_ key: String) -> ByteBuffer? {
        guard let entry = entries[key] else { return nil }
        if let deadline = entry.deadline, deadline <= .now {
            entries[key] = nil
            return nil
        }
        return entry.value
    }

    func get(_ key: String) async throws(CacheStoreError) -> ByteBuffer? { live(key) }

    func get(_ keys: [String]) async throws(CacheStoreError) -> [ByteBuffer?] { keys.map { live($0) } }

    func set(_ key: String, to value: ByteBuffer, ttl: Duration?) async throws(CacheStoreError) {
        entries[key] = (value, ttl.map { ContinuousClock.now + $0 })
    }

    func setIfAbsent(_ key: String, to value: ByteBuffer, ttl: Duration) async throws(CacheStoreError) -> Bool {
        guard live(key) == nil else { return false }
        entries[key] = (value, ContinuousClock.now + ttl)
        return true
    }

    func remove(_ keys: [String]) async throws(CacheStoreError) -> Int {
        keys.reduce(0) { count, key in
            let existed = live(key) != nil
            entries[key] = nil
            return count + (existed ? 1 : 0)
        }
    }

    func increment(_ key: String) async throws(CacheStoreError) -> Int {
        var current = 0
        if var value = live(key) {
            guard let text = value.readString(length: value.readableBytes), let number = Int(text) else {
                throw CacheStoreError(.server, "ERR value is not an integer or out of range")
            }
            current = number
        }
        entries[key] = (ByteBuffer(string: String(current + 1)), entries[key]?.deadline)
        return current + 1
    }

    func shutdown() async { entries.removeAll() }
}
