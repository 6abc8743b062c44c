import Testing

@testable import CachedNetworking

/// The entry keys kept beside the cached namespace generation: only for the generation they were built for, and
/// bounded in number and bytes.
struct GenerationCacheTests {
    private func name(_ index: Int) -> EntryKeyName {
        EntryKeyName(method: .get, uri: "https://api.example.com/items/\(index)")
    }

    @Test func keysAreDroppedWhenTheGenerationChanges() {
        var cache = GenerationCache()
        cache.record(3, readAt: .now)
        cache.remember("ns:3:a", for: name(1), generation: 3)
        #expect(cache.entryKeys[name(1)] == "ns:3:a")

        // The same generation read again keeps them; another one drops them.
        cache.record(3, readAt: .now)
        #expect(cache.entryKeys[name(1)] == "ns:3:a")
        cache.record(4, readAt: .now)
        #expect(cache.entryKeys.isEmpty)
        #expect(cache.bytes == 0)
    }

    @Test func aKeyBuiltForAnOlderGenerationIsNotKept() {
        var cache = GenerationCache()
        cache.remember("ns:0:a", for: name(1), generation: 0)
        #expect(cache.entryKeys.isEmpty)
        cache.record(5, readAt: .now)
        cache.remember("ns:4:a", for: name(1), generation: 4)
        #expect(cache.entryKeys.isEmpty)
    }

    @Test func theTableIsBounded() {
        var cache = GenerationCache()
        cache.record(1, readAt: .now)
        for index in 0..<(GenerationCache.keyLimit * 3) {
            cache.remember("ns:1:\(index)", for: name(index), generation: 1)
            #expect(cache.entryKeys.count <= GenerationCache.keyLimit)
            #expect(cache.bytes <= GenerationCache.byteLimit)
        }
        let huge = String(repeating: "x", count: GenerationCache.byteLimit / 8)
        cache.remember(huge, for: EntryKeyName(method: .get, uri: "https://api.example.com/" + huge), generation: 1)
        #expect(!cache.entryKeys.values.contains(huge))
    }
}
