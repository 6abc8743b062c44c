import Synchronization

/// Command latencies in nanoseconds, counted in log-linear buckets: exact below 32 ns, then 16 buckets to each
/// power of two (a bucket is at most 1/16 of its lower bound wide), up to 2^37 ns (about 137 s; longer calls
/// count in the last bucket). INFO latencystats reads percentiles from it and LATENCY HISTOGRAM counts at
/// powers of two, as Redis does from its HdrHistogram.
///
/// The counts live in one block allocated on a command's first call. Only the event loop that owns it writes
/// (relaxed loads and stores, no locked instruction); INFO and LATENCY on other threads read.
package struct LatencyBuckets {
    static let perMagnitude = 16
    /// Buckets 0...543: values 0...31 one each, then 16 per power of two from 2^5 to 2^37.
    package static let count = 34 * perMagnitude
    static let largest = (1 << 37) - 1

    /// The bucket counting a call of `nanoseconds`.
    @inline(__always)
    package static func index(_ nanoseconds: Int) -> Int {
        let v = UInt64(min(max(nanoseconds, 0), largest))
        if v < 32 { return Int(v) }
        // v >> magnitude is 16...31: the bucket within the power of two.
        let magnitude = 59 - v.leadingZeroBitCount
        return magnitude * perMagnitude + Int(v >> UInt64(magnitude))
    }

    /// The largest value bucket `index` counts.
    package static func upperBound(_ index: Int) -> Int {
        if index < 32 { return index }
        let magnitude = index / perMagnitude - 1
        let step = index % perMagnitude + perMagnitude
        return ((step + 1) << magnitude) - 1
    }

    /// The first bucket of values from `value` on, for a power of two `value` of at least 32.
    static func firstIndex(atLeast value: Int) -> Int { index(value) }

    /// Allocates a zeroed block of counts.
    static func allocate() -> UnsafeMutablePointer<Atomic<Int>> {
        let block = UnsafeMutablePointer<Atomic<Int>>.allocate(capacity: count)
        for i in 0..<count { (block + i).initialize(to: Atomic(0)) }
        return block
    }

    static func deallocate(_ block: UnsafeMutablePointer<Atomic<Int>>) {
        block.deinitialize(count: count)
        block.deallocate()
    }

    /// A snapshot of a block's counts.
    static func read(_ block: UnsafeMutablePointer<Atomic<Int>>) -> [Int] {
        (0..<count).map { block[$0].load(ordering: .relaxed) }
    }

    // MARK: reading counts

    /// The value at `percentile` (0-100) of `counts`, the upper bound of the bucket where the cumulative count
    /// reaches the percentile's rank (rounded as HdrHistogram rounds it), in nanoseconds; 0 for no calls.
    package static func value(atPercentile percentile: Double, of counts: [Int]) -> Int {
        let total = counts.reduce(0, +)
        guard total > 0 else { return 0 }
        let rank = max(1, Int(percentile / 100 * Double(total) + 0.5))
        var cumulative = 0
        for (i, n) in counts.enumerated() {
            cumulative += n
            if cumulative >= rank { return upperBound(i) }
        }
        return upperBound(counts.count - 1)
    }

    /// LATENCY HISTOGRAM's rows: for each power of two from 1,024 ns on, the calls faster than it, labelled in
    /// microseconds as Redis labels them (1, 2, 4, 8, 16, 33, 66...); only rows where the count grew, up to the
    /// one that holds every call.
    package static func cumulativeRows(_ counts: [Int]) -> [(microseconds: Int, calls: Int)] {
        let total = counts.reduce(0, +)
        var rows: [(microseconds: Int, calls: Int)] = []
        var cumulative = 0
        var next = 0
        var previous = 0
        var k = 0
        while previous < total {
            let boundary = 1024 << k
            let end = boundary > largest ? count : firstIndex(atLeast: boundary)
            while next < end {
                cumulative += counts[next]
                next += 1
            }
            if cumulative > previous {
                // Redis's label: HdrHistogram's highest value equivalent to 1,024 × 2^k at 2 significant digits.
                rows.append(((boundary + (8 << k) - 1) / 1000, cumulative))
                previous = cumulative
            }
            k += 1
        }
        return rows
    }
}
