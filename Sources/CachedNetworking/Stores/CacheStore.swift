import NIOCore

/// Where ``CachedNetworking`` keeps responses: process memory, a `cached-server`, or a Redis server.
///
/// A store is a small key/value interface with TTLs, shaped after the Redis commands it maps to, so that a
/// network store costs one round trip per call. Implementations must be safe to call from any task and must
/// never block a thread of Swift's cooperative pool.
///
/// Keys are readable strings (they show up in `redis-cli --scan`); values are opaque bytes.
public protocol CacheStore: Sendable {
    /// The value stored under `key`, or nil when there is none (or it expired).
    /// - Throws: ``CacheStoreError`` when the store cannot be reached or answers with an error.
    func get(_ key: String) async throws(CacheStoreError) -> ByteBuffer?

    /// The values stored under `keys`, in order, nil where there is none (Redis's MGET: one round trip).
    func get(_ keys: [String]) async throws(CacheStoreError) -> [ByteBuffer?]

    /// Stores `value` under `key`, replacing what was there, to expire after `ttl` (nil: no expiry).
    func set(_ key: String, to value: ByteBuffer, ttl: Duration?) async throws(CacheStoreError)

    /// Stores `value` under `key` only if nothing is stored there (Redis's `SET key value NX PX ttl`).
    /// - Returns: true when this call stored the value.
    func setIfAbsent(_ key: String, to value: ByteBuffer, ttl: Duration) async throws(CacheStoreError) -> Bool

    /// Removes `keys`.
    /// - Returns: how many of them existed.
    @discardableResult
    func remove(_ keys: [String]) async throws(CacheStoreError) -> Int

    /// Adds one to the integer stored under `key` (0 when missing) and returns the result (Redis's INCR).
    func increment(_ key: String) async throws(CacheStoreError) -> Int

    /// Releases connections and threads. The store must not be used afterwards.
    func shutdown() async

    /// How the cache may call this store (its fast paths); ``CacheStoreCallStyle/timedByCache`` unless the store
    /// says otherwise.
    var callStyle: CacheStoreCallStyle { get }
}

extension CacheStore {
    /// Any store can be called this way: the cache races each call against a timer.
    public var callStyle: CacheStoreCallStyle { .timedByCache }
}

/// Why a ``CacheStore`` call failed.
///
/// A struct over a private enum, so that new cases are not a breaking change; compare with the static
/// members (`error.kind == .timeout`).
public struct CacheStoreError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong, broadly.
    public struct Kind: Sendable, Hashable, CustomStringConvertible {
        fileprivate enum Base: Sendable, Hashable { case unreachable, timeout, server, protocolViolation, closed }
        fileprivate let base: Base

        /// The store could not be connected to, or the connection broke.
        public static let unreachable = Kind(base: .unreachable)
        /// The store did not answer in time.
        public static let timeout = Kind(base: .timeout)
        /// The store answered with an error reply.
        public static let server = Kind(base: .server)
        /// The store's answer was not what the command returns.
        public static let protocolViolation = Kind(base: .protocolViolation)
        /// The store was shut down.
        public static let closed = Kind(base: .closed)

        /// The kind's name, for logs.
        public var description: String {
            switch base {
            case .unreachable: "unreachable"
            case .timeout: "timeout"
            case .server: "server error"
            case .protocolViolation: "protocol violation"
            case .closed: "closed"
            }
        }
    }

    /// The broad kind of failure.
    public let kind: Kind
    /// Details for logs (the server's error text, the system error).
    public let message: String

    /// An error of `kind` with `message`.
    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    /// The kind and the message, for logs.
    public var description: String { "cache store \(kind): \(message)" }
}
