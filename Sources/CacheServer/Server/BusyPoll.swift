import NIOCore

/// Keeps an event loop polling its sockets for a short while after it has read from a client, instead of going
/// to sleep in `epoll_wait` as soon as it has nothing to do (`busy-poll`, in microseconds).
///
/// A client that sends a request to a sleeping event loop pays for waking it: the kernel runs the wake-up in
/// the client's `send`, and on a virtual machine that costs several microseconds, as much as the server spends
/// on a GET; the loop then needs time to get going again. Under steady traffic the next request usually arrives
/// within a few microseconds of the loop running out of work, so polling a little longer means no wake-up at
/// all: the request finds the loop awake, and the reply comes sooner. The price is the polling itself, at most
/// one window of CPU time after each burst of reads; an idle server does not poll.
///
/// While polling, the loop keeps a callback due, so its next `epoll_wait` does not block; each pass of the loop
/// also handles whatever else is ready (reads, writes, timers, tasks), as it would after waking up. The callback
/// is a scheduled one: when the loop shuts down it is cancelled rather than run, so polling never holds up a
/// shutdown.
package final class BusyPoll: NIOScheduledCallbackHandler, @unchecked Sendable {
    private let eventLoop: any EventLoop
    private let window: @Sendable () -> Int64

    // Touched only on the event loop.
    /// Reads seen so far; a pass that finds it changed starts the window again.
    @exclusivity(unchecked) private var reads: UInt = 0
    @exclusivity(unchecked) private var readsAtLastPass: UInt = 0
    @exclusivity(unchecked) private var quietSince: UInt64 = 0
    @exclusivity(unchecked) private var windowNanoseconds: UInt64 = 0
    @exclusivity(unchecked) private var polling = false
    /// Polling periods started so far. On the event loop only.
    @exclusivity(unchecked) package private(set) var periods = 0

    /// A poller for `eventLoop`; `window` tells the current `busy-poll` setting in nanoseconds (0: off).
    package init(eventLoop: any EventLoop, window: @escaping @Sendable () -> Int64) {
        self.eventLoop = eventLoop
        self.window = window
    }

    /// Whether the loop is polling now. On the event loop only.
    package var isPolling: Bool { polling }

    /// Records a read on the loop; starts polling if it is not already. On the event loop only.
    @inline(__always)
    package func noteRead() {
        reads &+= 1
        if !polling { start() }
    }

    private func start() {
        let window = window()
        guard window > 0 else { return }
        let now = NIODeadline.now()
        polling = true
        periods += 1
        windowNanoseconds = UInt64(window)
        readsAtLastPass = reads
        quietSince = now.uptimeNanoseconds
        schedule(at: now)
    }

    private func schedule(at now: NIODeadline) {
        do {
            _ = try eventLoop.scheduleCallback(at: now, handler: self)
        } catch {
            polling = false  // the loop is shutting down
        }
    }

    package func handleScheduledCallback(eventLoop: some EventLoop) {
        let now = NIODeadline.now()
        if reads != readsAtLastPass {
            readsAtLastPass = reads
            quietSince = now.uptimeNanoseconds
        } else if now.uptimeNanoseconds &- quietSince >= windowNanoseconds {
            polling = false
            return
        }
        schedule(at: now)
    }

    package func didCancelScheduledCallback(eventLoop: some EventLoop) {
        polling = false
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
