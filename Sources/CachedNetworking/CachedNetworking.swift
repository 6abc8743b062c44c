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
    let store: StoreAccess
    let keys: CacheKeys
    let metrics: CacheMetrics
    let logger: Logger
    let flights = SingleFlight<FlightResult>()
    private let generationCache = Mutex(GenerationCache())
    private let background = Mutex<BackgroundWork>(BackgroundWork())

    /// A cache over `store` that fetches through `transport`.
    /// - Parameters:
    ///   - store: Where responses are kept; shared by every process that uses the same namespace.
    ///   - transport: How requests reach origins.
    ///   - configuration: Settings.
    ///   - logger: Where the cache logs (at debug level); the library never sets up logging itself.
    public init(
        store: any CacheStore,
        transport: any HTTPTransport,
        configuration: Configuration = Configuration(),
        logger: Logger = Logger(label: "cached.networking")
    ) {
        self.configuration = configuration
        self.transport = transport
        self.logger = logger
        self.keys = CacheKeys(namespace: configuration.namespace, maximumURLLength: configuration.maximumKeyURLLength)
        let metrics = CacheMetrics(
            factory: configuration.metricsFactory ?? MetricsSystem.factory,
            namespace: configuration.namespace,
            extra: configuration.metricsDimensions
        )
        self.metrics = metrics
        self.store = StoreAccess(store: store, timeout: configuration.storeTimeout, metrics: metrics, logger: logger)
    }

    // MARK: - Requests

    /// Answers `request` from the cache or the origin, storing what may be stored.
    ///
    /// GET and HEAD responses are stored by default. Other methods go to the origin, and an unsafe method's
    /// success invalidates the stored responses for its target (and same-origin `Location` and
    /// `Content-Location`). Requests with their own conditionals or a `Range` are forwarded as they are.
    /// - Parameters:
    ///   - request: The request; it needs a scheme and an authority.
    ///   - body: The request content, if any.
    ///   - policy: How to use the cache for this request.
    /// - Returns: The response, with `Age` when it came from storage and this cache's `Cache-Status` member.
    /// - Throws: ``CachedNetworkingError`` when the request is invalid, the origin fails (and no stale response
    ///   may stand in), or the task is cancelled. Store failures never fail a request.
    public func run(
        _ request: HTTPRequest,
        body: ByteBuffer? = nil,
        policy: CachePolicy = .useProtocolCachePolicy
    ) async throws(CachedNetworkingError) -> CachedResponse {
        guard let uri = CacheURI.normalized(request) else {
            throw CachedNetworkingError(.invalidRequest, "the request has no scheme or authority")
        }
        if Task.isCancelled { throw CachedNetworkingError(.cancelled, "cancelled before start") }
        if !configuration.rules.cacheableMethods.contains(request.method) {
            return try await forwardUncached(request, body: body, uri: uri, reason: .method)
        }
        if Validation.isConditionalOrPartial(request) {
            return try await forwardUncached(request, body: body, uri: uri, reason: .bypass)
        }
        var directives = RequestCacheControl(request.headerFields)
        switch policy.base {
        case .reloadRevalidatingCacheData: directives.noCache = true
        case .returnCacheDataDontLoad: directives.onlyIfCached = true
        default: break
        }
        let context = RequestContext(request: request, body: body, uri: uri, policy: policy, directives: directives)
        let lookup = await self.lookup(context)

        if let found = lookup.entry, policy.base != .reloadIgnoringLocalCacheData {
            // One clock read for the decision and the `Age` it is served with.
            let now = now()
            let decision = ReuseDecision.evaluate(prepared: found.prepared, requestDirectives: directives, now: now)
            if policy.base == .returnCacheDataElseLoad || policy.base == .returnCacheDataDontLoad {
                metrics.hits.increment()
                if !decision.isFresh { metrics.staleServed("policy") }
                return serveStored(
                    found, context: context, decision: decision, source: decision.isFresh ? .cache : .stale, at: now)
            }
            switch decision.action {
            case .serveFresh:
                metrics.hits.increment()
                return serveStored(found, context: context, decision: decision, source: .cache, at: now)
            case .serveStale:
                metrics.hits.increment()
                metrics.staleServed("max_stale")
                return serveStored(found, context: context, decision: decision, source: .stale, at: now)
            case .serveStaleWhileRevalidating:
                metrics.hits.increment()
                metrics.staleServed("stale_while_revalidate")
                scheduleRefresh(found, context: context, lookup: lookup)
                return serveStored(found, context: context, decision: decision, source: .stale, at: now)
            default:
                if directives.onlyIfCached { return gatewayTimeout(context) }
                return try await validate(found, decision: decision, context: context, lookup: lookup)
            }
        }
        if directives.onlyIfCached { return gatewayTimeout(context) }
        metrics.misses.increment()
        let reason: CacheStatus.ForwardReason =
            policy.base == .reloadIgnoringLocalCacheData ? .request : lookup.varyMiss ? .varyMiss : .uriMiss
        return try await fetchCoalesced(context, lookup: lookup, forward: reason)
    }

    /// Fetches `request` into the cache unless a fresh response is already stored.
    /// - Returns: Where the response came from (`.cache` when nothing had to be fetched).
    /// - Throws: ``CachedNetworkingError`` as ``run(_:body:policy:)`` does.
    @discardableResult
    public func prefetch(_ request: HTTPRequest) async throws(CachedNetworkingError) -> CachedResponse.Source {
        try await run(request).source
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
        if case .failure(let error) = await withStoreTimeout(configuration.storeTimeout, { () async throws(CacheStoreError) in
            try await store.remove(targets)
        }) {
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
        switch await withStoreTimeout(configuration.storeTimeout, { () async throws(CacheStoreError) in
            try await store.increment(key)
        }) {
        case .success(let value):
            generationCache.withLock { $0.record(value, readAt: ContinuousClock.now) }
        case .failure(let error):
            metrics.storeError("increment")
            throw CachedNetworkingError(.store, "cannot increment the generation", underlying: error)
        }
    }

    /// Waits until the background revalidations started by `stale-while-revalidate` have finished (for tests and
    /// graceful shutdown).
    public func waitForBackgroundRefreshes() async {
        while true {
            let tasks = background.withLock { Array($0.tasks.values) }
            if tasks.isEmpty { return }
            for task in tasks { await task.value }
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

    /// The entry key of `method` and `uri` in the current generation; nil when the generation cannot be read.
    ///
    /// Keys built for the generation as cached are kept in ``GenerationCache`` (bounded), so that a repeated
    /// request neither hashes its URL nor builds the key text again.
    func currentEntryKey(method: HTTPRequest.Method, uri: String) async -> String? {
        let name = EntryKeyName(method: method, uri: uri)
        if let key = cachedEntryKey(name) { return key }
        guard let generation = await currentGeneration() else { return nil }
        return entryKey(name, generation: generation)
    }

    /// ``currentEntryKey(method:uri:)`` without suspending: nil when the generation has to be read again.
    func cachedEntryKey(_ name: EntryKeyName) -> String? {
        let readAt = ContinuousClock.now
        let cached = generationCache.withLock { cache -> (generation: Int, key: String?)? in
            guard let generation = cache.generation,
                readAt - generation.readAt < configuration.generationCacheDuration
            else { return nil }
            return (generation.value, cache.entryKeys[name])
        }
        guard let cached else { return nil }
        return cached.key ?? entryKey(name, generation: cached.generation)
    }

    /// The entry key of `name` in `generation`, kept for the next request.
    private func entryKey(_ name: EntryKeyName, generation: Int) -> String {
        let key = keys.entryKey(generation: generation, method: name.method, uri: name.uri)
        generationCache.withLock { $0.remember(key, for: name, generation: generation) }
        return key
    }

    func entryKeys(for uris: [String], generation: Int) -> [String] {
        uris.flatMap { uri in
            configuration.rules.cacheableMethods.sorted { $0.rawValue < $1.rawValue }.map {
                keys.entryKey(generation: generation, method: $0, uri: uri)
            }
        }
    }

    func lookup(_ context: RequestContext) async -> Lookup {
        // The common case without suspending (no async call to set up): the generation cached and a store that
        // answers at once.
        var entryKey = cachedEntryKey(EntryKeyName(method: context.request.method, uri: context.uri))
        if entryKey == nil { entryKey = await currentEntryKey(method: context.request.method, uri: context.uri) }
        guard let entryKey else { return Lookup(entryKey: nil) }
        var lookup = Lookup(entryKey: entryKey)
        let rules = configuration.rules
        var envelope = store.getEnvelopeNow(entryKey, rules: rules)
        if envelope == nil { envelope = await store.getEnvelope(entryKey, rules: rules) }
        guard let read = envelope?.value else {
            lookup.entryKey = nil
            return lookup
        }
        let method = context.request.method.rawValue
        switch read {
        case .missing:
            return lookup
        case .found(let decoded):
            if let response = decoded.response {
                if response.entry.method == method && response.entry.uri == context.uri && response.entry.varyValues.isEmpty {
                    lookup.entry = FoundEntry(stored: response, key: entryKey)
                    return lookup
                }
            } else if case .varyIndex(let index) = decoded.envelope, index.method == method, index.uri == context.uri {
                lookup.index = index
                let vary = Vary(fieldNames: index.fieldNames)
                let values = vary.selectingValues(from: context.request.headerFields)
                let variantKey = CacheKeys.variantKey(
                    entryKey: entryKey, nonce: index.nonce, secondaryKey: vary.secondaryKey(values: values))
                guard let variantRead = await store.getEnvelope(variantKey, rules: rules).value else { return lookup }
                if case .found(let variant) = variantRead, let response = variant.response,
                    response.entry.method == method, response.entry.uri == context.uri,
                    response.entry.varyValues.map(\.0) == vary.fieldNames, response.entry.varyValues.map(\.1) == values
                {
                    lookup.entry = FoundEntry(stored: response, key: variantKey)
                } else {
                    if case .missing = variantRead {} else { metrics.corruptEntries.increment() }
                    lookup.varyMiss = true
                }
                return lookup
            }
        case .unreadable:
            break
        }
        // Corrupt, foreign, or another URL's entry under a colliding key: a miss; the value is removed so that
        // it is counted once and replaced by the next store.
        metrics.corruptEntries.increment()
        logger.debug("unreadable cache entry read as a miss", metadata: [CachedNetworkingLogKeys.key: "\(entryKey)"])
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
        logger.debug(
            "answered",
            metadata: [CachedNetworkingLogKeys.cacheStatus: "\(status.headerValue)"]
        )
        return CachedResponse(response: response, body: body, source: source, cacheStatus: status, entry: entry)
    }

    func serveStored(
        _ found: FoundEntry,
        context: RequestContext,
        decision: ReuseDecision,
        source: CachedResponse.Source,
        status: CacheStatus? = nil,
        at servedAt: Date? = nil
    ) -> CachedResponse {
        let entry = found.stored.entry
        var response = entry.response
        // One copy of the stored fields, with room for `Age` and `Cache-Status` (else each may grow it again).
        response.headerFields.reserveCapacity(response.headerFields.count + 2)
        for name in decision.fieldsToOmitWhenServed {
            if let fieldName = HTTPField.Name(name) { response.headerFields[fieldName] = nil }
        }
        response.headerFields[.age] = String(found.prepared.currentAge(now: servedAt ?? now()))
        var member = status ?? CacheStatus(cacheName: configuration.cacheName)
        if status == nil {
            member.hit = true
            member.timeToLive = decision.timeToLive
        }
        let body = context.request.method == .head ? ByteBuffer() : entry.body
        metrics.bytes("cache", body.readableBytes)
        // Handed over (not copied), so that `Cache-Status` is appended to the fields copied above, not to a
        // second copy.
        return makeResponse(
            consume response, body: body, source: source, status: member,
            entry: CachedResponse.EntryIdentity(key: found.key, version: found.version))
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

    func send(_ request: HTTPRequest, body: ByteBuffer?) async throws(CachedNetworkingError) -> (HTTPTransportResponse, Date, Date) {
        let requestTime = now()
        do {
            let response = try await transport.send(request, body: body)
            metrics.bytes("origin", response.body.readableBytes)
            return (response, requestTime, now())
        } catch let error as CachedNetworkingError {
            throw error
        } catch {
            if Task.isCancelled { throw CachedNetworkingError(.cancelled, "cancelled", underlying: error) }
            throw CachedNetworkingError(.transport, "\(error)", underlying: error)
        }
    }

    func forwardUncached(
        _ request: HTTPRequest,
        body: ByteBuffer?,
        uri: String,
        reason: CacheStatus.ForwardReason
    ) async throws(CachedNetworkingError) -> CachedResponse {
        let unsafe = !Invalidation.safeMethods.contains(request.method)
        metrics.originFetch(unsafe ? "unsafe_method" : "bypass")
        let (answer, _, _) = try await send(request, body: body)
        let targets = Invalidation.targets(request: request, response: answer.response)
        if !targets.isEmpty, let generation = await currentGeneration() {
            await store.remove(entryKeys(for: targets, generation: generation))
        }
        var member = CacheStatus(cacheName: configuration.cacheName)
        member.forward = reason
        return makeResponse(answer.response, body: answer.body, source: .network, status: member, entry: nil)
    }
}

/// The namespace generation as last read, and the entry keys built for it (at most ``keyLimit`` keys and
/// ``byteLimit`` bytes of URL and key text; the table starts over when full or when the generation changes).
struct GenerationCache {
    static let keyLimit = 512
    static let byteLimit = 256 << 10

    var generation: (value: Int, readAt: ContinuousClock.Instant)?
    var entryKeys: [EntryKeyName: String] = [:]
    var bytes = 0

    /// `value` read (or set) at `readAt`; the keys of another generation are dropped.
    mutating func record(_ value: Int, readAt: ContinuousClock.Instant) {
        if generation?.value != value { forgetKeys() }
        generation = (value, readAt)
    }

    /// Keeps `key`, built for `name` in `generation`, unless the generation has changed since.
    mutating func remember(_ key: String, for name: EntryKeyName, generation: Int) {
        guard self.generation?.value == generation else { return }
        let size = name.uri.utf8.count + key.utf8.count
        guard size <= Self.byteLimit / 16 else { return }
        if entryKeys.count >= Self.keyLimit || bytes + size > Self.byteLimit { forgetKeys() }
        if entryKeys.updateValue(key, forKey: name) == nil { bytes += size }
    }

    private mutating func forgetKeys() {
        entryKeys.removeAll(keepingCapacity: true)
        bytes = 0
    }
}

/// A request's method and normalized URI, as the ``GenerationCache`` knows its entry key.
struct EntryKeyName: Hashable, Sendable {
    let method: HTTPRequest.Method
    let uri: String
}

/// One request on its way through the cache.
struct RequestContext: Sendable {
    let request: HTTPRequest
    let body: ByteBuffer?
    let uri: String
    let policy: CachePolicy
    let directives: RequestCacheControl

    /// Identifies the credentials of the request, so that requests of different users are never coalesced.
    var credentialsHash: String {
        var hasher = FNV1a64()
        for name in [HTTPField.Name.authorization, .cookie] {
            for value in request.headerFields[values: name] {
                hasher.combine(name.canonicalName.utf8)
                hasher.combine(value.utf8)
            }
        }
        return FNV1a64.hex(hasher.value)
    }
}

/// A stored response found for a request, its key, and what reusing it needs.
struct FoundEntry: Sendable {
    /// The entry with its reuse facts, prepared with the cache's rules.
    let stored: PreparedEntry
    var key: String

    var entry: StoredEntry { stored.entry }
    var prepared: PreparedStoredResponse { stored.prepared }
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

    init(entryKey: String?) { self.entryKey = entryKey }
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
    var tasks: [Int: Task<Void, Never>] = [:]
    var refreshing: Set<String> = []
    var nextID = 0
}

extension CachedNetworking {
    func trackBackground(_ refreshKey: String, _ work: @escaping @Sendable () async -> Void) {
        let started = background.withLock { state -> Bool in
            guard !state.refreshing.contains(refreshKey) else { return false }
            state.refreshing.insert(refreshKey)
            let id = state.nextID
            state.nextID += 1
            state.tasks[id] = Task {
                await work()
                self.background.withLock { state in
                    state.refreshing.remove(refreshKey)
                    state.tasks[id] = nil
                }
            }
            return true
        }
        if !started {
            logger.trace("background refresh already running", metadata: [CachedNetworkingLogKeys.key: "\(refreshKey)"])
        }
    }
}
