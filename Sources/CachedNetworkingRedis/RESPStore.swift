import CachedNetworking
import CoreMetrics
import Logging
import NIOCore

/// A ``CacheStore`` on a server that speaks the Redis protocol: a `cached-server` or a Redis server.
///
/// ```swift
/// let store = try RESPStore(url: "redis://:s3cret@cache.internal:6379/2")
/// try await store.set("greeting", to: ByteBuffer(string: "hello"), ttl: .seconds(60))
/// let value = try await store.get("greeting")
/// await store.shutdown()
/// ```
///
/// ## Threads, not the cooperative pool
///
/// The store talks to the server through hiredis's blocking client, each connection owned by a dedicated
/// thread of the store's (``Configuration/poolSize`` threads). An `async` call encodes its command, hands it
/// to a connection's queue under a mutex and suspends; the connection's thread writes every command waiting
/// in its queue at once (pipelining), reads their replies in order and resumes the callers. (On Linux a call that
/// finds its connection idle writes its command itself with a non-blocking `send` before waking the thread, so
/// that the thread wakes while the server works.) Blocking calls therefore never run on Swift concurrency's
/// cooperative threads.
///
/// This design was chosen over driving hiredis's reply parser from SwiftNIO channels because it keeps
/// hiredis on the code path it is built and tested for (its blocking context: connect with a timeout,
/// socket timeouts, AUTH and SELECT as plain round trips), needs no event-loop state machine for connecting,
/// authenticating, timing out and reconnecting, and pipelines naturally: whatever accumulated while a
/// connection waited for the server goes out in the next write. The cost is one mostly-sleeping thread per
/// connection, which is small for the handful of connections a cache client needs.
///
/// ## Failures
///
/// - A call that waits longer than ``Configuration/commandTimeout`` on the socket fails with
///   ``CacheStoreError/Kind/timeout``; so does one that waited longer than the connect and command timeouts
///   together in a queue. The connection is then discarded, since a late reply would answer the wrong call.
/// - When the server goes away, calls in flight fail with ``CacheStoreError/Kind/unreachable``; the next call
///   reconnects. Failed attempts back off (``Configuration/minReconnectDelay`` doubling up to
///   ``Configuration/maxReconnectDelay``), and while every connection is backing off calls fail at once.
/// - An error reply becomes ``CacheStoreError/Kind/server`` with the server's text (a failed `AUTH` too); a
///   reply of the wrong type becomes ``CacheStoreError/Kind/protocolViolation``.
/// - Task cancellation does not abort a call: every call ends within the timeouts. (Calls made by
///   ``CachedNetworking`` are bounded by its ``CachedNetworking/Configuration/storeTimeout`` too, and end at once
///   when the request's task is cancelled: the store enforces that itself, without extra tasks.)
///
/// ## Near cache
///
/// With ``Configuration/nearCache`` set, values the store reads are also kept in this process's memory (bounded
/// in bytes, evicted with SIEVE) and answered from there, without a round trip, until the server says they
/// changed: the store uses Redis's server-assisted client-side caching (`CLIENT TRACKING` with `REDIRECT` to a
/// connection subscribed to `__redis__:invalidate`). See ``NearCache`` for how it stays coherent and what it
/// costs, and ``nearCacheStatistics`` for its counters.
///
/// ## TLS
///
/// With a `rediss://` URL or ``Configuration/tls`` set, every connection (the pool's, and the near cache's
/// invalidation connection) runs TLS, the server's certificate checked as ``TLS`` says: by default against the
/// system's CAs and for the host connected to. hiredis still connects the socket and parses the replies; OpenSSL
/// (through the system's `libssl`) encrypts and decrypts between them, on the same threads, with the same
/// timeouts (``Configuration/connectTimeout`` bounds the handshake too) and the same shortcuts (the caller's own
/// write and reply polling). A handshake that fails is ``CacheStoreError/Kind/unreachable`` with OpenSSL's reason
/// (`TLS handshake with cache.internal:6380 failed: certificate verify failed: hostname mismatch`), and backs off
/// as a refused connection does.
///
/// ## Users
///
/// `redis://user:password@host` authenticates as an ACL user (`AUTH user password`). A command the user's ACL
/// refuses fails with ``CacheStoreError/Kind/server`` (`NOPERM …`), like any error reply (a cache fails open: the
/// request goes to the origin), and is logged at warning level once per command name, not once per call.
public final class RESPStore: CacheStore {
    /// The configuration the store was created with.
    public let configuration: Configuration
    /// The connections (internal for tests).
    let pool: RESPConnectionPool
    /// The near cache and its invalidation channel, when ``Configuration/nearCache`` is set.
    let nearCache: NearCacheCore?
    private let trackingChannel: TrackingChannel?
    /// Turns error replies into errors, and warns once per command the server's ACL refuses.
    let errorReplies: ErrorReplyLog

    /// Creates a store for `configuration`. Connections are opened on first use; with a near cache, the
    /// invalidation connection at once.
    /// - Parameters:
    ///   - configuration: the server and the pool's settings.
    ///   - logger: where connection events go (connects at debug; failed attempts, and commands the server's ACL
    ///     refuses, once per command, at warning). Default: nowhere.
    ///   - metricsFactory: where the near cache's metrics go; nil for the factory bootstrapped in `MetricsSystem`.
    ///   - metricsDimensions: dimensions added to the near cache's metrics.
    public init(
        configuration: Configuration, logger: Logger = RESPStore.disabledLogger,
        metricsFactory: (any MetricsFactory)? = nil, metricsDimensions: [(String, String)] = []
    ) {
        self.configuration = configuration
        self.errorReplies = ErrorReplyLog(logger: logger, username: configuration.username)
        // Made once, so that the store's connections (and its near cache's subscriber) read the files once.
        let tlsContext = StoreTLSContext.make(configuration.tls, logger: logger)
        if let settings = configuration.nearCache {
            let core = NearCacheCore(
                settings: settings, logger: logger, metricsFactory: metricsFactory ?? MetricsSystem.factory,
                metricsDimensions: metricsDimensions)
            let channel = TrackingChannel(configuration: configuration, tlsContext: tlsContext, core: core)
            self.nearCache = core
            self.trackingChannel = channel
            self.pool = RESPConnectionPool(configuration: configuration, tlsContext: tlsContext, logger: logger, hook: channel)
            channel.start()
        } else {
            self.nearCache = nil
            self.trackingChannel = nil
            self.pool = RESPConnectionPool(configuration: configuration, tlsContext: tlsContext, logger: logger)
        }
    }

    /// Creates a store from a `redis://` or `rediss://` URL (see ``Configuration/init(url:)``).
    /// - Parameters:
    ///   - url: `redis://[[user]:password@]host[:port][/db]`, or `rediss://…` for TLS with the defaults of
    ///     ``TLS``.
    ///   - poolSize: connections (and threads) to keep. Default 4.
    ///   - connectTimeout: the longest a connection attempt may take. Default 1 second.
    ///   - commandTimeout: the longest a call may wait on the socket. Default 1 second.
    ///   - logger: where connection events go. Default: nowhere.
    /// - Throws: ``ConfigurationError`` when the URL is malformed.
    public convenience init(
        url: String,
        poolSize: Int = 4,
        connectTimeout: Duration = .seconds(1),
        commandTimeout: Duration = .seconds(1),
        logger: Logger = RESPStore.disabledLogger
    ) throws(ConfigurationError) {
        var configuration = try Configuration(url: url)
        configuration.poolSize = poolSize
        configuration.connectTimeout = connectTimeout
        configuration.commandTimeout = commandTimeout
        self.init(configuration: configuration, logger: logger)
    }

    deinit {
        trackingChannel?.beginShutdown()
        pool.beginShutdown()
    }

    /// A logger that drops everything: the default, so that the store is silent unless given a logger.
    public static let disabledLogger = Logger(label: "cached.resp-store", factory: { _ in SwiftLogNoOpLogHandler() })

    /// Sends `PING`: checks that the server is reachable and that authentication and `SELECT` succeed.
    /// - Throws: ``CacheStoreError`` as any call.
    public func ping() async throws(CacheStoreError) {
        try StoreCommands.checkPing(try await execute(StoreCommands.ping))
    }

    // MARK: CacheStore

    /// `GET key` (answered from the near cache when it holds the key).
    /// - Returns: the value, or nil when the key does not exist.
    /// - Throws: ``CacheStoreError``; ``CacheStoreError/Kind/server`` when the key holds a non-string type.
    public func get(_ key: String) async throws(CacheStoreError) -> ByteBuffer? {
        if let nearCache { return try await nearCachedGet(key, nearCache) }
        return try await remoteGet(key)
    }

    /// `GET key` on the server.
    func remoteGet(_ key: String) async throws(CacheStoreError) -> ByteBuffer? {
        try StoreCommands.value(ofGet: try await execute(StoreCommands.get(key)))
    }

    /// `MGET key…`: one round trip for all keys (for those the near cache does not hold).
    /// - Returns: the values in the order of `keys`, nil for missing keys (and, as Redis does, for keys of
    ///   other types). No round trip when `keys` is empty.
    /// - Throws: ``CacheStoreError``.
    public func get(_ keys: [String]) async throws(CacheStoreError) -> [ByteBuffer?] {
        if let nearCache { return try await nearCachedGet(keys, nearCache) }
        return try await remoteGet(keys)
    }

    /// `MGET key…` on the server.
    func remoteGet(_ keys: [String]) async throws(CacheStoreError) -> [ByteBuffer?] {
        guard !keys.isEmpty else { return [] }
        return try StoreCommands.values(ofMGet: try await execute(StoreCommands.mget(keys)), count: keys.count)
    }

    /// `SET key value [PX ttl]`. A TTL is sent in whole milliseconds, rounded up (at least 1 ms).
    /// - Throws: ``CacheStoreError``.
    public func set(_ key: String, to value: ByteBuffer, ttl: Duration?) async throws(CacheStoreError) {
        try await nearCache.writing([key]) { () throws(CacheStoreError) in
            try StoreCommands.checkSet(try await execute(StoreCommands.set(key, to: value, ttl: ttl)))
        }
    }

    /// `SET key value NX PX ttl`. The TTL is sent in whole milliseconds, rounded up (at least 1 ms).
    /// - Returns: true when the key did not exist and now holds `value`.
    /// - Throws: ``CacheStoreError``.
    public func setIfAbsent(_ key: String, to value: ByteBuffer, ttl: Duration) async throws(CacheStoreError) -> Bool {
        return try await nearCache.writing([key]) { () throws(CacheStoreError) in
            try StoreCommands.stored(bySetIfAbsent: try await execute(StoreCommands.setIfAbsent(key, to: value, ttl: ttl)))
        }
    }

    /// `DEL key…`.
    /// - Returns: how many of the keys existed (a repeated key counts once). No round trip when `keys` is empty.
    /// - Throws: ``CacheStoreError``.
    @discardableResult
    public func remove(_ keys: [String]) async throws(CacheStoreError) -> Int {
        guard !keys.isEmpty else { return 0 }
        return try await nearCache.writing(keys) { () throws(CacheStoreError) in
            try StoreCommands.count(removedBy: try await execute(StoreCommands.del(keys)))
        }
    }

    /// `INCR key`.
    /// - Returns: the incremented value.
    /// - Throws: ``CacheStoreError/Kind/server`` when the value is not an integer; ``CacheStoreError`` otherwise.
    public func increment(_ key: String) async throws(CacheStoreError) -> Int {
        return try await nearCache.writing([key]) { () throws(CacheStoreError) in
            try StoreCommands.value(ofIncr: try await execute(StoreCommands.incr(key)))
        }
    }

    /// Fails queued and in-flight calls with ``CacheStoreError/Kind/closed``, closes the connections and waits
    /// for the store's threads to exit. Later calls fail with ``CacheStoreError/Kind/closed``.
    public func shutdown() async {
        nearCache?.close()
        await trackingChannel?.shutdown()
        await pool.shutdown()
    }

    // MARK: private

    /// Sends `command` on a pooled connection; an error reply becomes ``CacheStoreError/Kind/server``.
    func execute(_ command: RESPCommand) async throws(CacheStoreError) -> RESPReply {
        let reply = try await pool.submit(command.bytes).get()
        if case .error(let text) = reply { throw errorReplies.error(text, answering: command) }
        return reply
    }
}

extension RESPStore {
    /// ``CacheStoreCallStyle/deadlineAware``: every call suspends only in ``RESPConnectionPool/submit(_:replies:)``,
    /// which honours ``CacheStoreDeadline/current`` and cancellation.
    public var callStyle: CacheStoreCallStyle { .deadlineAware }
}
