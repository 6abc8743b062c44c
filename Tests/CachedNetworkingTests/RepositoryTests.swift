import CachedNetworking
import CachedNetworkingTesting
import Foundation
import HTTPTypes
import Testing

struct Item: Decodable, Sendable, Equatable {
    let id: Int
}

@Suite("CachedRepository decodes once per stored entry version")
struct RepositoryTests {
    func repository(_ h: Harness, decodes: Tally) -> CachedRepository<Item> {
        let cache = h.cache
        return CachedRepository<Item>(
            fetch: { request, policy async throws(CachedNetworkingError) in try await cache.run(request, policy: policy) },
            decode: { data in
                _ = decodes.next()
                return try JSONDecoder().decode(Item.self, from: data)
            })
    }

    @Test("repeated hits of one entry decode once")
    func decodeOnce() async throws {
        let h = try await Harness.make()
        h.serve("/item", [("Cache-Control", "max-age=60")], body: #"{"id":7}"#)
        let decodes = Tally()
        let items = repository(h, decodes: decodes)
        for _ in 0..<5 {
            #expect(try await items.value(for: h.origin.request("/item")) == Item(id: 7))
        }
        #expect(decodes.value == 1)
        await h.stop()
    }

    @Test("a 304 revalidation with the same ETag does not decode again; a new ETag does")
    func revalidationKeepsValue() async throws {
        let h = try await Harness.make()
        let version = Tally()
        h.serve("/etag") { received in
            let tag = "\"\(version.value)\""
            if received.header("If-None-Match") == tag { return .init(status: 304) }
            return .init(status: 200, headers: [("Cache-Control", "max-age=10"), ("ETag", tag)], body: "{\"id\":\(version.value)}")
        }
        let decodes = Tally()
        let items = repository(h, decodes: decodes)
        #expect(try await items.value(for: h.origin.request("/etag")) == Item(id: 0))
        h.advance(11)
        #expect(try await items.value(for: h.origin.request("/etag")) == Item(id: 0))
        #expect(decodes.value == 1)
        _ = version.next()
        h.advance(11)
        #expect(try await items.value(for: h.origin.request("/etag")) == Item(id: 1))
        #expect(decodes.value == 2)
        await h.stop()
    }

    @Test("responses that were not stored are decoded every time")
    func notStored() async throws {
        let h = try await Harness.make()
        h.serve("/nostore", [("Cache-Control", "no-store")], body: #"{"id":1}"#)
        let decodes = Tally()
        let items = repository(h, decodes: decodes)
        _ = try await items.value(for: h.origin.request("/nostore"))
        _ = try await items.value(for: h.origin.request("/nostore"))
        #expect(decodes.value == 2)
        await h.stop()
    }

    @Test("a non-2xx status is an error, not a decode")
    func statusError() async throws {
        let h = try await Harness.make()
        h.serve("/missing", status: 404, body: "nope")
        let items = CachedRepository<Item>(network: h.cache)
        do {
            _ = try await items.value(for: h.origin.request("/missing"))
            Issue.record("expected an error")
        } catch {
            #expect(error.kind == .status)
            #expect(error.status?.code == 404)
        }
        await h.stop()
    }
}
