import CachedNetworking
import CachedNetworkingAsyncHTTPClient
import CachedNetworkingTesting
import HTTPTypes
import NIOCore
import Testing

@Suite("What is stored, against a local origin")
struct StorageScenarioTests {
    @Test("no-store responses are not stored", arguments: ["no-store, max-age=60", "private, max-age=60", "max-age=60, private=\"x\""])
    func notStored(cacheControl: String) async throws {
        let h = try await Harness.make()
        h.serve("/p", [("Cache-Control", cacheControl)])
        _ = try await h.get("/p")
        let second = try await h.get("/p")
        #expect(second.source == .network)
        #expect(h.origin.count("/p") == 2)
        await h.stop()
    }

    @Test("Authorization requests are not stored unless the response is public")
    func authorization() async throws {
        let h = try await Harness.make()
        h.serve("/private", [("Cache-Control", "max-age=60")])
        h.serve("/shared", [("Cache-Control", "public, max-age=60")])
        let auth = [("Authorization", "Bearer token")]
        _ = try await h.get("/private", auth)
        #expect(try await h.get("/private", auth).source == .network)
        _ = try await h.get("/shared", auth)
        #expect(try await h.get("/shared", auth).source == .cache)
        await h.stop()
    }

    @Test("Vary variants are stored side by side")
    func varyVariants() async throws {
        let h = try await Harness.make()
        h.serve("/vary") { received in
            .init(status: 200, headers: [("Cache-Control", "max-age=60"), ("Vary", "Accept-Language")], body: received.header("Accept-Language") ?? "none")
        }
        #expect(try await h.get("/vary", [("Accept-Language", "en")]).text == "en")
        #expect(try await h.get("/vary", [("Accept-Language", "fr")]).text == "fr")
        let en = try await h.get("/vary", [("Accept-Language", "EN")])
        let fr = try await h.get("/vary", [("Accept-Language", "fr")])
        #expect(en.source == .cache && en.text == "en")
        #expect(fr.source == .cache && fr.text == "fr")
        #expect(h.origin.count("/vary") == 2)
        await h.stop()
    }

    @Test("a request whose Vary'd fields match no variant is a vary-miss")
    func varyMiss() async throws {
        let h = try await Harness.make()
        h.serve("/vm", [("Cache-Control", "max-age=60"), ("Vary", "Accept")])
        _ = try await h.get("/vm", [("Accept", "text/html")])
        let other = try await h.get("/vm", [("Accept", "application/json")])
        #expect(other.cacheStatus.forward == .varyMiss)
        await h.stop()
    }

    @Test("Vary: * is never stored")
    func varyStar() async throws {
        let h = try await Harness.make()
        h.serve("/star", [("Cache-Control", "max-age=60"), ("Vary", "*")])
        _ = try await h.get("/star")
        #expect(try await h.get("/star").source == .network)
        await h.stop()
    }

    @Test("hop-by-hop fields are not stored")
    func hopByHop() async throws {
        let h = try await Harness.make()
        h.serve("/hop", [("Cache-Control", "max-age=60"), ("Connection", "X-Hop"), ("X-Hop", "1"), ("X-Kept", "1")])
        _ = try await h.get("/hop")
        let hit = try await h.get("/hop")
        #expect(hit.source == .cache)
        #expect(hit.headerFields[HTTPField.Name("X-Hop")!] == nil)
        #expect(hit.headerFields[HTTPField.Name("X-Kept")!] == "1")
        await h.stop()
    }

    @Test("keys are readable: namespace, generation, method, URL")
    func readableKeys() async throws {
        let h = try await Harness.make { $0.namespace = "svc" }
        h.serve("/k?q=1", [("Cache-Control", "max-age=60")])
        _ = try await h.get("/k?q=1")
        #expect(h.store.keys.contains(entryKey("http://127.0.0.1:\(h.origin.port)/k?q=1", namespace: "svc")))
        await h.stop()
    }

    @Test("long URLs are keyed by a prefix and a hash")
    func longURLKey() async throws {
        let h = try await Harness.make()
        let path = "/long?" + String(repeating: "x", count: 600)
        h.serve(path, [("Cache-Control", "max-age=60")])
        _ = try await h.get(path)
        // `cached:0:{<16 hex digits>}:GET:` then at most 256 bytes.
        let key = try #require(h.store.keys.first { $0.hasPrefix("cached:0:{") && $0.contains("}:GET:") })
        #expect(key.utf8.count <= 256 + "cached:0:{0123456789abcdef}:GET:".utf8.count)
        #expect(key.contains("#h:"))
        #expect(try await h.get(path).source == .cache)
        await h.stop()
    }

    @Test("responses larger than the stored-body limit are served but not stored")
    func bodyLimit() async throws {
        let h = try await Harness.make { $0.maximumStoredBodySize = 10 }
        h.serve("/big", [("Cache-Control", "max-age=60")], body: String(repeating: "b", count: 11))
        _ = try await h.get("/big")
        #expect(try await h.get("/big").source == .network)
        await h.stop()
    }

    /// A cache must not fail a request that would succeed without it: a body far over the stored-body limit
    /// (and over the 64 MiB the transport once collected at most) comes back whole, and nothing is stored.
    @Test("an 80 MiB body is passed on whole and not stored")
    func hugeBodyPassesThrough() async throws {
        // The bytes vary with their position (a block of 251 values, a prime, so that no two 64 KiB chunks
        // agree), so that a lost, doubled or reordered chunk shows.
        var block = ByteBuffer()
        for index in 0..<(64 << 10) { block.writeInteger(UInt8(truncatingIfNeeded: index % 251)) }
        var content = ByteBuffer()
        content.reserveCapacity(80 << 20)
        for _ in 0..<(80 << 20) / block.readableBytes { content.writeImmutableBuffer(block) }
        // A transport of its own, with time for 80 MiB through a debug build on a busy machine.
        let transport = AsyncHTTPClientTransport(timeout: .seconds(300))
        let h = try await Harness.make(transport: transport)
        h.origin.route("/huge", reply: .init(headers: [("Cache-Control", "max-age=60")], content: content))

        let answer = try await h.get("/huge")
        #expect(answer.response.status == .ok)
        #expect(answer.body.readableBytes == 80 << 20)
        #expect(answer.body == content)
        #expect(answer.source == .network)
        #expect(answer.cacheStatus.headerValue == "cached; fwd=uri-miss")
        #expect(h.store.keys.allSatisfy { !$0.contains("/huge") }, "\(h.store.keys)")
        #expect(h.metrics.value(CachedNetworkingMetrics.stores) == 0)
        try await transport.shutdown()
        await h.stop()
    }

    @Test("a new response too large to store removes the stored one it replaces")
    func tooLargeReplacementRemovesStored() async throws {
        let h = try await Harness.make { $0.maximumStoredBodySize = 10 }
        let version = Tally()
        h.serve("/grows") { _ in
            version.next() == 1
                ? .init(headers: [("Cache-Control", "max-age=10"), ("ETag", "\"small\"")], body: "small")
                : .init(headers: [("Cache-Control", "max-age=10"), ("ETag", "\"large\"")], body: String(repeating: "L", count: 11))
        }
        let key = entryKey(h.origin.url("/grows"))
        _ = try await h.get("/grows")
        #expect(h.store.keys.contains(key))
        h.advance(15)
        let replaced = try await h.get("/grows")
        #expect(replaced.text == String(repeating: "L", count: 11))
        #expect(replaced.cacheStatus.stored == false)
        #expect(!h.store.keys.contains(key), "\(h.store.keys)")
        // The next request is not validated against the removed response's ETag.
        _ = try await h.get("/grows")
        #expect(h.origin.received("/grows").last?.header("If-None-Match") == nil)
        await h.stop()
    }
}
