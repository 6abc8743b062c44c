@testable import CachedNetworking
import CachedNetworkingTesting
import CachedTestSupport
import Foundation
import HTTPTypes
import NIOCore
import Synchronization
import Testing

/// Client conditionals answered from the cache, HEAD and 304 updates of stored responses, and the bound on `Vary`
/// variants, through the whole cache over every store: `MemoryStore`, and a live `cached-server` and
/// `redis-server` (started for the suite), with a scripted origin and a clock moved by hand.
@Suite("Conditionals, updates and variants over every store", .liveServers)
struct ConditionalStoreScenarioTests {
    static let url = "https://api.example.com/doc"

    /// What a scenario works with.
    struct Setup {
        let cache: CachedNetworking
        let origin: FakeHTTPTransport
        let clock: ManualCacheClock
        let store: any CacheStore
        let configuration: CachedNetworking.Configuration

        /// A GET (or `method`) of the scenario's URL with `pairs`.
        func request(_ pairs: [(String, String)] = [], method: HTTPRequest.Method = .get) -> HTTPRequest {
            var fields = HTTPFields()
            for (name, value) in pairs { fields.append(HTTPField(name: HTTPField.Name(name)!, value: value)) }
            return HTTPRequest(method: method, scheme: "https", authority: "api.example.com", path: "/doc", headerFields: fields)
        }

        func run(_ pairs: [(String, String)] = [], method: HTTPRequest.Method = .get) async throws -> CachedResponse {
            try await cache.run(request(pairs, method: method))
        }

        /// Another cache (another process, in effect) over the same store, origin and clock; around the hooks of a
        /// ``HookedStore``.
        func sibling() -> CachedNetworking {
            CachedNetworking(store: (store as? HookedStore)?.base ?? store, transport: origin, configuration: configuration)
        }

        /// The store key of the scenario's URL (a response, or a `Vary` index) for `method`.
        func storeKey(method: HTTPRequest.Method = .get) -> String {
            entryKey(ConditionalStoreScenarioTests.url, namespace: configuration.namespace, method: method.rawValue)
        }

        /// The ``HookedStore`` the cache uses (see ``withCache(_:configure:hooked:_:)``).
        func hooked() throws -> HookedStore { try #require(store as? HookedStore) }

        /// `pairs` as header fields, with a `Date` of the clock's time first.
        func dated(_ pairs: [(String, String)]) -> HTTPFields {
            var fields = HTTPFields()
            fields.append(HTTPField(name: .date, value: HTTPDate.format(clock.now())))
            for (name, value) in pairs { fields.append(HTTPField(name: HTTPField.Name(name)!, value: value)) }
            return fields
        }

        func advance(_ seconds: Int) { clock.advance(by: .seconds(seconds)) }

        /// Answers `method` requests with `replies` in order (the last repeating), each dated when it is sent.
        func script(
            method: HTTPRequest.Method = .get, _ replies: [(status: HTTPResponse.Status, fields: [(String, String)], body: String)]
        ) {
            final class Position: Sendable { let next = Mutex(0) }
            let position = Position()
            origin.script(ConditionalStoreScenarioTests.url, method: method) { _, _ in
                let reply = replies[position.next.withLock { index in
                    defer { index = min(index + 1, replies.count - 1) }
                    return index
                }]
                return .init(status: reply.status, headerFields: dated(reply.fields), body: reply.body)
            }
        }

        /// The requests the origin received, in order.
        var received: [HTTPRequest] { origin.requests.map(\.request) }
    }

    /// ``withScenarioCache(_:configure:wrapping:_:)`` with the scenario's ``Setup``; `hooked`, over a
    /// ``HookedStore`` (and store calls bounded by a minute, since hooks run other work inside them).
    func withCache(
        _ kind: StoreUnderTest,
        configure: (inout CachedNetworking.Configuration) -> Void = { _ in },
        hooked: Bool = false,
        _ body: (Setup) async throws -> Void
    ) async throws {
        let setUp: (inout CachedNetworking.Configuration) -> Void = { configuration in
            if hooked { configuration.storeTimeout = .seconds(60) }
            configure(&configuration)
        }
        let wrapping: (any CacheStore) -> any CacheStore = { hooked ? HookedStore(base: $0) : $0 }
        try await withScenarioCache(kind, configure: setUp, wrapping: wrapping) { cache, origin, clock in
            try await body(
                Setup(cache: cache, origin: origin, clock: clock, store: cache.store.store, configuration: cache.configuration))
        }
    }

    // MARK: - Client conditionals (RFC 9111 §4.3.2)

    @Test(
        "RFC 9111 §4.3.2: a fresh stored response answers If-None-Match itself: 304 on a weak match or *, else the full response",
        arguments: StoreUnderTest.allCases)
    func test_RFC9111_4_3_2_freshIfNoneMatch(_ kind: StoreUnderTest) async throws {
        try await withCache(kind) { s in
            s.origin.script(Self.url, replies: [
                .init(headerFields: s.dated([
                    ("Cache-Control", "max-age=600"), ("ETag", "\"v1\""), ("Content-Type", "text/plain"),
                    ("Content-Location", "/doc.txt"), ("Vary", "Accept-Language"), ("Expires", "Thu, 01 Jan 2099 00:00:00 GMT"),
                    ("X-Extra", "x"),
                ]), body: "full body"),
            ])
            #expect(try await s.run().source == .network)
            s.advance(5)

            for condition in ["\"v1\"", "W/\"v1\"", "\"other\", W/\"v1\"", "*"] {
                let answer = try await s.run([("If-None-Match", condition)])
                #expect(answer.status == .notModified, "\(condition)")
                #expect(answer.source == .cache, "\(condition)")
                #expect(answer.body.readableBytes == 0, "\(condition)")
                #expect(answer.cacheStatus.hit, "\(condition)")
                let names = Set(answer.headerFields.map(\.name.canonicalName))
                #expect(
                    names == ["date", "cache-control", "etag", "content-location", "vary", "expires", "age", "cache-status"],
                    "\(condition): \(names)")
                #expect(answer.headerFields[.age] == "5")
                #expect(answer.headerFields[.eTag] == "\"v1\"")
            }
            for condition in ["\"v2\"", "\"V1\"", "v1"] {
                let answer = try await s.run([("If-None-Match", condition)])
                #expect(answer.status == .ok, "\(condition)")
                #expect(answer.source == .cache, "\(condition)")
                #expect(String(buffer: answer.body) == "full body")
                #expect(answer.headerFields[.contentType] == "text/plain")
            }
            // A HEAD is answered the same way, from its own stored response.
            s.origin.script(Self.url, method: .head, replies: [
                .init(headerFields: s.dated([("Cache-Control", "max-age=600"), ("ETag", "\"v1\"")])),
            ])
            #expect(try await s.run(method: .head).source == .network)
            let head = try await s.run([("If-None-Match", "\"v1\"")], method: .head)
            #expect(head.status == .notModified && head.source == .cache)
            // One GET and one HEAD reached the origin, neither of them conditional.
            #expect(s.origin.requestCount(for: Self.url) == 2)
            #expect(s.received.allSatisfy { $0.headerFields[.ifNoneMatch] == nil })
        }
    }

    @Test(
        "RFC 9111 §4.3.2: If-Modified-Since is evaluated against Last-Modified, or Date without it; If-None-Match wins; an invalid date is ignored",
        arguments: StoreUnderTest.allCases)
    func test_RFC9111_4_3_2_freshIfModifiedSince(_ kind: StoreUnderTest) async throws {
        try await withCache(kind) { s in
            let modified = "Sun, 31 Dec 2023 00:00:00 GMT"
            s.origin.script(Self.url, replies: [
                .init(headerFields: s.dated([("Cache-Control", "max-age=600"), ("ETag", "\"v1\""), ("Last-Modified", modified)]),
                      body: "tagged"),
            ])
            _ = try await s.run()
            #expect(try await s.run([("If-Modified-Since", modified)]).status == .notModified)
            #expect(try await s.run([("If-Modified-Since", "Mon, 01 Jan 2024 00:00:00 GMT")]).status == .notModified)
            #expect(try await s.run([("If-Modified-Since", "Sat, 30 Dec 2023 23:59:59 GMT")]).status == .ok)
            // Not an HTTP-date: ignored, so the full response.
            let invalid = try await s.run([("If-Modified-Since", "Mon, 01 Jan 2024 00:00:00 UTC")])
            #expect(invalid.status == .ok && String(buffer: invalid.body) == "tagged")
            // RFC 9110 §13.2.2: with If-None-Match, If-Modified-Since is not evaluated.
            let both = try await s.run([("If-None-Match", "\"v0\""), ("If-Modified-Since", "Mon, 01 Jan 2024 00:00:00 GMT")])
            #expect(both.status == .ok && both.source == .cache)
            // A 304 without ETag carries Last-Modified; with one, not.
            let notModified = try await s.run([("If-Modified-Since", modified)])
            #expect(notModified.headerFields[.lastModified] == nil)
            #expect(s.origin.requestCount(for: Self.url) == 1)
        }
        try await withCache(kind) { s in
            // No Last-Modified: the stored Date is the modification date (RFC 9111 §4.3.2).
            let date = HTTPDate.format(s.clock.now())
            s.origin.script(Self.url, replies: [.init(headerFields: s.dated([("Cache-Control", "max-age=600")]), body: "dated")])
            _ = try await s.run()
            let answer = try await s.run([("If-Modified-Since", date)])
            #expect(answer.status == .notModified)
            #expect(answer.headerFields[.date] == date)
            #expect(try await s.run([("If-Modified-Since", HTTPDate.format(s.clock.now() - 1))]).status == .ok)
            #expect(s.origin.requestCount(for: Self.url) == 1)
        }
    }

    @Test(
        "RFC 9111 §4.3.2: a stale stored response is validated with the cache's own validators, then the client's condition is answered",
        arguments: StoreUnderTest.allCases)
    func test_RFC9111_4_3_2_staleValidatedWithOwnValidators(_ kind: StoreUnderTest) async throws {
        try await withCache(kind) { s in
            s.origin.script(Self.url) { request, _ in
                if request.headerFields[.ifNoneMatch] == "\"v1\"" {
                    return .init(status: .notModified, headerFields: s.dated([("Cache-Control", "max-age=60"), ("ETag", "\"v1\"")]))
                }
                return .init(headerFields: s.dated([("Cache-Control", "max-age=60"), ("ETag", "\"v1\"")]), body: "v1 body")
            }
            _ = try await s.run()
            s.advance(61)
            // The client holds v1: the cache validates its own v1, the origin confirms it, the client gets 304.
            let current = try await s.run([("If-None-Match", "\"v1\"")])
            #expect(current.status == .notModified)
            #expect(current.source == .revalidated)
            #expect(current.body.readableBytes == 0)
            #expect(s.received.last?.headerFields[.ifNoneMatch] == "\"v1\"")
            s.advance(61)
            // The client holds v0: the origin is asked about the cache's v1 (not the client's v0); the client
            // gets the full, revalidated response.
            let outdated = try await s.run([("If-None-Match", "\"v0\"")])
            #expect(outdated.status == .ok)
            #expect(outdated.source == .revalidated)
            #expect(String(buffer: outdated.body) == "v1 body")
            #expect(s.received.last?.headerFields[.ifNoneMatch] == "\"v1\"")
            #expect(s.origin.requestCount(for: Self.url) == 3)
            // Freshened by the validations: a hit now.
            #expect(try await s.run([("If-None-Match", "\"v1\"")]).source == .cache)
        }
        try await withCache(kind) { s in
            // The origin has moved on: the new response replaces the stored one and the condition is evaluated
            // against it.
            s.script([
                (.ok, [("Cache-Control", "max-age=60"), ("ETag", "\"v1\"")], "v1 body"),
                (.ok, [("Cache-Control", "max-age=60"), ("ETag", "\"v2\"")], "v2 body"),
            ])
            _ = try await s.run()
            s.advance(61)
            let changed = try await s.run([("If-None-Match", "\"v1\"")])
            #expect(changed.status == .ok)
            #expect(String(buffer: changed.body) == "v2 body")
            #expect(changed.cacheStatus.stored)
            #expect(s.received.last?.headerFields[.ifNoneMatch] == "\"v1\"")
            let now = try await s.run([("If-None-Match", "\"v2\"")])
            #expect(now.status == .notModified && now.source == .cache)
            #expect(s.origin.requestCount(for: Self.url) == 2)
        }
    }

    @Test(
        "RFC 9111 §4.3.2: with nothing stored, the client's conditional goes to the origin as it is; a 304 is passed on, a 200 stored",
        arguments: StoreUnderTest.allCases)
    func test_RFC9111_4_3_2_noStoredResponseForwarded(_ kind: StoreUnderTest) async throws {
        try await withCache(kind) { s in
            s.origin.script(Self.url) { request, _ in
                if request.headerFields[.ifNoneMatch] == "\"v1\"" {
                    return .init(status: .notModified, headerFields: s.dated([("Cache-Control", "max-age=60"), ("ETag", "\"v1\"")]))
                }
                return .init(headerFields: s.dated([("Cache-Control", "max-age=60"), ("ETag", "\"v1\"")]), body: "v1 body")
            }
            let passed = try await s.run([("If-None-Match", "\"v1\"")])
            #expect(passed.status == .notModified)
            #expect(passed.source == .network)
            #expect(passed.cacheStatus.forward == .uriMiss)
            #expect(!passed.cacheStatus.stored)
            #expect(s.received.last?.headerFields[.ifNoneMatch] == "\"v1\"")
            // The origin's 200 to another client's condition is stored…
            let full = try await s.run([("If-None-Match", "\"v0\"")])
            #expect(full.status == .ok && full.cacheStatus.stored)
            #expect(s.received.last?.headerFields[.ifNoneMatch] == "\"v0\"")
            // …and answers the next ones.
            #expect(try await s.run([("If-None-Match", "\"v1\"")]).status == .notModified)
            #expect(try await s.run().source == .cache)
            #expect(s.origin.requestCount(for: Self.url) == 2)
        }
    }

    @Test(
        "RFC 9111 §4.3.2: If-Match and If-Unmodified-Since are not evaluated: forwarded as they are",
        arguments: StoreUnderTest.allCases)
    func test_RFC9111_4_3_2_originConditionsForwarded(_ kind: StoreUnderTest) async throws {
        try await withCache(kind) { s in
            s.script([(.ok, [("Cache-Control", "max-age=600"), ("ETag", "\"v1\"")], "v1 body")])
            _ = try await s.run()
            for (name, value) in [
                ("If-Match", "\"v1\""), ("If-Unmodified-Since", "Mon, 01 Jan 2024 00:00:00 GMT"),
            ] {
                let answer = try await s.run([(name, value), ("If-None-Match", "\"v1\"")])
                #expect(answer.source == .network, "\(name)")
                #expect(answer.cacheStatus.forward == .bypass, "\(name)")
                #expect(s.received.last?.headerFields[HTTPField.Name(name)!] == value)
                #expect(s.received.last?.headerFields[.ifNoneMatch] == "\"v1\"")
            }
            #expect(s.origin.requestCount(for: Self.url) == 3)
        }
    }

    // MARK: - Updates of stored responses

    @Test(
        "RFC 9111 §3.2, §4.3.4: a 304 replaces the stored header fields it carries, but not Content-Length, and the body is kept",
        arguments: StoreUnderTest.allCases)
    func test_RFC9111_3_2_notModifiedUpdatesFields(_ kind: StoreUnderTest) async throws {
        try await withCache(kind) { s in
            s.origin.script(Self.url) { request, _ in
                if request.headerFields[.ifNoneMatch] == "\"v1\"" {
                    return .init(status: .notModified, headerFields: s.dated([
                        ("Cache-Control", "max-age=600"), ("ETag", "\"v1\""), ("X-Version", "2"), ("Content-Length", "0"),
                    ]))
                }
                return .init(headerFields: s.dated([
                    ("Cache-Control", "max-age=60"), ("ETag", "\"v1\""), ("X-Version", "1"), ("X-Kept", "k"),
                    ("Content-Length", "4"),
                ]), body: "body")
            }
            _ = try await s.run()
            s.advance(61)
            let validated = try await s.run()
            #expect(validated.source == .revalidated)
            #expect(validated.headerFields[.cacheControl] == "max-age=600")
            #expect(validated.headerFields[HTTPField.Name("X-Version")!] == "2")

            // What is stored now, as another process reads it: the updated fields, the body, no refetch.
            s.advance(100)
            let stored = try await s.sibling().run(s.request())
            #expect(stored.source == .cache)
            #expect(String(buffer: stored.body) == "body")
            #expect(stored.headerFields[values: HTTPField.Name("X-Version")!] == ["2"])
            #expect(stored.headerFields[HTTPField.Name("X-Kept")!] == "k")
            #expect(stored.headerFields[values: .contentLength] == ["4"])
            #expect(stored.headerFields[values: .cacheControl] == ["max-age=600"])
            #expect(stored.headerFields[.age] == "100")
            #expect(s.origin.requestCount(for: Self.url) == 2)
        }
    }

    @Test(
        "RFC 9111 §4.3.5: a HEAD response that agrees with the stored GET updates its header fields; one that differs marks it stale",
        arguments: StoreUnderTest.allCases)
    func test_RFC9111_4_3_5_headUpdatesStoredGet(_ kind: StoreUnderTest) async throws {
        try await withCache(kind) { s in
            s.script([
                (.ok, [("Cache-Control", "max-age=60"), ("ETag", "\"v1\""), ("X-Version", "1"), ("Content-Length", "4")], "body"),
                (.ok, [("Cache-Control", "max-age=60"), ("ETag", "\"v2\"")], "new body"),
            ])
            s.script(method: .head, [
                (.ok, [("Cache-Control", "max-age=600"), ("ETag", "\"v1\""), ("X-Version", "2"), ("Content-Length", "4")], ""),
                (.ok, [("Cache-Control", "max-age=600"), ("ETag", "\"v2\"")], ""),
            ])
            _ = try await s.run()
            s.advance(50)
            #expect(try await s.run(method: .head).source == .network)
            // The stored GET now has the HEAD response's fields and times: fresh for 600 s from the HEAD.
            s.advance(500)
            let updated = try await s.run()
            #expect(updated.source == .cache)
            #expect(String(buffer: updated.body) == "body")
            #expect(updated.headerFields[HTTPField.Name("X-Version")!] == "2")
            #expect(updated.headerFields[.cacheControl] == "max-age=600")
            #expect(updated.headerFields[.age] == "500")
            #expect(s.origin.requests.filter { $0.request.method == .get }.count == 1)

            // A HEAD response with another ETag: the stored GET is considered stale (not removed), so the next GET
            // validates it with its own validator, and the origin's new response replaces it.
            s.advance(200)
            #expect(try await s.run(method: .head).source == .network)
            let refetched = try await s.run()
            #expect(refetched.source == .network)
            #expect(refetched.cacheStatus.forward == .stale)
            #expect(s.received.last?.headerFields[.ifNoneMatch] == "\"v1\"")
            #expect(String(buffer: refetched.body) == "new body")
        }
    }

    @Test(
        "RFC 9111 §4.3.5: a HEAD response with Content-Length: 0 marks the stored GET stale and leaves its Content-Length and body",
        arguments: StoreUnderTest.allCases)
    func test_RFC9111_4_3_5_headZeroLengthMarksStale(_ kind: StoreUnderTest) async throws {
        try await withCache(kind) { s in
            s.script([
                (.ok, [("Cache-Control", "max-age=600"), ("ETag", "\"v1\""), ("Content-Length", "4")], "body"),
                (.notModified, [("Cache-Control", "max-age=600"), ("ETag", "\"v1\"")], ""),
            ])
            s.script(method: .head, [
                (.ok, [("Cache-Control", "max-age=600"), ("ETag", "\"v1\""), ("Content-Length", "0"), ("X-Head", "1")], "")
            ])
            _ = try await s.run()
            s.advance(10)
            #expect(try await s.run(method: .head).source == .network)
            // Fresh by its own lifetime, but stale now: validated, not served as it is, and not updated by the HEAD.
            let validated = try await s.run()
            #expect(validated.source == .revalidated)
            #expect(s.received.last?.headerFields[.ifNoneMatch] == "\"v1\"")
            #expect(String(buffer: validated.body) == "body")
            #expect(validated.headerFields[.contentLength] == "4")
            #expect(validated.headerFields[HTTPField.Name("X-Head")!] == nil)
            // The 304 made it fresh again.
            let hit = try await s.run()
            #expect(hit.source == .cache)
            #expect(hit.headerFields[.contentLength] == "4")
            #expect(String(buffer: hit.body) == "body")
            #expect(s.origin.requests.filter { $0.request.method == .get }.count == 2)
        }
    }

    @Test(
        "RFC 9111 §4.3.5: a GET response stored while a HEAD response updates the stored one is not overwritten",
        arguments: StoreUnderTest.allCases)
    func test_RFC9111_4_3_5_headUpdateKeepsNewerGet(_ kind: StoreUnderTest) async throws {
        try await withCache(kind, hooked: true) { s in
            s.script([
                (.ok, [("Cache-Control", "max-age=60"), ("ETag", "\"v1\""), ("Content-Length", "4")], "body"),
                (.ok, [("Cache-Control", "max-age=600"), ("ETag", "\"v2\""), ("Content-Length", "8")], "new body"),
            ])
            s.script(method: .head, [
                (.ok, [("Cache-Control", "max-age=600"), ("ETag", "\"v1\""), ("X-Version", "2"), ("Content-Length", "4")], "")
            ])
            _ = try await s.run()
            s.advance(10)
            // Once the HEAD response's update has read the stored GET (which it agrees with), another process
            // stores a newer GET response.
            let getKey = s.storeKey()
            let sibling = s.sibling()
            let request = s.request()
            let stored = Gate()
            try s.hooked().hook(after: { operation, keys in
                guard operation == .get, keys == [getKey], !stored.isOpen else { return }
                stored.open()
                _ = try? await sibling.run(request, policy: .reloadIgnoringLocalCacheData)
            })
            #expect(try await s.run(method: .head).source == .network)
            #expect(stored.isOpen)
            // The update was not written over it: the newer response is served, as it was stored.
            let answer = try await s.run()
            #expect(answer.source == .cache)
            #expect(String(buffer: answer.body) == "new body")
            #expect(answer.headerFields[.eTag] == "\"v2\"")
            #expect(answer.headerFields[HTTPField.Name("X-Version")!] == nil)
            #expect(s.origin.requests.filter { $0.request.method == .get }.count == 2)
        }
    }

    // MARK: - Variants

    @Test(
        "RFC 9111 §4.1: the variants of one URL are bounded, the least recently used evicted",
        arguments: StoreUnderTest.allCases)
    func test_RFC9111_4_1_variantsBounded(_ kind: StoreUnderTest) async throws {
        try await withCache(kind, configure: { $0.maximumVariantsPerURL = 3 }) { s in
            s.origin.script(Self.url) { request, _ in
                .init(
                    headerFields: s.dated([("Cache-Control", "max-age=3600"), ("Vary", "Accept-Language")]),
                    body: request.headerFields[.acceptLanguage] ?? "none")
            }
            func get(_ language: String) async throws -> CachedResponse {
                let answer = try await s.run([("Accept-Language", language)])
                #expect(String(buffer: answer.body) == language)
                // A hit records its use in the background: done before the next request reads the index.
                await s.cache.waitForBackgroundRefreshes()
                return answer
            }
            for language in ["a", "b", "c"] { #expect(try await get(language).source == .network) }
            s.advance(61)
            // "a" used a minute later: now the most recently used.
            #expect(try await get("a").source == .cache)
            // A fourth variant evicts the least recently used, "b".
            #expect(try await get("d").source == .network)
            #expect(try await get("a").source == .cache)
            #expect(try await get("c").source == .cache)
            #expect(try await get("d").source == .cache)
            let evicted = try await get("b")
            #expect(evicted.source == .network)
            #expect(evicted.cacheStatus.forward == .varyMiss)
            // Storing "b" again evicted "a": "c" was recorded as used (its last use was a minute old) after "a".
            #expect(try await get("a").source == .network)
            #expect(s.origin.requestCount(for: Self.url) == 6)
        }
    }

    @Test(
        "RFC 9111 §4.1: a hit on a variant answers without waiting for its use to be written to the Vary index",
        arguments: StoreUnderTest.allCases)
    func test_RFC9111_4_1_variantUseWrittenInBackground(_ kind: StoreUnderTest) async throws {
        try await withCache(kind, configure: { $0.maximumVariantsPerURL = 2 }, hooked: true) { s in
            s.origin.script(Self.url) { request, _ in
                .init(
                    headerFields: s.dated([("Cache-Control", "max-age=3600"), ("Vary", "Accept-Language")]),
                    body: request.headerFields[.acceptLanguage] ?? "none")
            }
            #expect(try await s.run([("Accept-Language", "a")]).source == .network)
            #expect(try await s.run([("Accept-Language", "b")]).source == .network)
            s.advance(61)
            // The index write that records the use of "a" (a minute old) reaches the store and is held there.
            let indexKey = s.storeKey()
            let reached = Gate()
            let released = Gate()
            try s.hooked().hook(before: { operation, keys in
                guard operation == .set, keys == [indexKey] else { return }
                reached.open()
                await released.wait()
            })
            let answered = Gate()
            let hit = Task {
                defer { answered.open() }
                return try await s.run([("Accept-Language", "a")])
            }
            await reached.wait()
            #expect(await eventually { answered.isOpen }, "the hit waited for the index write")
            released.open()
            let answer = try await hit.value
            #expect(answer.source == .cache)
            #expect(String(buffer: answer.body) == "a")
            await s.cache.waitForBackgroundRefreshes()
            // The write recorded the use: "b" is now the least recently used, and a third variant evicts it.
            #expect(try await s.run([("Accept-Language", "c")]).source == .network)
            #expect(try await s.run([("Accept-Language", "a")]).source == .cache)
            #expect(try await s.run([("Accept-Language", "b")]).cacheStatus.forward == .varyMiss)
        }
    }

    @Test(
        "RFC 9111 §4.1: a variant's use is not written over a Vary index replaced since the hit read it",
        arguments: StoreUnderTest.allCases)
    func test_RFC9111_4_1_variantUseKeepsReplacedIndex(_ kind: StoreUnderTest) async throws {
        try await withCache(kind, hooked: true) { s in
            // The origin varies on Accept-Language, and on Accept-Encoding for requests that carry it.
            s.origin.script(Self.url) { request, _ in
                if let encoding = request.headerFields[.acceptEncoding] {
                    return .init(
                        headerFields: s.dated([("Cache-Control", "max-age=3600"), ("Vary", "Accept-Encoding")]),
                        body: encoding)
                }
                return .init(
                    headerFields: s.dated([("Cache-Control", "max-age=3600"), ("Vary", "Accept-Language")]),
                    body: request.headerFields[.acceptLanguage] ?? "none")
            }
            #expect(try await s.run([("Accept-Language", "a")]).source == .network)
            s.advance(61)
            // As the hit reads its variant, another process stores a response that varies on other fields: a new
            // index, with a new nonce, replaces the one the hit read.
            let indexKey = s.storeKey()
            let sibling = s.sibling()
            let encoded = s.request([("Accept-Encoding", "gzip")])
            let replaced = Gate()
            let hooked = try s.hooked()
            hooked.hook(before: { operation, keys in
                guard operation == .get, keys.first?.hasPrefix(indexKey + "#v:") == true, !replaced.isOpen else { return }
                replaced.open()
                _ = try? await sibling.run(encoded)
            })
            let before = hooked.calls.count
            let hit = try await s.run([("Accept-Language", "a")])
            #expect(replaced.isOpen)
            #expect(hit.source == .cache)
            #expect(String(buffer: hit.body) == "a")
            await s.cache.waitForBackgroundRefreshes()
            // The background work read the index again (after the hit's read), found another nonce and wrote nothing.
            let since = hooked.calls.dropFirst(before)
            #expect(since.filter { $0 == HookedStore.Call(operation: .get, keys: [indexKey]) }.count == 2)
            #expect(!since.contains { $0.operation == .set })
            // The new index stands: its variant is a hit.
            let answer = try await s.run([("Accept-Encoding", "gzip")])
            #expect(answer.source == .cache)
            #expect(String(buffer: answer.body) == "gzip")
            #expect(s.origin.requestCount(for: Self.url) == 2)
        }
    }

    @Test(
        "RFC 9110 §8.4.1.3: x-gzip in Accept-Encoding selects the variant stored for gzip",
        arguments: StoreUnderTest.allCases)
    func test_RFC9110_8_4_1_3_xGzipIsGzip(_ kind: StoreUnderTest) async throws {
        try await withCache(kind) { s in
            s.origin.script(Self.url) { request, _ in
                .init(
                    headerFields: s.dated([("Cache-Control", "max-age=600"), ("Vary", "Accept-Encoding")]),
                    body: request.headerFields[.acceptEncoding] ?? "none")
            }
            #expect(try await s.run([("Accept-Encoding", "gzip, br")]).source == .network)
            let alias = try await s.run([("Accept-Encoding", "br, x-gzip")])
            #expect(alias.source == .cache)
            #expect(String(buffer: alias.body) == "gzip, br")
            #expect(try await s.run([("Accept-Encoding", "x-compress")]).source == .network)
            #expect(try await s.run([("Accept-Encoding", "compress")]).source == .cache)
            #expect(s.origin.requestCount(for: Self.url) == 2)
        }
    }
}
