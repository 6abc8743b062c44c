import CachedStoreContract
import CachedTestSupport
import Foundation
import NIOCore
import Synchronization
import Testing

@testable import CachedNetworking
@testable import CachedNetworkingRedis

/// The near-cache scenarios against `redis-server`.
@Suite("near cache, redis-server")
struct NearCacheRedisTests {
    @Test("near-cache scenario", arguments: NearCacheScenario.portable + NearCacheScenario.redisOnly)
    func scenario(_ scenario: NearCacheScenario) async throws {
        try await scenario.run(NearCacheScenarios(kind: .redis))
    }
}

/// The same scenarios against `cached-server`.
@Suite("near cache, cached-server")
struct NearCacheCachedServerTests {
    @Test("near-cache scenario", arguments: NearCacheScenario.portable)
    func scenario(_ scenario: NearCacheScenario) async throws {
        try await scenario.run(NearCacheScenarios(kind: .cached))
    }
}

/// One scenario of ``NearCacheScenarios``, as a test argument.
struct NearCacheScenario: Sendable, CustomTestStringConvertible {
    let testDescription: String
    let run: @Sendable (NearCacheScenarios) async throws -> Void

    /// Scenarios for any server with client-side caching.
    static let portable: [NearCacheScenario] = [
        .init("an overwrite or a removal through one store reaches another store's near cache") {
            try await $0.overwritesReachAnotherStore()
        },
        .init("broadcast mode: writes under the prefix reach the near cache; other keys are not kept") {
            try await $0.broadcastMode()
        },
        .init("a store's own writes, removals and increments are seen at once through its near cache") {
            try await $0.ownWritesAreSeenAtOnce()
        },
        .init("a near-cache entry never outlives the key's TTL on the server") { try await $0.entriesDoNotOutliveTheKey() },
        .init("under concurrent writes and reads the near caches end with the last value written") {
            try await $0.concurrentWritesConverge()
        },
        .init("killing the server flushes the near cache; once restarted, it tracks and fills again") {
            try await $0.killedAndRestarted()
        },
        .init("the invalidation connection killed on the server: the near cache is flushed and tracks again") {
            try await $0.subscriberKilledOnTheServer()
        },
        .init("a data connection closed by the server: what it read is dropped within the health check") {
            try await $0.dataConnectionKilledOnTheServer()
        },
        .init("a server's flush message empties the near cache") { try await $0.flushEmptiesTheNearCache() },
        .init("cached-fetch processes serving from their near caches switch to an overwritten response") {
            try await $0.processesSeeAnOverwrite(broadcast: false)
        },
        .init("cached-fetch processes in broadcast mode switch to an overwritten response") {
            try await $0.processesSeeAnOverwrite(broadcast: true)
        },
    ]

    /// Scenarios that configure the server as only redis-server can be (`rename-command`), or read its
    /// `CLIENT LIST`.
    static let redisOnly: [NearCacheScenario] = [
        .init("a server that refuses client-side caching: one warning, and the store works without a near cache") {
            try await $0.serverWithoutTracking()
        },
        .init("without a near cache nothing changes: no subscriber, no tracking") { try await $0.nearCacheIsOptional() },
        .init("a user whose ACL refuses CLIENT, or the invalidation channel: one warning, and no near cache") {
            try await $0.aclRefusesTracking()
        },
    ]

    init(_ description: String, _ run: @escaping @Sendable (NearCacheScenarios) async throws -> Void) {
        self.testDescription = description
        self.run = run
    }
}

/// RESPStore's near cache against a live server of one kind: stores in one process that share the server, each
/// with its own near cache, kept coherent by the server's invalidation messages. Each scenario starts its own
/// server. The suites below run them against `redis-server` and `cached-server`.
struct NearCacheScenarios {
    let kind: ServerProcess.Kind
    func overwritesReachAnotherStore() async throws {
        let server = try await startTrackingServer(kind)
        let metrics = TestMetrics()
        let reader = nearCacheStore(port: server.port, metrics: metrics)
        let writer = nearCacheStore(port: server.port)
        try await reader.waitUntilFilling()
        try await writer.waitUntilFilling()
        let key = "near:\(UUID().uuidString)"
        var report = LatencyReport("\(kind), default mode, another store")
        var current: ByteBuffer? = ByteBuffer(string: "v0")
        try await writer.set(key, to: current!, ttl: .seconds(60))
        for round in 1...15 {
            #expect(try await reader.readUntilNearHit(key) == current)
            let start: ContinuousClock.Instant
            if round % 5 == 0 {
                #expect(try await writer.remove([key]) == 1)
                start = ContinuousClock.now
                let gone = try await timeUntilGone(current, key: key, from: reader, since: start)
                #expect(gone != nil, "round \(round): the removal never reached the near cache")
                if let gone { report.record(gone) }
                current = ByteBuffer(string: "v\(round)")
                try await writer.set(key, to: current!, ttl: .seconds(60))
            } else {
                let next = ByteBuffer(string: "v\(round)")
                try await writer.set(key, to: next, ttl: .seconds(60))
                start = ContinuousClock.now
                let gone = try await timeUntilGone(current, key: key, from: reader, since: start)
                #expect(gone != nil, "round \(round): the overwrite never reached the near cache")
                if let gone { report.record(gone) }
                #expect(try await reader.get(key) == next)
                current = next
            }
        }
        report.check()
        #expect(metrics.value(CachedNetworkingMetrics.nearCacheHits) >= 15)
        #expect(metrics.value(CachedNetworkingMetrics.nearCacheMisses) >= 15)
        #expect(metrics.value(CachedNetworkingMetrics.nearCacheInvalidations, [("reason", "server")]) >= 15)
        #expect(metrics.value(CachedNetworkingMetrics.nearCacheInvalidations, [("reason", "disconnect")]) == 0)
        await reader.shutdown()
        await writer.shutdown()
        _ = try await offThread { server.stop() }
    }

    func broadcastMode() async throws {
        let server = try await startTrackingServer(kind)
        let prefix = "bcast-\(UUID().uuidString):"
        let reader = nearCacheStore(port: server.port, mode: .broadcast(prefixes: [prefix]), noLoop: true)
        let writer = plainStore(port: server.port)
        try await reader.waitUntilFilling()
        let key = prefix + "item"
        let outside = "outside-\(UUID().uuidString)"
        try await writer.set(outside, to: ByteBuffer(string: "x"), ttl: .seconds(60))
        for _ in 0..<3 { #expect(try await reader.get(outside)?.text == "x") }
        #expect(reader.near.hits == 0, "a key outside the prefix was kept: \(reader.near)")

        var report = LatencyReport("\(kind), broadcast mode, another store")
        var current = ByteBuffer(string: "b0")
        try await writer.set(key, to: current, ttl: .seconds(60))
        for round in 1...10 {
            #expect(try await reader.readUntilNearHit(key) == current)
            let next = ByteBuffer(string: "b\(round)")
            try await writer.set(key, to: next, ttl: .seconds(60))
            let start = ContinuousClock.now
            let gone = try await timeUntilGone(current, key: key, from: reader, since: start)
            #expect(gone != nil, "round \(round): the overwrite never reached the near cache")
            if let gone { report.record(gone) }
            current = next
        }
        report.check()

        // In broadcast mode a key under the prefix is invalidated even if this store never read it since: a
        // write the reader made itself (NOLOOP spares it the message) is dropped locally at once.
        try await reader.set(key, to: ByteBuffer(string: "own"), ttl: .seconds(60))
        #expect(try await reader.get(key)?.text == "own")
        await reader.shutdown()
        await writer.shutdown()
        _ = try await offThread { server.stop() }
    }

    func ownWritesAreSeenAtOnce() async throws {
        let server = try await startTrackingServer(kind)
        let store = nearCacheStore(port: server.port)
        try await store.waitUntilFilling()
        let key = "own:\(UUID().uuidString)"
        try await store.set(key, to: ByteBuffer(string: "one"), ttl: .seconds(60))
        #expect(try await store.readUntilNearHit(key)?.text == "one")
        try await store.set(key, to: ByteBuffer(string: "two"), ttl: .seconds(60))
        #expect(try await store.get(key)?.text == "two")
        #expect(try await store.readUntilNearHit(key)?.text == "two")
        #expect(try await store.remove([key]) == 1)
        #expect(try await store.get(key) == nil)

        let counter = "own-counter:\(UUID().uuidString)"
        #expect(try await store.increment(counter) == 1)
        #expect(try await store.readUntilNearHit(counter)?.text == "1")
        #expect(try await store.increment(counter) == 2)
        #expect(try await store.get(counter)?.text == "2")

        #expect(try await store.setIfAbsent(key, to: ByteBuffer(string: "three"), ttl: .seconds(60)))
        #expect(try await store.readUntilNearHit(key)?.text == "three")
        #expect(try await store.get([key, counter, "own-missing"]).map { $0?.text } == ["three", "2", nil])
        await store.shutdown()
        _ = try await offThread { server.stop() }
    }

    func entriesDoNotOutliveTheKey() async throws {
        let server = try await startTrackingServer(kind)
        let store = nearCacheStore(port: server.port)
        let writer = plainStore(port: server.port)
        try await store.waitUntilFilling()
        let key = "ttl:\(UUID().uuidString)"
        let ttl = Duration.milliseconds(1000)
        try await writer.set(key, to: ByteBuffer(string: "brief"), ttl: ttl)
        // The server's expiry is before this instant plus the TTL.
        let expiresBy = ContinuousClock.now + ttl
        #expect(try await store.readUntilNearHit(key)?.text == "brief")
        // Every read that started at or after the expiry finds nothing, whether or not the server has sent an
        // invalidation for the expired key yet.
        var lastSeen: ContinuousClock.Instant?
        while ContinuousClock.now < expiresBy + .milliseconds(200) {
            let started = ContinuousClock.now
            if try await store.get(key) != nil { lastSeen = started }
            try await Task.sleep(for: .milliseconds(2))
        }
        #expect(lastSeen != nil)
        // Servers keep time in milliseconds and expire a key once their clock is past its expiry (Redis: "the
        // expire error is from 0 to 1 milliseconds"), so a read up to a millisecond or two later may still find it.
        let serverResolution = Duration.milliseconds(2)
        if let lastSeen {
            #expect(lastSeen < expiresBy + serverResolution, "served \(lastSeen - expiresBy) after the key expired")
        }
        #expect(try await store.get(key) == nil)
        await store.shutdown()
        await writer.shutdown()
        _ = try await offThread { server.stop() }
    }

    func concurrentWritesConverge() async throws {
        let server = try await startTrackingServer(kind)
        let readers = (0..<2).map { _ in nearCacheStore(port: server.port, poolSize: 3) }
        let writer = plainStore(port: server.port)
        for reader in readers { try await reader.waitUntilFilling() }
        let keys = (0..<4).map { "race-\($0):\(UUID().uuidString)" }
        let done = StopFlag()
        let finals = try await withThrowingTaskGroup(of: [String].self) { group in
            // Readers race the writer: replies overtaken by invalidations must not be kept.
            for reader in readers {
                for _ in 0..<3 {
                    group.addTask {
                        while !done.isSet {
                            _ = try await reader.get(keys.randomElement()!)
                            _ = try await reader.get(keys)
                            // A near-cache hit does not suspend: let the writer have its turn on the two
                            // cooperative threads.
                            await Task.yield()
                        }
                        return []
                    }
                }
            }
            group.addTask {
                var last = [String](repeating: "", count: keys.count)
                for i in 0..<400 {
                    let index = i % keys.count
                    last[index] = "value-\(i)"
                    try await writer.set(keys[index], to: ByteBuffer(string: last[index]), ttl: .seconds(60))
                }
                done.set()
                return last
            }
            var finals: [String] = []
            for try await result in group where !result.isEmpty { finals = result }
            return finals
        }
        for reader in readers {
            for (key, final) in zip(keys, finals) {
                let start = ContinuousClock.now
                let wrong = try await timeUntilSettled(on: final, key: key, store: reader)
                #expect(wrong == nil, "\(key) still read \(wrong ?? "") \(ContinuousClock.now - start) after the last write")
                // And it stays: the value is now served, from memory, unchanged.
                for _ in 0..<5 { #expect(try await reader.get(key)?.text == final) }
            }
            #expect(reader.near.fills > 0)
        }
        print("near cache race, \(kind): \(readers.map { "\($0.near)" })")
        for reader in readers { await reader.shutdown() }
        await writer.shutdown()
        _ = try await offThread { server.stop() }
    }

    /// Polls until `key` reads `final` five times in a row; nil then, or the last wrong value after the deadline.
    private func timeUntilSettled(on final: String, key: String, store: RESPStore) async throws -> String? {
        let start = ContinuousClock.now
        var streak = 0
        var last: String?
        while ContinuousClock.now - start < roundDeadline {
            last = try await store.get(key)?.text
            streak = last == final ? streak + 1 : 0
            if streak == 5 { return nil }
            try await Task.sleep(for: .milliseconds(1))
        }
        return last ?? "nil"
    }

    func killedAndRestarted() async throws {
        let server = try await startTrackingServer(kind)
        let metrics = TestMetrics()
        let store = nearCacheStore(port: server.port, metrics: metrics)
        try await store.waitUntilFilling()
        let key = "outage:\(UUID().uuidString)"
        try await store.set(key, to: ByteBuffer(string: "before"), ttl: .seconds(60))
        #expect(try await store.readUntilNearHit(key)?.text == "before")
        #expect(store.near.entries == 1)

        try await offThread { server.kill() }
        let lostAt = ContinuousClock.now
        while store.near.isFilling || store.near.entries > 0 {
            try #require(ContinuousClock.now - lostAt < .seconds(5), "the near cache was not flushed: \(store.near)")
            try await Task.sleep(for: .milliseconds(2))
        }
        print("near cache, \(kind): flushed \(ContinuousClock.now - lostAt) after the server was killed")
        #expect(metrics.value(CachedNetworkingMetrics.nearCacheInvalidations, [("reason", "disconnect")]) >= 1)
        // Nothing is served from memory while the server is away.
        let error = await storeError { () async throws(CacheStoreError) in _ = try await store.get(key) }
        #expect(error?.kind == .unreachable || error?.kind == .timeout)

        try await offThread { try server.restart() }
        // The pool's other connection still holds a socket to the killed server: the first call through it
        // fails, and the next reconnects.
        try await store.waitUntilReachable()
        let writer = plainStore(port: server.port)
        try await writer.set(key, to: ByteBuffer(string: "after"), ttl: .seconds(60))
        try await store.waitUntilFilling()
        #expect(try await store.readUntilNearHit(key)?.text == "after")
        // Tracking points at the new subscriber: a write is seen again.
        try await writer.set(key, to: ByteBuffer(string: "later"), ttl: .seconds(60))
        let start = ContinuousClock.now
        let gone = try await timeUntilGone(ByteBuffer(string: "after"), key: key, from: store, since: start)
        #expect(gone != nil, "no invalidation after the restart")
        #expect(try await store.get(key)?.text == "later")
        await store.shutdown()
        await writer.shutdown()
        _ = try await offThread { server.stop() }
    }

    func subscriberKilledOnTheServer() async throws {
        let server = try await startTrackingServer(kind)
        let store = nearCacheStore(port: server.port)
        let writer = plainStore(port: server.port)
        try await store.waitUntilFilling()
        let key = "killed-sub:\(UUID().uuidString)"
        try await writer.set(key, to: ByteBuffer(string: "one"), ttl: .seconds(60))
        #expect(try await store.readUntilNearHit(key)?.text == "one")
        try await killClients(of: server, type: "pubsub")
        // The subscriber notices and flushes; the data connections still track for the dead id until it is back,
        // and must then track for the new one, or the write below would never be seen.
        let killedAt = ContinuousClock.now
        while store.near.entries > 0 {
            try #require(ContinuousClock.now - killedAt < roundDeadline, "not flushed: \(store.near)")
            try await Task.sleep(for: .milliseconds(1))
        }
        try await store.waitUntilFilling()
        try await writer.set(key, to: ByteBuffer(string: "two"), ttl: .seconds(60))
        #expect(try await store.readUntilNearHit(key)?.text == "two")
        try await writer.set(key, to: ByteBuffer(string: "three"), ttl: .seconds(60))
        let gone = try await timeUntilGone(ByteBuffer(string: "two"), key: key, from: store, since: .now)
        #expect(gone != nil, "no invalidation after the subscriber came back")
        await store.shutdown()
        await writer.shutdown()
        _ = try await offThread { server.stop() }
    }

    func dataConnectionKilledOnTheServer() async throws {
        let server = try await startTrackingServer(kind)
        let store = nearCacheStore(port: server.port, poolSize: 1)
        try await store.waitUntilFilling()
        let key = "killed-data:\(UUID().uuidString)"
        try await store.set(key, to: ByteBuffer(string: "one"), ttl: .seconds(60))
        #expect(try await store.readUntilNearHit(key)?.text == "one")
        // The server forgets the keys a closed connection read: a write would never be announced. The idle
        // connection notices at its next health check (500 ms in these tests) and the near cache is flushed.
        try await killClients(of: server, type: "normal")
        let killedAt = ContinuousClock.now
        let writer = plainStore(port: server.port)
        try await writer.set(key, to: ByteBuffer(string: "two"), ttl: .seconds(60))
        let gone = try await timeUntilGone(ByteBuffer(string: "one"), key: key, from: store, since: killedAt)
        #expect(gone != nil, "the near cache kept serving a key its closed connection had read")
        print("near cache, \(kind): a killed data connection noticed \(gone.map { "\($0)" } ?? "never") after the kill")
        #expect(try await store.get(key)?.text == "two")
        await store.shutdown()
        await writer.shutdown()
        _ = try await offThread { server.stop() }
    }

    func flushEmptiesTheNearCache() async throws {
        let server = try await startTrackingServer(kind)
        let store = nearCacheStore(port: server.port)
        try await store.waitUntilFilling()
        for i in 0..<5 { try await store.set("flush:\(i)", to: ByteBuffer(string: "v"), ttl: .seconds(60)) }
        for i in 0..<5 { _ = try await store.readUntilNearHit("flush:\(i)") }
        #expect(store.near.entries == 5)
        _ = try await offThread { try ExternalProgram.redisCli.run(["-p", String(server.port), "FLUSHALL"]) }
        let start = ContinuousClock.now
        while store.near.entries > 0 {
            try #require(ContinuousClock.now - start < roundDeadline, "not flushed: \(store.near)")
            try await Task.sleep(for: .milliseconds(1))
        }
        #expect(try await store.get("flush:0") == nil)
        #expect(store.near.isFilling)
        await store.shutdown()
        _ = try await offThread { server.stop() }
    }

    func serverWithoutTracking() async throws {
        // A real redis-server whose CLIENT command is disabled answers as a server without tracking does.
        let server = try await offThread { try ServerProcess.start(kind, arguments: ["--rename-command", "CLIENT", ""]) }
        let log = CapturedLog()
        let store = nearCacheStore(port: server.port, logger: log.logger)
        let key = "no-tracking:\(UUID().uuidString)"
        let deadline = ContinuousClock.now + .seconds(10)
        while store.near.disabledReason == nil, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(5))
        }
        #expect(store.near.disabledReason?.contains("unknown command") == true, "\(store.near)")
        try await store.set(key, to: ByteBuffer(string: "v"), ttl: .seconds(60))
        for _ in 0..<5 { #expect(try await store.get(key)?.text == "v") }
        #expect(try await store.get([key]).map { $0?.text } == ["v"])
        #expect(store.near.hits == 0 && store.near.entries == 0 && !store.near.isFilling)
        let warnings = log.warnings.filter { $0.contains("near cache") }
        #expect(warnings.count == 1, "\(log.warnings)")
        await store.shutdown()
        _ = try await offThread { server.stop() }
    }

    func aclRefusesTracking() async throws {
        let server = try await offThread { try ServerProcess.start(kind) }
        // Without CLIENT; and, as Redis 7 gives a new user by default (acl-pubsub-default resetchannels), without
        // any pub/sub channel.
        for rule in [["noclient", "&*", "-client"], ["nochannels", "resetchannels"]] {
            let set = try await offThread {
                try ExternalProgram.redisCli.run(
                    ["-p", String(server.port), "ACL", "SETUSER", rule[0], "on", ">pw", "~*", "+@all"] + rule.dropFirst())
            }
            #expect(set.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines) == "OK", "\(set.summary)")
        }
        for user in ["noclient", "nochannels"] {
            let log = CapturedLog()
            let store = nearCacheStore(port: server.port, logger: log.logger, username: user, password: "pw")
            let deadline = ContinuousClock.now + .seconds(10)
            while store.near.disabledReason == nil, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(5))
            }
            #expect(store.near.disabledReason?.contains("NOPERM") == true, "\(user): \(store.near)")
            let key = "acl:\(user)"
            try await store.set(key, to: ByteBuffer(string: "v"), ttl: .seconds(60))
            for _ in 0..<3 { #expect(try await store.get(key)?.text == "v") }
            #expect(store.near.hits == 0 && store.near.entries == 0 && !store.near.isFilling, "\(user)")
            let warnings = log.warnings.filter { $0.contains("near cache") }
            #expect(warnings.count == 1, "\(user): \(log.warnings)")
            await store.shutdown()
        }
        _ = try await offThread { server.stop() }
    }

    func nearCacheIsOptional() async throws {
        let server = try await offThread { try ServerProcess.start(kind) }
        let store = plainStore(port: server.port)
        try await store.set("plain", to: ByteBuffer(string: "v"), ttl: .seconds(60))
        #expect(try await store.get("plain")?.text == "v")
        #expect(store.nearCacheStatistics == nil)
        let clients = try await offThread {
            try ExternalProgram.redisCli.run(["-p", String(server.port), "CLIENT", "LIST"])
        }
        #expect(!clients.standardOutput.contains("sub=1"), "\(clients.standardOutput)")
        #expect(!clients.standardOutput.contains("flags=t"), "\(clients.standardOutput)")
        await store.shutdown()
        _ = try await offThread { server.stop() }
    }
}

/// A flag that tasks poll to stop.
private final class StopFlag: Sendable {
    private let value = Atomic<Bool>(false)
    var isSet: Bool { value.load(ordering: .acquiring) }
    func set() { value.store(true, ordering: .releasing) }
}
