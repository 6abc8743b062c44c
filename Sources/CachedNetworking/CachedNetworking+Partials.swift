#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import HTTPCaching
import HTTPTypes
import NIOCore

/// Partial responses: stored (RFC 9111 §3.3), combined (§3.4), and used to answer range requests they cover.
///
/// - A `206` to a GET is stored as a partial entry, under the key a complete response would have, when it is
///   storable as any response is and has one `Content-Range` with a known complete length
///   (``ContentRange``), a strong `ETag`, and no `Vary`. A multipart/byteranges `206`, one of unknown length or
///   without a strong `ETag`, or one with `Vary` is passed on and not stored; so is a `206` when a complete
///   response is stored.
/// - The entry holds the ranges received as one sorted list of disjoint ranges (``ByteRangeSet``) over one body,
///   at most ``maximumStoredParts`` ranges and ``Configuration/maximumStoredBodySize`` bytes in all.
/// - A `206` whose strong `ETag` matches the stored partial's (and of the same complete length) is combined with
///   it: the bytes received join the stored ones, and the newer response's header fields replace the stored
///   ones. Another validator replaces the stored partial. Once the parts cover the whole representation, the
///   entry is stored as the complete `200`.
/// - A partial entry answers only a GET with one satisfiable range wholly within it (and a matching `If-Range`,
///   if any), under the same freshness rules as any stored response; anything else (a full GET included) goes to
///   the origin, `Cache-Status` saying `fwd=partial`.
extension CachedNetworking {
    /// The most ranges a partial entry holds; a response that would split it further is not stored.
    static let maximumStoredParts = 64

    /// The answer to `request`, a GET with `Range`, from `partial`, a stored partial response: when its one
    /// satisfiable range is wholly within the parts held (RFC 9111 §3.3), `If-Range` (if any) matches, the
    /// request has no `If-None-Match` or `If-Modified-Since`, and the entry may be served as it is (fresh, stale
    /// within `max-stale`, or by `policy`). nil otherwise: the request goes to the origin.
    func servedFromPartial(
        _ partial: FoundEntry, request: HTTPRequest, policy: CachePolicy, directives: RequestCacheControl
    ) -> CachedResponse? {
        let fields = request.headerFields
        guard request.method == .get, let parts = partial.entry.parts, let ranges = ByteRanges(request),
            fields[.ifNoneMatch] == nil, fields[.ifModifiedSince] == nil
        else { return nil }
        if let ifRange = fields[.ifRange], !IfRange.matches(ifRange, representation: partial.entry.response.headerFields) {
            return nil
        }
        let satisfiable = ranges.satisfiable(length: parts.completeLength)
        guard satisfiable.count == 1, let range = satisfiable.first, let held = parts.ranges.locate(range.lowerBound),
            held.range.upperBound >= range.upperBound,
            let slice = partial.entry.body.getSlice(
                at: partial.entry.body.readerIndex + held.offset + range.lowerBound - held.range.lowerBound,
                length: range.count)
        else { return nil }
        let now = now()
        let decision = partial.stored.decision(requestDirectives: directives, now: now)
        let byPolicy = policy.base == .returnCacheDataElseLoad || policy.base == .returnCacheDataDontLoad
        guard byPolicy || decision.action == .serveFresh || decision.action == .serveStale else { return nil }
        metrics.hits.increment()
        if !decision.isFresh { metrics.staleServed(byPolicy ? "policy" : "max_stale") }
        metrics.cacheBytes(slice.readableBytes)
        var member = CacheStatus(cacheName: configuration.cacheName)
        member.hit = true
        member.timeToLive = decision.timeToLive
        var response = partial.stored.servedResponse(
            age: partial.prepared.currentAge(now: now), omitting: decision.fieldsToOmitWhenServed, status: nil)
        response.headerFields[.contentRange] = ContentRange.value(range, completeLength: parts.completeLength)
        response.headerFields[.contentLength] = String(range.count)
        PartialContent.removeContentDigests(from: &response.headerFields)
        return makeResponse(response, body: slice, source: decision.isFresh ? .cache : .stale, status: member, entry: nil)
    }

    /// Stores `answer`, a `206` to `context` found storable by the shared-cache rules, as a partial entry under
    /// `entryKey`, combined with the partial one `lookup` found when they share a strong validator; as the
    /// complete response once the parts cover it all. See the extension's overview for what is not stored.
    func storePartial(
        _ answer: HTTPTransportResponse,
        context: RequestContext,
        lookup: Lookup,
        entryKey: String,
        requestTime: Date,
        responseTime: Date,
        directives: ResponseCacheControl
    ) async -> (entry: CachedResponse.EntryIdentity?, shareable: Bool) {
        let fields = answer.response.headerFields
        // A 206 to a request without `Range` answers that request alone: not for requests sharing its fetch.
        let shareable = context.request.headerFields[.range] != nil
        guard context.method == .get, lookup.entry == nil, Vary(fields) == nil,
            !PartialContent.isMultipart(fields),
            let received = ContentRange(fields), received.range.count == answer.body.readableBytes,
            PartialContent.strongValidator(fields) != nil
        else { return (nil, shareable) }
        // Read, combined and written one at a time per entry in this process, from the entry as it is now (not
        // as `lookup` found it when the request started): concurrent range requests for one URL each add their
        // part instead of the last write dropping the others', and a complete response stored meanwhile stays.
        return await entryWrites.withLock(entryKey) {
            let current = await examine(
                await store.getEnvelope(entryKey, rules: configuration.rules), entryKey: entryKey, context: context)
            guard current.entry == nil else { return (nil, shareable) }
            let stored = await combine(
                answer, received: received, with: current, context: context, entryKey: entryKey,
                requestTime: requestTime, responseTime: responseTime)
            return (stored, shareable)
        }
    }

    /// ``storePartial(_:context:lookup:entryKey:requestTime:responseTime:directives:)`` once the entry's lock is
    /// held: `answer`, whose part is `received`, combined with the partial entry `current` holds (when they share
    /// a strong validator and length) and written; the stored entry's identity, nil when nothing was written.
    private func combine(
        _ answer: HTTPTransportResponse,
        received: ContentRange,
        with current: Lookup,
        context: RequestContext,
        entryKey: String,
        requestTime: Date,
        responseTime: Date
    ) async -> CachedResponse.EntryIdentity? {
        let fields = answer.response.headerFields
        var previous: (parts: StoredParts, body: ByteBuffer)? = nil
        var response = answer.response
        if let stored = current.partial, let parts = stored.entry.parts, parts.completeLength == received.completeLength,
            PartialContent.combinable(stored: stored.entry.response.headerFields, new: fields)
        {
            previous = (parts, stored.entry.body)
            // RFC 9111 §3.4: the new response's fields replace the stored ones of the same name (as a 304's do,
            // §3.2); the others are kept. A digest of the new part's bytes describes no other part.
            response.headerFields = Validation.merging(stored.entry.response.headerFields, with: fields)
        }
        PartialContent.removeContentDigests(from: &response.headerFields)
        var ranges = previous?.parts.ranges ?? ByteRangeSet()
        ranges.insert(received.range)
        guard ranges.ranges.count <= Self.maximumStoredParts, ranges.byteCount <= configuration.maximumStoredBodySize,
            let body = Self.combining(previous, with: received.range, body: answer.body, into: ranges)
        else {
            // Not stored; a stored partial of another representation is out of date.
            if previous == nil, let outdated = current.partial { await store.remove([outdated.key]) }
            return nil
        }
        if ranges.isComplete(length: received.completeLength) {
            var complete = response
            complete.status = .ok
            complete.headerFields[.contentRange] = nil
            complete.headerFields[.contentLength] = String(received.completeLength)
            return await storeResponse(
                HTTPTransportResponse(response: complete, body: body), context: context, lookup: current,
                requestTime: requestTime, responseTime: responseTime
            ).entry
        }
        let entry = StoredEntry(
            method: context.method.rawValue,
            uri: context.uri,
            varyValues: [],
            response: response,
            body: body,
            storedAt: now(),
            requestTime: requestTime,
            responseTime: responseTime,
            lifetimeOverride: configuration.lifetimeOverride(for: context.request).map { Int($0.components.seconds) },
            parts: StoredParts(completeLength: received.completeLength, ranges: ranges)
        )
        let prepared = PreparedStoredResponse(
            entry.info, directives: ResponseCacheControl(response.headerFields, rules: configuration.rules),
            rules: configuration.rules)
        guard await store.setEnvelope(entryKey, .response(entry), prepared: prepared, ttl: storeTTL(prepared).ttl) else {
            return nil
        }
        metrics.stores.increment()
        return CachedResponse.EntryIdentity(key: entryKey, version: entry.version)
    }

    /// The bytes of `ranges`, in order: those of `received` from `body`, the others from `previous` (the parts
    /// held before and their bytes); nil when a byte is in neither.
    static func combining(
        _ previous: (parts: StoredParts, body: ByteBuffer)?, with received: ClosedRange<Int>, body: ByteBuffer,
        into ranges: ByteRangeSet
    ) -> ByteBuffer? {
        guard let previous else { return ranges.ranges == [received] ? body : nil }
        var combined = ByteBufferAllocator().buffer(capacity: ranges.byteCount)
        for range in ranges.ranges {
            var position = range.lowerBound
            while position <= range.upperBound {
                var slice: ByteBuffer
                if received.contains(position) {
                    // The newer bytes, where both have them.
                    let end = min(range.upperBound, received.upperBound)
                    guard let part = body.getSlice(at: body.readerIndex + position - received.lowerBound, length: end - position + 1)
                    else { return nil }
                    slice = part
                } else {
                    guard let held = previous.parts.ranges.locate(position) else { return nil }
                    var end = min(range.upperBound, held.range.upperBound)
                    if received.lowerBound > position { end = min(end, received.lowerBound - 1) }
                    guard
                        let part = previous.body.getSlice(
                            at: previous.body.readerIndex + held.offset + position - held.range.lowerBound,
                            length: end - position + 1)
                    else { return nil }
                    slice = part
                }
                position += slice.readableBytes
                combined.writeBuffer(&slice)
            }
        }
        return combined
    }
}
