import CachedNetworking
import CachedNetworkingRedis
import CachedNetworkingTesting
import CachedOriginSupport
import CachedTestSupport
import Foundation
import Synchronization
import Testing

/// The SDK against a live `cached-server` or `redis-server`: several `cached-fetch` processes sharing it, and an
/// outage (the server killed, then restarted on the same port).
@Suite("the SDK against a live store")
struct LiveStoreScenarioTests {
    /// 8 processes that miss at once make one origin request: the cross-process lease (`SET …#lock NX PX`) lets
    /// one fetch while the others poll the store for its response.
    @Test(
        "8 cached-fetch processes started at once for one URL: one origin request, one store, 7 hits",
        arguments: [ServerProcess.Kind.cached, .redis])
    func eightProcessesOneOriginRequest(_ kind: ServerProcess.Kind) async throws {
        let path = "/shared"
        let body = "shared body \(UUID().uuidString)"
        // The origin is slow enough that the processes overlap: those that miss while the first one fetches find
        // its lease.
        let (server, origin) = try await startServerAndOrigin(kind, path: path, body: body, delay: .milliseconds(300))
        let arguments = [
            "--store", "redis://127.0.0.1:\(server.port)", "--namespace", "fetch-\(UUID().uuidString)", origin.url(path),
        ]

        let outputs = try await offThread {
            let running = try (0..<8).map { _ in try ExternalProgram.cachedFetch.start(arguments) }
            return try running.map { try $0.wait(timeout: 60) }
        }
        await origin.stop()

        for output in outputs {
            #expect(output.status == 0, "\(output.summary)")
            #expect(output.standardOutput == body, "\(output.summary)")
        }
        #expect(origin.count(path) == 1)
        let statuses = outputs.map { output in
            output.standardError.split(separator: "\n").last { $0.hasPrefix("Cache-Status: ") }.map(String.init) ?? ""
        }
        #expect(statuses.filter { $0 == "Cache-Status: cached; fwd=uri-miss; stored" }.count == 1, "\(statuses)")
        let hits = statuses.filter { $0.hasPrefix("Cache-Status: cached; hit; ttl=") }
        #expect(hits.count == 7, "\(statuses)")
    }

    /// `CachedNetworking` over `FailOpenStore(RESPStore)`: requests never fail with the store, and the breaker
    /// keeps them from touching a dead one.
    @Test(
        "server killed: requests go to the origin, errors are counted, the breaker opens; restarted: the cache hits again",
        arguments: [ServerProcess.Kind.cached, .redis])
    func killedAndRestarted(_ kind: ServerProcess.Kind) async throws {
        let path = "/outage"
        let (server, origin) = try await startServerAndOrigin(kind, path: path, body: "from the origin")

        var storeConfiguration = try RESPStore.Configuration(url: "redis://127.0.0.1:\(server.port)")
        storeConfiguration.poolSize = 2
        storeConfiguration.minReconnectDelay = .milliseconds(20)
        storeConfiguration.maxReconnectDelay = .milliseconds(100)
        let breakerClock = ManualCacheClock()
        let transitions = Mutex<[String]>([])
        let store = FailOpenStore(
            wrapping: RESPStore(configuration: storeConfiguration), failureThreshold: 5, coolDown: .seconds(1),
            clock: breakerClock, onStateChange: { from, to in transitions.withLock { $0.append("\(from) -> \(to)") } })
        let metrics = TestMetrics()
        var configuration = CachedNetworking.Configuration()
        configuration.namespace = "outage-\(UUID().uuidString)"
        configuration.metricsFactory = metrics
        let cache = CachedNetworking(store: store, transport: sharedTransport, configuration: configuration)
        let request = origin.request(path)

        #expect(try await cache.run(request).source == .network)
        #expect(try await cache.run(request).source == .cache)
        #expect(origin.count(path) == 1)

        try await offThread { server.kill() }
        var sources: [CachedResponse.Source] = []
        var bodies: Set<String> = []
        var afterOpening: Duration = .zero
        for _ in 0..<50 {
            let tripped = store.state.isTripped
            let start = ContinuousClock.now
            let answer = try await cache.run(request)
            if tripped { afterOpening += ContinuousClock.now - start }
            sources.append(answer.source)
            bodies.insert(answer.text)
        }
        #expect(sources == Array(repeating: .network, count: 50))
        #expect(bodies == ["from the origin"])
        #expect(origin.count(path) == 51)
        #expect(metrics.value(CachedNetworkingMetrics.storeErrors) >= 50)
        // The breaker opened once and stayed open (its clock did not move): the later requests did not touch the
        // dead store at all, so 45 and more of them take far less than one store timeout each.
        #expect(transitions.withLock { $0 } == ["closed (4 consecutive failures) -> open"])
        #expect(store.state.isTripped)
        #expect(afterOpening < .seconds(5), "\(afterOpening)")

        try await offThread { try server.restart() }
        // Past the cool-down one probe goes through. The pool may still be waiting out a reconnect delay, which
        // fails the probe and reopens the breaker for another cool-down: move the clock again, a bounded number
        // of times.
        var refilled: CachedResponse? = nil
        let deadline = ContinuousClock.now + .seconds(10)
        while refilled == nil && ContinuousClock.now < deadline {
            breakerClock.advance(by: .seconds(1))
            let answer = try await cache.run(request)
            #expect(answer.text == "from the origin")
            if answer.cacheStatus.stored { refilled = answer } else { try await Task.sleep(for: .milliseconds(20)) }
        }
        #expect(refilled?.source == .network)
        let originRequests = origin.count(path)
        let hit = try await cache.run(request)
        #expect(hit.source == .cache)
        #expect(hit.text == "from the origin")
        #expect(origin.count(path) == originRequests)
        #expect(store.state == .closed(consecutiveFailures: 0))

        await store.shutdown()
        await origin.stop()
    }

    /// A server of `kind`, and a local origin that answers `path` with `body` and `Cache-Control: max-age=60`
    /// after `delay`.
    @Test("cached-fetch -d and -X: an unsafe method reaches the origin and invalidates the stored GET of its URL")
    func unsafeMethodInvalidates() async throws {
        let server = try await offThread { try ServerProcess.start(.cached) }
        defer { server.stop() }
        let origin = try await OriginServer.start()
        let calls = Tally()
        // The origin answers the path as the cache should send it: `|` and a `%` that starts no escape escaped,
        // the typed `%3D` unchanged.
        origin.route("/doc?q=a%3Db%7Cc&p=100%25") { received in
            .init(headers: [("Cache-Control", "max-age=60")], body: "\(received.method) \(calls.next())")
        }
        let common = ["--store", "redis://127.0.0.1:\(server.port)", "--namespace", "unsafe-\(UUID().uuidString)"]
        let url = origin.url("/doc") + "?q=a%3Db|c&p=100%"
        let runs: [[String]] = [[], [], ["-d", "x"], [], ["-X", "DELETE"], []]
        let outputs = try await offThread {
            try runs.map { extra in try ExternalProgram.cachedFetch.run(common + extra + [url], timeout: 60) }
        }
        await origin.stop()

        #expect(outputs.map(\.standardOutput) == ["GET 1", "GET 1", "POST 2", "GET 3", "DELETE 4", "GET 5"])
        #expect(outputs.allSatisfy { $0.status == 0 }, "\(outputs.map(\.summary))")
    }

    private func startServerAndOrigin(
        _ kind: ServerProcess.Kind, path: String, body: String, delay: Duration? = nil
    ) async throws -> (ServerProcess, OriginServer) {
        let server = try await offThread { try ServerProcess.start(kind) }
        let origin = try await OriginServer.start()
        origin.route(path, reply: .init(headers: [("Cache-Control", "max-age=60")], body: body, delay: delay))
        return (server, origin)
    }
}
