// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "cached",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "cached-server", targets: ["cached-server"]),
        .library(name: "RESP", targets: ["RESP"]),
        .library(name: "CacheCore", targets: ["CacheCore"]),
        .library(name: "CacheServer", targets: ["CacheServer"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
    ],
    targets: [
        // RESP wire format: request parsing, reply encoding, and a reply decoder for clients.
        .target(
            name: "RESP",
            dependencies: [.product(name: "NIOCore", package: "swift-nio")]
        ),
        // The storage engine: keyspace, expiry, memory accounting. No networking.
        .target(name: "CacheCore", dependencies: ["CJemalloc"]),
        // The RESP server as a library: command table, handlers, NIO pipeline, config.
        .target(
            name: "CacheServer",
            dependencies: [
                "RESP", "CacheCore",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
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
        .testTarget(
            name: "RESPTests",
            dependencies: [
                "RESP",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOTestUtils", package: "swift-nio"),
            ]
        ),
        .testTarget(name: "CacheCoreTests", dependencies: ["CacheCore"]),
        .testTarget(
            name: "CacheServerTests",
            dependencies: ["CacheServer", "RESP", "CacheCore", .product(name: "NIOCore", package: "swift-nio")]
        ),
        .testTarget(
            name: "IntegrationTests",
            dependencies: ["RESP", "CHiredis", .product(name: "NIOCore", package: "swift-nio")],
            exclude: ["Python"],
            resources: [.copy("Corpus")]
        ),
    ]
)
