import CachedNetworking
import CachedNetworkingTesting
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPTypes
import Testing

@Suite("Foundation bridge")
struct FoundationBridgeTests {
    @Test("a URLRequest is answered, with its cache policy")
    func urlRequest() async throws {
        let h = try await Harness.make()
        h.serve("/u", [("Cache-Control", "max-age=60")], body: "data")
        var request = URLRequest(url: URL(string: h.origin.url("/u"))!)
        _ = try await h.cache.run(request)
        #expect(try await h.cache.run(request).source == .cache)
        request.cachePolicy = .reloadIgnoringLocalCacheData
        #expect(try await h.cache.run(request).source == .network)
        await h.stop()
    }

    @Test("the completion handler gets data, an HTTPURLResponse and fromCache")
    func completionHandler() async throws {
        let h = try await Harness.make()
        h.serve("/cb", [("Cache-Control", "max-age=60"), ("X-Test", "1")], body: "payload")
        let request = URLRequest(url: URL(string: h.origin.url("/cb"))!)
        func call() async -> (Data?, Int?, String?, Bool) {
            await withCheckedContinuation { continuation in
                h.cache.run(request) { data, response, error, fromCache in
                    let http = response as? HTTPURLResponse
                    continuation.resume(returning: (data, http?.statusCode, http?.value(forHTTPHeaderField: "X-Test"), fromCache))
                }
            }
        }
        let first = await call()
        let second = await call()
        #expect(first.0 == Data("payload".utf8))
        #expect(first.1 == 200)
        #expect(first.2 == "1")
        #expect(first.3 == false)
        #expect(second.3 == true)
        await h.stop()
    }

    @Test("the completion handler reports errors")
    func completionError() async throws {
        let cache = CachedNetworking(store: InMemoryCacheStore(), transport: FakeHTTPTransport())
        let request = HTTPRequest(method: .get, scheme: "https", authority: "nowhere.example", path: "/")
        let failed: Bool = await withCheckedContinuation { continuation in
            cache.run(request) { data, _, error, _ in continuation.resume(returning: data == nil && error != nil) }
        }
        #expect(failed)
    }

    @Test("URLRequest cache policies map to CachePolicy")
    func policies() {
        #expect(CachePolicy(URLRequest.CachePolicy.returnCacheDataDontLoad) == .returnCacheDataDontLoad)
        #expect(CachePolicy(URLRequest.CachePolicy.returnCacheDataElseLoad) == .returnCacheDataElseLoad)
        #expect(CachePolicy(URLRequest.CachePolicy.reloadRevalidatingCacheData) == .reloadRevalidatingCacheData)
        #expect(CachePolicy(URLRequest.CachePolicy.reloadIgnoringLocalAndRemoteCacheData) == .reloadIgnoringLocalCacheData)
        #expect(CachePolicy(URLRequest.CachePolicy.useProtocolCachePolicy) == .useProtocolCachePolicy)
    }

    @Test("the URLSession transport fetches without a cache of its own")
    func urlSessionTransport() async throws {
        let h = try await Harness.make()
        h.serve("/us", [("Cache-Control", "max-age=60"), ("X-Origin", "yes")], body: "via urlsession")
        let transport = URLSessionTransport(timeout: 5)
        let cache = CachedNetworking(store: h.store, transport: transport, configuration: h.cache.configuration)
        let first = try await cache.run(h.origin.request("/us"))
        #expect(first.text == "via urlsession")
        #expect(first.headerFields[HTTPField.Name("X-Origin")!] == "yes")
        #expect(try await cache.run(h.origin.request("/us")).source == .cache)
        let direct = try await transport.send(h.origin.request("/us"), body: nil)
        #expect(direct.response.status == .ok)
        #expect(h.origin.count("/us") == 2)
        await h.stop()
    }
}
