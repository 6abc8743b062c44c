import CachedNetworking
import CachedNetworkingRedis
import CachedOriginSupport
import CachedTestSupport
import Foundation
import Synchronization
import Testing

/// The near cache across processes: `cached-fetch --near-cache` processes fetch one URL over and over, answered
/// from their near caches, while this process overwrites the stored response.
extension NearCacheScenarios {
    /// Each round: the origin's body changes, this process refetches and stores it (`reload`), and every
    /// `cached-fetch` process, which was serving the old body from its near cache, must switch to the new one.
    /// The time from this process's store (acknowledged) to each process's first answer with the new body is one
    /// measurement, on the wall clock the processes share. It can be slightly negative: the server sends the
    /// invalidation as it executes the write, so another process may answer with the new body before this one has
    /// finished handling the acknowledgement.
    func processesSeeAnOverwrite(broadcast: Bool, rounds: Int = 3, processes: Int = 2) async throws {
        let server = try await startTrackingServer(kind)
        let origin = try await OriginServer.start()
        let path = "/near-cache-item"
        let body = Mutex("round 0")
        origin.route(path) { _ in OriginServer.Reply(headers: [("Cache-Control", "max-age=600")], body: body.withLock { $0 }) }
        let namespace = "procs-\(UUID().uuidString)"
        var storeConfiguration = RESPStore.Configuration(host: "127.0.0.1", port: server.port)
        storeConfiguration.commandTimeout = .seconds(5)
        let store = RESPStore(configuration: storeConfiguration)
        var configuration = CachedNetworking.Configuration()
        configuration.namespace = namespace
        configuration.storeTimeout = .seconds(5)
        let cache = CachedNetworking(store: store, transport: sharedTransport, configuration: configuration)
        #expect(try await cache.run(origin.request(path)).text == "round 0")

        var arguments = [
            "--store", "redis://127.0.0.1:\(server.port)", "--namespace", namespace, "--near-cache", "1m",
            "--repeat", "100000", "--interval", "1", "--until-changed",
        ]
        if broadcast { arguments.append("--near-cache-broadcast") }
        arguments.append(origin.url(path))
        var report = LatencyReport("\(kind), \(broadcast ? "broadcast" : "default") mode, \(processes) cached-fetch processes")
        for round in 1...rounds {
            let running = try await offThread { [arguments] in
                try (0..<processes).map { _ in try ExternalProgram.cachedFetch.start(arguments) }
            }
            // Once every process answers from its near cache, the body changes and this process stores it.
            let delays = try await CachedFetchLines.measureOverwrite(seenBy: running, expecting: "round \(round)") {
                body.withLock { $0 = "round \(round)" }
                let stored = try await cache.run(origin.request(path), policy: .reloadIgnoringLocalCacheData)
                #expect(stored.cacheStatus.stored, "\(stored.cacheStatus.headerValue)")
            }
            for delay in delays { report.record(delay) }
        }
        report.check()
        await store.shutdown()
        await origin.stop()
        _ = try await offThread { server.stop() }
    }
}
