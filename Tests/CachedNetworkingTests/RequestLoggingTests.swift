import CachedNetworkingTesting
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPTypes
import Logging
import NIOCore
import ServiceLifecycle
import Testing

@testable import CachedNetworking

/// A logger given to a call (`run(…, logger:)`) gets the cache's lines about that request.
@Suite("Per-request logger")
struct RequestLoggingTests {
    /// A cache over the fakes whose own logger writes to ``cacheLines``.
    struct Logged {
        let clock = ManualCacheClock()
        let transport = FakeHTTPTransport()
        let store: InMemoryCacheStore
        let cache: CachedNetworking
        let cacheLines = CapturedLog(minimumLevel: .trace)

        init() {
            store = InMemoryCacheStore(clock: clock)
            var configuration = CachedNetworking.Configuration()
            configuration.clock = clock
            cache = CachedNetworking(
                store: store, transport: transport, configuration: configuration,
                logger: cacheLines.logger)
        }

        func request(_ path: String) -> HTTPRequest {
            HTTPRequest(method: .get, scheme: "https", authority: "api.example.com", path: path)
        }

        func serve(_ path: String, cacheControl: String = "max-age=60", _ replies: [FakeHTTPTransport.Reply]? = nil) {
            var fields = HTTPFields()
            fields[.cacheControl] = cacheControl
            transport.script(FakeCache.base + path, replies: replies ?? [.init(headerFields: fields, body: path)])
        }
    }

    @Test("a request's lines go to its logger with its metadata; another request's and the cache's logger get none of them")
    func linesGoToTheRequestsLogger() async throws {
        let f = Logged()
        let a = CapturedLog(minimumLevel: .trace)
        let b = CapturedLog(minimumLevel: .trace)
        f.serve("/a")
        f.serve("/b")
        f.serve("/c")

        _ = try await f.cache.run(f.request("/a"), logger: a.logger(requestID: "a"))
        _ = try await f.cache.run(f.request("/a"), logger: a.logger(requestID: "a"))
        _ = try await f.cache.run(f.request("/b"), logger: b.logger(requestID: "b"))

        #expect(a.lines.filter { $0.message == "answered" }.count == 2)
        #expect(a.lines.allSatisfy { $0.metadata["request.id"] == "a" })
        #expect(a.lines.contains { "\($0.metadata[CachedNetworkingLogKeys.cacheStatus] ?? "")".contains("hit") })
        #expect(b.lines.filter { $0.message == "answered" }.count == 1)
        #expect(b.lines.allSatisfy { $0.metadata["request.id"] == "b" })
        #expect(f.cacheLines.lines.isEmpty)

        // Without a logger, the cache's own logger, as before.
        _ = try await f.cache.run(f.request("/c"))
        #expect(f.cacheLines.lines.filter { $0.message == "answered" }.count == 1)
        #expect(f.cacheLines.lines.allSatisfy { $0.metadata["request.id"] == nil })
        #expect(a.lines.filter { $0.message == "answered" }.count == 2)
    }

    @Test("the store outage a request meets is warned about on that request's logger")
    func storeOutageWarningGoesToTheRequestsLogger() async throws {
        let f = Logged()
        let a = CapturedLog(minimumLevel: .trace)
        f.serve("/a")
        f.store.inject(.init())
        let answer = try await f.cache.run(f.request("/a"), logger: a.logger(requestID: "a"))
        #expect(answer.source == .network)
        let warning = a.lines.first { $0.level == .warning }
        #expect(warning?.message.contains("the cache store is failing") == true)
        #expect(warning?.metadata["request.id"] == "a")
        #expect(f.cacheLines.lines.isEmpty)
    }

    @Test("a background refresh logs to the logger of the request that started it, also when the cache runs as a service")
    func backgroundRefreshLogsToTheRequestsLogger() async throws {
        let f = Logged()
        let a = CapturedLog(minimumLevel: .trace)
        let group = ServiceGroup(services: [f.cache], gracefulShutdownSignals: [], logger: Logger(label: "test"))
        let running = Task { try await group.run() }
        while f.cache.background.withLock({ $0.runner == nil }) { await Task.yield() }

        var fields = HTTPFields()
        fields[.cacheControl] = "max-age=1, stale-while-revalidate=60"
        f.serve("/swr", [.init(headerFields: fields, body: "one"), .failure(FakeHTTPTransport.ConnectionRefused())])
        _ = try await f.cache.run(f.request("/swr"))
        f.clock.advance(by: .seconds(5))
        let stale = try await f.cache.run(f.request("/swr"), logger: a.logger(requestID: "a"))
        #expect(stale.source == .stale)
        await f.cache.waitForBackgroundRefreshes()

        let failed = a.lines.first { $0.message == "background revalidation failed" }
        #expect(failed?.metadata["request.id"] == "a")
        #expect(!f.cacheLines.lines.contains { $0.message == "background revalidation failed" })
        await group.triggerGracefulShutdown()
        try await running.value
    }

    @Test("a prefetch, a URLRequest and a repository read take a logger too")
    func otherEntryPointsTakeALogger() async throws {
        let f = Logged()
        let a = CapturedLog(minimumLevel: .trace)
        f.serve("/p")
        f.serve("/u")
        f.serve("/r")
        try await f.cache.prefetch(f.request("/p"), logger: a.logger(requestID: "p"))
        _ = await f.cache.prefetch([f.request("/p")], logger: a.logger(requestID: "batch"))
        let url = try #require(URL(string: FakeCache.base + "/u"))
        _ = try await f.cache.run(URLRequest(url: url), logger: a.logger(requestID: "u"))
        let repository = CachedRepository<String>(f.cache, request: f.request("/r")) { String(decoding: $0, as: UTF8.self) }
        _ = try await repository.value(logger: a.logger(requestID: "r"))

        let ids = a.lines.filter { $0.message == "answered" }.compactMap { $0.metadata["request.id"].map { "\($0)" } }
        #expect(ids == ["p", "batch", "u", "r"])
        #expect(f.cacheLines.lines.isEmpty)
    }
}

extension CapturedLog {
    /// A logger writing here with `request.id` metadata.
    func logger(requestID: String) -> Logger {
        var logger = self.logger
        logger[metadataKey: "request.id"] = "\(requestID)"
        return logger
    }
}
