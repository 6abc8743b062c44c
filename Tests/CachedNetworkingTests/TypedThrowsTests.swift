import CachedNetworking
import CachedNetworkingTesting
import Foundation
import HTTPTypes
import NIOCore
import Testing

@Suite("Closures users write compile against the SDK's typed throws")
struct TypedThrowsTests {
    // These compile only if an ordinary closure, whose thrown error is `any Error`, is accepted where the SDK takes a
    // function; each test also runs what it compiled.

    @Test("a repository's fetch is an ordinary throwing closure")
    func repositoryFetchClosure() async throws {
        let f = FakeCache()
        f.serve("/widget", cacheControl: "max-age=60", bodies: [#"{"id":3}"#])
        let cache = f.cache
        let widget = CachedRepository<Widget>(request: f.request("/widget"), fetch: { r, p in try await cache.run(r, policy: p) })
        let decoded = CachedRepository<Widget>(
            request: f.request("/widget"),
            fetch: { r, p in try await cache.run(r, policy: p) },
            decode: { data in try JSONDecoder().decode(Widget.self, from: data) })
        #expect(try await widget.value() == Widget(id: 3))
        #expect(try await decoded.value() == Widget(id: 3))
    }

    @Test("a fetch that throws errors of its own fails the read as a network error that keeps them")
    func foreignErrors() async throws {
        struct Offline: Error {}
        let widget = CachedRepository<Widget>(request: FakeCache().request("/widget")) { _, _ in throw Offline() }
        do {
            _ = try await widget.value()
            Issue.record("expected the fetch's error")
        } catch {
            #expect(error.kind == .network)
            #expect(error.networkError?.kind == .transport)
            #expect(error.underlying is Offline)
        }
    }

    @Test("the cache and a repository are used in a throwing task group, and errors caught as they are")
    func taskGroup() async throws {
        let f = FakeCache()
        f.serve("/a", cacheControl: "max-age=60", bodies: ["a"])
        f.serve("/b", cacheControl: "max-age=60", bodies: ["b"])
        let cache = f.cache
        let requests = [f.request("/a"), f.request("/b")]
        let bodies = try await withThrowingTaskGroup(of: String.self) { group in
            for request in requests {
                group.addTask { String(buffer: try await cache.run(request).body) }
            }
            var bodies: [String] = []
            for try await body in group { bodies.append(body) }
            return bodies.sorted()
        }
        #expect(bodies == ["a", "b"])

        let numbers = CachedRepository<Int> { 42 }
        let sum = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<3 { group.addTask { try await numbers.value() } }
            return try await group.reduce(0, +)
        }
        #expect(sum == 126)

        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { _ = try await cache.run(f.request("/unscripted")) }
                try await group.waitForAll()
            }
            Issue.record("expected the transport's failure")
        } catch let error as CachedNetworkingError {
            #expect(error.kind == .transport)
        }
    }

    @Test("the cache's calls fit ordinary closure and function types")
    func closureTypes() async throws {
        let f = FakeCache()
        f.serve("/a", cacheControl: "max-age=60", bodies: ["a"])
        let cache = f.cache
        let operation: @Sendable () async throws -> CachedResponse = { try await cache.run(f.request("/a")) }
        func retrying<T>(_ attempts: Int, _ body: () async throws -> T) async throws -> T {
            for _ in 1..<attempts {
                if let value = try? await body() { return value }
            }
            return try await body()
        }
        #expect(try await retrying(2, operation).text == "a")
        #expect(try await retrying(2) { try await cache.prefetch(f.request("/a")) } == .cache)
    }
}
