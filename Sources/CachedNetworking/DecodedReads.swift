import NIOCore
import Synchronization

/// Entries read from (or written to) a store that keeps no decoded form of its values — a ``RESPStore`` or a
/// ``RESPClusterStore`` — kept decoded beside their bytes, so that a read that brings back the same bytes skips
/// decoding them, checking their checksum and preparing their reuse facts again (several microseconds for a
/// 1 KiB response, against a few tens of nanoseconds to compare the bytes).
///
/// It never answers in place of the store: every read still goes to the store, and only bytes equal to the ones
/// kept, byte for byte, get the kept decoded form; a value that changed in the store is decoded afresh and
/// replaces it. Decoding is a function of the bytes (and of the rules the reuse facts were prepared with, which
/// are checked as for ``DecodedEnvelopeStore``), so the answer is the one decoding would give.
///
/// Bounded by bytes (each entry charged its key, its value and ``entryOverhead``) and evicted with SIEVE, like
/// ``MemoryStore``. The decoded form shares the value's body bytes.
final class DecodedReads: Sendable {
    /// Bytes charged per entry beyond its key and value, for the decoded fields and the table's slot.
    static let entryOverhead = 512

    private let table: Mutex<SieveTable>

    /// A memo of at most `maxBytes` (at least 1).
    init(maxBytes: Int) {
        table = Mutex(SieveTable(maxBytes: max(1, maxBytes), entryOverhead: Self.entryOverhead))
    }

    /// The decoded form kept for `key` when it was made from exactly `bytes`; nil otherwise.
    func decoded(_ key: StoreKey, bytes: ByteBuffer) -> DecodedEnvelope? {
        table.withLock { table in
            guard let kept = table.getDecoded(key, now: 0), kept.value == bytes else { return nil }
            return kept.decoded
        }
    }

    /// Keeps `decoded`, the decoded form of `bytes`, for `key` (replacing what was kept for it).
    func remember(_ key: StoreKey, bytes: ByteBuffer, decoded: DecodedEnvelope) {
        table.withLock { $0.set(key, value: bytes, decoded: decoded, expiresAt: .max, now: 0) }
    }

    /// Entries kept, and the bytes charged for them.
    var usage: (count: Int, bytes: Int) { table.withLock { ($0.count, $0.bytes) } }
}
