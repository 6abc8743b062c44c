#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
public import HTTPTypes
public import Logging
import CoreMetrics
public import NIOCore
import Synchronization
import Tracing

/// A shared HTTP response cache for Swift services: RFC 9111's rules for a shared cache, RFC 5861's
/// `stale-while-revalidate` and `stale-if-error`, and RFC 9211's `Cache-Status`, over a ``CacheStore`` that
/// several processes can share.
///
/// ```swift
/// let cache = CachedNetworking(store: store, transport: transport)
/// let answer = try await cache.run(HTTPRequest(method: .get, scheme: "https", authority: "api.example.com", path: "/items"))
/// answer.source        // .network, then .cache while fresh
/// answer.cacheStatus   // cached; hit; ttl=42
/// ```
///
/// - Identical concurrent misses in one process make one origin request (the others are `.coalesced`); across
///   processes a short lease in the store lets one process fetch while the others poll for its result.
/// - The cache fails open: a store that errors or times out is logged and counted, and the request goes to the
///   origin.
public final class CachedNetworking: Sendable {
    /// The settings this cache was made with.
    public let configuration: Configuration
    let transport: any HTTPTransport
    /// Whether the cache made ``transport`` (and so shuts it down).
    let ownsTransport: Bool
    let store: StoreAccess
    let keys: CacheKeys
    let metrics: CacheMetrics
    let logger: Logger
    /// The tracer the cache's spans go to, resolved once (``Configuration/tracer``).
    let tracing: CacheTracing
    let flights = SingleFlight<FlightKey, FlightResult>()
    /// One read-modify-write of what is stored under an entry key at a time, per entry key: combining a partial
    /// entry (``storePartial``), recording a variant's use in a `Vary` index (``recordVariantUseInBackground``).
    let entryWrites = KeyedLock()
    /// The value of the leases this cache takes: random, made once (leases are only ever tested for presence; the
    /// value tells which cache instance holds one).
    let leaseToken: ByteBuffer
    private let generationCache = Mutex(GenerationCache())
    let background = Mutex<BackgroundWork>(BackgroundWork())
    /// Set by ``shutdown()``: requests are refused from then on.
    let isShutDown = Atomic(false)
    /// Calls of ``run(_:body:policy:transport:logger:)`` that have not returned; ``shutdown()`` waits for them.
    let requestsInFlight = Atomic(0)
    /// Set when ``shutdown()`` has shut down the transport the cache made.
    let transportShutDown = Atomic(false)

    /// A cache over `store` that fetches through `transport`.
    ///
    /// `transport` and `store` stay yours: ``shutdown()`` leaves them running, so shut them down yourself when
    /// you are done with them (or run them in a `ServiceGroup`).
    /// - Parameters:
    ///   - store: Where responses are kept; shared by every process that uses the same namespace.
    ///   - transport: How requests reach origins.
    ///   - configuration: Settings.
    ///   - logger: Where the cache logs (at debug level); the library never sets up logging itself.
    public convenience init(
        store: any CacheStore,
        transport: any HTTPTransport,
        configuration: Configuration = Configuration(),
        logger: Logger = Logger(label: "cached.networking")
    ) {
        self.init(store: store, transport: transport, ownsTransport: false, configuration: configuration, logger: logger)
    }

    /// A cache over `store` that fetches through a ``URLSessionTransport`` of its own, which ``shutdown()`` shuts
    /// down. (On servers, prefer the AsyncHTTPClient transport of the `CachedNetworkingAsyncHTTPClient` product.)
    /// - Parameters:
    ///   - store: Where responses are kept; it stays yours to shut down.
    ///   - configuration: Settings.
    ///   - logger: Where the cache logs (at debug level); the library never sets up logging itself.
    public convenience init(
        store: any CacheStore,
        configuration: Configuration = Configuration(),
        logger: Logger = Logger(label: "cached.networking")
    ) {
        self.init(store: store, transport: URLSessionTransport(), ownsTransport: true, configuration: configuration, logger: logger)
    }

    init(
        store: any CacheStore,
        transport: any HTTPTransport,
        ownsTransport: Bool,
        configuration: Configuration,
        logger: Logger
    ) {
        self.configuration = configuration
        self.transport = transport
        self.ownsTransport = ownsTransport
        self.logger = logger
        self.keys = CacheKeys(namespace: configuration.namespace, maximumURLLength: configuration.maximumKeyURLLength)
        let metrics = CacheMetrics(
            factory: configuration.metricsFactory ?? MetricsSystem.factory,
            namespace: configuration.namespace,
            extra: configuration.metricsDimensions
        )
        self.metrics = metrics
        let tracing = CacheTracing(configured: configuration.tracer)
        self.tracing = tracing
        self.store = StoreAccess(
            store: store, timeout: configuration.storeTimeout, metrics: metrics, logger: logger, tracing: tracing,
            decodedEntryMemory: configuration.decodedEntryMemory)
        self.leaseToken = ByteBuffer(string: FNV1a64.hex(UInt64.random(in: .min ... .max)))
        for host in configuration.lifetimeOverrides.compactMap(\.unusableHost) {
            logger.warning(
                "a lifetime override's host is neither a host nor host:port; the override matches no request",
                metadata: [CachedNetworkingLogKeys.host: "\(host)"])
        }
    }

    // MARK: - Requests

    /// Answers `request` from the cache or the origin, storing what may be stored.
    ///
    /// GET and HEAD responses are stored by default. Other methods go to the origin, and an unsafe method's
    /// success invalidates the stored responses for its target (and same-origin `Location` and
    /// `Content-Location`). A GET or HEAD with `If-None-Match` or `If-Modified-Since` is answered from the cache when a
    /// stored response can be used, with `304 Not Modified` when the client's copy is current (RFC 9111 §4.3.2);
    /// a GET's `Range` (with `If-Range`) is cut from the response the cache chose (RFC 9110 §14); requests with
    /// `If-Match` or `If-Unmodified-Since` are forwarded as they are.
    ///
    /// A `transport` given here carries this call's origin requests instead of the cache's own transport: an
    /// integration that has its own way to the origin for each call (a client middleware's next step) passes it.
    /// It is used only while the call runs, so a stored response that `stale-while-revalidate` would serve while
    /// a background refresh runs is validated through it before the answer instead. Identical requests that
    /// run at the same time still share one fetch, made through the transport of the request that started it.
    /// - Parameters:
    ///   - request: The request; it needs a scheme and an authority.
    ///   - body: The request content, if any.
    ///   - policy: How to use the cache for this request.
    ///   - transport: How this call reaches the origin; nil for the transport the cache was made with.
    ///   - logger: Where the cache's lines about this request go (its answer, the store failures it met, the
    ///     background refresh it started), so that they carry the caller's metadata (a request id); nil for the
    ///     logger the cache was made with.
    /// - Returns: The response, with `Age` when it came from storage and this cache's `Cache-Status` member.
    /// - Throws: ``CachedNetworkingError`` when the request is invalid, the origin fails (and no stale response
    ///   may stand in), or the task is cancelled. Store failures never fail a request.
    public func run(
        _ request: HTTPRequest,
        body: ByteBuffer? = nil,
        policy: CachePolicy = .useProtocolCachePolicy,
        transport: (any HTTPTransport)? = nil,
        logger: Logger? = nil
    ) async throws(CachedNetworkingError) -> CachedResponse {
        // Counted before the shutdown flag is read, so that shutdown() (which sets the flag, then waits for the
        // count to reach zero) either sees this call or this call sees the flag.
        requestsInFlight.add(1, ordering: .sequentiallyConsistent)
        let start = metrics.timingStart
        defer {
            metrics.record(metrics.runDuration, since: start)
            requestFinished()
        }
        let shutDown = isShutDown.load(ordering: .sequentiallyConsistent)
        // Nothing to bind without a tracer or a request logger: the common case.
        guard tracing.isOn || logger != nil else {
            if shutDown { throw CachedNetworkingError(.shutDown, "the cache was shut down") }
            return try await answer(request, body: body, policy: policy, transport: transport)
        }
        return try await scoped(
            request, body: body, policy: policy, transport: transport, logger: logger, shutDown: shutDown
        ).get()
    }

    /// ``run(_:body:policy:transport:logger:)`` once counted; `transport` is the call's own (nil: the cache's).
    func answer(
        _ request: HTTPRequest,
        body: ByteBuffer?,
        policy: CachePolicy,
        transport: (any HTTPTransport)?
    ) async throws(CachedNetworkingError) -> CachedResponse {
        var forwardedAsIs = false
        let response = try await respond(
            request, body: body, policy: policy, transport: transport, clientConditional: nil, forwardedAsIs: &forwardedAsIs)
        guard logs(.debug) else { return response }
        log.debug(
            "answered",
            metadata: [
                CachedNetworkingLogKeys.method: "\(request.method)",
                CachedNetworkingLogKeys.uri: "\(request.scheme ?? "")://\(request.authority ?? "")\(request.path ?? "")",
                CachedNetworkingLogKeys.cacheStatus: "\(response.cacheStatus.headerValue)",
            ])
        return response
    }

    /// The answer to `request`.
    ///
    /// `clientConditional` is the client's request when `request` is that request without the conditions the
    /// cache evaluates itself (see ``respondConditional(_:body:policy:transport:)``): then, when no
    /// stored response can be used, `clientConditional` goes to the origin as it is, and `forwardedAsIs` is set.
    @inline(__always)
    private func respond(
        _ request: HTTPRequest,
        body: ByteBuffer?,
        policy: CachePolicy,
        transport: (any HTTPTransport)?,
        clientConditional: HTTPRequest?,
        forwardedAsIs: inout Bool
    ) async throws(CachedNetworkingError) -> CachedResponse {
        guard let target = RequestTarget(request) else {
            throw CachedNetworkingError(.invalidRequest, "the request has no scheme or authority")
        }
        if Task.isCancelled { throw CachedNetworkingError(.cancelled, "the task was cancelled before the request started") }
        if !configuration.rules.cacheableMethods.contains(target.method) {
            return try await forwardUncached(
                request, body: body, uri: target.normalizedURI, reason: .method, through: transport)
        }
        switch ClientConditions.handling(of: request, method: target.method) {
        case .unconditional:
            break
        case .evaluatedByCache:
            return try await respondConditional(request, body: body, policy: policy, transport: transport)
        case .forwarded:
            return try await forwardUncached(
                request, body: body, uri: target.normalizedURI, reason: .bypass, through: transport)
        }
        var directives = RequestCacheControl(request.headerFields)
        switch policy.base {
        case .reloadRevalidatingCacheData: directives.noCache = true
        case .returnCacheDataDontLoad: directives.onlyIfCached = true
        case .refreshStale: directives.minFresh = directives.minFresh ?? 0
        default: break
        }
        // The URI and, while the generation is cached, the entry key, from the table when this target was seen.
        let resolved = resolve(target)
        // The common case, without suspending (no async call to set up) and without copying the request into a
        // `RequestContext`: the key known, a store that answers at once with this request's own response, and a
        // decision that serves it as stored.
        var found: FoundEntry? = nil
        var read: StoreRead<EnvelopeRead>? = nil
        // The decision made here, when it needs more than the stored response (validation, a refresh).
        var decided: (now: Date, decision: ReuseDecision)? = nil
        if let key = resolved.entryKey, let readNow = store.getEnvelopeNow(key, rules: configuration.rules) {
            found = ownResponse(readNow, entryKey: key.string, method: target.method, uri: resolved.uri)
            if let found, policy.base != .reloadIgnoringLocalCacheData {
                // One clock read for the decision and the `Age` it is served with.
                let now = now()
                let decision = found.stored.decision(requestDirectives: directives, now: now)
                if let answer = servedAsStored(found, method: target.method, policy: policy, decision: decision, at: now) {
                    return answer
                }
                decided = (now, decision)
            }
            if found == nil { read = readNow }
        }

        let context = RequestContext(
            request: request, method: target.method, body: body, uri: resolved.uri, policy: policy, directives: directives,
            transport: transport)
        // No `Lookup` is made unless the origin is needed.
        var lookup: Lookup? = nil
        if let read, let key = resolved.entryKey {
            lookup = await examine(read, entryKey: key.string, context: context)
        } else if found == nil {
            lookup = await self.lookup(context, entryKey: resolved.entryKey?.string)
        }
        if found == nil { found = lookup?.entry }

        if let found, policy.base != .reloadIgnoringLocalCacheData {
            let now: Date
            let decision: ReuseDecision
            if let decided {
                (now, decision) = decided
            } else {
                now = self.now()
                decision = found.stored.decision(requestDirectives: directives, now: now)
                if let answer = servedAsStored(found, method: context.method, policy: policy, decision: decision, at: now) {
                    return answer
                }
            }
            // A call's own transport cannot outlive the call: the stale response is validated now instead of in
            // the background (only-if-cached never reaches the origin, so it is served as it is).
            if decision.action == .serveStaleWhileRevalidating, transport == nil || directives.onlyIfCached {
                metrics.hits.increment()
                metrics.staleServed("stale_while_revalidate")
                // only-if-cached (returnCacheDataDontLoad) never reaches the origin, not even in the background.
                if !directives.onlyIfCached {
                    scheduleRefresh(found, context: context, lookup: lookup ?? Lookup(found: found))
                }
                return serveStored(found, method: context.method, decision: decision, source: .stale, at: now)
            }
            if directives.onlyIfCached { return gatewayTimeout(context) }
            return try await validate(found, decision: decision, context: context, lookup: lookup ?? Lookup(found: found))
        }
        // A stored partial response answers a range request wholly within it (RFC 9111 §3.3).
        if let clientConditional, let partial = lookup?.partial, policy.base != .reloadIgnoringLocalCacheData,
            let answer = servedFromPartial(partial, request: clientConditional, policy: policy, directives: directives)
        {
            return answer
        }
        if directives.onlyIfCached { return gatewayTimeout(context) }
        let missLookup = lookup ?? found.map(Lookup.init(found:)) ?? Lookup(entryKey: nil)
        metrics.misses.increment()
        let reason: CacheStatus.ForwardReason =
            policy.base == .reloadIgnoringLocalCacheData
            ? .request : missLookup.varyMiss ? .varyMiss : missLookup.partial != nil ? .partial : .uriMiss
        if let clientConditional {
            // No stored response to evaluate the client's conditions against: they are meant for the origin
            // (RFC 9111 §4.3.2). The request goes as it is, alone (its answer depends on its own conditions); a
            // full response that comes back is stored like any other.
            forwardedAsIs = true
            let forwarded = RequestContext(
                request: clientConditional, method: context.method, body: body, uri: context.uri, policy: policy,
                directives: directives, transport: transport)
            return answer(try await fetchAndStore(forwarded, lookup: missLookup, forward: reason, fetchReason: "miss").get())
        }
        return try await fetchCoalesced(context, lookup: missLookup, forward: reason)
    }

    /// The answer to a GET or HEAD that carries `If-None-Match`, `If-Modified-Since`, `Range` or `If-Range`
    /// (RFC 9111 §4.3.2, RFC 9110 §14).
    ///
    /// The request without those fields is answered as any other (a fresh stored response served, a stale one
    /// validated with the cache's own validators and updated or replaced, a response fetched); then the client's
    /// conditions are evaluated against that answer: `304 Not Modified` when they say the client's copy is
    /// current, else a GET's range is cut from it (``part(of:ranges:ifRange:)``). When no complete stored response
    /// could be used, a stored partial one answers a range wholly within it
    /// (``servedFromPartial(_:request:policy:directives:)``); otherwise the request goes to the origin with the
    /// client's fields, whose answer is the origin's to give and is passed on as it is (a whole `200` it sends
    /// instead of a range is still cut; a `206` is stored as a partial response when it may be).
    private func respondConditional(
        _ request: HTTPRequest,
        body: ByteBuffer?,
        policy: CachePolicy,
        transport: (any HTTPTransport)?
    ) async throws(CachedNetworkingError) -> CachedResponse {
        let conditions = ClientConditions(request.headerFields)
        var forwardedAsIs = false
        var answer = try await respond(
            ClientConditions.removing(from: request), body: body, policy: policy, transport: transport,
            clientConditional: request, forwardedAsIs: &forwardedAsIs)
        if forwardedAsIs || !conditions.notModified(answer.response, responseTime: now()) {
            // A range is cut after the conditions are evaluated (RFC 9110 §13.2.2), from a GET's whole response
            // only (§14.2): from the stored or validated one, or from a whole one the origin sent instead.
            guard request.method == .get, let ranges = ByteRanges(request) else { return answer }
            return Self.part(of: answer, ranges: ranges, ifRange: request.headerFields[.ifRange])
        }
        metrics.notModifiedAnswers.increment()
        answer.response = HTTPResponse(
            status: .notModified, headerFields: ClientConditions.notModifiedFields(from: answer.headerFields))
        answer.body = ByteBuffer()
        // The answer has no body, so it names no stored body.
        answer.entry = nil
        return answer
    }

    /// The stored response of `found` served as it is, when `policy` or `decision` allow that without the origin
    /// and without a background refresh (`returnCacheData…` policies, fresh, or stale within `max-stale`); nil
    /// otherwise.
    @inline(__always)
    private func servedAsStored(
        _ found: FoundEntry, method: HTTPRequest.Method, policy: CachePolicy, decision: ReuseDecision, at now: Date
    ) -> CachedResponse? {
        if policy.base == .returnCacheDataElseLoad || policy.base == .returnCacheDataDontLoad {
            metrics.hits.increment()
            if !decision.isFresh { metrics.staleServed("policy") }
            return serveStored(found, method: method, decision: decision, source: decision.isFresh ? .cache : .stale, at: now)
        }
        switch decision.action {
        case .serveFresh:
            metrics.hits.increment()
            return serveStored(found, method: method, decision: decision, source: .cache, at: now)
        case .serveStale:
            metrics.hits.increment()
            metrics.staleServed("max_stale")
            return serveStored(found, method: method, decision: decision, source: .stale, at: now)
        default:
            return nil
        }
    }

    /// Fetches `request` into the cache unless a fresh response is already stored. A stale stored response is
    /// validated (not served while a background validation runs, as `stale-while-revalidate` would), so that the
    /// call returns once the response is stored.
    /// - Parameters:
    ///   - request: The request.
    ///   - logger: Where the cache's lines about this request go; nil for the cache's logger (see
    ///     ``run(_:body:policy:transport:logger:)``).
    /// - Returns: Where the response came from (`.cache` when nothing had to be fetched, `.revalidated` when the
    ///   origin confirmed the stored response).
    /// - Throws: ``CachedNetworkingError`` as ``run(_:body:policy:transport:logger:)`` does.
    @discardableResult
    public func prefetch(_ request: HTTPRequest, logger: Logger? = nil) async throws(CachedNetworkingError) -> CachedResponse.Source {
        try await run(request, policy: .refreshStale, logger: logger).source
    }

    /// Removes the stored GET and HEAD responses (all `Vary` variants) for the target URI of `request`.
    /// - Throws: ``CachedNetworkingError`` of kind ``CachedNetworkingError/Kind/store`` when the store fails.
    public func invalidate(_ request: HTTPRequest) async throws(CachedNetworkingError) {
        guard let uri = CacheURI.normalized(request) else {
            throw CachedNetworkingError(.invalidRequest, "the request has no scheme or authority")
        }
        guard let generation = await currentGeneration() else {
            throw CachedNetworkingError(.store, "cannot read the namespace generation")
        }
        let targets = entryKeys(for: [uri], generation: generation)
        let store = self.store.store
        let span = tracing.startStoreCall(.remove, key: targets.first ?? "")
        defer { span?.end() }
        if case .failure(let error) = await withStoreTimeout(configuration.storeTimeout, { () async throws(CacheStoreError) in
            try await store.remove(targets)
        }) {
            if let span { CacheTracing.fail(span, error, type: "store") }
            throw CachedNetworkingError(.store, "cannot remove entries", underlying: error)
        }
    }

    /// Invalidates every response stored under this namespace, in O(1): increments the namespace's generation
    /// counter, so that all keys change; the old entries expire by their TTLs.
    ///
    /// Other processes see the new generation within ``Configuration/generationCacheDuration``.
    /// - Throws: ``CachedNetworkingError`` of kind ``CachedNetworkingError/Kind/store`` when the store fails.
    public func invalidateAll() async throws(CachedNetworkingError) {
        let store = self.store.store
        let key = keys.generationKey
        let span = tracing.startStoreCall(.increment, key: key)
        defer { span?.end() }
        switch await withStoreTimeout(configuration.storeTimeout, { () async throws(CacheStoreError) in
            try await store.increment(key)
        }) {
        case .success(let value):
            generationCache.withLock { $0.record(value, readAt: ContinuousClock.now) }
        case .failure(let error):
            if let span { CacheTracing.fail(span, error, type: "store") }
            metrics.storeError(.increment)
            throw CachedNetworkingError(.store, "cannot increment the generation", underlying: error)
        }
    }

    /// Waits until the background revalidations started by `stale-while-revalidate`, invalidations being retried
    /// after a store failure, and the `Vary` index writes that record a served variant's use, have finished (for
    /// tests and graceful shutdown). When the calling task is
    /// cancelled, the background work is cancelled and this returns without waiting for it.
    public func waitForBackgroundRefreshes() async {
        while !Task.isCancelled {
            let (tasks, running) = background.withLock { ($0.tasks.values.map { $0 }, $0.structuredRunning) }
            if tasks.isEmpty && running == 0 { return }
            await withTaskCancellationHandler {
                for task in tasks { await task.value }
            } onCancel: {
                for task in tasks { task.cancel() }
            }
            if running > 0 { await waitInBackgroundState(until: { $0.structuredRunning == 0 }, among: \.idleWaiters) }
        }
    }

    /// Suspends until `done` holds for the background state, woken by whoever resumes the waiters at `waiters`
    /// (each waiter checks again), or until the task is cancelled.
    func waitInBackgroundState(
        until done: @Sendable (BackgroundWork) -> Bool,
        among waiters: WritableKeyPath<BackgroundWork, [CheckedContinuation<Void, Never>]> & Sendable
    ) async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (woken: CheckedContinuation<Void, Never>) in
                let now = background.withLock { state -> Bool in
                    // The cancellation flag is set before the handler below runs, which takes this lock.
                    if done(state) || Task.isCancelled { return true }
                    state[keyPath: waiters].append(woken)
                    return false
                }
                if now { woken.resume() }
            }
        } onCancel: {
            let woken = background.withLock { state in
                defer { state[keyPath: waiters] = [] }
                return state[keyPath: waiters]
            }
            for waiter in woken { waiter.resume() }
        }
    }

    // MARK: - Lookup

    func now() -> Date { configuration.clock.now() }

    func currentGeneration() async -> Int? {
        if let cached = generationCache.withLock({ $0.generation }),
            ContinuousClock.now - cached.readAt < configuration.generationCacheDuration
        {
            return cached.value
        }
        guard let value = await store.get(keys.generationKey).value else { return nil }
        var generation = 0
        if var buffer = value {
            guard let text = buffer.readString(length: buffer.readableBytes), let parsed = Int(text) else {
                metrics.corruptEntries.increment()
                return nil
            }
            generation = parsed
        }
        generationCache.withLock { $0.record(generation, readAt: ContinuousClock.now) }
        return generation
    }

    /// The normalized URI of `target` (`uri` when the caller has it) and, while the generation is cached, its
    /// entry key.
    ///
    /// Both come from ``GenerationCache`` when `target` was seen in the cached generation, so that a repeated
    /// request neither normalizes its URI, nor hashes it, nor builds the key text again; otherwise they are worked
    /// out here, and kept (bounded).
    func resolve(_ target: RequestTarget, uri: String? = nil) -> (uri: String, entryKey: StoreKey?) {
        let readAt = ContinuousClock.now
        let duration = configuration.generationCacheDuration
        let cached = generationCache.withLock { $0.lookUp(target, at: readAt, within: duration) }
        if let known = cached?.resolved { return (known.uri, known.storeKey) }
        let uri = uri ?? target.normalizedURI
        guard let generation = cached?.generation else { return (uri, nil) }
        return (uri, entryKey(target, uri: uri, generation: generation).storeKey)
    }

    /// The entry key of `target` (whose normalized URI is `uri`) in the current generation; nil when the
    /// generation cannot be read.
    func currentEntryKey(_ target: RequestTarget, uri: String) async -> String? {
        if let key = resolve(target, uri: uri).entryKey { return key.string }
        guard let generation = await currentGeneration() else { return nil }
        return entryKey(target, uri: uri, generation: generation).entryKey
    }

    /// The entry key of `target` in `generation`, kept for the next request.
    private func entryKey(_ target: RequestTarget, uri: String, generation: Int) -> ResolvedTarget {
        let resolved = ResolvedTarget(uri: uri, entryKey: keys.entryKey(generation: generation, method: target.method, uri: uri))
        generationCache.withLock { $0.remember(resolved, for: target, generation: generation) }
        return resolved
    }

    func entryKeys(for uris: [String], generation: Int) -> [String] {
        uris.flatMap { uri in
            configuration.rules.cacheableMethods.sorted { $0.rawValue < $1.rawValue }.map {
                keys.entryKey(generation: generation, method: $0, uri: uri)
            }
        }
    }

    /// What is stored for `context`, under `entryKey` when the caller knows it for the current generation.
    func lookup(_ context: RequestContext, entryKey known: String? = nil) async -> Lookup {
        var entryKey = known
        if entryKey == nil, let target = RequestTarget(context.request) {
            entryKey = await currentEntryKey(target, uri: context.uri)
        }
        guard let entryKey else { return Lookup(entryKey: nil) }
        let rules = configuration.rules
        var envelope = store.getEnvelopeNow(entryKey, rules: rules)
        if envelope == nil { envelope = await store.getEnvelope(entryKey, rules: rules) }
        guard let envelope else { return Lookup(entryKey: nil) }
        return await examine(envelope, entryKey: entryKey, context: context)
    }

    /// The response to `context`'s method and URI (without `Vary`) when `read`, the envelope under `entryKey`,
    /// holds it.
    func ownResponse(_ read: StoreRead<EnvelopeRead>, entryKey: String, context: RequestContext) -> FoundEntry? {
        ownResponse(read, entryKey: entryKey, method: context.method, uri: context.uri)
    }

    /// ``ownResponse(_:entryKey:context:)`` for a request with `method` and normalized URI `uri`. A partial
    /// response is not one: it never answers a request as a whole (RFC 9111 §3.3; see ``ownPartial(_:entryKey:context:)``).
    func ownResponse(_ read: StoreRead<EnvelopeRead>, entryKey: String, method: HTTPRequest.Method, uri: String) -> FoundEntry? {
        guard case .value(.found(let decoded)) = read, let response = decoded.response, response.entry.varyValues.isEmpty,
            response.entry.method == method.rawValue, response.entry.uri == uri, response.entry.parts == nil
        else { return nil }
        return FoundEntry(stored: response, key: entryKey)
    }

    /// The partial response to `context`'s method and URI when `read`, the envelope under `entryKey`, holds one.
    func ownPartial(_ read: StoreRead<EnvelopeRead>, entryKey: String, context: RequestContext) -> FoundEntry? {
        guard case .value(.found(let decoded)) = read, let response = decoded.response, response.entry.parts != nil,
            response.entry.varyValues.isEmpty, response.entry.method == context.method.rawValue,
            response.entry.uri == context.uri
        else { return nil }
        return FoundEntry(stored: response, key: entryKey)
    }

    /// What `read`, the envelope under `entryKey`, means for `context` when no further store call is needed: a
    /// failed read, nothing stored, the response to this method and URI, or a partial one (no entry, and
    /// ``Lookup/partial``). nil otherwise (a `Vary` index, or a value that is not this request's: see
    /// ``examine(_:entryKey:context:)``).
    func examineNow(_ read: StoreRead<EnvelopeRead>, entryKey: String, context: RequestContext) -> Lookup? {
        if let found = ownResponse(read, entryKey: entryKey, context: context) { return Lookup(found: found) }
        if let partial = ownPartial(read, entryKey: entryKey, context: context) {
            var lookup = Lookup(entryKey: entryKey)
            lookup.partial = partial
            return lookup
        }
        switch read {
        case .failed: return Lookup(entryKey: nil)
        case .value(.missing): return Lookup(entryKey: entryKey)
        case .value: return nil
        }
    }

    /// What `read`, the envelope under `entryKey`, means for `context`: as ``examineNow(_:entryKey:context:)``,
    /// and for a `Vary` index the variant that matches the request's fields. A value that is neither is counted
    /// as corrupt and removed.
    func examine(_ read: StoreRead<EnvelopeRead>, entryKey: String, context: RequestContext) async -> Lookup {
        if let lookup = examineNow(read, entryKey: entryKey, context: context) { return lookup }
        var lookup = Lookup(entryKey: entryKey)
        let method = context.method.rawValue
        if case .value(.found(let decoded)) = read, decoded.response == nil, case .varyIndex(let index) = decoded.envelope,
            index.method == method, index.uri == context.uri
        {
            lookup.index = index
            let vary = Vary(fieldNames: index.fieldNames)
            let values = vary.selectingValues(from: context.request.headerFields)
            let hash = CacheKeys.variantHash(secondaryKey: vary.secondaryKey(values: values))
            let variantKey = CacheKeys.variantKey(entryKey: entryKey, nonce: index.nonce, hash: hash)
            guard let variantRead = await store.getEnvelope(variantKey, rules: configuration.rules).value else { return lookup }
            if case .found(let variant) = variantRead, let response = variant.response,
                response.entry.method == method, response.entry.uri == context.uri, response.entry.parts == nil,
                response.entry.varyValues.map(\.0) == vary.fieldNames, response.entry.varyValues.map(\.1) == values
            {
                lookup.entry = FoundEntry(stored: response, key: variantKey)
                // Its use, for the bound on variants (an index write at most once a minute per variant, in the
                // background).
                recordVariantUseInBackground(hash, of: index, entryKey: entryKey, ttl: storeTTL(response.prepared).ttl)
            } else {
                if case .missing = variantRead {} else { metrics.corruptEntries.increment() }
                lookup.varyMiss = true
            }
            return lookup
        }
        // Corrupt, foreign, or another URL's entry under a colliding key: a miss; the value is removed so that
        // it is counted once and replaced by the next store.
        metrics.corruptEntries.increment()
        log.debug("unreadable cache entry read as a miss", metadata: [CachedNetworkingLogKeys.key: "\(entryKey)"])
        await store.remove([entryKey])
        return lookup
    }

    // MARK: - Answers

    func makeResponse(
        _ response: consuming HTTPResponse,
        body: ByteBuffer,
        source: CachedResponse.Source,
        status: CacheStatus,
        entry: CachedResponse.EntryIdentity?
    ) -> CachedResponse {
        var response = response
        status.append(to: &response.headerFields)
        return answered(response, body: body, source: source, status: status, entry: entry)
    }

    /// The answer, with `status` already appended to the response's `Cache-Status`.
    private func answered(
        _ response: HTTPResponse,
        body: ByteBuffer,
        source: CachedResponse.Source,
        status: CacheStatus,
        entry: CachedResponse.EntryIdentity?
    ) -> CachedResponse {
        return CachedResponse(response: response, body: body, source: source, cacheStatus: status, entry: entry)
    }

    /// The stored response of `found` as an answer, with `Age` and this cache's `Cache-Status` member: `status`,
    /// or for a plain hit (`status` nil) `hit` with the `ttl` of `decision`.
    func serveStored(
        _ found: FoundEntry,
        context: RequestContext,
        decision: ReuseDecision,
        source: CachedResponse.Source,
        status: CacheStatus? = nil,
        at servedAt: Date? = nil
    ) -> CachedResponse {
        serveStored(found, method: context.method, decision: decision, source: source, status: status, at: servedAt)
    }

    /// ``serveStored(_:context:decision:source:status:at:)`` for a request with `method`.
    func serveStored(
        _ found: FoundEntry,
        method: HTTPRequest.Method,
        decision: ReuseDecision,
        source: CachedResponse.Source,
        status: CacheStatus? = nil,
        at servedAt: Date? = nil
    ) -> CachedResponse {
        let age = found.stored.prepared.currentAge(now: servedAt ?? now())
        let body = method == .head ? ByteBuffer() : found.stored.entry.body
        metrics.cacheBytes(body.readableBytes)
        let omitted = decision.fieldsToOmitWhenServed
        if let status {
            return makeResponse(
                found.stored.servedResponse(age: age, omitting: omitted, status: nil), body: body, source: source,
                status: status, entry: CachedResponse.EntryIdentity(key: found.key, version: found.version))
        }
        // Every hit on the entry in the same second of its age gets the same head: built once, then shared.
        let head = found.stored.servedHit(
            age: age, timeToLive: decision.timeToLive, omitting: omitted, source: source,
            cacheName: configuration.cacheName, key: found.key)
        return CachedResponse(head: head, body: body)
    }

    func gatewayTimeout(_ context: RequestContext) -> CachedResponse {
        var member = CacheStatus(cacheName: configuration.cacheName)
        member.detail = "only-if-cached"
        var fields = HTTPFields()
        fields[.contentLength] = "0"
        return makeResponse(
            HTTPResponse(status: .gatewayTimeout, headerFields: fields), body: ByteBuffer(), source: .cache,
            status: member, entry: nil)
    }

    // MARK: - Origin

    /// Sends `request` through `callTransport` (a call's own transport), or the cache's transport when it is nil,
    /// in a `cached.origin.fetch` span when tracing.
    func send(
        _ request: HTTPRequest, body: ByteBuffer?, through callTransport: (any HTTPTransport)?
    ) async throws(CachedNetworkingError) -> (HTTPTransportResponse, Date, Date) {
        guard let span = tracing.start(CachedNetworkingSpans.originFetch) else {
            return try await sendUntraced(request, body: body, through: callTransport)
        }
        return try await fetch(request, body: body, through: callTransport, in: span).get()
    }

    /// ``send(_:body:through:)`` without a span.
    func sendUntraced(
        _ request: HTTPRequest, body: ByteBuffer?, through callTransport: (any HTTPTransport)?
    ) async throws(CachedNetworkingError) -> (HTTPTransportResponse, Date, Date) {
        let requestTime = now()
        do {
            let start = metrics.timingStart
            defer { metrics.record(metrics.originFetchDuration, since: start) }
            var response = try await (callTransport ?? transport).send(request, body: body)
            metrics.originBytes(response.body.readableBytes)
            let responseTime = now()
            // Hop-by-hop fields concern the connection to the origin only: removed here, once, from every origin
            // response, so that neither what is stored nor what the caller is handed on a miss, a validation or
            // a forwarded request carries them (RFC 9110 §7.6.1).
            response.response.headerFields = HopByHop.removing(from: response.response.headerFields)
            // A response without Date gets the time it was received, as RFC 9110 §6.6.1 asks of a recipient that
            // caches or forwards it; so does one whose Date is not an HTTP date, which the same section allows a
            // recipient with a clock to replace (the age and freshness then count from the receive time, as
            // they would without Date).
            if response.response.headerFields[.date].flatMap({ HTTPDate.parse($0, relativeTo: responseTime) }) == nil {
                response.response.headerFields[.date] = HTTPDate.format(responseTime)
            }
            return (response, requestTime, responseTime)
        } catch let error as CachedNetworkingError {
            throw error
        } catch {
            if Task.isCancelled { throw CachedNetworkingError(.cancelled, "the task was cancelled during the origin fetch", underlying: error) }
            throw CachedNetworkingError(.transport, "\(error)", underlying: error)
        }
    }

    /// Removes the stored responses of `uris` (all `Vary` variants); false when the store did not answer.
    func invalidate(_ uris: [String]) async -> Bool {
        guard let generation = await currentGeneration() else { return false }
        return await store.remove(entryKeys(for: uris, generation: generation))
    }

    /// Invalidation must not be lost to a store that stalls for a moment (RFC 9111 §4.4: a cache MUST
    /// invalidate): the URIs join a pending set that one background task retries after 0.1, 0.5 and 2 seconds,
    /// all of them in one store call each time (so an outage does not multiply the store's traffic by the
    /// number of writes); what is still pending after the last attempt is given up with one warning, as those
    /// responses may be served until they expire. The set holds at most 10,000 URIs; more are given up at once,
    /// and counted in that warning.
    func retryInvalidation(_ uris: [String]) {
        let start = background.withLock { state -> Int? in
            for uri in uris {
                if state.invalidationsPending.count < Self.maximumPendingInvalidations {
                    state.invalidationsPending.insert(uri)
                } else {
                    state.invalidationsDropped += 1
                }
            }
            if state.invalidationRetryRunning { return nil }
            state.invalidationRetryRunning = true
            state.invalidationRetries += 1
            return state.invalidationRetries
        }
        guard let start else { return }
        let started = trackBackground("#invalidate \(start)") {
            for delay in [Duration.milliseconds(100), .milliseconds(500), .seconds(2)] {
                try? await Task.sleep(for: delay)
                let batch = self.background.withLock { Array($0.invalidationsPending) }
                if await self.invalidate(batch) {
                    let (done, dropped) = self.background.withLock { state -> (Bool, Int) in
                        state.invalidationsPending.subtract(batch)
                        guard state.invalidationsPending.isEmpty else { return (false, 0) }
                        state.invalidationRetryRunning = false
                        defer { state.invalidationsDropped = 0 }
                        return (true, state.invalidationsDropped)
                    }
                    if dropped > 0 { self.warnInvalidationsLost([], count: dropped) }
                    if done { return }
                }
            }
            self.abandonPendingInvalidations()
        }
        // The cache is shutting down: nothing retries them.
        if !started { abandonPendingInvalidations() }
    }

    /// Gives up the pending invalidations, with one warning.
    private func abandonPendingInvalidations() {
        let (abandoned, dropped) = background.withLock { state -> ([String], Int) in
            defer {
                state.invalidationsPending = []
                state.invalidationsDropped = 0
                state.invalidationRetryRunning = false
            }
            return (Array(state.invalidationsPending), state.invalidationsDropped)
        }
        warnInvalidationsLost(abandoned, count: abandoned.count + dropped)
    }

    /// Logs that `count` URIs (a few of them in `sample`) could not be invalidated.
    private func warnInvalidationsLost(_ sample: [String], count: Int) {
        var metadata: Logger.Metadata = ["cached.uris": "\(count)"]
        if !sample.isEmpty { metadata[CachedNetworkingLogKeys.uri] = "\(sample.prefix(10).joined(separator: " "))" }
        log.warning(
            "stored responses could not be invalidated after unsafe requests; they may be served until they expire",
            metadata: metadata)
    }

    static let maximumPendingInvalidations = 10_000

    func forwardUncached(
        _ request: HTTPRequest,
        body: ByteBuffer?,
        uri: String,
        reason: CacheStatus.ForwardReason,
        through callTransport: (any HTTPTransport)?
    ) async throws(CachedNetworkingError) -> CachedResponse {
        let unsafe = !Invalidation.safeMethods.contains(request.method)
        metrics.originFetch(unsafe ? "unsafe_method" : "bypass")
        let (answer, _, _) = try await send(request, body: body, through: callTransport)
        let targets = Invalidation.targets(request: request, response: answer.response)
        if !targets.isEmpty, !(await invalidate(targets)) { retryInvalidation(targets) }
        var member = CacheStatus(cacheName: configuration.cacheName)
        member.forward = reason
        return makeResponse(answer.response, body: answer.body, source: .network, status: member, entry: nil)
    }
}

/// One request on its way through the cache.
struct RequestContext: Sendable {
    let request: HTTPRequest
    /// The request's method, read once (each read of `HTTPRequest.method` makes it again).
    let method: HTTPRequest.Method
    let body: ByteBuffer?
    let uri: String
    let policy: CachePolicy
    let directives: RequestCacheControl
    /// The call's own transport (see ``CachedNetworking/run(_:body:policy:transport:logger:)``); nil for the cache's.
    let transport: (any HTTPTransport)?

    init(
        request: HTTPRequest, method: HTTPRequest.Method? = nil, body: ByteBuffer?, uri: String, policy: CachePolicy,
        directives: RequestCacheControl, transport: (any HTTPTransport)? = nil
    ) {
        self.request = request
        self.method = method ?? request.method
        self.body = body
        self.uri = uri
        self.policy = policy
        self.directives = directives
        self.transport = transport
    }

    /// Identifies the credentials of the request, so that requests of different users are never coalesced.
    var credentialsDigest: UInt64 {
        var hasher = FNV1a64()
        func combine(_ name: HTTPField.Name) {
            for field in request.headerFields where field.name == name {
                hasher.combine(name.canonicalName.utf8)
                hasher.combine(field.value.utf8)
            }
        }
        combine(.authorization)
        combine(.cookie)
        return hasher.value
    }
}

/// A stored response found for a request, its key, and what reusing it needs.
struct FoundEntry: Sendable {
    /// The entry with its reuse facts, prepared with the cache's rules.
    let stored: PreparedEntry
    var key: String

    // Borrowed, not copied: a copy of the entry or of its prepared facts retains every string and array in them.
    var entry: StoredEntry { _read { yield stored.entry } }
    var prepared: PreparedStoredResponse { _read { yield stored.prepared } }
    var version: String { stored.version }

    init(stored: PreparedEntry, key: String) {
        self.stored = stored
        self.key = key
    }

    /// `entry`, prepared with `rules`.
    init(entry: StoredEntry, key: String, rules: CachingRules) {
        self.init(stored: PreparedEntry(entry, rules: rules), key: key)
    }
}

/// What a lookup found.
struct Lookup: Sendable {
    /// The entry key for this generation and method; nil when the store failed (then nothing is written).
    var entryKey: String?
    var index: CacheEnvelope.VaryIndex?
    var entry: FoundEntry?
    var varyMiss = false
    /// A partial response stored under ``entryKey`` (RFC 9111 §3.3), when there is no complete one.
    var partial: FoundEntry?

    init(entryKey: String?) { self.entryKey = entryKey }

    /// A lookup that found `found` under its own key (no `Vary` index).
    init(found: FoundEntry) {
        entryKey = found.key
        entry = found
    }
}

/// What identifies a coalesced fetch: requests with equal keys share one.
struct FlightKey: Hashable, Sendable {
    enum Kind: Hashable, Sendable { case miss, validate }
    let kind: Kind
    /// A miss's forward reason (its `Cache-Status` token); empty for a validation.
    let reason: String
    /// The request's method and normalized URI (a miss), or the stored entry's key (a validation), compared by
    /// their bytes.
    let method: String
    let target: String
    /// ``RequestContext/credentialsDigest``.
    let credentials: UInt64

    static func == (lhs: FlightKey, rhs: FlightKey) -> Bool {
        lhs.credentials == rhs.credentials && UTF8Bytes.equal(lhs.target, rhs.target) && lhs.method == rhs.method
            && lhs.reason == rhs.reason && lhs.kind == rhs.kind
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(kind)
        hasher.combine(credentials)
        UTF8Bytes.combine(target, into: &hasher)
        hasher.combine(method)
        hasher.combine(reason)
    }
}

/// The shared outcome of a coalesced fetch.
struct FlightOutcome: Sendable {
    var response: HTTPResponse
    var body: ByteBuffer
    var status: CacheStatus
    var source: CachedResponse.Source
    var entry: CachedResponse.EntryIdentity?
    /// Whether the response may be shared with other requests (storable for a shared cache).
    var shareable: Bool
    /// The response's `Vary` and the leader's values for it.
    var vary: Vary?
    var varyValues: [String?]
}

typealias FlightResult = Result<FlightOutcome, CachedNetworkingError>

struct BackgroundWork: Sendable {
    /// Background work running as unstructured tasks (the cache is not running as a service).
    var tasks: [Int: Task<Void, Never>] = [:]
    /// Where background work goes while ``CachedNetworking/run()`` runs it as child tasks; nil otherwise.
    var runner: AsyncStream<@Sendable () async -> Void>.Continuation?
    /// Background jobs handed to ``runner`` that have not finished.
    var structuredRunning = 0
    /// Callers of ``CachedNetworking/waitForBackgroundRefreshes()`` waiting for ``structuredRunning`` to reach 0
    /// (or woken by another waiter's cancellation: each checks again).
    var idleWaiters: [CheckedContinuation<Void, Never>] = []
    /// ``CachedNetworking/shutdown()`` waiting for the requests in flight to finish.
    var requestWaiters: [CheckedContinuation<Void, Never>] = []
    /// Set by ``CachedNetworking/shutdown()`` (and graceful shutdown): no new background work starts.
    var stopped = false
    /// URIs whose invalidation the store did not take, waiting for the retry task (at most one runs).
    var invalidationsPending: Set<String> = []
    var invalidationRetryRunning = false
    /// URIs not taken into the pending set because it was full, since the last warning.
    var invalidationsDropped = 0
    /// Retry tasks started so far (each is tracked under a key of its own).
    var invalidationRetries = 0
    var refreshing: Set<String> = []
    var nextID = 0
}

extension CachedNetworking {
    /// Runs `job` in the background, at most one at a time per `refreshKey`: as a child task of ``run()`` when the
    /// cache runs as a service, else as a task the cache tracks. Nothing starts once the cache is shutting down.
    ///
    /// `job` runs with the logger and trace context of the request that started it, captured here.
    /// - Returns: whether `job` was started (false when it already runs, or the cache is shutting down).
    @discardableResult
    func trackBackground(_ refreshKey: String, _ job: @escaping @Sendable () async -> Void) -> Bool {
        enum Start { case started, alreadyRunning, stopped }
        let scope = RequestScope(tracing: tracing.isOn)
        let work: @Sendable () async -> Void = { await scope.run(job) }
        let start = background.withLock { state -> Start in
            if state.stopped { return .stopped }
            guard !state.refreshing.contains(refreshKey) else { return .alreadyRunning }
            state.refreshing.insert(refreshKey)
            if let runner = state.runner {
                state.structuredRunning += 1
                runner.yield {
                    await work()
                    let waiters = self.background.withLock { state -> [CheckedContinuation<Void, Never>] in
                        state.refreshing.remove(refreshKey)
                        state.structuredRunning -= 1
                        guard state.structuredRunning == 0 else { return [] }
                        defer { state.idleWaiters = [] }
                        return state.idleWaiters
                    }
                    for waiter in waiters { waiter.resume() }
                }
                return .started
            }
            let id = state.nextID
            state.nextID += 1
            state.tasks[id] = Task {
                await work()
                self.background.withLock { state in
                    state.refreshing.remove(refreshKey)
                    state.tasks[id] = nil
                }
            }
            return .started
        }
        switch start {
        case .started:
            return true
        case .alreadyRunning:
            log.trace("background work already running", metadata: [CachedNetworkingLogKeys.key: "\(refreshKey)"])
            return false
        case .stopped:
            log.debug(
                "the cache is shutting down: no background work", metadata: [CachedNetworkingLogKeys.key: "\(refreshKey)"])
            return false
        }
    }
}
