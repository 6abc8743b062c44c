public import ServiceLifecycle

/// The cache as a swift-service-lifecycle `Service`.
///
/// Run it in the `ServiceGroup` of your service, listed before the services that use it (a group shuts its
/// services down in reverse order), with its store listed before it:
///
/// ```swift
/// let group = ServiceGroup(
///     services: [store, cache, server],
///     gracefulShutdownSignals: [.sigterm],
///     logger: logger)
/// try await group.run()
/// ```
///
/// While ``run()`` runs, background work (`stale-while-revalidate` refreshes, retried invalidations, the `Vary`
/// index writes that record a served variant's use) runs as its child tasks. At graceful shutdown no new background
/// work starts; what is running finishes (each store call and origin fetch is bounded by its timeout), then the
/// cache shuts down what it owns.
extension CachedNetworking: Service {
    /// Runs the cache's background work until graceful shutdown or cancellation, then ``shutdown()``.
    public func run() async throws {
        let (stream, continuation) = AsyncStream.makeStream(of: (@Sendable () async -> Void).self)
        enum Start { case accepted, alreadyRunning, stopped }
        let start = background.withLock { state -> Start in
            if state.stopped { return .stopped }
            guard state.runner == nil else { return .alreadyRunning }
            state.runner = continuation
            return .accepted
        }
        switch start {
        case .accepted:
            break
        case .alreadyRunning:
            continuation.finish()
            logger.warning("CachedNetworking.run() called while it already runs: this call returns at once")
            return
        case .stopped:
            continuation.finish()
            await shutdown()
            return
        }
        await withGracefulShutdownHandler {
            await withDiscardingTaskGroup { group in
                for await job in stream { group.addTask { await job() } }
            }
        } onGracefulShutdown: {
            self.stopBackgroundWork()
        }
        // Cancelled rather than shut down gracefully: jobs still queued never ran (those that did have finished).
        stopBackgroundWork()
        let waiters = background.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.structuredRunning = 0
            defer { state.idleWaiters = [] }
            return state.idleWaiters
        }
        for waiter in waiters { waiter.resume() }
        await shutdown()
    }

    /// Shuts the cache down: refuses new requests (``CachedNetworkingError/Kind/shutDown``), starts no new
    /// background work, waits for the requests and the background work in progress (each bounded by the store's
    /// and the origin's timeouts), and shuts down the transport when the cache made it. The store, and a
    /// transport you passed in, stay yours. Calling it again does nothing more.
    ///
    /// Cancelling the task that calls it ends the waiting: background work is cancelled, and the transport the
    /// cache made is shut down at once, so requests still in flight may fail. (A `ServiceGroup` does this when
    /// graceful shutdown takes longer than its `maximumGracefulShutdownDuration`.) Do not call it from inside a
    /// request of the same cache, such as a transport's `send`: it would wait for that request.
    public func shutdown() async {
        isShutDown.store(true, ordering: .sequentiallyConsistent)
        stopBackgroundWork()
        await waitForRequestsInFlight()
        await waitForBackgroundRefreshes()
        // Its own flag: graceful shutdown stops the background work before this runs.
        if ownsTransport, !transportShutDown.exchange(true, ordering: .acquiringAndReleasing) {
            do {
                try await transport.shutdown()
            } catch {
                logger.warning("the cache's HTTP transport did not shut down cleanly", metadata: [CachedNetworkingLogKeys.error: "\(error)"])
            }
        }
    }

    /// Waits until no call of ``run(_:body:policy:transport:logger:)`` is in progress (once ``isShutDown`` is set, no new
    /// one starts), or until the calling task is cancelled.
    func waitForRequestsInFlight() async {
        while requestsInFlight.load(ordering: .sequentiallyConsistent) > 0, !Task.isCancelled {
            await waitInBackgroundState(
                until: { _ in self.requestsInFlight.load(ordering: .sequentiallyConsistent) == 0 },
                among: \.requestWaiters)
        }
    }

    /// Called as each ``run(_:body:policy:transport:logger:)`` returns: the last one out after shutdown wakes ``shutdown()``.
    func requestFinished() {
        let left = requestsInFlight.subtract(1, ordering: .sequentiallyConsistent).newValue
        guard left == 0, isShutDown.load(ordering: .sequentiallyConsistent) else { return }
        let waiters = background.withLock { state in
            defer { state.requestWaiters = [] }
            return state.requestWaiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Stops taking background work and ends ``run()``'s loop over it.
    /// - Returns: whether this call stopped it (false when it was already stopped).
    @discardableResult
    func stopBackgroundWork() -> Bool {
        let (first, runner) = background.withLock { state in
            defer {
                state.stopped = true
                state.runner = nil
            }
            return (!state.stopped, state.runner)
        }
        runner?.finish()
        return first
    }
}

extension CacheStore {
    /// A store's `Service.run()`: waits for graceful shutdown (or cancellation), then shuts the store down.
    package func runUntilGracefulShutdown() async {
        try? await gracefulShutdown()
        await shutdown()
    }
}

/// A `Service` in a `ServiceGroup`: shut down at graceful shutdown, after the services listed after it.
extension MemoryStore: Service {
    public func run() async throws { await runUntilGracefulShutdown() }
}

/// A `Service` in a `ServiceGroup`: shuts the wrapped store down at graceful shutdown.
extension FailOpenStore: Service {
    public func run() async throws { await runUntilGracefulShutdown() }
}
