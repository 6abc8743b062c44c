// The Swift samples of docs/sdk.md whose imports are exactly these, as the docs show them (``DocsSampleTests``
// checks that each sample is here, with its imports, and runs them).
import CachedNetworking
import Logging

// docs/sdk.md, Near cache

func makeNearCachedStore(url: String, logger: Logger) throws -> RESPStore {
    var configuration = try RESPStore.Configuration(url: url)
    configuration.nearCache = RESPStore.NearCache(maxBytes: 32 << 20, maxAge: .seconds(30))
    // Or: RESPStore.NearCache(maxBytes: 32 << 20, mode: .broadcast(prefixes: ["catalog:"]))
    return RESPStore(configuration: configuration, logger: logger)
}

func makeNearCachedClusterStore(url: String, logger: Logger) throws -> RESPClusterStore {
    var configuration = try RESPClusterStore.Configuration(url: url)   // redis+cluster://host:port,host:port
    configuration.nearCache = RESPStore.NearCache(maxBytes: 32 << 20, maxAge: .seconds(30))
    return RESPClusterStore(configuration: configuration, logger: logger)
}
