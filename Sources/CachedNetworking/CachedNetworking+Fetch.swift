#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import HTTPTypes
import Logging
import NIOCore

extension CachedNetworking {
    // MARK: - Misses

    /// Fetches a miss, joining an identical fetch already running in this process.
    func fetchCoalesced(
        _ context: RequestContext,
        lookup: Lookup,
        forward: CacheStatus.ForwardReason
    ) async throws(CachedNetworkingError) -> CachedResponse {
        let flightKey = FlightKey(
            kind: .miss, reason: forward.token, method: context.method.rawValue, target: context.uri,
            credentials: context.credentialsDigest)
        let (result, leader) = await flights.run(flightKey) {
            await self.fetchWithLease(context, lookup: lookup, forward: forward)
        }
        let outcome = try result.get()
        if leader { return answer(outcome) }
        guard outcome.shareable, outcome.vary.map({ !$0.isWildcard && $0.matches(storedValues: outcome.varyValues, requestFields: context.request.headerFields) }) ?? true
        else {
            return answer(try await fetchWithLease(context, lookup: lookup, forward: forward).get())
        }
        metrics.coalesced("process")
        var shared = outcome
        shared.source = .coalesced
        shared.status.collapsed = true
        return answer(shared)
    }

    func answer(_ outcome: FlightOutcome) -> CachedResponse {
        makeResponse(outcome.response, body: outcome.body, source: outcome.source, status: outcome.status, entry: outcome.entry)
    }

    /// Takes the cross-process lease (or waits for its holder's response), then fetches and stores.
    func fetchWithLease(_ context: RequestContext, lookup: Lookup, forward: CacheStatus.ForwardReason) async -> FlightResult {
        var leaseKey: String? = nil
        if let entryKey = lookup.entryKey, !context.directives.noStore {
            let lockKey = CacheKeys.lockKey(entryKey: entryKey)
            switch await store.setIfAbsent(lockKey, leaseToken, ttl: configuration.leaseDuration) {
            case .value(true):
                leaseKey = lockKey
                // Another process may have stored the response between our lookup and the lease.
                if forward != .request, let outcome = await usableStored(context) {
                    await store.remove([lockKey])
                    return .success(outcome)
                }
            case .value(false):
                if forward != .request, let outcome = await waitForLease(context, lockKey: lockKey) {
                    metrics.coalesced("lease")
                    return .success(outcome)
                }
            case .failed:
                break
            }
        }
        let result = await fetchAndStore(context, lookup: lookup, forward: forward, fetchReason: forward == .request ? "reload" : "miss")
        if let leaseKey { await releaseLease(leaseKey) }
        return result
    }

    /// Removes the fetch lease `key`. The fetch runs in the requesting task: when that task was cancelled, a
    /// store call made from it could give up at once, so the lease is removed from a task of its own.
    func releaseLease(_ key: String) async {
        guard Task.isCancelled else {
            await store.remove([key])
            return
        }
        let store = self.store
        Task { await store.remove([key]) }
    }

    /// A stored response that can answer `context` as it stands (fresh, or stale as allowed), as a hit.
    func usableStored(_ context: RequestContext, source: CachedResponse.Source = .cache, collapsed: Bool = false) async -> FlightOutcome? {
        let again = await lookup(context)
        guard let found = again.entry else { return nil }
        let decision = ReuseDecision.evaluate(prepared: found.prepared, requestDirectives: context.directives, now: now())
        guard decision.action == .serveFresh || decision.action == .serveStale else { return nil }
        metrics.hits.increment()
        var member = CacheStatus(cacheName: configuration.cacheName)
        member.hit = true
        member.timeToLive = decision.timeToLive
        member.collapsed = collapsed
        let served = serveStored(found, context: context, decision: decision, source: source, status: member)
        var response = served.response
        response.headerFields[.cacheStatus] = found.entry.response.headerFields[.cacheStatus]
        return FlightOutcome(
            response: response, body: served.body, status: member, source: source, entry: served.entry,
            shareable: true, vary: Vary(found.entry.response.headerFields),
            varyValues: found.entry.varyValues.map(\.1))
    }

    /// Polls the store while another process holds the fetch lease: its stored response, or nil when the lease
    /// ends without one (the holder died, or the response was not storable) or the wait runs out.
    func waitForLease(_ context: RequestContext, lockKey: String) async -> FlightOutcome? {
        let deadline = ContinuousClock.now + configuration.leaseWait
        while ContinuousClock.now < deadline {
            do {
                try await Task.sleep(for: configuration.leasePollInterval)
            } catch {
                return nil
            }
            if let outcome = await usableStored(context, source: .coalesced, collapsed: true) { return outcome }
            switch await store.get(lockKey) {
            case .value(.some):
                continue
            case .value(.none):
                // The lease is gone. Its holder stores the response before releasing it, so a response stored
                // just after the read above is visible now: look once more before fetching.
                return await usableStored(context, source: .coalesced, collapsed: true)
            case .failed:
                return nil
            }
        }
        log.debug("gave up waiting for another process's fetch", metadata: [CachedNetworkingLogKeys.key: "\(lockKey)"])
        return nil
    }

    /// Sends the request to the origin and stores the response when allowed.
    func fetchAndStore(
        _ context: RequestContext,
        lookup: Lookup,
        forward: CacheStatus.ForwardReason,
        fetchReason: String
    ) async -> FlightResult {
        metrics.originFetch(fetchReason)
        let fetched: (HTTPTransportResponse, Date, Date)
        do {
            fetched = try await send(context.request, body: context.body, through: context.transport)
        } catch {
            return .failure(error)
        }
        let (answer, requestTime, responseTime) = fetched
        let stored = await storeResponse(
            answer, context: context, lookup: lookup, requestTime: requestTime, responseTime: responseTime)
        await updateStoredGET(afterHead: answer.response, context: context, requestTime: requestTime, responseTime: responseTime)
        var member = CacheStatus(cacheName: configuration.cacheName)
        member.forward = forward
        member.stored = stored.entry != nil
        let vary = Vary(answer.response.headerFields)
        // A 206's body is one part: it names no stored entry, whose body is another (the parts combined, or the
        // whole once complete), as a range cut from a stored response does not.
        let entry = answer.response.status.code == 206 ? nil : stored.entry
        return .success(
            FlightOutcome(
                response: answer.response, body: answer.body, status: member, source: .network,
                entry: entry, shareable: stored.shareable, vary: vary,
                varyValues: vary?.selectingValues(from: context.request.headerFields) ?? []))
    }

    // MARK: - Storing

    /// Stores `answer` for `context` when the shared-cache rules allow it.
    /// - Returns: The stored entry's identity, and whether the response may be shared at all.
    func storeResponse(
        _ answer: HTTPTransportResponse,
        context: RequestContext,
        lookup: Lookup,
        requestTime: Date,
        responseTime: Date,
        existing: FoundEntry? = nil,
        storedAt: Date? = nil
    ) async -> (entry: CachedResponse.EntryIdentity?, shareable: Bool) {
        // `answer` came through `send`, which removed hop-by-hop fields (or is a stored response merged with a 304).
        let cleaned = answer.response
        // The response's `Cache-Control`, parsed once: for the decision here and for the prepared entry below.
        let responseDirectives = ResponseCacheControl(cleaned.headerFields, rules: configuration.rules)
        let decision = StorageDecision.evaluate(
            request: context.request, requestDirectives: context.directives, response: cleaned,
            responseDirectives: responseDirectives, rules: configuration.rules)
        guard decision.isStorable, let entryKey = lookup.entryKey else {
            if let existing, !decision.isStorable { await store.remove([existing.key]) }
            return (nil, decision.isStorable)
        }
        switch cleaned.status.code {
        case 206:
            // A range where a validation expected the whole: the stored response is not confirmed, and is removed.
            if let existing {
                await store.remove([existing.key])
                return (nil, context.request.headerFields[.range] != nil)
            }
            return await storePartial(
                answer, context: context, lookup: lookup, entryKey: entryKey, requestTime: requestTime,
                responseTime: responseTime, directives: responseDirectives)
        case 416:
            // It says a client's range cannot be satisfied: no answer to any other request (RFC 9110 §15.5.17). A
            // stored response it was meant to validate is not confirmed, and is removed.
            if let existing { await store.remove([existing.key]) }
            return (nil, false)
        default:
            break
        }
        guard answer.body.readableBytes <= configuration.maximumStoredBodySize else {
            // Served, not stored; and a stored response it replaces is out of date.
            log.debug(
                "not stored: a body of \(answer.body.readableBytes) bytes, over maximumStoredBodySize",
                metadata: [CachedNetworkingLogKeys.uri: "\(context.uri)"])
            if let existing { await store.remove([existing.key]) }
            return (nil, true)
        }
        let override = configuration.lifetimeOverride(for: context.request).map { Int($0.components.seconds) }
        let vary = Vary(cleaned.headerFields)
        let values = vary?.selectingValues(from: context.request.headerFields) ?? []
        let entry = StoredEntry(
            method: context.method.rawValue,
            uri: context.uri,
            varyValues: vary.map { Array(zip($0.fieldNames, values)) } ?? [],
            response: cleaned,
            body: answer.body,
            storedAt: storedAt ?? now(),
            requestTime: requestTime,
            responseTime: responseTime,
            lifetimeOverride: override
        )
        // The lifetime, the initial age and the directives, worked out once: for the TTL here, and kept with the
        // entry by a store that keeps decoded entries.
        let prepared = PreparedStoredResponse(entry.info, directives: responseDirectives, rules: configuration.rules)
        let (ttl, usefulWithoutValidator) = storeTTL(prepared)
        // A response that is already stale, cannot be validated and has no stale window is of no use.
        guard usefulWithoutValidator || Validation.hasValidator(cleaned.headerFields) else { return (nil, true) }

        var key = entryKey
        if let vary {
            var index: CacheEnvelope.VaryIndex
            var write: Bool
            if let existing = lookup.index, existing.fieldNames == vary.fieldNames {
                index = existing
                write = false
            } else {
                index = CacheEnvelope.VaryIndex(
                    nonce: UInt64.random(in: .min ... .max), method: entry.method, uri: entry.uri,
                    fieldNames: vary.fieldNames)
                write = true
            }
            let hash = CacheKeys.variantHash(secondaryKey: vary.secondaryKey(values: values))
            guard await recordVariantUse(hash, in: &index, entryKey: entryKey, ttl: ttl, mustWrite: write) else {
                return (nil, true)
            }
            key = CacheKeys.variantKey(entryKey: entryKey, nonce: index.nonce, hash: hash)
        }
        guard await store.setEnvelope(key, .response(entry), prepared: prepared, ttl: ttl) else { return (nil, true) }
        metrics.stores.increment()
        return (CachedResponse.EntryIdentity(key: key, version: entry.version), true)
    }

    /// Records in `index`, the `Vary` index under `entryKey`, that its variant `hash` is stored or served now;
    /// writes the index when that changed it (or `mustWrite`), to live at least as long as a variant stored for
    /// `ttl`, and removes the least recently used variants beyond ``Configuration/maximumVariantsPerURL``.
    /// - Returns: false when the index had to be written and the store did not take it.
    func recordVariantUse(
        _ hash: UInt64, in index: inout CacheEnvelope.VaryIndex, entryKey: String, ttl: Duration, mustWrite: Bool
    ) async -> Bool {
        let (changed, evicted) = noteVariantUse(hash, in: &index)
        guard changed || mustWrite else { return true }
        let indexTTL = max(ttl, configuration.varyIndexLifetime)
        guard await store.setEnvelope(entryKey, .varyIndex(index), prepared: nil, ttl: indexTTL) else { return false }
        if !evicted.isEmpty {
            metrics.variantsEvicted.increment(by: Int64(evicted.count))
            await store.remove(evicted.map { CacheKeys.variantKey(entryKey: entryKey, nonce: index.nonce, hash: $0) })
        }
        return true
    }

    /// `index` with its variant `hash` recorded as used now, in memory only
    /// (``CacheEnvelope/VaryIndex/recordUse(of:at:limit:granularity:)``).
    func noteVariantUse(_ hash: UInt64, in index: inout CacheEnvelope.VaryIndex) -> (changed: Bool, evicted: [UInt64]) {
        index.recordUse(
            of: hash, at: Int64(now().timeIntervalSince1970.rounded(.down)), limit: configuration.maximumVariantsPerURL,
            granularity: Self.variantUseGranularity)
    }

    /// Records that the variant `hash` of `index`, the `Vary` index read under `entryKey`, was served now, when
    /// that changes the index (at most once a minute per variant): as background work, so that the hit does not
    /// wait for the write. The work reads the index again and records the use in the index as it is then, under
    /// the entry's lock (so that uses of other variants recorded in this process are kept); when the index was
    /// replaced meanwhile (another nonce: the `Vary` field names changed) or is gone, it writes nothing.
    func recordVariantUseInBackground(
        _ hash: UInt64, of index: CacheEnvelope.VaryIndex, entryKey: String, ttl: Duration
    ) {
        var touched = index
        guard noteVariantUse(hash, in: &touched).changed else { return }
        let nonce = index.nonce
        trackBackground(CacheKeys.variantKey(entryKey: entryKey, nonce: nonce, hash: hash) + "#use") {
            await self.entryWrites.withLock(entryKey) {
                let read = await self.store.getEnvelope(entryKey, rules: self.configuration.rules)
                guard case .value(.found(let decoded)) = read, case .varyIndex(var current) = decoded.envelope,
                    current.nonce == nonce
                else { return }
                _ = await self.recordVariantUse(hash, in: &current, entryKey: entryKey, ttl: ttl, mustWrite: false)
            }
        }
    }

    /// How fresh a variant's recorded last use may be before a hit records it again, in seconds.
    static let variantUseGranularity: Int64 = 60

    /// The TTL of an entry stored as `prepared`: its remaining freshness, its stale windows and
    /// ``Configuration/staleRetention``; and whether it has freshness or a stale window left (otherwise only a
    /// validator makes it worth storing).
    func storeTTL(_ prepared: PreparedStoredResponse) -> (ttl: Duration, usefulWithoutValidator: Bool) {
        let remaining = max(0, prepared.freshnessLifetime.seconds - prepared.correctedInitialAge)
        let directives = prepared.directives
        // A stale response may answer while the origin is unreachable only without a directive that forbids it.
        let disconnectedWindow =
            directives.requiresRevalidationWhenStale || directives.requiresValidationBeforeUse
            ? 0 : min(Int(configuration.staleWhenDisconnected.components.seconds), maximumDeltaSeconds)
        let staleWindows = max(directives.staleWhileRevalidate ?? 0, directives.staleIfError ?? 0, disconnectedWindow)
        // Each part is at most maximumDeltaSeconds (2^31), so the sum cannot overflow, however large the
        // configured durations.
        let retention = min(max(0, Int(configuration.staleRetention.components.seconds)), maximumDeltaSeconds)
        let seconds = remaining + staleWindows + retention
        return (.seconds(seconds), remaining > 0 || staleWindows > 0)
    }

    // MARK: - Validation

    /// Validates a stored response with the origin, joining an identical validation already running here.
    func validate(
        _ found: FoundEntry,
        decision: ReuseDecision,
        context: RequestContext,
        lookup: Lookup
    ) async throws(CachedNetworkingError) -> CachedResponse {
        let flightKey = FlightKey(
            kind: .validate, reason: "", method: "", target: found.key, credentials: context.credentialsDigest)
        let (result, leader) = await flights.run(flightKey) {
            await self.revalidate(found, decision: decision, context: context, lookup: lookup, fetchReason: "validation")
        }
        var outcome = try result.get()
        if !leader {
            metrics.coalesced("process")
            outcome.source = .coalesced
            outcome.status.collapsed = true
        }
        return answer(outcome)
    }

    /// Sends the conditional request and handles 304 (merge and store), errors (`stale-if-error`) and new
    /// responses (store in place of the old one).
    func revalidate(
        _ found: FoundEntry,
        decision: ReuseDecision,
        context: RequestContext,
        lookup: Lookup,
        fetchReason: String
    ) async -> FlightResult {
        metrics.originFetch(fetchReason)
        // `fwd=request` only when the request's directives sent a fresh response to the origin; a response that
        // must be validated before every use (`no-cache`) is validated as a stale one is.
        let prepared = found.prepared
        let byResponse = prepared.directives.requiresValidationBeforeUse && prepared.info.lifetimeOverride == nil
        let forward: CacheStatus.ForwardReason = decision.isFresh && !byResponse ? .request : .stale
        let conditional = Validation.conditionalRequest(for: context.request, stored: found.entry.response.headerFields) ?? context.request
        let fetched: (HTTPTransportResponse, Date, Date)
        do {
            fetched = try await send(conditional, body: context.body, through: context.transport)
        } catch {
            metrics.revalidation("error")
            if decision.staleIfErrorAllowed, error.kind == .transport {
                return .success(staleOnError(found, decision: decision, context: context, forward: forward, status: nil))
            }
            if Self.isDisconnection(error), servesStaleWhenDisconnected(decision) {
                return .success(
                    staleOnError(found, decision: decision, context: context, forward: forward, status: nil, disconnected: true))
            }
            return .failure(error)
        }
        let (answer, requestTime, responseTime) = fetched
        let code = answer.response.status.code
        if code == 304 && Validation.notModified(answer.response.headerFields, selects: found.entry.response.headerFields) {
            metrics.revalidation("not_modified")
            var updated = found.entry
            updated.markedStale = false
            updated.response.headerFields = Validation.merging(found.entry.response.headerFields, with: answer.response.headerFields)
            let merged = HTTPTransportResponse(response: updated.response, body: updated.body)
            let stored = await storeResponse(
                merged, context: context, lookup: lookup, requestTime: requestTime, responseTime: responseTime,
                existing: found, storedAt: found.entry.storedAt)
            updated.requestTime = requestTime
            updated.responseTime = responseTime
            var member = CacheStatus(cacheName: configuration.cacheName)
            member.forward = forward
            member.forwardStatus = 304
            let updatedFound = FoundEntry(entry: updated, key: stored.entry?.key ?? found.key, rules: configuration.rules)
            let newDecision = ReuseDecision.evaluate(
                prepared: updatedFound.prepared, requestDirectives: RequestCacheControl(), now: now())
            let served = serveStored(
                updatedFound, context: context, decision: newDecision, source: .revalidated, status: member)
            var response = served.response
            response.headerFields[.cacheStatus] = updated.response.headerFields[.cacheStatus]
            return .success(
                FlightOutcome(
                    response: response, body: served.body, status: member, source: .revalidated, entry: served.entry,
                    shareable: true, vary: Vary(updated.response.headerFields), varyValues: updated.varyValues.map(\.1)))
        }
        if code == 304 {
            // The 304 is for another representation: fetch the whole response.
            metrics.revalidation("modified")
            return await fetchAndStore(context, lookup: lookup, forward: forward, fetchReason: fetchReason)
        }
        if staleIfErrorStatusCodes.contains(code), decision.staleIfErrorAllowed {
            metrics.revalidation("error")
            return .success(staleOnError(found, decision: decision, context: context, forward: forward, status: code))
        }
        if code == 502 || code == 504, servesStaleWhenDisconnected(decision) {
            metrics.revalidation("error")
            return .success(
                staleOnError(found, decision: decision, context: context, forward: forward, status: code, disconnected: true))
        }
        metrics.revalidation("modified")
        let stored = await storeResponse(
            answer, context: context, lookup: lookup, requestTime: requestTime, responseTime: responseTime, existing: found)
        await updateStoredGET(afterHead: answer.response, context: context, requestTime: requestTime, responseTime: responseTime)
        var member = CacheStatus(cacheName: configuration.cacheName)
        member.forward = forward
        member.stored = stored.entry != nil
        let vary = Vary(answer.response.headerFields)
        return .success(
            FlightOutcome(
                response: answer.response, body: answer.body, status: member, source: .network, entry: stored.entry,
                shareable: stored.shareable, vary: vary,
                varyValues: vary?.selectingValues(from: context.request.headerFields) ?? []))
    }

    /// After a `200` to a HEAD request the cache sent, updates the stored GET response that the same request
    /// would have chosen (RFC 9111 §4.3.5): when the HEAD response's validators and `Content-Length` agree with
    /// it (``Validation/headResponse(_:canUpdate:storedContentLength:)``), its header fields are updated with the
    /// HEAD response's (as a 304 updates them, RFC 9111 §3.2; `Content-Length` is never among them) and its times
    /// with the exchange's, and it is written back with its body; otherwise it is considered stale (marked so, its
    /// fields and body unchanged), to be validated before it is served as fresh again. Either is written only over
    /// the response it was read as (``isStillStored(_:)``). Nothing happens for other responses, or when the
    /// request said `no-store`.
    func updateStoredGET(afterHead response: HTTPResponse, context: RequestContext, requestTime: Date, responseTime: Date) async {
        guard context.method == .head, response.status.code == 200, !context.directives.noStore,
            configuration.rules.cacheableMethods.contains(.get)
        else { return }
        var request = context.request
        request.method = .get
        let getContext = RequestContext(
            request: request, method: .get, body: nil, uri: context.uri, policy: context.policy,
            directives: context.directives, transport: context.transport)
        let lookup = await lookup(getContext)
        guard let found = lookup.entry else { return }
        let stored = found.entry
        guard
            Validation.headResponse(
                response.headerFields, canUpdate: stored.response.headerFields,
                storedContentLength: stored.body.readableBytes)
        else {
            log.debug("a HEAD response disagrees with the stored GET response: marked stale", metadata: [CachedNetworkingLogKeys.key: "\(found.key)"])
            await markStale(found)
            return
        }
        var updated = stored.response
        updated.headerFields = Validation.merging(stored.response.headerFields, with: response.headerFields)
        guard await isStillStored(found) else { return }
        _ = await storeResponse(
            HTTPTransportResponse(response: updated, body: stored.body), context: getContext, lookup: lookup,
            requestTime: requestTime, responseTime: responseTime, existing: found, storedAt: stored.storedAt)
    }

    /// Rewrites the stored response of `found` as stale whatever its lifetime (RFC 9111 §4.3.5), with its fields,
    /// body and times unchanged, for as long as it may still be of use: its stale windows and
    /// ``Configuration/staleRetention`` (it keeps its validators). One that is already marked stays as it is.
    func markStale(_ found: FoundEntry) async {
        guard !found.entry.markedStale else { return }
        var marked = found.entry
        marked.markedStale = true
        let prepared = PreparedStoredResponse(marked.info, directives: found.prepared.directives, rules: configuration.rules)
        let (ttl, useful) = storeTTL(prepared)
        guard await isStillStored(found) else { return }
        guard useful || Validation.hasValidator(marked.response.headerFields) else {
            await store.remove([found.key])
            return
        }
        await store.setEnvelope(found.key, .response(marked), prepared: prepared, ttl: ttl)
    }

    /// Whether the response of `found` is still the one stored under its key, read again: one stored meanwhile
    /// (by a GET) is newer than what a HEAD response updated or contradicted, and a write made from `found` would
    /// put the older response back over it.
    func isStillStored(_ found: FoundEntry) async -> Bool {
        guard case .value(.found(let current)) = await store.getEnvelope(found.key, rules: configuration.rules) else {
            return false
        }
        return current.response?.version == found.stored.version
    }

    /// Whether `error` says the origin could not be reached: the transport's ``HTTPTransportError`` of kind
    /// `connectionFailed`, `connectionLost`, `hostNotFound` or `timeout`. An invalid response, a body too large,
    /// or an error of another type is not a disconnection: the origin (or the transport) answered.
    static func isDisconnection(_ error: CachedNetworkingError) -> Bool {
        guard error.kind == .transport, let transportError = error.underlying as? HTTPTransportError else { return false }
        switch transportError.kind {
        case .connectionFailed, .connectionLost, .hostNotFound, .timeout: return true
        default: return false
        }
    }

    /// Whether the origin's failure to answer lets `decision`'s stored response answer in its place
    /// (``Configuration/staleWhenDisconnected``).
    func servesStaleWhenDisconnected(_ decision: ReuseDecision) -> Bool {
        decision.staleWhenDisconnectedAllowed && configuration.staleWhenDisconnected > .zero
            && decision.staleness <= Int(configuration.staleWhenDisconnected.components.seconds)
    }

    /// The stored response served because the origin failed: under `stale-if-error`, or, `disconnected`,
    /// because it could not be reached (``Configuration/staleWhenDisconnected``).
    func staleOnError(
        _ found: FoundEntry,
        decision: ReuseDecision,
        context: RequestContext,
        forward: CacheStatus.ForwardReason,
        status: Int?,
        disconnected: Bool = false
    ) -> FlightOutcome {
        metrics.staleServed(disconnected ? "disconnected" : "stale_if_error")
        var member = CacheStatus(cacheName: configuration.cacheName)
        member.forward = forward
        member.forwardStatus = status
        member.timeToLive = decision.timeToLive
        member.detail = disconnected ? "disconnected" : "stale-if-error"
        let served = serveStored(found, context: context, decision: decision, source: .stale, status: member)
        var response = served.response
        response.headerFields[.cacheStatus] = found.entry.response.headerFields[.cacheStatus]
        return FlightOutcome(
            response: response, body: served.body, status: member, source: .stale, entry: served.entry,
            shareable: true, vary: Vary(found.entry.response.headerFields), varyValues: found.entry.varyValues.map(\.1))
    }

    // MARK: - Background refresh

    /// Starts one background revalidation of `found` (`stale-while-revalidate`): one per entry in this process,
    /// and one across processes through a short lease in the store.
    func scheduleRefresh(_ found: FoundEntry, context: RequestContext, lookup: Lookup) {
        let refreshKey = CacheKeys.refreshKey(entryKey: found.key)
        var request = context.request
        request.headerFields[.cacheControl] = nil
        let refreshContext = RequestContext(
            request: request, body: nil, uri: context.uri, policy: .useProtocolCachePolicy, directives: RequestCacheControl())
        trackBackground(refreshKey) {
            if case .value(false) = await self.store.setIfAbsent(refreshKey, self.leaseToken, ttl: self.configuration.leaseDuration) {
                return
            }
            let decision = ReuseDecision.evaluate(
                prepared: found.prepared, requestDirectives: RequestCacheControl(), now: self.now())
            let result = await self.revalidate(
                found, decision: decision, context: refreshContext, lookup: lookup, fetchReason: "refresh")
            if case .failure(let error) = result {
                self.log.debug(
                    "background revalidation failed",
                    metadata: [CachedNetworkingLogKeys.key: "\(found.key)", CachedNetworkingLogKeys.error: "\(error)"])
            }
            await self.store.remove([refreshKey])
        }
    }
}
