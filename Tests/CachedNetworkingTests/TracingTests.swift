import CachedNetworkingTesting
import HTTPTypes
import InMemoryTracing
import NIOCore
import Synchronization
import Testing
import Tracing

@testable import CachedNetworking

/// The spans of ``CachedNetworking`` through an `InMemoryTracer` given in the configuration (the global
/// `InstrumentationSystem` is never bootstrapped: the tests share one process).
@Suite("Tracing: spans through a configured tracer")
struct TracingTests {
    typealias Attribute = CachedNetworkingSpans.Attribute

    /// A cache over the fakes whose spans go to `tracer` (nil: no tracer configured).
    struct Traced {
        let clock = ManualCacheClock()
        let origin = FakeHTTPTransport()
        let transport: ContextRecordingTransport
        let store: InMemoryCacheStore
        let cache: CachedNetworking
        let tracer: InMemoryTracer?

        init(tracer: InMemoryTracer? = InMemoryTracer()) {
            self.tracer = tracer
            transport = ContextRecordingTransport(origin)
            store = InMemoryCacheStore(clock: clock)
            var configuration = CachedNetworking.Configuration()
            configuration.clock = clock
            configuration.tracer = tracer
            cache = CachedNetworking(store: store, transport: transport, configuration: configuration)
        }

        func serve(_ path: String, _ replies: [FakeHTTPTransport.Reply]) {
            origin.script(FakeCache.base + path, replies: replies)
        }

        func request(_ path: String) -> HTTPRequest {
            HTTPRequest(method: .get, scheme: "https", authority: "api.example.com", path: path)
        }

        /// The spans finished since the last call.
        func spans() -> [FinishedInMemorySpan] { tracer?.popFinishedSpans() ?? [] }
    }

    static func fresh(_ body: String) -> FakeHTTPTransport.Reply {
        var fields = HTTPFields()
        fields[.cacheControl] = "max-age=60"
        return .init(headerFields: fields, body: body)
    }

    @Test("a miss then a hit: cached.run with store and origin fetch children, their attributes, one trace each")
    func aMissThenAHitMakeSpansUnderTheirRunSpan() async throws {
        let f = Traced()
        f.serve("/a", [Self.fresh("one")])

        let miss = try await f.cache.run(f.request("/a"))
        #expect(miss.source == .network)
        let missSpans = f.spans()
        let missRun = try #require(missSpans.only(CachedNetworkingSpans.run))
        #expect(missRun.parentSpanID == nil)
        #expect(missRun.kind == .internal)
        #expect(missRun.attributes.get(Attribute.method) == .string("GET"))
        #expect(missRun.attributes.get(Attribute.url) == .string("https://api.example.com/a"))
        #expect(missRun.attributes.get(Attribute.statusCode) == .int64(200))
        #expect(missRun.attributes.get(Attribute.source) == .string("network"))
        #expect(missRun.stringAttribute(Attribute.cacheStatus)?.contains("uri-miss") == true)
        #expect(missRun.errors.isEmpty && missRun.status == nil)

        let fetch = try #require(missSpans.only(CachedNetworkingSpans.originFetch))
        #expect(fetch.attributes.get(Attribute.statusCode) == .int64(200))
        #expect(fetch.attributes.get(Attribute.url) == .string("https://api.example.com/a"))
        // The miss read the generation and the entry, took the fetch lease, stored the response, released the lease.
        let storeNames = Set(missSpans.map(\.operationName).filter { $0.hasPrefix(CachedNetworkingSpans.storePrefix) })
        #expect(storeNames == ["cached.store.get", "cached.store.set_if_absent", "cached.store.set", "cached.store.remove"])
        for span in missSpans where span.spanID != missRun.spanID {
            #expect(span.traceID == missRun.traceID, "\(span.operationName)")
            #expect(span.parentSpanID == missRun.spanID, "\(span.operationName)")
        }
        // The transport ran in the origin fetch span's context, where an instrumented client nests its span.
        #expect(f.transport.contexts == [fetch.spanContext])

        let hit = try await f.cache.run(f.request("/a"))
        #expect(hit.source == .cache)
        let hitSpans = f.spans()
        let hitRun = try #require(hitSpans.only(CachedNetworkingSpans.run))
        #expect(hitRun.traceID != missRun.traceID)
        #expect(hitRun.attributes.get(Attribute.statusCode) == .int64(200))
        #expect(hitRun.attributes.get(Attribute.source) == .string("cache"))
        #expect(hitRun.stringAttribute(Attribute.cacheStatus)?.contains("hit") == true)
        #expect(hitSpans.only(CachedNetworkingSpans.originFetch) == nil)
        #expect(hitSpans.contains { $0.operationName == "cached.store.get" && $0.parentSpanID == hitRun.spanID })
        #expect(f.transport.contexts.count == 1)
    }

    @Test("cached.run is a child of the caller's span")
    func theRunSpanIsAChildOfTheCallersSpan() async throws {
        let f = Traced()
        f.serve("/a", [Self.fresh("one")])
        let tracer = try #require(f.tracer)
        let parent = tracer.startSpan("caller")
        _ = try await ServiceContext.withValue(parent.context) { try await f.cache.run(f.request("/a")) }
        parent.end()
        let spans = f.spans()
        let run = try #require(spans.only(CachedNetworkingSpans.run))
        let caller = try #require(spans.only("caller"))
        #expect(run.traceID == caller.traceID)
        #expect(run.parentSpanID == caller.spanID)
    }

    @Test("a hit answered from the store alone has no origin fetch span")
    func aHitFromTheStoreAloneHasNoOriginSpan() async throws {
        let f = Traced()
        f.serve("/a", [Self.fresh("one")])
        // Another cache (untraced) over the same store fetches and stores the response.
        var configuration = f.cache.configuration
        configuration.tracer = nil
        let other = CachedNetworking(store: f.store, transport: f.origin, configuration: configuration)
        _ = try await other.run(f.request("/a"))
        #expect(f.spans().isEmpty)

        let answer = try await f.cache.run(f.request("/a"))
        #expect(answer.source == .cache)
        let spans = f.spans()
        let run = try #require(spans.only(CachedNetworkingSpans.run))
        #expect(spans.allSatisfy { $0.operationName != CachedNetworkingSpans.originFetch })
        #expect(spans.contains { $0.operationName == "cached.store.get" })
        #expect(spans.allSatisfy { $0.spanID == run.spanID || $0.parentSpanID == run.spanID })
        #expect(run.stringAttribute(Attribute.cacheStatus)?.contains("hit") == true)
        #expect(f.transport.contexts.isEmpty)
    }

    @Test("an origin failure is recorded on the run and origin fetch spans")
    func anOriginFailureIsRecordedOnTheRunAndFetchSpans() async throws {
        let f = Traced()
        f.serve("/down", [.failure(FakeHTTPTransport.ConnectionRefused())])
        await #expect(throws: CachedNetworkingError.self) { try await f.cache.run(f.request("/down")) }
        let spans = f.spans()
        let run = try #require(spans.only(CachedNetworkingSpans.run))
        #expect(run.errors.count == 1)
        #expect(run.status?.code == .error)
        #expect(run.attributes.get(Attribute.errorType) == .string("transport"))
        #expect(run.attributes.get(Attribute.statusCode) == nil)
        let fetch = try #require(spans.only(CachedNetworkingSpans.originFetch))
        #expect(fetch.errors.count == 1)
        #expect(fetch.status?.code == .error)
        #expect(fetch.parentSpanID == run.spanID)
    }

    @Test("a failing store call is recorded on its own span, not on the run (fail-open)")
    func aFailingStoreCallIsRecordedOnItsSpanAlone() async throws {
        let f = Traced()
        f.serve("/a", [Self.fresh("one")])
        f.store.inject(.init(operations: [.set]))
        _ = try await f.cache.run(f.request("/a"))
        let spans = f.spans()
        let set = try #require(spans.only("cached.store.set"))
        #expect(set.errors.count == 1)
        #expect(set.status?.code == .error)
        // The cache failed open: the request did not fail.
        let run = try #require(spans.only(CachedNetworkingSpans.run))
        #expect(run.errors.isEmpty && run.status == nil)
    }

    @Test("without a tracer the cache makes no span, and the caller's context reaches the transport as it is")
    func withoutATracerNothingIsRecordedAndTheCallersContextPassesThrough() async throws {
        let f = Traced(tracer: nil)
        #expect(f.cache.tracing.tracer == nil)
        f.serve("/a", [Self.fresh("one")])
        // A caller's span: the transport sees it as it is, with no span of the cache in between.
        let callerTracer = InMemoryTracer()
        let parent = callerTracer.startSpan("caller")
        _ = try await ServiceContext.withValue(parent.context) { try await f.cache.run(f.request("/a")) }
        parent.end()
        #expect(f.transport.contexts == [parent.spanContext])
        #expect(callerTracer.finishedSpans.map(\.operationName) == ["caller"])
        #expect(callerTracer.activeSpans.isEmpty)
    }

    @Test("a background refresh's origin fetch is in the trace of the request that started it")
    func aBackgroundRefreshIsTracedInTheTraceOfTheRequestThatStartedIt() async throws {
        let f = Traced()
        var fields = HTTPFields()
        fields[.cacheControl] = "max-age=1, stale-while-revalidate=60"
        f.serve("/swr", [.init(headerFields: fields, body: "one"), .init(headerFields: fields, body: "two")])
        _ = try await f.cache.run(f.request("/swr"))
        f.clock.advance(by: .seconds(5))
        _ = f.spans()

        let stale = try await f.cache.run(f.request("/swr"))
        #expect(stale.source == .stale)
        await f.cache.waitForBackgroundRefreshes()
        let spans = f.spans()
        let run = try #require(spans.only(CachedNetworkingSpans.run))
        let fetch = try #require(spans.only(CachedNetworkingSpans.originFetch))
        #expect(fetch.traceID == run.traceID)
        #expect(fetch.parentSpanID == run.spanID)
    }
}

/// A transport that records the trace context each request was sent in, and passes it on.
final class ContextRecordingTransport: HTTPTransport {
    private let next: any HTTPTransport
    private let recorded = Mutex<[InMemorySpanContext?]>([])

    init(_ next: any HTTPTransport) { self.next = next }

    /// The in-memory span context current for each request sent, in order.
    var contexts: [InMemorySpanContext?] { recorded.withLock { $0 } }

    func send(_ request: HTTPRequest, body: ByteBuffer?) async throws -> HTTPTransportResponse {
        let context = ServiceContext.current?.inMemorySpanContext
        recorded.withLock { $0.append(context) }
        return try await next.send(request, body: body)
    }
}

extension [FinishedInMemorySpan] {
    /// The one span named `name`; nil when there is none or several.
    func only(_ name: String) -> FinishedInMemorySpan? {
        let matching = filter { $0.operationName == name }
        return matching.count == 1 ? matching[0] : nil
    }
}

extension FinishedInMemorySpan {
    func stringAttribute(_ name: String) -> String? {
        if case .string(let value) = attributes.get(name) { return value }
        return nil
    }
}
