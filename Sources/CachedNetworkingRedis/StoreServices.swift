import CachedNetworking
public import ServiceLifecycle

/// A `Service` in a `ServiceGroup`: its connections close at graceful shutdown, after the services listed after
/// it (list the store before the cache that uses it).
extension RESPStore: Service {
    public func run() async throws { await runUntilGracefulShutdown() }
}

/// A `Service` in a `ServiceGroup`: its connections close at graceful shutdown, after the services listed after
/// it (list the store before the cache that uses it).
extension RESPClusterStore: Service {
    public func run() async throws { await runUntilGracefulShutdown() }
}
