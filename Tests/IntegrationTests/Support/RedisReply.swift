import CHiredis

/// A RESP2 reply as a client sees it, decoded by hiredis.
enum RedisReply: Equatable, Sendable, CustomStringConvertible {
    case status(String)
    case error(String)
    case integer(Int64)
    case bulk([UInt8])
    case null
    case array([RedisReply])

    static func bulk(_ text: String) -> RedisReply { .bulk(Array(text.utf8)) }
    static let ok = RedisReply.status("OK")

    /// Copies a hiredis reply tree (the caller still owns and frees it).
    init(_ reply: UnsafePointer<redisReply>) {
        let r = reply.pointee
        func bytes() -> [UInt8] {
            guard let str = r.str, r.len > 0 else { return [] }
            return Array(UnsafeRawBufferPointer(start: str, count: r.len))
        }
        switch r.type {
        case REDIS_REPLY_STATUS: self = .status(String(decoding: bytes(), as: UTF8.self))
        case REDIS_REPLY_ERROR: self = .error(String(decoding: bytes(), as: UTF8.self))
        case REDIS_REPLY_INTEGER: self = .integer(r.integer)
        case REDIS_REPLY_STRING: self = .bulk(bytes())
        case REDIS_REPLY_NIL: self = .null
        case REDIS_REPLY_ARRAY:
            self = .array((0..<r.elements).map { RedisReply(UnsafePointer(r.element[$0]!)) })
        default: self = .error("<hiredis reply type \(r.type)>")
        }
    }

    /// The payload of a bulk string as text, if this is one.
    var text: String? {
        if case .bulk(let bytes) = self { return String(decoding: bytes, as: UTF8.self) }
        return nil
    }

    var description: String {
        switch self {
        case .status(let s): return "+\(s)"
        case .error(let s): return "-\(s)"
        case .integer(let i): return ":\(i)"
        case .bulk(let b): return String(decoding: b, as: UTF8.self).debugDescription
        case .null: return "(nil)"
        case .array(let items): return "[" + items.map(\.description).joined(separator: ", ") + "]"
        }
    }
}

/// "#index: got X, expected Y" for every reply that differs from the expected one (and for a count mismatch).
func mismatches(_ replies: [RedisReply], _ expected: [RedisReply]) -> [String] {
    var found = zip(replies, expected).enumerated().compactMap { index, pair in
        pair.0 == pair.1 ? nil : "#\(index): got \(pair.0), expected \(pair.1)"
    }
    if replies.count != expected.count { found.append("got \(replies.count) replies, expected \(expected.count)") }
    return found
}
