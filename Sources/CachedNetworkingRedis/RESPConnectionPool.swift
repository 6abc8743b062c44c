import CachedNetworking
import CHiredis
import CThreadName
import Foundation
import Glibc
import Logging
import NIOCore

/// The connections of a ``RESPStore``: one hiredis context per thread, each thread owning its connection.
///
/// Calls never block the caller's thread beyond a short mutex hold: a call appends its encoded command to one
/// connection's queue and suspends on a continuation; the connection's thread takes everything queued (up to
/// the pipeline depth), writes it in one go, reads the replies in order and resumes each caller as its reply
/// arrives. All blocking — DNS, connect, socket reads and writes — happens on these threads.
///
/// One shortcut: a call that finds its connection idle (connected, nothing queued or in flight, no hook) writes
/// its command to the socket itself, without blocking (`MSG_DONTWAIT`, under the mutex), before waking the
/// connection's thread, so that the thread wakes up while the server works instead of before. The thread then
/// sends whatever part of the command did not fit and reads the reply as usual. (Linux only.) With
/// ``RESPStore/Configuration/replyPolling`` on, such a call (of one reply) goes further: it takes the idle
/// connection for itself, writes its command and polls the socket without blocking for up to that long; a reply
/// that arrives in time completes the call on the caller's thread without suspending it, with no hand-off to the
/// connection's thread and back. Otherwise the call goes to the head of the connection's queue and the thread reads on from what
/// arrived, and after several polls in a row that ran out the next calls skip polling for a while (a pause that doubles
/// while polls keep running out). Over TLS both shortcuts work alike: the caller encrypts its command (up to
/// ``TLSChannel/eagerWriteLimit`` bytes; larger ones are left to the thread) into the connection's TLS layer and
/// sends what the socket takes; the thread sends the rest before it reads, and polling decrypts as it reads.
///
/// Choosing a connection: an idle connected one first; else one that is disconnected and may try again (so
/// the pool opens connections as load needs them, and retries after an outage); else the connected one with
/// the shortest queue. When every connection is waiting out its reconnect delay the call fails at once with
/// ``CacheStoreError/Kind/unreachable``: an outage costs callers nothing.
///
/// Locking: one mutex guards all the shared state below; each connection's thread sleeps on a condition of
/// its own. A thread's hiredis context is touched only by that thread; the only cross-thread operation on a
/// connection is `shutdown(2)` of its socket during ``shutdown()``, done under the mutex, and a thread
/// unpublishes its socket under the mutex before closing it, so that a recycled descriptor is never hit.
final class RESPConnectionPool: @unchecked Sendable {
    typealias Completion = PendingStoreCall

    struct Request {
        /// One command, or several sent back to back (`replies` of them).
        let command: ByteBuffer
        /// How many replies `command` gets; more than one are delivered together as an array.
        var replies = 1
        /// Bytes of `command` the caller already wrote to the socket (the idle-connection shortcut).
        var written = 0
        let enqueuedAt: UInt64
        let completion: Completion
    }

    enum SlotState {
        case disconnected(retryAt: UInt64)
        case connecting
        case connected
    }

    struct Slot {
        var queue = RequestQueue()
        var state = SlotState.disconnected(retryAt: 0)
        /// The socket of the live connection, published for ``shutdown()``; -1 when none.
        var socket: Int32 = -1
        /// Failed connection attempts in a row.
        var failedAttempts = 0
        /// The live connection, published for a caller that polls for its reply (``callerOwned``); nil when none.
        var connection: HiredisConnection?
        /// Whether the thread is writing a batch or waiting for its replies.
        var busy = false
        /// Whether a caller is using the connection (it wrote its command and polls for the reply): the thread
        /// leaves the connection alone until the caller clears this and signals it.
        var callerOwned = false
        /// Whether the thread is waiting for the caller that owns the connection to be done with it.
        var threadWaitsForCaller = false

        /// Calls ahead of a new one on this connection.
        var load: Int { queue.count + (busy || callerOwned ? 1 : 0) }
    }

    private let configuration: RESPStore.Configuration
    /// The store's TLS context when ``RESPStore/Configuration/tls`` is set, shared with its other connections.
    private let tlsContext: StoreTLSContext?
    private let logger: Logger
    /// Per-connection setup (the near cache's `CLIENT TRACKING`); nil for none.
    private let hook: (any RESPConnectionHook)?
    private let lock: ConditionLock
    // Guarded by `lock`:
    private var slots: [Slot]
    private var shuttingDown = false
    private var runningThreads: Int
    private var exitWaiters: [CheckedContinuation<Void, Never>] = []
    private var lastConnectError = CacheStoreError(.unreachable, "not connected yet")
    private var rotation = 0
    /// Calls still to skip polling for their replies, after polls that ran out of time, and the current length
    /// of that pause: from the fourth poll in a row that ran out, 1 call, doubling up to 1,024 while they keep
    /// running out; back to none after a poll that did not. (A busy machine makes a nearby server miss a poll
    /// now and then; a distant one misses them all.)
    private var pollsToSkip = 0
    private var pollPause = 0
    private var pollsRunOutInARow = 0
    /// Calls answered by polling, and polls that ran out of time (for tests and diagnostics).
    private var pollCounts = (answered: 0, ranOut: 0)
    /// ``RESPStore/Configuration/replyPolling`` in nanoseconds.
    private let pollNanoseconds: UInt64

    /// Most bytes of commands written in one batch (at least one command is always sent).
    private static let batchByteLimit = 1 << 20

    /// - Parameters:
    ///   - configuration: the server and the pool's settings.
    ///   - tlsContext: the store's TLS context when `configuration` asks for TLS (made once per store, so that
    ///     its files are read once); nil makes one for this pool.
    ///   - logger: where connection events go.
    ///   - hook: per-connection setup, if any.
    init(
        configuration: RESPStore.Configuration, tlsContext: StoreTLSContext?, logger: Logger,
        hook: (any RESPConnectionHook)? = nil
    ) {
        self.configuration = configuration
        self.tlsContext = tlsContext ?? configuration.tls.map(StoreTLSContext.init)
        self.logger = logger
        self.hook = hook
        self.pollNanoseconds = UInt64(clamping: max(.zero, configuration.replyPolling).storeNanoseconds)
        let size = max(1, configuration.poolSize)
        self.lock = ConditionLock(conditions: size)
        self.slots = Array(repeating: Slot(), count: size)
        self.runningThreads = size
        for index in 0..<size {
            let thread = Thread { [self] in
                cached_name_current_thread("cached-resp-\(index)")
                self.run(slot: index)
            }
            thread.name = "cached-resp-\(index)"
            thread.start()
        }
    }

    /// How many calls got their reply by polling on the caller's thread, and how many polls ran out of time.
    var replyPolls: (answered: Int, ranOut: Int) { lock.withLock { pollCounts } }

    /// Connection threads that have not exited yet.
    var runningThreadCount: Int { lock.withLock { runningThreads } }

    // MARK: calls

    /// Sends `command` (a complete RESP request, or `replies` of them back to back, which go out together on one
    /// connection) and waits for its reply; several replies come as one ``RESPReply/array(_:)``.
    ///
    /// Inside a ``CacheStoreDeadline`` the call returns by the limit's deadline with ``CacheStoreError/Kind/timeout``,
    /// and at once when its task is cancelled (``StoreDeadlineWatcher`` and the task's cancellation handler resume
    /// it; the connection thread then drops the command if it has not been sent, or ignores its reply). Outside
    /// one, only the connection's own timeouts apply.
    func submit(_ command: ByteBuffer, replies: Int = 1) async -> Result<RESPReply, CacheStoreError> {
        // On an idle connection the call polls for its reply right here and, when the reply comes in time,
        // returns without suspending: no continuation, no deadline to watch, no hop back to the task's executor.
        // Only a late reply hands the call (its command already written) to the connection's thread.
        var handover: Handover?
        if replies <= 1, pollNanoseconds > 0, !Task.isCancelled, let polled = takeIdleConnectionForPolling() {
            switch sendAndPoll(command, on: polled.connection, slot: polled.index) {
            case .answered(let reply): return reply
            case .ranOut(let written): handover = Handover(slot: polled.index, written: written, enqueuedAt: polled.enqueuedAt)
            }
        }
        guard let limit = CacheStoreDeadline.current else {
            let call = PendingStoreCall(limit: nil)
            return await withUnsafeContinuation { continuation in
                _ = call.start(continuation)
                place(command, replies: replies, handover, call)
            }
        }
        let call = PendingStoreCall(limit: limit)
        return await withTaskCancellationHandler {
            await withUnsafeContinuation { continuation in
                if call.start(continuation) {
                    StoreDeadlineWatcher.shared.add(call)
                } else if handover == nil {
                    return
                }
                // A handed-over command is on the wire: its reply must be read even when nobody waits for it.
                place(command, replies: replies, handover, call)
            }
        } onCancel: {
            call.resume(returning: .failure(CacheStoreError(.timeout, "cancelled")))
        }
    }

    /// A call whose command the caller wrote on the connection of `slot` (which it still owns) and whose reply did
    /// not come while it polled.
    private struct Handover {
        let slot: Int
        let written: Int
        let enqueuedAt: UInt64
    }

    /// Hands `call` to the connection's thread: the one it was written on (``Handover``), else a queue.
    private func place(_ command: ByteBuffer, replies: Int, _ handover: Handover?, _ call: PendingStoreCall) {
        guard let handover else { return enqueue(command, replies: replies, call) }
        lock.withLock {
            let index = handover.slot
            slots[index].callerOwned = false
            // First in the queue: its command is the first on the wire (calls queued meanwhile were not sent).
            slots[index].queue.prepend(
                Request(command: command, replies: 1, written: handover.written, enqueuedAt: handover.enqueuedAt, completion: call))
            lock.signal(index)
        }
    }

    /// An idle, connected connection for the caller to poll on, marked ``Slot/callerOwned``; nil when there is
    /// none, or while polls are being skipped after polls that ran out (this call then counts towards the pause).
    private func takeIdleConnectionForPolling() -> (index: Int, connection: HiredisConnection, enqueuedAt: UInt64)? {
        let now = monotonicNanoseconds()
        return lock.withLock {
            guard !shuttingDown, hook == nil, let index = chooseSlot(now: now), slots[index].load == 0,
                slots[index].socket >= 0, case .connected = slots[index].state, let connection = slots[index].connection
            else { return nil }
            guard pollsToSkip == 0 else {
                pollsToSkip -= 1
                return nil
            }
            slots[index].callerOwned = true
            return (index, connection, now)
        }
    }

    /// Queues `call` on a connection, or fails it at once when none may take it. On an idle connection the
    /// command is written at once, without blocking (the thread then sends whatever did not fit).
    private func enqueue(_ command: ByteBuffer, replies: Int, _ call: PendingStoreCall) {
        let now = monotonicNanoseconds()
        let refusal: CacheStoreError? = lock.withLock {
            if shuttingDown { return CacheStoreError(.closed, "the store was shut down") }
            guard let index = chooseSlot(now: now) else {
                return CacheStoreError(.unreachable, "no connection to the server: \(lastConnectError.message)")
            }
            var request = Request(command: command, replies: max(1, replies), enqueuedAt: now, completion: call)
            if hook == nil, slots[index].load == 0, slots[index].socket >= 0, case .connected = slots[index].state,
                let connection = slots[index].connection
            {
                // The thread is not using its context, whose output buffer is empty: the bytes go out in order.
                request.written = connection.writeWithoutBlocking(command)
            }
            slots[index].queue.append(request)
            lock.signal(index)
            return nil
        }
        if let refusal { call.resume(returning: .failure(refusal)) }
    }

    private enum PollOutcome {
        case answered(Result<RESPReply, CacheStoreError>)
        /// No whole reply in time (or the command did not go out whole): `written` bytes of it are on the wire,
        /// and the caller still owns the connection, to hand the call over (``place(_:replies:_:_:)``).
        case ranOut(written: Int)
    }

    /// Writes `command` on the idle connection of slot `index`, which the caller owns (``Slot/callerOwned``),
    /// and polls for its reply for up to ``pollNanoseconds``; a reply that is not whole by then is left to the
    /// connection's thread, which reads on from what arrived.
    private func sendAndPoll(_ command: ByteBuffer, on connection: HiredisConnection, slot index: Int) -> PollOutcome {
        // Nothing else writes or reads this connection meanwhile: its thread waits until `callerOwned` is clear.
        let written = connection.writeWithoutBlocking(command)
        var reply: Result<RESPReply, CacheStoreError>?
        if written == command.readableBytes {
            reply = connection.pollReply(until: monotonicNanoseconds() &+ pollNanoseconds)
        }
        return lock.withLock {
            guard let reply else {
                if written == command.readableBytes {
                    pollCounts.ranOut += 1
                    pollsRunOutInARow += 1
                    if pollsRunOutInARow > 3 {
                        pollPause = min(max(1, pollPause * 2), 1024)
                        pollsToSkip = pollPause
                    }
                }
                return .ranOut(written: written)
            }
            slots[index].callerOwned = false
            pollPause = 0
            pollsRunOutInARow = 0
            pollCounts.answered += 1
            // The thread is woken only when it waits for this caller, or has calls queued meanwhile, or the store
            // is shutting down. Waking an idle thread after every answered call would cost a wake-up per call,
            // and that thread's run on another core, where the server may be.
            if slots[index].threadWaitsForCaller || !slots[index].queue.isEmpty || shuttingDown { lock.signal(index) }
            return .answered(reply)
        }
    }

    /// Must hold `lock`.
    private func chooseSlot(now: UInt64) -> Int? {
        var leastLoaded: Int?
        var retryable: Int?
        let count = slots.count
        rotation = (rotation &+ 1) % count
        for offset in 0..<count {
            let index = (rotation + offset) % count
            let slot = slots[index]
            switch slot.state {
            case .connected where slot.load == 0:
                return index
            case .connected, .connecting:
                if leastLoaded.map({ slots[$0].load > slot.load }) ?? true { leastLoaded = index }
            case .disconnected(let retryAt):
                if retryAt <= now, retryable.map({ slots[$0].queue.count > slot.queue.count }) ?? true {
                    retryable = index
                }
            }
        }
        return retryable ?? leastLoaded
    }

    // MARK: shutdown

    /// Fails queued calls with ``CacheStoreError/Kind/closed``, interrupts calls in flight (they fail the same
    /// way) and waits until every connection thread has exited.
    func shutdown() async {
        beginShutdown()
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            let finished: Bool = lock.withLock {
                if runningThreads == 0 { return true }
                exitWaiters.append(done)
                return false
            }
            if finished { done.resume() }
        }
    }

    /// Starts shutting down without waiting for the threads (for `deinit`).
    func beginShutdown() {
        let abandoned: [Request] = lock.withLock {
            guard !shuttingDown else { return [] }
            shuttingDown = true
            var abandoned: [Request] = []
            for index in slots.indices {
                abandoned += slots[index].queue.removeAll()
                if slots[index].socket >= 0 {
                    // Wakes a thread blocked reading or writing; it then sees `shuttingDown`.
                    shutdownSocket(slots[index].socket)
                }
            }
            lock.broadcastAll()
            return abandoned
        }
        let closed = CacheStoreError(.closed, "the store was shut down")
        for request in abandoned { request.completion.resume(returning: .failure(closed)) }
    }

    // MARK: connection threads

    private func run(slot index: Int) {
        // A write to a socket the server closed raises SIGPIPE, which would end the process; blocked on this
        // thread, it stays pending harmlessly and the write fails with EPIPE instead.
        var pipe = sigset_t()
        sigemptyset(&pipe)
        sigaddset(&pipe, SIGPIPE)
        pthread_sigmask(SIG_BLOCK, &pipe, nil)

        let queueDeadline = UInt64(clamping: (configuration.connectTimeout + configuration.commandTimeout).storeNanoseconds)
        var connection: HiredisConnection?
        // The hook's generation this connection was last set up for (nil: not yet).
        var setUpFor: UInt64?
        /// Discards the connection after `error`, failing `failed`. Called and returns with the lock held.
        func discard(_ live: HiredisConnection, _ error: CacheStoreError, failing failed: ArraySlice<Request>) {
            // The connection is unusable (or out of step with its replies). The next command reconnects at once;
            // only failed attempts back off.
            slots[index].socket = -1
            slots[index].connection = nil
            slots[index].state = .disconnected(retryAt: 0)
            let reported = shuttingDown ? CacheStoreError(.closed, "the store was shut down") : error
            lock.unlock()
            logger.debug("discarding a connection", metadata: ["error": "\(error)"])
            connection = nil
            live.close()
            if setUpFor != nil { hook?.connectionClosed() }
            for request in failed { request.completion.resume(returning: .failure(reported)) }
            lock.lock()
        }

        lock.lock()
        while !shuttingDown {
            if slots[index].callerOwned {
                slots[index].threadWaitsForCaller = true
                lock.wait(index)
                slots[index].threadWaitsForCaller = false
                continue
            }
            if slots[index].queue.isEmpty {
                // A connection the hook set up is checked with PING when idle, so that one the server closed is
                // noticed (and the hook told) within the hook's interval rather than at the next call.
                guard let live = connection, setUpFor != nil, let interval = hook?.idleCheckInterval else {
                    lock.wait(index)
                    continue
                }
                if lock.wait(index, nanoseconds: UInt64(clamping: interval.storeNanoseconds)),
                    slots[index].queue.isEmpty, !shuttingDown
                {
                    slots[index].busy = true
                    lock.unlock()
                    let reply = live.roundTrip(RESPCommand("PING", argumentCount: 0))
                    lock.lock()
                    slots[index].busy = false
                    if case .failure(let error) = reply { discard(live, error, failing: []) }
                }
                continue
            }
            guard let live = connection else {
                lock.unlock()
                connection = connect(slot: index)
                setUpFor = nil
                lock.lock()
                continue
            }
            // Take a batch; drop calls that waited longer than a connect and a command may take, and calls whose
            // callers stopped waiting (timed out or cancelled: better not sent at all).
            let now = monotonicNanoseconds()
            var batch: [Request] = []
            var late: [Request] = []
            var batchBytes = 0
            while batch.count < max(1, configuration.maxPipelineDepth),
                batch.isEmpty || batchBytes < Self.batchByteLimit,
                let request = slots[index].queue.popFirst()
            {
                if request.written > 0 {
                    // Already (partly) on the wire: its reply comes whatever happens, so it is read in turn.
                    batch.append(request)
                    batchBytes += request.command.readableBytes
                } else if now &- request.enqueuedAt > queueDeadline {
                    late.append(request)
                } else if request.completion.isFinished {
                    continue
                } else {
                    batch.append(request)
                    batchBytes += request.command.readableBytes
                }
            }
            slots[index].busy = true
            lock.unlock()
            let lateError = CacheStoreError(.timeout, "waited more than \(configuration.connectTimeout + configuration.commandTimeout) for a connection")
            for request in late { request.completion.resume(returning: .failure(lateError)) }
            var failure: HiredisConnection.BatchFailure?
            // Checked after taking the batch, so that every call in it was made before the check.
            if let hook, setUpFor != hook.setupGeneration {
                switch hook.setUp(live) {
                case .success(let generation): setUpFor = generation
                case .failure(let error): failure = HiredisConnection.BatchFailure(firstFailed: 0, error: error)
                }
            }
            var last: Result<RESPReply, CacheStoreError>?
            if failure == nil { failure = live.send(batch, last: &last) }
            lock.lock()
            slots[index].busy = false
            if let failure { discard(live, failure.error, failing: batch[failure.firstFailed...]) }
            if let last, let request = batch.last {
                // Resumed once the connection is idle again, so that a caller that calls again at once finds
                // it idle (and may poll) instead of queueing behind a thread that is about to go to sleep.
                lock.unlock()
                request.completion.resume(returning: last)
                lock.lock()
            }
        }
        // A caller polling on the connection still uses it: wait until it is done (it may queue its call).
        while slots[index].callerOwned { lock.wait(index) }
        slots[index].socket = -1
        slots[index].connection = nil
        let leftovers = slots[index].queue.removeAll()
        runningThreads -= 1
        let waiters = runningThreads == 0 ? exitWaiters : []
        if runningThreads == 0 { exitWaiters = [] }
        lock.unlock()
        connection?.close()
        let closed = CacheStoreError(.closed, "the store was shut down")
        for request in leftovers { request.completion.resume(returning: .failure(closed)) }
        for waiter in waiters { waiter.resume() }
    }

    /// Connects `slot` if it may try now. Called without the lock; returns with the slot's state updated.
    private func connect(slot index: Int) -> HiredisConnection? {
        let mayTry: Bool = lock.withLock {
            if case .disconnected(let retryAt) = slots[index].state, retryAt > monotonicNanoseconds() { return false }
            slots[index].state = .connecting
            return true
        }
        let result: Result<HiredisConnection, CacheStoreError>
        if mayTry {
            result = HiredisConnection.open(configuration, tlsContext: tlsContext)
        } else {
            result = .failure(lock.withLock { lastConnectError })
        }
        var failed: [Request] = []
        var error = CacheStoreError(.unreachable, "")
        var connection: HiredisConnection?
        lock.withLock {
            switch result {
            case .success(let opened):
                if shuttingDown {
                    error = CacheStoreError(.closed, "the store was shut down")
                    failed = slots[index].queue.removeAll()
                    opened.close()
                    return
                }
                slots[index].state = .connected
                slots[index].socket = opened.socket
                slots[index].connection = opened
                slots[index].failedAttempts = 0
                connection = opened
            case .failure(let connectError):
                if mayTry {
                    slots[index].failedAttempts += 1
                    let delay = reconnectDelay(afterFailures: slots[index].failedAttempts)
                    slots[index].state = .disconnected(retryAt: monotonicNanoseconds() &+ delay)
                    lastConnectError = connectError
                }
                error = connectError
                failed = slots[index].queue.removeAll()
            }
        }
        if connection != nil {
            logger.debug("connected", metadata: ["host": "\(configuration.host)", "port": "\(configuration.port)"])
        } else if mayTry, error.kind != .closed {
            logger.warning("cannot connect to the cache server", metadata: ["error": "\(error)"])
        }
        for request in failed { request.completion.resume(returning: .failure(error)) }
        return connection
    }

    /// Nanoseconds to wait after `failures` failed attempts in a row: doubling from the minimum to the maximum,
    /// less up to a fifth at random so that connections do not retry in lockstep.
    private func reconnectDelay(afterFailures failures: Int) -> UInt64 {
        let minimum = max(1, configuration.minReconnectDelay.storeNanoseconds)
        let maximum = max(minimum, configuration.maxReconnectDelay.storeNanoseconds)
        let doubled = minimum.multipliedReportingOverflow(by: Int64(1) << Int64(min(failures - 1, 30)))
        let delay = doubled.overflow ? maximum : min(maximum, doubled.partialValue)
        let jitter = Int64.random(in: 0...(delay / 5))
        return UInt64(delay - jitter)
    }
}

/// A FIFO of requests (amortised O(1) at both ends).
struct RequestQueue {
    private var items: [RESPConnectionPool.Request] = []
    private var head = 0

    var isEmpty: Bool { head == items.count }
    var count: Int { items.count - head }

    mutating func append(_ request: RESPConnectionPool.Request) { items.append(request) }

    /// Puts `request` ahead of every queued one.
    mutating func prepend(_ request: RESPConnectionPool.Request) {
        if head > 0 {
            head -= 1
            items[head] = request
        } else {
            items.insert(request, at: 0)
        }
    }

    mutating func popFirst() -> RESPConnectionPool.Request? {
        guard head < items.count else { return nil }
        let request = items[head]
        head += 1
        if head == items.count {
            items.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 1024 && head * 2 >= items.count {
            items.removeFirst(head)
            head = 0
        }
        return request
    }

    mutating func removeAll() -> [RESPConnectionPool.Request] {
        let rest = Array(items[head...])
        items = []
        head = 0
        return rest
    }
}

/// A pthread mutex with one condition variable per waiter, for threads that are not Swift tasks.
final class ConditionLock: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let conditions: UnsafeMutablePointer<pthread_cond_t>
    private let conditionCount: Int

    init(conditions count: Int) {
        mutex = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
        conditionCount = count
        conditions = .allocate(capacity: count)
        // Timed waits count on the monotonic clock, so that a step of the wall clock neither stretches nor
        // cuts them.
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        for i in 0..<count { pthread_cond_init(conditions + i, &attributes) }
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        for i in 0..<conditionCount { pthread_cond_destroy(conditions + i) }
        conditions.deallocate()
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    func lock() { pthread_mutex_lock(mutex) }
    func unlock() { pthread_mutex_unlock(mutex) }

    func withLock<T>(_ body: () throws -> T) rethrows -> T {
        lock()
        defer { unlock() }
        return try body()
    }

    /// Waits on condition `index`; the mutex must be held.
    func wait(_ index: Int) { pthread_cond_wait(conditions + index, mutex) }

    /// Waits on condition `index` for at most `nanoseconds`; the mutex must be held.
    /// - Returns: true when the time ran out (rather than a signal, or a spurious wake-up).
    func wait(_ index: Int, nanoseconds: UInt64) -> Bool {
        var deadline = timespec()
        clock_gettime(CLOCK_MONOTONIC, &deadline)
        let total = UInt64(deadline.tv_nsec) + nanoseconds
        deadline.tv_sec += Int(total / 1_000_000_000)
        deadline.tv_nsec = Int(total % 1_000_000_000)
        return pthread_cond_timedwait(conditions + index, mutex, &deadline) == ETIMEDOUT
    }
    func signal(_ index: Int) { pthread_cond_signal(conditions + index) }
    func broadcastAll() {
        for i in 0..<conditionCount { pthread_cond_broadcast(conditions + i) }
    }
}


/// `shutdown(2)` both directions of `socket`: blocked reads and writes on it return at once.
private func shutdownSocket(_ socket: Int32) {
    _ = Glibc.shutdown(socket, Int32(SHUT_RDWR))
}
