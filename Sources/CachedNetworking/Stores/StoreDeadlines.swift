import CThreadName
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A ``CacheStore`` that bounds its own calls: inside ``StoreCallLimit/current``, each call returns by the
/// limit's deadline, and at once when its task is cancelled, whatever the server does. ``StoreAccess`` calls
/// such a store directly in its own task instead of racing it against a timer in two extra tasks
/// (``withStoreTimeout(_:_:)``), which would cost more thread hand-offs than the call itself.
///
/// A conforming store must suspend only in calls that honour the limit (``RESPConnectionPool/submit(_:replies:)``).
protocol DeadlineBoundedCacheStore: CacheStore {}

/// The bound on the store calls made in a scope: set by ``StoreAccess`` around each call of a
/// ``DeadlineBoundedCacheStore``, read by the connection pool when the call suspends.
struct StoreCallLimit: Sendable {
    /// When the call gives up with ``CacheStoreError/Kind/timeout`` (``monotonicNanoseconds()``).
    let deadline: UInt64
    /// The timeout the deadline came from, for the error message.
    let timeout: Duration

    /// The limit of the current task's store calls; nil outside a bounded call (no deadline, cancellation
    /// ignored: the store's own timeouts apply).
    @TaskLocal static var current: StoreCallLimit?

    /// Runs `body` with its store calls bounded by `timeout` from now.
    static func bounding<T: Sendable>(
        _ timeout: Duration,
        _ body: () async throws(CacheStoreError) -> T
    ) async -> Result<T, CacheStoreError> {
        let limit = StoreCallLimit(
            deadline: monotonicNanoseconds() &+ UInt64(clamping: timeout.storeNanoseconds), timeout: timeout)
        return await $current.withValue(limit) { () async -> Result<T, CacheStoreError> in
            do throws(CacheStoreError) {
                return .success(try await body())
            } catch {
                return .failure(error)
            }
        }
    }
}

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
    let limit: StoreCallLimit?
    /// Position in ``StoreDeadlineWatcher``'s heap, -1 when not in it; guarded by the watcher's lock.
    var heapIndex = -1

    /// The deadline (``monotonicNanoseconds()``), `UInt64.max` for none.
    var deadline: UInt64 { limit?.deadline ?? UInt64.max }

    init(limit: StoreCallLimit?) { self.limit = limit }

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
        if finishedNow, limit != nil { StoreDeadlineWatcher.shared.remove(self) }
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
    private static let idleNanoseconds: UInt64 = 1_000_000_000

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
                _ = lock.wait(0, nanoseconds: min(first.deadline &- now, Self.idleNanoseconds))
                continue
            }
            // Nothing to watch: nap (calls made meanwhile usually fall due after the nap and need no signal),
            // then, if still idle, wait for a signal.
            sleepingUntil = now &+ Self.idleNanoseconds
            if lock.wait(0, nanoseconds: Self.idleNanoseconds), heap.isEmpty {
                sleepingUntil = UInt64.max
                while heap.isEmpty { lock.wait(0) }
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
