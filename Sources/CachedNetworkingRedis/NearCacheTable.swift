import CachedNetworking
import NIOCore

/// The near cache's bookkeeping, without locks or I/O: the entries (a ``SieveTable``, bounded in bytes) and the
/// invalidation epochs that keep a stale reply out of the table.
///
/// ## Epochs
///
/// `sequence` counts invalidation events. A read takes a ``ReadTicket`` — the sequence at that moment — before
/// its command is sent. Invalidating keys bumps the sequence and records it against each key; a flush bumps it
/// and raises `watermark` to it. A reply fills the table only if the table was filling when its ticket was
/// taken and neither its key nor everything was invalidated after that: otherwise the reply may carry a value
/// that an invalidation already overtook (the invalidation arrived on the subscriber's connection while the
/// reply was still on its way on a data connection), and storing it would keep the old value with nothing
/// left to remove it.
///
/// Only tickets in flight can be older than a recorded invalidation, so the per-key records are dropped
/// whenever no read is in flight; if they grow past `maxRememberedInvalidations` meanwhile, they are replaced
/// by a raised watermark (the reads in flight then fill nothing, which is always safe).
///
/// Times are nanoseconds on the owner's clock; `Int64.max` means no expiry.
struct NearCacheTable {
    /// A read in flight: when it was started, in epochs and on the clock.
    struct ReadTicket: Sendable {
        /// The sequence when the read was started.
        let sequence: UInt64
        /// Whether the table was filling then.
        let fillable: Bool
        /// The clock when the read was started, before the command was sent: a TTL the server reports is
        /// counted from here, so that an entry expires no later than the server's key.
        let startedAt: Int64
    }

    /// What became of a reply offered to ``fill(_:key:value:ttlMilliseconds:)``.
    enum FillOutcome: Equatable {
        /// Stored.
        case filled
        /// Not stored: the key or everything was invalidated after the ticket was taken, or the table was not
        /// filling.
        case refused
        /// Not stored: nothing to store (no value, the key is gone or about to expire, outside the tracked
        /// prefixes).
        case skipped
    }

    private(set) var entries: SieveTable
    /// Invalidation events so far.
    private(set) var sequence: UInt64 = 0
    /// Tickets older than this fill nothing.
    private(set) var watermark: UInt64 = 0
    /// The sequence of each key's last invalidation, while reads are in flight.
    private var invalidatedAt: [StoreKey: UInt64] = [:]
    private(set) var readsInFlight = 0
    /// Whether replies may fill the table: the invalidation channel is up and connections track their reads.
    private(set) var filling = false

    /// The longest an entry is kept, in nanoseconds; nil for as long as the server keeps the key.
    let maxAge: Int64?
    /// Only keys with one of these prefixes are stored; nil for every key.
    let prefixes: [String]?
    let maxRememberedInvalidations: Int

    init(maxBytes: Int, entryOverhead: Int, maxAge: Int64?, prefixes: [String]?, maxRememberedInvalidations: Int = 4096) {
        self.entries = SieveTable(maxBytes: max(1, maxBytes), entryOverhead: max(0, entryOverhead))
        self.maxAge = maxAge.map { max(1, $0) }
        self.prefixes = prefixes.map { $0.filter { !$0.isEmpty } }.flatMap { $0.isEmpty ? nil : $0 }
        self.maxRememberedInvalidations = max(1, maxRememberedInvalidations)
    }

    /// Entries held (expired ones not yet touched included).
    var count: Int { entries.count }
    /// Bytes charged for the entries; never more than the budget.
    var bytes: Int { entries.bytes }

    /// Whether `key` may be stored at all (it has one of the tracked prefixes).
    func admits(_ key: StoreKey) -> Bool {
        guard let prefixes else { return true }
        return prefixes.contains { key.string.utf8.starts(with: $0.utf8) }
    }

    // MARK: reads

    /// The value under `key` if a live entry holds it (marking it visited for SIEVE).
    mutating func lookup(_ key: StoreKey, now: Int64) -> ByteBuffer? {
        entries.get(key, now: now)
    }

    /// Starts a read: call before its command is sent, and ``endRead(_:)`` once its replies were offered.
    mutating func beginRead(now: Int64) -> ReadTicket {
        readsInFlight += 1
        return ReadTicket(sequence: sequence, fillable: filling, startedAt: now)
    }

    /// Offers a reply read under `ticket`: `value` (nil for none) and the key's remaining time to live as
    /// `PTTL` reported it (-1 for none, -2 when the key is gone).
    ///
    /// The entry expires `PTTL - margin` milliseconds after the ticket was taken: the server measured the TTL
    /// later than that, but in whole milliseconds of a clock it truncates and, in Redis, caches for the whole
    /// command (or event-loop iteration), which can overstate the time left by a millisecond, or by several when
    /// the server's thread was descheduled. The margin is 1% of the TTL, at least 1 ms and at most 50 ms:
    /// an entry leaves the near cache a little early rather than outlive the key.
    mutating func fill(_ ticket: ReadTicket, key: StoreKey, value: ByteBuffer?, ttlMilliseconds: Int64) -> FillOutcome {
        guard let value, ttlMilliseconds == -1 || ttlMilliseconds > 1, admits(key) else { return .skipped }
        guard ticket.fillable, filling, ticket.sequence >= watermark,
            (invalidatedAt[key] ?? 0) <= ticket.sequence
        else { return .refused }
        var expiresAt = Int64.max
        if ttlMilliseconds > 0 {
            let margin = max(1, min(ttlMilliseconds / 100, 50))
            let (ttl, overflow) = (ttlMilliseconds - margin).multipliedReportingOverflow(by: 1_000_000)
            if !overflow { expiresAt = Self.adding(ttl, to: ticket.startedAt) }
        }
        if let maxAge { expiresAt = min(expiresAt, Self.adding(maxAge, to: ticket.startedAt)) }
        entries.set(key, value: value, expiresAt: expiresAt, now: ticket.startedAt)
        return entries.index[key] == nil ? .skipped : .filled
    }

    /// Ends a read started with ``beginRead(now:)`` (whether or not it got replies).
    mutating func endRead(_ ticket: ReadTicket) {
        readsInFlight -= 1
        if readsInFlight == 0 { invalidatedAt.removeAll(keepingCapacity: true) }
    }

    // MARK: invalidation

    /// Drops `keys` and keeps reads in flight from storing them.
    /// - Returns: how many entries were dropped.
    @discardableResult
    mutating func invalidate(_ keys: some Sequence<StoreKey>) -> Int {
        sequence += 1
        var dropped = 0
        for key in keys {
            if let slot = entries.index[key] {
                entries.remove(slot: slot)
                dropped += 1
            }
            guard readsInFlight > 0 else { continue }
            if invalidatedAt.count >= maxRememberedInvalidations {
                watermark = sequence
                invalidatedAt.removeAll(keepingCapacity: true)
            } else if watermark < sequence {
                invalidatedAt[key] = sequence
            }
        }
        return dropped
    }

    /// Drops every entry and keeps every read in flight from storing anything.
    /// - Returns: how many entries were dropped.
    @discardableResult
    mutating func invalidateAll() -> Int {
        sequence += 1
        watermark = sequence
        invalidatedAt.removeAll(keepingCapacity: true)
        let dropped = entries.count
        entries.removeAll()
        return dropped
    }

    /// The invalidation channel is up and connections track their reads: reads started from now on may fill.
    mutating func startFilling() {
        filling = true
    }

    /// The invalidation channel is down (or tracking failed): drops everything, and nothing fills the table
    /// until ``startFilling()``.
    /// - Returns: how many entries were dropped.
    @discardableResult
    mutating func stopFilling() -> Int {
        filling = false
        return invalidateAll()
    }

    private static func adding(_ duration: Int64, to instant: Int64) -> Int64 {
        let (sum, overflow) = instant.addingReportingOverflow(duration)
        return overflow ? .max - 1 : sum
    }
}
