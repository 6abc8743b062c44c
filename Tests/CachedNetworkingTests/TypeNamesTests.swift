import CachedNetworking
import CachedNetworkingTesting
import Testing

/// An app's own types with the SDK's names: in this scope the plain names mean the app's types, as they would in an
/// app's module.
private enum AppWithItsOwnNames {
    struct CachePolicy { var maxAge = 60 }
    struct CacheStore {}
    struct HTTPTransport {}
    struct MemoryStore {}
    struct CachedRepository {}

    static func configure() -> (CachedNetworking.CachePolicy, CachePolicy) {
        (CachedNetworking.CachePolicy.returnCacheDataElseLoad, CachePolicy())
    }

    static func store() -> any CachedNetworking.CacheStore {
        CachedNetworking.MemoryStore(maxBytes: 1 << 20, cleanupInterval: nil, clock: CachedNetworking.SystemCacheClock())
    }

    static func transport() -> any CachedNetworking.HTTPTransport { FakeHTTPTransport() }

    static func repository(_ cache: CachedNetworking) -> CachedNetworking.CachedRepository<Int> {
        CachedNetworking.CachedRepository<Int>(lifetime: .seconds(1)) { 1 }
    }
}

@Suite("The SDK's types, named through CachedNetworking")
struct TypeNamesTests {
    @Test("CachedNetworking.X names the SDK's X where an app has an X of its own")
    func appWithItsOwnNames() async throws {
        let (sdk, app) = AppWithItsOwnNames.configure()
        #expect(sdk == .returnCacheDataElseLoad)
        #expect(app.maxAge == 60)
        let cache = CachedNetworking(store: AppWithItsOwnNames.store(), transport: AppWithItsOwnNames.transport())
        #expect(try await AppWithItsOwnNames.repository(cache).value() == 1)
    }

    @Test("the names are the types themselves")
    func sameTypes() {
        #expect(CachedNetworking.CachePolicy.self == CachePolicy.self)
        #expect(CachedNetworking.CachedResponse.self == CachedResponse.self)
        #expect(CachedNetworking.CachedNetworkingError.self == CachedNetworkingError.self)
        #expect(CachedNetworking.SystemCacheClock.self == SystemCacheClock.self)
        #expect(CachedNetworking.LifetimeOverride.self == LifetimeOverride.self)
        #expect(CachedNetworking.HTTPTransportResponse.self == HTTPTransportResponse.self)
        #expect(CachedNetworking.HTTPTransportError.self == HTTPTransportError.self)
        #expect(CachedNetworking.CacheStoreCallStyle.self == CacheStoreCallStyle.self)
        #expect(CachedNetworking.CacheStoreDeadline.self == CacheStoreDeadline.self)
        #expect(CachedNetworking.URLSessionTransport.self == URLSessionTransport.self)
        #expect(CachedNetworking.CacheStoreError.self == CacheStoreError.self)
        #expect(CachedNetworking.MemoryStore.self == MemoryStore.self)
        #expect(CachedNetworking.FailOpenStore<MemoryStore>.self == FailOpenStore<MemoryStore>.self)
        #expect(CachedNetworking.CachedRepository<Int>.self == CachedRepository<Int>.self)
        #expect(CachedNetworking.CachedRepositoryError.self == CachedRepositoryError.self)
        #expect(CachedNetworking.CachedValue<Int>.self == CachedValue<Int>.self)
        #expect(CachedNetworking.CachedValueSource.self == CachedValueSource.self)
        #expect(CachedNetworking.CacheStatus.self == CacheStatus.self)
        #expect(CachedNetworking.CachingRules.self == CachingRules.self)
        #expect((any CachedNetworking.CacheStore).self == (any CacheStore).self)
        #expect((any CachedNetworking.HTTPTransport).self == (any HTTPTransport).self)
        #expect((any CachedNetworking.CacheClock).self == (any CacheClock).self)
        #expect(CachedNetworking.CachedNetworkingMetrics.hits == CachedNetworkingMetrics.hits)
        #expect(CachedNetworking.CachedNetworkingLogKeys.host == CachedNetworkingLogKeys.host)
    }
}
