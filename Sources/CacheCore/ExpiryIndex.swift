/// Finds a shard's keys when their time is up, without looking at keys that are not due.
///
/// A two-level timer wheel of key hashes: expiry times within the cursor's 65.5-second window and the next
/// one go into 64-millisecond slots ("near"); later ones wait in one list per window ("far") and are spread
/// into slots when the cursor comes within a window of them. Draining a slot whose time has wholly passed
/// yields hashes of keys that are due, so a sweep costs time in proportion to the keys it reclaims.
///
/// It keeps the low 32 bits of each hash: enough to find the key's slot and tag in its shard (the shard is
/// implied), and a false match costs nothing, since a key is removed only when it really is due.
///
/// The index holds hashes, not pointers, so removing a key or changing its TTL does not have to find it
/// here: the stale hash is dropped when its slot is drained (the shard looks the hash up and finds no due
/// key), and the shard rebuilds the index if stale hashes pile up.
struct ExpiryIndex {
    static let slotShift: Int64 = 6
    static let windowShift: Int64 = 10

    private var near: [Int64: ContiguousArray<UInt32>] = [:]
    private var far: [Int64: ContiguousArray<UInt32>] = [:]
    /// The next near slot to drain: near slots before it are empty.
    private var cursor: Int64 = .max
    /// Far lists of windows up to `cascadedWindow + 1` have been spread into near slots.
    private var cascadedWindow: Int64 = .max - 1
    /// Hashes held, live or stale.
    private(set) var registrations = 0

    init() {}

    var isEmpty: Bool { registrations == 0 }

    /// Records that the key with `hash` expires at `expiry` (milliseconds).
    mutating func register(hash: UInt64, expiry: Int64) {
        let slot = max(expiry, 0) >> Self.slotShift
        if registrations == 0 && near.isEmpty && far.isEmpty {
            cursor = slot
            cascadedWindow = slot >> Self.windowShift
        }
        let window = slot >> Self.windowShift
        if window <= cascadedWindow + 1 {
            near[slot, default: []].append(UInt32(truncatingIfNeeded: hash))
            // Moving the cursor back is always safe: the slots it passes again are empty.
            if slot < cursor { cursor = slot }
        } else {
            far[window, default: []].append(UInt32(truncatingIfNeeded: hash))
        }
        registrations += 1
    }

    /// What ``takeDue(now:)`` hands out: hashes to check, from a near slot that lies wholly in the past, or
    /// from a far window that is being spread into near slots (`isCascade`).
    struct Batch {
        var hashes: ContiguousArray<UInt32>
        var slot: Int64
        var isCascade: Bool
    }

    /// Takes the next list of hashes to process at `now`, or nil when nothing is due.
    mutating func takeDue(now: Int64) -> Batch? {
        guard registrations > 0 else { return nil }
        let limit = now >> Self.slotShift  // keys in slots before this one all expired before `now`
        while true {
            let window = cursor >> Self.windowShift
            if window > cascadedWindow {
                cascadedWindow = window
            }
            if let w = far.keys.first(where: { $0 <= cascadedWindow + 1 }) {
                let hashes = far.removeValue(forKey: w)!
                registrations -= hashes.count
                return Batch(hashes: hashes, slot: w, isCascade: true)
            }
            guard cursor < limit else { return nil }
            if let hashes = near.removeValue(forKey: cursor) {
                registrations -= hashes.count
                return Batch(hashes: hashes, slot: cursor, isCascade: false)
            }
            // Jump to the next slot that holds anything, but stop at the window where far lists come in reach.
            var target = near.keys.min() ?? limit
            if let nextFar = far.keys.min() { target = min(target, (nextFar - 1) << Self.windowShift) }
            cursor = max(cursor + 1, min(target, limit))
        }
    }

    /// Returns the unprocessed rest of a batch (when a sweep ran out of budget).
    mutating func putBack(_ batch: Batch) {
        guard !batch.hashes.isEmpty else { return }
        registrations += batch.hashes.count
        if batch.isCascade {
            far[batch.slot, default: []].append(contentsOf: batch.hashes)
        } else {
            near[batch.slot, default: []].append(contentsOf: batch.hashes)
            cursor = min(cursor, batch.slot)
        }
    }
}
