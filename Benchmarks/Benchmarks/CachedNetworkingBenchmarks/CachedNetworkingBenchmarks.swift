import Benchmark
import BenchmarkLoopback
import CachedNetworking
import CachedNetworkingAsyncHTTPClient
import CachedNetworkingRedis
import Foundation
import HTTPTypes
import NIOCore
import Synchronization

// The SDK's benchmarks (docs/performance.md, "SDK benchmarks"). Every response has a 1 KiB body and
// `Cache-Control: max-age=3600`, so it is stored and stays fresh for the whole run.
//
// - hits: `CachedNetworking.run` answered from `MemoryStore`, and from `RESPStore` on a live `cached-server`,
//   against a raw hiredis `GET` of the same key (the same envelope bytes) on a blocking context;
// - misses: `run` for a URL not stored (origin fetch through `AsyncHTTPClientTransport` + store write) against the
//   same transport fetching the same kind of URL by itself, from a local HTTP origin; and `run` for URLs not
//   stored with a transport that answers at once, the cache's own work on a miss;
// - a herd: 1,000 concurrent `run`s for one URL not stored; the origin must see exactly one request.

/// Body bytes of every response.
let responseBodySize = 1024
/// Concurrent requests in the herd benchmark.
let herdSize = 1_000

/// Counts the origin requests each herd saw (a custom metric: the table shows its percentiles).
let originFetches = BenchmarkMetric.custom("origin_fetches_per_herd", polarity: .prefersSmaller, useScalingFactor: false)

/// CPU time of the whole process (every thread: the caller, the HTTP client's event loop, the origin) during one
/// miss, in nanoseconds, from `CLOCK_PROCESS_CPUTIME_ID` (the tool's own CPU metric counts whole scheduler ticks,
/// 10 ms, here). Work a request leaves behind after its sample ends counts in the next sample.
let processCPU = BenchmarkMetric.custom("process_cpu_ns", polarity: .prefersSmaller, useScalingFactor: false)

/// The process's CPU time so far, in nanoseconds.
func processCPUTime() -> Int {
    var time = timespec()
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &time)
    return time.tv_sec * 1_000_000_000 + time.tv_nsec
}

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .throughput, .mallocCountTotal],
        timeUnits: .nanoseconds,
        warmupIterations: 100,
        maxDuration: .seconds(4),
        maxIterations: 1_000_000
    )

    // MARK: hits

    let memory = HitFixture()
    Benchmark(
        "1 Hit: MemoryStore, CachedNetworking.run",
        configuration: .init(scalingFactor: .kilo, maxDuration: .seconds(4))
    ) { benchmark in
        await memory.runHits(benchmark)
    } setup: {
        try await memory.setUp(store: MemoryStore(), name: "memory")
    } teardown: {
        await memory.tearDown()
    }

    // Rows 2a and 2b run 1,000 calls per sample, as row 1 does: the tool runs an async benchmark's closure in a
    // task of its own and waits for it on a semaphore, two thread hand-offs that would otherwise be counted in
    // every 2a sample and in no 2b sample.
    let resp = HitFixture()
    Benchmark(
        "2a Hit: RESPStore on cached-server, CachedNetworking.run",
        configuration: .init(warmupIterations: 2, scalingFactor: .kilo, maxDuration: .seconds(5))
    ) { benchmark in
        await resp.runHits(benchmark)
    } setup: {
        let server = try CachedServer.start()
        resp.server = server
        try await resp.setUp(store: RESPStore(url: "redis://127.0.0.1:\(server.port)"), name: "resp")
    } teardown: {
        await resp.tearDown()
    }

    let raw = RawFixture()
    Benchmark(
        "2b Hit: raw hiredis GET of the same entry",
        configuration: .init(warmupIterations: 2, scalingFactor: .kilo, maxDuration: .seconds(5))
    ) { benchmark in
        for _ in benchmark.scaledIterations {
            guard raw.get?.get() == raw.expectedLength else {
                benchmark.error("the raw GET did not return the \(raw.expectedLength)-byte entry")
                return
            }
        }
    } setup: {
        try await raw.setUp()
    } teardown: {
        await raw.tearDown()
    }

    // MARK: misses

    let miss = MissFixture()
    Benchmark(
        "3a Miss: CachedNetworking.run (origin fetch + MemoryStore write)",
        configuration: .init(
            metrics: [.wallClock, .throughput, .mallocCountTotal, processCPU], timeUnits: .microseconds,
            warmupIterations: 200, maxDuration: .seconds(5), maxIterations: 50_000)
    ) { benchmark in
        await miss.runCachedMiss(benchmark)
    } setup: {
        try await miss.setUp()
    } teardown: {
        await miss.tearDown()
    }

    Benchmark(
        "3b Miss: bare AsyncHTTPClientTransport fetch",
        configuration: .init(
            metrics: [.wallClock, .throughput, .mallocCountTotal, processCPU], timeUnits: .microseconds,
            warmupIterations: 200, maxDuration: .seconds(5), maxIterations: 50_000)
    ) { benchmark in
        await miss.runBareFetch(benchmark)
    } setup: {
        try await miss.setUp()
    } teardown: {
        await miss.tearDown()
    }

    // The cache's own work on a miss, without a network: `run` for new URLs over a `MemoryStore` whose transport
    // answers at once (lookup, fetch lease, storability and lifetime, the envelope's encoding, the store write,
    // the lease's removal, the answer). 1,000 misses per sample, as in row 1; the requests are made before the
    // measured part.
    let own = OwnWorkFixture()
    Benchmark(
        "3c Miss: the cache's own work (a transport that answers at once)",
        configuration: .init(warmupIterations: 2, scalingFactor: .kilo, maxDuration: .seconds(4))
    ) { benchmark in
        await own.runMisses(benchmark)
    } setup: {
        own.setUp()
    } teardown: {
        await own.tearDown()
    }

    // MARK: herd

    let herd = MissFixture()
    Benchmark(
        "4 Herd: 1,000 concurrent identical misses",
        configuration: .init(
            metrics: [.wallClock, .mallocCountTotal, originFetches], timeUnits: .microseconds, warmupIterations: 3,
            maxDuration: .seconds(5), maxIterations: 300)
    ) { benchmark in
        await herd.runHerd(benchmark)
    } setup: {
        try await herd.setUp()
    } teardown: {
        await herd.tearDown()
    }
}

// MARK: - Fixtures

/// A transport that answers every request at once with a fresh 1 KiB response, without a network: for the hit
/// rows, which never reach it after the first request.
struct ImmediateTransport: HTTPTransport {
    func send(_ request: HTTPRequest, body: ByteBuffer?) async throws -> HTTPTransportResponse {
        var fields = HTTPFields()
        fields[.cacheControl] = "max-age=3600"
        fields[.contentType] = "application/octet-stream"
        fields[.contentLength] = String(responseBodySize)
        return HTTPTransportResponse(
            response: HTTPResponse(status: .ok, headerFields: fields),
            body: ByteBuffer(repeating: UInt8(ascii: "x"), count: responseBodySize))
    }
}

/// A cache with one stored response, and the request that hits it.
final class HitFixture: @unchecked Sendable {
    var server: CachedServer?
    var store: (any CacheStore)?
    var cache: CachedNetworking?
    var request = HTTPRequest(method: .get, scheme: "http", authority: "origin.invalid", path: "/item")
    /// The store key of the entry and its size in bytes, once stored.
    var entryKey = ""

    func setUp(store: any CacheStore, name: String) async throws {
        var configuration = CachedNetworking.Configuration()
        configuration.namespace = "bench-\(name)-\(UInt32.random(in: .min ... .max))"
        let cache = CachedNetworking(store: store, transport: ImmediateTransport(), configuration: configuration)
        self.store = store
        self.cache = cache
        let first = try await cache.run(request)
        guard first.source == .network, let entry = first.entry else {
            throw BenchmarkSetupError("the first request was not fetched and stored: \(first.cacheStatus)")
        }
        entryKey = entry.key
        let second = try await cache.run(request)
        guard second.source == .cache, second.body.readableBytes == responseBodySize else {
            throw BenchmarkSetupError("the second request was not a hit: \(second.cacheStatus)")
        }
    }

    func runHits(_ benchmark: Benchmark) async {
        guard let cache else { return }
        let request = self.request
        var notHits = 0
        for _ in benchmark.scaledIterations {
            do {
                let answer = try await cache.run(request)
                if answer.source != .cache { notHits += 1 }
                blackHole(answer)
            } catch {
                benchmark.error("run failed: \(error)")
                return
            }
        }
        if notHits > 0 { benchmark.error("\(notHits) requests were not answered from the cache") }
    }

    func tearDown() async {
        await store?.shutdown()
        store = nil
        cache = nil
        server?.stop()
        server = nil
    }
}

/// A raw hiredis connection to a `cached-server` holding the entry the SDK stored for the hit request.
final class RawFixture: @unchecked Sendable {
    let sdk = HitFixture()
    var get: RawHiredisGet?
    var expectedLength = 0

    func setUp() async throws {
        let server = try CachedServer.start()
        sdk.server = server
        try await sdk.setUp(store: RESPStore(url: "redis://127.0.0.1:\(server.port)"), name: "raw")
        let get = try RawHiredisGet(port: server.port, key: sdk.entryKey)
        guard let length = get.get() else { throw BenchmarkSetupError("GET \(sdk.entryKey) found nothing") }
        expectedLength = length
        self.get = get
        // The SDK's connections stay open but idle: only the raw context talks to the server from here on.
        print("entry: key \(sdk.entryKey), \(length) bytes (body \(responseBodySize))")
    }

    func tearDown() async {
        get = nil
        await sdk.tearDown()
    }
}

/// A cache over a `MemoryStore` whose transport answers at once, for misses on URLs never requested before.
final class OwnWorkFixture: @unchecked Sendable {
    var store: MemoryStore?
    var cache: CachedNetworking?
    private var next = 0

    func setUp() {
        // Bounded like a production cache: once full, each miss also evicts.
        let store = MemoryStore(maxBytes: 64 << 20)
        var configuration = CachedNetworking.Configuration()
        configuration.namespace = "bench-own-\(UInt32.random(in: .min ... .max))"
        self.store = store
        self.cache = CachedNetworking(store: store, transport: ImmediateTransport(), configuration: configuration)
    }

    func runMisses(_ benchmark: Benchmark) async {
        guard let cache else { return }
        let requests = benchmark.scaledIterations.map { _ in
            next += 1
            return HTTPRequest(method: .get, scheme: "http", authority: "origin.invalid", path: "/own/\(next)")
        }
        var notStored = 0
        benchmark.startMeasurement()
        for request in requests {
            do {
                let answer = try await cache.run(request)
                if answer.source != .network || answer.entry == nil { notStored += 1 }
                blackHole(answer)
            } catch {
                benchmark.error("run failed: \(error)")
                return
            }
        }
        benchmark.stopMeasurement()
        if notStored > 0 { benchmark.error("\(notStored) misses were not fetched and stored") }
    }

    func tearDown() async {
        await store?.shutdown()
        store = nil
        cache = nil
    }
}

/// A local origin, the bare transport, and a cache over a `MemoryStore` that fetches through it.
final class MissFixture: @unchecked Sendable {
    var origin: Origin?
    var transport: AsyncHTTPClientTransport?
    var store: MemoryStore?
    var cache: CachedNetworking?
    private let counter = Atomic<Int>(0)

    func setUp() async throws {
        let origin = try await Origin.start(bodySize: responseBodySize)
        let transport = AsyncHTTPClientTransport(timeout: .seconds(10))
        let store = MemoryStore(maxBytes: 256 << 20)
        var configuration = CachedNetworking.Configuration()
        configuration.namespace = "bench-miss-\(UInt32.random(in: .min ... .max))"
        self.origin = origin
        self.transport = transport
        self.store = store
        self.cache = CachedNetworking(store: store, transport: transport, configuration: configuration)
        // Opens the transport's keep-alive connection.
        _ = try await transport.send(nextRequest("/warm"), body: nil)
    }

    /// A request for a path never requested before.
    func nextRequest(_ prefix: String) -> HTTPRequest {
        let n = counter.add(1, ordering: .relaxed).newValue
        return HTTPRequest(
            method: .get, scheme: "http", authority: "127.0.0.1:\(origin?.port ?? 0)", path: "\(prefix)/\(n)")
    }

    func runCachedMiss(_ benchmark: Benchmark) async {
        guard let cache else { return }
        let request = nextRequest("/miss")
        let cpu = processCPUTime()
        benchmark.startMeasurement()
        do {
            let answer = try await cache.run(request)
            benchmark.stopMeasurement()
            benchmark.measurement(processCPU, processCPUTime() - cpu)
            guard answer.source == .network, answer.entry != nil, answer.body.readableBytes == responseBodySize else {
                benchmark.error("the miss was not fetched and stored: \(answer.cacheStatus)")
                return
            }
        } catch {
            benchmark.error("run failed: \(error)")
        }
    }

    func runBareFetch(_ benchmark: Benchmark) async {
        guard let transport else { return }
        let request = nextRequest("/bare")
        let cpu = processCPUTime()
        benchmark.startMeasurement()
        do {
            let answer = try await transport.send(request, body: nil)
            benchmark.stopMeasurement()
            benchmark.measurement(processCPU, processCPUTime() - cpu)
            guard answer.response.status == .ok, answer.body.readableBytes == responseBodySize else {
                benchmark.error("the origin answered \(answer.response.status)")
                return
            }
        } catch {
            benchmark.error("fetch failed: \(error)")
        }
    }

    func runHerd(_ benchmark: Benchmark) async {
        guard let cache, let origin else { return }
        let request = nextRequest("/herd")
        benchmark.startMeasurement()
        let failures = await withTaskGroup(of: Bool.self, returning: Int.self) { group in
            for _ in 0..<herdSize {
                group.addTask {
                    guard let answer = try? await cache.run(request) else { return false }
                    return answer.status == .ok && answer.body.readableBytes == responseBodySize
                }
            }
            var failures = 0
            for await ok in group where !ok { failures += 1 }
            return failures
        }
        benchmark.stopMeasurement()
        let fetches = origin.count(request.path ?? "")
        benchmark.measurement(originFetches, fetches)
        if failures > 0 { benchmark.error("\(failures) of \(herdSize) requests failed") }
        // Not an error: the run goes on, and the summary's row fails on the recorded counts.
        if fetches != 1 { FileHandle.standardError.write(Data("the origin saw \(fetches) requests for one herd\n".utf8)) }
    }

    func tearDown() async {
        try? await transport?.shutdown()
        await store?.shutdown()
        await origin?.stop()
        transport = nil
        store = nil
        cache = nil
        origin = nil
    }
}
