import CachedNetworking
import NIOCore

/// How a store sends the near cache's reads: commands whose keys all live on one server (on a cluster, in one
/// slot), pipelined on one connection; their replies in order, error replies included.
typealias NearCachePipeline = ([RESPCommand]) async throws(CacheStoreError) -> [RESPReply]

/// The near cache's read and write paths, shared by ``RESPStore`` and ``RESPClusterStore``: each store only says
/// how its commands reach the server.
extension NearCacheCore {
    /// `GET key` through the near cache: a hit costs no round trip; a miss sends `GET` and `PTTL` together
    /// through `pipeline`, and keeps the value when the read was tracked.
    /// - Parameters:
    ///   - remote: a plain `GET`, for when the near cache is off or does not keep the key.
    func get(
        _ key: String, pipeline: NearCachePipeline, remote: () async throws(CacheStoreError) -> ByteBuffer?
    ) async throws(CacheStoreError) -> ByteBuffer? {
        let storeKey = StoreKey(key)
        let ticket: NearCacheTable.ReadTicket
        switch startRead(storeKey) {
        case .hit(let value): return value
        case .bypass: return try await remote()
        case .miss(let missTicket, let fillable):
            guard fillable else {
                defer { finishRead(missTicket, fills: []) }
                return try await remote()
            }
            ticket = missTicket
        }
        do throws(CacheStoreError) {
            let replies = try await pipeline([StoreCommands.get(key), Self.pttl(key)])
            guard replies.count == 2 else {
                throw CacheStoreError(.protocolViolation, "GET and PTTL got \(replies.count) replies")
            }
            let value = try Self.value(of: replies[0], "GET")
            finishRead(ticket, fills: [(storeKey, value, Self.milliseconds(of: replies[1]))])
            return value
        } catch {
            finishRead(ticket, fills: [])
            throw error
        }
    }

    /// `MGET key…` through the near cache: hits are answered from memory, the other keys by `fetch`.
    /// - Parameters:
    ///   - remote: a plain `MGET` of every key, for when the near cache is off.
    ///   - fetch: reads the keys that missed, with the `PTTL` of those whose flag is true (see
    ///     ``read(_:ttlOf:pipeline:)``).
    func get(
        _ keys: [String], remote: ([String]) async throws(CacheStoreError) -> [ByteBuffer?],
        fetch: ([String], [Bool]) async throws(CacheStoreError) -> [(value: ByteBuffer?, ttl: Int64?)]
    ) async throws(CacheStoreError) -> [ByteBuffer?] {
        guard !keys.isEmpty else { return [] }
        let storeKeys = keys.map(StoreKey.init)
        var values: [ByteBuffer?]
        let missing: [Int]
        let ticket: NearCacheTable.ReadTicket
        let fillable: [Bool]
        switch startRead(storeKeys) {
        case .bypass: return try await remote(keys)
        case .hits(let all): return all
        case .misses(let found, let missingIndices, let missTicket, let fillableKeys):
            values = found
            missing = missingIndices
            ticket = missTicket
            fillable = fillableKeys
        }
        do throws(CacheStoreError) {
            let read = try await fetch(missing.map { keys[$0] }, fillable)
            guard read.count == missing.count else {
                throw CacheStoreError(.protocolViolation, "read \(read.count) values for \(missing.count) keys")
            }
            var fills: [(StoreKey, ByteBuffer?, Int64)] = []
            for (index, entry) in zip(missing, read) {
                values[index] = entry.value
                if let ttl = entry.ttl { fills.append((storeKeys[index], entry.value, ttl)) }
            }
            finishRead(ticket, fills: fills)
            return values
        } catch {
            finishRead(ticket, fills: [])
            throw error
        }
    }

    /// Reads `keys` (all on one server, or in one slot) with one `MGET`, and the `PTTL` of each key whose
    /// `ttlOf` flag is true, in one round trip through `pipeline`.
    /// - Returns: each key's value, and its `PTTL` where asked (nil elsewhere).
    static func read(
        _ keys: [String], ttlOf: [Bool], pipeline: NearCachePipeline
    ) async throws(CacheStoreError) -> [(value: ByteBuffer?, ttl: Int64?)] {
        var commands = [StoreCommands.mget(keys)]
        for (key, withTTL) in zip(keys, ttlOf) where withTTL { commands.append(pttl(key)) }
        let replies = try await pipeline(commands)
        guard replies.count == commands.count else {
            throw CacheStoreError(
                .protocolViolation, "MGET and PTTL got \(replies.count) replies for \(commands.count) commands")
        }
        if case .error(let text) = replies[0] { throw CacheStoreError(.server, text) }
        let values = try StoreCommands.values(ofMGet: replies[0], count: keys.count)
        var ttls = replies.dropFirst().makeIterator()
        return zip(values, ttlOf).map { value, withTTL in
            (value, withTTL ? ttls.next().map(milliseconds(of:)) : nil)
        }
    }

    /// Runs `write`, a command that changes `keys`, dropping them before it is sent and again after its reply
    /// (so that a read that overtook the write keeps nothing).
    func writing<T>(_ keys: [String], _ write: () async throws(CacheStoreError) -> T) async throws(CacheStoreError) -> T {
        invalidate(written: keys)
        defer { invalidate(written: keys, count: false) }
        return try await write()
    }

    // MARK: private

    private static func pttl(_ key: String) -> RESPCommand {
        var command = RESPCommand("PTTL", argumentCount: 1, reserving: 24 + key.utf8.count)
        command.append(key)
        return command
    }

    private static func value(of reply: RESPReply, _ what: String) throws(CacheStoreError) -> ByteBuffer? {
        if case .error(let text) = reply { throw CacheStoreError(.server, text) }
        return try StoreCommands.value(ofGet: reply)
    }

    /// A `PTTL` reply in milliseconds; -2 (as for a missing key) when it is not a number, so nothing is kept.
    private static func milliseconds(of reply: RESPReply) -> Int64 {
        if case .integer(let value) = reply { return value }
        return -2
    }
}

extension Optional where Wrapped == NearCacheCore {
    /// Runs `write` through the near cache's ``NearCacheCore/writing(_:_:)`` when there is one.
    func writing<T>(_ keys: [String], _ write: () async throws(CacheStoreError) -> T) async throws(CacheStoreError) -> T {
        guard let core = self else { return try await write() }
        return try await core.writing(keys, write)
    }
}

extension RESPConnectionPool {
    /// Sends `commands` pipelined on one connection.
    /// - Returns: their replies in order, error replies included.
    func submit(pipeline commands: [RESPCommand]) async throws(CacheStoreError) -> [RESPReply] {
        let bytes = RESPCommand.pipeline(commands)
        let reply = try await submit(bytes, replies: commands.count).get()
        guard commands.count > 1 else { return [reply] }
        guard case .array(let replies) = reply else { throw StoreCommands.unexpected("a pipeline", reply) }
        return replies
    }
}
