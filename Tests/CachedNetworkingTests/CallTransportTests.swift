import CachedNetworking
import CachedNetworkingTesting
import HTTPTypes
import NIOCore
import Testing

/// `run(_:body:policy:transport:logger:)`: a call's own transport, as integrations (the OpenAPI middleware) pass it.
@Suite("a call's own transport")
struct CallTransportTests {
    static let url = "https://api.example.com/items"
    static let request = HTTPRequest(method: .get, scheme: "https", authority: "api.example.com", path: "/items")

    /// A cache whose own transport has no scripts (so any request that reaches it fails), over a manual clock.
    private static func makeCache() -> (CachedNetworking, own: FakeHTTPTransport, clock: ManualCacheClock) {
        let clock = ManualCacheClock()
        let own = FakeHTTPTransport()
        var configuration = CachedNetworking.Configuration()
        configuration.clock = clock
        let store = InMemoryCacheStore(clock: clock)
        return (CachedNetworking(store: store, transport: own, configuration: configuration), own, clock)
    }

    @Test("a miss is fetched through the call's transport, and the next call is a hit without any transport")
    func missThroughCallTransport() async throws {
        let (cache, own, _) = Self.makeCache()
        let call = FakeHTTPTransport()
        call.script(Self.url, replies: [.init(headerFields: [.cacheControl: "max-age=60"], body: "[]")])

        let first = try await cache.run(Self.request, transport: call)
        let second = try await cache.run(Self.request, transport: FakeHTTPTransport())
        #expect(first.source == .network)
        #expect(second.source == .cache)
        #expect(String(buffer: second.body) == "[]")
        #expect(call.requestCount(for: Self.url) == 1)
        #expect(own.requests.isEmpty)
    }

    @Test("an unsafe request goes through the call's transport with its body and invalidates")
    func unsafeThroughCallTransport() async throws {
        let (cache, own, _) = Self.makeCache()
        let call = FakeHTTPTransport()
        call.script(Self.url, replies: [.init(headerFields: [.cacheControl: "max-age=60"], body: "[]")])
        call.script(Self.url, method: .post, replies: [.init(status: .created)])
        _ = try await cache.run(Self.request, transport: call)

        var post = Self.request
        post.method = .post
        let created = try await cache.run(post, body: ByteBuffer(string: #"{"name":"two"}"#), transport: call)
        #expect(created.status == .created)
        #expect(call.requests.last?.body.map { String(buffer: $0) } == #"{"name":"two"}"#)
        #expect(try await cache.run(Self.request, transport: call).source == .network)
        #expect(call.requestCount(for: Self.url) == 3)
        #expect(own.requests.isEmpty)
    }

    @Test("within stale-while-revalidate the response is validated through the call's transport before the answer")
    func staleWhileRevalidateInForeground() async throws {
        let (cache, own, clock) = Self.makeCache()
        let call = FakeHTTPTransport()
        call.script(Self.url) { request, _ in
            if request.headerFields[.ifNoneMatch] == #""v1""# {
                return .init(status: .notModified, headerFields: [.cacheControl: "max-age=10", .eTag: #""v1""#])
            }
            return .init(
                headerFields: [.cacheControl: "max-age=10, stale-while-revalidate=60", .eTag: #""v1""#], body: "one")
        }
        _ = try await cache.run(Self.request, transport: call)
        clock.advance(by: .seconds(15))

        let answer = try await cache.run(Self.request, transport: call)
        #expect(answer.source == .revalidated)
        #expect(String(buffer: answer.body) == "one")
        #expect(call.requests.count == 2)
        #expect(call.requests.last?.request.headerFields[.ifNoneMatch] == #""v1""#)
        await cache.waitForBackgroundRefreshes()
        #expect(own.requests.isEmpty)
        #expect(call.requests.count == 2)
    }

    @Test("without a call's transport, stale-while-revalidate still refreshes in the background")
    func staleWhileRevalidateWithoutCallTransport() async throws {
        let (cache, own, clock) = Self.makeCache()
        own.script(Self.url, replies: [
            .init(headerFields: [.cacheControl: "max-age=10, stale-while-revalidate=60"], body: "one"),
            .init(headerFields: [.cacheControl: "max-age=10"], body: "two"),
        ])
        _ = try await cache.run(Self.request)
        clock.advance(by: .seconds(15))

        let answer = try await cache.run(Self.request)
        #expect(answer.source == .stale)
        #expect(String(buffer: answer.body) == "one")
        await cache.waitForBackgroundRefreshes()
        #expect(own.requestCount(for: Self.url) == 2)
    }

    @Test("the call's transport failing is a transport error that carries its error")
    func callTransportFailure() async throws {
        let (cache, own, _) = Self.makeCache()
        let call = FakeHTTPTransport()
        call.script(Self.url, replies: [.failure(FakeHTTPTransport.ConnectionRefused())])
        let error = await #expect(throws: CachedNetworkingError.self) {
            try await cache.run(Self.request, transport: call)
        }
        #expect(error?.kind == .transport)
        #expect(error?.underlying is FakeHTTPTransport.ConnectionRefused)
        #expect(own.requests.isEmpty)
    }
}
