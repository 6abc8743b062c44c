/// Compound operations on values, used by the command layer. All require the shard's lock.
extension Shard {
    /// How ``setValue(_:hash:value:expiry:existing:)`` treats the key's time to live.
    package enum TTLChange {
        /// Remove any TTL (plain SET).
        case clear
        /// Keep the TTL the key has (SET KEEPTTL, APPEND, INCR).
        case keep
        /// Set this absolute expiry in milliseconds.
        case at(Int64)
    }

    /// Stores `value` under `key`. `existing` is the key's slot if the caller already looked it up.
    /// Returns false when memory could not be allocated (nothing changed then).
    @discardableResult
    package func setValue(
        _ key: UnsafeRawBufferPointer,
        hash: UInt64,
        value: UnsafeRawBufferPointer,
        ttl: TTLChange,
        existing: Int?
    ) -> Bool {
        if let index = existing {
            // Writing a key is an access to it (an LFU counter is kept and raised, as Redis's is).
            noteAccess(index, now: clockNow)
            let entry = entry(at: index)
            let expiry: Int64?
            switch ttl {
            case .clear: expiry = nil
            case .keep: expiry = entry.expiry
            case .at(let ms): expiry = ms
            }
            // Same shape: overwrite the bytes in place.
            if entry.value.count == value.count
                && (entry.hasExpiry == (expiry != nil) || entry.flags & Entry.expirySlotFlag != 0)
            {
                if value.count > 0 {
                    entry.mutableValue.baseAddress!.copyMemory(from: value.baseAddress!, byteCount: value.count)
                }
                entry.flags &= ~(Entry.modifiedInPlaceFlag | Entry.notIntegerFlag)
                if expiry != entry.expiry { setExpiry(at: index, to: expiry, hash: hash) }
                changes &+= 1
                return true
            }
            guard let fresh = Entry.make(key: key, value: value, expiry: expiry) else { return false }
            let access = entry.access
            replace(at: index, with: fresh, hash: hash)
            fresh.access = access
            return true
        }
        let expiry: Int64?
        if case .at(let ms) = ttl { expiry = ms } else { expiry = nil }
        guard let fresh = Entry.make(key: key, value: value, expiry: expiry) else { return false }
        if !insert(fresh, hash: hash) {
            fresh.deallocate()
            return false
        }
        return true
    }

    /// Writes `part` over the value of the key in slot `index` from `offset` on, in place: `offset + part.count`
    /// must not pass the value's end (SETRANGE inside the value, APPEND of nothing).
    package func overwriteValue(at index: Int, offset: Int, with part: UnsafeRawBufferPointer) {
        let value = entry(at: index).mutableValue
        precondition(offset >= 0 && offset + part.count <= value.count, "overwrite past the value's end")
        if part.count > 0 { (value.baseAddress! + offset).copyMemory(from: part.baseAddress!, byteCount: part.count) }
        changes &+= 1
    }

    /// Lengthens the value of the key in slot `index` to `count` bytes, keeping its bytes, TTL and read count,
    /// and returns the whole value for the caller to fill past the old end; nil when memory could not be
    /// allocated (nothing changed then). As Redis's strings do, a value that has to move is given room to
    /// grow (twice its size, or 1 MiB more from 1 MiB on), so that a value built by repeated APPENDs is copied
    /// a logarithmic number of times, not once per call.
    package func growValue(at index: Int, hash: UInt64, to count: Int) -> UnsafeMutableRawBufferPointer? {
        noteAccess(index, now: clockNow)
        let entry = entry(at: index)
        let old = entry.value
        precondition(count >= old.count, "growValue cannot shorten a value")
        if entry.growValueInPlace(to: count) {
            changes &+= 1
            return entry.mutableValue
        }
        let expiry = entry.expiry
        let needed = Entry.size(keyCount: entry.key.count, valueCount: count, hasExpiry: expiry != nil)
        let slack = Self.growthRoomLimit
        let (reserve, overflow) = needed < slack ? (needed * 2, false) : needed.addingReportingOverflow(slack)
        guard !overflow else { return nil }
        guard let grown = Entry.allocate(key: entry.key, valueCount: count, expiry: expiry, reserve: reserve)
        else { return nil }
        if old.count > 0 { grown.mutableValue.baseAddress!.copyMemory(from: old.baseAddress!, byteCount: old.count) }
        grown.flags |= entry.flags & Entry.keptFlags
        let access = entry.access
        replace(at: index, with: grown, hash: hash)
        grown.access = access
        return grown.mutableValue
    }

    /// Counts a change made to a value in place by the caller (SETBIT), for the save points.
    package func countChange() { changes &+= 1 }

    /// Sets `flag` (``Entry/modifiedInPlaceFlag`` or ``Entry/notIntegerFlag``) on the entry of `key`, if present.
    package func markEncoding(_ key: UnsafeRawBufferPointer, hash: UInt64, _ flag: UInt8) {
        if let index = find(key, hash: hash) { entry(at: index).flags |= flag }
    }

    /// Gives the entry of `key` the encoding bits of `flags` and, when given, the access stamp `access`:
    /// RENAME and MOVE keep the value with its encoding and access history, COPY only its encoding.
    package func adopt(_ key: UnsafeRawBufferPointer, hash: UInt64, flags: UInt8, access: UInt32? = nil) {
        guard let index = find(key, hash: hash) else { return }
        let entry = entry(at: index)
        entry.flags |= flags & (Entry.modifiedInPlaceFlag | Entry.notIntegerFlag)
        if let access { entry.access = access }
    }

    /// Beyond this size a value that grows is given this much room, not its own size again (Redis's
    /// `SDS_MAX_PREALLOC`).
    static let growthRoomLimit = 1 << 20

    /// Adds `key`, which must be absent, with a value of `count` bytes that `fill` writes (SETRANGE and
    /// SETBIT on a missing key; an existing value grows with ``growValue(at:hash:to:)``). Returns false when
    /// memory could not be allocated.
    @discardableResult
    package func insertValue(
        _ key: UnsafeRawBufferPointer,
        hash: UInt64,
        count: Int,
        fill: (UnsafeMutableRawBufferPointer) -> Void
    ) -> Bool {
        guard let fresh = Entry.allocate(key: key, valueCount: count, expiry: nil) else { return false }
        fill(fresh.mutableValue)
        if !insert(fresh, hash: hash) {
            fresh.deallocate()
            return false
        }
        return true
    }

}
