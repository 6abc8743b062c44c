import CachedNetworking
import CachedNetworkingTesting
import HTTPTypes
import Logging
import Testing

@Suite("LifetimeOverride hosts")
struct LifetimeOverrideHostTests {
    func request(_ authority: String, scheme: String = "https") -> HTTPRequest {
        HTTPRequest(method: .get, scheme: scheme, authority: authority, path: "/catalog/1")
    }

    @Test("a host without a port matches it on any port, case-insensitively")
    func anyPort() {
        let rule = LifetimeOverride(host: "API.example.com", lifetime: .seconds(1))
        #expect(rule.matches(request("api.example.com")))
        #expect(rule.matches(request("api.example.com:8443")))
        #expect(rule.matches(request("user@Api.Example.com:443")))
        #expect(!rule.matches(request("example.com")))
        #expect(!rule.matches(request("api.example.com.evil")))
    }

    @Test("host:port matches that port only, a request without a port being on its scheme's default")
    func withPort() {
        let custom = LifetimeOverride(host: "api.example.com:8443", lifetime: .seconds(1))
        #expect(custom.matches(request("api.example.com:8443")))
        #expect(!custom.matches(request("api.example.com")))
        #expect(!custom.matches(request("api.example.com:443")))
        let https = LifetimeOverride(host: "api.example.com:443", lifetime: .seconds(1))
        #expect(https.matches(request("api.example.com")))
        #expect(https.matches(request("api.example.com:443")))
        #expect(!https.matches(request("api.example.com", scheme: "http")))
        let http = LifetimeOverride(host: "api.example.com:80", lifetime: .seconds(1))
        #expect(http.matches(request("api.example.com", scheme: "http")))
    }

    @Test("IPv6 addresses, bracketed or bare, with or without a port")
    func ipv6() {
        #expect(LifetimeOverride(host: "::1", lifetime: .seconds(1)).matches(request("[::1]:9000")))
        #expect(LifetimeOverride(host: "[::1]", lifetime: .seconds(1)).matches(request("[::1]")))
        let withPort = LifetimeOverride(host: "[::1]:8080", lifetime: .seconds(1))
        #expect(withPort.matches(request("[::1]:8080")))
        #expect(!withPort.matches(request("[::1]:8081")))
        #expect(!withPort.matches(request("[::2]:8080")))
    }

    @Test("a host that is neither a host nor host:port matches nothing, and the cache warns about it")
    func unusable() {
        let logged = LogRecorder()
        var configuration = CachedNetworking.Configuration()
        configuration.lifetimeOverrides = [
            LifetimeOverride(host: "api.example.com:https", lifetime: .seconds(1)),
            LifetimeOverride(host: ":8080", lifetime: .seconds(1)),
            LifetimeOverride(host: "api.example.com:8443", lifetime: .seconds(1)),
        ]
        #expect(!configuration.lifetimeOverrides[0].matches(request("api.example.com")))
        #expect(!configuration.lifetimeOverrides[1].matches(request("api.example.com:8080")))
        _ = CachedNetworking(
            store: InMemoryCacheStore(), transport: FakeHTTPTransport(), configuration: configuration,
            logger: Logger(label: "test") { _ in logged })
        let warnings = logged.messages.filter { $0.level == .warning }
        #expect(warnings.count == 2)
        #expect(warnings.map { $0.metadata[CachedNetworkingLogKeys.host] } == ["api.example.com:https", ":8080"])
    }
}
