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
        withWord(index >> 6) { _ = $0.bitwiseOr(UInt64(1) << UInt64(index & 63), ordering: .relaxed) }
    }

    /// Unmarks shard `index` (0..<256).
    package func unmark(_ index: Int) {
        withWord(index >> 6) { _ = $0.bitwiseAnd(~(UInt64(1) << UInt64(index & 63)), ordering: .relaxed) }
    }

    /// Calls `body` with the index of every shard marked when it reads that shard's word, in order. A shard
    /// marked while it runs may be left for the next call.
    package func forEachMarked(_ body: (Int) -> Void) {
        for w in 0..<4 {
            var bits = withWord(w) { $0.load(ordering: .relaxed) }
            while bits != 0 {
                let bit = bits.trailingZeroBitCount
                bits &= bits - 1
                body(w * 64 + bit)
            }
        }
    }

    /// Runs `body` on word `w` (0..<4) of the marks.
    @inline(__always)
    private func withWord<R>(_ w: Int, _ body: (borrowing Atomic<UInt64>) -> R) -> R {
        switch w {
        case 0: body(word0)
        case 1: body(word1)
        case 2: body(word2)
        default: body(word3)
        }
    }
}
