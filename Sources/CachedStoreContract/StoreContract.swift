import CachedNetworking
import Foundation
import NIOCore
import Testing

/// What every ``CacheStore`` must do, as checks that any test target can run against its store: the memory store,
/// a `RESPStore` on `cached-server` and `redis-server`, a `RESPClusterStore` on a Redis Cluster. (Test targets
/// cannot import each other, so the contract lives here.)
///
/// ```swift
/// @Test(arguments: StoreRequirement.allCases)
/// func contract(_ requirement: StoreRequirement) async throws {
///     let store = ContractStore(store: MemoryStore(), prefix: "", advanceClock: nil)
///     try await requirement.check(store)
///     await store.store.shutdown()
/// }
/// ```
public enum StoreRequirement: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case getMissesThenHits = "get misses, then hits what set stored"
    case valuesAreBinarySafe = "values are binary-safe, empty and 1 MiB ones too"
    case keysAreComparedByteForByte = "keys are compared byte for byte"
    case setReplacesValueAndTTL = "set replaces the value and the TTL"
    case entriesExpireAfterTheirTTL = "entries expire after their TTL, not before"
    case setIfAbsentStoresOnlyOnce = "setIfAbsent stores only once, until the key expires"
    case getManyKeepsOrderAndGaps = "get of several keys keeps their order and gaps"
    case removeCountsKeysThatExisted = "remove counts the keys that existed"
    case incrementCountsFromZeroAndRejectsText = "increment counts from zero and rejects text"
    case concurrentCallsGiveExactResults = "200 concurrent tasks get exact results"
    case callsAfterShutdownFailAsClosed = "calls after shutdown fail as closed"

    public var testDescription: String { rawValue }

    /// Checks the requirement on `f`'s store, recording issues with `#expect`.
    public func check(_ f: ContractStore) async throws {
        switch self {
        case .getMissesThenHits: try await Self.getMissesThenHits(f)
        case .valuesAreBinarySafe: try await Self.valuesAreBinarySafe(f)
        case .keysAreComparedByteForByte: try await Self.keysAreComparedByteForByte(f)
        case .setReplacesValueAndTTL: try await Self.setReplacesValueAndTTL(f)
        case .entriesExpireAfterTheirTTL: try await Self.entriesExpireAfterTheirTTL(f)
        case .setIfAbsentStoresOnlyOnce: try await Self.setIfAbsentStoresOnlyOnce(f)
        case .getManyKeepsOrderAndGaps: try await Self.getManyKeepsOrderAndGaps(f)
        case .removeCountsKeysThatExisted: try await Self.removeCountsKeysThatExisted(f)
        case .incrementCountsFromZeroAndRejectsText: try await Self.incrementCountsFromZeroAndRejectsText(f)
        case .concurrentCallsGiveExactResults: try await Self.concurrentCallsGiveExactResults(f)
        case .callsAfterShutdownFailAsClosed: try await Self.callsAfterShutdownFailAsClosed(f)
        }
    }

    private static func getMissesThenHits(_ f: ContractStore) async throws {
        #expect(try await f.store.get(f.key("greeting")) == nil)
        try await f.store.set(f.key("greeting"), to: ByteBuffer(string: "hello"), ttl: nil)
        #expect(try await f.store.get(f.key("greeting"))?.text == "hello")
        #expect(try await f.store.get(f.key("other")) == nil)
    }

    private static func valuesAreBinarySafe(_ f: ContractStore) async throws {
        let awkward = ByteBuffer(bytes: [0, 13, 10, 0, 255, 36, 42, 13, 10, 13, 10, 0])
        try await f.store.set(f.key("awkward"), to: awkward, ttl: nil)
        #expect(try await f.store.get(f.key("awkward")) == awkward)

        try await f.store.set(f.key("empty"), to: ByteBuffer(), ttl: nil)
        #expect(try await f.store.get(f.key("empty")) == ByteBuffer())

        var bytes = [UInt8](repeating: 0, count: 1 << 20)
        for i in stride(from: 0, to: bytes.count - 1, by: 509) {
            bytes[i] = 13
            bytes[i + 1] = 10
        }
        for i in stride(from: 3, to: bytes.count, by: 257) { bytes[i] = UInt8(truncatingIfNeeded: i) }
        let large = ByteBuffer(bytes: bytes)
        try await f.store.set(f.key("large"), to: large, ttl: .seconds(60))
        let readBack = try await f.store.get(f.key("large"))
        #expect(readBack?.readableBytes == 1 << 20)
        #expect(readBack == large)
    }

    private static func keysAreComparedByteForByte(_ f: ContractStore) async throws {
        // Canonically equivalent, different bytes: Redis keeps them apart, so every store must.
        let composed = f.key("caf\u{E9}")
        let decomposed = f.key("cafe\u{301}")
        try await f.store.set(composed, to: ByteBuffer(string: "composed"), ttl: nil)
        #expect(try await f.store.get(decomposed) == nil)
        try await f.store.set(decomposed, to: ByteBuffer(string: "decomposed"), ttl: nil)
        #expect(try await f.store.get(composed)?.text == "composed")
        #expect(try await f.store.get(decomposed)?.text == "decomposed")

        let spaced = f.key("a key\r\nwith\0 bytes")
        try await f.store.set(spaced, to: ByteBuffer(string: "ok"), ttl: nil)
        #expect(try await f.store.get(spaced)?.text == "ok")
        #expect(try await f.store.get(f.key("a key")) == nil)
    }

    private static func setReplacesValueAndTTL(_ f: ContractStore) async throws {
        let key = f.key("k")
        try await f.store.set(key, to: ByteBuffer(string: "one"), ttl: nil)
        try await f.store.set(key, to: ByteBuffer(string: "two"), ttl: nil)
        #expect(try await f.store.get(key)?.text == "two")

        // A set without a TTL removes the earlier TTL.
        try await f.store.set(key, to: ByteBuffer(string: "short"), ttl: .milliseconds(150))
        try await f.store.set(key, to: ByteBuffer(string: "forever"), ttl: nil)
        try await f.pass(.milliseconds(400))
        #expect(try await f.store.get(key)?.text == "forever")

        // A set with a TTL gives a key that had none an expiry.
        try await f.store.set(key, to: ByteBuffer(string: "mortal"), ttl: .milliseconds(100))
        #expect(try await f.expires(key, after: .milliseconds(100)))
    }

    private static func entriesExpireAfterTheirTTL(_ f: ContractStore) async throws {
        let key = f.key("ttl")
        let start = ContinuousClock.now
        try await f.store.set(key, to: ByteBuffer(string: "v"), ttl: .milliseconds(200))
        let early = try await f.store.get(key)
        if f.controlsTime || ContinuousClock.now - start < .milliseconds(150) {
            #expect(early?.text == "v")
        }
        if let advance = f.advanceClock {
            advance(.milliseconds(199))
            #expect(try await f.store.get(key)?.text == "v")
        }
        #expect(try await f.expires(key, after: .milliseconds(200)))
        #expect(try await f.store.get([key]) == [nil])

        // A long TTL does not expire early.
        try await f.store.set(f.key("long"), to: ByteBuffer(string: "v"), ttl: .seconds(3600))
        try await f.pass(.milliseconds(250))
        #expect(try await f.store.get(f.key("long"))?.text == "v")
    }

    private static func setIfAbsentStoresOnlyOnce(_ f: ContractStore) async throws {
        let key = f.key("lock")
        #expect(try await f.store.setIfAbsent(key, to: ByteBuffer(string: "first"), ttl: .seconds(60)))
        #expect(try await f.store.setIfAbsent(key, to: ByteBuffer(string: "second"), ttl: .seconds(60)) == false)
        #expect(try await f.store.get(key)?.text == "first")

        // Its TTL applies, and once expired the key is free again.
        let brief = f.key("brief-lock")
        #expect(try await f.store.setIfAbsent(brief, to: ByteBuffer(string: "first"), ttl: .milliseconds(150)))
        #expect(try await f.expires(brief, after: .milliseconds(150)))
        #expect(try await f.store.setIfAbsent(brief, to: ByteBuffer(string: "third"), ttl: .seconds(60)))
        #expect(try await f.store.get(brief)?.text == "third")

        // A key stored by set counts as present.
        try await f.store.set(f.key("plain"), to: ByteBuffer(string: "x"), ttl: nil)
        #expect(try await f.store.setIfAbsent(f.key("plain"), to: ByteBuffer(string: "y"), ttl: .seconds(1)) == false)
        #expect(try await f.store.get(f.key("plain"))?.text == "x")
    }

    private static func getManyKeepsOrderAndGaps(_ f: ContractStore) async throws {
        try await f.store.set(f.key("a"), to: ByteBuffer(string: "A"), ttl: nil)
        try await f.store.set(f.key("c"), to: ByteBuffer(string: "C"), ttl: .seconds(60))
        let values = try await f.store.get([f.key("a"), f.key("b"), f.key("c"), f.key("a"), f.key("d")])
        #expect(values.map { $0?.text } == ["A", nil, "C", "A", nil])
        #expect(try await f.store.get([String]()) == [])
        #expect(try await f.store.get([f.key("nothing")]) == [nil])
    }

    private static func removeCountsKeysThatExisted(_ f: ContractStore) async throws {
        for name in ["a", "b", "c"] {
            try await f.store.set(f.key(name), to: ByteBuffer(string: name), ttl: nil)
        }
        #expect(try await f.store.remove([f.key("a"), f.key("missing"), f.key("b"), f.key("a")]) == 2)
        #expect(try await f.store.get([f.key("a"), f.key("b"), f.key("c")]).map { $0?.text } == [nil, nil, "c"])
        #expect(try await f.store.remove([f.key("a")]) == 0)
        #expect(try await f.store.remove([]) == 0)

        // An expired key is not counted.
        try await f.store.set(f.key("brief"), to: ByteBuffer(string: "x"), ttl: .milliseconds(100))
        #expect(try await f.expires(f.key("brief"), after: .milliseconds(100)))
        #expect(try await f.store.remove([f.key("brief"), f.key("c")]) == 1)
    }

    private static func incrementCountsFromZeroAndRejectsText(_ f: ContractStore) async throws {
        #expect(try await f.store.increment(f.key("n")) == 1)
        #expect(try await f.store.increment(f.key("n")) == 2)
        #expect(try await f.store.get(f.key("n"))?.text == "2")

        try await f.store.set(f.key("m"), to: ByteBuffer(string: "41"), ttl: nil)
        #expect(try await f.store.increment(f.key("m")) == 42)
        try await f.store.set(f.key("neg"), to: ByteBuffer(string: "-5"), ttl: nil)
        #expect(try await f.store.increment(f.key("neg")) == -4)

        for text in ["abc", "", " 1", "1.5", "9223372036854775808"] {
            try await f.store.set(f.key("t"), to: ByteBuffer(string: text), ttl: nil)
            let error = await storeError { () async throws(CacheStoreError) in _ = try await f.store.increment(f.key("t")) }
            #expect(error?.kind == .server, "INCR of \(text.debugDescription)")
            #expect(error?.message.contains("not an integer") == true, "\(String(describing: error))")
            #expect(try await f.store.get(f.key("t"))?.text == text)
        }

        try await f.store.set(f.key("max"), to: ByteBuffer(string: "9223372036854775807"), ttl: nil)
        let overflow = await storeError { () async throws(CacheStoreError) in _ = try await f.store.increment(f.key("max")) }
        #expect(overflow?.kind == .server)

        // INCR keeps the TTL: the key still expires.
        let start = ContinuousClock.now
        try await f.store.set(f.key("ttl"), to: ByteBuffer(string: "7"), ttl: .milliseconds(500))
        let incremented = try await f.store.increment(f.key("ttl"))
        if f.controlsTime || ContinuousClock.now - start < .milliseconds(400) {
            #expect(incremented == 8)
        }
        #expect(try await f.expires(f.key("ttl"), after: .milliseconds(500)))
    }

    private static func concurrentCallsGiveExactResults(_ f: ContractStore) async throws {
        let tasks = 200
        let rounds = 25  // two operations per round: 50 per task
        let shared = f.key("shared-counter")
        try await withThrowingTaskGroup(of: Void.self) { group in
            for t in 0..<tasks {
                group.addTask {
                    let own = f.key("task-\(t)")
                    for r in 0..<rounds {
                        let value = ByteBuffer(string: "\(t):\(r)")
                        try await f.store.set(own, to: value, ttl: .seconds(60))
                        _ = try await f.store.increment(shared)
                        if r % 5 == 4 {
                            let got = try await f.store.get(own)
                            #expect(got == value)
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(try await f.store.get(shared)?.text == String(tasks * rounds))
        let keys = (0..<tasks).map { f.key("task-\($0)") }
        let values = try await f.store.get(keys)
        #expect(values.map { $0?.text } == (0..<tasks).map { "\($0):\(rounds - 1)" })
    }

    private static func callsAfterShutdownFailAsClosed(_ f: ContractStore) async throws {
        try await f.store.set(f.key("k"), to: ByteBuffer(string: "v"), ttl: nil)
        await f.store.shutdown()
        let error = await storeError { () async throws(CacheStoreError) in _ = try await f.store.get(f.key("k")) }
        #expect(error?.kind == .closed)
        let setError = await storeError { () async throws(CacheStoreError) in
            try await f.store.set(f.key("k"), to: ByteBuffer(string: "v"), ttl: nil)
        }
        #expect(setError?.kind == .closed)
    }
}

/// A store under the contract, with a key prefix of its own (tests may share a server and run in parallel) and a
/// way to let time pass.
public struct ContractStore: Sendable {
    public let store: any CacheStore
    public let prefix: String
    /// Moves the store's clock; nil for stores on real time (networked ones).
    public let advanceClock: (@Sendable (Duration) -> Void)?

    /// - Parameters:
    ///   - store: the store; the caller shuts it down.
    ///   - prefix: put before every key the checks use.
    ///   - advanceClock: moves the store's clock by a duration; nil when the store runs on real time.
    public init(store: any CacheStore, prefix: String, advanceClock: (@Sendable (Duration) -> Void)?) {
        self.store = store
        self.prefix = prefix
        self.advanceClock = advanceClock
    }

    /// Whether the checks control the store's time (else they wait for real).
    public var controlsTime: Bool { advanceClock != nil }

    /// `name` with the store's prefix.
    public func key(_ name: String) -> String { prefix + name }

    /// True once `key` reads as missing; for a store on a controlled clock after moving it past `ttl`, else after
    /// polling real time (bounded generously: a loaded machine can stall a test for seconds, and the bound is
    /// only reached when the test fails anyway).
    public func expires(_ key: String, after ttl: Duration) async throws -> Bool {
        if let advanceClock {
            advanceClock(ttl + .milliseconds(1))
            return try await store.get(key) == nil
        }
        let deadline = ContinuousClock.now + ttl + .seconds(10)
        while ContinuousClock.now < deadline {
            if try await store.get(key) == nil { return true }
            try await Task.sleep(for: .milliseconds(20))
        }
        return false
    }

    /// Lets `duration` pass (on the store's clock, or for real).
    public func pass(_ duration: Duration) async throws {
        if let advanceClock { advanceClock(duration) } else { try await Task.sleep(for: duration) }
    }
}

/// The ``CacheStoreError`` `body` throws; records an issue (and returns nil) when it throws nothing.
@discardableResult
public func storeError(
    _ body: () async throws(CacheStoreError) -> Void, sourceLocation: SourceLocation = #_sourceLocation
) async -> CacheStoreError? {
    do {
        try await body()
        Issue.record("expected a CacheStoreError, but the call succeeded", sourceLocation: sourceLocation)
        return nil
    } catch {
        return error
    }
}

extension ByteBuffer {
    /// The readable bytes as a string (for comparisons in tests).
    public var text: String { String(buffer: self) }
}
