import CachedNetworking
import NIOCore

/// The commands the RESP stores send for each ``CacheStore`` call, and how their replies read. Shared by
/// ``RESPStore`` and ``RESPClusterStore`` so that both speak exactly the same protocol. Error replies are
/// turned into ``CacheStoreError/Kind/server`` by the stores before a reply gets here.
enum StoreCommands {
    /// `GET key`.
    static func get(_ key: String) -> RESPCommand {
        var command = RESPCommand("GET", argumentCount: 1, reserving: 24 + key.utf8.count)
        command.append(key)
        return command
    }

    /// The value a `GET` answered: the bulk string, or nil.
    static func value(ofGet reply: RESPReply) throws(CacheStoreError) -> ByteBuffer? {
        switch reply {
        case .bulk(let value): return value
        case .null: return nil
        default: throw unexpected("GET", reply)
        }
    }

    /// `MGET key…`.
    static func mget<Keys: Collection<String>>(_ keys: Keys) -> RESPCommand {
        var command = RESPCommand("MGET", argumentCount: keys.count, reserving: 16 + keys.count * 48)
        for key in keys { command.append(key) }
        return command
    }

    /// The values an `MGET` of `count` keys answered, nil for missing keys (and, as Redis does, for keys of
    /// other types).
    static func values(ofMGet reply: RESPReply, count: Int) throws(CacheStoreError) -> [ByteBuffer?] {
        guard case .array(let elements) = reply, elements.count == count else {
            throw unexpected("MGET of \(count) keys", reply)
        }
        var values: [ByteBuffer?] = []
        values.reserveCapacity(elements.count)
        for element in elements {
            switch element {
            case .bulk(let value): values.append(value)
            case .null: values.append(nil)
            default: throw unexpected("an MGET element", element)
            }
        }
        return values
    }

    /// `SET key value [PX ttl]`, the TTL in whole milliseconds rounded up (at least 1 ms).
    static func set(_ key: String, to value: ByteBuffer, ttl: Duration?) -> RESPCommand {
        var command = RESPCommand(
            "SET", argumentCount: ttl == nil ? 2 : 4, reserving: 64 + key.utf8.count + value.readableBytes)
        command.append(key)
        command.append(value)
        if let ttl {
            command.append("PX")
            command.append(String(ttl.storeMilliseconds))
        }
        return command
    }

    /// Checks that a `SET` answered a status.
    static func checkSet(_ reply: RESPReply) throws(CacheStoreError) {
        guard case .status = reply else { throw unexpected("SET", reply) }
    }

    /// `SET key value NX PX ttl`.
    static func setIfAbsent(_ key: String, to value: ByteBuffer, ttl: Duration) -> RESPCommand {
        var command = RESPCommand("SET", argumentCount: 5, reserving: 72 + key.utf8.count + value.readableBytes)
        command.append(key)
        command.append(value)
        command.append("NX")
        command.append("PX")
        command.append(String(ttl.storeMilliseconds))
        return command
    }

    /// Whether a `SET … NX` stored its value.
    static func stored(bySetIfAbsent reply: RESPReply) throws(CacheStoreError) -> Bool {
        switch reply {
        case .status: return true
        case .null: return false
        default: throw unexpected("SET NX", reply)
        }
    }

    /// `DEL key…`.
    static func del<Keys: Collection<String>>(_ keys: Keys) -> RESPCommand {
        var command = RESPCommand("DEL", argumentCount: keys.count, reserving: 16 + keys.count * 48)
        for key in keys { command.append(key) }
        return command
    }

    /// How many keys a `DEL` removed.
    static func count(removedBy reply: RESPReply) throws(CacheStoreError) -> Int {
        guard case .integer(let removed) = reply, removed >= 0 else { throw unexpected("DEL", reply) }
        return Int(removed)
    }

    /// `INCR key`.
    static func incr(_ key: String) -> RESPCommand {
        var command = RESPCommand("INCR", argumentCount: 1, reserving: 24 + key.utf8.count)
        command.append(key)
        return command
    }

    /// The value an `INCR` answered.
    static func value(ofIncr reply: RESPReply) throws(CacheStoreError) -> Int {
        guard case .integer(let value) = reply else { throw unexpected("INCR", reply) }
        return Int(value)
    }

    /// `PING`.
    static var ping: RESPCommand { RESPCommand("PING", argumentCount: 0) }

    /// Checks that a `PING` answered `PONG`.
    static func checkPing(_ reply: RESPReply) throws(CacheStoreError) {
        guard case .status("PONG") = reply else { throw unexpected("PING", reply) }
    }

    /// A reply of the wrong type for `what`.
    static func unexpected(_ what: String, _ reply: RESPReply) -> CacheStoreError {
        CacheStoreError(.protocolViolation, "\(what) answered \(reply.typeName)")
    }
}
