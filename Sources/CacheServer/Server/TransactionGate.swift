import Glibc
import NIOCore
import Synchronization

/// Lets a transaction (EXEC) run its commands with no other client's command in between, as Redis's single
/// thread does, on a server whose clients are spread over several event loops.
///
/// Each event loop has a ``Lane``, marked busy while the loop runs the commands of a read. EXEC takes the
/// gate's turn, closes the gate, waits until no other lane is busy, runs the transaction and opens the gate
/// again; a loop that finds the gate closed when it is about to run commands waits for the turn. With one
/// event loop (the default on up to two cores) there is nothing to wait for: the lanes do nothing, and EXEC
/// runs at once, since every client's commands run on the same thread.
///
/// The price on the request path, with several loops: a sequentially consistent store and a load when a loop
/// starts on a read's commands, and a store when it is done (not per command); nothing while the loop waits
/// in `epoll_wait`. The expiry sweeper and background saves are not held up: a key may expire during a
/// transaction, as it may between two commands.
package final class TransactionGate: Sendable {
    /// One event loop's lane. Touched by its loop, and read by a loop running EXEC.
    package final class Lane: @unchecked Sendable {
        /// Whether the gate applies (the server has more than one event loop).
        fileprivate let gated: Bool
        fileprivate let busy = Atomic<Bool>(false)
        /// Nesting of ``TransactionGate/enter(_:)`` on the loop; on the loop only.
        @exclusivity(unchecked) fileprivate var depth = 0
        /// Whether the loop runs inside ``TransactionGate/exclusively(from:_:)`` (a command that needs the server
        /// to itself, inside EXEC, has it already); on the loop only.
        @exclusivity(unchecked) fileprivate var exclusive = false

        fileprivate init(gated: Bool) {
            self.gated = gated
        }
    }

    private struct Lanes: @unchecked Sendable {
        var byLoop: [ObjectIdentifier: Lane] = [:]
        var all: [Lane] = []
    }

    private let lanes = Mutex(Lanes())
    /// Closed while a transaction runs (or waits for the other lanes to finish).
    private let closed = Atomic<Bool>(false)
    /// Held by the transaction that runs, or waits to run; one at a time.
    private let turn = Mutex(())

    package init() {}

    /// Gives each event loop of `group` a lane (once, before connections arrive).
    package func configure(loops group: any EventLoopGroup) {
        let loops = Array(group.makeIterator())
        lanes.withLock { lanes in
            let gated = loops.count > 1
            for loop in loops {
                let lane = Lane(gated: gated)
                lanes.byLoop[ObjectIdentifier(loop)] = lane
                lanes.all.append(lane)
            }
        }
    }

    /// The lane of `eventLoop`; nil for a loop outside the server's group (an embedded channel in tests).
    package func lane(for eventLoop: any EventLoop) -> Lane? {
        lanes.withLock { $0.byLoop[ObjectIdentifier(eventLoop)] }
    }

    /// Marks the start of a read's commands on `lane`'s loop; waits while a transaction runs elsewhere.
    @inline(__always)
    package func enter(_ lane: Lane) {
        guard lane.gated else { return }
        lane.depth += 1
        guard lane.depth == 1 else { return }
        lane.busy.store(true, ordering: .sequentiallyConsistent)
        if closed.load(ordering: .sequentiallyConsistent) { waitForTransaction(lane) }
    }

    /// Marks the end of what ``enter(_:)`` began.
    @inline(__always)
    package func leave(_ lane: Lane) {
        guard lane.gated else { return }
        lane.depth -= 1
        if lane.depth == 0 { lane.busy.store(false, ordering: .releasing) }
    }

    @inline(never)
    private func waitForTransaction(_ lane: Lane) {
        repeat {
            lane.busy.store(false, ordering: .sequentiallyConsistent)
            turn.withLock { _ in }  // the transaction holds the turn until it is done
            lane.busy.store(true, ordering: .sequentiallyConsistent)
        } while closed.load(ordering: .sequentiallyConsistent)
    }

    /// Runs `body` (a transaction's commands, MIGRATE, CLIENT PAUSE) while no other event loop runs commands.
    /// `lane` is the lane of the calling loop, which is inside ``enter(_:)``; nil runs `body` at once, and so
    /// does a call from inside another (MIGRATE in EXEC).
    package func exclusively<Result>(from lane: Lane?, _ body: () -> Result) -> Result {
        guard let lane, lane.gated, !lane.exclusive else { return body() }
        // Not busy while waiting for the turn, so that the transaction holding it does not wait for this loop.
        lane.busy.store(false, ordering: .sequentiallyConsistent)
        let others = lanes.withLock { $0.all.filter { $0 !== lane } }
        return turn.withLock { _ in
            closed.store(true, ordering: .sequentiallyConsistent)
            for other in others {
                var spins = 0
                while other.busy.load(ordering: .sequentiallyConsistent) {
                    spins += 1
                    // A read's commands take microseconds; a loop inside a long one (SAVE) gets the core.
                    if spins > 1_000 { sched_yield() }
                }
            }
            lane.busy.store(true, ordering: .sequentiallyConsistent)
            lane.exclusive = true
            defer {
                lane.exclusive = false
                closed.store(false, ordering: .sequentiallyConsistent)
            }
            return body()
        }
    }
}
