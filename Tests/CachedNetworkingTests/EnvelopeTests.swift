@testable import CachedNetworking
import Foundation
import HTTPTypes
import NIOCore
import Testing

@Suite("The stored envelope format")
struct EnvelopeTests {
    let entry = StoredEntry(
        method: "GET",
        uri: "https://example.com/a",
        varyValues: [("accept", "text/html"), ("accept-language", nil)],
        response: HTTPResponse(status: .init(code: 203, reasonPhrase: "Fine"), headerFields: [.cacheControl: "max-age=5", .eTag: "\"x\""]),
        body: ByteBuffer(string: "body bytes"),
        storedAt: Date(timeIntervalSince1970: 1_700_000_000.123),
        requestTime: Date(timeIntervalSince1970: 1_700_000_000),
        responseTime: Date(timeIntervalSince1970: 1_700_000_001),
        lifetimeOverride: 30)

    @Test("a response entry round-trips")
    func responseRoundTrip() {
        #expect(CacheEnvelope.decode(CacheEnvelope.response(entry).encoded()) == .response(entry))
    }

    @Test("a vary index round-trips")
    func indexRoundTrip() {
        let index = CacheEnvelope.VaryIndex(nonce: 42, method: "GET", uri: "https://e/x", fieldNames: ["accept", "cookie"])
        #expect(CacheEnvelope.decode(CacheEnvelope.varyIndex(index).encoded()) == .varyIndex(index))
    }

    @Test("the envelope starts with the magic and the format version")
    func header() {
        let bytes = Array(CacheEnvelope.response(entry).encoded().readableBytesView)
        #expect(Array(bytes.prefix(5)) == Array("CNHC".utf8) + [1])
    }

    @Test("every truncation reads as nothing")
    func truncations() {
        let encoded = CacheEnvelope.response(entry).encoded()
        for length in 0..<encoded.readableBytes {
            #expect(CacheEnvelope.decode(encoded.getSlice(at: 0, length: length)!) == nil)
        }
    }

    @Test("another format version reads as nothing, even with a valid checksum")
    func otherVersion() {
        var bytes = Array(CacheEnvelope.response(entry).encoded().readableBytesView.dropLast(8))
        bytes[4] = 2
        var hasher = FNV1a64()
        hasher.combine(bytes)
        var buffer = ByteBuffer(bytes: bytes)
        buffer.writeInteger(hasher.value)
        #expect(CacheEnvelope.decode(buffer) == nil)
    }

    @Test("trailing bytes read as nothing")
    func trailing() {
        var buffer = CacheEnvelope.response(entry).encoded()
        buffer.writeString("x")
        #expect(CacheEnvelope.decode(buffer) == nil)
    }
}
