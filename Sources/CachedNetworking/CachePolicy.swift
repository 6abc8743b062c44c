/// How a request uses the cache, after Foundation's `URLRequest.CachePolicy`.
///
/// A struct over a private enum so that policies can be added without breaking callers.
public struct CachePolicy: Sendable, Hashable, CustomStringConvertible {
    enum Base: Sendable, Hashable {
        case useProtocol, returnCacheDataElseLoad, returnCacheDataDontLoad, reloadIgnoringLocalCacheData
        case reloadRevalidatingCacheData
        /// Internal: the protocol's rules, except that a stale response is validated before it answers.
        case refreshStale
    }
    let base: Base

    /// The HTTP caching rules (RFC 9111 for a shared cache, RFC 5861): the default.
    public static let useProtocolCachePolicy = CachePolicy(base: .useProtocol)
    /// Use any stored response, however stale; load from the origin only when nothing is stored.
    public static let returnCacheDataElseLoad = CachePolicy(base: .returnCacheDataElseLoad)
    /// Use any stored response, however stale; never contact the origin: a 504 when nothing is stored
    /// (like `Cache-Control: only-if-cached`).
    public static let returnCacheDataDontLoad = CachePolicy(base: .returnCacheDataDontLoad)
    /// Ignore what is stored: load from the origin (and store the response when allowed).
    public static let reloadIgnoringLocalCacheData = CachePolicy(base: .reloadIgnoringLocalCacheData)
    /// Validate any stored response with the origin before using it (like `Cache-Control: no-cache`).
    public static let reloadRevalidatingCacheData = CachePolicy(base: .reloadRevalidatingCacheData)
    /// The HTTP caching rules, except that a stale response is never served as it is, not even inside
    /// `stale-while-revalidate`: it is validated first (as with a request's `min-fresh=0`). What prefetching
    /// uses, so that it returns once the response is stored.
    static let refreshStale = CachePolicy(base: .refreshStale)

    public var description: String {
        switch base {
        case .useProtocol: "useProtocolCachePolicy"
        case .returnCacheDataElseLoad: "returnCacheDataElseLoad"
        case .returnCacheDataDontLoad: "returnCacheDataDontLoad"
        case .reloadIgnoringLocalCacheData: "reloadIgnoringLocalCacheData"
        case .reloadRevalidatingCacheData: "reloadRevalidatingCacheData"
        case .refreshStale: "refreshStale"
        }
    }
}
