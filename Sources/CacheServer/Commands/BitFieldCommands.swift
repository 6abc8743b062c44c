import CacheCore
import RESP

/// BITFIELD and BITFIELD_RO: integers of 1 to 64 bits at any bit offset of a string, read, written and
/// incremented with Redis's overflow rules. Bits are numbered as by SETBIT: bit 0 is the most significant bit of
/// the first byte, and a field's most significant bit comes first.
enum BitFieldCommands {
    /// What to do when a SET or INCRBY does not fit its field.
    enum Overflow {
        /// Keep the low bits (two's complement for signed fields).
        case wrap
        /// Clamp to the field's minimum or maximum.
        case saturate
        /// Leave the field as it is and answer null.
        case fail
    }

    enum Kind { case get, set, incrby }

    /// One subcommand: a field (`signed`, `bits` wide, at bit `offset`) and what to do with it.
    struct Operation {
        var kind: Kind
        var signed: Bool
        var bits: Int
        var offset: Int
        var value: Int64
        var overflow: Overflow
    }

    static let badType: StaticString =
        "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is."

    /// BITFIELD key [GET type offset] [SET type offset value] [INCRBY type offset increment]
    /// [OVERFLOW WRAP|SAT|FAIL] ...: one reply per GET, SET or INCRBY.
    static func bitfield(_ c: inout CommandContext) { run(&c, readOnly: false) }

    /// BITFIELD_RO key [GET type offset ...]: the read-only form, which only takes GET.
    static func bitfieldReadOnly(_ c: inout CommandContext) { run(&c, readOnly: true) }

    private static func run(_ c: inout CommandContext, readOnly: Bool) {
        guard let operations = parse(&c) else { return }
        // One past the highest bit any SET or INCRBY writes: the value is grown to hold it before any runs.
        var bitsNeeded = 0
        for op in operations where op.kind != .get { bitsNeeded = max(bitsNeeded, op.offset + op.bits) }
        let key = c.arguments[1]
        c.withKeyShard(1) { c, shard, hash in
            guard bitsNeeded > 0 else {
                // Only GETs: a read, which a missing key answers with zeros.
                var value = UnsafeRawBufferPointer(start: nil, count: 0)
                if let index = c.lookUpForRead(1, in: shard, hash: hash, .access) { value = shard.entry(at: index).value }
                c.arrayHeader(operations.count)
                for op in operations { c.integer(Int(read(value, op))) }
                return
            }
            if readOnly { return c.error("ERR BITFIELD_RO only supports the GET subcommand") }
            let bytesNeeded = (bitsNeeded - 1) >> 3 + 1  // (bitsNeeded + 7) >> 3 without overflow near Int.max
            let value: UnsafeMutableRawBufferPointer
            var grew = false
            if let index = c.lookUpForWrite(1, in: shard, hash: hash) {
                let count = shard.entry(at: index).value.count
                if count >= bytesNeeded {
                    shard.noteAccess(index, now: c.now)
                    value = shard.entry(at: index).mutableValue
                } else {
                    guard let grown = shard.growValue(at: index, hash: hash, to: bytesNeeded) else {
                        return c.error(ReplyError.outOfMemory)
                    }
                    (grown.baseAddress! + count).initializeMemory(as: UInt8.self, repeating: 0, count: bytesNeeded - count)
                    value = grown
                    grew = true
                }
                // As Redis: a string written by BITFIELD is a `raw` string.
                shard.entry(at: index).flags |= Entry.modifiedInPlaceFlag
            } else {
                let stored = shard.insertValue(key, hash: hash, count: bytesNeeded) { out in
                    out.baseAddress!.initializeMemory(as: UInt8.self, repeating: 0, count: out.count)
                }
                guard stored, let index = shard.find(key, hash: hash) else { return c.error(ReplyError.outOfMemory) }
                shard.entry(at: index).flags |= Entry.modifiedInPlaceFlag
                value = shard.entry(at: index).mutableValue
                grew = true
                c.keyCreated(1)
            }
            c.arrayHeader(operations.count)
            // As Redis: a SET or INCRBY is a change of the key when it changed the field, or when the value was
            // created or grown for the command; one refused by FAIL is not.
            var changed = false
            for op in operations {
                let old = read(UnsafeRawBufferPointer(value), op)
                guard op.kind != .get else {
                    c.integer(Int(old))
                    continue
                }
                let wanted = op.kind == .set ? requested(op) : Int128(old) + Int128(op.value)
                guard let stored = fit(wanted, op) else {
                    c.null()
                    continue
                }
                write(value, op, stored)
                if grew || stored != old { changed = true }
                c.integer(Int(op.kind == .set ? old : stored))
            }
            guard changed else { return }
            if !grew { shard.countChange() }
            c.keyModified(1)
            c.notify(.string, "setbit", key: 1)
        }
    }

    /// The subcommands after the key, or nil after replying with the first error, as Redis reads them: all of
    /// them are checked before any runs.
    private static func parse(_ c: inout CommandContext) -> [Operation]? {
        let a = c.arguments
        var operations: [Operation] = []
        var overflow = Overflow.wrap
        var i = 2
        while i < a.count {
            let remaining = a.count - i - 1
            let kind: Kind
            if a.matches(i, "get") && remaining >= 2 {
                kind = .get
            } else if a.matches(i, "set") && remaining >= 3 {
                kind = .set
            } else if a.matches(i, "incrby") && remaining >= 3 {
                kind = .incrby
            } else if a.matches(i, "overflow") && remaining >= 1 {
                if a.matches(i + 1, "wrap") { overflow = .wrap }
                else if a.matches(i + 1, "sat") { overflow = .saturate }
                else if a.matches(i + 1, "fail") { overflow = .fail }
                else {
                    c.error("ERR Invalid OVERFLOW type specified")
                    return nil
                }
                i += 2
                continue
            } else {
                c.error(ReplyError.syntax)
                return nil
            }
            guard let (signed, bits) = fieldType(a[i + 1]) else {
                c.error(badType)
                return nil
            }
            guard let offset = offset(a[i + 2], bits: bits, limit: c.server.config.protoMaxBulkLength) else {
                c.error(BitCommands.badOffset)
                return nil
            }
            var value: Int64 = 0
            if kind != .get {
                guard let given = c.integerArgument(i + 3) else { return nil }
                value = Int64(given)
            }
            operations.append(
                Operation(kind: kind, signed: signed, bits: bits, offset: offset, value: value, overflow: overflow))
            i += kind == .get ? 3 : 4
        }
        return operations
    }

    /// A field type: `i1` to `i64` (signed) or `u1` to `u63` (unsigned), lowercase as Redis takes it.
    private static func fieldType(_ text: UnsafeRawBufferPointer) -> (signed: Bool, bits: Int)? {
        guard text.count >= 2 else { return nil }
        let signed: Bool
        switch text[0] {
        case UInt8(ascii: "i"): signed = true
        case UInt8(ascii: "u"): signed = false
        default: return nil
        }
        guard let bits = RESPInteger.parse(UnsafeRawBufferPointer(rebasing: text[1...])), bits >= 1,
            bits <= (signed ? 64 : 63)
        else { return nil }
        return (signed, bits)
    }

    /// A bit offset: a decimal, or `#n` for the n-th field of this width (n × bits); nil when it is negative,
    /// not an integer, or its byte is past `proto-max-bulk-len`.
    private static func offset(_ text: UnsafeRawBufferPointer, bits: Int, limit: Int) -> Int? {
        let fieldIndex = text.first == UInt8(ascii: "#")
        guard let number = RESPInteger.parse(fieldIndex ? UnsafeRawBufferPointer(rebasing: text[1...]) : text)
        else { return nil }
        var offset = number
        if fieldIndex {
            let (product, overflow) = number.multipliedReportingOverflow(by: bits)
            guard !overflow else { return nil }
            offset = product
        }
        guard offset >= 0, offset >> 3 < limit, offset <= Int.max - 64 else { return nil }
        return offset
    }

    /// The field `op` names in `value`, as a signed or unsigned number; bits past the value's end read as 0.
    private static func read(_ value: UnsafeRawBufferPointer, _ op: Operation) -> Int64 {
        var raw: UInt64 = 0
        for position in op.offset..<op.offset + op.bits {
            let byte = position >> 3
            let set = byte < value.count && value[byte] & (0x80 >> UInt8(position & 7)) != 0
            raw = raw << 1 | (set ? 1 : 0)
        }
        if op.signed && op.bits < 64 && raw >> (op.bits - 1) & 1 == 1 {
            raw |= ~0 << UInt64(op.bits)
        }
        return Int64(bitPattern: raw)
    }

    /// Writes the low `op.bits` bits of `field` at the field's place; the value is long enough.
    private static func write(_ value: UnsafeMutableRawBufferPointer, _ op: Operation, _ field: Int64) {
        let raw = UInt64(bitPattern: field)
        for i in 0..<op.bits {
            let position = op.offset + i
            let mask: UInt8 = 0x80 >> UInt8(position & 7)
            if raw >> UInt64(op.bits - 1 - i) & 1 == 1 {
                value[position >> 3] |= mask
            } else {
                value[position >> 3] &= ~mask
            }
        }
    }

    /// The number a SET asks for. An unsigned field takes the given 64 bits as an unsigned number, as Redis
    /// does: `SET u8 0 -1` is 2^64 - 1, too large (255 with SAT or WRAP).
    private static func requested(_ op: Operation) -> Int128 {
        op.signed ? Int128(op.value) : Int128(UInt64(bitPattern: op.value))
    }

    /// What is stored for `wanted` in the field under its overflow rule, or nil when it does not fit under FAIL.
    private static func fit(_ wanted: Int128, _ op: Operation) -> Int64? {
        let bits = op.bits
        let minimum: Int128 = op.signed ? -(Int128(1) << (bits - 1)) : 0
        let maximum: Int128 = op.signed ? (Int128(1) << (bits - 1)) - 1 : (Int128(1) << bits) - 1
        if wanted >= minimum && wanted <= maximum { return Int64(wanted) }
        // Redis takes a signed SET of a number so far below the field's minimum that `maximum - number`
        // passes 2^63 - 1 for one above its maximum (its check computes that difference in 64 bits first):
        // `OVERFLOW SAT SET i8 0 -9223372036854775808` stores 127. Clients see Redis's answer, so this is it.
        let tooLarge = wanted > maximum
            || (op.kind == .set && op.signed && bits < 64 && maximum - wanted > Int128(Int64.max))
        switch op.overflow {
        case .fail:
            return nil
        case .saturate:
            return Int64(tooLarge ? maximum : minimum)
        case .wrap:
            // The low bits of the two's complement, read back as the field reads them.
            var raw = UInt64(truncatingIfNeeded: wanted)
            if bits < 64 {
                raw &= (1 << UInt64(bits)) - 1
                if op.signed && raw >> (bits - 1) & 1 == 1 { raw |= ~0 << UInt64(bits) }
            }
            return Int64(bitPattern: raw)
        }
    }
}
