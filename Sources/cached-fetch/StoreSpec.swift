import CachedNetworking
import NIOCore

/// Which store `--store` names.
enum StoreSpec: Equatable {
    case memory
    case redis(String)
    case redisCluster(String)

    /// Reads `memory`, a `redis://[user:password@]host:port[/db]` URL, or a
    /// `redis+cluster://[user:password@]host:port,host:port…` URL.
    init(parsing text: String) throws(StoreSpecError) {
        if text == "memory" {
            self = .memory
        } else if text.hasPrefix("redis://") && text.count > "redis://".count {
            self = .redis(text)
        } else if text.hasPrefix("redis+cluster://") && text.count > "redis+cluster://".count {
            self = .redisCluster(text)
        } else {
            throw StoreSpecError(
                message: "unknown store '\(text)': use memory, redis://host:port[/db] or redis+cluster://host:port,…")
        }
    }
}

/// A store specification that cannot be used.
struct StoreSpecError: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}

/// Makes the store `spec` names: a ``MemoryStore`` that lives as long as this process (one fetch, so every
/// run is a miss that shows what would be stored), a ``RESPStore`` on a `cached-server` or Redis server, or a
/// ``RESPClusterStore`` on a Redis Cluster, behind a circuit breaker.
func makeStore(_ spec: StoreSpec) throws(StoreSpecError) -> any CacheStore {
    switch spec {
    case .memory:
        return MemoryStore(cleanupInterval: nil)
    case .redis(let url):
        do {
            return FailOpenStore(wrapping: try RESPStore(url: url, poolSize: 2))
        } catch {
            throw StoreSpecError(message: "\(error)")
        }
    case .redisCluster(let url):
        do {
            return FailOpenStore(wrapping: try RESPClusterStore(url: url, poolSize: 2))
        } catch {
            throw StoreSpecError(message: "\(error)")
        }
    }
}
