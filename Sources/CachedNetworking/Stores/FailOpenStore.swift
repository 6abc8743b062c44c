import NIOCore
import Synchronization

/// A circuit breaker around another ``CacheStore``: when the store keeps failing, calls fail at once with
/// ``CacheStoreError/Kind/unreachable`` instead of waiting on a dead server, so a caller that treats an
/// unreachable cache as a miss ("fails open") stays fast during an outage.
///
/// - **Closed** (normal): calls go through. Each ``CacheStoreError/Kind/unreachable``,
///   ``CacheStoreError/Kind/timeout`` or ``CacheStoreError/Kind/protocolViolation`` adds one to a count of
///   consecutive failures; any answer from the store (a value, or a ``CacheStoreError/Kind/server`` error,
///   which proves the store is up) resets it. At `failureThreshold` consecutive failures the breaker opens.
/// - **Open**: calls fail immediately, without touching the wrapped store, until `coolDown` has passed.
/// - **Half-open**: the next call goes through as a probe; calls made while it runs still fail at once.
///   If the probe succeeds the breaker closes; if it fails the breaker opens for another `coolDown`.
///
/// ``CacheStoreError/Kind/closed`` (the store was shut down) passes through and is not counted.
///
/// Read ``state`` for metrics, or pass `onStateChange` to log transitions.
public final class FailOpenStore<Base: CacheStore>: CacheStore {
    /// Where the breaker stands.
    public enum State: Sendable, Hashable, CustomStringConvertible {
        /// Calls go through; `consecutiveFailures` failures in a row so far.
        case closed(consecutiveFailures: Int)
        /// Calls fail at once until `retryAfter` has passed (time since the breaker was created, on its clock).
        case open(retryAfter: Duration)
        /// One probe call is going through; others fail at once.
        case halfOpen

        /// The state's name, with the failure count when closed (for logs).
        public var description: String {
            switch self {
            case .closed(let failures): "closed (\(failures) consecutive failures)"
            case .open: "open"
            case .halfOpen: "half-open"
            }
        }

        /// Whether both states are the same case (ignoring the failure count and the retry time).
        func sameCase(as other: State) -> Bool {
            switch (self, other) {
            case (.closed, .closed), (.open, .open), (.halfOpen, .halfOpen): true
            default: false
            }
        }

        /// True when calls are being refused or only probed (open or half-open).
        public var isTripped: Bool {
            if case .closed = self { return false }
            return true
        }
    }

    /// The wrapped store.
    public let base: Base
    /// Consecutive failures that open the breaker.
    public let failureThreshold: Int
    /// How long the breaker stays open before letting a probe through.
    public let coolDown: Duration

    private let state_: Mutex<State>
    private let elapsed: @Sendable () -> Duration
    private let onStateChange: (@Sendable (_ from: State, _ to: State) -> Void)?

    /// Wraps `base`.
    ///
    /// - Parameters:
    ///   - base: the store to protect.
    ///   - failureThreshold: consecutive failures that open the breaker (at least 1). Default 5.
    ///   - coolDown: how long calls are refused before a probe. Default 5 seconds.
    ///   - clock: the clock the cool-down is measured on (its ``CacheClock/uptime()``); tests pass a manual clock
    ///     (`CachedNetworkingTesting`'s `ManualCacheClock`) that they advance by hand.
    ///   - onStateChange: called after each transition with the old and new state, on the calling task, outside
    ///     the breaker's lock. Keep it short (log, count).
    public convenience init(
        wrapping base: Base,
        failureThreshold: Int = 5,
        coolDown: Duration = .seconds(5),
        clock: any CacheClock = SystemCacheClock(),
        onStateChange: (@Sendable (_ from: State, _ to: State) -> Void)? = nil
    ) {
        let origin = clock.uptime()
        self.init(
            base: base, failureThreshold: failureThreshold, coolDown: coolDown, elapsed: { clock.uptime() - origin },
            onStateChange: onStateChange)
    }

    /// Wraps `base`, measuring the cool-down on a Swift `Clock`.
    @available(*, deprecated, message: "pass a CacheClock: SystemCacheClock(), or ManualCacheClock() in tests")
    public convenience init<C: Clock>(
        wrapping base: Base,
        failureThreshold: Int = 5,
        coolDown: Duration = .seconds(5),
        clock: C,
        onStateChange: (@Sendable (_ from: State, _ to: State) -> Void)? = nil
    ) where C.Duration == Duration {
        let origin = clock.now
        self.init(
            base: base, failureThreshold: failureThreshold, coolDown: coolDown,
            elapsed: { origin.duration(to: clock.now) }, onStateChange: onStateChange)
    }

    private init(
        base: Base,
        failureThreshold: Int,
        coolDown: Duration,
        elapsed: @escaping @Sendable () -> Duration,
        onStateChange: (@Sendable (_ from: State, _ to: State) -> Void)?
    ) {
        self.base = base
        self.failureThreshold = max(1, failureThreshold)
        self.coolDown = coolDown
        self.elapsed = elapsed
        self.onStateChange = onStateChange
        self.state_ = Mutex(.closed(consecutiveFailures: 0))
    }

    /// The breaker's current state. An open breaker whose cool-down has passed still reads `open` until the
    /// next call turns it half-open.
    public var state: State { state_.withLock { $0 } }

    // MARK: CacheStore

    /// The wrapped store's `get(_:)` of one key, unless the breaker refuses the call.
    /// - Throws: ``CacheStoreError/Kind/unreachable`` while open; otherwise what the wrapped store throws.
    public func get(_ key: String) async throws(CacheStoreError) -> ByteBuffer? {
        try await call { () async throws(CacheStoreError) in try await base.get(key) }
    }

    /// The wrapped store's `get(_:)` of several keys, unless the breaker refuses the call.
    /// - Throws: ``CacheStoreError/Kind/unreachable`` while open; otherwise what the wrapped store throws.
    public func get(_ keys: [String]) async throws(CacheStoreError) -> [ByteBuffer?] {
        try await call { () async throws(CacheStoreError) in try await base.get(keys) }
    }

    /// The wrapped store's ``CacheStore/set(_:to:ttl:)``, unless the breaker refuses the call.
    /// - Throws: ``CacheStoreError/Kind/unreachable`` while open; otherwise what the wrapped store throws.
    public func set(_ key: String, to value: ByteBuffer, ttl: Duration?) async throws(CacheStoreError) {
        try await call { () async throws(CacheStoreError) in try await base.set(key, to: value, ttl: ttl) }
    }

    /// The wrapped store's ``CacheStore/setIfAbsent(_:to:ttl:)``, unless the breaker refuses the call.
    /// - Throws: ``CacheStoreError/Kind/unreachable`` while open; otherwise what the wrapped store throws.
    public func setIfAbsent(_ key: String, to value: ByteBuffer, ttl: Duration) async throws(CacheStoreError) -> Bool {
        try await call { () async throws(CacheStoreError) in try await base.setIfAbsent(key, to: value, ttl: ttl) }
    }

    /// The wrapped store's ``CacheStore/remove(_:)``, unless the breaker refuses the call.
    /// - Throws: ``CacheStoreError/Kind/unreachable`` while open; otherwise what the wrapped store throws.
    @discardableResult
    public func remove(_ keys: [String]) async throws(CacheStoreError) -> Int {
        try await call { () async throws(CacheStoreError) in try await base.remove(keys) }
    }

    /// The wrapped store's ``CacheStore/increment(_:)``, unless the breaker refuses the call.
    /// - Throws: ``CacheStoreError/Kind/unreachable`` while open; otherwise what the wrapped store throws.
    public func increment(_ key: String) async throws(CacheStoreError) -> Int {
        try await call { () async throws(CacheStoreError) in try await base.increment(key) }
    }

    /// Shuts the wrapped store down.
    public func shutdown() async {
        await base.shutdown()
    }

    /// The wrapped store's: the breaker's own work does not suspend.
    public var callStyle: CacheStoreCallStyle { base.callStyle }

    // MARK: private

    private enum Admission {
        case pass(probe: Bool)
        case refuse(CacheStoreError)
    }

    private func call<T>(_ body: () async throws(CacheStoreError) -> T) async throws(CacheStoreError) -> T {
        let (admission, transition) = admit()
        if let transition { onStateChange?(transition.0, transition.1) }
        switch admission {
        case .refuse(let error):
            throw error
        case .pass(let probe):
            do {
                let value = try await body()
                record(success: true, probe: probe)
                return value
            } catch {
                switch error.kind {
                case .server: record(success: true, probe: probe)
                case .closed: record(neutralProbe: probe)
                // A call given up because its task was cancelled says nothing of the store.
                case .timeout where Task.isCancelled: record(neutralProbe: probe)
                default: record(success: false, probe: probe)
                }
                throw error
            }
        }
    }

    private func admit() -> (Admission, (State, State)?) {
        state_.withLock { state in
            switch state {
            case .closed:
                return (.pass(probe: false), nil)
            case .open(let retryAfter):
                if elapsed() >= retryAfter {
                    let old = state
                    state = .halfOpen
                    return (.pass(probe: true), (old, state))
                }
                return (.refuse(CacheStoreError(.unreachable, "circuit open: the store failed repeatedly")), nil)
            case .halfOpen:
                return (.refuse(CacheStoreError(.unreachable, "circuit half-open: waiting for a probe")), nil)
            }
        }
    }

    private func record(success: Bool, probe: Bool) {
        let transition: (State, State)? = state_.withLock { state in
            let old = state
            switch (state, success) {
            case (.closed, true):
                state = .closed(consecutiveFailures: 0)
                return nil
            case (.closed(let failures), false):
                state = failures + 1 >= failureThreshold
                    ? .open(retryAfter: elapsed() + coolDown)
                    : .closed(consecutiveFailures: failures + 1)
            case (.halfOpen, true) where probe:
                state = .closed(consecutiveFailures: 0)
            case (.halfOpen, false) where probe:
                state = .open(retryAfter: elapsed() + coolDown)
            default:
                // A call admitted before the breaker opened (or before a probe) finished late: the probe
                // or the opening decides, not it.
                return nil
            }
            return old.sameCase(as: state) ? nil : (old, state)
        }
        if let transition { onStateChange?(transition.0, transition.1) }
    }

    /// A probe that ended with the store shut down proves nothing: the next call probes again.
    private func record(neutralProbe probe: Bool) {
        guard probe else { return }
        state_.withLock { state in
            if state == .halfOpen { state = .open(retryAfter: elapsed()) }
        }
    }
}
