import CachedNetworkingTesting
import Foundation
import HTTPCaching
import HTTPTypes
import NIOCore
import Synchronization
import Testing

@testable import CachedNetworking
@testable import CachedNetworkingRedis

/// Entries of a store without decoded forms (``InMemoryCacheStore`` here, a `RESPStore` in production), kept
/// decoded beside their bytes: used only for the very bytes they were made from.
@Suite("DecodedReads")
struct DecodedReadsTests {
    static func envelope(_ body: String, uri: String = "https://origin.test/a") -> (ByteBuffer, DecodedEnvelope) {
        var fields = HTTPFields()
        fields[.cacheControl] = "max-age=60"
        let date = Date(timeIntervalSince1970: 1_700_000_000)
        let entry = StoredEntry(
            method: "GET", uri: uri, varyValues: [], response: HTTPResponse(status: .ok, headerFields: fields),
            body: ByteBuffer(string: body), storedAt: date, requestTime: date, responseTime: date, lifetimeOverride: nil)
        return DecodedEnvelope.encoding(.response(entry), prepared: PreparedStoredResponse(entry.info, rules: CachingRules()))
    }

    @Test("the kept form comes back for equal bytes only: not for one byte changed, nor for other lengths")
    func equalBytesOnly() throws {
        let reads = DecodedReads(maxBytes: 1 << 20)
        let key = StoreKey("ns:1:GET:https://origin.test/a")
        let (bytes, decoded) = Self.envelope("version one")
        reads.remember(key, bytes: bytes, decoded: decoded)

        // Equal bytes in another buffer (as a read from the network brings them) get the kept form.
        let copy = ByteBuffer(bytes: Array(buffer: bytes))
        #expect(reads.decoded(key, bytes: copy) === decoded)

        var changed = Array(buffer: bytes)
        changed[changed.count / 2] ^= 0x01
        #expect(reads.decoded(key, bytes: ByteBuffer(bytes: changed)) == nil)
        #expect(reads.decoded(key, bytes: ByteBuffer(bytes: changed.dropLast())) == nil)
        #expect(reads.decoded(StoreKey("ns:1:GET:https://origin.test/b"), bytes: copy) == nil)

        // Remembering other bytes under the key replaces the kept form.
        let (other, otherDecoded) = Self.envelope("version two")
        reads.remember(key, bytes: other, decoded: otherDecoded)
        #expect(reads.decoded(key, bytes: copy) == nil)
        #expect(reads.decoded(key, bytes: other) === otherDecoded)
        #expect(reads.usage.count == 1)
    }

    @Test("bounded by bytes: each entry is charged key, value and overhead, and the table evicts to fit")
    func bounded() throws {
        let (bytes, decoded) = Self.envelope(String(repeating: "x", count: 1000))
        let key = { (index: Int) in StoreKey("ns:1:GET:https://origin.test/\(1000 + index)") }
        let cost = key(0).byteCount + bytes.readableBytes + DecodedReads.entryOverhead
        let reads = DecodedReads(maxBytes: cost * 10)
        for index in 0..<25 { reads.remember(key(index), bytes: bytes, decoded: decoded) }
        let usage = reads.usage
        #expect(usage.count == 10)
        #expect(usage.bytes <= cost * 10)
        #expect(reads.decoded(key(24), bytes: bytes) === decoded)
    }

    // MARK: through the cache

    @Test("hits through a store without decoded forms reuse the form kept when the entry was written")
    func hitsReuseWrittenForm() async throws {
        let h = try await Harness.make()
        h.serve("/r", [("Cache-Control", "max-age=60")], body: "stored")
        #expect(try await h.get("/r").source == .network)
        let first = try await h.get("/r")
        let second = try await h.get("/r")
        #expect(first.source == .cache && second.source == .cache)
        #expect(first.text == "stored" && second.text == "stored")
        // One prepared entry behind both: they share the head it keeps for the hits of one second.
        #expect(first.head === second.head)
        #expect(h.cache.store.decodedReads?.usage.count == 1)
        await h.stop()
    }

    @Test("bytes another process wrote are decoded afresh, never answered with the kept form")
    func otherWriterDecodedAfresh() async throws {
        let h = try await Harness.make()
        let body = MutableBody("first")
        h.serve("/w") { _ in .init(headers: [("Cache-Control", "max-age=60")], body: body.value) }
        #expect(try await h.get("/w").text == "first")
        #expect(try await h.get("/w").source == .cache)

        // Another process reloads the URL and stores what the origin now says, under the same key.
        body.value = "second"
        let other = h.sibling()
        let reloaded = try await other.run(h.origin.request("/w"), policy: .reloadIgnoringLocalCacheData)
        #expect(reloaded.text == "second")

        let hit = try await h.get("/w")
        #expect(hit.source == .cache)
        #expect(hit.text == "second")
        #expect(h.origin.count("/w") == 2)
        await h.stop()
    }

    @Test("corrupt bytes under a kept key are corrupt: counted, removed and fetched again")
    func corruptBytesNotMasked() async throws {
        let h = try await Harness.make()
        h.serve("/c", [("Cache-Control", "max-age=60")], body: "good")
        let key = try #require(try await h.get("/c").entry?.key)
        #expect(try await h.get("/c").source == .cache)
        // The same length as the stored value, one byte changed: the checksum catches it.
        var bytes = try #require(try await h.store.get(key))
        var raw = Array(buffer: bytes)
        raw[raw.count - 20] ^= 0x20
        bytes = ByteBuffer(bytes: raw)
        try await h.store.set(key, to: bytes, ttl: nil)

        let answer = try await h.get("/c")
        #expect(answer.source == .network)
        #expect(answer.text == "good")
        #expect(h.metrics.value(CachedNetworkingMetrics.corruptEntries) == 1)
        await h.stop()
    }

    @Test("decodedEntryMemory 0 keeps nothing: every hit decodes the bytes, with the same answers")
    func turnedOff() async throws {
        let h = try await Harness.make { $0.decodedEntryMemory = 0 }
        #expect(h.cache.store.decodedReads == nil)
        h.serve("/z", [("Cache-Control", "max-age=60")], body: "plain")
        _ = try await h.get("/z")
        let first = try await h.get("/z")
        let second = try await h.get("/z")
        #expect(first.source == .cache && second.source == .cache)
        #expect(first.text == "plain" && first.headerFields == second.headerFields)
        #expect(first.head !== second.head)
        await h.stop()
    }
}

/// A body the origin's handler reads at each request.
final class MutableBody: Sendable {
    private let state: Mutex<String>
    init(_ value: String) { state = Mutex(value) }
    var value: String {
        get { state.withLock { $0 } }
        set { state.withLock { $0 = newValue } }
    }
}
