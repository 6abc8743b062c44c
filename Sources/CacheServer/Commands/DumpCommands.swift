import CacheCore
import RESP

/// DUMP and RESTORE: a value serialized in Redis's format (``DumpPayload``), so that keys move between this
/// server and Redis either way (`redis-cli --pipe` of RESTOREs, a client's DUMP in one and RESTORE in the other).
enum DumpCommands {
    /// DUMP key: the serialized value, or null when the key is missing.
    static func dump(_ c: inout CommandContext) {
        let payload = c.withKeyForRead(1) { _, shard, index in index.map { DumpPayload.encode(shard.entry(at: $0).value) } }
        guard let payload else { return c.null() }
        payload.withUnsafeBytes { c.bulk($0) }
    }

    /// RESTORE key ttl serialized-value [REPLACE] [ABSTTL] [IDLETIME seconds] [FREQ frequency]: creates the key
    /// from a DUMP payload, with a TTL in milliseconds (0 for none; a Unix time in milliseconds with ABSTTL).
    static func restore(_ c: inout CommandContext) {
        let a = c.arguments
        var replace = false
        var absolute = false
        var idle: Int?
        var frequency: Int?
        var j = 4
        // Checked in Redis's order: the options, the key, the TTL, the payload.
        while j < a.count {
            let more = j + 1 < a.count
            if a.matches(j, "replace") {
                replace = true
            } else if a.matches(j, "absttl") {
                absolute = true
            } else if a.matches(j, "idletime") && more && frequency == nil {
                guard let seconds = c.integerArgument(j + 1) else { return }
                guard seconds >= 0 else { return c.error("ERR Invalid IDLETIME value, must be >= 0") }
                idle = seconds
                j += 1
            } else if a.matches(j, "freq") && more && idle == nil {
                guard let count = c.integerArgument(j + 1) else { return }
                guard count >= 0 && count <= 255 else {
                    return c.error("ERR Invalid FREQ value, must be >= 0 and <= 255")
                }
                frequency = count
                j += 1
            } else {
                return c.error(ReplyError.syntax)
            }
            j += 1
        }
        // The payload is checked and decoded before the key's shard is locked (a checksum over a large value
        // takes a while); its errors come after the key's and the TTL's, as in Redis.
        let decoded = DumpPayload.decode(a[3], limit: c.server.config.protoMaxBulkLength)
        let key = a[1]
        c.withKeyForWrite(1) { c, shard, hash, existing in
            if existing != nil && !replace { return c.error(ReplyError.busyKey) }
            guard var ttl = c.integerArgument(2) else { return }
            guard ttl >= 0 else { return c.error("ERR Invalid TTL value, must be >= 0") }
            let value: [UInt8]
            switch decoded {
            case .success(let bytes):
                value = bytes
            case .failure(.versionOrChecksum):
                return c.error("ERR DUMP payload version or checksum are wrong")
            case .failure(.badFormat):
                return c.error("ERR Bad data format")
            case .failure(.notAString(let type)):
                return c.error("ERR Bad data format: the payload holds a value of RDB type \(type), and this server stores strings only")
            }
            if ttl != 0 && !absolute { ttl = ttl &+ Int(c.now) }
            // A time already past: the key is not created (and one replaced is gone).
            if ttl != 0 && ttl <= Int(c.now) {
                if let existing {
                    shard.remove(at: existing)
                    c.keyModified(1)
                    c.notify(.generic, "del", key: 1)
                }
                return c.ok()
            }
            // Written over a replaced key in one step, so that a failed allocation leaves it as it was.
            let stored = value.withUnsafeBytes { bytes in
                shard.setValue(key, hash: hash, value: bytes, ttl: ttl != 0 ? .at(Int64(ttl)) : .clear, existing: existing)
            }
            guard stored, let index = shard.find(key, hash: hash) else { return c.error(ReplyError.outOfMemory) }
            // A new key as far as eviction goes, with the access history asked for.
            shard.restoreAccess(index, idleSeconds: idle, frequency: frequency, now: c.now)
            c.keyModified(1)
            // As Redis: a new key, even when it replaced one.
            c.keyCreated(1)
            c.notify(.generic, "restore", key: 1)
            c.ok()
        }
    }
}
