import CachedNetworking
import CachedNetworkingAsyncHTTPClient
import CachedNetworkingTesting
import CachedOriginSupport
import CoreMetrics
import Foundation
import HTTPTypes
import Logging
import NIOCore
import Synchronization

@testable import CachedNetworking

/// One AsyncHTTPClient transport for the whole test process (its client lives until the process exits).
let sharedTransport = AsyncHTTPClientTransport(timeout: .seconds(10))

/// A transport that gives up quickly, for tests whose origin goes away (AsyncHTTPClient retries refused
/// connections until the deadline).
let impatientTransport = AsyncHTTPClientTransport(timeout: .milliseconds(300))

/// A cache over a local origin, an in-memory store and a manual clock, with recorded metrics.
/// The tests' cache configuration: `clock` and `metrics`, then `configure`.
func testConfiguration(
    clock: ManualCacheClock,
    metrics: TestMetrics,
    configure: (inout CachedNetworking.Configuration) -> Void = { _ in }
) -> CachedNetworking.Configuration {
    var configuration = CachedNetworking.Configuration()
    configuration.clock = clock
    configuration.metricsFactory = metrics
    configure(&configuration)
    return configuration
}

extension OriginServer {
    /// Answers `path` with `handler`, adding a `Date` of `clock`'s time.
    func route(_ path: String, dated clock: ManualCacheClock, _ handler: @escaping @Sendable (Received) -> Reply) {
        route(path) { received in
            var reply = handler(received)
            reply.headers.insert(("Date", HTTPDate.format(clock.now())), at: 0)
            return reply
        }
    }
}

struct Harness {
    let origin: OriginServer
    let clock: ManualCacheClock
    let store: InMemoryCacheStore
    let metrics: TestMetrics
    let cache: CachedNetworking
    let transport: AsyncHTTPClientTransport

    static func make(
        transport: AsyncHTTPClientTransport = sharedTransport,
        configure: (inout CachedNetworking.Configuration) -> Void = { _ in }
    ) async throws -> Harness {
        let origin = try await OriginServer.start()
        let clock = ManualCacheClock()
        let store = InMemoryCacheStore(clock: clock)
        let metrics = TestMetrics()
        let configuration = testConfiguration(clock: clock, metrics: metrics, configure: configure)
        let cache = CachedNetworking(store: store, transport: transport, configuration: configuration)
        return Harness(origin: origin, clock: clock, store: store, metrics: metrics, cache: cache, transport: transport)
    }

    /// Another cache (another process, in effect) over the same store and clock.
    func sibling(configure: (inout CachedNetworking.Configuration) -> Void = { _ in }) -> CachedNetworking {
        var configuration = cache.configuration
        configure(&configuration)
        return CachedNetworking(store: store, transport: transport, configuration: configuration)
    }

    /// Answers `path` with `status`, `headers` (plus a `Date` of the clock's time at the moment of answering) and
    /// `body`.
    func serve(_ path: String, status: Int = 200, _ headers: [(String, String)] = [], body: String = "body", delay: Duration? = nil) {
        let clock = self.clock
        origin.route(path) { _ in
            OriginServer.Reply(status: status, headers: [("Date", HTTPDate.format(clock.now()))] + headers, body: body, delay: delay)
        }
    }

    /// Answers `path` with `handler`, adding a `Date` of the clock's time.
    func serve(_ path: String, _ handler: @escaping @Sendable (OriginServer.Received) -> OriginServer.Reply) {
        origin.route(path, dated: clock, handler)
    }

    func get(
        _ path: String,
        _ headers: [(String, String)] = [],
        method: HTTPRequest.Method = .get,
        policy: CachePolicy = .useProtocolCachePolicy
    ) async throws -> CachedResponse {
        try await cache.run(origin.request(path, method: method, headers: headers), policy: policy)
    }

    func advance(_ seconds: Int) { clock.advance(by: .seconds(seconds)) }

    func stop() async { await origin.stop() }
}

extension CachedResponse {
    var text: String { String(buffer: body) }
}

/// A metrics factory that keeps counter values and timer records, for assertions.
final class TestMetrics: MetricsFactory, Sendable {
    private let counters = Mutex<[String: TestCounter]>([:])
    private let timers = Mutex<[String: TestTimer]>([:])

    /// The durations recorded by the timers named `label` whose dimensions include `matching`.
    func timings(_ label: String, _ matching: [(String, String)] = []) -> [Int64] {
        timers.withLock { timers in
            timers.values.filter { timer in
                timer.label == label && matching.allSatisfy { pair in timer.dimensions.contains { $0 == pair } }
            }.flatMap(\.values)
        }
    }

    private static func key(_ label: String, _ dimensions: [(String, String)]) -> String {
        ([label] + dimensions.sorted { $0.0 < $1.0 }.map { "\($0.0)=\($0.1)" }).joined(separator: "|")
    }

    /// The sum of the counters named `label` whose dimensions include `matching`.
    func value(_ label: String, _ matching: [(String, String)] = []) -> Int64 {
        counters.withLock { counters in
            counters.values.filter { counter in
                counter.label == label && matching.allSatisfy { pair in counter.dimensions.contains { $0 == pair } }
            }.reduce(0) { $0 + $1.value }
        }
    }

    func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
        counters.withLock { counters in
            let key = Self.key(label, dimensions)
            if let existing = counters[key] { return existing }
            let counter = TestCounter(label: label, dimensions: dimensions)
            counters[key] = counter
            return counter
        }
    }

    func makeFloatingPointCounter(label: String, dimensions: [(String, String)]) -> any FloatingPointCounterHandler {
        TestFloatingCounter()
    }

    func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        TestRecorder()
    }

    func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
        timers.withLock { timers in
            let key = Self.key(label, dimensions)
            if let existing = timers[key] { return existing }
            let timer = TestTimer(label: label, dimensions: dimensions)
            timers[key] = timer
            return timer
        }
    }

    func destroyCounter(_ handler: any CounterHandler) {}
    func destroyRecorder(_ handler: any RecorderHandler) {}
    func destroyTimer(_ handler: any TimerHandler) {}
}

final class TestCounter: CounterHandler, Sendable {
    let label: String
    let dimensions: [(String, String)]
    private let count = Mutex<Int64>(0)

    init(label: String, dimensions: [(String, String)]) {
        self.label = label
        self.dimensions = dimensions
    }

    var value: Int64 { count.withLock { $0 } }
    func increment(by amount: Int64) { count.withLock { $0 += amount } }
    func reset() { count.withLock { $0 = 0 } }
}

final class TestRecorder: RecorderHandler, Sendable {
    func record(_ value: Int64) {}
    func record(_ value: Double) {}
}

final class TestTimer: TimerHandler, Sendable {
    let label: String
    let dimensions: [(String, String)]
    private let recorded = Mutex<[Int64]>([])

    init(label: String, dimensions: [(String, String)]) {
        self.label = label
        self.dimensions = dimensions
    }

    var values: [Int64] { recorded.withLock { $0 } }
    func recordNanoseconds(_ duration: Int64) { recorded.withLock { $0.append(duration) } }
}

final class TestFloatingCounter: FloatingPointCounterHandler, Sendable {
    func increment(by amount: Double) {}
    func reset() {}
}

/// The store key of the response to `method url`, written out as the SDK lays keys out:
/// `<namespace>:<generation>:{<url hash>}:<METHOD>:<url>`, the braces a Redis Cluster hash tag.
func entryKey(_ url: String, namespace: String = "cached", generation: Int = 0, method: String = "GET") -> String {
    "\(namespace):\(generation):{\(FNV1a64.hex(FNV1a64.hash(url)))}:\(method):\(url)"
}

/// A cache over the fakes: a scripted transport, an in-memory store and one manual clock for everything.
struct FakeCache {
    let clock = ManualCacheClock()
    let transport = FakeHTTPTransport()
    let store: InMemoryCacheStore
    let cache: CachedNetworking

    init() {
        store = InMemoryCacheStore(clock: clock)
        var configuration = CachedNetworking.Configuration()
        configuration.clock = clock
        cache = CachedNetworking(store: store, transport: transport, configuration: configuration)
    }

    static let base = "https://api.example.com"

    func request(_ path: String) -> HTTPRequest {
        HTTPRequest(method: .get, scheme: "https", authority: "api.example.com", path: path)
    }

    /// Answers `path` with `body` and `cacheControl`, in order of `bodies` (the last repeating).
    func serve(_ path: String, cacheControl: String?, bodies: [String]) {
        var fields = HTTPFields()
        if let cacheControl { fields[.cacheControl] = cacheControl }
        transport.script(Self.base + path, replies: bodies.map { .init(headerFields: fields, body: $0) })
    }

    func fetches(_ path: String) -> Int { transport.requestCount(for: Self.base + path) }
}

/// Whether `condition` holds, letting other tasks run until it does. Nothing sleeps: it yields, up to a million
/// times, so that a condition that never holds fails the test rather than hanging it, and a busy machine (on which
/// the other tasks take long to be scheduled) does not fail it, as a deadline would.
func eventually(_ condition: () -> Bool) async -> Bool {
    for _ in 0..<1_000_000 {
        if condition() { return true }
        await Task.yield()
    }
    return condition()
}

/// A one-time gate: `wait()` suspends until `open()`.
final class Gate: Sendable {
    private let state = Mutex<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    /// Whether `open()` was called.
    var isOpen: Bool { state.withLock { $0.open } }

    func wait() async {
        await withCheckedContinuation { continuation in
            let resume = state.withLock { state -> Bool in
                if state.open { return true }
                state.waiters.append(continuation)
                return false
            }
            if resume { continuation.resume() }
        }
    }

    func open() {
        let waiters = state.withLock { state in
            state.open = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }
}

/// A log handler that keeps what is logged.
final class LogRecorder: LogHandler, Sendable {
    struct Message: Sendable {
        var level: Logger.Level
        var text: String
        var metadata: [String: String]
    }

    private let recorded = Mutex<[Message]>([])
    var messages: [Message] { recorded.withLock { $0 } }

    var metadata: Logger.Metadata {
        get { [:] }
        set {}
    }
    var logLevel: Logger.Level {
        get { .trace }
        set {}
    }
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { nil }
        set {}
    }

    func log(event: LogEvent) {
        let message = Message(
            level: event.level, text: "\(event.message)",
            metadata: (event.metadata ?? [:]).mapValues { "\($0)" })
        recorded.withLock { $0.append(message) }
    }
}
