import CFloatText
import CacheCore
import NIOCore
import RESP

/// String commands: GET, SET and their relatives, counters, ranges.
package enum StringCommands {
    // MARK: reading

    static func get(_ c: inout CommandContext) {
        c.withKeyForRead(1) { c, shard, index in
            if let index { c.bulk(shard.entry(at: index).value) } else { c.null() }
        }
    }

    static func strlen(_ c: inout CommandContext) {
        let length = c.withKeyForRead(1, .access) { _, shard, index in index.map { shard.entry(at: $0).value.count } }
        c.integer(length ?? 0)
    }

    static func getrange(_ c: inout CommandContext) {
        guard let start = c.integerArgument(2), let end = c.integerArgument(3) else { return }
        c.withKeyForRead(1, .access) { c, shard, index in
            if let index {
                range(&c, shard.entry(at: index).value, start: start, end: end)
            } else {
                c.reply.writeStaticString("$0\r\n\r\n")
            }
        }
    }

    /// GETRANGE's reply: the bytes of `value` from `start` to `end` (negative: from the end), clamped.
    private static func range(_ c: inout CommandContext, _ value: UnsafeRawBufferPointer, start: Int, end: Int) {
        var (start, end) = (start, end)
        let length = value.count
        if start < 0 && end < 0 && start > end {
            c.reply.writeStaticString("$0\r\n\r\n")
            return
        }
        if start < 0 { start = length &+ start }
        if end < 0 { end = length &+ end }
        if start < 0 { start = 0 }
        if end < 0 { end = 0 }
        if end >= length { end = length - 1 }
        if start > end || length == 0 {
            c.reply.writeStaticString("$0\r\n\r\n")
        } else {
            c.bulk(UnsafeRawBufferPointer(rebasing: value[start...end]))
        }
    }

    static func mget(_ c: inout CommandContext) {
        let db = c.database
        var shards = ShardSet()
        for i in 1..<c.arguments.count { shards.insert(Database.shardIndex(for: c.hash(i))) }
        shards.lock(in: db)
        c.arrayHeader(c.arguments.count - 1)
        for i in 1..<c.arguments.count {
            let hash = c.hash(i)
            let shard = db.shard(for: hash)
            if let index = c.lookUpForRead(i, in: shard, hash: hash) {
                c.bulk(shard.entry(at: index).value)
            } else {
                c.null()
            }
        }
        shards.unlock(in: db)
    }

    // MARK: writing

    /// SET's options, parsed as Redis's `parseExtendedStringArgumentsOrReply` does.
    struct ExtendedOptions {
        var nx = false
        var xx = false
        var get = false
        var keepTTL = false
        var persist = false
        /// EX, PX, EXAT or PXAT when given; `expireArgument` is the argument index of its value.
        var expireKind: ExpiryOption?
        var expireArgument = 0
    }

    enum OptionsMode { case set, getex }

    /// How an expiry is given: EX seconds, PX milliseconds, EXAT/PXAT absolute Unix time.
    enum ExpiryOption {
        case ex, px, exat, pxat

        var inSeconds: Bool { self == .ex || self == .exat }
        var isRelative: Bool { self == .ex || self == .px }
    }

    /// The expiry option at argument `index`, or nil.
    static func expiryOption(_ a: Arguments, _ index: Int) -> ExpiryOption? {
        if a.matches(index, "ex") { return .ex }
        if a.matches(index, "px") { return .px }
        if a.matches(index, "exat") { return .exat }
        if a.matches(index, "pxat") { return .pxat }
        return nil
    }

    static func parseOptions(_ c: inout CommandContext, from first: Int, mode: OptionsMode) -> ExtendedOptions? {
        var o = ExtendedOptions()
        var j = first
        let a = c.arguments
        while j < a.count {
            let hasNext = j + 1 < a.count
            if a.matches(j, "nx") && !o.xx && mode == .set {
                o.nx = true
            } else if a.matches(j, "xx") && !o.nx && mode == .set {
                o.xx = true
            } else if a.matches(j, "get") && mode == .set {
                o.get = true
            } else if a.matches(j, "keepttl") && !o.persist && o.expireKind == nil && mode == .set {
                o.keepTTL = true
            } else if a.matches(j, "persist") && mode == .getex && o.expireKind == nil && !o.keepTTL {
                o.persist = true
            } else if let kind = expiryOption(a, j), !o.keepTTL && !o.persist && (o.expireKind == nil || o.expireKind == kind)
                && hasNext
            {
                // The same unit may be repeated (the last value wins); two different units may not.
                o.expireKind = kind
                o.expireArgument = j + 1
                j += 1
            } else {
                c.error(ReplyError.syntax)
                return nil
            }
            j += 1
        }
        return o
    }

    /// The absolute expiry in ms for an EX/PX/EXAT/PXAT value, or nil after replying with Redis's error.
    static func absoluteExpiry(_ c: inout CommandContext, argument: Int, kind: ExpiryOption) -> Int64? {
        guard let raw = c.integerArgument(argument) else { return nil }
        let seconds = kind.inSeconds
        if raw <= 0 || (seconds && raw > Int.max / 1000) {
            c.error(ReplyError.invalidExpire(c.commandName))
            return nil
        }
        var ms = seconds ? raw * 1000 : raw
        if kind.isRelative {
            let (sum, overflow) = ms.addingReportingOverflow(Int(c.now))
            // Redis adds without an overflow check and rejects the negative result.
            ms = overflow ? -1 : sum
        }
        if ms <= 0 {
            c.error(ReplyError.invalidExpire(c.commandName))
            return nil
        }
        return Int64(ms)
    }

    static func set(_ c: inout CommandContext) {
        guard let options = parseOptions(&c, from: 3, mode: .set) else { return }
        var expiry: Int64?
        if let kind = options.expireKind {
            guard let e = absoluteExpiry(&c, argument: options.expireArgument, kind: kind) else { return }
            expiry = e
        }
        let ttl: Shard.TTLChange = expiry.map { .at($0) } ?? (options.keepTTL ? .keep : .clear)
        setGeneric(&c, value: 2, ttl: ttl, nx: options.nx, xx: options.xx, get: options.get, okReply: nil)
    }

    /// The shared body of SET, SETNX, SETEX and PSETEX. `okReply` replaces +OK / nil with :1 / :0 (SETNX).
    static func setGeneric(
        _ c: inout CommandContext, value: Int, ttl: Shard.TTLChange, nx: Bool, xx: Bool, get: Bool, okReply: Bool?
    ) {
        c.withKeyForWrite(1) { c, shard, hash, existing in
            if get {
                // GETSET and SET ... GET read the old value, and count as a read (as in Redis).
                c.countRead(1, in: shard, found: existing != nil)
                if let index = existing { c.bulk(shard.entry(at: index).value) } else { c.null() }
            }
            if (nx && existing != nil) || (xx && existing == nil) {
                // One access per command, as Redis's lookups count: the write counts it, and SET ... NX GET of
                // an existing key, which writes nothing, counts its read.
                if get, let index = existing { c.read(shard, index) }
                if !get {
                    if okReply != nil { c.integer(0) } else { c.null() }
                }
                return
            }
            guard shard.setValue(c.arguments[1], hash: hash, value: c.arguments[value], ttl: ttl, existing: existing)
            else {
                if !get { c.error(ReplyError.outOfMemory) }
                return
            }
            c.keyModified(1)
            if c.server.notifications.isActive { notifySet(&c, created: existing == nil, ttl: ttl) }
            if !get {
                if okReply != nil { c.integer(1) } else { c.ok() }
            }
        }
    }

    /// SET's events: `new` for a key it created, `set`, and `expire` when it gave a TTL.
    @inline(never)
    static func notifySet(_ c: inout CommandContext, created: Bool, ttl: Shard.TTLChange) {
        if created { c.keyCreated(1) }
        c.notify(.string, "set", key: 1)
        if case .at = ttl { c.notify(.generic, "expire", key: 1) }
    }

        static func setnx(_ c: inout CommandContext) {
        setGeneric(&c, value: 2, ttl: .clear, nx: true, xx: false, get: false, okReply: true)
    }

    static func setex(_ c: inout CommandContext) {
        guard let expiry = absoluteExpiry(&c, argument: 2, kind: .ex) else { return }
        setGeneric(&c, value: 3, ttl: .at(expiry), nx: false, xx: false, get: false, okReply: nil)
    }

    static func psetex(_ c: inout CommandContext) {
        guard let expiry = absoluteExpiry(&c, argument: 2, kind: .px) else { return }
        setGeneric(&c, value: 3, ttl: .at(expiry), nx: false, xx: false, get: false, okReply: nil)
    }

    static func getset(_ c: inout CommandContext) {
        setGeneric(&c, value: 2, ttl: .clear, nx: false, xx: false, get: true, okReply: nil)
    }

    static func getdel(_ c: inout CommandContext) {
        // The key is removed at once: marking it would be wasted.
        c.withKeyForRead(1, .none) { c, shard, index in
            guard let index else { return c.null() }
            c.bulk(shard.entry(at: index).value)
            shard.remove(at: index)
            c.keyModified(1)
            c.notify(.generic, "del", key: 1)
        }
    }

    static func getex(_ c: inout CommandContext) {
        guard let options = parseOptions(&c, from: 2, mode: .getex) else { return }
        c.withKeyForRead(1, .access) { c, shard, index in
            guard let index else { return c.null() }
            var expiry: Int64?
            if let kind = options.expireKind {
                guard let e = absoluteExpiry(&c, argument: options.expireArgument, kind: kind) else { return }
                expiry = e
            }
            c.bulk(shard.entry(at: index).value)
            if let expiry {
                if options.expireKind?.isRelative == false && expiry <= c.now {
                    shard.remove(at: index)
                    c.keyModified(1)
                    c.notify(.generic, "del", key: 1)
                } else {
                    shard.setExpiry(at: index, to: expiry, hash: c.hash(1))
                    c.keyModified(1)
                    c.notify(.generic, "expire", key: 1)
                }
            } else if options.persist && shard.entry(at: index).hasExpiry {
                shard.setExpiry(at: index, to: nil, hash: c.hash(1))
                c.keyModified(1)
                c.notify(.generic, "persist", key: 1)
            }
        }
    }

    static func mset(_ c: inout CommandContext) {
        msetGeneric(&c, onlyIfNoneExist: false)
    }

    static func msetnx(_ c: inout CommandContext) {
        msetGeneric(&c, onlyIfNoneExist: true)
    }

    static func msetGeneric(_ c: inout CommandContext, onlyIfNoneExist: Bool) {
        guard c.arguments.count % 2 == 1 else {
            c.wrongArity()
            return
        }
        let db = c.database
        var shards = ShardSet()
        for i in stride(from: 1, to: c.arguments.count, by: 2) { shards.insert(Database.shardIndex(for: c.hash(i))) }
        shards.lock(in: db)
        defer { shards.unlock(in: db) }
        if onlyIfNoneExist {
            for i in stride(from: 1, to: c.arguments.count, by: 2) {
                let hash = c.hash(i)
                if c.lookUpForWrite(i, in: db.shard(for: hash), hash: hash) != nil {
                    c.integer(0)
                    return
                }
            }
        }
        for i in stride(from: 1, to: c.arguments.count, by: 2) {
            let hash = c.hash(i)
            let shard = db.shard(for: hash)
            let existing = c.lookUpForWrite(i, in: shard, hash: hash)
            guard shard.setValue(c.arguments[i], hash: hash, value: c.arguments[i + 1], ttl: .clear, existing: existing)
            else {
                c.error(ReplyError.outOfMemory)
                return
            }
            c.keyModified(i)
            if existing == nil { c.keyCreated(i) }
            c.notify(.string, "set", key: i)
        }
        if onlyIfNoneExist { c.integer(1) } else { c.ok() }
    }

    static func append(_ c: inout CommandContext) { overwrite(&c, valueArgument: 2, offset: nil) }

    /// SETRANGE key offset value: overwrites part of the value, padding with zero bytes; the new length.
    static func setrange(_ c: inout CommandContext) {
        guard let offset = c.integerArgument(2) else { return }
        guard offset >= 0 else { return c.error("ERR offset is out of range") }
        overwrite(&c, valueArgument: 3, offset: offset)
    }

    /// Writes argument `valueArgument` into the value of the key in argument 1 at `offset` (nil: at its end,
    /// APPEND), with zero bytes between the value's end and `offset`, keeping the TTL; answers the new length.
    private static func overwrite(_ c: inout CommandContext, valueArgument: Int, offset: Int?) {
        let key = c.arguments[1]
        let part = c.arguments[valueArgument]
        c.withKeyForWrite(1) { c, shard, hash, existing in
            let old = existing.map { shard.entry(at: $0).value } ?? UnsafeRawBufferPointer(start: nil, count: 0)
            // SETRANGE with nothing to write changes nothing: a missing key stays missing (APPEND creates it).
            if offset != nil && part.count == 0 { return c.integer(old.count) }
            let start = offset ?? old.count
            let (end, overflow) = start.addingReportingOverflow(part.count)
            // As Redis: the length is checked unless APPEND creates the key (its value is a bulk within the limit).
            if (offset != nil || existing != nil) && (overflow || end > c.server.config.protoMaxBulkLength) {
                return c.error(ReplyError.stringTooLong)
            }
            // Inside the value: written in place, in time proportional to the bytes written, as in Redis.
            if let index = existing, end <= old.count {
                shard.noteAccess(index, now: c.now)
                shard.overwriteValue(at: index, offset: start, with: part)
                shard.entry(at: index).flags |= Entry.modifiedInPlaceFlag
                c.keyModified(1)
                c.notify(.string, offset == nil ? "append" : "setrange", key: 1)
                return c.integer(old.count)
            }
            let oldCount = old.count
            let fill = { (out: UnsafeMutableRawBufferPointer) in
                let base = out.baseAddress!
                if start > oldCount { (base + oldCount).initializeMemory(as: UInt8.self, repeating: 0, count: start - oldCount) }
                if part.count > 0 { (base + start).copyMemory(from: part.baseAddress!, byteCount: part.count) }
            }
            // Past the value's end: the value grows, in place when its block has room (amortized, as Redis's).
            if let index = existing {
                guard let out = shard.growValue(at: index, hash: hash, to: end) else {
                    return c.error(ReplyError.outOfMemory)
                }
                fill(out)
                shard.entry(at: index).flags |= Entry.modifiedInPlaceFlag
            } else {
                let stored = shard.insertValue(key, hash: hash, count: end, fill: fill)
                guard stored else { return c.error(ReplyError.outOfMemory) }
                // SETRANGE builds a new key's value in place; APPEND stores its argument, encoded by its content.
                if offset != nil { shard.markEncoding(key, hash: hash, Entry.modifiedInPlaceFlag) }
                c.keyCreated(1)
            }
            c.keyModified(1)
            c.notify(.string, offset == nil ? "append" : "setrange", key: 1)
            c.integer(end)
        }
    }

    // MARK: counters

    /// INCRBYFLOAT key increment: the sum in `long double`, stored and answered as Redis writes it; the TTL is kept.
    static func incrbyfloat(_ c: inout CommandContext) {
        let key = c.arguments[1]
        let increment = c.arguments[2]
        c.withKeyForWrite(1) { c, shard, hash, existing in
            withUnsafeTemporaryAllocation(byteCount: 5120, alignment: 1) { out in
                let text = out.baseAddress!.assumingMemoryBound(to: CChar.self)
                let by = increment.baseAddress?.assumingMemoryBound(to: CChar.self) ?? UnsafePointer(text)
                var length: CInt
                if let index = existing {
                    let current = shard.entry(at: index).value
                    // An empty value is not a float (a nil pointer would stand for a missing key).
                    let pointer = current.baseAddress?.assumingMemoryBound(to: CChar.self) ?? UnsafePointer(text)
                    length = cached_incrbyfloat(pointer, current.count, by, increment.count, text, out.count)
                } else {
                    length = cached_incrbyfloat(nil, 0, by, increment.count, text, out.count)
                }
                guard length != -1 else { return c.error("ERR increment would produce NaN or Infinity") }
                guard length > 0 else { return c.error(ReplyError.notFloat) }
                let result = UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(out)[0..<Int(length)])
                guard shard.setValue(key, hash: hash, value: result, ttl: .keep, existing: existing) else {
                    return c.error(ReplyError.outOfMemory)
                }
                shard.markEncoding(key, hash: hash, Entry.notIntegerFlag)
                c.keyModified(1)
                if existing == nil { c.keyCreated(1) }
                c.notify(.string, "incrbyfloat", key: 1)
                c.bulk(result)
            }
        }
    }

    static func incr(_ c: inout CommandContext) { incrBy(&c, 1) }
    static func decr(_ c: inout CommandContext) { incrBy(&c, -1) }

    static func incrby(_ c: inout CommandContext) {
        guard let by = c.integerArgument(2) else { return }
        incrBy(&c, by)
    }

    static func decrby(_ c: inout CommandContext) {
        guard let by = c.integerArgument(2) else { return }
        guard by != Int.min else {
            c.error("ERR decrement would overflow")
            return
        }
        incrBy(&c, -by)
    }

    static func incrBy(_ c: inout CommandContext, _ increment: Int) {
        let key = c.arguments[1]
        c.withKeyForWrite(1) { c, shard, hash, existing in
            var value = 0
            if let index = existing {
                guard let current = RESPInteger.parse(shard.entry(at: index).value) else {
                    c.error(ReplyError.notInteger)
                    return
                }
                value = current
            }
            let (result, overflow) = value.addingReportingOverflow(increment)
            guard !overflow else {
                c.error(ReplyError.overflow)
                return
            }
            var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)
            let stored = withUnsafeMutableBytes(of: &digits) { raw -> Bool in
                let n = RESPInteger.format(result, into: raw.baseAddress!)
                let text = UnsafeRawBufferPointer(rebasing: raw[0..<n])
                return shard.setValue(key, hash: hash, value: text, ttl: .keep, existing: existing)
            }
            guard stored else { return c.error(ReplyError.outOfMemory) }
            c.keyModified(1)
            if existing == nil { c.keyCreated(1) }
            c.notify(.string, "incrby", key: 1)
            c.integer(result)
        }
    }
}
