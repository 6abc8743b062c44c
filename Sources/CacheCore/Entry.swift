import Glibc

/// One key and its value in a single heap block, with no object header:
///
///     [flags: 1][access: 3][key length: varint][value length: varint][expiry ms: 8, if flagged][key][value]
///
/// `flags` holds the expiry flag and a 2-bit read count for the default eviction policy; `access` is the
/// 24-bit stamp of the LRU and LFU policies (see ``Shard/evictOne(now:)``). A 13-byte key with a 100-byte
/// value takes 119 bytes, which the allocator serves from its 128-byte class.
/// Entries with an expiry live in an arena of their own (see ``EntryMemory``). Entries of at least
/// ``expiryFieldThreshold`` bytes always have the expiry field (``expirySlotFlag``), so that a TTL added to
/// or removed from a large value changes a flag instead of copying the value.
/// An `Entry` is a borrowed view: it is valid only while its shard's lock is held and the entry is in the table.
public struct Entry {
    @usableFromInline package let base: UnsafeMutableRawPointer

    @inlinable @inline(__always)
    package init(_ base: UnsafeMutableRawPointer) { self.base = base }

    @usableFromInline static let hasExpiryFlag: UInt8 = 0x01
    /// Bits 1-2: how often the entry was read since the eviction hand last passed it, saturating at 3
    /// (``visitedFlag`` is the low bit). The hand spares an entry with a count and decrements it.
    @usableFromInline static let visitedFlag: UInt8 = 0x02
    @usableFromInline static let readCountMask: UInt8 = 0x06
    /// Bit 3: the value was changed in place by APPEND or SETRANGE, which Redis keeps in its `raw` encoding
    /// whatever the value holds (OBJECT ENCODING).
    @usableFromInline package static let modifiedInPlaceFlag: UInt8 = 0x08
    /// Bit 4: the value was written as text that is never given the `int` encoding (INCRBYFLOAT's result).
    @usableFromInline package static let notIntegerFlag: UInt8 = 0x10
    /// Bit 5: the entry has the 8-byte expiry field whether or not ``hasExpiryFlag`` is set: a large entry,
    /// which gains or loses a TTL in place (EXPIRE, PERSIST) instead of being copied into a new block.
    @usableFromInline static let expirySlotFlag: UInt8 = 0x20
    /// Either flag that puts the expiry field in the entry.
    @usableFromInline static let expiryFieldFlags: UInt8 = hasExpiryFlag | expirySlotFlag
    /// Entries of at least this many bytes keep the expiry field even without a TTL. It is jemalloc's
    /// smallest "large" size class (16 KiB with 4 KiB pages): such blocks have pages of their own, so where
    /// they live (the TTL arena or not) does not decide which pages their removal frees, and 8 bytes are
    /// under 0.05 % of them.
    @usableFromInline static let expiryFieldThreshold = EntryMemory.smallestLargeSize
    /// The flags an entry keeps when it is rebuilt under the same key (a TTL added or removed, a value grown):
    /// the read count and the two encoding bits.
    @usableFromInline package static let keptFlags: UInt8 = readCountMask | modifiedInPlaceFlag | notIntegerFlag
    /// Bytes before the key length: the flags and the access stamp.
    @usableFromInline static let headerSize = 4

    /// The read count of the default eviction policy (0...3).
    @inlinable @inline(__always)
    package var readCount: Int {
        get { Int((flags & Self.readCountMask) >> 1) }
        nonmutating set { flags = (flags & ~Self.readCountMask) | (UInt8(min(3, max(0, newValue))) << 1) }
    }

    /// The 24-bit access stamp: an LRU clock, or an LFU time and counter (``Shard``).
    @inlinable @inline(__always)
    package var access: UInt32 {
        get {
            UInt32(base.load(fromByteOffset: 1, as: UInt8.self))
                | UInt32(base.load(fromByteOffset: 2, as: UInt8.self)) << 8
                | UInt32(base.load(fromByteOffset: 3, as: UInt8.self)) << 16
        }
        nonmutating set {
            base.storeBytes(of: UInt8(truncatingIfNeeded: newValue), toByteOffset: 1, as: UInt8.self)
            base.storeBytes(of: UInt8(truncatingIfNeeded: newValue >> 8), toByteOffset: 2, as: UInt8.self)
            base.storeBytes(of: UInt8(truncatingIfNeeded: newValue >> 16), toByteOffset: 3, as: UInt8.self)
        }
    }

    @inlinable @inline(__always)
    package var flags: UInt8 {
        get { base.load(as: UInt8.self) }
        nonmutating set { base.storeBytes(of: newValue, as: UInt8.self) }
    }

    @inlinable @inline(__always)
    package var hasExpiry: Bool { flags & Self.hasExpiryFlag != 0 }

    /// Whether the entry has the 8-byte expiry field (it has a TTL, or it is a large entry).
    @inlinable @inline(__always)
    package var hasExpiryField: Bool { flags & Self.expiryFieldFlags != 0 }

    /// The offsets of the parts of this entry: (key length, value length, offset of expiry or key).
    @inlinable @inline(__always)
    var layout: (keyCount: Int, valueCount: Int, afterLengths: Int) {
        var offset = Self.headerSize
        let keyCount = Self.readVarint(base, &offset)
        let valueCount = Self.readVarint(base, &offset)
        return (keyCount, valueCount, offset)
    }

    @inlinable @inline(__always)
    package var key: UnsafeRawBufferPointer {
        let l = layout
        let start = l.afterLengths + (hasExpiryField ? 8 : 0)
        return UnsafeRawBufferPointer(start: base + start, count: l.keyCount)
    }

    @inlinable @inline(__always)
    package var value: UnsafeRawBufferPointer {
        let l = layout
        let start = l.afterLengths + (hasExpiryField ? 8 : 0) + l.keyCount
        return UnsafeRawBufferPointer(start: base + start, count: l.valueCount)
    }

    /// The absolute expiry time in milliseconds, or nil for a key without TTL.
    @inlinable @inline(__always)
    package var expiry: Int64? {
        guard hasExpiry else { return nil }
        return base.loadUnaligned(fromByteOffset: layout.afterLengths, as: Int64.self)
    }

    /// Whether the key's time is up at `now`: Redis treats a key as expired only once `now` is past its
    /// expiry time (`now > when`), so the key is still readable during its expiry millisecond.
    @inlinable @inline(__always)
    package func isExpired(at now: Int64) -> Bool {
        guard hasExpiry, let expiry else { return false }
        return expiry < now
    }

    /// Overwrites the expiry of an entry that already has one.
    @inlinable @inline(__always)
    package func updateExpiry(_ milliseconds: Int64) {
        precondition(hasExpiry)
        base.storeBytes(of: milliseconds, toByteOffset: layout.afterLengths, as: Int64.self)
    }

    /// Gives a large entry (one with ``expirySlotFlag``) a TTL, or removes it, in place. Returns false,
    /// changing nothing, for any other entry: a small one moves to the other arena (see ``EntryMemory``).
    @inlinable
    package func setExpiryInPlace(_ milliseconds: Int64?) -> Bool {
        guard flags & Self.expirySlotFlag != 0 else { return false }
        if let milliseconds {
            base.storeBytes(of: milliseconds, toByteOffset: layout.afterLengths, as: Int64.self)
            flags = flags | Self.hasExpiryFlag
        } else {
            base.storeBytes(of: Int64(0), toByteOffset: layout.afterLengths, as: Int64.self)
            flags = flags & ~Self.hasExpiryFlag
        }
        return true
    }

    @inlinable @inline(__always)
    package func keyEquals(_ other: UnsafeRawBufferPointer) -> Bool {
        let k = key
        guard k.count == other.count else { return false }
        if k.count == 0 { return true }
        return memcmp(k.baseAddress!, other.baseAddress!, k.count) == 0
    }

    /// Bytes this entry occupies in the heap (the allocator's size class).
    @inlinable
    package var allocatedSize: Int {
        EntryMemory.allocatedSize(base)
    }

    // MARK: creating and freeing

    @inlinable
    static func varintSize(_ value: Int) -> Int {
        var v = UInt(value)
        var n = 1
        while v >= 0x80 {
            v >>= 7
            n += 1
        }
        return n
    }

    @inlinable @inline(__always)
    static func writeVarint(_ value: Int, _ base: UnsafeMutableRawPointer, _ offset: inout Int) {
        var v = UInt(value)
        while v >= 0x80 {
            base.storeBytes(of: UInt8(truncatingIfNeeded: v) | 0x80, toByteOffset: offset, as: UInt8.self)
            v >>= 7
            offset += 1
        }
        base.storeBytes(of: UInt8(truncatingIfNeeded: v), toByteOffset: offset, as: UInt8.self)
        offset += 1
    }

    @inlinable @inline(__always)
    static func readVarint(_ base: UnsafeRawPointer, _ offset: inout Int) -> Int {
        var byte = base.load(fromByteOffset: offset, as: UInt8.self)
        offset += 1
        if byte < 0x80 { return Int(byte) }
        var result = UInt(byte & 0x7F)
        var shift: UInt = 7
        repeat {
            byte = base.load(fromByteOffset: offset, as: UInt8.self)
            offset += 1
            result |= UInt(byte & 0x7F) << shift
            shift += 7
        } while byte >= 0x80
        return Int(result)
    }

    /// The block size for a key, a value of `valueCount` bytes and, when `hasExpiry`, the expiry field
    /// (which entries of ``expiryFieldThreshold`` bytes or more have in any case).
    @inlinable
    static func size(keyCount: Int, valueCount: Int, hasExpiry: Bool) -> Int {
        let bare = headerSize + varintSize(keyCount) + varintSize(valueCount) + keyCount + valueCount
        return hasExpiry || bare + 8 >= expiryFieldThreshold ? bare + 8 : bare
    }

    /// Allocates an entry whose value bytes are left for the caller to fill (through ``mutableValue``).
    /// `reserve` asks for a block of at least that many bytes, so that the value can grow in place later
    /// (``growValueInPlace(to:)``). Returns nil when memory is exhausted.
    @inlinable
    package static func allocate(
        key: UnsafeRawBufferPointer,
        valueCount: Int,
        expiry: Int64?,
        reserve: Int = 0
    ) -> Entry? {
        let total = size(keyCount: key.count, valueCount: valueCount, hasExpiry: expiry != nil)
        let block = max(total, reserve)
        guard let base = EntryMemory.allocate(block, volatile: expiry != nil) else { return nil }
        // A block that is, or may grow to be, large keeps the field (a value grown within it keeps its place).
        let field = expiry != nil || block >= expiryFieldThreshold
        base.storeBytes(
            of: (expiry != nil ? hasExpiryFlag : 0) | (block >= expiryFieldThreshold ? expirySlotFlag : 0),
            as: UInt8.self)
        Entry(base).access = 0
        var offset = headerSize
        writeVarint(key.count, base, &offset)
        writeVarint(valueCount, base, &offset)
        if field {
            base.storeBytes(of: expiry ?? 0, toByteOffset: offset, as: Int64.self)
            offset += 8
        }
        if key.count > 0 { (base + offset).copyMemory(from: key.baseAddress!, byteCount: key.count) }
        return Entry(base)
    }

    /// Allocates an entry holding copies of `key` and `value`.
    @inlinable
    package static func make(
        key: UnsafeRawBufferPointer,
        value: UnsafeRawBufferPointer,
        expiry: Int64?
    ) -> Entry? {
        guard let entry = allocate(key: key, valueCount: value.count, expiry: expiry) else { return nil }
        if value.count > 0 {
            entry.mutableValue.baseAddress!.copyMemory(from: value.baseAddress!, byteCount: value.count)
        }
        return entry
    }

    /// Lengthens the value to `count` bytes within the entry's block, if the block has room and the value's
    /// length field keeps its width; the bytes past the old end are left for the caller to fill. Returns
    /// false, changing nothing, otherwise.
    @inlinable
    package func growValueInPlace(to count: Int) -> Bool {
        var offset = Self.headerSize
        let keyCount = Self.readVarint(base, &offset)
        let lengthOffset = offset
        let valueCount = Self.readVarint(base, &offset)
        guard count >= valueCount, Self.varintSize(count) == Self.varintSize(valueCount),
            Self.size(keyCount: keyCount, valueCount: count, hasExpiry: hasExpiryField) <= allocatedSize
        else { return false }
        offset = lengthOffset
        Self.writeVarint(count, base, &offset)
        return true
    }

    /// The value bytes, writable (only while the entry is being built or rewritten under the lock).
    @inlinable @inline(__always)
    package var mutableValue: UnsafeMutableRawBufferPointer {
        UnsafeMutableRawBufferPointer(mutating: value)
    }

    @inlinable
    package func deallocate() {
        let flags = self.flags
        if flags & Self.expirySlotFlag != 0 {
            // It may have gained or lost its TTL since it was allocated: jemalloc finds its arena itself.
            EntryMemory.freeUncached(base)
        } else {
            EntryMemory.free(base, volatile: flags & Self.hasExpiryFlag != 0)
        }
    }
}
