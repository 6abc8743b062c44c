import NIOCore
import RESP

/// The properties the reply decoder must have on any bytes a server sends, checked on one input.
///
/// The input is a stream of replies. It is decoded under tight and default limits, with attributes kept and
/// dropped, in one piece and in pieces (byte by byte for short inputs): each way must decode the same values
/// with the same lengths and end the same way. ``RESPValue/frameLength(in:limits:)`` must agree with the
/// decoder on every reply; every value must respect the limits; and every value, written back as RESP,
/// must decode to itself.
package enum ReplyDecoderCheck {
    static let configurations: [(limits: RESPDecodingLimits, keepsAttributes: Bool)] = [
        (RESPDecodingLimits(maxDepth: 4, maxBulkLength: 32, maxAggregateCount: 8, maxLineLength: 32), false),
        (RESPDecodingLimits(maxDepth: 4, maxBulkLength: 32, maxAggregateCount: 8, maxLineLength: 32), true),
        (RESPDecodingLimits(), false),
        (RESPDecodingLimits(), true),
    ]

    /// Limits loose enough for any value re-encoded from one that passed the configurations' limits.
    static let loose = RESPDecodingLimits(maxDepth: 1000, maxBulkLength: .max, maxAggregateCount: .max, maxLineLength: .max)

    /// Runs the checks on `input`; returns a description of the first property that does not hold.
    package static func check(_ input: UnsafeRawBufferPointer) -> String? {
        let bytes = Array(input)
        for (limits, keepsAttributes) in configurations {
            let whole = decode(bytes, limits: limits, keepsAttributes: keepsAttributes, cuts: [])
            let stride = max(1, bytes.count / 61)
            let cuts = bytes.count <= 512 ? Array(1..<max(1, bytes.count)) : Array(Swift.stride(from: stride, to: bytes.count, by: stride))
            let pieces = decode(bytes, limits: limits, keepsAttributes: keepsAttributes, cuts: cuts)
            let context = "limits \(limits), attributes kept: \(keepsAttributes)"
            guard whole.replies.count == pieces.replies.count else {
                return "\(context): \(whole.replies.count) replies in one piece, \(pieces.replies.count) in pieces"
            }
            for (i, (a, b)) in zip(whole.replies, pieces.replies).enumerated() where a.length != b.length || a.value != b.value {
                return "\(context): reply \(i) is \(a) in one piece, \(b) in pieces"
            }
            guard whole.error == pieces.error else {
                return "\(context): ended with \(String(describing: whole.error)) in one piece, \(String(describing: pieces.error)) in pieces"
            }

            var offset = 0
            for (i, reply) in whole.replies.enumerated() {
                // frameLength, which builds nothing, cuts the stream at the same places.
                let length = bytes[offset...].withUnsafeBytes { try? RESPValue.frameLength(in: $0, limits: limits) }
                guard length == reply.length else {
                    return "\(context): reply \(i) is \(reply.length) bytes to the decoder, \(String(describing: length)) to frameLength"
                }
                if let failure = checkLimits(reply.value, limits: limits, depth: 0) {
                    return "\(context): reply \(i) \(reply.value): \(failure)"
                }
                var encoded = ByteBuffer()
                encode(reply.value, into: &encoded)
                do {
                    guard let (again, againLength) = try RESPValue.decode(encoded, limits: loose, keepsAttributes: true),
                        again == reply.value, againLength == encoded.readableBytes
                    else {
                        return "\(context): reply \(i) \(reply.value) re-encoded as \(String(buffer: encoded).debugDescription) does not decode to itself"
                    }
                } catch {
                    return "\(context): reply \(i) \(reply.value) re-encoded as \(String(buffer: encoded).debugDescription): \(error)"
                }
                offset += reply.length
            }
            // Where the decoder stopped, frameLength stops too.
            let tail = bytes[offset...].withUnsafeBytes { tail in
                Result { () throws(RESPDecodingError) -> Int? in try RESPValue.frameLength(in: tail, limits: limits) }
            }
            switch (tail, whole.error) {
            case (.success(nil), nil): break
            case (.failure(let e), let d?) where e == d: break
            default: return "\(context): after \(whole.replies.count) replies frameLength gives \(tail), the decoder \(String(describing: whole.error))"
            }
        }
        return nil
    }

    struct Outcome {
        var replies: [(value: RESPValue, length: Int)] = []
        var error: RESPDecodingError?
    }

    /// Decodes replies as a client does, with the received bytes growing to each cut and then to the whole input.
    static func decode(_ bytes: [UInt8], limits: RESPDecodingLimits, keepsAttributes: Bool, cuts: [Int]) -> Outcome {
        var outcome = Outcome()
        var decoder = RESPValueDecoder(limits: limits, keepsAttributes: keepsAttributes)
        var buffer = ByteBuffer()
        var received = 0
        for end in cuts + [bytes.count] where end > received {
            buffer.writeBytes(bytes[received..<end])
            received = end
            do {
                while true {
                    let before = buffer.readerIndex
                    guard let value = try decoder.decode(buffer: &buffer) else { break }
                    outcome.replies.append((value, buffer.readerIndex - before))
                }
            } catch {
                outcome.error = error
                return outcome
            }
        }
        return outcome
    }

    /// Checks that `value` could have passed `limits` (attributes may be merged, so their count is not checked).
    static func checkLimits(_ value: RESPValue, limits: RESPDecodingLimits, depth: Int) -> String? {
        func aggregate(_ elements: [RESPValue], count: Int) -> String? {
            // An empty aggregate opens no level (as the decoder documents), so it may sit one level deeper.
            guard count == 0 || depth + 1 <= limits.maxDepth else { return "nesting deeper than \(limits.maxDepth)" }
            guard count <= limits.maxAggregateCount else { return "\(count) entries, over \(limits.maxAggregateCount)" }
            for element in elements {
                if let failure = checkLimits(element, limits: limits, depth: depth + 1) { return failure }
            }
            return nil
        }
        switch value {
        case .simpleString(let b), .simpleError(let b), .bigNumber(let b):
            return b.readableBytes <= limits.maxLineLength ? nil : "a line of \(b.readableBytes) bytes"
        case .bulkString(let b), .bulkError(let b):
            return b.readableBytes <= limits.maxBulkLength ? nil : "a bulk of \(b.readableBytes) bytes"
        case .verbatimString(_, let text):
            return text.readableBytes + 4 <= limits.maxBulkLength ? nil : "a verbatim string of \(text.readableBytes) bytes"
        case .integer, .nullBulkString, .nullArray, .null, .boolean, .double:
            return nil
        case .array(let elements), .set(let elements), .push(let elements):
            return aggregate(elements, count: elements.count)
        case .map(let pairs):
            return aggregate(pairs.flatMap { [$0.key, $0.value] }, count: pairs.count)
        case .attributed(let inner, let attributes):
            guard attributes.isEmpty || depth + 1 <= limits.maxDepth else {
                return "an attribute nested deeper than \(limits.maxDepth)"
            }
            for entry in attributes.flatMap({ [$0.key, $0.value] }) {
                if let failure = checkLimits(entry, limits: limits, depth: depth + 1) { return failure }
            }
            return checkLimits(inner, limits: limits, depth: depth)
        }
    }

    /// Writes `value` as RESP3 (RESP2 for the types RESP2 has).
    static func encode(_ value: RESPValue, into out: inout ByteBuffer) {
        func line(_ marker: String, _ text: ByteBuffer) {
            out.writeString(marker)
            out.writeImmutableBuffer(text)
            out.writeStaticString("\r\n")
        }
        func bulk(_ marker: String, _ payload: ByteBuffer) {
            out.writeString("\(marker)\(payload.readableBytes)\r\n")
            out.writeImmutableBuffer(payload)
            out.writeStaticString("\r\n")
        }
        switch value {
        case .simpleString(let b): line("+", b)
        case .simpleError(let b): line("-", b)
        case .integer(let n): out.writeString(":\(n)\r\n")
        case .bulkString(let b): bulk("$", b)
        case .nullBulkString: out.writeStaticString("$-1\r\n")
        case .array(let elements):
            out.writeString("*\(elements.count)\r\n")
            for element in elements { encode(element, into: &out) }
        case .nullArray: out.writeStaticString("*-1\r\n")
        case .null: out.writeStaticString("_\r\n")
        case .boolean(let b): out.writeStaticString(b ? "#t\r\n" : "#f\r\n")
        case .double(let d):
            // Swift writes inf, -inf, nan and exponents ("1e+300") in forms RESP3 accepts.
            out.writeString(",\(d)\r\n")
        case .bigNumber(let b): line("(", b)
        case .bulkError(let b): bulk("!", b)
        case .verbatimString(let format, let text):
            var payload = ByteBuffer()
            payload.writeImmutableBuffer(format)
            payload.writeStaticString(":")
            payload.writeImmutableBuffer(text)
            bulk("=", payload)
        case .map(let pairs):
            out.writeString("%\(pairs.count)\r\n")
            for pair in pairs {
                encode(pair.key, into: &out)
                encode(pair.value, into: &out)
            }
        case .set(let elements):
            out.writeString("~\(elements.count)\r\n")
            for element in elements { encode(element, into: &out) }
        case .push(let elements):
            out.writeString(">\(elements.count)\r\n")
            for element in elements { encode(element, into: &out) }
        case .attributed(let inner, let attributes):
            out.writeString("|\(attributes.count)\r\n")
            for pair in attributes {
                encode(pair.key, into: &out)
                encode(pair.value, into: &out)
            }
            encode(inner, into: &out)
        }
    }
}
