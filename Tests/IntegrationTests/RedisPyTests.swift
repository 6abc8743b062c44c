import CachedTestSupport
import Testing

/// redis-py, the Python client, over both protocol versions (`Python/redis_py_client.py` holds the checks:
/// HELLO, strings, counters, expiry, nil values, pipelines, transactions with WATCH, decoded responses).
@Suite("redis-py")
struct RedisPyTests {
    @Test("redis-py over RESP3 (protocol=3: HELLO 3 on connect)", arguments: [ServerProcess.Kind.redis, .cached])
    func resp3(_ kind: ServerProcess.Kind) throws {
        try runClient(kind, protocol: 3)
    }

    @Test("redis-py over RESP2 (protocol=2)", arguments: [ServerProcess.Kind.redis, .cached])
    func resp2(_ kind: ServerProcess.Kind) throws {
        try runClient(kind, protocol: 2)
    }

    private func runClient(_ kind: ServerProcess.Kind, protocol version: Int) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }

        let out = try PythonScript.run("redis_py_client.py", [String(server.port), String(version)])
        #expect(out.status == 0, "\(out.standardError)\(out.standardOutput)")
    }
}
