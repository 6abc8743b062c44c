import HTTPTypes
import HTTPCaching

/// The namespace generation as last read, and what was worked out for the request targets seen in it: each
/// target's normalized URI and entry key (at most ``keyLimit`` targets and ``byteLimit`` bytes of their text; the
/// table starts over when full or when the generation changes).
///
/// The table is keyed by the target as the request spells it (``RequestTarget``), so that a repeated request
/// neither normalizes its URI, nor hashes it, nor builds its key text again. Spellings that normalize to the same
/// URI each have a row, with the same URI and key.
struct GenerationCache {
    static let keyLimit = 2048
    static let byteLimit = 1 << 20

    var generation: (value: Int, readAt: ContinuousClock.Instant)?
    private(set) var targets: [RequestTarget: ResolvedTarget] = [:]
    private(set) var bytes = 0

    /// `value` read (or set) at `readAt`; the targets of another generation are dropped.
    mutating func record(_ value: Int, readAt: ContinuousClock.Instant) {
        if generation?.value != value { forgetTargets() }
        generation = (value, readAt)
    }

    /// The cached generation, and what is known of `target` in it, when the generation was read less than
    /// `duration` before `now`; nil when it has to be read again.
    func lookUp(_ target: RequestTarget, at now: ContinuousClock.Instant, within duration: Duration) -> (generation: Int, resolved: ResolvedTarget?)? {
        guard let generation, now - generation.readAt < duration else { return nil }
        return (generation.value, targets[target])
    }

    /// Keeps `resolved`, worked out for `target` in `generation`, unless the generation has changed since.
    mutating func remember(_ resolved: ResolvedTarget, for target: RequestTarget, generation: Int) {
        guard self.generation?.value == generation else { return }
        let size = target.byteCount + resolved.uri.utf8.count + resolved.entryKey.utf8.count
        guard size <= Self.byteLimit / 16 else { return }
        if targets.count >= Self.keyLimit || bytes + size > Self.byteLimit { forgetTargets() }
        if targets.updateValue(resolved, forKey: target) == nil { bytes += size }
    }

    private mutating func forgetTargets() {
        targets.removeAll(keepingCapacity: true)
        bytes = 0
    }
}

/// A request target's normalized URI and its entry key in the generation it was worked out for. The key is kept
/// hashed (``StoreKey``), so that a store in this process does not hash it again on each hit.
struct ResolvedTarget: Sendable {
    let uri: String
    let storeKey: StoreKey

    init(uri: String, entryKey: String) {
        self.uri = uri
        self.storeKey = StoreKey(entryKey)
    }

    var entryKey: String { storeKey.string }
}

/// A request's method and target as the request spells them: scheme, authority and path (with the query), not
/// normalized.
///
/// Compared and hashed by their bytes (as ``StoreKey`` is), not by Swift's `String` equality, which takes
/// canonically equivalent Unicode for equal: two targets are the same only when every byte is.
struct RequestTarget: Hashable, Sendable {
    let method: HTTPRequest.Method
    let scheme: String
    let authority: String
    let path: String?

    /// The target of `request`; nil when it has no scheme or authority (as for ``CacheURI/normalized(_:)``).
    init?(_ request: HTTPRequest) {
        guard let scheme = request.scheme, let authority = request.authority, !authority.isEmpty else { return nil }
        self.init(method: request.method, scheme: scheme, authority: authority, path: request.path)
    }

    init(method: HTTPRequest.Method, scheme: String, authority: String, path: String?) {
        self.method = method
        self.scheme = scheme
        self.authority = authority
        self.path = path
    }

    /// The normalized URI, as ``CacheURI/normalized(_:)`` makes it from the request.
    var normalizedURI: String { CacheURI.normalized(scheme: scheme, authority: authority, pathAndQuery: path ?? "/") }

    /// Bytes of text held.
    var byteCount: Int { method.rawValue.utf8.count + scheme.utf8.count + authority.utf8.count + (path?.utf8.count ?? 0) }

    static func == (lhs: RequestTarget, rhs: RequestTarget) -> Bool {
        guard UTF8Bytes.equal(lhs.authority, rhs.authority) else { return false }
        switch (lhs.path, rhs.path) {
        case (let left?, let right?): guard UTF8Bytes.equal(left, right) else { return false }
        case (nil, nil): break
        default: return false
        }
        return UTF8Bytes.equal(lhs.scheme, rhs.scheme) && UTF8Bytes.equal(lhs.method.rawValue, rhs.method.rawValue)
    }

    func hash(into hasher: inout Hasher) {
        // Each part's length too, so that text moved from one part to the next hashes differently.
        func combine(_ part: String) {
            hasher.combine(part.utf8.count)
            UTF8Bytes.combine(part, into: &hasher)
        }
        combine(method.rawValue)
        combine(scheme)
        combine(authority)
        if let path { combine(path) } else { hasher.combine(-1) }
    }
}
