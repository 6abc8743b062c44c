@testable import CachedNetworking
import Foundation
import HTTPCaching
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

    /// A partial entry holding bytes 2-4 and 10-11 of a 20-byte representation.
    var partialEntry: StoredEntry {
        var partial = entry
        partial.varyValues = []
        partial.response = HTTPResponse(
            status: .partialContent, headerFields: [.eTag: "\"x\"", .contentRange: "bytes 10-11/20"])
        partial.body = ByteBuffer(string: "cdekl")
        partial.parts = StoredParts(completeLength: 20, ranges: ByteRangeSet([2...4, 10...11]))
        return partial
    }

    @Test("RFC 9111 §3.3: a partial entry round-trips as kind 4; a complete one is still written as kind 1")
    func partialRoundTrip() {
        let bytes = CacheEnvelope.response(partialEntry).encoded()
        #expect(bytes.getInteger(at: 5, as: UInt8.self) == 4)
        #expect(CacheEnvelope.decode(bytes) == .response(partialEntry))
        #expect(CacheEnvelope.response(entry).encoded().getInteger(at: 5, as: UInt8.self) == 1)
    }

    /// The partial entry encoded with `ranges` in place of its own (written by hand: a set would merge or
    /// reorder them).
    func partialEncoded(ranges: [ClosedRange<Int>]) -> ByteBuffer {
        var head = Array(CacheEnvelope.response(partialEntry).encoded().readableBytesView.dropLast(8))
        // The ranges come just before the body: its u32 length and its 5 bytes.
        let rangesEnd = head.count - 4 - 5
        let rangesStart = rangesEnd - 2 - 16 * partialEntry.parts!.ranges.ranges.count
        var replacement = ByteBuffer()
        replacement.writeInteger(UInt16(ranges.count))
        for range in ranges {
            replacement.writeInteger(UInt64(range.lowerBound))
            replacement.writeInteger(UInt64(range.upperBound))
        }
        head.replaceSubrange(rangesStart..<rangesEnd, with: Array(replacement.readableBytesView))
        let checksum = head.withUnsafeBytes { CacheEnvelope.checksum($0, version: 2) }
        var bytes = ByteBuffer(bytes: head)
        bytes.writeInteger(checksum)
        return bytes
    }

    @Test("RFC 9111 §3.3: a partial entry whose ranges do not match its body, overlap, touch, are out of order or past the length reads as nothing",
          arguments: [[2...4, 10...12], [10...11, 2...4], [2...4, 5...6], [2...4, 18...20], []] as [[ClosedRange<Int>]])
    func partialInconsistent(ranges: [ClosedRange<Int>]) {
        #expect(CacheEnvelope.decode(partialEncoded(ranges: ranges)) == nil)
    }

    @Test("RFC 9111 §3.3: other consistent ranges written by hand read back")
    func partialRewritten() throws {
        guard case .response(let decoded) = try #require(CacheEnvelope.decode(partialEncoded(ranges: [0...1, 17...19])))
        else { Issue.record("not a response"); return }
        #expect(decoded.parts?.ranges.ranges == [0...1, 17...19])
    }

    @Test("RFC 9111 §4.3.5: a response marked stale round-trips as kind 5")
    func markedStaleRoundTrip() {
        var marked = entry
        marked.markedStale = true
        let bytes = CacheEnvelope.response(marked).encoded()
        #expect(bytes.getInteger(at: 5, as: UInt8.self) == 5)
        #expect(CacheEnvelope.decode(bytes) == .response(marked))
        #expect(CacheEnvelope.decode(bytes) != .response(entry))
    }

    @Test("a vary index round-trips")
    func indexRoundTrip() {
        let index = CacheEnvelope.VaryIndex(nonce: 42, method: "GET", uri: "https://e/x", fieldNames: ["accept", "cookie"])
        #expect(CacheEnvelope.decode(CacheEnvelope.varyIndex(index).encoded()) == .varyIndex(index))
    }

    @Test("a vary index lists its variants, least recently used first")
    func indexWithVariants() {
        var index = CacheEnvelope.VaryIndex(nonce: 42, method: "GET", uri: "https://e/x", fieldNames: ["accept"])
        index.variants = [.init(hash: 1, lastUsed: 100), .init(hash: .max, lastUsed: 160)]
        let bytes = CacheEnvelope.varyIndex(index).encoded()
        #expect(bytes.getInteger(at: 5, as: UInt8.self) == 3)
        #expect(CacheEnvelope.decode(bytes) == .varyIndex(index))
    }

    @Test("a vary index of kind 2 (written before variants were listed) still reads, with no variants")
    func indexKindTwo() {
        let index = CacheEnvelope.VaryIndex(nonce: 9, method: "GET", uri: "https://e/y", fieldNames: ["accept"])
        // Kind 3 with an empty list is kind 2 and two more bytes (the count).
        var bytes = Array(CacheEnvelope.varyIndex(index).encoded().readableBytesView.dropLast(10))
        bytes[5] = 2
        let checksum = bytes.withUnsafeBytes { CacheEnvelope.checksum($0, version: 2) }
        var buffer = ByteBuffer(bytes: bytes)
        buffer.writeInteger(checksum)
        #expect(CacheEnvelope.decode(buffer) == .varyIndex(index))
    }

    @Test("recording a variant's use: new ones are appended, the least recently used beyond the limit evicted")
    func recordUse() {
        var index = CacheEnvelope.VaryIndex(nonce: 1, method: "GET", uri: "https://e/", fieldNames: ["accept"])
        #expect(index.recordUse(of: 10, at: 0, limit: 2, granularity: 60) == (true, []))
        #expect(index.recordUse(of: 20, at: 5, limit: 2, granularity: 60) == (true, []))
        // Used again within the granularity: nothing to write.
        #expect(index.recordUse(of: 10, at: 59, limit: 2, granularity: 60) == (false, []))
        // A minute later it moves to the recent end.
        #expect(index.recordUse(of: 10, at: 60, limit: 2, granularity: 60) == (true, []))
        #expect(index.variants.map(\.hash) == [20, 10])
        // A third variant evicts the least recently used one.
        #expect(index.recordUse(of: 30, at: 61, limit: 2, granularity: 60) == (true, [20]))
        #expect(index.variants == [.init(hash: 10, lastUsed: 60), .init(hash: 30, lastUsed: 61)])
        // A limit below one counts as one.
        #expect(index.recordUse(of: 40, at: 62, limit: 0, granularity: 60) == (true, [10, 30]))
    }

    @Test("a variant's recorded use from a clock far off, or a damaged record, neither traps nor freezes the order")
    func recordUseWithWildTimes() {
        var index = CacheEnvelope.VaryIndex(nonce: 1, method: "GET", uri: "https://e/", fieldNames: ["accept"])
        index.variants = [.init(hash: 10, lastUsed: .min), .init(hash: 20, lastUsed: .max), .init(hash: 30, lastUsed: 0)]
        // Int64.min: the age overflows and counts as long ago.
        #expect(index.recordUse(of: 10, at: 100, limit: 5, granularity: 60) == (true, []))
        // A last use in the future (another process's clock ahead): rewritten with this clock's time.
        #expect(index.recordUse(of: 20, at: 100, limit: 5, granularity: 60) == (true, []))
        #expect(index.variants == [.init(hash: 30, lastUsed: 0), .init(hash: 10, lastUsed: 100), .init(hash: 20, lastUsed: 100)])
        // A new variant takes this clock's time, not the latest in the list.
        index.variants.append(.init(hash: 40, lastUsed: .max))
        #expect(index.recordUse(of: 50, at: 101, limit: 5, granularity: 60) == (true, []))
        #expect(index.variants.last == .init(hash: 50, lastUsed: 101))
    }

    @Test("the envelope starts with the magic and the format version")
    func header() {
        let bytes = Array(CacheEnvelope.response(entry).encoded().readableBytesView)
        #expect(Array(bytes.prefix(5)) == Array("CNHC".utf8) + [2])
    }

    /// `bytes` with `version` in place of the format version and a checksum of that version appended.
    private func resealed(_ bytes: [UInt8], version: UInt8, checksumVersion: UInt8) -> ByteBuffer {
        var bytes = bytes
        bytes[4] = version
        let checksum = bytes.withUnsafeBytes { CacheEnvelope.checksum($0, version: checksumVersion) }
        var buffer = ByteBuffer(bytes: bytes)
        buffer.writeInteger(checksum)
        return buffer
    }

    @Test("an entry written in format 1 (bytewise checksum) still reads; one with the other format's checksum does not")
    func formatOne() {
        for envelope in [CacheEnvelope.response(entry), .varyIndex(.init(nonce: 7, method: "GET", uri: "https://e/", fieldNames: ["accept"]))] {
            let bytes = Array(envelope.encoded().readableBytesView.dropLast(8))
            #expect(CacheEnvelope.decode(resealed(bytes, version: 1, checksumVersion: 1)) == envelope)
            #expect(CacheEnvelope.decode(resealed(bytes, version: 1, checksumVersion: 2)) == nil)
            #expect(CacheEnvelope.decode(resealed(bytes, version: 2, checksumVersion: 1)) == nil)
        }
    }

    @Test("the word checksum: a change to any one byte, the same change in two words, or two bytes swapped changes it")
    func wordChecksum() {
        let bytes = (0..<61).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }  // 7 words and 5 bytes
        let original = bytes.withUnsafeBytes { CacheEnvelope.checksum($0, version: 2) }
        var seen: Set<UInt64> = [original]
        for position in bytes.indices {
            for flip: UInt8 in [0x01, 0x80, 0xFF] {
                var changed = bytes
                changed[position] ^= flip
                let sum = changed.withUnsafeBytes { CacheEnvelope.checksum($0, version: 2) }
                #expect(sum != original, "byte \(position) xor \(flip) left the checksum as it was")
                seen.insert(sum)
            }
        }
        #expect(seen.count == 1 + bytes.count * 3, "two different changes gave the same checksum")
        // The top bit of two words: with a plain multiply per word (no rotation) these changes cancel out.
        var twice = bytes
        twice[7] ^= 0x80
        twice[23] ^= 0x80
        #expect(twice.withUnsafeBytes { CacheEnvelope.checksum($0, version: 2) } != original)
        var swapped = bytes
        swapped.swapAt(3, 12)
        #expect(swapped.withUnsafeBytes { CacheEnvelope.checksum($0, version: 2) } != original)
        let shorter = bytes.dropLast().withUnsafeBytes { CacheEnvelope.checksum(UnsafeRawBufferPointer($0), version: 2) }
        #expect(shorter != original)
    }

    @Test("every changed byte of an envelope reads as nothing")
    func corruptions() {
        let encoded = Array(CacheEnvelope.response(entry).encoded().readableBytesView)
        for position in encoded.indices {
            var bytes = encoded
            bytes[position] ^= 0x20
            #expect(CacheEnvelope.decode(ByteBuffer(bytes: bytes)) == nil, "a change at byte \(position) still decoded")
        }
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
        let bytes = Array(CacheEnvelope.response(entry).encoded().readableBytesView.dropLast(8))
        for version: UInt8 in [0, 3, 255] {
            for checksumVersion: UInt8 in [1, 2] {
                #expect(CacheEnvelope.decode(resealed(bytes, version: version, checksumVersion: checksumVersion)) == nil)
            }
        }
    }

    @Test("trailing bytes read as nothing")
    func trailing() {
        var buffer = CacheEnvelope.response(entry).encoded()
        buffer.writeString("x")
        #expect(CacheEnvelope.decode(buffer) == nil)
    }
}
