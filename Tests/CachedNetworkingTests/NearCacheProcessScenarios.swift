import CachedNetworking
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
            // Each process serves the current body from its near cache before anything changes.
            for program in running {
                try await waitForNearHits(program, atLeast: 3)
            }
            body.withLock { $0 = "round \(round)" }
            let stored = try await cache.run(origin.request(path), policy: .reloadIgnoringLocalCacheData)
            let acknowledged = Date().timeIntervalSince1970
            #expect(stored.cacheStatus.stored, "\(stored.cacheStatus.headerValue)")
            let outputs = try await offThread { try running.map { try $0.wait(timeout: 60) } }
            for output in outputs {
                #expect(output.status == 0, "\(output.summary)")
                #expect(output.standardOutput == "round \(round)", "\(output.summary)")
                guard let changedAt = Self.changedAt(output.standardError) else {
                    Issue.record("no changed=yes line: \(output.summary)")
                    continue
                }
                report.record(.microseconds(Int64(((changedAt - acknowledged) * 1e6).rounded())))
            }
        }
        report.check()
        await store.shutdown()
        await origin.stop()
        _ = try await offThread { server.stop() }
    }

    /// Waits until `program` reports at least `count` near-cache hits on standard error.
    private func waitForNearHits(_ program: RunningProgram, atLeast count: Int) async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            let lines = program.standardErrorSoFar.split(separator: "\n")
            if let hits = lines.last(where: { $0.contains("near-hits=") }).flatMap(Self.nearHits), hits >= count { return }
            try await Task.sleep(for: .milliseconds(10))
        }
        Issue.record("\(program.command) did not answer from its near cache within 30 s: \(program.standardErrorSoFar.suffix(2_000))")
        throw TestEnvironmentError("no near-cache hits")
    }

    /// `near-hits=N` in a line of `cached-fetch --repeat`.
    private static func nearHits(_ line: Substring) -> Int? {
        line.split(separator: " ").first { $0.hasPrefix("near-hits=") }.flatMap { Int($0.dropFirst("near-hits=".count)) }
    }

    /// The `time=` of the first `changed=yes` line.
    private static func changedAt(_ standardError: String) -> Double? {
        guard let line = standardError.split(separator: "\n").first(where: { $0.contains(" changed=yes") }) else { return nil }
        return line.split(separator: " ").first { $0.hasPrefix("time=") }.flatMap { Double($0.dropFirst("time=".count)) }
    }
}
