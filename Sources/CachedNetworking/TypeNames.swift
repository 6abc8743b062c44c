// The module's types, named through the class that has the module's name.
//
// In an app that imports CachedNetworking, `CachedNetworking` names the class, not the module, so
// `CachedNetworking.CachePolicy` used to find nothing, and an app with a `CachePolicy` of its own had no way to name
// the SDK's. The public types of the SDK's core (the cache, its policies, answers, errors, clocks, transports'
// protocol, stores' protocol, the memory and fail-open stores, the repository) are therefore also members of the
// class: `CachedNetworking.CachePolicy` is the SDK's `CachePolicy` wherever it is written. (The RESP stores and the
// AsyncHTTPClient transport, whose names no app is likely to reuse, are not listed.)
//
// Inside the class, a member's own name means the member itself, so each member alias names its type through a
// top-level alias of another name; since a public alias may only name public declarations, those are public too,
// underscored and left out of the documentation. Add a pair for each new public top-level type.

// MARK: - The module's types, as members of the class

extension CachedNetworking {
    /// ``CachePolicy``, named through the class (for an app that has a `CachePolicy` of its own).
    public typealias CachePolicy = _CachedNetworking_CachePolicy
    /// ``CachedResponse``, named through the class.
    public typealias CachedResponse = _CachedNetworking_CachedResponse
    /// ``CachedNetworkingError``, named through the class.
    public typealias CachedNetworkingError = _CachedNetworking_CachedNetworkingError
    /// ``CacheClock``, named through the class.
    public typealias CacheClock = _CachedNetworking_CacheClock
    /// ``SystemCacheClock``, named through the class.
    public typealias SystemCacheClock = _CachedNetworking_SystemCacheClock
    /// ``LifetimeOverride``, named through the class.
    public typealias LifetimeOverride = _CachedNetworking_LifetimeOverride
    /// ``HTTPTransport``, named through the class.
    public typealias HTTPTransport = _CachedNetworking_HTTPTransport
    /// ``HTTPTransportResponse``, named through the class.
    public typealias HTTPTransportResponse = _CachedNetworking_HTTPTransportResponse
    /// ``HTTPTransportError``, named through the class.
    public typealias HTTPTransportError = _CachedNetworking_HTTPTransportError
    /// ``CacheStoreCallStyle``, named through the class.
    public typealias CacheStoreCallStyle = _CachedNetworking_CacheStoreCallStyle
    /// ``CacheStoreDeadline``, named through the class.
    public typealias CacheStoreDeadline = _CachedNetworking_CacheStoreDeadline
    /// ``URLSessionTransport``, named through the class.
    public typealias URLSessionTransport = _CachedNetworking_URLSessionTransport
    /// ``CacheStore``, named through the class.
    public typealias CacheStore = _CachedNetworking_CacheStore
    /// ``CacheStoreError``, named through the class.
    public typealias CacheStoreError = _CachedNetworking_CacheStoreError
    /// ``MemoryStore``, named through the class.
    public typealias MemoryStore = _CachedNetworking_MemoryStore
    /// ``FailOpenStore``, named through the class.
    public typealias FailOpenStore<Base: CacheStore> = _CachedNetworking_FailOpenStore<Base>
    /// ``CachedRepository``, named through the class.
    public typealias CachedRepository<Value: Sendable> = _CachedNetworking_CachedRepository<Value>
    /// ``CachedRepositoryError``, named through the class.
    public typealias CachedRepositoryError = _CachedNetworking_CachedRepositoryError
    /// ``CachedValue``, named through the class.
    public typealias CachedValue<Value: Sendable> = _CachedNetworking_CachedValue<Value>
    /// ``CachedValueSource``, named through the class.
    public typealias CachedValueSource = _CachedNetworking_CachedValueSource
    /// ``CachedNetworkingMetrics``, named through the class.
    public typealias CachedNetworkingMetrics = _CachedNetworking_CachedNetworkingMetrics
    /// ``CachedNetworkingLogKeys``, named through the class.
    public typealias CachedNetworkingLogKeys = _CachedNetworking_CachedNetworkingLogKeys
    /// HTTPCaching's `CacheStatus` (also `HTTPCaching.CacheStatus`), named through the class.
    public typealias CacheStatus = HTTPCaching.CacheStatus
    /// HTTPCaching's `CachingRules` (also `HTTPCaching.CachingRules`), named through the class.
    public typealias CachingRules = HTTPCaching.CachingRules
}

// MARK: - The names the members above are written with

@_documentation(visibility: internal) public typealias _CachedNetworking_CachePolicy = CachePolicy
@_documentation(visibility: internal) public typealias _CachedNetworking_CachedResponse = CachedResponse
@_documentation(visibility: internal) public typealias _CachedNetworking_CachedNetworkingError = CachedNetworkingError
@_documentation(visibility: internal) public typealias _CachedNetworking_CacheClock = CacheClock
@_documentation(visibility: internal) public typealias _CachedNetworking_SystemCacheClock = SystemCacheClock
@_documentation(visibility: internal) public typealias _CachedNetworking_LifetimeOverride = LifetimeOverride
@_documentation(visibility: internal) public typealias _CachedNetworking_HTTPTransport = HTTPTransport
@_documentation(visibility: internal) public typealias _CachedNetworking_HTTPTransportResponse = HTTPTransportResponse
@_documentation(visibility: internal) public typealias _CachedNetworking_HTTPTransportError = HTTPTransportError
@_documentation(visibility: internal) public typealias _CachedNetworking_CacheStoreCallStyle = CacheStoreCallStyle
@_documentation(visibility: internal) public typealias _CachedNetworking_CacheStoreDeadline = CacheStoreDeadline
@_documentation(visibility: internal) public typealias _CachedNetworking_URLSessionTransport = URLSessionTransport
@_documentation(visibility: internal) public typealias _CachedNetworking_CacheStore = CacheStore
@_documentation(visibility: internal) public typealias _CachedNetworking_CacheStoreError = CacheStoreError
@_documentation(visibility: internal) public typealias _CachedNetworking_MemoryStore = MemoryStore
@_documentation(visibility: internal) public typealias _CachedNetworking_FailOpenStore<Base: CacheStore> = FailOpenStore<Base>
@_documentation(visibility: internal) public typealias _CachedNetworking_CachedRepository<Value: Sendable> = CachedRepository<Value>
@_documentation(visibility: internal) public typealias _CachedNetworking_CachedRepositoryError = CachedRepositoryError
@_documentation(visibility: internal) public typealias _CachedNetworking_CachedValue<Value: Sendable> = CachedValue<Value>
@_documentation(visibility: internal) public typealias _CachedNetworking_CachedValueSource = CachedValueSource
@_documentation(visibility: internal) public typealias _CachedNetworking_CachedNetworkingMetrics = CachedNetworkingMetrics
@_documentation(visibility: internal) public typealias _CachedNetworking_CachedNetworkingLogKeys = CachedNetworkingLogKeys
