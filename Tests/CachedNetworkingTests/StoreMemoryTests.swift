import CachedNetworkingTesting
import NIOCore
import Testing

@testable import CachedNetworking

/// The memory store's own behaviour: its byte budget, eviction, and the background cleaner.
struct StoreMemoryTests {
    private func value(_ bytes: Int, _ fill: UInt8 = 7) -> ByteBuffer { ByteBuffer(repeating: fill, count: bytes) }

    @Test func chargesKeyValueAndOverheadPerEntry() async throws {
        let store = MemoryStore(maxBytes: 10_000, entryOverhead: 50, cleanupInterval: nil)
        try await store.set("abc", to: value(100), ttl: nil)
        #expect(store.bytes == 3 + 100 + 50)
        try await store.set("abc", to: value(10), ttl: nil)
        #expect(store.bytes == 3 + 10 + 50)
        try await store.set("de", to: value(0), ttl: .seconds(1))
        #expect(store.bytes == (3 + 10 + 50) + (2 + 0 + 50))
        #expect(store.count == 2)
        _ = try await store.increment("n")
        #expect(store.bytes == (3 + 10 + 50) + (2 + 50) + (1 + 1 + 50))
        #expect(try await store.remove(["abc", "de", "n"]) == 3)
        #expect(store.bytes == 0)
        #expect(store.count == 0)
        await store.shutdown()
    }

    @Test func staysWithinItsBudgetWhileEvicting() async throws {
        let store = MemoryStore(maxBytes: 20_000, entryOverhead: 100, cleanupInterval: nil)
        for i in 0..<1_000 {
            try await store.set("key-\(i)", to: value(100 + i % 300), ttl: nil)
            #expect(store.bytes <= 20_000)
        }
        #expect(store.count > 20 && store.count < 100)
        // The newest entry is never the one evicted.
        #expect(try await store.get("key-999") != nil)
        // Accounting still matches the entries held.
        var counted = 0
        for i in 0..<1_000 {
            if let v = try await store.get("key-\(i)") { counted += "key-\(i)".utf8.count + v.readableBytes + 100 }
        }
        #expect(counted == store.bytes)
        await store.shutdown()
    }

    @Test func keepsEntriesThatAreReadWhileOneOffWritesPass() async throws {
        let store = MemoryStore(maxBytes: 50 * 200, entryOverhead: 100, cleanupInterval: nil)
        let hot = (0..<10).map { "hot-\($0)" }
        for key in hot { try await store.set(key, to: value(95), ttl: nil) }
        for i in 0..<2_000 {
            try await store.set("scan-\(i)", to: value(95), ttl: nil)
            if i % 20 == 0 {
                for key in hot { _ = try await store.get(key) }
            }
        }
        for key in hot { #expect(try await store.get(key) != nil, "\(key) was evicted") }
        // Most one-off entries have gone.
        let survivors = try await store.get((0..<1_900).map { "scan-\($0)" }).compactMap { $0 }.count
        #expect(survivors < 50)
        await store.shutdown()
    }

    @Test func dropsAValueLargerThanTheWholeBudget() async throws {
        let store = MemoryStore(maxBytes: 1_000, entryOverhead: 10, cleanupInterval: nil)
        try await store.set("small", to: value(100), ttl: nil)
        try await store.set("big", to: value(100), ttl: nil)
        try await store.set("big", to: value(5_000), ttl: nil)
        #expect(try await store.get("big") == nil)
        #expect(try await store.get("small") != nil)
        #expect(store.bytes == 5 + 100 + 10)
        await store.shutdown()
    }

    @Test func expiryFollowsTheInjectedClock() async throws {
        let clock = ManualCacheClock()
        let store = MemoryStore(cleanupInterval: nil, clock: clock)
        try await store.set("k", to: value(1), ttl: .seconds(10))
        clock.advance(by: .seconds(9))
        #expect(try await store.get("k") != nil)
        #expect(store.count == 1)
        clock.advance(by: .seconds(1))
        #expect(try await store.get("k") == nil)
        // Reading an expired entry removes it.
        #expect(store.count == 0)
        #expect(store.bytes == 0)
        await store.shutdown()
    }

    @Test func removeExpiredReclaimsOnlyExpiredEntries() async throws {
        let clock = ManualCacheClock()
        let store = MemoryStore(cleanupInterval: nil, clock: clock)
        for i in 0..<10_000 {
            try await store.set("short-\(i)", to: value(10), ttl: .seconds(1))
        }
        try await store.set("long", to: value(10), ttl: .seconds(100))
        try await store.set("forever", to: value(10), ttl: nil)
        clock.advance(by: .seconds(2))
        #expect(store.removeExpired() == 10_000)
        #expect(store.count == 2)
        #expect(store.bytes == ("long".utf8.count + 10 + MemoryStore.defaultEntryOverhead) * 2 + 3)
        await store.shutdown()
    }

    @Test func cleanerReclaimsExpiredEntriesInTheBackground() async throws {
        let clock = ManualCacheClock()
        let store = MemoryStore(cleanupInterval: .milliseconds(10), clock: clock)
        for i in 0..<5_000 {
            try await store.set("k\(i)", to: value(10), ttl: .seconds(1))
        }
        try await store.set("kept", to: value(10), ttl: nil)
        try await Task.sleep(for: .milliseconds(50))
        // Nothing has expired yet, so the cleaner has removed nothing.
        #expect(store.count == 5_001)
        clock.advance(by: .seconds(2))
        let deadline = ContinuousClock.now + .seconds(5)
        while store.count > 1 && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(store.count == 1)
        #expect(try await store.get("kept") != nil)
        await store.shutdown()
    }

    @Test func cleanerStopsOnShutdown() async throws {
        let store = MemoryStore(cleanupInterval: .milliseconds(5))
        let cleaner = try #require(store.cleaner)
        try await Task.sleep(for: .milliseconds(20))
        await store.shutdown()
        #expect(cleaner.isCancelled)
        // shutdown() returned after the task finished; awaiting it again returns at once.
        await cleaner.value
    }

    @Test func cleanerStopsWhenTheStoreIsReleasedAndDoesNotRetainIt() async throws {
        var store: MemoryStore? = MemoryStore(cleanupInterval: .milliseconds(5))
        weak let weakStore = store
        let cleaner = try #require(store?.cleaner)
        try await Task.sleep(for: .milliseconds(20))
        store = nil
        #expect(weakStore == nil)
        await withTaskGroup(of: Bool.self) { group in
            group.addTask { await cleaner.value; return true }
            group.addTask { try? await Task.sleep(for: .seconds(5)); return false }
            let finished = await group.next() ?? false
            group.cancelAll()
            #expect(finished, "the cleaner task kept running after the store was released")
        }
    }

    @Test func noCleanerWithoutAnInterval() async throws {
        let store = MemoryStore(cleanupInterval: nil)
        #expect(store.cleaner == nil)
        await store.shutdown()
    }
}
