import CThreadName
import CachedNetworking
import Foundation
import Synchronization

/// One call waiting for its reply: resumed exactly once, by whichever comes first of its reply (or failure),
/// its deadline (``StoreDeadlineWatcher``) and the cancellation of its task. Later attempts are ignored, so
/// that the connection thread can deliver a reply the caller no longer waits for.
final class PendingStoreCall: @unchecked Sendable {
    typealias Continuation = UnsafeContinuation<Result<RESPReply, CacheStoreError>, Never>

    private enum State {
        /// Created; the caller has not suspended yet.
        case new
        case waiting(Continuation)
        /// Finished before the caller suspended: the result it resumes with at once.
        case finishedEarly(Result<RESPReply, CacheStoreError>)
        case finished
    }

    private let state = Mutex(State.new)
    /// The call's bound; nil for none (the store's own timeouts apply).
    let limit: CacheStoreDeadline?
    /// Position in ``StoreDeadlineWatcher``'s heap, -1 when not in it; guarded by the watcher's lock.
    var heapIndex = -1
    /// The watcher that times the call out (``StoreDeadlineWatcher/shared`` but in tests).
    let watcher: StoreDeadlineWatcher

    /// The deadline (``monotonicNanoseconds()``), `UInt64.max` for none.
    var deadline: UInt64 { limit?.uptimeNanoseconds ?? UInt64.max }

    init(limit: CacheStoreDeadline?, watcher: StoreDeadlineWatcher = .shared) {
        self.limit = limit
        self.watcher = watcher
    }

    /// Attaches the suspended caller.
    /// - Returns: false when the call had already finished; `continuation` has then been resumed.
    func start(_ continuation: Continuation) -> Bool {
        let early = state.withLock { state -> Result<RESPReply, CacheStoreError>? in
            switch state {
            case .new:
                state = .waiting(continuation)
                return nil
            case .finishedEarly(let result):
                state = .finished
                return result
            case .waiting, .finished:
                preconditionFailure("a store call was started twice")
            }
        }
        guard let early else { return true }
        continuation.resume(returning: early)
        return false
    }

    /// Whether the call has been answered, timed out or cancelled.
    var isFinished: Bool {
        state.withLock { state in
            switch state {
            case .finished, .finishedEarly: true
            case .new, .waiting: false
            }
        }
    }

    /// Resumes the caller with `result` unless the call has already finished.
    func resume(returning result: Result<RESPReply, CacheStoreError>) {
        let (finishedNow, continuation) = state.withLock { state -> (Bool, Continuation?) in
            switch state {
            case .new:
                state = .finishedEarly(result)
                return (true, nil)
            case .waiting(let continuation):
                state = .finished
                return (true, continuation)
            case .finishedEarly, .finished:
                return (false, nil)
            }
        }
        continuation?.resume(returning: result)
        if finishedNow, limit != nil { watcher.remove(self) }
    }

    /// Resumes the caller with ``CacheStoreError/Kind/timeout`` unless the call has already finished.
    func timeOut() {
        let timeout = limit.map { "\($0.timeout)" } ?? "the store timeout"
        resume(returning: .failure(CacheStoreError(.timeout, "no answer within \(timeout)")))
    }
}

/// One thread for the whole process that times out store calls at their deadlines: calls enter a heap ordered
/// by deadline and leave it when they finish, without waking the thread unless they are due before the time it
/// sleeps until. With one timeout for all calls (the usual case) deadlines arrive in order, so the thread wakes
/// about once per timeout period, or when a call is actually late.
final class StoreDeadlineWatcher: @unchecked Sendable {
    static let shared = StoreDeadlineWatcher()

    private let lock = ConditionLock(conditions: 1)
    // Guarded by `lock`:
    private var heap: [PendingStoreCall] = []
    /// When the thread wakes up by itself; `UInt64.max` while it waits for a signal.
    private var sleepingUntil = UInt64.max
    private var started = false

    /// How long the thread sleeps with no call to watch before waiting for a signal instead; also its longest
    /// single sleep.
    private let idleNanoseconds: UInt64

    /// A watcher whose thread naps `idleNanoseconds` when idle (one second for ``shared``).
    init(idleNanoseconds: UInt64 = 1_000_000_000) { self.idleNanoseconds = idleNanoseconds }

    /// Watches `call` until it finishes; resumes it with ``CacheStoreError/Kind/timeout`` at its deadline.
    func add(_ call: PendingStoreCall) {
        lock.lock()
        if !started {
            started = true
            let thread = Thread { [self] in
                cached_name_current_thread("cached-deadline")
                self.run()
            }
            thread.name = "cached-deadline"
            thread.start()
        }
        call.heapIndex = heap.count
        heap.append(call)
        siftUp(heap.count - 1)
        let wake = call.deadline < sleepingUntil
        if wake { sleepingUntil = call.deadline }
        lock.unlock()
        if wake { lock.signal(0) }
    }

    /// Stops watching `call` (it finished).
    func remove(_ call: PendingStoreCall) {
        lock.withLock {
            let index = call.heapIndex
            guard index >= 0, index < heap.count, heap[index] === call else { return }
            removeEntry(at: index)
        }
    }

    private func run() {
        lock.lock()
        while true {
            let now = monotonicNanoseconds()
            var due: [PendingStoreCall] = []
            while let first = heap.first, first.deadline <= now {
                removeEntry(at: 0)
                due.append(first)
            }
            if !due.isEmpty {
                lock.unlock()
                for call in due { call.timeOut() }
                lock.lock()
                continue
            }
            if let first = heap.first {
                sleepingUntil = first.deadline
                _ = lock.wait(0, nanoseconds: min(first.deadline &- now, idleNanoseconds))
                continue
            }
            // Nothing to watch: nap (calls made meanwhile usually fall due after the nap and need no signal),
            // then, if still idle, wait for a signal.
            sleepingUntil = now &+ idleNanoseconds
            if lock.wait(0, nanoseconds: idleNanoseconds), heap.isEmpty {
                // Each time round: a call added and finished while the thread was waking must not leave its
                // deadline here, or a later call with a later deadline would not signal the thread.
                while heap.isEmpty {
                    sleepingUntil = UInt64.max
                    lock.wait(0)
                }
            }
        }
    }

    // MARK: heap (must hold `lock`)

    private func removeEntry(at index: Int) {
        let last = heap.count - 1
        heap[index].heapIndex = -1
        if index != last {
            heap.swapAt(index, last)
            heap[index].heapIndex = index
        }
        heap.removeLast()
        if index < heap.count {
            siftDown(index)
            siftUp(index)
        }
    }

    private func siftUp(_ start: Int) {
        var child = start
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].deadline < heap[parent].deadline else { return }
            swap(child, parent)
            child = parent
        }
    }

    private func siftDown(_ start: Int) {
        var parent = start
        while true {
            let left = 2 * parent + 1
            guard left < heap.count else { return }
            var smallest = left
            if left + 1 < heap.count, heap[left + 1].deadline < heap[left].deadline { smallest = left + 1 }
            guard heap[smallest].deadline < heap[parent].deadline else { return }
            swap(smallest, parent)
            parent = smallest
        }
    }

    private func swap(_ a: Int, _ b: Int) {
        heap.swapAt(a, b)
        heap[a].heapIndex = a
        heap[b].heapIndex = b
    }
}
