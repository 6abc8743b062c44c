import CBusyPoll
import Glibc
import NIOCore
import Synchronization

/// Keeps an event loop's core busy for a short while after the loop has read from clients, watching their
/// sockets, instead of letting the loop sleep in `epoll_wait` as soon as it has nothing to do (`busy-poll`, in
/// microseconds).
///
/// When a request arrives at a loop that sleeps, the kernel has to wake the loop's thread, and when its core has
/// gone idle too, the core as well; on a virtual machine whose idle cores halt, that takes tens of
/// microseconds, longer than the request itself. Under request/response traffic the next request usually comes
/// within microseconds of the loop running out of work, so watching the sockets a little longer means it finds
/// the loop awake: it is read at once, and the client's `send` wakes nobody.
///
/// The watch runs once the loop has handled everything that was ready (it is a callback the loop runs after its
/// I/O): it checks, without waiting, whether the loop's own epoll set has anything to report (a `poll` on the
/// set, which takes nothing from it), and ends as soon as it has, so that the loop's `epoll_wait` returns it at
/// once; otherwise it ends when the window has passed, and the loop sleeps. During the watch the loop runs
/// nothing else: work handed to it from other threads, or a timer, waits at most one window (NIO does not wake a
/// loop it knows to be running).
///
/// NIO does not tell a loop's set: the poller finds it once, as the epoll set of the process that holds the first
/// connection it is given (`/proc/self/fdinfo`). Watching that set, rather than a second set holding the same
/// sockets, halves the kernel's readiness callbacks on each request, work done on the sending client's core (with
/// 50 clients, about 1 % more requests a second and a p99 one 8 µs step lower). Should it not be found, the poller
/// keeps a set of its own holding the loop's connections. The price of polling is CPU time, at most one window per
/// burst of reads; an idle server does not poll.
package final class BusyPoll: NIOScheduledCallbackHandler, @unchecked Sendable {
    private let eventLoop: any EventLoop
    private let window: @Sendable () -> Int64
    /// What the watch looks at. On the event loop only, after the first ``watch(descriptor:)``.
    @exclusivity(unchecked) private var target = Target.unknown

    private enum Target: Equatable {
        /// Not known yet: no connection so far, or the search could not be made (out of descriptors).
        case unknown
        /// The loop's own epoll set.
        case loopSet(CInt)
        /// An epoll set of the poller's, holding the loop's connections (the loop's was not found).
        case ownSet(CInt)
    }

    // Touched only on the event loop.
    @exclusivity(unchecked) private var pending = false
    @exclusivity(unchecked) private var windowNanoseconds: UInt64 = 0
    /// Watches run to their end so far, and those that ended because the set had something to report. Readable
    /// from any thread without involving the loop (work handed to the loop from another thread is itself something
    /// to report); read ``watches`` first, and ``watchesEndedByInput`` includes those watches.
    package var watches: Int { watchCount.load(ordering: .acquiring) }
    package var watchesEndedByInput: Int { inputCount.load(ordering: .relaxed) }
    private let watchCount = Atomic<Int>(0)
    private let inputCount = Atomic<Int>(0)

    /// A poller for `eventLoop`; `window` tells the current `busy-poll` setting in nanoseconds (0: off).
    package init(eventLoop: any EventLoop, window: @escaping @Sendable () -> Int64) {
        self.eventLoop = eventLoop
        self.window = window
    }

    deinit {
        if case .ownSet(let set) = target { close(set) }
    }

    /// Adds a connection's socket to the sockets the watch looks at (nothing to do when it watches the loop's set,
    /// where the loop registered the socket already); false if the system refused. A socket leaves the set by
    /// itself when it is closed. On the event loop, or before the loop runs a watch.
    @discardableResult
    package func watch(descriptor: CInt) -> Bool {
        if target == .unknown {
            // Searched again at a later connection if it cannot be made now; so is the poller's own set.
            switch cached_epoll_set_holding(descriptor) {
            case -2: return false
            case -1:
                let ownSet = cached_watch_set_create()
                guard ownSet >= 0 else { return false }
                target = .ownSet(ownSet)
            case let loopSet: target = .loopSet(loopSet)
            }
        }
        switch target {
        case .loopSet: return true
        case .ownSet(let set): return cached_watch_set_add(set, descriptor) == 0
        case .unknown: return false
        }
    }

    /// Whether the watch looks at the loop's own epoll set (found from the first connection).
    package var watchesLoopSet: Bool {
        if case .loopSet = target { return true }
        return false
    }

    /// Records a read from a watched connection: a watch runs after the loop has handled what is ready now.
    /// On the event loop only.
    @inline(__always)
    package func noteRead() {
        if !pending { schedule() }
    }

    private func schedule() {
        let window = window()
        guard window > 0, target != .unknown else { return }
        windowNanoseconds = UInt64(window)
        pending = true
        do {
            // Due at once: the loop runs it after the I/O of this pass, before it would sleep.
            _ = try eventLoop.scheduleCallback(at: .uptimeNanoseconds(0), handler: self)
        } catch {
            pending = false  // the loop is shutting down
        }
    }

    package func handleScheduledCallback(eventLoop: some EventLoop) {
        pending = false
        let set: CInt
        let loopSet: Bool
        switch target {
        case .loopSet(let descriptor): (set, loopSet) = (descriptor, true)
        case .ownSet(let descriptor): (set, loopSet) = (descriptor, false)
        case .unknown: return  // nothing to watch
        }
        let start = MonotonicClock.now()
        while true {
            if (loopSet ? cached_epoll_set_ready(set) : cached_watch_set_ready(set)) > 0 {
                // Input or a hang-up, or, in the loop's set, anything else it reports (its eventfd when another
                // thread hands it work, its timerfd when a timer is due): its epoll_wait returns it at once.
                inputCount.add(1, ordering: .relaxed)
                watchCount.add(1, ordering: .releasing)
                return
            }
            if MonotonicClock.now() &- start >= windowNanoseconds {
                watchCount.add(1, ordering: .releasing)
                return
            }
            cached_cpu_relax()
        }
    }

    package func didCancelScheduledCallback(eventLoop: some EventLoop) {
        pending = false
    }
}

/// The monotonic clock in nanoseconds.
private enum MonotonicClock {
    @inline(__always)
    static func now() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) &* 1_000_000_000 &+ UInt64(now.tv_nsec)
    }
}

/// One ``BusyPoll`` per event loop of a group.
package final class BusyPolls: Sendable {
    private let polls: [ObjectIdentifier: BusyPoll]

    package init(group: any EventLoopGroup, window: @escaping @Sendable () -> Int64) {
        var polls: [ObjectIdentifier: BusyPoll] = [:]
        for loop in group.makeIterator() {
            polls[ObjectIdentifier(loop)] = BusyPoll(eventLoop: loop, window: window)
        }
        self.polls = polls
    }

    /// The poller of `eventLoop`, if it belongs to the group.
    package func poll(for eventLoop: any EventLoop) -> BusyPoll? {
        polls[ObjectIdentifier(eventLoop)]
    }
}
