import NIOCore
import Testing

@testable import CachedNetworking
@testable import CachedNetworkingRedis

/// The near cache's bookkeeping (no server): what a reply may fill, given the invalidations that happened while
/// it was on its way, the channel's state, TTLs and the byte budget. Times are nanoseconds passed in by hand.
struct NearCacheTableTests {
    private static let second: Int64 = 1_000_000_000

    private func table(
        maxBytes: Int = 1 << 20, maxAge: Int64? = nil, prefixes: [String]? = nil, remembered: Int = 4096
    ) -> NearCacheTable {
        var table = NearCacheTable(
            maxBytes: maxBytes, entryOverhead: 100, maxAge: maxAge, prefixes: prefixes,
            maxRememberedInvalidations: remembered)
        table.startFilling()
        return table
    }

    private func key(_ name: String) -> StoreKey { StoreKey(name) }
    private func value(_ text: String) -> ByteBuffer { ByteBuffer(string: text) }

    /// Reads `name` as a reply would: a ticket at `now`, the value offered with `ttl`, the read ended.
    @discardableResult
    private func read(
        _ table: inout NearCacheTable, _ name: String, _ text: String?, ttl: Int64 = -1, now: Int64 = 0
    ) -> NearCacheTable.FillOutcome {
        let ticket = table.beginRead(now: now)
        defer { table.endRead(ticket) }
        return table.fill(ticket, key: key(name), value: text.map(value), ttlMilliseconds: ttl)
    }

    @Test func aReplyFillsAndLaterLookupsHit() {
        var table = table()
        #expect(table.lookup(key("k"), now: 0) == nil)
        #expect(read(&table, "k", "v1") == .filled)
        #expect(table.lookup(key("k"), now: 1)?.readableBytes == 2)
        #expect(table.count == 1)
        // A missing key is not remembered (no negative entries).
        #expect(read(&table, "missing", nil) == .skipped)
        #expect(table.count == 1)
    }

    @Test func anInvalidationThatOvertakesTheReplyKeepsItOut() {
        var table = table()
        let ticket = table.beginRead(now: 0)
        // The server changed the key after executing the GET; its message arrived before the GET's reply.
        table.invalidate([key("k")])
        #expect(table.fill(ticket, key: key("k"), value: value("old"), ttlMilliseconds: -1) == .refused)
        table.endRead(ticket)
        #expect(table.lookup(key("k"), now: 0) == nil)

        // A read started after the invalidation fills as usual.
        #expect(read(&table, "k", "new") == .filled)
        #expect(table.lookup(key("k"), now: 0) == value("new"))
    }

    @Test func anInvalidationOfAnotherKeyDoesNotKeepTheReplyOut() {
        var table = table()
        let ticket = table.beginRead(now: 0)
        table.invalidate([key("other")])
        #expect(table.fill(ticket, key: key("k"), value: value("v"), ttlMilliseconds: -1) == .filled)
        table.endRead(ticket)
    }

    @Test func anInvalidationBeforeTheReadStartedDoesNotKeepItOut() {
        var table = table()
        let early = table.beginRead(now: 0)  // keeps a read in flight, so invalidations are remembered
        table.invalidate([key("k")])
        let ticket = table.beginRead(now: 0)
        #expect(table.fill(ticket, key: key("k"), value: value("v"), ttlMilliseconds: -1) == .filled)
        table.endRead(ticket)
        #expect(table.fill(early, key: key("k"), value: value("older"), ttlMilliseconds: -1) == .refused)
        table.endRead(early)
        #expect(table.lookup(key("k"), now: 0) == value("v"))
    }

    @Test func anInvalidationDropsTheEntry() {
        var table = table()
        read(&table, "a", "1")
        read(&table, "b", "2")
        #expect(table.invalidate([key("a"), key("zzz")]) == 1)
        #expect(table.lookup(key("a"), now: 0) == nil)
        #expect(table.lookup(key("b"), now: 0) == value("2"))
    }

    @Test func aFlushDropsEverythingAndKeepsEveryReplyInFlightOut() {
        var table = table()
        read(&table, "a", "1")
        read(&table, "b", "2")
        let ticket = table.beginRead(now: 0)
        #expect(table.invalidateAll() == 2)
        #expect(table.count == 0 && table.bytes == 0)
        #expect(table.fill(ticket, key: key("c"), value: value("3"), ttlMilliseconds: -1) == .refused)
        table.endRead(ticket)
        #expect(read(&table, "c", "3") == .filled)
    }

    @Test func aLostChannelFlushesAndNothingFillsUntilItIsBack() {
        var table = table()
        read(&table, "a", "1")
        let beforeLoss = table.beginRead(now: 0)
        #expect(table.stopFilling() == 1)
        #expect(!table.filling)
        #expect(table.lookup(key("a"), now: 0) == nil)
        // Reads while the channel is down fill nothing, even if their replies come after it is back: the
        // connection may have sent them before it tracked for the new subscriber.
        let whileDown = table.beginRead(now: 0)
        #expect(!whileDown.fillable)
        #expect(read(&table, "b", "2") == .refused)
        table.startFilling()
        #expect(table.fill(whileDown, key: key("c"), value: value("3"), ttlMilliseconds: -1) == .refused)
        #expect(table.fill(beforeLoss, key: key("d"), value: value("4"), ttlMilliseconds: -1) == .refused)
        table.endRead(whileDown)
        table.endRead(beforeLoss)
        #expect(table.count == 0)
        #expect(read(&table, "b", "2") == .filled)
    }

    @Test func theRemoteTTLIsCountedFromWhenTheReadStarted() {
        var table = table()
        // PTTL said 1500 ms; the read started at 10 s, so the entry expires at 11.485 s (1% of the TTL is taken
        // off for the server's truncated and cached clock), whenever the reply came.
        #expect(read(&table, "k", "v", ttl: 1500, now: 10 * Self.second) == .filled)
        #expect(table.lookup(key("k"), now: 11 * Self.second + 484_999_999) == value("v"))
        #expect(table.lookup(key("k"), now: 11 * Self.second + 485_000_000) == nil)
        #expect(table.count == 0)
        // The margin is at least 1 ms and at most 50 ms.
        #expect(read(&table, "short", "v", ttl: 50, now: 0) == .filled)
        #expect(table.lookup(key("short"), now: 48_999_999) == value("v"))
        #expect(table.lookup(key("short"), now: 49_000_000) == nil)
        #expect(read(&table, "long", "v", ttl: 600_000, now: 0) == .filled)
        #expect(table.lookup(key("long"), now: 599_949_999_999) == value("v"))
        #expect(table.lookup(key("long"), now: 599_950_000_000) == nil)
        // A key that is gone (-2) or about to expire (0 or 1 ms) is not kept.
        #expect(read(&table, "gone", "v", ttl: -2) == .skipped)
        #expect(read(&table, "expiring", "v", ttl: 0) == .skipped)
        #expect(read(&table, "expiring", "v", ttl: 1) == .skipped)
    }

    @Test func maxAgeBoundsEntriesWithLongOrNoTTL() {
        var table = table(maxAge: 2 * Self.second)
        read(&table, "forever", "v", ttl: -1, now: 0)
        read(&table, "long", "v", ttl: 3_600_000, now: 0)
        read(&table, "short", "v", ttl: 500, now: 0)
        #expect(table.lookup(key("short"), now: Self.second / 2 - 1_000_000) == nil)
        #expect(table.lookup(key("forever"), now: 2 * Self.second - 1) != nil)
        #expect(table.lookup(key("long"), now: 2 * Self.second - 1) != nil)
        #expect(table.lookup(key("forever"), now: 2 * Self.second) == nil)
        #expect(table.lookup(key("long"), now: 2 * Self.second) == nil)
    }

    @Test func staysWithinItsByteBudget() {
        var table = table(maxBytes: 20_000)
        for i in 0..<1_000 {
            read(&table, "key-\(i)", String(repeating: "x", count: 100 + i % 300))
            #expect(table.bytes <= 20_000)
        }
        #expect(table.count > 20 && table.count < 100)
        #expect(table.lookup(key("key-999"), now: 0) != nil)
        // A value larger than the whole budget is not kept, and does not evict the others.
        let before = table.count
        #expect(read(&table, "huge", String(repeating: "x", count: 30_000)) == .skipped)
        #expect(table.count == before)
    }

    @Test func broadcastKeepsOnlyKeysUnderItsPrefixes() {
        var table = table(prefixes: ["app:", "other:"])
        #expect(read(&table, "app:1", "v") == .filled)
        #expect(read(&table, "other:1", "v") == .filled)
        #expect(read(&table, "ap", "v") == .skipped)
        #expect(read(&table, "cached:1", "v") == .skipped)
        #expect(table.count == 2)
        // No prefixes, or only empty ones, means every key.
        var all = self.table(prefixes: [""])
        #expect(all.admits(key("anything")))
        #expect(read(&all, "anything", "v") == .filled)
    }

    @Test func rememberedInvalidationsAreBoundedAndForgottenWhenNoReadIsInFlight() {
        var table = table(remembered: 8)
        let ticket = table.beginRead(now: 0)
        for i in 0..<8 { table.invalidate([key("churn-\(i)")]) }
        // Past the bound the records give way to a watermark: reads in flight fill nothing, whatever their key.
        table.invalidate([key("churn-8")])
        #expect(table.watermark == table.sequence)
        #expect(table.fill(ticket, key: key("unrelated"), value: value("v"), ttlMilliseconds: -1) == .refused)
        table.endRead(ticket)
        #expect(table.readsInFlight == 0)

        // With no read in flight nothing is recorded, and later reads fill.
        for i in 0..<100 { table.invalidate([key("churn-\(i)")]) }
        #expect(read(&table, "churn-1", "v") == .filled)
    }

    @Test func everyInterleavingOfAReadAndAWriteEndsWithoutTheOldValue() {
        // The read (R) and the write's invalidation (I) in every order: R's ticket, I, R's fill. Whatever the
        // order, once I has happened, the old value is not in the table.
        enum Step { case ticket, invalidate, fill }
        let orders: [[Step]] = [
            [.ticket, .invalidate, .fill], [.ticket, .fill, .invalidate], [.invalidate, .ticket, .fill],
        ]
        for order in orders {
            var table = table()
            var ticket: NearCacheTable.ReadTicket?
            var replyIsOld = true
            for step in order {
                switch step {
                case .ticket:
                    ticket = table.beginRead(now: 0)
                    // A read started after the invalidation reads the new value.
                    replyIsOld = table.sequence == 0
                case .invalidate:
                    table.invalidate([key("k")])
                case .fill:
                    _ = table.fill(ticket!, key: key("k"), value: value(replyIsOld ? "old" : "new"), ttlMilliseconds: -1)
                    table.endRead(ticket!)
                }
            }
            #expect(table.lookup(key("k"), now: 0) != value("old"), "\(order)")
        }
    }
}
