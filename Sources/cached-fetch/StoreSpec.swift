import CachedNetworking
import CachedNetworkingAsyncHTTPClient
import CachedNetworkingRedis
import Logging
import NIOCore

/// Which store `--store` names.
enum StoreSpec: Equatable {
    case memory
    case redis(String)
    case redisCluster(String)

    /// Reads `memory`, a `redis://[user:password@]host:port[/db]` URL, or a
    /// `redis+cluster://[user:password@]host:port,host:port…` URL; `rediss://` and `rediss+cluster://` for TLS
    /// (the server's certificate checked against the system's CAs, which `SSL_CERT_FILE` can name).
    init(parsing text: String) throws(StoreSpecError) {
        func named(_ schemes: String...) -> Bool {
            schemes.contains { text.hasPrefix($0) && text.count > $0.count }
        }
        if text == "memory" {
            self = .memory
        } else if named("redis://", "rediss://") {
            self = .redis(text)
        } else if named("redis+cluster://", "rediss+cluster://") {
            self = .redisCluster(text)
        } else {
            throw StoreSpecError(
                message: "unknown store '\(text)': use memory, redis[s]://host:port[/db] or redis[s]+cluster://host:port,…")
        }
    }

    /// Checks that the URL is one the store accepts (its form, port, database, user), without connecting.
    func check() throws(StoreSpecError) {
        do {
            switch self {
            case .memory: break
            case .redis(let url): _ = try RESPStore.Configuration(url: url)
            case .redisCluster(let url): _ = try RESPClusterStore.Configuration(url: url)
            }
        } catch {
            throw StoreSpecError(message: "\(error)")
        }
    }
}

/// A store specification that cannot be used.
struct StoreSpecError: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}

/// The store the flags name, and how to read its near cache's statistics when it has one.
struct MadeStore {
    let store: any CacheStore
    let nearCacheStatistics: @Sendable () -> RESPStore.NearCacheStatistics?
}

/// Makes the store `spec` names: a ``MemoryStore`` that lives as long as this process (one fetch, so every
/// run is a miss that shows what would be stored), a ``RESPStore`` on a `cached-server` or Redis server (with
/// the near cache `nearCache` if given), or a ``RESPClusterStore`` on a Redis Cluster (with the near cache too),
/// behind a circuit breaker; the store logs to `logger`.
func makeStore(
    _ spec: StoreSpec, nearCache: RESPStore.NearCache? = nil, logger: Logger = RESPStore.disabledLogger
) throws(StoreSpecError) -> MadeStore {
    switch spec {
    case .memory:
        if nearCache != nil { throw StoreSpecError(message: "--near-cache needs a redis:// or redis+cluster:// store") }
        return MadeStore(store: MemoryStore(cleanupInterval: nil), nearCacheStatistics: { nil })
    case .redis(let url):
        do {
            var configuration = try RESPStore.Configuration(url: url)
            configuration.poolSize = 2
            configuration.nearCache = nearCache
            let resp = RESPStore(configuration: configuration, logger: logger)
            return MadeStore(store: FailOpenStore(wrapping: resp), nearCacheStatistics: { resp.nearCacheStatistics })
        } catch {
            throw StoreSpecError(message: "\(error)")
        }
    case .redisCluster(let url):
        do {
            var configuration = try RESPClusterStore.Configuration(url: url)
            configuration.poolSize = 2
            configuration.nearCache = nearCache
            let cluster = RESPClusterStore(configuration: configuration, logger: logger)
            return MadeStore(store: FailOpenStore(wrapping: cluster), nearCacheStatistics: { cluster.nearCacheStatistics })
        } catch {
            throw StoreSpecError(message: "\(error)")
        }
    }
}

/// Reads a byte count: digits with an optional binary suffix `k`, `m` or `g` (`16m` is 16 MiB; `kb`, `mb`, `gb`
/// too, in any case).
func parseByteCount(_ text: String) throws(StoreSpecError) -> Int {
    let lowered = text.lowercased()
    var digits = Substring(lowered)
    if digits.hasSuffix("b") && digits.count > 1 && !(digits.dropLast().last?.isNumber ?? true) { digits = digits.dropLast() }
    var shift = 0
    switch digits.last {
    case "k": shift = 10
    case "m": shift = 20
    case "g": shift = 30
    default: break
    }
    if shift > 0 { digits = digits.dropLast() }
    guard let value = Int(digits), value > 0, value <= Int.max >> shift else {
        throw StoreSpecError(message: "not a byte count: '\(text)' (use e.g. 1048576, 512k or 16m)")
    }
    return value << shift
}
