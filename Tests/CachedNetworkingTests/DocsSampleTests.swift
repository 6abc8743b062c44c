// The Swift samples of README.md and docs/: each is compiled in DocsSamples/ with the imports it shows (checked
// here), and run here when it can run without the internet (the testing sample's tests run as tests of their own).
import CachedNetworking
import CachedNetworkingTesting
import CachedOriginSupport
import CachedTestSupport
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPTypes
import Logging
import NIOCore
import Testing

@Suite("README.md sample")
struct ReadmeSampleTests {
    @Test("the sample's statements, run against a live cached-server and a local origin, answer as the comments say")
    func useTheSDK() async throws {
        let server = try await offThread { try ServerProcess.start(.cached) }
        let origin = try await OriginServer.start()
        origin.route("/items", reply: .init(headers: [("Cache-Control", "max-age=60")], body: #"[{"id":1,"name":"one"}]"#))
        let store = FailOpenStore(wrapping: try RESPStore(url: "redis://127.0.0.1:\(server.port)"))
        let transport = AsyncHTTPClientTransport()
        let cache = CachedNetworking(store: store, transport: transport)

        let request = origin.request("/items")
        let first = try await cache.run(request)
        let second = try await cache.run(request)

        #expect(first.source == .network)
        #expect(first.response.headerFields[.cacheStatus] == "cached; fwd=uri-miss; stored")
        #expect(second.source == .cache)
        #expect(second.response.headerFields[.cacheStatus]?.hasPrefix("cached; hit; ttl=") == true)
        #expect(second.text == #"[{"id":1,"name":"one"}]"#)
        #expect(origin.count("/items") == 1)
        try await transport.shutdown()
        await store.shutdown()
        await origin.stop()
    }
}

@Suite("The docs' Swift samples")
struct DocsSampleTests {
    /// The package's root directory.
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    @Test("every Swift sample of README.md and docs/ is compiled in DocsSamples/, with exactly the imports it shows")
    func everySampleIsCompiled() throws {
        let documents = try ["README.md"]
            + FileManager.default.contentsOfDirectory(atPath: Self.root.appendingPathComponent("docs").path)
            .filter { $0.hasSuffix(".md") }.sorted().map { "docs/\($0)" }
        let samplesDirectory = Self.root.appendingPathComponent("Tests/CachedNetworkingTests/DocsSamples")
        let sampleFiles = try FileManager.default.contentsOfDirectory(atPath: samplesDirectory.path)
            .filter { $0.hasSuffix(".swift") }.sorted()
            .map { name in
                SampleText(String(decoding: try Data(contentsOf: samplesDirectory.appendingPathComponent(name)), as: UTF8.self))
            }
        #expect(sampleFiles.count >= 5)
        var checked = 0
        for document in documents {
            let text = String(decoding: try Data(contentsOf: Self.root.appendingPathComponent(document)), as: UTF8.self)
            for (line, block) in SampleText.swiftBlocks(in: text) {
                checked += 1
                let sample = SampleText(block)
                #expect(!sample.imports.isEmpty, "\(document):\(line): a sample shows its imports")
                let home = sampleFiles.first { $0.imports == sample.imports && $0.contains(sample.body) }
                #expect(
                    home != nil,
                    """
                    \(document):\(line): no file of DocsSamples has this sample with the imports \(sample.imports.sorted()): \
                    \(sample.body.first ?? "")
                    """)
            }
        }
        #expect(checked >= 20)
    }

    @Test("the checker tells a sample from another and imports from imports")
    func checkerTellsSamplesApart() {
        let file = SampleText("import A\nimport B\n\nfunc f() {\n    let x = 1\n    let y = 2\n}\n")
        #expect(file.imports == ["import A", "import B"])
        #expect(file.contains(SampleText("import A\nlet x = 1\n  let y = 2").body))
        #expect(!file.contains(SampleText("let y = 2\nlet x = 1").body))
        #expect(SampleText("import A\nlet x = 1").imports != file.imports)
        let blocks = SampleText.swiftBlocks(in: "text\n```swift\nimport A\nf()\n```\n  ```swift\n  g()\n  ```\n")
        #expect(blocks.map(\.line) == [2, 6])
        #expect(blocks.map(\.text) == ["import A\nf()", "  g()"])
    }

    @Test("the store samples configure what they say")
    func storeSamples() async throws {
        let store = try respStoreSample()
        let shared = try failOpenStoreSample()
        #expect(store.configuration.host == "cache.internal")
        #expect(store.configuration.password == "s3cret")
        #expect(store.configuration.database == 2)
        #expect(store.configuration.commandTimeout == .milliseconds(500))
        #expect(shared.base.configuration.port == 6379)
        await store.shutdown()
        await shared.shutdown()
    }

    @Test("the TLS sample connects with the CA and the client certificate of its directory")
    func tlsSample() async throws {
        let certificates = try TestCertificates.shared()
        // cached-server requires a client certificate signed by the CA (tls-auth-clients yes).
        let (server, tlsPort) = try await offThread { try ServerProcess.startTLS(.cached, certificates: certificates) }
        let store = try makeTLSStore(url: "rediss://localhost:\(tlsPort)", certificates: certificates.directory.path)
        #expect(store.configuration.tls?.trustRoots == .file(certificates.caCertificate))
        #expect(store.configuration.tls?.certificateVerification == .fullVerification)
        try await store.set("tls-sample", to: ByteBuffer(string: "over TLS"), ttl: .seconds(60))
        #expect(try await store.get("tls-sample") == ByteBuffer(string: "over TLS"))
        await store.shutdown()
        _ = try await offThread { server.stop() }
    }

    @Test("the cluster samples configure what they say")
    func clusterSamples() async throws {
        let clustered = try clusterStoreSample()
        let configured = try clusterStore()
        #expect(clustered.configuration.seeds.map(\.description) == ["10.0.0.1:7000", "10.0.0.2:7000", "10.0.0.3:7000"])
        #expect(clustered.configuration.password == "s3cret")
        #expect(configured.configuration.username == "app")
        #expect(configured.configuration.seeds.count == 2)
        #expect(configured.configuration.poolSize == 4)
        #expect(configured.configuration.retryTimeout == .seconds(2))
        await clustered.shutdown()
        await configured.shutdown()
    }

    @Test("the near-cache sample keeps what it reads, against a live redis-server")
    func nearCacheSample() async throws {
        let server = try await offThread { try ServerProcess.start(.redis) }
        let store = try makeNearCachedStore(
            url: "redis://127.0.0.1:\(server.port)", logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() })
        #expect(store.configuration.nearCache?.maxBytes == 32 << 20)
        #expect(store.configuration.nearCache?.maxAge == .seconds(30))
        #expect(store.configuration.nearCache?.mode == .default)
        try await store.set("catalog:sample", to: ByteBuffer(string: "v"), ttl: .seconds(60))
        let deadline = ContinuousClock.now + .seconds(10)
        while store.nearCacheStatistics?.hits == 0, ContinuousClock.now < deadline {
            #expect(try await store.get("catalog:sample") == ByteBuffer(string: "v"))
        }
        #expect(store.nearCacheStatistics?.hits ?? 0 > 0)
        await store.shutdown()
        _ = try await offThread { server.stop() }
    }

    @Test("the cluster near-cache sample configures the cluster store's near cache")
    func clusterNearCacheSample() async throws {
        let store = try makeNearCachedClusterStore(
            url: "redis+cluster://10.0.0.1:7000,10.0.0.2:7000", logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() })
        #expect(store.configuration.nearCache == RESPStore.NearCache(maxBytes: 32 << 20, maxAge: .seconds(30)))
        #expect(store.configuration.description.contains("near cache 33554432 bytes"))
        #expect(store.nearCacheStatistics?.entries == 0)
        #expect(store.nearCacheStatistics?.isFilling == false)
        await store.shutdown()
    }

    @Test("the override sample matches what it says")
    func overrides() {
        let configuration = configureOverrides()
        let catalog = HTTPRequest(method: .get, scheme: "https", authority: "API.example.com:443", path: "/catalog/1")
        let json = HTTPRequest(method: .get, scheme: "https", authority: "other.example", path: "/a.json")
        let other = HTTPRequest(method: .get, scheme: "https", authority: "other.example", path: "/a")
        let internalPort = HTTPRequest(method: .get, scheme: "https", authority: "internal.example.com:8443", path: "/a")
        let internalDefault = HTTPRequest(method: .get, scheme: "https", authority: "internal.example.com", path: "/a")
        #expect(configuration.lifetimeOverrides.first { $0.matches(catalog) }?.lifetime == .seconds(300))
        #expect(configuration.lifetimeOverrides.first { $0.matches(internalPort) }?.lifetime == .seconds(60))
        #expect(configuration.lifetimeOverrides.first { $0.matches(json) }?.lifetime == .seconds(30))
        #expect(!configuration.lifetimeOverrides.contains { $0.matches(other) })
        #expect(!configuration.lifetimeOverrides.contains { $0.matches(internalDefault) })
    }

    @Test("the repository sample holds the items for 30 seconds on the cache's clock, and invalidates them")
    func repositorySample() async throws {
        let clock = ManualCacheClock()
        let transport = FakeHTTPTransport()
        transport.script("https://api.example.com/items", replies: [
            .init(headerFields: [.cacheControl: "max-age=60"], body: #"[{"id":1,"name":"one"}]"#),
            .init(headerFields: [.cacheControl: "max-age=60"], body: #"[{"id":1,"name":"one"},{"id":2,"name":"two"}]"#),
        ])
        var configuration = CachedNetworking.Configuration()
        configuration.clock = clock
        let cache = CachedNetworking(store: InMemoryCacheStore(clock: clock), transport: transport, configuration: configuration)
        let catalog = Catalog(cache: cache)
        #expect(try await catalog.allItems().map(\.name) == ["one"])
        clock.advance(by: .seconds(10))
        let held = try await catalog.itemsWithSource()
        #expect(held.source == .held)
        #expect(held.age == .seconds(10))
        clock.advance(by: .seconds(20))
        #expect(try await catalog.itemsWithSource().source == .cache)
        try await catalog.catalogChanged()
        #expect(try await catalog.allItems().count == 2)
        try await afterImport(cache)
        #expect(transport.requestCount(for: "https://api.example.com/items") == 2)
    }

    @Test("the async-source sample holds the rates for a minute")
    func ratesSample() async throws {
        let rates = makeRates(RatesClient())
        #expect(try await rates.value()["USD"] == 1.08)
        #expect(try await rates.read().source == .held)
    }

    @Test("the prefetch sample warns about what it could not store")
    func prefetchSample() async throws {
        let transport = FakeHTTPTransport()
        transport.script("https://api.example.com/items/1", replies: [.init(headerFields: [.cacheControl: "max-age=60"])])
        transport.script("https://api.example.com/items/2", replies: [.init(headerFields: [.cacheControl: "no-store"])])
        let cache = CachedNetworking(store: InMemoryCacheStore(), transport: transport)
        let logged = LogRecorder()
        await warmUp(cache, ids: [1, 2, 3], logger: Logger(label: "test") { _ in logged })
        #expect(logged.messages.map { $0.metadata["path"] } == ["/items/2", "/items/3"])
        #expect(logged.messages.map { $0.metadata["reason"] } == ["not storable", "transport: no scripted reply for GET https://api.example.com/items/3"])
    }

    @Test("the errors sample fetches in a task group and tells the origin's failures")
    func errorsSample() async throws {
        let transport = FakeHTTPTransport()
        transport.script("https://api.example.com/a", replies: [.init(body: "a")])
        let cache = CachedNetworking(store: InMemoryCacheStore(), transport: transport)
        let a = HTTPRequest(method: .get, scheme: "https", authority: "api.example.com", path: "/a")
        let b = HTTPRequest(method: .get, scheme: "https", authority: "api.example.com", path: "/b")
        #expect(try await fetchAll(cache, [a, a]).map(\.text) == ["a", "a"])
        do {
            _ = try await fetchAll(cache, [a, b])
            Issue.record("expected /b to fail")
        } catch {
            #expect(isOriginDown(error))
        }
        #expect(!isOriginDown(CancellationError()))
    }

    @Test("the naming sample maps the app's policy to the SDK's")
    func namingSample() {
        #expect(Storefront.sdkPolicy(for: .aggressive) == .returnCacheDataElseLoad)
        #expect(Storefront.sdkPolicy(for: .conservative) == .useProtocolCachePolicy)
    }
}

/// A Swift sample or a sample file, as the docs check reads it: its imports (the `import` and `#if canImport` lines
/// before anything else) and its other lines, each without the spaces around it, blank lines left out.
struct SampleText {
    var imports: Set<String> = []
    var body: [String] = []

    init(_ text: String) {
        var leading = true
        for rawLine in text.split(separator: "\n", omittingEmptySubsequences: false) {
            let line = rawLine.trimmingCharacters(in: .whitespaces)
            if line.isEmpty { continue }
            let importLike = line.hasPrefix("import ") || line.hasPrefix("#if canImport") || line == "#endif"
            if leading && importLike {
                imports.insert(line)
                continue
            }
            // A file's first comment lines come before its imports.
            if leading && line.hasPrefix("//") && imports.isEmpty { continue }
            leading = false
            body.append(line)
        }
    }

    /// Whether `lines` appear here one after another.
    func contains(_ lines: [String]) -> Bool {
        guard !lines.isEmpty, lines.count <= body.count else { return lines.isEmpty }
        return (0...(body.count - lines.count)).contains { start in
            body[start..<(start + lines.count)].elementsEqual(lines)
        }
    }

    /// The ```swift blocks of a Markdown text, with the line each starts on (its fence's).
    static func swiftBlocks(in markdown: String) -> [(line: Int, text: String)] {
        var blocks: [(line: Int, text: String)] = []
        var open: (line: Int, lines: [Substring])? = nil
        for (index, line) in markdown.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if var block = open {
                if trimmed == "```" {
                    blocks.append((block.line, block.lines.joined(separator: "\n")))
                    open = nil
                } else {
                    block.lines.append(line)
                    open = block
                }
            } else if trimmed == "```swift" {
                open = (index + 1, [])
            }
        }
        return blocks
    }
}
