// swift-tools-version: 6.1
// The SDK's benchmarks and the server's per-command allocations (ordo-one/benchmark), in a package of their own so
// that the main package does not depend on the benchmark tooling. Run them with `make bench-sdk`
// (docs/performance.md, "SDK benchmarks" and "Allocations per command").
import PackageDescription

let package = Package(
    name: "CachedBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "cached", path: ".."),
        // Only the malloc interposer (for the malloc metrics): the trait list replaces the default traits, so the
        // ARC runtime interposer and its package are left out.
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
    ],
    targets: [
        // Loopback sockets for the benchmarks' set-up.
        .target(name: "BenchmarkLoopback", path: "Benchmarks/BenchmarkLoopback"),
        .executableTarget(
            name: "CachedNetworkingBenchmarks",
            dependencies: [
                "BenchmarkLoopback",
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "CachedNetworking", package: "cached"),
                .product(name: "CachedNetworkingRedis", package: "cached"),
                .product(name: "CachedNetworkingAsyncHTTPClient", package: "cached"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            path: "Benchmarks/CachedNetworkingBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        // The server's per-command path in this process (CacheServer), for its allocation counts.
        .executableTarget(
            name: "CacheServerBenchmarks",
            dependencies: [
                "BenchmarkLoopback",
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "CacheServer", package: "cached"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Benchmarks/CacheServerBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
    ]
)
