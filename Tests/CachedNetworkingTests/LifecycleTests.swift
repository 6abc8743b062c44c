@testable import CachedNetworking
import CachedNetworkingAsyncHTTPClient
import CachedNetworkingTesting
@testable import CachedNetworkingRedis
import CachedOriginSupport
import CachedTestSupport
import Foundation
import Logging
import ServiceLifecycle
import Synchronization
import Testing

/// The cache and its store as swift-service-lifecycle services, and `shutdown()` without a group.
@Suite("Lifecycle: the cache and its store in a ServiceGroup")
struct LifecycleTests {
    @Test("graceful shutdown: the request in flight finishes and is stored, then the store's connections and threads end")
    func gracefulShutdownFinishesTheRequestInFlight() async throws {
        let server = try await offThread { try ServerProcess.start(.cached) }
        let origin = try await OriginServer.start()
        origin.route("/slow", reply: .init(headers: [("Cache-Control", "max-age=60")], body: "slow", delay: .milliseconds(300)))
        var configuration = try RESPStore.Configuration(url: "redis://127.0.0.1:\(server.port)")
        configuration.poolSize = 2
        let store = RESPStore(configuration: configuration)
        let transport = AsyncHTTPClientTransport()
        let cache = CachedNetworking(store: store, transport: transport)
        let group = ServiceGroup(services: [store, cache], gracefulShutdownSignals: [], logger: Logger(label: "test"))
        let running = Task { try await group.run() }

        let inFlight = Task { try await cache.run(origin.request("/slow")) }
        while origin.count("/slow") == 0 { try await Task.sleep(for: .milliseconds(5)) }  // the origin has it
        await group.triggerGracefulShutdown()

        let answer = try await inFlight.value
        #expect(answer.source == .network)
        #expect(String(buffer: answer.body) == "slow")
        try await running.value
        #expect(store.pool.runningThreadCount == 0, "the store's connection threads ended")
        let clients = try await offThread { try ExternalProgram.redisCli.run(["-p", String(server.port), "CLIENT", "LIST"]) }
        #expect(clients.standardOutput.split(separator: "\n").count == 1, "only redis-cli is connected: \(clients.standardOutput)")
        // Stored before the store closed: the cache was shut down first, after its request.
        let keys = try await offThread { try ExternalProgram.redisCli.run(["-p", String(server.port), "--scan"]) }
        #expect(keys.standardOutput.contains("/slow"), "\(keys.standardOutput)")
        do {
            _ = try await cache.run(origin.request("/slow"))
            Issue.record("a request after shutdown was answered")
        } catch {
            #expect(error.kind == .shutDown, "\(error)")
        }
        try await transport.shutdown()
        await origin.stop()
        _ = try await offThread { server.stop() }
    }

    @Test("background refreshes run as child tasks of the service and finish before it returns")
    func backgroundRefreshesAreChildTasks() async throws {
        let origin = try await OriginServer.start()
        origin.route("/swr", reply: .init(headers: [("Cache-Control", "max-age=0, stale-while-revalidate=60")], body: "v"))
        let transport = AsyncHTTPClientTransport()
        let cache = CachedNetworking(store: MemoryStore(), transport: transport)
        let group = ServiceGroup(services: [cache], gracefulShutdownSignals: [], logger: Logger(label: "test"))
        let running = Task { try await group.run() }
        _ = try await cache.run(origin.request("/swr"))  // stored, stale at once
        let stale = try await cache.run(origin.request("/swr"))  // served stale; a refresh starts in the background
        #expect(stale.source == .stale)
        await group.triggerGracefulShutdown()
        try await running.value
        // The refresh had finished when the service returned: the origin saw it.
        #expect(origin.count("/swr") == 2)
        try await transport.shutdown()
        await origin.stop()
    }

    @Test("in a ServiceGroup, the transport the cache owns is shut down once; a second run() leaves the cache running")
    func theOwnedTransportIsShutDownInAGroup() async throws {
        let transport = RecordingTransport()
        let cache = CachedNetworking(
            store: MemoryStore(), transport: transport, ownsTransport: true, configuration: .init(), logger: Logger(label: "test"))
        let group = ServiceGroup(services: [cache], gracefulShutdownSignals: [], logger: Logger(label: "test"))
        let running = Task { try await group.run() }
        while cache.background.withLock({ $0.runner == nil }) { await Task.yield() }
        try await cache.run()  // already running: returns at once, and the cache stays up
        let stillUp = !cache.isShutDown.load(ordering: .relaxed)
        #expect(stillUp)
        await group.triggerGracefulShutdown()
        try await running.value
        await cache.shutdown()
        #expect(transport.shutdowns.withLock { $0 } == 1)
    }

    @Test("a cache made without a transport owns its URLSession transport and shuts it down; shutdown twice is harmless")
    func shutdownWithoutAGroup() async throws {
        let origin = try await OriginServer.start()
        origin.route("/items", reply: .init(headers: [("Cache-Control", "max-age=60")], body: "[]"))
        let cache = CachedNetworking(store: MemoryStore())
        #expect(try await cache.run(origin.request("/items")).source == .network)
        #expect(try await cache.run(origin.request("/items")).source == .cache)
        await cache.shutdown()
        await cache.shutdown()
        await #expect(throws: CachedNetworkingError.self) { try await cache.run(origin.request("/items")) }
        await origin.stop()
    }

    @Test("cancelling shutdown() ends its wait for a request in flight and shuts down the transport the cache owns")
    func cancelledShutdownStopsWaiting() async throws {
        let transport = GatedTransport()
        let cache = CachedNetworking(
            store: MemoryStore(), transport: transport, ownsTransport: true, configuration: .init(), logger: Logger(label: "test"))
        let request = Task { try await cache.run(HTTPRequest(method: .get, scheme: "https", authority: "api.example.com", path: "/held")) }
        #expect(await eventually { transport.sent.withLock { $0 } == 1 })
        let finished = Mutex(false)
        let shutdown = Task {
            await cache.shutdown()
            finished.withLock { $0 = true }
        }
        #expect(await eventually { cache.background.withLock { !$0.requestWaiters.isEmpty } })
        #expect(transport.shutdowns.withLock { $0 } == 0)
        shutdown.cancel()
        #expect(await eventually { finished.withLock { $0 } })
        #expect(transport.shutdowns.withLock { $0 } == 1)
        // The request still waits for the origin.
        transport.gate.open()
        _ = try? await request.value
        await shutdown.value
    }

    @Test("an invalidation the store refuses while the cache shuts down is given up with a warning, not kept pending")
    func invalidationRefusedDuringShutdown() async throws {
        let transport = GatedTransport()
        let store = InMemoryCacheStore()
        store.inject(.init(operations: [.remove], error: CacheStoreError(.timeout, "stalled")))
        let recorder = LogRecorder()
        let cache = CachedNetworking(store: store, transport: transport, logger: Logger(label: "test") { _ in recorder })
        let post = Task { try await cache.run(HTTPRequest(method: .post, scheme: "https", authority: "api.example.com", path: "/items")) }
        #expect(await eventually { transport.sent.withLock { $0 } == 1 })
        // Shutdown stops the background work, then waits for the POST.
        let shutdown = Task { await cache.shutdown() }
        #expect(await eventually { cache.background.withLock { $0.stopped } })
        transport.gate.open()
        #expect(try await post.value.response.status == .created)
        await shutdown.value
        let warnings = recorder.messages.filter { $0.level == .warning && $0.text.contains("could not be invalidated") }
        #expect(warnings.count == 1)
        #expect(warnings.first?.metadata[CachedNetworkingLogKeys.uri] == "https://api.example.com/items")
        #expect(cache.background.withLock { $0.invalidationsPending.isEmpty && !$0.invalidationRetryRunning })
    }

    @Test("an AsyncHTTPClientTransport released without shutdown does not trap")
    func aReleasedTransportDoesNotTrap() async throws {
        let origin = try await OriginServer.start()
        origin.route("/items", reply: .init(headers: [("Cache-Control", "max-age=60")], body: "[]"))
        do {
            let cache = CachedNetworking(store: MemoryStore(), transport: AsyncHTTPClientTransport())
            #expect(try await cache.run(origin.request("/items")).source == .network)
        }
        // AsyncHTTPClient's HTTPClient traps (in any build) when released without shutdown; reaching this line
        // means the transport shut it down as it went.
        await origin.stop()
    }
}

/// A transport that answers nothing and counts its shutdowns.
private final class RecordingTransport: HTTPTransport {
    let shutdowns = Mutex(0)

    func send(_ request: HTTPRequest, body: ByteBuffer?) async throws -> HTTPTransportResponse {
        throw CachedNetworkingError(.transport, "not used")
    }

    func shutdown() async throws { shutdowns.withLock { $0 += 1 } }
}

/// A transport whose requests wait for its gate, answering 201 once it opens; counts requests and shutdowns.
private final class GatedTransport: HTTPTransport {
    let gate = Gate()
    let sent = Mutex(0)
    let shutdowns = Mutex(0)

    func send(_ request: HTTPRequest, body: ByteBuffer?) async throws -> HTTPTransportResponse {
        sent.withLock { $0 += 1 }
        await gate.wait()
        return HTTPTransportResponse(response: HTTPResponse(status: .created), body: ByteBuffer())
    }

    func shutdown() async throws { shutdowns.withLock { $0 += 1 } }
}
