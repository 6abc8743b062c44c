import CacheCore

/// How a read marks the key it found, for eviction and for OBJECT IDLETIME and OBJECT FREQ. A client in
/// CLIENT NO-TOUCH mode marks nothing.
package enum KeyTouch {
    /// A read of the value (GET, MGET, DUMP, LCS): SIEVE's read count, the LRU stamp or the LFU counter
    /// (``CommandContext/read(_:_:)``).
    case read
    /// Another access (STRLEN, GETRANGE, GETEX, the bitmap reads): the LRU stamp or the LFU counter
    /// (``CommandContext/accessed(_:_:)``).
    case access
    /// None: the command only looks at the key (EXISTS, TYPE, the TTL family, OBJECT), as Redis's
    /// `LOOKUP_NOTOUCH`.
    case none
}

/// The one way a command reaches a key: its shard locked, an expired key removed on the way (lazy expiry),
/// and, for a read, the keyspace hit or miss counted, the `keymiss` event published and the key marked for
/// eviction, as Redis's `lookupKeyRead` and `lookupKeyWrite` do. Client-side caching needs nothing here: the
/// executor remembers a read command's keys from its key specs.
///
/// The `with...` forms hold the lock while their body runs and release it after; they are inlined, so the
/// body is not a closure at run time. Commands that lock several shards at once (``ShardSet``) look each key
/// up with ``lookUpForRead(_:in:hash:_:keymiss:)`` or ``lookUpForWrite(_:in:hash:)`` instead.
extension CommandContext {
    /// Runs `body` with the shard of the key in argument `argument` locked, and the key's hash, without
    /// looking the key up (MEMORY USAGE looks without expiring).
    @inline(__always)
    package mutating func withKeyShard<R>(_ argument: Int, _ body: (inout CommandContext, Shard, UInt64) -> R) -> R {
        let hash = hash(argument)
        let shard = database.shard(for: hash)
        shard.lock.lock()
        defer { shard.lock.unlock() }
        return body(&self, shard, hash)
    }

    /// Looks up the key in argument `argument` to write it (Redis's `lookupKeyWrite`): runs `body` with its
    /// shard locked, the key's hash and its slot (nil when it does not exist or has just expired). Not a read:
    /// counts no hit or miss, publishes no `keymiss` event and marks nothing (a write marks what it keeps).
    @inline(__always)
    package mutating func withKeyForWrite<R>(
        _ argument: Int, _ body: (inout CommandContext, Shard, UInt64, Int?) -> R
    ) -> R {
        let hash = hash(argument)
        let shard = database.shard(for: hash)
        shard.lock.lock()
        defer { shard.lock.unlock() }
        let index = lookUpForWrite(argument, in: shard, hash: hash)
        return body(&self, shard, hash, index)
    }

    /// Looks up the key in argument `argument` to read it (Redis's `lookupKeyRead`): runs `body` with its shard
    /// locked and its slot (nil when it does not exist or has just expired), after counting the read
    /// (``lookUpForRead(_:in:hash:_:keymiss:)``).
    @inline(__always)
    package mutating func withKeyForRead<R>(
        _ argument: Int, _ touch: KeyTouch = .read, keymiss: Bool = true, _ body: (inout CommandContext, Shard, Int?) -> R
    ) -> R {
        let hash = hash(argument)
        let shard = database.shard(for: hash)
        shard.lock.lock()
        defer { shard.lock.unlock() }
        let index = lookUpForRead(argument, in: shard, hash: hash, touch, keymiss: keymiss)
        return body(&self, shard, index)
    }

    /// The slot of the key in argument `argument` (hash `hash`) in `shard`, locked by the caller, for a read:
    /// counts the keyspace hit or miss, publishes `keymiss` for a missing key (unless `keymiss` is false, as
    /// for OBJECT), and marks a found key as `touch` says.
    @inline(__always)
    package mutating func lookUpForRead(
        _ argument: Int, in shard: Shard, hash: UInt64, _ touch: KeyTouch = .read, keymiss: Bool = true
    ) -> Int? {
        let index = shard.lookup(arguments[argument], hash: hash, now: now)
        countRead(argument, in: shard, found: index != nil, keymiss: keymiss)
        if let index {
            switch touch {
            case .read: read(shard, index)
            case .access: accessed(shard, index)
            case .none: break
            }
        }
        return index
    }

    /// The slot of the key in argument `argument` (hash `hash`) in `shard`, locked by the caller, for a write:
    /// nil when it does not exist or has just expired; nothing counted.
    @inline(__always)
    package func lookUpForWrite(_ argument: Int, in shard: Shard, hash: UInt64) -> Int? {
        shard.lookup(arguments[argument], hash: hash, now: now)
    }

    /// Counts a read of the key in argument `argument`, which `shard` holds or would hold: a keyspace hit, or
    /// a miss and its `keymiss` event (unless `keymiss` is false). For a write that also reads (SET ... GET,
    /// GETSET), whose lookup is a write's.
    @inline(__always)
    package mutating func countRead(_ argument: Int, in shard: Shard, found: Bool, keymiss: Bool = true) {
        if found {
            shard.countHit()
        } else {
            shard.countMiss()
            if keymiss { keyMissed(argument) }
        }
    }
}
