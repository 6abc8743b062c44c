public import Foundation
public import HTTPTypes
public import Logging
import NIOCore
import Synchronization

/// Why a ``CachedRepository`` could not produce a value.
///
/// A struct over a private enum, so that new cases are not a breaking change.
public struct CachedRepositoryError: Error, Sendable, CustomStringConvertible {
    /// What went wrong, broadly.
    public struct Kind: Sendable, Hashable, CustomStringConvertible {
        enum Base: Sendable, Hashable { case network, status, decoding, source }
        let base: Base

        /// The request, or the removal of its stored response, failed (see ``CachedRepositoryError/networkError``).
        public static let network = Kind(base: .network)
        /// The response's status was not 2xx (see ``CachedRepositoryError/status``).
        public static let status = Kind(base: .status)
        /// The body could not be decoded.
        public static let decoding = Kind(base: .decoding)
        /// The fetch of a repository over any async source threw (see ``CachedRepositoryError/underlying``).
        public static let source = Kind(base: .source)

        public var description: String {
            switch base {
            case .network: "network"
            case .status: "status"
            case .decoding: "decoding"
            case .source: "source"
            }
        }
    }

    /// The broad kind of failure.
    public let kind: Kind
    /// The request's error, for ``Kind/network``. An error that a fetch function threw which is not a
    /// ``CachedNetworkingError`` is wrapped in one, of kind ``CachedNetworkingError/Kind/transport`` (or
    /// ``CachedNetworkingError/Kind/cancelled`` for a `CancellationError`).
    public let networkError: CachedNetworkingError?
    /// The response's status, for ``Kind/status``.
    public let status: HTTPResponse.Status?
    /// Details for logs.
    public let message: String
    /// The error as it was thrown (by the fetch, the decoder or the source), if any.
    public let underlying: (any Error)?

    init(
        _ kind: Kind, _ message: String, networkError: CachedNetworkingError? = nil, status: HTTPResponse.Status? = nil,
        underlying: (any Error)? = nil
    ) {
        self.kind = kind
        self.message = message
        self.networkError = networkError
        self.status = status
        self.underlying = underlying
    }

    /// A ``Kind/network`` error for what a fetch threw.
    static func fetchFailed(_ error: any Error) -> CachedRepositoryError {
        let networkError: CachedNetworkingError
        if let error = error as? CachedNetworkingError {
            networkError = error
        } else if error is CancellationError {
            networkError = CachedNetworkingError(.cancelled, "the task was cancelled during the fetch", underlying: error)
        } else {
            networkError = CachedNetworkingError(.transport, "\(error)", underlying: error)
        }
        return CachedRepositoryError(.network, "\(networkError)", networkError: networkError, underlying: error)
    }

    public var description: String { "\(kind): \(message)" }
}

/// Where a ``CachedRepository`` read's value came from.
///
/// A struct over a private enum, so that sources can be added without breaking callers.
public struct CachedValueSource: Sendable, Hashable, CustomStringConvertible {
    enum Base: Sendable, Hashable { case held, cache, revalidated, stale, coalesced, origin }
    let base: Base

    /// The value the repository holds, within its ``CachedRepository/lifetime``: nothing was fetched.
    public static let held = CachedValueSource(base: .held)
    /// A fresh stored response (``CachedResponse/Source/cache``).
    public static let cache = CachedValueSource(base: .cache)
    /// A stored response the origin confirmed with `304 Not Modified` (``CachedResponse/Source/revalidated``).
    public static let revalidated = CachedValueSource(base: .revalidated)
    /// A stale stored response (``CachedResponse/Source/stale``).
    public static let stale = CachedValueSource(base: .stale)
    /// Another read's fetch: a read of the same repository was already fetching, or the cache joined the request
    /// to another one (``CachedResponse/Source/coalesced``).
    public static let coalesced = CachedValueSource(base: .coalesced)
    /// Fetched by this read: from the origin (``CachedResponse/Source/network``), or from a repository's async
    /// source.
    public static let origin = CachedValueSource(base: .origin)

    /// The source of a value decoded from a response of `source`.
    public init(_ source: CachedResponse.Source) {
        switch source {
        case .cache: self = .cache
        case .revalidated: self = .revalidated
        case .stale: self = .stale
        case .coalesced: self = .coalesced
        default: self = .origin
        }
    }

    init(base: Base) { self.base = base }

    public var description: String {
        switch base {
        case .held: "held"
        case .cache: "cache"
        case .revalidated: "revalidated"
        case .stale: "stale"
        case .coalesced: "coalesced"
        case .origin: "origin"
        }
    }
}

/// A value read from a ``CachedRepository``, with where it came from, its age and the cache's `Cache-Status`.
public struct CachedValue<Value: Sendable>: Sendable {
    /// Where a value came from.
    public typealias Source = CachedValueSource

    /// The value.
    public var value: Value
    /// Where it came from.
    public var source: Source
    /// How old it is: for an HTTP resource, the age of the response it was decoded from (its `Age`, RFC 9111
    /// §4.2.3) plus the time the repository has held it; for any other source, the time since it was fetched.
    public var age: Duration
    /// This cache's `Cache-Status` member (RFC 9211) for the response the value was decoded from (for a
    /// ``CachedValueSource/held`` value, the response it was first decoded from); nil for a source that is not
    /// HTTP.
    public var cacheStatus: CacheStatus?

    /// A read of `value` from `source`, `age` old.
    public init(value: Value, source: Source, age: Duration, cacheStatus: CacheStatus? = nil) {
        self.value = value
        self.source = source
        self.age = age
        self.cacheStatus = cacheStatus
    }
}

/// One resource as a typed value: a decorator over ``CachedNetworking`` (or any async source) that decodes each
/// stored response once, and may hold the value for a lifetime of its own.
///
/// Make one repository per resource when the service starts, and keep it: what it holds lives as long as it does.
///
/// ```swift
/// let items = CachedRepository<[Item]>(cache, request: itemsRequest, lifetime: .seconds(30))
/// let list = try await items.value()          // the value
/// let read = try await items.read()           // the value, its source, age and Cache-Status
/// try await items.invalidate()                // after a change: drop it, and the stored response
/// ```
///
/// - **Decoded once per stored entry version.** Repeated answers with the same entry identity (the entry's key
///   and its strong `ETag`, or the time its body was stored) and the same body bytes return the value already
///   decoded; a 304 revalidation keeps the identity. A response that was not stored is decoded every time.
/// - **A lifetime of its own.** With a ``lifetime``, a value is held and answered without any call (source
///   ``CachedValueSource/held``) until that much time has passed on the repository's clock since it was fetched,
///   whatever the origin's header fields say (a `no-store` response included). Then the next read goes to the
///   source again: through the HTTP cache, whose own rules decide whether the stored response is still fresh.
///   Without a lifetime, every read asks the source (for an HTTP resource, the cache).
/// - **One fetch at a time.** Reads that find nothing held while another read is fetching wait for that fetch
///   and share its value (source ``CachedValueSource/coalesced``).
/// - **Invalidation.** ``invalidate()`` drops what the repository holds and, for a repository over a
///   ``CachedNetworking``, removes the stored responses of its request.
public final class CachedRepository<Value: Sendable>: Sendable {
    /// Fetches a response for a request (``CachedNetworking/run(_:body:policy:transport:logger:)`` or a stand-in). Any error
    /// it throws fails the read with ``CachedRepositoryError/Kind/network``.
    public typealias Fetch = @Sendable (HTTPRequest, CachePolicy) async throws -> CachedResponse
    /// Decodes a body.
    public typealias Decode = @Sendable (Data) throws -> Value

    private enum Source: Sendable {
        /// An HTTP resource: `request` (or why there is none) through `fetch`, decoded with `decode`; `remove`
        /// removes its stored responses, when the repository knows the cache.
        case http(
            request: Result<HTTPRequest, CachedNetworkingError>, fetch: Fetch, decode: Decode,
            remove: (@Sendable () async throws -> Void)?)
        /// Any async source.
        case value(@Sendable () async throws -> Value)
    }

    /// A value fetched (or decoded) by a read.
    private struct Obtained: Sendable {
        var value: Value
        var source: CachedValueSource
        var age: Duration
        var cacheStatus: CacheStatus?
    }

    /// A value held within the lifetime, and when it was fetched (the clock's uptime).
    private struct Held: Sendable {
        var obtained: Obtained
        var fetchedAt: Duration
    }

    private struct State {
        var held: Held?
        /// The last value decoded, and the stored entry and body it was decoded from.
        var decoded: (entry: CachedResponse.EntryIdentity, body: ByteBuffer, value: Value)?
        /// Incremented by ``invalidate()``: a fetch that began before it is not held.
        var generation = 0
        /// The next fetch must not use the stored response (an invalidation the repository could not make in the
        /// store itself).
        var bypassStoredResponse = false
        /// The decoded values of ``value(for:policy:)`` (deprecated), by entry key, oldest first.
        var values: [String: (version: String, value: Value)] = [:]
        var order: [String] = []

        /// Forgets every value, and makes fetches under way too old to be held.
        mutating func dropAll() {
            generation += 1
            held = nil
            decoded = nil
            values = [:]
            order = []
        }
    }

    private struct FlightKey: Hashable, Sendable {
        var generation: Int
        var policy: CachePolicy
    }

    /// The request the repository reads; nil for a repository over any async source (or made without one).
    public let request: HTTPRequest?
    /// How long a fetched value is held and answered without a call; nil when nothing is held.
    public let lifetime: Duration?

    private let source: Source
    private let clock: any CacheClock
    /// The policy of reads that do not give one.
    private let policy: CachePolicy
    /// How many values ``value(for:policy:)`` keeps.
    private let capacity: Int
    private let state = Mutex(State())
    private let flights = SingleFlight<FlightKey, Result<Obtained, CachedRepositoryError>>()

    private init(source: Source, lifetime: Duration?, clock: any CacheClock, policy: CachePolicy, capacity: Int = 256) {
        self.source = source
        if case .http(.success(let request), _, _, _) = source {
            self.request = request
        } else {
            self.request = nil
        }
        self.lifetime = lifetime.flatMap { $0 > .zero ? $0 : nil }
        self.clock = clock
        self.policy = policy
        self.capacity = max(1, capacity)
    }

    /// How many reads are waiting for another read's fetch (for tests).
    var waitingReads: Int { flights.waiting }

    // MARK: - Making one

    /// A repository of the resource `request` names, read through `cache`, decoded with `decode`.
    /// - Parameters:
    ///   - cache: The cache the requests go through; its ``CachedNetworking/Configuration/clock`` measures the
    ///     lifetime.
    ///   - request: The resource (a GET, usually).
    ///   - lifetime: How long a value is held and answered without asking the cache; nil (the default) to ask the
    ///     cache on every read.
    ///   - decode: Decodes a 2xx response's body.
    public convenience init(
        _ cache: CachedNetworking, request: HTTPRequest, lifetime: Duration? = nil, decode: @escaping Decode
    ) {
        self.init(
            cache, request: .success(request), body: nil, lifetime: lifetime, policy: .useProtocolCachePolicy,
            decode: decode)
    }

    /// A repository of the resource `request` names, read through `cache`, decoded as JSON.
    /// - Parameters:
    ///   - cache: The cache the requests go through; its ``CachedNetworking/Configuration/clock`` measures the
    ///     lifetime.
    ///   - request: The resource (a GET, usually).
    ///   - lifetime: How long a value is held and answered without asking the cache; nil (the default) to ask the
    ///     cache on every read.
    ///   - decoder: Decodes a 2xx response's body. Default: a `JSONDecoder` with its default settings.
    public convenience init(
        _ cache: CachedNetworking, request: HTTPRequest, lifetime: Duration? = nil,
        decoder: JSONDecoder = JSONDecoder()
    ) where Value: Decodable {
        self.init(cache, request: request, lifetime: lifetime, decode: Self.decoding(with: decoder))
    }

    /// A repository of `request` read through `cache`, with `body`, by default under `policy`.
    convenience init(
        _ cache: CachedNetworking, request: Result<HTTPRequest, CachedNetworkingError>, body: ByteBuffer?,
        lifetime: Duration?, policy: CachePolicy, decode: @escaping Decode
    ) {
        var remove: (@Sendable () async throws -> Void)? = nil
        if case .success(let target) = request { remove = { try await cache.invalidate(target) } }
        self.init(
            source: .http(
                request: request,
                fetch: { request, policy in try await cache.run(request, body: body, policy: policy) },
                decode: decode, remove: remove),
            lifetime: lifetime, clock: cache.configuration.clock, policy: policy)
    }

    /// A repository of the resource `request` names, read with any fetch function, decoded with `decode`.
    ///
    /// The fetch is an ordinary throwing closure: `{ request, policy in try await cache.run(request, policy: policy) }`,
    /// or a stand-in in tests.
    /// - Parameters:
    ///   - request: The resource.
    ///   - lifetime: How long a value is held and answered without calling `fetch`; nil (the default) to call it
    ///     on every read.
    ///   - clock: The clock the lifetime is measured on. Default: the system's.
    ///   - fetch: Fetches a response for a request under a policy.
    ///   - decode: Decodes a 2xx response's body.
    public convenience init(
        request: HTTPRequest, lifetime: Duration? = nil, clock: any CacheClock = SystemCacheClock(),
        fetch: @escaping Fetch, decode: @escaping Decode
    ) {
        self.init(
            source: .http(request: .success(request), fetch: fetch, decode: decode, remove: nil), lifetime: lifetime,
            clock: clock, policy: .useProtocolCachePolicy)
    }

    /// A repository of the resource `request` names, read with any fetch function, decoded as JSON.
    /// - Parameters:
    ///   - request: The resource.
    ///   - lifetime: How long a value is held and answered without calling `fetch`; nil (the default) to call it
    ///     on every read.
    ///   - clock: The clock the lifetime is measured on. Default: the system's.
    ///   - decoder: Decodes a 2xx response's body. Default: a `JSONDecoder` with its default settings.
    ///   - fetch: Fetches a response for a request under a policy.
    public convenience init(
        request: HTTPRequest, lifetime: Duration? = nil, clock: any CacheClock = SystemCacheClock(),
        decoder: JSONDecoder = JSONDecoder(), fetch: @escaping Fetch
    ) where Value: Decodable {
        self.init(request: request, lifetime: lifetime, clock: clock, fetch: fetch, decode: Self.decoding(with: decoder))
    }

    /// A repository over any async source: a database query, another client, a computation.
    ///
    /// ```swift
    /// let rates = CachedRepository<[String: Double]>(lifetime: .seconds(60)) { try await ratesClient.latest() }
    /// ```
    /// - Parameters:
    ///   - lifetime: How long a value is held and answered without calling `fetch`; nil (the default) to call it
    ///     on every read (concurrent reads still share one call).
    ///   - clock: The clock the lifetime is measured on. Default: the system's.
    ///   - fetch: Produces the value; what it throws fails the read with ``CachedRepositoryError/Kind/source``.
    public convenience init(
        lifetime: Duration? = nil, clock: any CacheClock = SystemCacheClock(),
        fetch: @escaping @Sendable () async throws -> Value
    ) {
        self.init(source: .value(fetch), lifetime: lifetime, clock: clock, policy: .useProtocolCachePolicy)
    }

    private static func decoding(with decoder: JSONDecoder) -> Decode where Value: Decodable {
        { data in try decoder.decode(Value.self, from: data) }
    }

    // MARK: - Reading

    /// The value, with where it came from, its age and the cache's `Cache-Status`.
    ///
    /// A value held within the ``lifetime`` answers at once (``CachedValueSource/held``); otherwise the source is
    /// asked, once for all the reads that wait for it.
    /// - Parameters:
    ///   - policy: How the HTTP cache is used (``CachedNetworking/run(_:body:policy:transport:logger:)``); nil for
    ///     the repository's (``CachePolicy/useProtocolCachePolicy``, or a `URLRequest`'s `cachePolicy`).
    ///     ``CachePolicy/reloadIgnoringLocalCacheData`` and ``CachePolicy/reloadRevalidatingCacheData`` also pass
    ///     over a held value. A repository over an async source has no stored response: the two reload policies
    ///     fetch anew, the others answer with a held value when there is one and fetch otherwise.
    ///   - logger: Where the cache's lines about the request this read makes go (see
    ///     ``CachedNetworking/run(_:body:policy:transport:logger:)``); nil for the cache's logger. A read that joins
    ///     another read's fetch makes no request of its own: the lines of that fetch go to the other read's logger.
    /// - Throws: ``CachedRepositoryError`` when the request fails, the status is not 2xx, decoding fails, or the
    ///   async source throws.
    public func read(policy: CachePolicy? = nil, logger: Logger? = nil) async throws(CachedRepositoryError) -> CachedValue<Value> {
        guard let logger else { return try await readValue(policy: policy) }
        return try await RequestLogging.with(logger) { () async -> Result<CachedValue<Value>, CachedRepositoryError> in
            do throws(CachedRepositoryError) {
                return .success(try await readValue(policy: policy))
            } catch {
                return .failure(error)
            }
        }.get()
    }

    /// ``read(policy:logger:)`` in the current task's logging scope.
    private func readValue(policy: CachePolicy?) async throws(CachedRepositoryError) -> CachedValue<Value> {
        let policy = policy ?? self.policy
        let reload = policy == .reloadIgnoringLocalCacheData || policy == .reloadRevalidatingCacheData
        let now = clock.uptime()
        let (held, generation, bypass) = state.withLock { ($0.held, $0.generation, $0.bypassStoredResponse) }
        if !reload, let held, let lifetime, now - held.fetchedAt < lifetime {
            let elapsed = max(.zero, now - held.fetchedAt)
            return CachedValue(
                value: held.obtained.value, source: .held, age: held.obtained.age + elapsed,
                cacheStatus: held.obtained.cacheStatus)
        }
        // After an invalidation the repository could not make in the store, the stored response is passed over.
        let bypassing = bypass && (policy == .useProtocolCachePolicy || policy == .returnCacheDataElseLoad)
        let effective = bypassing ? CachePolicy.reloadIgnoringLocalCacheData : policy
        let (result, leader) = await flights.run(FlightKey(generation: generation, policy: effective)) {
            await self.obtain(policy: effective, generation: generation)
        }
        var obtained = try result.get()
        if !leader { obtained.source = .coalesced }
        return CachedValue(value: obtained.value, source: obtained.source, age: obtained.age, cacheStatus: obtained.cacheStatus)
    }

    /// The value: ``read(policy:logger:)`` without the details.
    /// - Throws: ``CachedRepositoryError`` as ``read(policy:logger:)`` does.
    public func value(policy: CachePolicy? = nil, logger: Logger? = nil) async throws(CachedRepositoryError) -> Value {
        try await read(policy: policy, logger: logger).value
    }

    /// Drops what the repository holds and, for a repository over a ``CachedNetworking``, removes the stored
    /// responses of its request (``CachedNetworking/invalidate(_:)``), so that the next read, in this process or
    /// another one sharing the store, fetches from the origin.
    ///
    /// A repository over a fetch function cannot reach the store: its next read fetches with
    /// ``CachePolicy/reloadIgnoringLocalCacheData`` instead (and stores the new response). A read already under
    /// way when the repository is invalidated returns its value to its caller, but the value is not held.
    /// - Throws: ``CachedRepositoryError`` of kind ``CachedRepositoryError/Kind/network`` when the store could
    ///   not remove the response (what the repository held is dropped all the same, and its next read bypasses
    ///   the stored response).
    public func invalidate() async throws(CachedRepositoryError) {
        guard case .http(_, _, _, let remove) = source else {
            state.withLock { $0.dropAll() }
            return
        }
        state.withLock { state in
            state.dropAll()
            if remove == nil { state.bypassStoredResponse = true }
        }
        guard let remove else { return }
        do {
            try await remove()
        } catch {
            state.withLock { $0.bypassStoredResponse = true }
            throw CachedRepositoryError.fetchFailed(error)
        }
    }

    /// Fetches (or decodes) the value under `policy`, and holds it when the repository has a lifetime and was not
    /// invalidated since `generation`.
    private func obtain(policy: CachePolicy, generation: Int) async -> Result<Obtained, CachedRepositoryError> {
        let result: Result<Obtained, CachedRepositoryError>
        switch source {
        case .value(let fetch):
            do {
                result = .success(Obtained(value: try await fetch(), source: .origin, age: .zero, cacheStatus: nil))
            } catch {
                result = .failure(CachedRepositoryError(.source, "\(error)", underlying: error))
            }
        case .http(let request, let fetch, let decode, _):
            switch request {
            case .success(let request): result = await response(to: request, policy: policy, fetch: fetch, decode: decode)
            case .failure(let error): result = .failure(CachedRepositoryError(.network, "\(error)", networkError: error))
            }
        }
        guard case .success(let obtained) = result else { return result }
        let fetchedAt = clock.uptime()
        let hold = lifetime != nil
        state.withLock { state in
            guard state.generation == generation else { return }
            if policy == .reloadIgnoringLocalCacheData { state.bypassStoredResponse = false }
            if hold { state.held = Held(obtained: obtained, fetchedAt: fetchedAt) }
        }
        return result
    }

    /// The decoded value of the response to `request`, decoded only when its entry is not the one last decoded.
    private func response(
        to request: HTTPRequest, policy: CachePolicy, fetch: Fetch, decode: Decode
    ) async -> Result<Obtained, CachedRepositoryError> {
        let answer: CachedResponse
        do {
            answer = try await fetch(request, policy)
        } catch {
            return .failure(.fetchFailed(error))
        }
        guard answer.status.kind == .successful else {
            return .failure(CachedRepositoryError(.status, "status \(answer.status.code)", status: answer.status))
        }
        let age = Duration.seconds(answer.headerFields[.age].flatMap { Int($0) } ?? 0)
        let source = CachedValueSource(answer.source)
        // The same entry, and the same bytes: an entry's identity tells versions apart by their strong ETag or the
        // millisecond they were stored, and two versions stored within one millisecond must not share a value.
        if let entry = answer.entry, let known = state.withLock({ $0.decoded }), known.entry == entry,
            known.body == answer.body
        {
            return .success(Obtained(value: known.value, source: source, age: age, cacheStatus: answer.cacheStatus))
        }
        let value: Value
        do {
            value = try decode(answer.bodyData)
        } catch {
            return .failure(CachedRepositoryError(.decoding, "\(error)", status: answer.status, underlying: error))
        }
        if let entry = answer.entry { state.withLock { $0.decoded = (entry, answer.body, value) } }
        return .success(Obtained(value: value, source: source, age: age, cacheStatus: answer.cacheStatus))
    }

    // MARK: - Deprecated: one repository for many requests

    /// A repository over `fetch` that decodes with `decode`, read with ``value(for:policy:)``.
    /// - Parameters:
    ///   - capacity: How many decoded values to keep.
    @available(*, deprecated, message: "make one repository per resource: init(request:lifetime:clock:fetch:decode:)")
    public convenience init(capacity: Int = 256, fetch: @escaping Fetch, decode: @escaping Decode) {
        self.init(
            source: .http(
                request: .failure(Self.noRequest), fetch: fetch, decode: decode, remove: nil),
            lifetime: nil, clock: SystemCacheClock(), policy: .useProtocolCachePolicy, capacity: capacity)
    }

    /// A repository over `network` that decodes JSON, read with ``value(for:policy:)``.
    @available(*, deprecated, message: "make one repository per resource: init(_:request:lifetime:decoder:)")
    public convenience init(network: CachedNetworking, capacity: Int = 256) where Value: Decodable {
        self.init(
            source: .http(
                request: .failure(Self.noRequest),
                fetch: { request, policy in try await network.run(request, policy: policy) },
                decode: Self.decoding(with: JSONDecoder()), remove: nil),
            lifetime: nil, clock: network.configuration.clock, policy: .useProtocolCachePolicy, capacity: capacity)
    }

    private static var noRequest: CachedNetworkingError {
        CachedNetworkingError(
            .invalidRequest, "this repository was made without a request: read it with value(for:policy:)")
    }

    /// The decoded value of the response to `request` (any request), decoded once per stored entry version; the
    /// repository's lifetime and held value play no part.
    /// - Throws: ``CachedRepositoryError`` when the request fails, the status is not 2xx, or decoding fails.
    @available(*, deprecated, message: "make one repository per resource, and read it with value(policy:) or read(policy:)")
    public func value(
        for request: HTTPRequest,
        policy: CachePolicy = .useProtocolCachePolicy
    ) async throws(CachedRepositoryError) -> Value {
        guard case .http(_, let fetch, let decode, _) = source else {
            throw CachedRepositoryError(
                .network, "this repository reads an async source, not HTTP requests",
                networkError: CachedNetworkingError(.invalidRequest, "not an HTTP repository"))
        }
        let answer: CachedResponse
        do {
            answer = try await fetch(request, policy)
        } catch {
            throw CachedRepositoryError.fetchFailed(error)
        }
        guard answer.status.kind == .successful else {
            throw CachedRepositoryError(.status, "status \(answer.status.code)", status: answer.status)
        }
        if let entry = answer.entry, let known = state.withLock({ $0.values[entry.key] }), known.version == entry.version {
            return known.value
        }
        let value: Value
        do {
            value = try decode(answer.bodyData)
        } catch {
            throw CachedRepositoryError(.decoding, "\(error)", status: answer.status, underlying: error)
        }
        if let entry = answer.entry {
            let capacity = self.capacity
            state.withLock { state in
                if state.values.updateValue((entry.version, value), forKey: entry.key) == nil {
                    state.order.append(entry.key)
                    if state.order.count > capacity {
                        state.values[state.order.removeFirst()] = nil
                    }
                }
            }
        }
        return value
    }
}
