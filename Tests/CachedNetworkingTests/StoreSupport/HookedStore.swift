import CachedNetworking
import CachedNetworkingTesting
import NIOCore
import Synchronization

/// A store that hands every call to `base`, running a hook with the call's operation and keys before the call
/// (`before`) and once `base` has answered it (`after`): so that a test acts at an exact point of the cache's store
/// traffic, as another process writing between two of the cache's calls, or holds a call until it lets it go. The
/// hooks can be set at any time (``hook(before:after:)``), and every call is recorded (``calls``).
final class HookedStore: CacheStore {
    typealias Hook = @Sendable (_ operation: InMemoryCacheStore.Operation, _ keys: [String]) async -> Void

    /// One call the store received.
    struct Call: Sendable, Equatable {
        var operation: InMemoryCacheStore.Operation
        var keys: [String]
    }

    /// The store the calls go to; another process reaches it without the hooks.
    let base: any CacheStore
    private let hooks: Mutex<(before: Hook?, after: Hook?)>
    private let received = Mutex<[Call]>([])

    init(base: any CacheStore, before: Hook? = nil, after: Hook? = nil) {
        self.base = base
        hooks = Mutex((before, after))
    }

    /// Replaces the hooks.
    func hook(before: Hook? = nil, after: Hook? = nil) {
        hooks.withLock { $0 = (before, after) }
    }

    /// The calls received so far, in order (each recorded as it begins).
    var calls: [Call] { received.withLock { $0 } }

    /// How many calls of `operation` on `keys` were received.
    func count(_ operation: InMemoryCacheStore.Operation, _ keys: [String]) -> Int {
        calls.filter { $0 == Call(operation: operation, keys: keys) }.count
    }

    private func call<T>(
        _ operation: InMemoryCacheStore.Operation, _ keys: [String], _ body: () async throws(CacheStoreError) -> T
    ) async throws(CacheStoreError) -> T {
        received.withLock { $0.append(Call(operation: operation, keys: keys)) }
        let (before, after) = hooks.withLock { $0 }
        await before?(operation, keys)
        let result = try await body()
        await after?(operation, keys)
        return result
    }

    func get(_ key: String) async throws(CacheStoreError) -> ByteBuffer? {
        try await call(.get, [key]) { () async throws(CacheStoreError) in try await base.get(key) }
    }

    func get(_ keys: [String]) async throws(CacheStoreError) -> [ByteBuffer?] {
        try await call(.get, keys) { () async throws(CacheStoreError) in try await base.get(keys) }
    }

    func set(_ key: String, to value: ByteBuffer, ttl: Duration?) async throws(CacheStoreError) {
        try await call(.set, [key]) { () async throws(CacheStoreError) in try await base.set(key, to: value, ttl: ttl) }
    }

    func setIfAbsent(_ key: String, to value: ByteBuffer, ttl: Duration) async throws(CacheStoreError) -> Bool {
        try await call(.setIfAbsent, [key]) { () async throws(CacheStoreError) in
            try await base.setIfAbsent(key, to: value, ttl: ttl)
        }
    }

    func remove(_ keys: [String]) async throws(CacheStoreError) -> Int {
        try await call(.remove, keys) { () async throws(CacheStoreError) in try await base.remove(keys) }
    }

    func increment(_ key: String) async throws(CacheStoreError) -> Int {
        try await call(.increment, [key]) { () async throws(CacheStoreError) in try await base.increment(key) }
    }

    func shutdown() async { await base.shutdown() }
}
