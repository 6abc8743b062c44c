import CacheCore
import NIOCore
import RESP

/// Generic key commands: DEL, EXISTS, TTLs, RENAME, TYPE, RANDOMKEY, KEYS, SCAN.
package enum KeyCommands {
    static func del(_ c: inout CommandContext) {
        var removed = 0
        for i in 1..<c.arguments.count {
            c.withKeyForWrite(i) { c, shard, _, index in
                guard let index else { return }
                shard.remove(at: index)
                removed += 1
                c.keyModified(i)
                c.notify(.generic, "del", key: i)
            }
        }
        c.integer(removed)
    }

    static func exists(_ c: inout CommandContext) { countExisting(&c, touching: false) }

    /// TOUCH key [key ...]: EXISTS that also reads each key for eviction (its access time and read count).
    static func touch(_ c: inout CommandContext) { countExisting(&c, touching: true) }

    /// How many of the keys exist (a key named twice counts twice).
    private static func countExisting(_ c: inout CommandContext, touching: Bool) {
        var found = 0
        for i in 1..<c.arguments.count {
            // TOUCH reads the key even for a client in CLIENT NO-TOUCH mode, as in Redis: not through `KeyTouch`.
            let exists = c.withKeyForRead(i, .none) { c, shard, index in
                if touching, let index { shard.touch(index, now: c.now) }
                return index != nil
            }
            if exists { found += 1 }
        }
        c.integer(found)
    }

    static func type(_ c: inout CommandContext) {
        let exists = c.withKeyForRead(1, .none) { _, _, index in index != nil }
        if exists { c.simple("string") } else { c.simple("none") }
    }

    // MARK: time to live

    static func expire(_ c: inout CommandContext) { expireGeneric(&c, base: c.now, seconds: true) }
    static func pexpire(_ c: inout CommandContext) { expireGeneric(&c, base: c.now, seconds: false) }
    static func expireat(_ c: inout CommandContext) { expireGeneric(&c, base: 0, seconds: true) }
    static func pexpireat(_ c: inout CommandContext) { expireGeneric(&c, base: 0, seconds: false) }

    static func expireGeneric(_ c: inout CommandContext, base: Int64, seconds: Bool) {
        var nx = false, xx = false, gt = false, lt = false
        for j in 3..<max(3, c.arguments.count) {
            if c.arguments.matches(j, "nx") {
                nx = true
            } else if c.arguments.matches(j, "xx") {
                xx = true
            } else if c.arguments.matches(j, "gt") {
                gt = true
            } else if c.arguments.matches(j, "lt") {
                lt = true
            } else {
                c.reply.writeRESPError(bytes: ReplyError.quoting("ERR Unsupported option ", c.arguments[j]))
                return
            }
        }
        if nx && (xx || gt || lt) {
            c.error(ReplyError.expireOptionsNXXX)
            return
        }
        if gt && lt {
            c.error(ReplyError.expireOptionsGTLT)
            return
        }
        guard var when = c.integerArgument(2) else { return }
        if seconds {
            guard when <= Int.max / 1000 && when >= Int.min / 1000 else {
                c.error(ReplyError.invalidExpire(c.commandName))
                return
            }
            when *= 1000
        }
        guard when <= Int.max - Int(base) else {
            c.error(ReplyError.invalidExpire(c.commandName))
            return
        }
        when += Int(base)
        c.withKeyForWrite(1) { c, shard, hash, index in
            guard let index else { return c.integer(0) }
            c.accessed(shard, index)
            let current = shard.entry(at: index).expiry
            if nx && current != nil { return c.integer(0) }
            if xx && current == nil { return c.integer(0) }
            if gt, current == nil || Int64(when) <= current! { return c.integer(0) }
            if lt, let current, Int64(when) >= current { return c.integer(0) }
            if Int64(when) <= c.now {
                shard.remove(at: index)
                c.keyModified(1)
                c.notify(.generic, "del", key: 1)
            } else {
                shard.setExpiry(at: index, to: Int64(when), hash: hash)
                c.keyModified(1)
                c.notify(.generic, "expire", key: 1)
            }
            c.integer(1)
        }
    }

    static func ttl(_ c: inout CommandContext) { ttlGeneric(&c, milliseconds: false, absolute: false) }
    static func pttl(_ c: inout CommandContext) { ttlGeneric(&c, milliseconds: true, absolute: false) }
    static func expiretime(_ c: inout CommandContext) { ttlGeneric(&c, milliseconds: false, absolute: true) }
    static func pexpiretime(_ c: inout CommandContext) { ttlGeneric(&c, milliseconds: true, absolute: true) }

    static func ttlGeneric(_ c: inout CommandContext, milliseconds: Bool, absolute: Bool) {
        let found = c.withKeyForRead(1, .none) { _, shard, index in index.map { shard.entry(at: $0).expiry } }
        guard let expiry = found else { return c.integer(-2) }
        guard let expiry else { return c.integer(-1) }
        let ttl = max(0, absolute ? Int(expiry) : Int(expiry - c.now))
        // Seconds rounded to the nearest, as Redis does, without adding 500 first: an expiry set with
        // PEXPIREAT near Int64.max would overflow that sum.
        c.integer(milliseconds ? ttl : ttl / 1000 + (ttl % 1000 >= 500 ? 1 : 0))
    }

    static func persist(_ c: inout CommandContext) {
        c.withKeyForWrite(1) { c, shard, hash, index in
            guard let index, shard.entry(at: index).hasExpiry else { return c.integer(0) }
            c.accessed(shard, index)
            shard.setExpiry(at: index, to: nil, hash: hash)
            c.keyModified(1)
            c.notify(.generic, "persist", key: 1)
            c.integer(1)
        }
    }

    // MARK: renaming and moving

    static func rename(_ c: inout CommandContext) { renameGeneric(&c, nx: false) }
    static func renamenx(_ c: inout CommandContext) { renameGeneric(&c, nx: true) }

    static func renameGeneric(_ c: inout CommandContext, nx: Bool) {
        let db = c.database
        let source = c.arguments[1]
        let target = c.arguments[2]
        let sourceHash = c.hash(1)
        let targetHash = c.hash(2)
        var shards = ShardSet()
        shards.insert(Database.shardIndex(for: sourceHash))
        shards.insert(Database.shardIndex(for: targetHash))
        shards.lock(in: db)
        defer { shards.unlock(in: db) }
        let sourceShard = db.shard(for: sourceHash)
        let targetShard = db.shard(for: targetHash)
        guard let sourceIndex = c.lookUpForWrite(1, in: sourceShard, hash: sourceHash) else {
            return c.error(ReplyError.noSuchKey)
        }
        if source.elementsEqual(target) {
            return nx ? c.integer(0) : c.ok()
        }
        let targetIndex = c.lookUpForWrite(2, in: targetShard, hash: targetHash)
        if nx && targetIndex != nil { return c.integer(0) }
        // Looking the target up may have reclaimed an expired key in the same shard: find the source again.
        let entry = sourceShard.entry(at: sourceShard.find(source, hash: sourceHash) ?? sourceIndex)
        let ttl: Shard.TTLChange = entry.expiry.map { .at($0) } ?? .clear
        c.accessed(sourceShard, sourceShard.find(source, hash: sourceHash) ?? sourceIndex)
        let (flags, access) = (entry.flags, entry.access)
        guard targetShard.setValue(target, hash: targetHash, value: entry.value, ttl: ttl, existing: targetIndex)
        else { return c.error(ReplyError.outOfMemory) }
        targetShard.adopt(target, hash: targetHash, flags: flags, access: access)
        // Setting the target may have moved slots in a shared shard: look the source up again.
        if let index = sourceShard.find(source, hash: sourceHash) { sourceShard.remove(at: index) }
        c.keyModified(1)
        c.keyModified(2)
        // As Redis: the target is a new key, even when it replaced one.
        c.keyCreated(2)
        c.notify(.generic, "rename_from", key: 1)
        c.notify(.generic, "rename_to", key: 2)
        nx ? c.integer(1) : c.ok()
    }

    /// COPY source destination [DB destination-db] [REPLACE]: the value and TTL under a second name, in this
    /// database or another; 1 if copied, 0 if the source is missing or the destination exists (without REPLACE).
    static func copy(_ c: inout CommandContext) {
        let a = c.arguments
        var replace = false
        var target = c.session.db
        var j = 3
        while j < a.count {
            if a.matches(j, "replace") {
                replace = true
            } else if a.matches(j, "db") && j + 1 < a.count {
                guard let db = c.integerArgument(j + 1) else { return }
                guard db >= Int(Int32.min) && db <= Int(Int32.max) else { return c.error(ReplyError.notInt32) }
                guard db >= 0 && db < c.server.keyspace.databases.count else {
                    return c.error(ReplyError.dbIndexOutOfRange)
                }
                target = db
                j += 1
            } else {
                return c.error(ReplyError.syntax)
            }
            j += 1
        }
        let source = a[1], destination = a[2]
        if target == c.session.db && source.elementsEqual(destination) { return c.error(ReplyError.sameObject) }
        let sourceHash = c.hash(1), destinationHash = c.hash(2)
        let from = c.database, to = c.server.keyspace.databases[target]
        let sourceShard = from.shard(for: sourceHash), destinationShard = to.shard(for: destinationHash)
        // Two shards (or one) locked in the keyspace's order: database, then shard index.
        let first = (c.session.db, Database.shardIndex(for: sourceHash))
        let second = (target, Database.shardIndex(for: destinationHash))
        let sameShard = first == second
        let (lockFirst, lockSecond) = first < second ? (sourceShard, destinationShard) : (destinationShard, sourceShard)
        lockFirst.lock.lock()
        if !sameShard { lockSecond.lock.lock() }
        defer {
            if !sameShard { lockSecond.lock.unlock() }
            lockFirst.lock.unlock()
        }
        // A read of the source, marked once the destination is looked up too.
        guard c.lookUpForRead(1, in: sourceShard, hash: sourceHash, .none) != nil else { return c.integer(0) }
        let destinationIndex = c.lookUpForWrite(2, in: destinationShard, hash: destinationHash)
        if destinationIndex != nil && !replace { return c.integer(0) }
        // Looking the destination up may have reclaimed an expired key in the same shard: find the source again.
        guard let sourceIndex = sourceShard.find(source, hash: sourceHash) else { return c.integer(0) }
        c.accessed(sourceShard, sourceIndex)
        let entry = sourceShard.entry(at: sourceIndex)
        let ttl: Shard.TTLChange = entry.expiry.map { .at($0) } ?? .clear
        let flags = entry.flags
        guard destinationShard.setValue(
            destination, hash: destinationHash, value: entry.value, ttl: ttl, existing: destinationIndex)
        else { return c.error(ReplyError.outOfMemory) }
        destinationShard.adopt(destination, hash: destinationHash, flags: flags)
        if target == c.session.db {
            c.keyModified(2)
        } else {
            // Tracking does not tell databases apart; WATCH does.
            if c.server.tracking.isActive { c.noteModified(destination) }
            c.keyModified(2, inDatabase: target)
        }
        // As Redis: the destination is a new key, even when it replaced one.
        c.keyCreated(2, db: target)
        c.notify(.generic, "copy_to", key: 2, db: target)
        c.integer(1)
    }

    static func move(_ c: inout CommandContext) {
        guard let target = c.integerArgument(2) else { return }
        guard target >= Int(Int32.min) && target <= Int(Int32.max) else { return c.error(ReplyError.notInt32) }
        guard target >= 0 && target < c.server.keyspace.databases.count else {
            return c.error(ReplyError.dbIndexOutOfRange)
        }
        guard target != c.session.db else { return c.error(ReplyError.sameObject) }
        let key = c.arguments[1]
        let hash = c.hash(1)
        let from = c.database
        let to = c.server.keyspace.databases[target]
        let index = Database.shardIndex(for: hash)
        // Lock the same shard of both databases in database order.
        let (first, second) = c.session.db < target ? (from, to) : (to, from)
        first.shards[index].lock.lock()
        second.shards[index].lock.lock()
        defer {
            second.shards[index].lock.unlock()
            first.shards[index].lock.unlock()
        }
        let sourceShard = from.shards[index]
        let targetShard = to.shards[index]
        guard let sourceIndex = c.lookUpForWrite(1, in: sourceShard, hash: hash) else { return c.integer(0) }
        if c.lookUpForWrite(1, in: targetShard, hash: hash) != nil { return c.integer(0) }
        let entry = sourceShard.entry(at: sourceIndex)
        let ttl: Shard.TTLChange = entry.expiry.map { .at($0) } ?? .clear
        c.accessed(sourceShard, sourceIndex)
        guard targetShard.setValue(key, hash: hash, value: entry.value, ttl: ttl, existing: nil) else {
            return c.error(ReplyError.outOfMemory)
        }
        targetShard.adopt(key, hash: hash, flags: entry.flags, access: entry.access)
        sourceShard.remove(at: sourceIndex)
        c.keyModified(1)
        c.keyModified(1, inDatabase: target)
        c.keyCreated(1, db: target)
        c.notify(.generic, "move_from", key: 1)
        c.notify(.generic, "move_to", key: 1, db: target)
        c.integer(1)
    }

    // MARK: iteration

    static func randomkey(_ c: inout CommandContext) {
        let db = c.database
        var generator = SystemRandomNumberGenerator()
        // Pick shards at random until one has a live key; give up on an empty database.
        for _ in 0..<(Keyspace.shardCount * 4) {
            let shard = db.shards[Int.random(in: 0..<Keyspace.shardCount, using: &generator)]
            shard.lock.lock()
            if let index = shard.randomSlot(using: &generator) {
                let entry = shard.entry(at: index)
                if entry.isExpired(at: c.now) {
                    shard.removeExpired(at: index)
                } else {
                    c.reply.writeRESPBulkString(entry.key)
                    shard.lock.unlock()
                    return
                }
            }
            shard.lock.unlock()
        }
        // Sparse database: walk the shards in order.
        for shard in db.shards {
            shard.lock.lock()
            while let index = shard.randomSlot(using: &generator) {
                let entry = shard.entry(at: index)
                if entry.isExpired(at: c.now) {
                    shard.removeExpired(at: index)
                    continue
                }
                c.reply.writeRESPBulkString(entry.key)
                shard.lock.unlock()
                return
            }
            shard.lock.unlock()
        }
        c.null()
    }

    static func keys(_ c: inout CommandContext) {
        let pattern = c.arguments[1]
        let matchAll = pattern.count == 1 && pattern[0] == UInt8(ascii: "*")
        var matches = ByteBuffer()
        var count = 0
        // The list is bounded by the connection's reply limit, as the reply it becomes.
        let room = c.session.replyLimit &- c.reply.readableBytes
        for shard in c.database.shards where matches.readableBytes <= room {
            shard.lock.lock()
            shard.forEach { entry in
                if entry.isExpired(at: c.now) || matches.readableBytes > room { return }
                let key = entry.key
                if matchAll || Glob.matches(pattern: pattern, subject: key) {
                    matches.writeRESPBulkString(key)
                    count += 1
                }
            }
            shard.lock.unlock()
        }
        c.arrayHeader(count)
        guard c.hasRoom(for: matches.readableBytes) else { return }
        c.reply.writeBuffer(&matches)
    }

    static func scan(_ c: inout CommandContext) {
        guard let cursor = parseCursor(c.arguments[1]) else { return c.error("ERR invalid cursor") }
        var count = 10
        var pattern: UnsafeRawBufferPointer?
        var typeFilter: String?
        var j = 2
        while j < c.arguments.count {
            let remaining = c.arguments.count - j - 1
            if c.arguments.matches(j, "count") && remaining >= 1 {
                guard let n = c.integerArgument(j + 1) else { return }
                guard n >= 1 else { return c.error(ReplyError.syntax) }
                count = n
                j += 2
            } else if c.arguments.matches(j, "match") && remaining >= 1 {
                pattern = c.arguments[j + 1]
                j += 2
            } else if c.arguments.matches(j, "type") && remaining >= 1 {
                typeFilter = c.arguments.string(j + 1).lowercased()
                j += 2
            } else {
                return c.error(ReplyError.syntax)
            }
        }
        if let p = pattern, p.count == 1, p[0] == UInt8(ascii: "*") { pattern = nil }
        let wantsStrings = typeFilter.map { $0 == "string" } ?? true
        let db = c.database
        var shardIndex = Int(cursor & 0xFF)
        var shardCursor = cursor >> 8
        var found = ByteBuffer()
        var collected = 0
        // A huge COUNT may collect a whole database: bounded by the connection's reply limit.
        let room = c.session.replyLimit &- c.reply.readableBytes
        // Redis's limit is count * 10 (which wraps, i.e. no limit, for a huge COUNT); never trap on it.
        var iterations = count.multipliedReportingOverflow(by: 10).overflow ? Int.max : count * 10
        // Buckets with no key of their own cost nothing, up to this many per call: a table keeps its size when
        // keys leave it, where Redis's shrinks, and a sparse one is then still iterated in a few calls.
        var freeEmptyBuckets = 4096
        repeat {
            let shard = db.shards[shardIndex]
            shard.lock.lock()
            // A shard without keys (never used, or emptied: its table keeps its size) is skipped at no cost, so
            // that a small database is iterated in one call, as Redis's small tables are.
            let visitedSlot = shard.count > 0
            var expired: [[UInt8]] = []
            var bucketHadKeys = false
            shardCursor = !visitedSlot ? 0 : shard.scan(cursor: shardCursor) { entry in
                bucketHadKeys = true
                // Redis's order: the pattern, then the type, whose lookup removes an expired key (as a read
                // would) whatever the type asked for.
                if let pattern, !Glob.matches(pattern: pattern, subject: entry.key) { return }
                if entry.isExpired(at: c.now) { return expired.append(Array(entry.key)) }
                guard wantsStrings, found.readableBytes <= room else { return }
                found.writeRESPBulkString(entry.key)
                collected += 1
            }
            // Removed once the bucket is visited: a removal only moves entries of later buckets toward their
            // home, so the cursor's guarantee holds.
            for key in expired {
                key.withUnsafeBytes { _ = shard.lookup($0, hash: Keyspace.hasher.hash($0), now: c.now) }
            }
            shard.lock.unlock()
            if shardCursor == 0 {
                shardIndex += 1
                if shardIndex == Keyspace.shardCount { break }
            }
            if visitedSlot {
                if !bucketHadKeys && freeEmptyBuckets > 0 { freeEmptyBuckets -= 1 } else { iterations -= 1 }
            }
        } while collected < count && iterations > 0 && found.readableBytes <= room
        let next: UInt64 = shardIndex == Keyspace.shardCount ? 0 : (shardCursor << 8) | UInt64(shardIndex)
        c.arrayHeader(2)
        c.bulk(String(next))
        c.arrayHeader(collected)
        guard c.hasRoom(for: found.readableBytes) else { return }
        c.reply.writeBuffer(&found)
    }

    /// A cursor as Redis 7.0's `parseScanCursorOrReply` reads it with `strtoul`: the empty string is 0, an
    /// optional sign is accepted (a minus wraps the value around, so `-1` is the largest cursor), and leading
    /// space, trailing junk or a value beyond 64 bits make it invalid.
    static func parseCursor(_ whole: UnsafeRawBufferPointer) -> UInt64? {
        // Redis reads the cursor as a C string: it ends at the first NUL byte.
        let bytes = UnsafeRawBufferPointer(rebasing: whole[..<(whole.firstIndex(of: 0) ?? whole.count)])
        var i = 0
        var negative = false
        if let first = bytes.first {
            if first == UInt8(ascii: "+") || first == UInt8(ascii: "-") {
                negative = first == UInt8(ascii: "-")
                i = 1
            }
            // No digits means no conversion: strtoul leaves its end at the first byte, which is not NUL.
            guard i < bytes.count, bytes[i] >= UInt8(ascii: "0") && bytes[i] <= UInt8(ascii: "9") else { return nil }
        }
        var value: UInt64 = 0
        while i < bytes.count {
            let b = bytes[i]
            guard b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") else { return nil }
            let (m, o1) = value.multipliedReportingOverflow(by: 10)
            let (sum, o2) = m.addingReportingOverflow(UInt64(b - UInt8(ascii: "0")))
            if o1 || o2 { return nil }
            value = sum
            i += 1
        }
        return negative ? 0 &- value : value
    }
}
