import CachedNetworking
import CachedNetworkingTesting
import Foundation
import HTTPTypes
import OpenAPIRuntime
import Synchronization
import Testing

@testable import CachedNetworkingOpenAPI

/// `CachingMiddleware.intercept` called directly, with next steps written here.
@Suite("CachingMiddleware's intercept")
struct InterceptTests {
    static let baseURL = URL(string: "https://api.example.com/v1")!

    /// A middleware over a cache in memory whose own transport answers nothing.
    static func makeMiddleware(maximumStoredBodySize: Int = 8 << 20) -> CachingMiddleware {
        var configuration = CachedNetworking.Configuration()
        configuration.maximumStoredBodySize = maximumStoredBodySize
        return CachingMiddleware(
            cache: CachedNetworking(store: InMemoryCacheStore(), transport: FakeHTTPTransport(), configuration: configuration))
    }

    @Test("an error thrown by next comes out as it was thrown")
    func nextErrorUnchanged() async throws {
        let middleware = Self.makeMiddleware()
        await #expect(throws: OriginUnreachable.self) {
            try await middleware.intercept(
                HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/items"), body: nil, baseURL: Self.baseURL,
                operationID: "listItems"
            ) { _, _, _ in throw OriginUnreachable() }
        }
    }

    @Test("a cancelled call's error from next comes out as it was thrown")
    func cancelledNextErrorUnchanged() async throws {
        let middleware = Self.makeMiddleware()
        let call = Task {
            try await middleware.intercept(
                HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/items"), body: nil, baseURL: Self.baseURL,
                operationID: "listItems"
            ) { _, _, _ in
                withUnsafeCurrentTask { $0?.cancel() }
                throw CancellationError()
            }
        }
        await #expect(throws: CancellationError.self) { try await call.value }
    }

    @Test("next gets the request relative to the base URL, with the call's own body")
    func nextGetsTheCallsRequest() async throws {
        let middleware = Self.makeMiddleware()
        let body = HTTPBody(#"{"name":"two"}"#)
        let seen = Mutex<(HTTPRequest, HTTPBody?, URL)?>(nil)
        var request = HTTPRequest(method: .post, scheme: nil, authority: nil, path: "/items?x=1")
        request.headerFields[.contentType] = "application/json"
        _ = try await middleware.intercept(request, body: body, baseURL: Self.baseURL, operationID: "createItem") {
            request, body, url in
            seen.withLock { $0 = (request, body, url) }
            return (HTTPResponse(status: .created), HTTPBody())
        }
        let (forwarded, forwardedBody, url) = try #require(seen.withLock { $0 })
        #expect(forwarded == request)
        #expect(forwardedBody === body)
        #expect(url == Self.baseURL)
    }

    @Test("the content of a response the cache never stores is passed on as next gave it")
    func unsafeResponseStreams() async throws {
        let middleware = Self.makeMiddleware(maximumStoredBodySize: 4)
        let content = HTTPBody(stream(["a larger ", "response"]), length: .unknown)
        let (response, body) = try await middleware.intercept(
            HTTPRequest(method: .delete, scheme: nil, authority: nil, path: "/items/1"), body: nil,
            baseURL: Self.baseURL, operationID: "deleteItem"
        ) { _, _, _ in (HTTPResponse(status: .ok), content) }
        #expect(body === content)
        #expect(response.headerFields[.cacheStatus] == "cached; fwd=method")
    }

    @Test("a response of unknown length that outgrows the limit while read comes back whole, uncached")
    func unknownLengthOverLimit() async throws {
        let middleware = Self.makeMiddleware(maximumStoredBodySize: 16)
        let calls = Mutex(0)
        for _ in 0..<2 {
            let (response, body) = try await middleware.intercept(
                HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/report"), body: nil,
                baseURL: Self.baseURL, operationID: "getReport"
            ) { _, _, _ in
                calls.withLock { $0 += 1 }
                let content = HTTPBody(stream(["0123456789", "abcdefghij", "KLMNOPQRST"]), length: .unknown)
                return (HTTPResponse(status: .ok, headerFields: [.cacheControl: "max-age=60"]), content)
            }
            #expect(response.headerFields[.cacheStatus] == nil)
            #expect(try await text(body) == "0123456789abcdefghijKLMNOPQRST")
        }
        #expect(calls.withLock { $0 } == 2)
    }

    @Test("a response within the limit is read and served from the cache the second time")
    func withinLimitIsCached() async throws {
        let middleware = Self.makeMiddleware(maximumStoredBodySize: 32)
        let calls = Mutex(0)
        var statuses: [String?] = []
        for _ in 0..<2 {
            let (response, body) = try await middleware.intercept(
                HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/report"), body: nil,
                baseURL: Self.baseURL, operationID: "getReport"
            ) { _, _, _ in
                calls.withLock { $0 += 1 }
                let content = HTTPBody(stream(["0123456789", "abcdefghij", "KLMNOPQRST"]), length: .unknown)
                return (HTTPResponse(status: .ok, headerFields: [.cacheControl: "max-age=60"]), content)
            }
            statuses.append(response.headerFields[.cacheStatus])
            #expect(try await text(body) == "0123456789abcdefghijKLMNOPQRST")
        }
        #expect(statuses == ["cached; fwd=uri-miss; stored", "cached; hit; ttl=60"])
        #expect(calls.withLock { $0 } == 1)
    }

    @Test("a server URL without a host passes the request on unchanged")
    func relativeServerURL() async throws {
        let middleware = Self.makeMiddleware()
        let (response, _) = try await middleware.intercept(
            HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/items"), body: nil,
            baseURL: URL(string: "/relative")!, operationID: "listItems"
        ) { _, _, url in
            #expect(url.absoluteString == "/relative")
            return (HTTPResponse(status: .ok, headerFields: [.cacheControl: "max-age=60"]), nil)
        }
        #expect(response.headerFields[.cacheStatus] == nil)
    }

    @Test("the absolute request joins the server URL and the operation's path and query")
    func absoluteRequest() throws {
        let request = HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/items/a%20b?limit=2")
        func absolute(_ baseURL: String) -> HTTPRequest? {
            CachingMiddleware.absoluteRequest(request, baseURL: URL(string: baseURL)!)
        }
        let plain = try #require(absolute("http://127.0.0.1:8080/v1"))
        #expect(plain.scheme == "http")
        #expect(plain.authority == "127.0.0.1:8080")
        #expect(plain.path == "/v1/items/a%20b?limit=2")
        let root = try #require(absolute("https://api.example.com"))
        #expect(root.authority == "api.example.com")
        #expect(root.path == "/items/a%20b?limit=2")
        let v6 = try #require(absolute("http://[::1]:8080/"))
        #expect(v6.authority == "[::1]:8080")
        #expect(v6.path == "//items/a%20b?limit=2")
    }
}

/// An `AsyncStream` of `chunks`.
private func stream(_ chunks: [String]) -> AsyncStream<HTTPBody.ByteChunk> {
    AsyncStream { continuation in
        for chunk in chunks { continuation.yield(HTTPBody.ByteChunk(chunk.utf8)) }
        continuation.finish()
    }
}
