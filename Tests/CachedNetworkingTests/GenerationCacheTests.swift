import HTTPTypes
import Testing

@testable import CachedNetworking

/// What is kept beside the cached namespace generation: per request target, its normalized URI and entry key;
/// only for the generation they were worked out for, and bounded in number and bytes.
struct GenerationCacheTests {
    private func target(_ index: Int) -> RequestTarget {
        RequestTarget(method: .get, scheme: "https", authority: "api.example.com", path: "/items/\(index)")
    }

    private func resolved(_ index: Int, generation: Int) -> ResolvedTarget {
        ResolvedTarget(uri: "https://api.example.com/items/\(index)", entryKey: "ns:\(generation):\(index)")
    }

    @Test func targetsAreDroppedWhenTheGenerationChanges() {
        var cache = GenerationCache()
        cache.record(3, readAt: .now)
        cache.remember(resolved(1, generation: 3), for: target(1), generation: 3)
        #expect(cache.targets[target(1)]?.entryKey == "ns:3:1")

        // The same generation read again keeps them; another one drops them.
        cache.record(3, readAt: .now)
        #expect(cache.targets[target(1)]?.entryKey == "ns:3:1")
        cache.record(4, readAt: .now)
        #expect(cache.targets.isEmpty)
        #expect(cache.bytes == 0)
    }

    @Test func aKeyBuiltForAnOlderGenerationIsNotKept() {
        var cache = GenerationCache()
        cache.remember(resolved(1, generation: 0), for: target(1), generation: 0)
        #expect(cache.targets.isEmpty)
        cache.record(5, readAt: .now)
        cache.remember(resolved(1, generation: 4), for: target(1), generation: 4)
        #expect(cache.targets.isEmpty)
    }

    @Test func aTargetIsKnownOnlyWhileTheGenerationIsFresh() {
        var cache = GenerationCache()
        let readAt = ContinuousClock.now
        #expect(cache.lookUp(target(1), at: readAt, within: .seconds(1)) == nil)
        cache.record(2, readAt: readAt)
        cache.remember(resolved(1, generation: 2), for: target(1), generation: 2)
        let known = cache.lookUp(target(1), at: readAt + .milliseconds(500), within: .seconds(1))
        #expect(known?.generation == 2 && known?.resolved?.entryKey == "ns:2:1")
        #expect(cache.lookUp(target(2), at: readAt, within: .seconds(1))?.resolved == nil)
        // Past the duration the generation has to be read again, and nothing is answered from the table.
        #expect(cache.lookUp(target(1), at: readAt + .seconds(1), within: .seconds(1)) == nil)
    }

    @Test func theTableIsBounded() {
        var cache = GenerationCache()
        cache.record(1, readAt: .now)
        for index in 0..<(GenerationCache.keyLimit * 3) {
            cache.remember(resolved(index, generation: 1), for: target(index), generation: 1)
            #expect(cache.targets.count <= GenerationCache.keyLimit)
            #expect(cache.bytes <= GenerationCache.byteLimit)
        }
        let huge = String(repeating: "x", count: GenerationCache.byteLimit / 8)
        let hugeTarget = RequestTarget(method: .get, scheme: "https", authority: "api.example.com", path: "/" + huge)
        cache.remember(ResolvedTarget(uri: "https://api.example.com/" + huge, entryKey: huge), for: hugeTarget, generation: 1)
        #expect(cache.targets[hugeTarget] == nil)
    }

    @Test func targetsAreComparedByTheirBytes() {
        let composed = RequestTarget(method: .get, scheme: "https", authority: "example.com", path: "/caf\u{E9}")
        let decomposed = RequestTarget(method: .get, scheme: "https", authority: "example.com", path: "/cafe\u{301}")
        // Swift's String equality takes these for equal (canonical equivalence); their bytes differ, and so do
        // their store keys.
        #expect("/caf\u{E9}" == "/cafe\u{301}")
        #expect(composed != decomposed)
        #expect(composed == RequestTarget(method: .get, scheme: "https", authority: "example.com", path: "/caf\u{E9}"))

        // Every part counts, and a missing path is not the empty one.
        let base = RequestTarget(method: .get, scheme: "https", authority: "example.com", path: "/a")
        #expect(base != RequestTarget(method: .head, scheme: "https", authority: "example.com", path: "/a"))
        #expect(base != RequestTarget(method: .get, scheme: "http", authority: "example.com", path: "/a"))
        #expect(base != RequestTarget(method: .get, scheme: "https", authority: "example.org", path: "/a"))
        #expect(base != RequestTarget(method: .get, scheme: "https", authority: "example.com", path: "/b"))
        #expect(
            RequestTarget(method: .get, scheme: "https", authority: "example.com", path: nil)
                != RequestTarget(method: .get, scheme: "https", authority: "example.com", path: ""))

        var table: [RequestTarget: Int] = [composed: 1, decomposed: 2, base: 3]
        table[RequestTarget(method: .get, scheme: "https", authority: "example.com", path: "/a")] = 4
        #expect(table.count == 3 && table[base] == 4 && table[composed] == 1 && table[decomposed] == 2)
    }

    @Test func aTargetNormalizesAsItsRequestDoes() throws {
        let requests = [
            HTTPRequest(method: .get, scheme: "HTTPS", authority: "API.Example.com:443", path: "/a%2fb?q=1"),
            HTTPRequest(method: .get, scheme: "https", authority: "api.example.com", path: nil),
            HTTPRequest(method: .get, scheme: "https", authority: "api.example.com", path: "/x#frag"),
        ]
        for request in requests {
            let target = try #require(RequestTarget(request))
            #expect(target.normalizedURI == CacheURI.normalized(request))
        }
        #expect(RequestTarget(HTTPRequest(method: .get, scheme: "https", authority: "", path: "/")) == nil)
        #expect(RequestTarget(HTTPRequest(method: .get, scheme: nil, authority: "example.com", path: "/")) == nil)
    }
}
