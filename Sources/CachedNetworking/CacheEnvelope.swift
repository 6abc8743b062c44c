#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import HTTPCaching
import HTTPTypes
import NIOCore

/// What is stored under a key: a response, or the index that lists a URL's `Vary` field names.
///
/// The format is versioned and self-describing, all integers big-endian:
///
/// ```
/// magic "CNHC" · format version (u8) · record kind (u8: 1 response, 2 or 3 vary index, 4 partial response,
///             5 response marked stale) · record · checksum (u64)
/// response:   stored-at, request time, response time (i64 ms since 1970) · lifetime override (i64 s, -1 none)
///             · method (str16) · URL (str32) · Vary'd values (u16 count; name str16, present u8, value str32)
///             · status (u16) · reason (str16) · header fields (u32 count; name str16, value str32)
///             · kind 4 only: complete length (u64), ranges held (u16 count; first u64, last u64), in order
///             · body (u32 + bytes; for kind 4, the bytes of the ranges held, in order)
/// vary index: nonce (u64) · method (str16) · URL (str32) · field names (u16 count; str16)
///             · kind 3 only: variants, least recently used first (u16 count; hash u64, last used i64 s since 1970)
/// ```
///
/// Kind 4 is a partial response (RFC 9111 §3.3, ``StoredParts``); a complete one is still written as kind 1, so
/// entries written before partial responses were stored read as they did. Kind 5 is kind 1 for a response the
/// cache considers stale whatever its lifetime (``StoredEntry/markedStale``, RFC 9111 §4.3.5); an earlier version
/// reads it as corrupt, and removes it (what it did itself to such a response).
///
/// Kind 3, the one written, is kind 2 with the list of the URL's variants that bounds their number
/// (``VaryIndex/recordUse(of:at:limit:granularity:)``); kind 2, written by earlier versions, is still read, with
/// no variants listed.
///
/// The checksum covers every byte before it: ``WordChecksum`` in version 2 (the one written), bytewise
/// FNV-1a-64 in version 1 (still read, so that entries written before stay hits).
///
/// Decoding checks everything (magic, version, kind, lengths, checksum, no trailing bytes) and answers nil for
/// anything else, so a corrupt or foreign value reads as a miss.
enum CacheEnvelope: Sendable, Equatable {
    case response(StoredEntry)
    case varyIndex(VaryIndex)

    static let magic: [UInt8] = Array("CNHC".utf8)
    static let formatVersion: UInt8 = 2

    /// The checksum of `bytes` in format `version` (1 or 2).
    static func checksum(_ bytes: UnsafeRawBufferPointer, version: UInt8) -> UInt64 {
        guard version == 1 else { return WordChecksum.checksum(bytes) }
        var hasher = FNV1a64()
        hasher.combine(bytes)
        return hasher.value
    }

    struct VaryIndex: Sendable, Equatable {
        var nonce: UInt64
        var method: String
        var uri: String
        var fieldNames: [String]
        /// The variants stored under this index, least recently used first.
        var variants: [VariantUse] = []
    }

    /// A variant of a `Vary` index: the hash its key ends with, and when it was last stored or served (seconds
    /// since 1970, by the cache's clock).
    struct VariantUse: Sendable, Equatable {
        var hash: UInt64
        var lastUsed: Int64
    }

    func encoded() -> ByteBuffer {
        var buffer = ByteBufferAllocator().buffer(capacity: estimatedSize)
        buffer.writeBytes(Self.magic)
        buffer.writeInteger(Self.formatVersion)
        switch self {
        case .response(let entry):
            buffer.writeInteger(UInt8(entry.parts != nil ? 4 : entry.markedStale ? 5 : 1))
            buffer.writeInteger(Self.milliseconds(entry.storedAt))
            buffer.writeInteger(Self.milliseconds(entry.requestTime))
            buffer.writeInteger(Self.milliseconds(entry.responseTime))
            buffer.writeInteger(Int64(entry.lifetimeOverride ?? -1))
            buffer.writeString16(entry.method)
            buffer.writeString32(entry.uri)
            buffer.writeInteger(UInt16(entry.varyValues.count))
            for (name, value) in entry.varyValues {
                buffer.writeString16(name)
                buffer.writeInteger(UInt8(value == nil ? 0 : 1))
                buffer.writeString32(value ?? "")
            }
            buffer.writeInteger(UInt16(entry.response.status.code))
            buffer.writeString16(entry.response.status.reasonPhrase)
            buffer.writeInteger(UInt32(entry.response.headerFields.count))
            for field in entry.response.headerFields {
                buffer.writeString16(field.name.rawName)
                buffer.writeString32(field.value)
            }
            if let parts = entry.parts {
                buffer.writeInteger(UInt64(parts.completeLength))
                buffer.writeInteger(UInt16(parts.ranges.ranges.count))
                for range in parts.ranges.ranges {
                    buffer.writeInteger(UInt64(range.lowerBound))
                    buffer.writeInteger(UInt64(range.upperBound))
                }
            }
            buffer.writeInteger(UInt32(entry.body.readableBytes))
            var body = entry.body
            buffer.writeBuffer(&body)
        case .varyIndex(let index):
            buffer.writeInteger(UInt8(3))
            buffer.writeInteger(index.nonce)
            buffer.writeString16(index.method)
            buffer.writeString32(index.uri)
            buffer.writeInteger(UInt16(index.fieldNames.count))
            for name in index.fieldNames { buffer.writeString16(name) }
            let variants = index.variants.suffix(Int(UInt16.max))
            buffer.writeInteger(UInt16(variants.count))
            for variant in variants {
                buffer.writeInteger(variant.hash)
                buffer.writeInteger(variant.lastUsed)
            }
        }
        let checksum = buffer.withUnsafeReadableBytes { Self.checksum($0, version: Self.formatVersion) }
        buffer.writeInteger(checksum)
        return buffer
    }

    /// About the encoded size, so that encoding allocates once: the body and the header fields' bytes plus their
    /// length prefixes.
    private var estimatedSize: Int {
        guard case .response(let entry) = self else {
            guard case .varyIndex(let index) = self else { return 256 }
            return 256 + index.uri.utf8.count + 16 * index.variants.count
        }
        var size = 128 + entry.method.utf8.count + entry.uri.utf8.count + entry.body.readableBytes
            + 16 * (entry.parts?.ranges.ranges.count ?? 0)
        for (name, value) in entry.varyValues { size += 7 + name.utf8.count + (value?.utf8.count ?? 0) }
        for field in entry.response.headerFields { size += 6 + field.name.rawName.utf8.count + field.value.utf8.count }
        return size
    }

    static func decode(_ input: ByteBuffer) -> CacheEnvelope? {
        guard input.readableBytes >= magic.count + 2 + 8,
            let version = input.getInteger(at: input.readerIndex + magic.count, as: UInt8.self),
            version == formatVersion || version == 1
        else { return nil }
        let checksum = input.withUnsafeReadableBytes {
            Self.checksum(UnsafeRawBufferPointer(rebasing: $0.dropLast(8)), version: version)
        }
        guard input.getInteger(at: input.writerIndex - 8, as: UInt64.self) == checksum else { return nil }
        var buffer = input.getSlice(at: input.readerIndex, length: input.readableBytes - 8) ?? ByteBuffer()
        guard buffer.readBytes(length: magic.count) == magic,
            buffer.readInteger(as: UInt8.self) == version,
            let kind = buffer.readInteger(as: UInt8.self)
        else { return nil }
        let decoded: CacheEnvelope?
        switch kind {
        case 1: decoded = decodeResponse(&buffer, partial: false).map(CacheEnvelope.response)
        case 5:
            decoded = decodeResponse(&buffer, partial: false).map { entry in
                var marked = entry
                marked.markedStale = true
                return CacheEnvelope.response(marked)
            }
        case 4: decoded = decodeResponse(&buffer, partial: true).map(CacheEnvelope.response)
        case 2: decoded = decodeVaryIndex(&buffer, listsVariants: false).map(CacheEnvelope.varyIndex)
        case 3: decoded = decodeVaryIndex(&buffer, listsVariants: true).map(CacheEnvelope.varyIndex)
        default: return nil
        }
        guard buffer.readableBytes == 0 else { return nil }
        return decoded
    }

    private static func decodeResponse(_ buffer: inout ByteBuffer, partial: Bool) -> StoredEntry? {
        guard let storedAt = buffer.readInteger(as: Int64.self),
            let requestTime = buffer.readInteger(as: Int64.self),
            let responseTime = buffer.readInteger(as: Int64.self),
            let override = buffer.readInteger(as: Int64.self),
            let method = buffer.readString16(),
            let uri = buffer.readString32(),
            let varyCount = buffer.readInteger(as: UInt16.self)
        else { return nil }
        var varyValues: [(String, String?)] = []
        for _ in 0..<varyCount {
            guard let name = buffer.readString16(), let present = buffer.readInteger(as: UInt8.self), present <= 1,
                let value = buffer.readString32()
            else { return nil }
            varyValues.append((name, present == 1 ? value : nil))
        }
        guard let code = buffer.readInteger(as: UInt16.self), (100...999).contains(code),
            let reason = buffer.readString16(),
            let fieldCount = buffer.readInteger(as: UInt32.self),
            Int(fieldCount) <= buffer.readableBytes / 6
        else { return nil }
        var fields = HTTPFields()
        for _ in 0..<fieldCount {
            guard let rawName = buffer.readString16(), let name = HTTPField.Name(rawName),
                let value = buffer.readString32()
            else { return nil }
            fields.append(HTTPField(name: name, value: value))
        }
        var parts: StoredParts? = nil
        if partial {
            guard let decoded = decodeParts(&buffer) else { return nil }
            parts = decoded
        }
        guard let bodyLength = buffer.readInteger(as: UInt32.self), let body = buffer.readSlice(length: Int(bodyLength)),
            parts.map({ $0.ranges.byteCount == body.readableBytes }) ?? true
        else { return nil }
        return StoredEntry(
            method: method,
            uri: uri,
            varyValues: varyValues,
            response: HTTPResponse(status: .init(code: Int(code), reasonPhrase: reason), headerFields: fields),
            body: body,
            storedAt: date(storedAt),
            requestTime: date(requestTime),
            responseTime: date(responseTime),
            lifetimeOverride: override >= 0 ? Int(override) : nil,
            parts: parts
        )
    }

    /// The complete length and the ranges of a partial response: the ranges in order, disjoint and not touching
    /// (as ``ByteRangeSet`` keeps them), within the complete length.
    private static func decodeParts(_ buffer: inout ByteBuffer) -> StoredParts? {
        guard let length = buffer.readInteger(as: UInt64.self), length > 0, length <= UInt64(Int.max),
            let count = buffer.readInteger(as: UInt16.self), count > 0, Int(count) * 16 <= buffer.readableBytes
        else { return nil }
        var ranges: [ClosedRange<Int>] = []
        ranges.reserveCapacity(Int(count))
        for _ in 0..<count {
            guard let first = buffer.readInteger(as: UInt64.self), let last = buffer.readInteger(as: UInt64.self),
                first <= last, last < length, ranges.last.map({ UInt64($0.upperBound) + 1 < first }) ?? true
            else { return nil }
            ranges.append(Int(first)...Int(last))
        }
        return StoredParts(completeLength: Int(length), ranges: ByteRangeSet(ranges))
    }

    private static func decodeVaryIndex(_ buffer: inout ByteBuffer, listsVariants: Bool) -> VaryIndex? {
        guard let nonce = buffer.readInteger(as: UInt64.self),
            let method = buffer.readString16(),
            let uri = buffer.readString32(),
            let count = buffer.readInteger(as: UInt16.self)
        else { return nil }
        var names: [String] = []
        for _ in 0..<count {
            guard let name = buffer.readString16() else { return nil }
            names.append(name)
        }
        var index = VaryIndex(nonce: nonce, method: method, uri: uri, fieldNames: names)
        guard listsVariants else { return index }
        guard let variantCount = buffer.readInteger(as: UInt16.self), Int(variantCount) * 16 <= buffer.readableBytes
        else { return nil }
        index.variants.reserveCapacity(Int(variantCount))
        for _ in 0..<variantCount {
            guard let hash = buffer.readInteger(as: UInt64.self), let lastUsed = buffer.readInteger(as: Int64.self)
            else { return nil }
            index.variants.append(VariantUse(hash: hash, lastUsed: lastUsed))
        }
        return index
    }

    private static func milliseconds(_ date: Date) -> Int64 {
        Int64((date.timeIntervalSince1970 * 1_000).rounded())
    }

    private static func date(_ milliseconds: Int64) -> Date {
        Date(timeIntervalSince1970: Double(milliseconds) / 1_000)
    }
}

extension CacheEnvelope.VaryIndex {
    /// Records that the variant whose key ends with `hash` was stored or served at `seconds` (since 1970), keeping
    /// at most `limit` variants (at least one): a variant not listed is added, and the least recently used ones
    /// beyond the limit are dropped from the list; a listed one is moved to the most recent end when its last use
    /// is `granularity` seconds old or more, so that a variant served again and again rewrites the index at most
    /// once per `granularity`.
    /// - Returns: whether the index changed (and should be written), and the hashes of the variants dropped,
    ///   least recently used first (their entries should be removed).
    mutating func recordUse(of hash: UInt64, at seconds: Int64, limit: Int, granularity: Int64) -> (changed: Bool, evicted: [UInt64]) {
        if let position = variants.firstIndex(where: { $0.hash == hash }) {
            // The list's order is the recency; `lastUsed` only spaces the rewrites. A stored time from a clock far
            // off (or a damaged record) must neither trap nor freeze the order: an overflow counts as long ago.
            let (age, overflow) = seconds.subtractingReportingOverflow(variants[position].lastUsed)
            guard overflow || age >= granularity || age < 0 else { return (false, []) }
            variants.remove(at: position)
            variants.append(CacheEnvelope.VariantUse(hash: hash, lastUsed: seconds))
            return (true, [])
        }
        variants.append(CacheEnvelope.VariantUse(hash: hash, lastUsed: seconds))
        let excess = variants.count - max(1, limit)
        guard excess > 0 else { return (true, []) }
        let evicted = variants.prefix(excess).map(\.hash)
        variants.removeFirst(excess)
        return (true, evicted)
    }
}

/// A stored response with what the cache needs to reuse it.
struct StoredEntry: Sendable {
    /// The request method it answers.
    var method: String
    /// The normalized target URI.
    var uri: String
    /// The `Vary`'d request field values it was selected by (empty without `Vary`).
    var varyValues: [(String, String?)]
    /// Status and header fields, hop-by-hop fields removed, 304 updates merged.
    var response: HTTPResponse
    /// The content.
    var body: ByteBuffer
    /// When the body was stored (kept across 304 merges).
    var storedAt: Date
    /// When the request that produced (or last validated) the response was sent.
    var requestTime: Date
    /// When that response was received.
    var responseTime: Date
    /// A lifetime imposed by configuration, in seconds.
    var lifetimeOverride: Int?
    /// For a partial response (a `206`, RFC 9111 §3.3), the ranges `body` holds; nil for a complete response.
    var parts: StoredParts? = nil
    /// Whether the cache considers the response stale whatever its lifetime, until it is validated or replaced
    /// (a HEAD response disagreed with it, RFC 9111 §4.3.5). Complete responses only.
    var markedStale = false

    var info: StoredResponseInfo {
        StoredResponseInfo(
            response: response, requestTime: requestTime, responseTime: responseTime, lifetimeOverride: lifetimeOverride,
            markedStale: markedStale)
    }

    /// The entry's body version: its strong `ETag`, else when it was stored.
    var version: String {
        if let etag = response.headerFields[.eTag], !etag.hasPrefix("W/") { return "etag:" + etag }
        return "stored:\(Int64((storedAt.timeIntervalSince1970 * 1_000).rounded()))"
    }
}

extension StoredEntry: Equatable {
    static func == (lhs: StoredEntry, rhs: StoredEntry) -> Bool {
        lhs.method == rhs.method && lhs.uri == rhs.uri
            && lhs.varyValues.elementsEqual(rhs.varyValues, by: { $0.0 == $1.0 && $0.1 == $1.1 })
            && lhs.response == rhs.response && lhs.body == rhs.body && lhs.storedAt == rhs.storedAt
            && lhs.requestTime == rhs.requestTime && lhs.responseTime == rhs.responseTime
            && lhs.lifetimeOverride == rhs.lifetimeOverride && lhs.parts == rhs.parts
            && lhs.markedStale == rhs.markedStale
    }
}

/// What a partial stored response holds of its representation (RFC 9111 §3.3): the representation's complete
/// length and the ranges of it the entry's body carries, in order.
struct StoredParts: Sendable, Equatable {
    var completeLength: Int
    var ranges: ByteRangeSet
}

extension ByteBuffer {
    fileprivate mutating func writeString16(_ string: String) {
        let length = string.utf8.count
        guard length > Int(UInt16.max) else {
            writeInteger(UInt16(length))
            writeString(string)
            return
        }
        writeInteger(UInt16.max)
        writeBytes(string.utf8.prefix(Int(UInt16.max)))
    }

    fileprivate mutating func writeString32(_ string: String) {
        writeInteger(UInt32(string.utf8.count))
        writeString(string)
    }

    fileprivate mutating func readString16() -> String? {
        guard let length = readInteger(as: UInt16.self) else { return nil }
        return readUTF8String(length: Int(length))
    }

    fileprivate mutating func readString32() -> String? {
        guard let length = readInteger(as: UInt32.self), Int(length) <= readableBytes else { return nil }
        return readUTF8String(length: Int(length))
    }

    private mutating func readUTF8String(length: Int) -> String? {
        guard let bytes = readBytes(length: length) else { return nil }
        return String(validating: bytes, as: UTF8.self)
    }
}
