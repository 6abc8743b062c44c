import CachedNetworking
import CachedNetworkingOpenAPI
import CachedOriginSupport
import OpenAPIRuntime
import Testing

/// A client generated from openapi.yaml, with the caching middleware, against a local origin.
@Suite("CachingMiddleware with a generated client")
struct GeneratedClientTests {
    static let items = #"[{"id":1,"name":"one"}]"#

    @Test("a GET made twice reaches the origin once; the second answer is a hit")
    func secondGetIsAHit() async throws {
        let setup = try await ClientSetup.make()
        setup.serve("/v1/items") { _ in .init(headers: [("Cache-Control", "max-age=60")], body: Self.items) }

        let first = try await setup.client.listItems().ok
        let second = try await setup.client.listItems().ok
        #expect(first.headers.cacheStatus == "cached; fwd=uri-miss; stored")
        #expect(second.headers.cacheStatus == "cached; hit; ttl=60")
        #expect(second.headers.age == 0)
        #expect(try second.body.json.map(\.name) == ["one"])
        #expect(setup.received("/v1/items").count == 1)
        await setup.stop()
    }

    @Test("a POST goes to the origin and invalidates the stored GET of its target")
    func postInvalidates() async throws {
        let setup = try await ClientSetup.make()
        setup.serve("/v1/items") { method in
            method == "POST"
                ? .init(status: 201, body: #"{"id":2,"name":"two"}"#)
                : .init(headers: [("Cache-Control", "max-age=60")], body: Self.items)
        }
        _ = try await setup.client.listItems()
        #expect(try await setup.client.listItems().ok.headers.cacheStatus == "cached; hit; ttl=60")

        let created = try await setup.client.createItem(body: .json(.init(name: "two"))).created
        #expect(try created.body.json.name == "two")
        #expect(created.headers.cacheStatus == "cached; fwd=method")
        let post = try #require(setup.received("/v1/items", method: "POST").first)
        #expect(post.header("Content-Type") == "application/json; charset=utf-8")

        let after = try await setup.client.listItems().ok
        #expect(after.headers.cacheStatus == "cached; fwd=uri-miss; stored")
        #expect(setup.received("/v1/items").count == 2)
        await setup.stop()
    }

    @Test("an error of the next step comes out of the client as the next step threw it")
    func nextStepErrorPropagates() async throws {
        let setup = try await ClientSetup.make(after: [FailingMiddleware()])
        let error = await #expect(throws: ClientError.self) { try await setup.client.listItems() }
        #expect(error?.underlyingError as? OriginUnreachable == OriginUnreachable())
        #expect(error?.causeDescription.contains("FailingMiddleware") == true)
        #expect(setup.received("/v1/items").isEmpty)
        await setup.stop()
    }

    @Test("the transport's error when the origin is down comes out of the client unchanged")
    func transportErrorPropagates() async throws {
        let setup = try await ClientSetup.make()
        await setup.origin.stop()
        let client = Client(
            origin: setup.origin, basePath: "/v1", middlewares: [CachingMiddleware(cache: setup.cache)],
            timeout: .milliseconds(300))
        let error = await #expect(throws: ClientError.self) { try await client.listItems() }
        #expect(error?.causeDescription.contains("Transport threw an error") == true)
        #expect(!(error?.underlyingError is CachedNetworkingError))
    }

    @Test("request header fields reach the origin, with those the middlewares after the cache add")
    func requestHeadersReachTheOrigin() async throws {
        let inner = CountingMiddleware(adding: (.init("X-Added")!, "inner"))
        let setup = try await ClientSetup.make(after: [inner])
        setup.serve("/v1/items?limit=1") { _ in .init(headers: [("Cache-Control", "max-age=60")], body: Self.items) }

        _ = try await setup.client.listItems(query: .init(limit: 1), headers: .init(xTraceId: "trace-1"))
        let received = try #require(setup.received("/v1/items?limit=1").first)
        #expect(received.header("X-Trace-Id") == "trace-1")
        #expect(received.header("Accept") == "application/json")
        #expect(received.header("X-Added") == "inner")
        #expect(inner.count == 1)

        // A hit never reaches the middlewares after the cache.
        _ = try await setup.client.listItems(query: .init(limit: 1), headers: .init(xTraceId: "trace-2"))
        #expect(inner.count == 1)
        #expect(setup.received("/v1/items?limit=1").count == 1)
        await setup.stop()
    }

    @Test("a stale response is validated through the client: the cache's conditional reaches the origin")
    func validationGoesThroughTheClient() async throws {
        let setup = try await ClientSetup.make()
        setup.serve("/v1/items/1") { _ in
            .init(headers: [("Cache-Control", "max-age=10"), ("ETag", #""v1""#)], body: #"{"id":1,"name":"one"}"#)
        }
        _ = try await setup.client.getItem(path: .init(itemId: 1))
        setup.clock.advance(by: .seconds(30))
        setup.origin.route("/v1/items/1") { received in
            received.header("If-None-Match") == #""v1""#
                ? .init(status: 304, headers: [("Cache-Control", "max-age=10"), ("ETag", #""v1""#)])
                : .init(status: 500, body: "expected a conditional request")
        }

        let validated = try await setup.client.getItem(path: .init(itemId: 1)).ok
        #expect(validated.headers.cacheStatus == "cached; fwd=stale; fwd-status=304")
        #expect(validated.headers.eTag == #""v1""#)
        #expect(try validated.body.json.name == "one")
        #expect(setup.received("/v1/items/1").count == 2)
        await setup.stop()
    }

    @Test("the origin's status and header fields come back, from the origin and from the cache")
    func statusAndFieldsPreserved() async throws {
        let outer = RecordingMiddleware()
        let setup = try await ClientSetup.make(before: [outer])
        setup.origin.route("/v1/items/7") { _ in
            .init(status: 404, headers: [("Cache-Control", "max-age=60"), ("X-Origin", "seven")])
        }

        for expected in ["cached; fwd=uri-miss; stored", "cached; hit; ttl=60"] {
            guard case .notFound(let notFound) = try await setup.client.getItem(path: .init(itemId: 7)) else {
                Issue.record("expected a 404")
                continue
            }
            #expect(notFound.headers.cacheStatus == expected)
            #expect(outer.lastResponse?.headerFields[.init("X-Origin")!] == "seven")
            #expect(outer.lastResponse?.headerFields[.contentLength] == "0")
        }
        #expect(outer.lastResponse?.headerFields[.age] == "0")
        #expect(setup.received("/v1/items/7").count == 1)
        await setup.stop()
    }

    @Test("the server URL's path is part of the cached URL")
    func serverURLPathIsPartOfTheKey() async throws {
        let v1 = try await ClientSetup.make(basePath: "/v1")
        let v2 = v1.with(basePath: "/v2")
        for version in ["v1", "v2"] {
            v1.serve("/\(version)/items") { _ in
                .init(headers: [("Cache-Control", "max-age=60")], body: #"[{"id":1,"name":"\#(version)"}]"#)
            }
        }

        for _ in 0..<2 {
            #expect(try await v1.client.listItems().ok.body.json.map(\.name) == ["v1"])
            #expect(try await v2.client.listItems().ok.body.json.map(\.name) == ["v2"])
        }
        #expect(v1.received("/v1/items").count == 1)
        #expect(v1.received("/v2/items").count == 1)
        await v1.stop()
    }

    @Test("a response larger than the cache stores comes back whole, uncached")
    func largeResponsePassesThrough() async throws {
        let setup = try await ClientSetup.make(configure: { $0.maximumStoredBodySize = 16 })
        setup.serve("/v1/items") { _ in .init(headers: [("Cache-Control", "max-age=60")], body: Self.items) }

        for _ in 0..<2 {
            let answer = try await setup.client.listItems().ok
            #expect(answer.headers.cacheStatus == nil)
            #expect(try answer.body.json.map(\.name) == ["one"])
        }
        #expect(setup.received("/v1/items").count == 2)
        await setup.stop()
    }

    @Test("an operation's policy applies to its requests")
    func operationPolicy() async throws {
        let setup = try await ClientSetup.make()
        let reloading = setup.with { $0 == "listItems" ? .reloadIgnoringLocalCacheData : .useProtocolCachePolicy }
        setup.serve("/v1/items") { _ in .init(headers: [("Cache-Control", "max-age=60")], body: Self.items) }

        _ = try await setup.client.listItems()
        let reloaded = try await reloading.client.listItems().ok
        #expect(reloaded.headers.cacheStatus == "cached; fwd=request; stored")
        #expect(setup.received("/v1/items").count == 2)
        await setup.stop()
    }
}
