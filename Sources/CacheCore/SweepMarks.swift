import Synchronization

/// Which shards of a database have work for the background sweeper: keys with a time to live in their expiry
/// index, or a change to their memory total not yet added to the budget's. A shard marks itself when it turns
/// from clean to dirty (one atomic OR, with its lock held) and the sweeper unmarks it once it has nothing left;
/// a sweep then locks only the marked shards instead of all 256 of every database on every tick, which took
/// about a third of a millisecond on a thread that has to take a core from the clients or the event loop.
package final class SweepMarks: Sendable {
    /// One bit per shard: shards 0–63 in the first word, and so on.
    private let word0 = Atomic<UInt64>(0)
    private let word1 = Atomic<UInt64>(0)
    private let word2 = Atomic<UInt64>(0)
    private let word3 = Atomic<UInt64>(0)

    /// The number of shards a set of marks covers.
    package static let capacity = 256

    package init() {}

    /// Marks shard `index` (0..<256).
    package func mark(_ index: Int) {
        let bit = UInt64(1) << UInt64(index & 63)
        switch index >> 6 {
        case 0: word0.bitwiseOr(bit, ordering: .relaxed)
        case 1: word1.bitwiseOr(bit, ordering: .relaxed)
        case 2: word2.bitwiseOr(bit, ordering: .relaxed)
        default: word3.bitwiseOr(bit, ordering: .relaxed)
        }
    }

    /// Unmarks shard `index` (0..<256).
    package func unmark(_ index: Int) {
        let keep = ~(UInt64(1) << UInt64(index & 63))
        switch index >> 6 {
        case 0: word0.bitwiseAnd(keep, ordering: .relaxed)
        case 1: word1.bitwiseAnd(keep, ordering: .relaxed)
        case 2: word2.bitwiseAnd(keep, ordering: .relaxed)
        default: word3.bitwiseAnd(keep, ordering: .relaxed)
        }
    }

    /// Whether shard `index` is marked.
    package func isMarked(_ index: Int) -> Bool { load(word: index >> 6) & (UInt64(1) << UInt64(index & 63)) != 0 }

    /// Calls `body` with the index of every shard marked when it reads that shard's word, in order. A shard
    /// marked while it runs may be left for the next call.
    package func forEachMarked(_ body: (Int) -> Void) {
        for w in 0..<4 {
            var bits = load(word: w)
            while bits != 0 {
                let bit = bits.trailingZeroBitCount
                bits &= bits - 1
                body(w * 64 + bit)
            }
        }
    }

    private func load(word: Int) -> UInt64 {
        switch word {
        case 0: word0.load(ordering: .relaxed)
        case 1: word1.load(ordering: .relaxed)
        case 2: word2.load(ordering: .relaxed)
        default: word3.load(ordering: .relaxed)
        }
    }
}
