// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "cached",
    products: [
        .executable(name: "cached-server", targets: ["cached-server"]),
        .library(name: "RESP", targets: ["RESP"]),
        .library(name: "CacheCore", targets: ["CacheCore"]),
        .library(name: "CacheServer", targets: ["CacheServer"]),
        .library(name: "CachedNetworking", targets: ["CachedNetworking"]),
        .library(name: "CachedNetworkingRedis", targets: ["CachedNetworkingRedis"]),
        .library(name: "CachedNetworkingAsyncHTTPClient", targets: ["CachedNetworkingAsyncHTTPClient"]),
        .library(name: "CachedNetworkingTesting", targets: ["CachedNetworkingTesting"]),
        .library(name: "CachedNetworkingOpenAPI", targets: ["CachedNetworkingOpenAPI"]),
        .executable(name: "cached-fetch", targets: ["cached-fetch"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-system.git", from: "1.8.1"),
        .package(url: "https://github.com/apple/swift-openapi-runtime.git", from: "1.13.4"),
        .package(url: "https://github.com/apple/swift-distributed-tracing.git", from: "1.7.3"),
        // Only for the OpenAPI middleware's tests: the transport a generated client is usually given.
        .package(url: "https://github.com/swift-server/swift-openapi-async-http-client.git", from: "1.5.0"),
    ],
    targets: [
        // RESP wire format: request parsing, reply encoding, and a reply decoder for clients.
        .target(
            name: "RESP",
            dependencies: [.product(name: "NIOCore", package: "swift-nio")]
        ),
        // The storage engine: keyspace, expiry, memory accounting. No networking.
        // Processor hints (prefetch) that Swift has no spelling for.
        .target(name: "CMemoryHints"),
        .target(
            name: "CacheCore",
            dependencies: ["CJemalloc", "CMemoryHints", .product(name: "SystemPackage", package: "swift-system")]
        ),
        // epoll and the processor's spin-wait hint, which Swift's Glibc module does not offer, for the event
        // loops' busy polling.
        .target(name: "CBusyPoll"),
        // pthread_setname_np, which Swift's Glibc module does not offer: threads named as `top -H` shows them.
        .target(name: "CThreadName"),
        // INCRBYFLOAT's long double arithmetic and formatting, as Redis does them.
        .target(name: "CFloatText"),
        // OpenSSL (Debian: libssl-dev): the macros Swift cannot call, wrapped, and a connection's encrypted bytes
        // kept in memory buffers.
        .target(name: "CTLS", linkerSettings: [.linkedLibrary("ssl"), .linkedLibrary("crypto")]),
        // TLS over OpenSSL without I/O: contexts from Redis's tls-* settings, and connections that take and give
        // encrypted bytes. For the server's TLS port and the SDK's rediss:// connections.
        .target(name: "CachedTLS", dependencies: ["CTLS"]),
        // The RESP server as a library: command table, handlers, NIO pipeline, config.
        .target(
            name: "CacheServer",
            dependencies: [
                "RESP", "CacheCore", "CBusyPoll", "CThreadName", "CFloatText", "CachedTLS",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
        // The daemon executable: flags, logging, signals.
        .executableTarget(
            name: "cached-server",
            dependencies: [
                "CacheServer",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
        // jemalloc, the system allocator library (Debian: libjemalloc-dev): entries with a TTL live in an
        // arena of their own, so that memory freed by expiry goes back to the system.
        .systemLibrary(
            name: "CJemalloc",
            pkgConfig: "jemalloc",
            providers: [.apt(["libjemalloc-dev"])]
        ),
        // hiredis, the system C client library (Debian: libhiredis-dev).
        .systemLibrary(
            name: "CHiredis",
            pkgConfig: "hiredis",
            providers: [.apt(["libhiredis-dev"])]
        ),
        // HTTP caching rules (RFC 9111 for a shared cache, RFC 5861, RFC 9211): pure functions, no I/O.
        .target(
            name: "HTTPCaching",
            dependencies: [.product(name: "HTTPTypes", package: "swift-http-types")]
        ),
        // The SDK's core: a shared HTTP response cache (the facade, the RFC 9111 rules, the store and transport
        // protocols, the memory store, the fail-open wrapper, the URLSession transport). No system library, no
        // HTTP client of its own.
        .target(
            name: "CachedNetworking",
            dependencies: [
                "HTTPCaching",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "HTTPTypesFoundation", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]
        ),
        // The SDK's network stores: cached-server or Redis (and Redis Cluster) over hiredis, TLS, the near cache.
        .target(
            name: "CachedNetworkingRedis",
            dependencies: [
                "CachedNetworking", "CHiredis", "CThreadName", "CachedTLS", "RESP",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // The SDK's AsyncHTTPClient transport.
        .target(
            name: "CachedNetworkingAsyncHTTPClient",
            dependencies: [
                "CachedNetworking",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        // The SDK as a middleware for clients made by swift-openapi-generator: their requests go through the cache,
        // and the cache's origin fetches through the rest of the client's middlewares and its transport.
        .target(
            name: "CachedNetworkingOpenAPI",
            dependencies: [
                "CachedNetworking",
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        // In-memory fakes of the SDK's transport and store, for users' own tests.
        .target(
            name: "CachedNetworkingTesting",
            dependencies: [
                "CachedNetworking",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        // Fetch a URL through the SDK from a shell.
        .executableTarget(
            name: "cached-fetch",
            dependencies: [
                "CachedNetworking", "CachedNetworkingRedis", "CachedNetworkingAsyncHTTPClient",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        // Helpers the live test targets share (test targets cannot import each other): starting cached-server and
        // redis-server on free loopback ports, stopping, killing and restarting them, running programs with a
        // timeout. Not a product.
        .target(name: "CachedTestSupport"),
        // A local HTTP origin for the live tests (scripted answers, request counts, delays), and the reading of
        // `cached-fetch --repeat`'s lines. Not a product.
        .target(
            name: "CachedOriginSupport",
            dependencies: [
                "CachedTestSupport",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        // The CacheStore contract as checks (swift-testing expectations) that the store suites of several test
        // targets run against their stores. Not a product.
        .target(
            name: "CachedStoreContract",
            dependencies: ["CachedNetworking", .product(name: "NIOCore", package: "swift-nio")]
        ),
        // Fuzzing (docs/architecture.md, "Hardening"): the properties each libFuzzer target checks, shared with a test that replays
        // the corpus, and one executable per target. A plain build gives those executables a main that says how to
        // build them; `make fuzz` builds them with -sanitize=fuzzer,address -D FUZZING.
        .target(
            name: "FuzzChecks",
            dependencies: [
                "RESP", "CacheCore", "CacheServer",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(name: "fuzz-request", dependencies: ["FuzzChecks"], path: "Tests/Fuzz/Targets/fuzz-request"),
        .executableTarget(name: "fuzz-reply", dependencies: ["FuzzChecks"], path: "Tests/Fuzz/Targets/fuzz-reply"),
        .executableTarget(name: "fuzz-commands", dependencies: ["FuzzChecks"], path: "Tests/Fuzz/Targets/fuzz-commands"),
        .testTarget(
            name: "FuzzCorpusTests",
            dependencies: ["FuzzChecks"],
            path: "Tests/Fuzz/CorpusTests"
        ),
        .testTarget(
            name: "HTTPCachingTests",
            dependencies: ["HTTPCaching", .product(name: "HTTPTypes", package: "swift-http-types")]
        ),
        .testTarget(
            name: "CachedNetworkingTests",
            dependencies: [
                "CachedNetworking", "CachedNetworkingRedis", "CachedNetworkingAsyncHTTPClient", "CachedNetworkingTesting",
                "HTTPCaching", "CachedTestSupport", "CachedStoreContract", "CachedOriginSupport",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
            ]
        ),
        // The OpenAPI middleware with a generated client (generated once from the target's openapi.yaml, the
        // sources committed: no build plugin) against a local origin.
        .testTarget(
            name: "CachedNetworkingOpenAPITests",
            dependencies: [
                "CachedNetworkingOpenAPI", "CachedNetworking", "CachedNetworkingTesting", "CachedOriginSupport",
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "OpenAPIAsyncHTTPClient", package: "swift-openapi-async-http-client"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            exclude: ["openapi.yaml", "openapi-generator-config.yaml"]
        ),
        // The SDK on a real Redis Cluster (3 masters, 3 replicas on loopback): slow, so `make test` skips it and
        // `make test-cluster` runs it.
        .testTarget(
            name: "ClusterTests",
            dependencies: [
                "CachedNetworking", "CachedNetworkingRedis", "CachedNetworkingAsyncHTTPClient", "CachedNetworkingTesting",
                "CachedTestSupport", "CachedStoreContract", "CachedOriginSupport",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "RESPTests",
            dependencies: [
                "RESP",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOTestUtils", package: "swift-nio"),
            ]
        ),
        .testTarget(name: "CacheCoreTests", dependencies: ["CacheCore"]),
        .testTarget(name: "CachedTLSTests", dependencies: ["CachedTLS", "CachedTestSupport"]),
        .testTarget(
            name: "CacheServerTests",
            dependencies: [
                "CacheServer", "RESP", "CacheCore", "CachedTestSupport", "CBusyPoll",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "IntegrationTests",
            dependencies: ["RESP", "CHiredis", "CachedTestSupport", .product(name: "NIOCore", package: "swift-nio")],
            exclude: ["Python"],
            resources: [.copy("Corpus")]
        ),
    ]
)
