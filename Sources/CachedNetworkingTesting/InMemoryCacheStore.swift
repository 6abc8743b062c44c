public import CachedNetworking
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
public import NIOCore
import Synchronization

/// A ``CacheStore`` in process memory with TTLs on an injectable clock, and fault injection: the store to test
/// code that uses ``CachedNetworking`` without a server.
///
/// Entries expire when the clock passes their TTL (checked on access, as Redis does lazily), so a
/// ``ManualCacheClock`` shared with the cache moves both freshness and expiry. `increment` stores decimal
/// text, as Redis's `INCR` does.
///
/// ```swift
/// let store = InMemoryCacheStore(clock: clock)
/// store.inject(.init(operations: [.get], error: CacheStoreError(.timeout, "injected")))
/// ```
public final class InMemoryCacheStore: CacheStore {
    /// A store operation, for fault injection and counting.
    public struct Operation: Sendable, Hashable, CustomStringConvertible {
        enum Base: Sendable, Hashable { case get, set, setIfAbsent, remove, increment }
        let base: Base

        /// `get` of one key or of many.
        public static let get = Operation(base: .get)
        /// `set`.
        public static let set = Operation(base: .set)
        /// `setIfAbsent`.
        public static let setIfAbsent = Operation(base: .setIfAbsent)
        /// `remove`.
        public static let remove = Operation(base: .remove)
        /// `increment`.
        public static let increment = Operation(base: .increment)
        /// Every operation.
        public static let all: Set<Operation> = [.get, .set, .setIfAbsent, .remove, .increment]

        public var description: String {
            switch base {
            case .get: "get"
            case .set: "set"
            case .setIfAbsent: "setIfAbsent"
            case .remove: "remove"
            case .increment: "increment"
            }
        }
    }

    /// A failure to inject into matching operations.
    public struct Fault: Sendable {
        /// Which operations fail.
        public var operations: Set<Operation>
        /// The error they throw.
        public var error: CacheStoreError
        /// How many calls fail before the fault clears itself; nil for every call until ``removeAllFaults()``.
        public var count: Int?
        /// A wait before failing (real time, cancellable), to simulate a store that hangs.
        public var delay: Duration?

        /// A fault on `operations` throwing `error`, `count` times (nil: always), after `delay`.
        public init(
            operations: Set<Operation> = Operation.all,
            error: CacheStoreError = CacheStoreError(.unreachable, "injected fault"),
            count: Int? = nil,
            delay: Duration? = nil
        ) {
            self.operations = operations
            self.error = error
            self.count = count
            self.delay = delay
        }
    }

    private struct Entry {
        var value: ByteBuffer
        var expiresAt: Date?
    }

    private struct State {
        var entries: [String: Entry] = [:]
        var faults: [Fault] = []
        var counts: [Operation: Int] = [:]
        var closed = false
    }

    private let clock: any CacheClock
    private let state = Mutex(State())

    /// An empty store whose TTLs run on `clock`.
    public init(clock: any CacheClock = SystemCacheClock()) {
        self.clock = clock
    }

    // MARK: Inspection and faults

    /// Makes matching operations fail.
    public func inject(_ fault: Fault) {
        state.withLock { $0.faults.append(fault) }
    }

    /// Clears every injected fault.
    public func removeAllFaults() {
        state.withLock { $0.faults.removeAll() }
    }

    /// How many calls of `operation` were made (failed ones included).
    public func count(of operation: Operation) -> Int {
        state.withLock { $0.counts[operation] ?? 0 }
    }

    /// The keys that have not expired, sorted.
    public var keys: [String] {
        let now = clock.now()
        return state.withLock { state in
            state.entries.filter { $0.value.expiresAt.map { $0 > now } ?? true }.keys.sorted()
        }
    }

    /// The time left before `key` expires: nil when it is missing or has no expiry.
    public func timeToLive(of key: String) -> Duration? {
        let now = clock.now()
        return state.withLock { state in
            guard let expiresAt = state.entries[key]?.expiresAt, expiresAt > now else { return nil }
            return .milliseconds(Int64((expiresAt.timeIntervalSince(now) * 1_000).rounded()))
        }
    }

    // MARK: CacheStore

    public func get(_ key: String) async throws(CacheStoreError) -> ByteBuffer? {
        try await begin(.get)
        let now = clock.now()
        return state.withLock { Self.live(&$0, key, now)?.value }
    }

    public func get(_ keys: [String]) async throws(CacheStoreError) -> [ByteBuffer?] {
        try await begin(.get)
        let now = clock.now()
        return state.withLock { state in keys.map { Self.live(&state, $0, now)?.value } }
    }

    public func set(_ key: String, to value: ByteBuffer, ttl: Duration?) async throws(CacheStoreError) {
        try await begin(.set)
        let expiresAt = expiry(ttl)
        state.withLock { $0.entries[key] = Entry(value: value, expiresAt: expiresAt) }
    }

    public func setIfAbsent(_ key: String, to value: ByteBuffer, ttl: Duration) async throws(CacheStoreError) -> Bool {
        try await begin(.setIfAbsent)
        let now = clock.now()
        let expiresAt = expiry(ttl)
        return state.withLock { state in
            guard Self.live(&state, key, now) == nil else { return false }
            state.entries[key] = Entry(value: value, expiresAt: expiresAt)
            return true
        }
    }

    @discardableResult
    public func remove(_ keys: [String]) async throws(CacheStoreError) -> Int {
        try await begin(.remove)
        let now = clock.now()
        return state.withLock { state in
            keys.reduce(0) { count, key in
                let existed = Self.live(&state, key, now) != nil
                state.entries[key] = nil
                return count + (existed ? 1 : 0)
            }
        }
    }

    public func increment(_ key: String) async throws(CacheStoreError) -> Int {
        try await begin(.increment)
        let now = clock.now()
        return try state.withLock { state throws(CacheStoreError) -> Int in
            var current = 0
            var expiresAt: Date? = nil
            if let entry = Self.live(&state, key, now) {
                var value = entry.value
                guard let text = value.readString(length: value.readableBytes), let number = Int(text) else {
                    throw CacheStoreError(.server, "ERR value is not an integer or out of range")
                }
                current = number
                expiresAt = entry.expiresAt
            }
            let next = current + 1
            state.entries[key] = Entry(value: ByteBuffer(string: String(next)), expiresAt: expiresAt)
            return next
        }
    }

    public func shutdown() async {
        state.withLock { $0.closed = true }
    }

    // MARK: Internals

    private func expiry(_ ttl: Duration?) -> Date? {
        guard let ttl else { return nil }
        let (seconds, attoseconds) = ttl.components
        return clock.now().addingTimeInterval(Double(seconds) + Double(attoseconds) / 1e18)
    }

    private static func live(_ state: inout State, _ key: String, _ now: Date) -> Entry? {
        guard let entry = state.entries[key] else { return nil }
        if let expiresAt = entry.expiresAt, expiresAt <= now {
            state.entries[key] = nil
            return nil
        }
        return entry
    }

    /// Counts the call and applies the first matching fault.
    private func begin(_ operation: Operation) async throws(CacheStoreError) {
        let (fault, closed) = state.withLock { state -> (Fault?, Bool) in
            state.counts[operation, default: 0] += 1
            guard !state.closed else { return (nil, true) }
            guard let index = state.faults.firstIndex(where: { $0.operations.contains(operation) }) else { return (nil, false) }
            let fault = state.faults[index]
            if let count = fault.count {
                if count <= 1 { state.faults.remove(at: index) } else { state.faults[index].count = count - 1 }
            }
            return (fault, false)
        }
        if closed { throw CacheStoreError(.closed, "the store was shut down") }
        guard let fault else { return }
        if let delay = fault.delay {
            do {
                try await Task.sleep(for: delay)
            } catch {
                throw CacheStoreError(.timeout, "cancelled while delayed")
            }
        }
        throw fault.error
    }
}
