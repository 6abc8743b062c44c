import CacheCore
import Testing

/// The removal feed: keys the engine removes by itself (expiry on access, the sweeper, eviction) are reported
/// while it is on, and cost nothing while it is off.
@Suite("Removal feed")
struct RemovalFeedTests {
    @Test("off: expired keys are removed and nothing is recorded")
    func offRecordsNothing() {
        let feed = RemovalFeed()
        let shard = Shard(removals: feed)
        shard.put(bytes("k"), bytes("v"), expiry: start + 10)
        #expect(shard.get(bytes("k"), now: start + 20) == nil)
        #expect(feed.drain().isEmpty)
    }

    @Test("on: keys expired on access and by the sweeper are reported once each, oldest first")
    func expiredKeys() {
        let feed = RemovalFeed()
        feed.setEnabled(true)
        let shard = Shard(removals: feed)
        shard.put(bytes("lazy"), bytes("v"), expiry: start + 10)
        shard.put(bytes("swept"), bytes("v"), expiry: start + 10)
        shard.put(bytes("kept"), bytes("v"))
        #expect(shard.get(bytes("lazy"), now: start + 20) == nil)
        _ = shard.sweepExpired(now: start + 100_000, budget: 100)
        #expect(feed.drain() == [bytes("lazy"), bytes("swept")])
        #expect(feed.drain().isEmpty, "drained keys are gone")
        #expect(shard.delete(bytes("kept")))
        #expect(feed.drain().isEmpty, "a deletion by a command is not the engine's own removal")
    }

    @Test("on: an evicted key is reported; turning the feed off drops what was not drained")
    func evictedKeys() {
        let budget = MemoryBudget()
        budget.setPolicy(.allKeysRandom)
        let feed = RemovalFeed()
        feed.setEnabled(true)
        let shard = Shard(budget: budget, removals: feed)
        shard.put(bytes("a"), bytes("1"))
        #expect(shard.evictOne(now: start))
        #expect(feed.drain() == [bytes("a")])
        shard.put(bytes("b"), bytes("1"), expiry: start + 1)
        #expect(shard.get(bytes("b"), now: start + 5) == nil)
        feed.setEnabled(false)
        #expect(feed.drain().isEmpty)
    }

    @Test("notifications: removals carry their database and reason, by reason asked for, apart from tracking's keys")
    func notificationEvents() {
        let budget = MemoryBudget()
        budget.setPolicy(.allKeysRandom)
        let feed = RemovalFeed()
        feed.setNotifying(expired: true, evicted: false)
        #expect(feed.isEnabled)
        let shard = Shard(budget: budget, removals: feed, database: 7)
        shard.put(bytes("old"), bytes("v"), expiry: start + 10)
        #expect(shard.get(bytes("old"), now: start + 20) == nil)
        shard.put(bytes("a"), bytes("1"))
        #expect(shard.evictOne(now: start + 20))
        #expect(feed.drainEvents() == [RemovalFeed.Removal(key: bytes("old"), database: 7, reason: .expired)])
        #expect(feed.drain().isEmpty, "tracking is off")
        feed.setEnabled(true)
        feed.setNotifying(expired: true, evicted: true)
        shard.put(bytes("b"), bytes("1"))
        #expect(shard.evictOne(now: start + 20))
        #expect(feed.drain() == [bytes("b")])
        #expect(feed.drainEvents() == [RemovalFeed.Removal(key: bytes("b"), database: 7, reason: .evicted)])
        shard.put(bytes("c"), bytes("1"), expiry: start + 30)
        #expect(shard.get(bytes("c"), now: start + 40) == nil)
        feed.setNotifying(expired: false, evicted: true)
        #expect(feed.drainEvents().isEmpty, "turning a reason off drops its pending removals")
        #expect(feed.drain() == [bytes("c")])
        feed.setEnabled(false)
        feed.setNotifying(expired: false, evicted: false)
        #expect(!feed.isEnabled)
    }
}
