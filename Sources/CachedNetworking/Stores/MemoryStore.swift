import NIOCore
import Synchronization

/// A ``CacheStore`` in this process's memory, bounded in bytes.
///
/// Entries are charged their key bytes, value bytes and a fixed ``entryOverhead`` (the table's own bookkeeping);
/// when a write takes the total over ``maxBytes``, entries are evicted with SIEVE — a hit marks its entry
/// visited, and eviction walks from the oldest entry, sparing (and clearing) visited ones. Recently and
/// often read entries therefore survive a stream of entries that are written once and never read.
///
/// Expiry follows the injected clock: an expired entry is never returned, and is removed when next touched.
/// A background task (every `cleanupInterval`) also removes expired entries that nobody touches, a bounded
/// slice of the table at a time so that readers are never held up for long. The task stops on ``shutdown()``
/// or when the store is released; it does not keep the store alive.
///
/// All methods are safe to call from any task; every call takes one mutex once and never suspends, so a hit
/// costs a hash lookup and a reference-count increment.
///
/// Semantics match Redis where the protocol leaves a choice: keys are compared byte for byte, ``set(_:to:ttl:)``
/// without a TTL removes an earlier one, ``increment(_:)`` keeps the TTL and stores the decimal text of the
/// number, and ``remove(_:)`` counts a repeated key once.
public final class MemoryStore: CacheStore {
    /// The default per-entry overhead charged on top of key and value bytes.
    public static let defaultEntryOverhead = 96

    /// The most bytes the entries may be charged in total.
    public let maxBytes: Int
    /// Bytes charged per entry on top of its key and value.
    public let entryOverhead: Int

    private let core: Core
    /// The background cleaner (nil when `cleanupInterval` was nil). Internal for tests.
    let cleaner: Task<Void, Never>?

    /// Creates an empty store.
    ///
    /// - Parameters:
    ///   - maxBytes: the byte budget (key + value + `entryOverhead` per entry); at least 1. Default 64 MiB.
    ///   - entryOverhead: bytes charged per entry for bookkeeping. Default ``defaultEntryOverhead``.
    ///   - cleanupInterval: how often the background task removes expired entries; nil for no task (expired
    ///     entries are then removed only when touched or by ``removeExpired()``). Default one second.
    ///   - clock: the clock TTLs are measured on (its ``CacheClock/uptime()``); tests pass a manual clock
    ///     (`CachedNetworkingTesting`'s `ManualCacheClock`) that they advance by hand. The background task's
    ///     interval is real time, whatever the clock.
    public convenience init(
        maxBytes: Int = 64 << 20,
        entryOverhead: Int = MemoryStore.defaultEntryOverhead,
        cleanupInterval: Duration? = .seconds(1),
        clock: any CacheClock = SystemCacheClock()
    ) {
        let now: @Sendable () -> Int64
        if clock is SystemCacheClock {
            // The system clock's uptime is ContinuousClock's: read it directly, without the existential call.
            let origin = ContinuousClock.now
            now = { origin.duration(to: .now).storeNanoseconds }
        } else {
            let origin = clock.uptime()
            now = { (clock.uptime() - origin).storeNanoseconds }
        }
        self.init(maxBytes: maxBytes, entryOverhead: entryOverhead, cleanupInterval: cleanupInterval, now: now)
    }

    /// Creates an empty store whose TTLs are measured on a Swift `Clock`.
    @available(*, deprecated, message: "pass a CacheClock: SystemCacheClock(), or ManualCacheClock() in tests")
    public convenience init<C: Clock>(
        maxBytes: Int = 64 << 20,
        entryOverhead: Int = MemoryStore.defaultEntryOverhead,
        cleanupInterval: Duration? = .seconds(1),
        clock: C
    ) where C.Duration == Duration {
        let origin = clock.now
        self.init(
            maxBytes: maxBytes, entryOverhead: entryOverhead, cleanupInterval: cleanupInterval,
            now: { origin.duration(to: clock.now).storeNanoseconds })
    }

    /// A store whose TTLs are measured by `now`: nanoseconds since the store was created.
    private init(maxBytes: Int, entryOverhead: Int, cleanupInterval: Duration?, now: @escaping @Sendable () -> Int64) {
        self.maxBytes = max(1, maxBytes)
        self.entryOverhead = max(0, entryOverhead)
        let core = Core(table: SieveTable(maxBytes: self.maxBytes, entryOverhead: self.entryOverhead), now: now)
        self.core = core
        if let interval = cleanupInterval, interval > .zero {
            cleaner = Task.detached(priority: .background) { [weak core] in
                while true {
                    do { try await Task.sleep(for: interval) } catch { return }
                    var cursor: Int? = 0
                    while let start = cursor {
                        guard let core, !Task.isCancelled else { return }
                        cursor = core.removeExpired(from: start, limit: Core.sweepSlice).next
                        await Task.yield()
                    }
                }
            }
        } else {
            cleaner = nil
        }
    }

    deinit {
        cleaner?.cancel()
    }

    /// How many entries the store holds (expired ones not yet removed included).
    public var count: Int { core.state.withLock { $0.table.count } }

    /// Bytes currently charged for the entries; never more than ``maxBytes`` after a call returns.
    public var bytes: Int { core.state.withLock { $0.table.bytes } }

    /// Removes every expired entry now, in slices.
    /// - Returns: how many entries were removed.
    /// - Complexity: O(n) in the number of slots, with the lock released between slices.
    @discardableResult
    public func removeExpired() -> Int {
        var removed = 0
        var cursor: Int? = 0
        while let start = cursor {
            let result = core.removeExpired(from: start, limit: Core.sweepSlice)
            removed += result.removed
            cursor = result.next
        }
        return removed
    }

    // MARK: CacheStore

    /// The value under `key`, or nil when there is none or it expired.
    /// - Throws: ``CacheStoreError/Kind/closed`` after ``shutdown()``.
    /// - Complexity: O(1) on average.
    public func get(_ key: String) async throws(CacheStoreError) -> ByteBuffer? {
        let key = StoreKey(key)
        let now = core.now()
        return try core.state.withLock { state throws(CacheStoreError) in
            try state.checkOpen()
            return state.table.get(key, now: now)
        }
    }

    /// The values under `keys`, in order, nil for missing or expired ones.
    /// - Throws: ``CacheStoreError/Kind/closed`` after ``shutdown()``.
    /// - Complexity: O(`keys.count`).
    public func get(_ keys: [String]) async throws(CacheStoreError) -> [ByteBuffer?] {
        let keys = keys.map(StoreKey.init)
        let now = core.now()
        return try core.state.withLock { state throws(CacheStoreError) in
            try state.checkOpen()
            return keys.map { state.table.get($0, now: now) }
        }
    }

    /// Stores `value` under `key`, replacing any entry and its TTL, evicting others if the budget is exceeded.
    ///
    /// A value too large for the whole budget is dropped (and any earlier value under `key` removed), as if
    /// it had been evicted at once.
    /// - Throws: ``CacheStoreError/Kind/closed`` after ``shutdown()``.
    public func set(_ key: String, to value: ByteBuffer, ttl: Duration?) async throws(CacheStoreError) {
        try store(key, value, decoded: nil, ttl: ttl)
    }

    /// Stores `value` under `key` for `ttl` unless a live entry is there.
    /// - Returns: true when this call stored the value (even one too large to keep; see ``set(_:to:ttl:)``).
    /// - Throws: ``CacheStoreError/Kind/closed`` after ``shutdown()``.
    public func setIfAbsent(_ key: String, to value: ByteBuffer, ttl: Duration) async throws(CacheStoreError) -> Bool {
        let key = StoreKey(key)
        let now = core.now()
        let expiresAt = Self.expiry(now: now, ttl: ttl)
        return try core.state.withLock { state throws(CacheStoreError) in
            try state.checkOpen()
            if state.table.find(key, now: now) != nil { return false }
            state.table.set(key, value: value, expiresAt: expiresAt, now: now)
            return true
        }
    }

    /// Removes `keys`.
    /// - Returns: how many distinct live entries were removed.
    /// - Throws: ``CacheStoreError/Kind/closed`` after ``shutdown()``.
    @discardableResult
    public func remove(_ keys: [String]) async throws(CacheStoreError) -> Int {
        let keys = keys.map(StoreKey.init)
        let now = core.now()
        return try core.state.withLock { state throws(CacheStoreError) in
            try state.checkOpen()
            var removed = 0
            for key in keys {
                if let slot = state.table.find(key, now: now) {
                    state.table.remove(slot: slot)
                    removed += 1
                }
            }
            return removed
        }
    }

    /// Adds one to the decimal integer stored under `key` (0 when missing), keeping its TTL.
    /// - Returns: the new value.
    /// - Throws: ``CacheStoreError/Kind/server`` (with Redis's text) when the value is not a 64-bit decimal
    ///   integer or would overflow; ``CacheStoreError/Kind/closed`` after ``shutdown()``.
    public func increment(_ key: String) async throws(CacheStoreError) -> Int {
        let key = StoreKey(key)
        let now = core.now()
        return try core.state.withLock { state throws(CacheStoreError) -> Int in
            try state.checkOpen()
            guard let slot = state.table.find(key, now: now) else {
                state.table.set(key, value: ByteBuffer(string: "1"), expiresAt: .max, now: now)
                return 1
            }
            let current = state.table.slots[Int(slot)].value.withUnsafeReadableBytes { parseRedisInteger($0) }
            guard let current else { throw CacheStoreError(.server, RedisErrorText.notInteger) }
            let (next, overflow) = current.addingReportingOverflow(1)
            guard !overflow else { throw CacheStoreError(.server, RedisErrorText.overflow) }
            state.table.replaceValue(slot: slot, with: ByteBuffer(string: String(next)))
            return Int(next)
        }
    }

    /// ``CacheStoreCallStyle/immediate``: calls take a lock and look up a table, without suspending.
    public var callStyle: CacheStoreCallStyle { .immediate }

    /// Stops the cleaner and drops every entry; later calls throw ``CacheStoreError/Kind/closed``.
    public func shutdown() async {
        cleaner?.cancel()
        core.state.withLock { state in
            state.closed = true
            state.table.removeAll()
        }
        await cleaner?.value
    }

    // MARK: decoded envelopes (DecodedEnvelopeStore)

    /// The value under `key` and the decoded envelope written with it, without suspending.
    func getDecoded(_ key: StoreKey) throws(CacheStoreError) -> (value: ByteBuffer, decoded: DecodedEnvelope?)? {
        let now = core.now()
        return try core.state.withLock { state throws(CacheStoreError) in
            try state.checkOpen()
            return state.table.getDecoded(key, now: now)
        }
    }

    /// Stores `value` with its decoded envelope, without suspending. The decoded form shares the value's body
    /// bytes and is not charged beyond them.
    func set(_ key: String, to value: ByteBuffer, decoded: DecodedEnvelope, ttl: Duration?) throws(CacheStoreError) {
        try store(key, value, decoded: decoded, ttl: ttl)
    }

    // MARK: private

    private func store(_ key: String, _ value: ByteBuffer, decoded: DecodedEnvelope?, ttl: Duration?) throws(CacheStoreError) {
        let key = StoreKey(key)
        let now = core.now()
        let expiresAt = Self.expiry(now: now, ttl: ttl)
        try core.state.withLock { state throws(CacheStoreError) in
            try state.checkOpen()
            state.table.set(key, value: value, decoded: decoded, expiresAt: expiresAt, now: now)
        }
    }

    private static func expiry(now: Int64, ttl: Duration?) -> Int64 {
        guard let ttl else { return .max }
        let (sum, overflow) = now.addingReportingOverflow(max(1, ttl.storeNanoseconds))
        return overflow ? .max - 1 : sum
    }

    /// What the store and its cleaner share; the cleaner holds it weakly.
    final class Core: Sendable {
        /// Slots the cleaner examines per lock hold.
        static let sweepSlice = 4096

        struct State {
            var table: SieveTable
            var closed = false

            func checkOpen() throws(CacheStoreError) {
                if closed { throw CacheStoreError(.closed, "the memory store was shut down") }
            }
        }

        let state: Mutex<State>
        /// Nanoseconds since the store was created, on its clock.
        let now: @Sendable () -> Int64

        init(table: SieveTable, now: @escaping @Sendable () -> Int64) {
            self.state = Mutex(State(table: table))
            self.now = now
        }

        func removeExpired(from start: Int, limit: Int) -> (removed: Int, next: Int?) {
            let now = now()
            return state.withLock { $0.table.removeExpired(from: start, limit: limit, now: now) }
        }
    }
}
