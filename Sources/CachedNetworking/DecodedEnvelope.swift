#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import HTTPCaching
import HTTPTypes
import NIOCore
import Synchronization
import Tracing

/// An envelope decoded once, with what a hit needs worked out ahead: the response's reuse facts
/// (``PreparedStoredResponse``) and its body version.
///
/// A store in this process (``DecodedEnvelopeStore``, such as ``MemoryStore``) keeps it next to the envelope's
/// bytes, so that a hit neither decodes the bytes nor verifies their checksum — the checksum protects bytes that
/// crossed a network or a process, which these never did — nor parses the stored header fields again.
/// Immutable, so that any number of requests may share it.
final class DecodedEnvelope: Sendable {
    let envelope: CacheEnvelope
    /// For a response: the entry with its reuse facts (the same entry as in `envelope`, reachable without
    /// copying it out of the enum).
    let response: PreparedEntry?

    /// Decodes nothing: `envelope` is prepared with `rules`.
    convenience init(_ envelope: CacheEnvelope, rules: CachingRules) {
        if case .response(let entry) = envelope {
            self.init(envelope, prepared: PreparedStoredResponse(entry.info, rules: rules))
        } else {
            self.init(envelope, prepared: nil)
        }
    }

    /// `envelope` with its response's reuse facts, `prepared` (nil for a `Vary` index).
    init(_ envelope: CacheEnvelope, prepared: PreparedStoredResponse?) {
        self.envelope = envelope
        if case .response(let entry) = envelope, let prepared {
            response = PreparedEntry(entry, prepared: prepared)
        } else {
            response = nil
        }
    }

    /// The envelope encoded, and its decoded form sharing the encoded body bytes (so that a store keeping both
    /// holds the body once).
    static func encoding(_ envelope: CacheEnvelope, prepared: PreparedStoredResponse?) -> (bytes: ByteBuffer, decoded: DecodedEnvelope) {
        let bytes = envelope.encoded()
        guard case .response(var entry) = envelope else { return (bytes, DecodedEnvelope(envelope, prepared: prepared)) }
        // The body is the last field before the 8-byte checksum.
        let length = entry.body.readableBytes
        if let shared = bytes.getSlice(at: bytes.writerIndex - 8 - length, length: length) { entry.body = shared }
        return (bytes, DecodedEnvelope(.response(entry), prepared: prepared))
    }
}

/// A stored response with its reuse facts and version, worked out once. A class, so that a hit passes one
/// reference around instead of copying every field of the entry.
///
/// It also keeps the head of its last plain hit's answer (``servedHit(age:timeToLive:omitting:source:cacheName:key:)``):
/// every hit in the same second of the entry's age is answered with the same status, header fields and
/// `Cache-Status` member, so they are built once and shared (copy-on-write) by the answers, instead of copied
/// with `Age` and `Cache-Status` for each.
final class PreparedEntry: Sendable {
    let entry: StoredEntry
    /// The entry's reuse facts, prepared with the rules of the cache that decoded or wrote it.
    let prepared: PreparedStoredResponse
    /// ``StoredEntry/version``.
    let version: String
    /// The response of the last plain hit, and what it was built for.
    private let lastHit = Mutex<ServedHit?>(nil)

    init(_ entry: StoredEntry, prepared: PreparedStoredResponse) {
        self.entry = entry
        self.prepared = prepared
        self.version = entry.version
    }

    /// `entry`, prepared with `rules`.
    convenience init(_ entry: StoredEntry, rules: CachingRules) {
        self.init(entry, prepared: PreparedStoredResponse(entry.info, rules: rules))
    }

    /// ``ReuseDecision/evaluate(prepared:requestDirectives:now:)`` for this entry. A method, so that the prepared
    /// facts are read in place rather than copied out for the call (a copy retains every string and set in them).
    func decision(requestDirectives: RequestCacheControl, now: Date) -> ReuseDecision {
        ReuseDecision.evaluate(prepared: prepared, requestDirectives: requestDirectives, now: now)
    }

    /// The stored response as served at `age`: without the fields in `omitting`, with `Age`, and with `status`
    /// appended to its `Cache-Status` when given. One copy of the stored fields, with room for what is added.
    func servedResponse(age: Int, omitting: Set<String>, status: CacheStatus?) -> HTTPResponse {
        var response = entry.response
        response.headerFields.reserveCapacity(response.headerFields.count + 2)
        for name in omitting {
            if let fieldName = HTTPField.Name(name) { response.headerFields[fieldName] = nil }
        }
        response.headerFields[.age] = String(age)
        status?.append(to: &response.headerFields)
        return response
    }

    /// The head of a plain hit's answer (status, fields, source, `Cache-Status` member `hit` with `ttl`, entry
    /// identity) served at `age` under `key` by the cache named `cacheName`: the head made for the previous hit
    /// when that was made for the same (within the same second of the entry's age), else a new one, kept for the
    /// next hit.
    func servedHit(
        age: Int, timeToLive: Int, omitting: Set<String>, source: CachedResponse.Source, cacheName: String, key: String
    ) -> CachedResponse.Head {
        if let last = lastHit.withLock({ $0 }), last.age == age, last.timeToLive == timeToLive, last.source == source,
            last.omitted == omitting, UTF8Bytes.equal(last.cacheName, cacheName), UTF8Bytes.equal(last.key, key)
        {
            return last.head
        }
        var member = CacheStatus(cacheName: cacheName)
        member.hit = true
        member.timeToLive = timeToLive
        let head = CachedResponse.Head(
            response: servedResponse(age: age, omitting: omitting, status: member), source: source,
            cacheStatus: member, entry: CachedResponse.EntryIdentity(key: key, version: version))
        let hit = ServedHit(
            age: age, timeToLive: timeToLive, omitted: omitting, source: source, cacheName: cacheName, key: key, head: head)
        lastHit.withLock { $0 = hit }
        return head
    }

    /// A served head and what it was made for. A class, so that reading it under the lock takes one reference.
    /// It keeps its own copies of what the head also says (source, `ttl`, cache name, key): comparing them
    /// through the head's properties copies the `Cache-Status` member out for each hit (about 50 ns a hit).
    private final class ServedHit: Sendable {
        let age: Int
        let timeToLive: Int
        let omitted: Set<String>
        let source: CachedResponse.Source
        let cacheName: String
        let key: String
        let head: CachedResponse.Head

        init(
            age: Int, timeToLive: Int, omitted: Set<String>, source: CachedResponse.Source, cacheName: String,
            key: String, head: CachedResponse.Head
        ) {
            self.age = age
            self.timeToLive = timeToLive
            self.omitted = omitted
            self.source = source
            self.cacheName = cacheName
            self.key = key
            self.head = head
        }
    }
}

/// A ``CacheStore`` in this process that can keep, next to the bytes of a value the cache writes, the cache's
/// decoded form of them (``DecodedEnvelope``), and hand both back without suspending.
///
/// Values written through ``CacheStore`` alone have no decoded form; the cache then decodes their bytes as it
/// does for any other store. A store must drop the decoded form whenever the bytes beside it change.
protocol DecodedEnvelopeStore: AnyObject, CacheStore {
    /// The value under `key` and the decoded form written with it; nil when nothing (live) is stored.
    func getDecoded(_ key: StoreKey) throws(CacheStoreError) -> (value: ByteBuffer, decoded: DecodedEnvelope?)?

    /// Stores `value` under `key` as ``CacheStore/set(_:to:ttl:)`` does, with `decoded`, its decoded form.
    func set(_ key: String, to value: ByteBuffer, decoded: DecodedEnvelope, ttl: Duration?) throws(CacheStoreError)
}

/// What an envelope read found.
enum EnvelopeRead: Sendable {
    /// Nothing is stored under the key.
    case missing
    /// A value that is not a readable envelope (corrupt or foreign).
    case unreadable
    case found(DecodedEnvelope)
}

extension StoreAccess {
    /// The envelope under `key`: the decoded form a ``DecodedEnvelopeStore`` kept (prepared again when it was
    /// prepared under other rules), else the bytes decoded and checked here (or, when they are the very bytes
    /// this process last decoded or wrote under `key`, their kept decoded form: ``DecodedReads``).
    func getEnvelope(_ key: String, rules: CachingRules) async -> StoreRead<EnvelopeRead> {
        if let read = getEnvelopeNow(key, rules: rules) { return read }
        return await get(key).map { bytes in bytes.map { decode($0, under: key, rules: rules) } ?? .missing }
    }

    /// `bytes`, read under `key`, decoded; from ``decodedReads`` when it holds them.
    private func decode(_ bytes: ByteBuffer, under key: String, rules: CachingRules) -> EnvelopeRead {
        guard let decodedReads else { return Self.decode(bytes, rules: rules) }
        let storeKey = StoreKey(key)
        if let kept = decodedReads.decoded(storeKey, bytes: bytes), kept.response?.prepared.isPrepared(for: rules) ?? true {
            return .found(kept)
        }
        let read = Self.decode(bytes, rules: rules)
        if case .found(let decoded) = read { decodedReads.remember(storeKey, bytes: bytes, decoded: decoded) }
        return read
    }

    /// ``getEnvelope(_:rules:)`` without suspending, from a ``DecodedEnvelopeStore``; nil for other stores.
    func getEnvelopeNow(_ key: String, rules: CachingRules) -> StoreRead<EnvelopeRead>? {
        guard decodedStore != nil else { return nil }
        return getEnvelopeNow(StoreKey(key), rules: rules)
    }

    /// ``getEnvelopeNow(_:rules:)`` for a key already hashed.
    func getEnvelopeNow(_ key: StoreKey, rules: CachingRules) -> StoreRead<EnvelopeRead>? {
        guard let decodedStore else { return nil }
        let span = tracing.startStoreCall(.get, key: key.string)
        defer { span?.end() }
        let found: (value: ByteBuffer, decoded: DecodedEnvelope?)?
        do throws(CacheStoreError) {
            found = try decodedStore.getDecoded(key)
        } catch {
            return settle(.get, key.string, Result<EnvelopeRead, CacheStoreError>.failure(error), span: span)
        }
        guard let found else { return .value(.missing) }
        if let decoded = found.decoded, decoded.response?.prepared.isPrepared(for: rules) ?? true {
            return .value(.found(decoded))
        }
        return .value(Self.decode(found.value, rules: rules))
    }

    /// Stores `envelope` under `key`: its bytes, and its decoded form too (with `prepared`, the response's
    /// reuse facts) when the store keeps one, or in ``decodedReads`` once the write succeeded.
    @discardableResult
    func setEnvelope(_ key: String, _ envelope: CacheEnvelope, prepared: PreparedStoredResponse?, ttl: Duration?) async -> Bool {
        guard decodedStore != nil || decodedReads != nil else { return await set(key, envelope.encoded(), ttl: ttl) }
        let (bytes, decoded) = DecodedEnvelope.encoding(envelope, prepared: prepared)
        guard let decodedStore else {
            guard await set(key, bytes, ttl: ttl) else { return false }
            decodedReads?.remember(StoreKey(key), bytes: bytes, decoded: decoded)
            return true
        }
        let span = tracing.startStoreCall(.set, key: key)
        defer { span?.end() }
        let result: Result<Void, CacheStoreError>
        do throws(CacheStoreError) {
            result = .success(try decodedStore.set(key, to: bytes, decoded: decoded, ttl: ttl))
        } catch {
            result = .failure(error)
        }
        return settle(.set, key, result, span: span).succeeded
    }

    private static func decode(_ bytes: ByteBuffer, rules: CachingRules) -> EnvelopeRead {
        CacheEnvelope.decode(bytes).map { .found(DecodedEnvelope($0, rules: rules)) } ?? .unreadable
    }
}

extension StoreRead {
    /// The value transformed by `transform`; the failure as it is.
    func map<U: Sendable>(_ transform: (T) -> U) -> StoreRead<U> {
        switch self {
        case .value(let value): .value(transform(value))
        case .failed(let error): .failed(error)
        }
    }
}

extension MemoryStore: DecodedEnvelopeStore {}
