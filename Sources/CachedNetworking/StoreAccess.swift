import Logging
import NIOCore
import Synchronization
import Tracing

/// The store as the cache uses it: every call bounded by a timeout, every failure logged and counted and
/// turned into "nothing" (fail-open), never into a failed request.
struct StoreAccess: Sendable {
    let store: any CacheStore
    let timeout: Duration
    let metrics: CacheMetrics
    let logger: Logger
    /// Where the `cached.store.<operation>` spans go.
    let tracing: CacheTracing
    /// How the store's calls are bounded (``CacheStore/callStyle``, read once).
    let callStyle: CacheStoreCallStyle.Base
    /// The store as a ``DecodedEnvelopeStore``, when it keeps decoded envelopes.
    let decodedStore: (any DecodedEnvelopeStore)?
    /// For other stores, the entries this process read or wrote, kept decoded beside their bytes (nil when the
    /// configuration keeps none).
    let decodedReads: DecodedReads?
    /// Whether the store is failing, for the warning when an outage starts and the notice when it ends.
    let outage: StoreOutage

    init(
        store: any CacheStore, timeout: Duration, metrics: CacheMetrics, logger: Logger, tracing: CacheTracing,
        decodedEntryMemory: Int = 0
    ) {
        self.store = store
        self.timeout = timeout
        self.metrics = metrics
        self.logger = logger
        self.tracing = tracing
        self.callStyle = store.callStyle.base
        let decodedStore = store as? any DecodedEnvelopeStore
        self.decodedStore = decodedStore
        self.decodedReads = decodedStore == nil && decodedEntryMemory > 0 ? DecodedReads(maxBytes: decodedEntryMemory) : nil
        self.outage = StoreOutage()
    }

    /// The value under `key`; `.failed` when the store failed or timed out.
    func get(_ key: String) async -> StoreRead<ByteBuffer?> {
        await attempt(.get, key) { () async throws(CacheStoreError) in try await store.get(key) }
    }

    func get(_ keys: [String]) async -> StoreRead<[ByteBuffer?]> {
        await attempt(.get, keys.first ?? "") { () async throws(CacheStoreError) in try await store.get(keys) }
    }

    @discardableResult
    func set(_ key: String, _ value: ByteBuffer, ttl: Duration?) async -> Bool {
        await attempt(.set, key) { () async throws(CacheStoreError) in try await store.set(key, to: value, ttl: ttl) }.succeeded
    }

    func setIfAbsent(_ key: String, _ value: ByteBuffer, ttl: Duration) async -> StoreRead<Bool> {
        await attempt(.setIfAbsent, key) { () async throws(CacheStoreError) in
            try await store.setIfAbsent(key, to: value, ttl: ttl)
        }
    }

    @discardableResult
    func remove(_ keys: [String]) async -> Bool {
        guard !keys.isEmpty else { return true }
        return await attempt(.remove, keys[0]) { () async throws(CacheStoreError) in try await store.remove(keys) }.succeeded
    }

    /// Runs `operation` with the timeout, in a `cached.store.<operation>` span when tracing; failures are logged
    /// and counted.
    func attempt<T: Sendable>(
        _ operation: StoreOperation,
        _ key: String,
        _ body: @escaping @Sendable () async throws(CacheStoreError) -> T
    ) async -> StoreRead<T> {
        let start = metrics.timingStart
        defer { metrics.storeCall(operation, since: start) }
        guard let span = tracing.startStoreCall(operation, key: key) else {
            return settle(operation, key, await bounded(body))
        }
        defer { span.end() }
        let result = await ServiceContext.withValue(span.context) { await bounded(body) }
        return settle(operation, key, result, span: span)
    }

    /// `body`'s result, bounded by the timeout as ``callStyle`` asks.
    private func bounded<T: Sendable>(
        _ body: @escaping @Sendable () async throws(CacheStoreError) -> T
    ) async -> Result<T, CacheStoreError> {
        switch callStyle {
        case .immediate:
            do throws(CacheStoreError) {
                return .success(try await body())
            } catch {
                return .failure(error)
            }
        case .deadlineAware:
            return await CacheStoreDeadline.bounding(timeout, body)
        case .timedByCache:
            return await withStoreTimeout(timeout, body)
        }
    }

    /// The result of a store call as a ``StoreRead``; a failure is logged and counted, and recorded on `span`, the
    /// call's span.
    func settle<T: Sendable>(
        _ operation: StoreOperation, _ key: String, _ result: Result<T, CacheStoreError>, span: (any Span)? = nil
    ) -> StoreRead<T> {
        if let span, case .failure(let error) = result { CacheTracing.fail(span, error, type: "store") }
        switch result {
        case .success(let value):
            if outage.isOngoing { outage.ended(logger: log) }
            return .value(value)
        case .failure(let error) where Task.isCancelled:
            // The request's task was cancelled: the call was given up, which says nothing of the store.
            log.trace("cache store call given up: the task was cancelled", metadata: [CachedNetworkingLogKeys.operation: "\(operation)"])
            return .failed(error)
        case .failure(let error):
            if error.kind == .server {
                // An error reply: the store is up (and refuses this call, as its own log says).
                if outage.isOngoing { outage.ended(logger: log) }
            } else if error.kind == .closed {
                // The store was shut down (as a ServiceGroup does when its shutdown runs out of time, while the
                // cache still releases a lease): the owner's decision, not an outage to warn about.
            } else {
                outage.failed(error, operation: operation, logger: log)
            }
            metrics.storeError(operation)
            log.debug(
                "cache store call failed; continuing without the store",
                metadata: [
                    CachedNetworkingLogKeys.operation: "\(operation)",
                    CachedNetworkingLogKeys.key: "\(key)",
                    CachedNetworkingLogKeys.error: "\(error)",
                ]
            )
            return .failed(error)
        }
    }
}

/// The result of a fail-open store call.
enum StoreRead<T: Sendable>: Sendable {
    case value(T)
    case failed(CacheStoreError)

    var value: T? {
        if case .value(let value) = self { return value }
        return nil
    }

    var succeeded: Bool { value != nil }
}

/// Runs `body`, giving up after `timeout` with a `.timeout` error even if `body` ignores cancellation (it is
/// cancelled and left to finish on its own).
func withStoreTimeout<T: Sendable>(
    _ timeout: Duration,
    _ body: @escaping @Sendable () async throws(CacheStoreError) -> T
) async -> Result<T, CacheStoreError> {
    let race = TimeoutRace<T>()
    return await withTaskCancellationHandler {
        await withCheckedContinuation { continuation in
            race.start(continuation)
            let work = Task {
                let result: Result<T, CacheStoreError>
                do throws(CacheStoreError) {
                    result = .success(try await body())
                } catch {
                    result = .failure(error)
                }
                race.finish(result)
            }
            let timer = Task {
                try? await Task.sleep(for: timeout)
                if Task.isCancelled { return }
                race.finish(.failure(CacheStoreError(.timeout, "no answer within \(timeout)")))
            }
            race.track(work: work, timer: timer)
        }
    } onCancel: {
        race.finish(.failure(CacheStoreError(.timeout, "cancelled")))
    }
}

/// The first of a store call, its timer and cancellation to finish resumes the caller and cancels the others.
private final class TimeoutRace<T: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<Result<T, CacheStoreError>, Never>?
        var finished = false
        var work: Task<Void, Never>?
        var timer: Task<Void, Never>?
    }
    private let state = Mutex(State())

    func start(_ continuation: CheckedContinuation<Result<T, CacheStoreError>, Never>) {
        let finishedEarly = state.withLock { state -> Bool in
            if state.finished { return true }
            state.continuation = continuation
            return false
        }
        if finishedEarly { continuation.resume(returning: .failure(CacheStoreError(.timeout, "cancelled"))) }
    }

    func track(work: Task<Void, Never>, timer: Task<Void, Never>) {
        let finished = state.withLock { state -> Bool in
            state.work = work
            state.timer = timer
            return state.finished
        }
        if finished {
            work.cancel()
            timer.cancel()
        }
    }

    func finish(_ result: Result<T, CacheStoreError>) {
        let (continuation, work, timer) = state.withLock { state -> (CheckedContinuation<Result<T, CacheStoreError>, Never>?, Task<Void, Never>?, Task<Void, Never>?) in
            guard !state.finished else { return (nil, nil, nil) }
            state.finished = true
            defer { state.continuation = nil }
            return (state.continuation, state.work, state.timer)
        }
        continuation?.resume(returning: result)
        work?.cancel()
        timer?.cancel()
    }
}

/// A store outage as the logs tell it: one warning when the store starts failing, one notice when it answers again
/// (with how long it was out and how many calls failed), and between them the individual failures at debug level
/// only. A store that fails and recovers over and over warns at most once a minute.
final class StoreOutage: Sendable {
    private struct State {
        var since: ContinuousClock.Instant?
        var failures = 0
        var lastWarning: ContinuousClock.Instant?
        var warned = false
    }

    private let state = Mutex(State())
    /// Read on every successful call: one relaxed load while the store is well.
    private let ongoing = Atomic(false)
    static let warningInterval = Duration.seconds(60)

    var isOngoing: Bool { ongoing.load(ordering: .relaxed) }

    func failed(_ error: CacheStoreError, operation: StoreOperation, logger: Logger) {
        let now = ContinuousClock.now
        let warn = state.withLock { state -> Bool in
            state.failures += 1
            if state.since == nil {
                state.since = now
                state.warned = false
                ongoing.store(true, ordering: .relaxed)
            }
            // Once per outage, and not within a minute of the last warning: an outage that starts soon after
            // another is warned about when that minute is over, if it still lasts.
            guard !state.warned else { return false }
            if let last = state.lastWarning, now - last < Self.warningInterval { return false }
            state.lastWarning = now
            state.warned = true
            return true
        }
        if warn {
            logger.warning(
                "the cache store is failing; requests go to the origin until it answers again",
                metadata: [CachedNetworkingLogKeys.operation: "\(operation)", CachedNetworkingLogKeys.error: "\(error)"])
        }
    }

    func ended(logger: Logger) {
        let ended = state.withLock { state -> (Duration, Int, Bool)? in
            guard let since = state.since else { return nil }
            defer {
                state.since = nil
                state.failures = 0
            }
            ongoing.store(false, ordering: .relaxed)
            return (ContinuousClock.now - since, state.failures, state.warned)
        }
        guard let (duration, failures, warned) = ended, warned else { return }
        logger.info(
            "the cache store answers again",
            metadata: [CachedNetworkingLogKeys.outageDuration: "\(duration)", CachedNetworkingLogKeys.failedCalls: "\(failures)"])
    }
}
