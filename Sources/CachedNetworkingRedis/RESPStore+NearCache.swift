import CachedNetworking
import NIOCore

extension RESPStore {
    /// Settings of a ``RESPStore``'s near cache: values the store read kept in this process's memory, and
    /// dropped as soon as the server says they changed (Redis's server-assisted client-side caching).
    ///
    /// ```swift
    /// var configuration = try RESPStore.Configuration(url: "redis://cache.internal:6379")
    /// configuration.nearCache = RESPStore.NearCache(maxBytes: 32 << 20)
    /// let store = RESPStore(configuration: configuration)
    /// ```
    ///
    /// The store opens one more connection, on a thread of its own, that subscribes to the server's
    /// invalidation messages (`CLIENT ID`, then `SUBSCRIBE __redis__:invalidate`), and every data connection
    /// sends `CLIENT TRACKING on REDIRECT <that id>` before its first command, so that the server tells the
    /// subscriber about every key this store read (``Mode-swift.struct/default``) or every key under the given
    /// prefixes (``Mode-swift.struct/broadcast(prefixes:)``) when it changes. A ``RESPClusterStore`` with these
    /// settings (``RESPClusterStore/Configuration/nearCache``) does the same on every master, and also drops
    /// everything when its slot map changes (see ``RESPClusterStore``).
    ///
    /// - A read that misses asks for the value and its remaining TTL (`GET`, `PTTL`) in one round trip and keeps
    ///   the value until the key's expiry, ``maxAge`` at most.
    /// - An invalidation drops the key; the server's flush message drops everything.
    /// - A value whose key was invalidated while the read was on its way is not kept.
    /// - This store's own `SET`, `DEL` and `INCR` drop the key at once, before and after the command.
    /// - When the invalidation connection, or a data connection that tracked reads, is lost, everything is
    ///   dropped, and nothing is kept again until the subscriber is back and the connections track for it.
    /// - A server without client-side caching (an error to `CLIENT TRACKING` or `SUBSCRIBE`) is logged once at
    ///   warning level; the store then works without the near cache.
    public struct NearCache: Sendable, Hashable, CustomStringConvertible {
        /// Which keys the server sends invalidations for.
        public struct Mode: Sendable, Hashable, CustomStringConvertible {
            enum Base: Hashable {
                case tracking
                case broadcast([String])
            }

            let base: Base

            /// The server remembers the keys each connection read and invalidates those (`CLIENT TRACKING on
            /// REDIRECT <id>`). Costs server memory per key read; only keys this store read cause messages.
            public static let `default` = Mode(base: .tracking)

            /// The server invalidates every key that starts with one of `prefixes`, read or not (`CLIENT
            /// TRACKING on REDIRECT <id> BCAST PREFIX <prefix>…`): no per-key memory on the server, but a message
            /// for every write under the prefixes. Only keys with one of the prefixes are kept; no prefixes (or only
            /// empty ones) means every key. Prefixes must not overlap (Redis refuses `a` with `ab`).
            /// - Parameter prefixes: key prefixes, typically the namespace followed by `:`.
            public static func broadcast(prefixes: [String]) -> Mode { Mode(base: .broadcast(prefixes)) }

            /// The prefixes of ``broadcast(prefixes:)``; nil in the default mode.
            public var broadcastPrefixes: [String]? {
                if case .broadcast(let prefixes) = base { return prefixes }
                return nil
            }

            /// `default`, or `broadcast` and its prefixes.
            public var description: String {
                switch base {
                case .tracking: "default"
                case .broadcast(let prefixes): "broadcast \(prefixes)"
                }
            }
        }

        /// The most bytes the entries may be charged (key + value + ``entryOverhead`` each); SIEVE evicts
        /// beyond it. Default 16 MiB.
        public var maxBytes: Int
        /// Which keys the server sends invalidations for. Default ``Mode-swift.struct/default``.
        public var mode: Mode
        /// The longest an entry is kept, whatever the key's TTL; nil for as long as the key's TTL (forever for a
        /// key without one). A bound on how long a lost invalidation could go unnoticed. Default 60 seconds.
        public var maxAge: Duration?
        /// Sends `NOLOOP`: the server does not tell a connection about keys that the same connection changed.
        /// The store drops the keys it writes anyway, so this only saves messages. Default false.
        public var noLoop: Bool
        /// Bytes charged per entry on top of its key and value. Default ``MemoryStore/defaultEntryOverhead``.
        public var entryOverhead: Int
        /// How long the invalidation connection may stay silent before it sends `PING`; without any answer
        /// within another interval it counts as lost (the near cache is flushed and the connection replaced).
        /// Default 1 second.
        public var healthCheckInterval: Duration

        /// A near cache of `maxBytes`.
        /// - Parameters:
        ///   - maxBytes: the byte budget. Default 16 MiB.
        ///   - mode: which keys the server invalidates. Default ``Mode-swift.struct/default``.
        ///   - maxAge: the longest an entry is kept; nil for the key's own TTL. Default 60 seconds.
        ///   - noLoop: whether to send `NOLOOP`. Default false.
        public init(maxBytes: Int = 16 << 20, mode: Mode = .default, maxAge: Duration? = .seconds(60), noLoop: Bool = false) {
            self.maxBytes = maxBytes
            self.mode = mode
            self.maxAge = maxAge
            self.noLoop = noLoop
            self.entryOverhead = MemoryStore.defaultEntryOverhead
            self.healthCheckInterval = .seconds(1)
        }

        /// The settings, for logs.
        public var description: String {
            "near cache \(maxBytes) bytes, \(mode)" + (maxAge.map { ", max age \($0)" } ?? "") + (noLoop ? ", noloop" : "")
        }
    }

    /// What a ``RESPStore``'s near cache has done so far, and where it stands.
    public struct NearCacheStatistics: Sendable, Hashable {
        /// Keys answered from the near cache.
        public var hits: Int
        /// Keys that had to be read from the server.
        public var misses: Int
        /// Values read from the server and kept.
        public var fills: Int
        /// Values read from the server and not kept because their key (or everything) was invalidated while the
        /// read was on its way, or the near cache was not filling.
        public var refusedFills: Int
        /// Invalidations: keys named by the server, flushes, this store's writes, lost connections.
        public var invalidations: Int
        /// Entries held.
        public var entries: Int
        /// Bytes charged for the entries.
        public var bytes: Int
        /// Whether reads fill the near cache now: the invalidation connection is subscribed and tracking works.
        public var isFilling: Bool
        /// Why the near cache was turned off for good (the server does not support client-side caching); nil
        /// while it works.
        public var disabledReason: String?
    }

    /// The near cache's counters and state; nil when ``Configuration/nearCache`` is nil.
    public var nearCacheStatistics: NearCacheStatistics? { nearCache?.statistics }

    // MARK: reads through the near cache

    /// `GET key` through the near cache (see ``NearCacheCore/get(_:pipeline:remote:)``).
    func nearCachedGet(_ key: String, _ nearCache: NearCacheCore) async throws(CacheStoreError) -> ByteBuffer? {
        try await nearCache.get(
            key, pipeline: { (commands) throws(CacheStoreError) in try await submitNoted(commands) },
            remote: { () throws(CacheStoreError) in try await remoteGet(key) })
    }

    /// `MGET key…` through the near cache: hits are answered from memory, the other keys in one round trip with
    /// a `PTTL` for each.
    func nearCachedGet(_ keys: [String], _ nearCache: NearCacheCore) async throws(CacheStoreError) -> [ByteBuffer?] {
        try await nearCache.get(
            keys, remote: { (keys) throws(CacheStoreError) in try await remoteGet(keys) },
            fetch: { (missing, ttlOf) throws(CacheStoreError) in
                try await NearCacheCore.read(missing, ttlOf: ttlOf) { (commands) throws(CacheStoreError) in
                    try await submitNoted(commands)
                }
            })
    }

    /// The near cache's reads, pipelined on one connection; their replies, error replies included (ACL refusals
    /// logged once).
    private func submitNoted(_ commands: [RESPCommand]) async throws(CacheStoreError) -> [RESPReply] {
        let replies = try await pool.submit(pipeline: commands)
        errorReplies.note(replies, answering: commands)
        return replies
    }
}
