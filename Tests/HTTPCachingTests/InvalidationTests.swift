import HTTPCaching
import HTTPTypes
import Testing

@Suite("URIs and invalidation")
struct InvalidationTests {
    @Test("normalization lowercases scheme and host, drops default ports, keeps path case and query")
    func normalize() {
        let request = HTTPRequest(method: .get, scheme: "HTTPS", authority: "Example.COM:443", path: "/A/b?q=%2f")
        #expect(CacheURI.normalized(request) == "https://example.com/A/b?q=%2F")
        let other = HTTPRequest(method: .get, scheme: "http", authority: "example.com:8080", path: "")
        #expect(CacheURI.normalized(other) == "http://example.com:8080/")
    }

    @Test("URIs already in normal form come out as they went in; others are normalized", arguments: [
        ("http", "example.com", "/a?b=c", "http://example.com/a?b=c"),
        ("http", "127.0.0.1:8080", "/x", "http://127.0.0.1:8080/x"),
        ("http", "example.com:80", "/x", "http://example.com/x"),
        ("https", "example.com:443", "/x", "https://example.com/x"),
        ("http", "example.com:443", "/x", "http://example.com:443/x"),
        ("http", "example.com:", "/x", "http://example.com/x"),
        ("http", "user@example.com", "/x", "http://example.com/x"),
        ("http", "Example.com", "/x", "http://example.com/x"),
        ("Http", "example.com", "/x", "http://example.com/x"),
        ("http", "[::1]", "/x", "http://[::1]/x"),
        ("http", "[::1]:80", "/x", "http://[::1]/x"),
        ("http", "example.com", "/x#frag", "http://example.com/x"),
        ("http", "example.com", "/x?q=%2f", "http://example.com/x?q=%2F"),
        ("http", "example.com", "?q", "http://example.com/?q"),
        ("http", "example.com", "x", "http://example.com/x"),
        ("http", "exämple.com", "/x", "http://exämple.com/x"),
        // Percent-encodings of unreserved characters are those characters (RFC 3986 §6.2.2.2).
        ("http", "example.com", "/%61bc", "http://example.com/abc"),
        ("http", "example.com", "/x/%7ey?q=%7E%2d%41", "http://example.com/x/~y?q=~-A"),
        ("http", "example.com", "/a%2fb%20c", "http://example.com/a%2Fb%20c"),
        ("http", "example.com", "/a%zz%4", "http://example.com/a%zz%4"),
        // Dot segments stay: the origin gets the path as sent and need not resolve them, so `/x/../y` must not
        // share an entry with `/y`.
        ("http", "example.com", "/x/./y", "http://example.com/x/./y"),
        ("http", "example.com", "/x/../y", "http://example.com/x/../y"),
        ("http", "example.com", "/x/%2E%2E/y", "http://example.com/x/../y"),
    ])
    func normalFormFastPath(scheme: String, authority: String, path: String, expected: String) {
        #expect(CacheURI.normalized(scheme: scheme, authority: authority, pathAndQuery: path) == expected)
    }

    @Test("a request without authority has no cache URI")
    func noAuthority() {
        #expect(CacheURI.normalized(HTTPRequest(method: .get, scheme: "https", authority: nil, path: "/")) == nil)
    }

    @Test("references resolve against the target", arguments: [
        ("/x", "https://example.com/x"),
        ("y", "https://example.com/a/y"),
        ("../z?k=v", "https://example.com/z?k=v"),
        ("?q", "https://example.com/a/b?q"),
        ("//Example.com/p", "https://example.com/p"),
        ("https://other.org/p", "https://other.org/p"),
        ("./c/./d/../e", "https://example.com/a/c/e"),
    ])
    func resolve(reference: String, expected: String) {
        #expect(CacheURI.resolve(reference, against: "https://example.com/a/b?old") == expected)
    }

    @Test("unsafe methods with a success status invalidate the target URI", arguments: [HTTPRequest.Method.post, .put, .delete, .patch])
    func unsafeMethods(method: HTTPRequest.Method) {
        #expect(Invalidation.targets(request: request(method, "/items/1"), response: response(204)) == ["https://example.com/items/1"])
    }

    @Test("a redirect status also invalidates")
    func redirect() {
        #expect(Invalidation.targets(request: request(.post, "/a"), response: response(303)).count == 1)
    }

    @Test("safe methods invalidate nothing", arguments: [HTTPRequest.Method.get, .head, .options, .trace])
    func safeMethods(method: HTTPRequest.Method) {
        #expect(Invalidation.targets(request: request(method), response: response(200)).isEmpty)
    }

    @Test("error statuses invalidate nothing", arguments: [400, 404, 500, 503])
    func errors(status: Int) {
        #expect(Invalidation.targets(request: request(.post), response: response(status)).isEmpty)
    }

    @Test("same-origin Location and Content-Location are invalidated too")
    func locations() {
        let targets = Invalidation.targets(
            request: request(.post, "/items"),
            response: response(201, [("Location", "/items/7"), ("Content-Location", "https://EXAMPLE.com:443/items/7/view")]))
        #expect(targets == ["https://example.com/items", "https://example.com/items/7", "https://example.com/items/7/view"])
    }

    @Test("cross-origin Location is not invalidated")
    func crossOrigin() {
        let targets = Invalidation.targets(
            request: request(.post, "/items"),
            response: response(201, [("Location", "https://evil.example/items/7"), ("Content-Location", "http://example.com/items")]))
        #expect(targets == ["https://example.com/items"])
    }
}
