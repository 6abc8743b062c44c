import HTTPCaching
import HTTPTypes
import Testing

@Suite("Cache-Status (RFC 9211)")
struct CacheStatusTests {
    @Test("a hit with its ttl")
    func hit() {
        var status = CacheStatus(cacheName: "cached")
        status.hit = true
        status.timeToLive = 42
        #expect(status.headerValue == "cached; hit; ttl=42")
    }

    @Test("a miss that was stored")
    func storedMiss() {
        var status = CacheStatus(cacheName: "cached")
        status.forward = .uriMiss
        status.stored = true
        #expect(status.headerValue == "cached; fwd=uri-miss; stored")
    }

    @Test("a revalidation answered 304")
    func revalidated() {
        var status = CacheStatus(cacheName: "cached")
        status.forward = .stale
        status.forwardStatus = 304
        #expect(status.headerValue == "cached; fwd=stale; fwd-status=304")
    }

    @Test("every forward reason has its RFC token")
    func tokens() {
        let reasons: [CacheStatus.ForwardReason] = [.bypass, .method, .uriMiss, .varyMiss, .miss, .request, .stale, .partial]
        #expect(reasons.map(\.token) == ["bypass", "method", "uri-miss", "vary-miss", "miss", "request", "stale", "partial"])
    }

    @Test("names and details that are not tokens are quoted; key is always a string")
    func quoting() {
        var status = CacheStatus(cacheName: "my cache")
        status.collapsed = true
        status.key = "ns:0:GET:https://x/\"q\""
        status.detail = "stale-if-error"
        #expect(status.headerValue == #""my cache"; collapsed; key="ns:0:GET:https://x/\"q\""; detail=stale-if-error"#)
    }

    @Test("members are appended after those of caches nearer the origin")
    func appended() {
        var status = CacheStatus(cacheName: "cached")
        status.hit = true
        let result = status.appended(to: fields([("Cache-Status", "origin-cdn; fwd=miss")]))
        #expect(result[.cacheStatus] == "origin-cdn; fwd=miss, cached; hit")
    }
}
