import CacheCore
import NIOCore
import RESP

/// Bitmaps, which are strings: SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP. Bit 0 is the most significant bit of
/// the first byte, as in Redis.
enum BitCommands {
    static let badOffset: StaticString = "ERR bit offset is not an integer or out of range"

    /// The bit offset in argument `index`: a decimal from 0 whose byte lies within `proto-max-bulk-len`.
    private static func offset(_ c: inout CommandContext, _ index: Int) -> Int? {
        guard let offset = RESPInteger.parse(c.arguments[index]), offset >= 0,
            offset >> 3 < c.server.config.protoMaxBulkLength
        else {
            c.error(badOffset)
            return nil
        }
        return offset
    }

    @inline(__always)
    private static func bit(_ bytes: UnsafeRawBufferPointer, _ position: Int) -> Bool {
        bytes[position >> 3] & (0x80 >> UInt8(position & 7)) != 0
    }

    /// SETBIT key offset 0|1: the bit's previous value. The value grows with zero bytes to reach the offset.
    static func setbit(_ c: inout CommandContext) {
        guard let offset = offset(&c, 2) else { return }
        guard let on = RESPInteger.parse(c.arguments[3]), on == 0 || on == 1 else {
            return c.error("ERR bit is not an integer or out of range")
        }
        let key = c.arguments[1]
        let byte = offset >> 3
        let mask: UInt8 = 0x80 >> UInt8(offset & 7)
        c.withKeyForWrite(1) { c, shard, hash, existing in
            var grew = false
            let value: UnsafeMutableRawBufferPointer
            if let index = existing {
                let count = shard.entry(at: index).value.count
                if byte < count {
                    shard.noteAccess(index, now: c.now)
                    value = shard.entry(at: index).mutableValue
                } else {
                    guard let grown = shard.growValue(at: index, hash: hash, to: byte + 1) else {
                        return c.error(ReplyError.outOfMemory)
                    }
                    grown.baseAddress!.advanced(by: count).initializeMemory(as: UInt8.self, repeating: 0, count: byte + 1 - count)
                    value = grown
                    grew = true
                }
                // As Redis: a bitmap written by SETBIT is a `raw` string.
                shard.entry(at: index).flags |= Entry.modifiedInPlaceFlag
            } else {
                let stored = shard.insertValue(key, hash: hash, count: byte + 1) { out in
                    out.baseAddress!.initializeMemory(as: UInt8.self, repeating: 0, count: out.count)
                }
                guard stored, let index = shard.find(key, hash: hash) else { return c.error(ReplyError.outOfMemory) }
                shard.entry(at: index).flags |= Entry.modifiedInPlaceFlag
                value = shard.entry(at: index).mutableValue
                grew = true
                c.keyCreated(1)
            }
            let previous = value[byte] & mask != 0
            if on == 1 { value[byte] |= mask } else { value[byte] &= ~mask }
            // As Redis: a write that changes nothing (the bit already so, no growth) is not a modification.
            if grew || previous != (on == 1) {
                if !grew { shard.countChange() }
                c.keyModified(1)
                c.notify(.string, "setbit", key: 1)
            }
            c.integer(previous ? 1 : 0)
        }
    }

    /// Reads the key in argument 1 (an access): calls `body` with its value, or answers `missing` when it does
    /// not exist.
    private static func reading(
        _ c: inout CommandContext, missing: Int, _ body: (inout CommandContext, UnsafeRawBufferPointer) -> Void
    ) {
        c.withKeyForRead(1, .access) { c, shard, index in
            guard let index else { return c.integer(missing) }
            body(&c, shard.entry(at: index).value)
        }
    }

    /// GETBIT key offset: the bit, 0 past the end or for a missing key.
    static func getbit(_ c: inout CommandContext) {
        guard let offset = offset(&c, 2) else { return }
        reading(&c, missing: 0) { c, value in
            c.integer(offset >> 3 < value.count && bit(value, offset) ? 1 : 0)
        }
    }

    /// A BITCOUNT or BITPOS range, in bits, from `start` and `end` in bytes or bits (negative: from the end),
    /// clamped to a value of `count` bytes as Redis clamps it; nil when it is empty.
    private static func bitRange(start: Int, end: Int, inBits: Bool, count: Int) -> ClosedRange<Int>? {
        let total = inBits ? count * 8 : count
        var (start, end) = (start, end)
        if start < 0 { start = total + start }
        if end < 0 { end = total + end }
        start = max(0, start)
        end = max(0, end)
        if end >= total { end = total - 1 }
        guard start <= end else { return nil }
        return inBits ? start...end : start * 8...end * 8 + 7
    }

    /// Argument `index` as BYTE or BIT: whether it is BIT; nil (after replying) for anything else.
    private static func unit(_ c: inout CommandContext, _ index: Int) -> Bool? {
        if c.arguments.matches(index, "bit") { return true }
        if c.arguments.matches(index, "byte") { return false }
        c.error(ReplyError.syntax)
        return nil
    }

    /// BITCOUNT key [start end [BYTE|BIT]]: the number of set bits.
    static func bitcount(_ c: inout CommandContext) {
        reading(&c, missing: 0) { c, value in count(&c, value) }
    }

    private static func count(_ c: inout CommandContext, _ value: UnsafeRawBufferPointer) {
        let a = c.arguments
        var range: ClosedRange<Int>?
        if a.count == 4 || a.count == 5 {
            guard let start = c.integerArgument(2), let end = c.integerArgument(3) else { return }
            // As Redis: a reversed range of negative indices is empty before the unit is even read.
            if start < 0 && end < 0 && start > end { return c.integer(0) }
            var inBits = false
            if a.count == 5 {
                guard let unit = unit(&c, 4) else { return }
                inBits = unit
            }
            range = bitRange(start: start, end: end, inBits: inBits, count: value.count)
        } else if a.count == 2 {
            range = value.isEmpty ? nil : 0...value.count * 8 - 1
        } else {
            return c.error(ReplyError.syntax)
        }
        guard let range else { return c.integer(0) }
        c.integer(countOnes(value, range))
    }

    /// Set bits of `value` within `range` (in bits).
    private static func countOnes(_ value: UnsafeRawBufferPointer, _ range: ClosedRange<Int>) -> Int {
        var total = 0
        var i = range.lowerBound
        while i <= range.upperBound && i & 7 != 0 {
            if bit(value, i) { total += 1 }
            i += 1
        }
        var byte = i >> 3
        let lastWhole = (range.upperBound + 1) >> 3  // bytes before this one are wholly inside
        while byte + 8 <= lastWhole {
            total += value.loadUnaligned(fromByteOffset: byte, as: UInt64.self).nonzeroBitCount
            byte += 8
        }
        while byte < lastWhole {
            total += value[byte].nonzeroBitCount
            byte += 1
        }
        i = max(i, byte * 8)
        while i <= range.upperBound {
            if bit(value, i) { total += 1 }
            i += 1
        }
        return total
    }

    /// BITPOS key 0|1 [start [end [BYTE|BIT]]]: the first bit with that value, or -1. Looking for 0 without an
    /// end, a value of all ones answers the first bit past it (the string is taken as padded with zeros).
    static func bitpos(_ c: inout CommandContext) {
        guard let wanted = c.integerArgument(2) else { return }
        guard wanted == 0 || wanted == 1 else { return c.error("ERR The bit argument must be 1 or 0.") }
        let target = wanted == 1
        // A missing key is an endless run of zeros.
        reading(&c, missing: target ? -1 : 0) { c, value in position(&c, value, target) }
    }

    private static func position(_ c: inout CommandContext, _ value: UnsafeRawBufferPointer, _ target: Bool) {
        let a = c.arguments
        var range: ClosedRange<Int>?
        var endGiven = false
        if a.count >= 4 && a.count <= 6 {
            guard let start = c.integerArgument(3) else { return }
            var inBits = false
            if a.count == 6 {
                guard let unit = unit(&c, 5) else { return }
                inBits = unit
            }
            var end = inBits ? value.count * 8 - 1 : value.count - 1
            if a.count >= 5 {
                guard let given = c.integerArgument(4) else { return }
                end = given
                endGiven = true
            }
            range = bitRange(start: start, end: end, inBits: inBits, count: value.count)
        } else if a.count == 3 {
            range = value.isEmpty ? nil : 0...value.count * 8 - 1
        } else {
            return c.error(ReplyError.syntax)
        }
        guard let range else { return c.integer(-1) }
        if let position = firstBit(value, target, range) { return c.integer(position) }
        c.integer(!target && !endGiven ? range.upperBound + 1 : -1)
    }

    /// The first bit of `value` within `range` equal to `target`.
    private static func firstBit(_ value: UnsafeRawBufferPointer, _ target: Bool, _ range: ClosedRange<Int>) -> Int? {
        var i = range.lowerBound
        while i <= range.upperBound && i & 7 != 0 {
            if bit(value, i) == target { return i }
            i += 1
        }
        let skip: UInt8 = target ? 0x00 : 0xFF
        while i + 7 <= range.upperBound {
            let byte = value[i >> 3]
            if byte != skip { return i + (target ? byte : ~byte).leadingZeroBitCount }
            i += 8
        }
        while i <= range.upperBound {
            if bit(value, i) == target { return i }
            i += 1
        }
        return nil
    }

    /// BITOP AND|OR|XOR|NOT destkey key [key ...]: stores the result (as long as the longest source, missing
    /// keys and short values padded with zero bytes) and answers its length; an empty result deletes destkey.
    static func bitop(_ c: inout CommandContext) {
        let a = c.arguments
        enum Operation { case and, or, xor, not }
        let operation: Operation
        if a.matches(1, "and") { operation = .and }
        else if a.matches(1, "or") { operation = .or }
        else if a.matches(1, "xor") { operation = .xor }
        else if a.matches(1, "not") { operation = .not }
        else { return c.error(ReplyError.syntax) }
        if operation == .not && a.count != 4 {
            return c.error("ERR BITOP NOT must be called with a single source key.")
        }
        let db = c.database
        var shards = ShardSet()
        for i in 2..<a.count { shards.insert(Database.shardIndex(for: c.hash(i))) }
        // Locked together, so the result is of one moment of the sources.
        shards.lock(in: db)
        defer { shards.unlock(in: db) }
        var sources: [UnsafeRawBufferPointer?] = []
        sources.reserveCapacity(a.count - 3)
        var length = 0
        for i in 3..<a.count {
            let hash = c.hash(i)
            let shard = db.shard(for: hash)
            if let index = c.lookUpForRead(i, in: shard, hash: hash, .access) {
                let value = shard.entry(at: index).value
                sources.append(value)
                length = max(length, value.count)
            } else {
                sources.append(nil)
            }
        }
        // Looked up last: looking up a source can expire it and move the slots of its shard (the sources' bytes
        // stay where they are: entries do not move with their slots).
        let destinationHash = c.hash(2)
        let destinationShard = db.shard(for: destinationHash)
        let existing = c.lookUpForWrite(2, in: destinationShard, hash: destinationHash)
        guard length > 0 else {
            if let existing {
                destinationShard.remove(at: existing)
                c.keyModified(2)
                c.notify(.generic, "del", key: 2)
            }
            return c.integer(0)
        }
        // Built apart from the sources: the destination may be one of them.
        var result = [UInt8](repeating: 0, count: length)
        result.withUnsafeMutableBytes { out in
            // Eight bytes at a time: the shards stay locked while this runs.
            func combine(_ bytes: UnsafeRawBufferPointer, _ op: (UInt64, UInt64) -> UInt64) {
                var j = 0
                while j + 8 <= bytes.count {
                    let word = op(out.loadUnaligned(fromByteOffset: j, as: UInt64.self), bytes.loadUnaligned(fromByteOffset: j, as: UInt64.self))
                    out.storeBytes(of: word, toByteOffset: j, as: UInt64.self)
                    j += 8
                }
                while j < bytes.count {
                    out[j] = UInt8(truncatingIfNeeded: op(UInt64(out[j]), UInt64(bytes[j])))
                    j += 1
                }
            }
            let empty = UnsafeRawBufferPointer(start: nil, count: 0)
            switch operation {
            case .not:
                combine(sources[0] ?? empty) { _, source in ~source }
                // Past the source's end (none here: the result is as long as the source).
            case .and:
                // A missing or shorter source is zeros: the result is zero from the shortest source's end on.
                let shortest = sources.map { $0?.count ?? 0 }.min() ?? 0
                guard shortest > 0 else { break }
                out.baseAddress!.copyMemory(from: sources[0]!.baseAddress!, byteCount: shortest)
                for source in sources.dropFirst() {
                    combine(UnsafeRawBufferPointer(rebasing: source![..<shortest])) { $0 & $1 }
                }
            case .or:
                for source in sources { combine(source ?? empty) { $0 | $1 } }
            case .xor:
                for source in sources { combine(source ?? empty) { $0 ^ $1 } }
            }
        }
        let stored = result.withUnsafeBytes { bytes in
            destinationShard.setValue(a[2], hash: destinationHash, value: bytes, ttl: .clear, existing: existing)
        }
        guard stored else { return c.error(ReplyError.outOfMemory) }
        destinationShard.adopt(a[2], hash: destinationHash, flags: Entry.modifiedInPlaceFlag)
        c.keyModified(2)
        if existing == nil { c.keyCreated(2) }
        c.notify(.string, "set", key: 2)
        c.integer(length)
    }
}
