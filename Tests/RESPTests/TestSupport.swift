import NIOCore
import RESP

/// A buffer holding the UTF-8 bytes of `string`.
func buffer(_ string: String) -> ByteBuffer {
    ByteBuffer(string: string)
}

/// A buffer holding `bytes`.
func buffer(_ bytes: [UInt8]) -> ByteBuffer {
    ByteBuffer(bytes: bytes)
}

/// The readable bytes of `buffer` as a string (they are ASCII in these tests).
func text(_ buffer: ByteBuffer) -> String {
    String(buffer: buffer)
}

/// What a writer appends to an empty buffer.
func written(_ write: (inout ByteBuffer) -> Void) -> String {
    var out = ByteBuffer()
    write(&out)
    return String(buffer: out)
}

extension RESPValue {
    static func simple(_ s: String) -> RESPValue { .simpleString(buffer(s)) }
    static func error(_ s: String) -> RESPValue { .simpleError(buffer(s)) }
    static func bulk(_ s: String) -> RESPValue { .bulkString(buffer(s)) }
}

/// Decodes every reply in `wire` with one decoder, requiring the bytes to end exactly after the last reply.
func decodeAll(_ wire: String, decoder: RESPValueDecoder = RESPValueDecoder()) throws -> [RESPValue] {
    var decoder = decoder
    var input = buffer(wire)
    var values: [RESPValue] = []
    while let value = try decoder.decode(buffer: &input) {
        values.append(value)
    }
    guard input.readableBytes == 0 else { throw IncompleteInput(leftover: input.readableBytes) }
    return values
}

/// Decodes the one reply `wire` holds.
func decodeOne(_ wire: String, decoder: RESPValueDecoder = RESPValueDecoder()) throws -> RESPValue {
    let values = try decodeAll(wire, decoder: decoder)
    guard values.count == 1 else { throw UnexpectedCount(count: values.count) }
    return values[0]
}

struct IncompleteInput: Error {
    var leftover: Int
}

struct UnexpectedCount: Error {
    var count: Int
}
