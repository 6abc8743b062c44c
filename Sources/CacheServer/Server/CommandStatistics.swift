import Glibc
import NIOCore
import Synchronization

/// INFO commandstats and errorstats: per command and subcommand its calls, time and failures, and error
/// replies by their first word.
///
/// Each event loop counts into its own ``CommandStatistics`` (one writer: relaxed loads and stores, no locked
/// instruction on the request path); INFO adds the loops' counts up, and CONFIG RESETSTAT records a baseline
/// to subtract rather than writing into counters another thread owns.
package final class CommandStatisticsRegistry: Sendable {
    /// The first counter slot of each command of the table; a container's subcommands follow its own slot.
    private let slotBase: [Int]
    /// "get", "client|id": each slot's name.
    package let slotNames: [String]
    private let loops = Mutex<[ObjectIdentifier: CommandStatistics]>([:])
    private let tables = Mutex<[CommandStatistics]>([])
    /// Counts of sessions outside the server's event loops (tests that drive sessions directly).
    package let unbound: CommandStatistics
    private let baseline = Mutex<Totals?>(nil)

    package init(commands: CommandTable) {
        var base: [Int] = []
        var names: [String] = []
        for spec in commands.commands {
            base.append(names.count)
            names.append(spec.name)
            for sub in spec.subcommands { names.append("\(spec.name)|\(sub.name)") }
        }
        slotBase = base
        slotNames = names
        unbound = CommandStatistics(slots: names.count)
        tables.withLock { $0.append(unbound) }
    }

    /// Gives each event loop of `group` its own table (once, before connections arrive).
    package func configure(loops group: any EventLoopGroup) {
        for loop in group.makeIterator() {
            let table = CommandStatistics(slots: slotNames.count)
            loops.withLock { $0[ObjectIdentifier(loop)] = table }
            tables.withLock { $0.append(table) }
        }
    }

    /// The table of `eventLoop`'s connections.
    package func statistics(for eventLoop: any EventLoop) -> CommandStatistics {
        loops.withLock { $0[ObjectIdentifier(eventLoop)] } ?? unbound
    }

    /// The slot of command `index` of the table, or of its subcommand `subcommand`.
    @inline(__always)
    package func slot(command index: Int, subcommand: Int?) -> Int {
        slotBase[index] + (subcommand.map { $0 + 1 } ?? 0)
    }

    /// What the tables hold, less the baseline of the last CONFIG RESETSTAT.
    package struct Totals: Sendable {
        package var calls: [Int]
        package var nanoseconds: [Int]
        package var failed: [Int]
        package var rejected: [Int]
        package var errors: [String: Int]
        /// Each slot's latency counts (``LatencyBuckets``), nil for a command never timed.
        package var latencies: [[Int]?]
    }

    private func sum() -> Totals {
        var totals = Totals(
            calls: Array(repeating: 0, count: slotNames.count), nanoseconds: Array(repeating: 0, count: slotNames.count),
            failed: Array(repeating: 0, count: slotNames.count), rejected: Array(repeating: 0, count: slotNames.count),
            errors: [:], latencies: Array(repeating: nil, count: slotNames.count))
        for table in tables.withLock({ $0 }) {
            for slot in 0..<slotNames.count {
                let counters = table.counters[slot]
                totals.calls[slot] += counters.calls.load(ordering: .relaxed)
                totals.nanoseconds[slot] += counters.nanoseconds.load(ordering: .relaxed)
                totals.failed[slot] += counters.failed.load(ordering: .relaxed)
                totals.rejected[slot] += counters.rejected.load(ordering: .relaxed)
                if let counts = counters.latencyCounts {
                    totals.latencies[slot] = zip(totals.latencies[slot] ?? counts.map { _ in 0 }, counts).map { $0 + $1 }
                }
            }
            for (prefix, count) in table.errors.withLock({ $0 }) { totals.errors[prefix, default: 0] += count }
        }
        return totals
    }

    package var totals: Totals {
        var totals = sum()
        guard let base = baseline.withLock({ $0 }) else { return totals }
        for slot in 0..<slotNames.count {
            totals.calls[slot] -= base.calls[slot]
            totals.nanoseconds[slot] -= base.nanoseconds[slot]
            totals.failed[slot] -= base.failed[slot]
            totals.rejected[slot] -= base.rejected[slot]
            if let now = totals.latencies[slot], let before = base.latencies[slot] {
                let left = zip(now, before).map { $0 - $1 }
                totals.latencies[slot] = left.contains { $0 != 0 } ? left : nil
            }
        }
        for (prefix, count) in base.errors {
            totals.errors[prefix, default: 0] -= count
            if totals.errors[prefix] == 0 { totals.errors[prefix] = nil }
        }
        return totals
    }

    /// CONFIG RESETSTAT: counts start again from zero.
    package func reset() {
        let now = sum()
        baseline.withLock { $0 = now }
    }
}

/// One event loop's counts. Only that loop writes them.
package final class CommandStatistics: Sendable {
    package final class Counters: @unchecked Sendable {
        let calls = Atomic<Int>(0)
        let nanoseconds = Atomic<Int>(0)
        let failed = Atomic<Int>(0)
        let rejected = Atomic<Int>(0)
        /// The latency buckets (``LatencyBuckets``), allocated by the owning loop on the first call it times.
        let latencies = Atomic<UnsafeMutablePointer<Atomic<Int>>?>(nil)

        /// The latency counts, when any call was timed.
        var latencyCounts: [Int]? {
            latencies.load(ordering: .acquiring).map(LatencyBuckets.read)
        }

        deinit {
            if let block = latencies.load(ordering: .acquiring) { LatencyBuckets.deallocate(block) }
        }
    }

    let counters: [Counters]
    /// Error replies by their first word ("ERR", "WRONGTYPE"...). Touched only when a reply is an error.
    let errors = Mutex<[String: Int]>([:])

    init(slots: Int) {
        counters = (0..<slots).map { _ in Counters() }
    }

    @inline(__always)
    private static func bump(_ counter: borrowing Atomic<Int>, by amount: Int = 1) {
        counter.store(counter.load(ordering: .relaxed) &+ amount, ordering: .relaxed)
    }

    /// A call of the command in `slot` that ran for `nanoseconds`, and whether its reply was an error; with
    /// `timed`, its time also counts in the command's latency histogram (`latency-tracking`).
    @inline(__always)
    package func recordCall(slot: Int, nanoseconds: Int, failed: Bool, timed: Bool = true) {
        guard slot >= 0 else { return }
        let counters = counters[slot]
        Self.bump(counters.calls)
        Self.bump(counters.nanoseconds, by: nanoseconds)
        if failed { Self.bump(counters.failed) }
        if timed {
            let block = counters.latencies.load(ordering: .relaxed) ?? Self.allocateLatencies(counters)
            Self.bump(block[LatencyBuckets.index(nanoseconds)])
        }
    }

    /// The first timed call of a command on this loop: its buckets, published for readers.
    @inline(never)
    private static func allocateLatencies(_ counters: Counters) -> UnsafeMutablePointer<Atomic<Int>> {
        let block = LatencyBuckets.allocate()
        counters.latencies.store(block, ordering: .releasing)
        return block
    }

    /// A command refused before it ran (arity, authentication, memory...).
    package func recordRejection(slot: Int) {
        Self.bump(counters[slot].rejected)
    }

    /// A call counted already whose reply, sent later, is an error (WAIT released by CLIENT UNBLOCK ... ERROR).
    package func recordFailure(slot: Int) {
        guard slot >= 0 else { return }
        Self.bump(counters[slot].failed)
    }

    /// An error reply whose first word is `prefix`.
    package func recordError(prefix: String) {
        errors.withLock { $0[prefix, default: 0] += 1 }
    }
}

/// The monotonic clock in nanoseconds, for command durations.
@inline(__always)
package func monotonicNanoseconds() -> Int {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return time.tv_sec * 1_000_000_000 + time.tv_nsec
}
