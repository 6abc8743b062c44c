#if canImport(Glibc)
import Glibc
#endif
import CBusyPoll
import NIOCore

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
/// I/O): it checks, with a non-blocking `epoll_wait` on an epoll set of its own holding the loop's client
/// connections, whether any of them has something to read, and ends as soon as one does, so that the loop
/// reads it; otherwise it ends when the window has passed, and the loop sleeps. During the watch the loop runs
/// nothing else: work handed to it from other threads, or a timer, waits at most one window. The price is CPU
/// time, at most one window per burst of reads; an idle server does not poll.
package final class BusyPoll: NIOScheduledCallbackHandler, @unchecked Sendable {
    private let eventLoop: any EventLoop
    private let window: @Sendable () -> Int64
    /// The epoll set of the loop's client connections; -1 if it could not be made (then there is no polling).
    private let watched: CInt

    // Touched only on the event loop.
    @exclusivity(unchecked) private var pending = false
    @exclusivity(unchecked) private var windowNanoseconds: UInt64 = 0
    /// Watches run so far, and those that ended because a socket became readable. On the event loop only.
    @exclusivity(unchecked) package private(set) var watches = 0
    @exclusivity(unchecked) package private(set) var watchesEndedByInput = 0

    /// A poller for `eventLoop`; `window` tells the current `busy-poll` setting in nanoseconds (0: off).
    package init(eventLoop: any EventLoop, window: @escaping @Sendable () -> Int64) {
        self.eventLoop = eventLoop
        self.window = window
        self.watched = cached_watch_set_create()
    }

    deinit {
        if watched >= 0 { close(watched) }
    }

    /// Adds a connection's socket to the sockets the watch looks at; false if the system refused. It leaves the
    /// set by itself when the socket is closed.
    @discardableResult
    package func watch(descriptor: CInt) -> Bool {
        watched >= 0 && cached_watch_set_add(watched, descriptor) == 0
    }

    /// Records a read from a watched connection: a watch runs after the loop has handled what is ready now.
    /// On the event loop only.
    @inline(__always)
    package func noteRead() {
        if !pending { schedule() }
    }

    private func schedule() {
        let window = window()
        guard window > 0, watched >= 0 else { return }
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
        watches += 1
        let start = MonotonicClock.now()
        while true {
            if cached_watch_set_ready(watched) > 0 {
                // Input (or a hang-up): the loop's own epoll_wait returns it at once.
                watchesEndedByInput += 1
                return
            }
            if MonotonicClock.now() &- start >= windowNanoseconds { return }
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
