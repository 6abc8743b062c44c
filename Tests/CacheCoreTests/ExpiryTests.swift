import CacheCore
import Testing

@Suite("Expiry: TTLs and lazy expiry")
struct ExpiryTests {
    @Test("An entry with a TTL keeps its key, value and expiry; one without reports none")
    func entriesWithAndWithoutExpiry() {
        let shard = Shard()
        shard.put(bytes("a"), bytes("1"), expiry: start + 5000)
        shard.put(bytes("b"), bytes("2"))
        #expect(shard.storedExpiry(bytes("a")) == .some(start + 5000))
        #expect(shard.storedExpiry(bytes("b")) == .some(nil))
        #expect(shard.get(bytes("a")) == bytes("1"))
        #expect(shard.expiresCount == 1)
    }

    @Test("setExpiry adds, changes and removes a TTL without touching the value")
    func setExpiryTransitions() {
        let shard = Shard()
        shard.put(bytes("k"), bytes("value"))
        #expect(shard.changeExpiry(bytes("k"), to: start + 100))
        #expect(shard.storedExpiry(bytes("k")) == .some(start + 100))
        #expect(shard.expiresCount == 1)
        #expect(shard.changeExpiry(bytes("k"), to: start + 200))
        #expect(shard.storedExpiry(bytes("k")) == .some(start + 200))
        #expect(shard.expiresCount == 1)
        #expect(shard.changeExpiry(bytes("k"), to: nil))
        #expect(shard.storedExpiry(bytes("k")) == .some(nil))
        #expect(shard.expiresCount == 0)
        #expect(shard.changeExpiry(bytes("k"), to: nil))
        #expect(shard.expiresCount == 0)
        #expect(shard.get(bytes("k")) == bytes("value"))
    }

    @Test("A large value gains, changes and loses its TTL in place: no copy, the same bytes, the same accounting")
    func largeValueTTLInPlace() {
        let shard = Shard()
        var generator = SeededGenerator(seed: 11)
        let value = (0..<(3 << 20)).map { _ in UInt8.random(in: 0...255, using: &generator) }
        #expect(shard.put(bytes("big"), value))
        let block = shard.blockAddress(bytes("big"))
        let used = shard.usedBytes
        #expect(shard.changeExpiry(bytes("big"), to: start + 1000))
        #expect(shard.blockAddress(bytes("big")) == block)
        #expect(shard.storedExpiry(bytes("big")) == .some(start + 1000))
        #expect(shard.expiresCount == 1)
        #expect(shard.changeExpiry(bytes("big"), to: start + 2000))
        #expect(shard.changeExpiry(bytes("big"), to: nil))
        #expect(shard.blockAddress(bytes("big")) == block)
        #expect(shard.storedExpiry(bytes("big")) == .some(nil))
        #expect(shard.expiresCount == 0)
        #expect(shard.usedBytes - used < 64, "only the expiry index may have grown")
        // The TTL it had is gone: sweeping past it keeps the key.
        shard.sweepAll(now: start + 5000)
        #expect(shard.get(bytes("big"), now: start + 5000) == value)
        // Given again, it expires: the sweeper reclaims it and the memory it was charged.
        #expect(shard.changeExpiry(bytes("big"), to: start + 6000))
        shard.sweepAll(now: start + 6000 + sweepLag + 1)
        #expect(!shard.holds(bytes("big")))
        #expect(shard.count == 0 && shard.expiresCount == 0)
    }

    @Test("Values on both sides of the large-entry threshold keep their bytes and TTL through every change")
    func aroundLargeThreshold() {
        let shard = Shard()
        var generator = SeededGenerator(seed: 12)
        for count in (16 * 1024 - 40)...(16 * 1024 + 8) {
            let key = bytes("k\(count)")
            let value = (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
            #expect(shard.put(key, value))
            #expect(shard.changeExpiry(key, to: start + 100))
            #expect(shard.get(key) == value)
            #expect(shard.storedExpiry(key) == .some(start + 100))
            // SET of a value of the same length without a TTL clears it; with one, sets it.
            let other = value.reversed() as [UInt8]
            #expect(shard.put(key, other))
            #expect(shard.storedExpiry(key) == .some(nil))
            #expect(shard.put(key, value, expiry: start + 300))
            #expect(shard.storedExpiry(key) == .some(start + 300))
            #expect(shard.get(key) == value)
            #expect(shard.changeExpiry(key, to: nil))
            #expect(shard.get(key) == value && shard.storedExpiry(key) == .some(nil))
        }
        #expect(shard.expiresCount == 0)
        let keys = shard.allKeys
        for key in keys { #expect(shard.delete(key)) }
        // What is left charged is the table and the expiry index: every entry's block was counted back.
        #expect(shard.count == 0)
        #expect(shard.usedBytes == (shard.tableCapacity + shard.expiryRegistrations) * 8)
    }

    @Test("Overwriting a key with SET semantics replaces or clears its TTL")
    func overwriteChangesTTL() {
        let shard = Shard()
        shard.put(bytes("k"), bytes("v1"), expiry: start + 100)
        shard.put(bytes("k"), bytes("v2"))
        #expect(shard.storedExpiry(bytes("k")) == .some(nil))
        #expect(shard.expiresCount == 0)
        shard.put(bytes("k"), bytes("v3"), expiry: start + 300)
        #expect(shard.storedExpiry(bytes("k")) == .some(start + 300))
        #expect(shard.expiresCount == 1)
    }

    @Test("A key is alive up to its expiry millisecond and removed by lookup after it (Redis: expired when now > when)")
    func lazyExpiryBoundary() {
        let shard = Shard()
        shard.put(bytes("k"), bytes("v"), expiry: start + 1000)
        #expect(shard.get(bytes("k"), now: start + 999) == bytes("v"))
        #expect(shard.get(bytes("k"), now: start + 1000) == bytes("v"))
        #expect(shard.holds(bytes("k")))
        #expect(shard.get(bytes("k"), now: start + 1001) == nil)
        #expect(!shard.holds(bytes("k")))
        #expect(shard.count == 0)
        #expect(shard.expiresCount == 0)
        #expect(shard.expiredKeys == 1)
    }

    @Test("Lookup never expires keys without a TTL")
    func noTTLNeverExpires() {
        let shard = Shard()
        shard.put(bytes("k"), bytes("v"))
        #expect(shard.get(bytes("k"), now: .max) == bytes("v"))
    }

    @Test("countExpired counts keys whose time is up but that are still stored")
    func countExpired() {
        let shard = Shard()
        for i in 0..<10 { shard.put(key(i), [], expiry: start + Int64(i) * 100) }
        shard.put(bytes("forever"), [])
        #expect(shard.lock.withLock { shard.countExpired(now: start + 450) } == 5)
    }
}

@Suite("Expiry: the sweeper")
struct SweepTests {
    @Test("Sweeping reclaims every due key once its 64 ms slot has passed")
    func reclaimsEveryDueKey() {
        let shard = Shard()
        var generator = SeededGenerator(seed: 1)
        for i in 0..<10_000 { shard.put(key(i), [], expiry: start + Int64.random(in: 1...100_000, using: &generator)) }
        shard.sweepAll(now: start + 100_000 + sweepLag)
        #expect(shard.count == 0)
        #expect(shard.expiresCount == 0)
        #expect(shard.expiredKeys == 10_000)
    }

    @Test("Sweeping removes exactly the keys that are due, step after step")
    func removesOnlyDueKeys() {
        let shard = Shard()
        var generator = SeededGenerator(seed: 2)
        var expiries: [Int: Int64] = [:]
        for i in 0..<3_000 {
            let e = start + Int64.random(in: 1...20_000, using: &generator)
            expiries[i] = e
            shard.put(key(i), [], expiry: e)
        }
        var now = start
        while now < start + 21_000 {
            now += Int64.random(in: 1...700, using: &generator)
            shard.sweepAll(now: now)
            let present = shard.allKeys
            // Keys not due must stay; keys due for longer than the sweeper's granularity must be gone.
            let wrong = expiries.filter { i, e in
                present.contains(key(i)) ? e < now - sweepLag : e >= now
            }
            #expect(wrong.isEmpty, "at \(now - start) ms: \(wrong.count) keys wrong")
            if !wrong.isEmpty { break }
        }
    }

    @Test("Sweeping never removes keys with a far TTL, no TTL, or a TTL extended or removed after it was set")
    func neverRemovesKeysThatAreNotDue() {
        let shard = Shard()
        shard.put(bytes("far"), [], expiry: start + 10 * 86_400_000)
        shard.put(bytes("none"), [])
        shard.put(bytes("extended"), [], expiry: start + 1_000)
        shard.changeExpiry(bytes("extended"), to: start + 86_400_000)
        shard.put(bytes("persisted"), [], expiry: start + 1_000)
        shard.changeExpiry(bytes("persisted"), to: nil)
        shard.put(bytes("reset"), [], expiry: start + 1_000)
        shard.put(bytes("reset"), [])  // plain SET clears the TTL
        shard.put(bytes("due"), [], expiry: start + 1_000)
        for step in 1...200 { shard.sweepAll(now: start + Int64(step) * 500) }
        #expect(shard.allKeys == Set([bytes("far"), bytes("none"), bytes("extended"), bytes("persisted"), bytes("reset")]))
        #expect(shard.expiredKeys == 1)
    }

    @Test("Keys hours and days away wait in far windows and are reclaimed when due")
    func farWindowsCascade() {
        let shard = Shard()
        var generator = SeededGenerator(seed: 4)
        var expiries: [Int: Int64] = [:]
        let hour: Int64 = 3_600_000
        for i in 0..<2_000 {
            let e = start + Int64.random(in: hour...(3 * 24 * hour), using: &generator)
            expiries[i] = e
            shard.put(key(i), [], expiry: e)
        }
        // A few near keys too, so that the wheel has something to do before the far windows come in reach.
        for i in 2_000..<2_050 {
            let e = start + Int64.random(in: 1...60_000, using: &generator)
            expiries[i] = e
            shard.put(key(i), [], expiry: e)
        }
        var now = start
        while now <= start + 3 * 24 * hour + 1 {
            now += Int64.random(in: 1...(2 * hour), using: &generator)
            shard.sweepAll(now: now)
            let present = shard.allKeys
            // Keys not due must stay; keys due for longer than the sweeper's granularity must be gone.
            let wrong = expiries.filter { i, e in
                present.contains(key(i)) ? e < now - sweepLag : e >= now
            }
            #expect(wrong.isEmpty, "at \(now - start) ms: \(wrong.count) keys wrong")
            if !wrong.isEmpty { break }
        }
        #expect(shard.count == 0)
    }

    @Test("A key whose far TTL was brought near is reclaimed at its new time")
    func farTTLBroughtNear() {
        let shard = Shard()
        shard.put(bytes("k"), [], expiry: start + 5 * 86_400_000)
        shard.changeExpiry(bytes("k"), to: start + 2_000)
        shard.sweepAll(now: start + 2_000)
        #expect(shard.holds(bytes("k")))
        shard.sweepAll(now: start + 2_000 + sweepLag)
        #expect(!shard.holds(bytes("k")))
    }

    @Test("Sweeping respects its budget and finishes the work on later calls")
    func respectsBudget() {
        let shard = Shard()
        for i in 0..<5_000 { shard.put(key(i), [], expiry: start + Int64(i % 300)) }
        let budget = 100
        var calls = 0
        while shard.count > 0 && calls < 1_000 {
            let before = shard.count
            let work = shard.lock.withLock { shard.sweepExpired(now: start + 1_000, budget: budget) }
            #expect(work <= budget + 8)
            #expect(shard.count < before)
            calls += 1
        }
        #expect(shard.count == 0)
        #expect(calls >= 5_000 / (budget + 8))
        #expect(shard.lock.withLock { shard.sweepExpired(now: start + 1_000, budget: budget) } < budget)
    }

    @Test("Overwriting one key's TTL 100k times keeps the expiry index bounded")
    func staleRegistrationsBoundedOnTTLChanges() {
        let shard = Shard()
        shard.put(bytes("k"), bytes("v"), expiry: start + 1)
        var maximum = 0
        for i in 0..<100_000 {
            shard.put(bytes("k"), bytes("v"), expiry: start + 86_400_000 + Int64(i) * 10)
            maximum = max(maximum, shard.expiryRegistrations)
        }
        #expect(maximum <= 4_096)
        #expect(shard.storedExpiry(bytes("k")) == .some(start + 86_400_000 + 999_990))
        shard.sweepAll(now: start + 86_400_000 + 999_990)
        #expect(shard.holds(bytes("k")))
        shard.sweepAll(now: start + 86_400_000 + 999_990 + sweepLag)
        #expect(!shard.holds(bytes("k")))
    }

    @Test("Deleting and re-adding a key with a TTL 100k times keeps the expiry index bounded")
    func staleRegistrationsBoundedOnDeletes() {
        let shard = Shard()
        var maximum = 0
        for i in 0..<100_000 {
            shard.put(bytes("k"), bytes("v"), expiry: start + 1_000_000 + Int64(i))
            shard.delete(bytes("k"))
            maximum = max(maximum, shard.expiryRegistrations)
        }
        #expect(maximum <= 4_096)
    }
}
