import CachedStoreContract
import CachedTestSupport
import CoreMetrics
import Foundation
import Glibc
import Logging
import NIOCore
import Synchronization
import Testing

@testable import CachedNetworking
@testable import CachedNetworkingRedis

/// The bound on how long an invalidation may take to reach another store's near cache, for the median of the
/// measured rounds. Delivery is one message written by the server and one wake-up of the subscriber's thread:
/// well under a millisecond on an idle machine. The tests run on two loaded cores, where any single round can
/// lose tens of milliseconds to scheduling, so a round is only required to finish (within `roundDeadline`), and
/// the median, which a minority of such rounds cannot move, must stay within this bound.
let invalidationLatencyBound: Duration = .milliseconds(50)

/// How long one round may take before it counts as an invalidation that never came.
let roundDeadline: Duration = .seconds(5)

/// Starts a server of `kind` on a free port and checks that it supports client-side caching (`CLIENT TRACKING on`
/// on a fresh connection answers `+OK`); a server that does not fails the test with its answer.
func startTrackingServer(_ kind: ServerProcess.Kind, arguments: [String] = []) async throws -> ServerProcess {
    let server = try await offThread { try ServerProcess.start(kind, arguments: arguments) }
    let reply = try await offThread { try trackingProbe(port: server.port) }
    guard reply.hasPrefix("+") else {
        _ = try await offThread { server.stop() }
        throw TestEnvironmentError(
            "\(kind) does not support client-side caching: CLIENT TRACKING on answered \(reply.debugDescription)")
    }
    return server
}

/// The first line of the reply to `CLIENT TRACKING on` on a new connection to `port`.
private func trackingProbe(port: Int) throws -> String {
    let fd = try connectLoopback(port: port)
    defer { close(fd) }
    let command = Array("*3\r\n$6\r\nCLIENT\r\n$8\r\nTRACKING\r\n$2\r\non\r\n".utf8)
    guard write(fd, command, command.count) == command.count else { throw TestEnvironmentError("cannot write the probe") }
    var reply: [UInt8] = []
    var byte: UInt8 = 0
    while reply.count < 512, read(fd, &byte, 1) == 1 {
        if byte == 10 { break }
        if byte != 13 { reply.append(byte) }
    }
    return String(decoding: reply, as: UTF8.self)
}

/// `CLIENT KILL TYPE <type>` on `server` (redis-cli's own connection is spared), expecting one client killed.
func killClients(of server: ServerProcess, type: String, sourceLocation: SourceLocation = #_sourceLocation) async throws {
    let killed = try await offThread {
        try ExternalProgram.redisCli.run(["-p", String(server.port), "CLIENT", "KILL", "TYPE", type])
    }
    #expect(
        killed.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines) == "1", "\(killed.summary)",
        sourceLocation: sourceLocation)
}

/// A store on `port` with a near cache, settings for tests (short reconnect delays, generous timeouts); over TLS to
/// `localhost` with `tls`.
func nearCacheStore(
    port: Int,
    mode: RESPStore.NearCache.Mode = .default,
    noLoop: Bool = false,
    maxAge: Duration? = nil,
    maxBytes: Int = 4 << 20,
    poolSize: Int = 2,
    metrics: (any MetricsFactory)? = nil,
    logger: Logger = RESPStore.disabledLogger,
    username: String? = nil,
    password: String? = nil,
    tls: RESPStore.TLS? = nil
) -> RESPStore {
    var configuration = RESPStore.Configuration(
        host: tls == nil ? "127.0.0.1" : "localhost", port: port, username: username, password: password, tls: tls)
    configuration.poolSize = poolSize
    configuration.commandTimeout = .seconds(5)
    configuration.minReconnectDelay = .milliseconds(20)
    configuration.maxReconnectDelay = .milliseconds(200)
    var nearCache = RESPStore.NearCache(maxBytes: maxBytes, mode: mode, maxAge: maxAge, noLoop: noLoop)
    nearCache.healthCheckInterval = .milliseconds(500)
    configuration.nearCache = nearCache
    return RESPStore(configuration: configuration, logger: logger, metricsFactory: metrics ?? TestMetrics())
}

/// A store on `port` without a near cache (a plain writer); over TLS to `localhost` with `tls`.
func plainStore(port: Int, tls: RESPStore.TLS? = nil) -> RESPStore {
    var configuration = RESPStore.Configuration(host: tls == nil ? "127.0.0.1" : "localhost", port: port, tls: tls)
    configuration.commandTimeout = .seconds(5)
    return RESPStore(configuration: configuration)
}

extension RESPStore {
    /// The near cache's statistics (the store must have one).
    var near: NearCacheStatistics { nearCacheStatistics! }

    /// Waits until the near cache fills: subscribed, with tracking set up.
    func waitUntilFilling(timeout: Duration = .seconds(10), sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let deadline = ContinuousClock.now + timeout
        while !near.isFilling {
            guard ContinuousClock.now < deadline else {
                Issue.record("the near cache did not start filling within \(timeout): \(near)", sourceLocation: sourceLocation)
                throw TestEnvironmentError("near cache not filling")
            }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    /// Sends `PING` until the server answers (after an outage, each broken connection fails one call).
    func waitUntilReachable(timeout: Duration = .seconds(10)) async throws {
        let deadline = ContinuousClock.now + timeout
        while true {
            do throws(CacheStoreError) {
                try await ping()
                return
            } catch {
                guard ContinuousClock.now < deadline else { throw error }
                try await Task.sleep(for: .milliseconds(10))
            }
        }
    }

    /// Reads `key` until the near cache holds it (a hit), so that the next change must come by invalidation.
    func readUntilNearHit(_ key: String, sourceLocation: SourceLocation = #_sourceLocation) async throws -> ByteBuffer? {
        try await CachedStoreContract.readUntilNearHit(key, from: self, hits: { near.hits }, sourceLocation: sourceLocation)
    }
}

/// How long invalidations took, round by round, reported on standard output and checked against the bound.
struct LatencyReport {
    let name: String
    private(set) var rounds: [Duration] = []

    init(_ name: String) { self.name = name }

    mutating func record(_ duration: Duration) { rounds.append(duration) }

    var median: Duration {
        let sorted = rounds.sorted()
        return sorted.isEmpty ? .zero : sorted[sorted.count / 2]
    }

    var summary: String {
        let sorted = rounds.sorted()
        func ms(_ d: Duration) -> String { String(format: "%.2f ms", Double(d.components.attoseconds) / 1e15 + Double(d.components.seconds) * 1e3) }
        guard let first = sorted.first, let last = sorted.last else { return "\(name): no rounds" }
        return "\(name): \(sorted.count) rounds, min \(ms(first)), median \(ms(median)), max \(ms(last))"
    }

    /// Prints the summary and expects the median within ``invalidationLatencyBound``.
    func check(sourceLocation: SourceLocation = #_sourceLocation) {
        print("invalidation latency, \(summary)")
        #expect(!rounds.isEmpty, sourceLocation: sourceLocation)
        #expect(median <= invalidationLatencyBound, "\(summary)", sourceLocation: sourceLocation)
    }
}

/// Reads `key` through `store` every millisecond until it no longer returns `old`.
/// - Returns: the time from `since` (the write's acknowledgement) to the first read, started after it, that did
///   not return `old`; nil if that did not happen within ``roundDeadline``.
func timeUntilGone(
    _ old: ByteBuffer?, key: String, from store: RESPStore, since: ContinuousClock.Instant
) async throws -> Duration? {
    try await CachedStoreContract.timeUntilGone(old, key: key, from: store, since: since, deadline: roundDeadline)
}

/// A log handler that keeps messages at `minimumLevel` (warning unless told) and above, for assertions.
final class CapturedLog: Sendable {
    /// A message, with the logger's metadata and its own.
    struct Line: Sendable {
        var level: Logger.Level
        var message: String
        var metadata: Logger.Metadata
    }

    private let messages = Mutex<[Line]>([])
    let minimumLevel: Logger.Level

    init(minimumLevel: Logger.Level = .warning) { self.minimumLevel = minimumLevel }

    var lines: [Line] { messages.withLock { $0 } }

    /// Each message as text: its level, the message and the metadata.
    var warnings: [String] { lines.map { "\($0.level) \($0.message) \($0.metadata)" } }

    var logger: Logger {
        var logger = Logger(label: "test") { _ in Handler(log: self) }
        logger.logLevel = .trace
        return logger
    }

    struct Handler: LogHandler {
        let log: CapturedLog
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            guard event.level >= log.minimumLevel else { return }
            let merged = metadata.merging(event.metadata ?? [:]) { $1 }
            log.messages.withLock { $0.append(Line(level: event.level, message: "\(event.message)", metadata: merged)) }
        }
    }
}
