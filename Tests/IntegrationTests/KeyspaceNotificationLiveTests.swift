import CachedTestSupport
import Foundation
import Testing

/// Keyspace notifications that depend on time or memory, on real servers, checked against redis-server: keys
/// expiring (by the sweeper or when read) and evicted keys reach a subscriber on another connection. The
/// events of each command are compared with Redis's by the differential corpus.
@Suite("Keyspace notifications over the network")
struct KeyspaceNotificationLiveTests {
    static let kinds: [ServerProcess.Kind] = [.redis, .cached]

    private func pmessage(_ pattern: String, _ channel: String, _ message: String) -> RedisReply {
        .array([.bulk("pmessage"), .bulk(pattern), .bulk(channel), .bulk(message)])
    }

    @Test("a key that expires is published as expired (by the sweeper or the read), then the read's keymiss",
          arguments: kinds)
    func expired(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind, arguments: ["--notify-keyspace-events", "KExm"])
        defer { server.stop() }
        let subscriber = try RawConnection(port: server.port)
        try subscriber.send(.respCommand(["PSUBSCRIBE", "__key*@0__:*"]))
        _ = try subscriber.readReplies(1)
        let client = try server.connect()
        #expect(try client.command("SET", "k", "v", "PX", "30") == .ok)
        #expect(try client.command("SET", "kept", "v") == .ok)
        // Whichever removes the key first (the sweeper, or a read finding it expired), the subscriber hears of it
        // once, before the first read that misses.
        try poll("the key expired") { try client.command("GET", "k") == .null }
        #expect(try subscriber.readReplies(4) == [
            pmessage("__key*@0__:*", "__keyspace@0__:k", "expired"),
            pmessage("__key*@0__:*", "__keyevent@0__:expired", "k"),
            pmessage("__key*@0__:*", "__keyspace@0__:k", "keymiss"),
            pmessage("__key*@0__:*", "__keyevent@0__:keymiss", "k"),
        ])
        #expect(try client.command("DBSIZE") == .integer(1))
        #expect(try subscriber.silent(for: 0.2))
    }

    @Test("keys evicted when maxmemory is lowered are published as evicted", arguments: kinds)
    func evicted(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind, arguments: ["--maxmemory-policy", "allkeys-lru"])
        defer { server.stop() }
        let client = try server.connect()
        #expect(try client.command("CONFIG", "SET", "notify-keyspace-events", "Ee") == .ok)
        let subscriber = try RawConnection(port: server.port)
        try subscriber.send(.respCommand(["SUBSCRIBE", "__keyevent@0__:evicted"]))
        _ = try subscriber.readReplies(1)
        #expect(try client.command("SET", "foo", "bar") == .ok)
        // Below what any server uses: every key goes.
        #expect(try client.command("CONFIG", "SET", "maxmemory", "1") == .ok)
        #expect(try subscriber.readReplies(1) == [
            .array([.bulk("message"), .bulk("__keyevent@0__:evicted"), .bulk("foo")]),
        ])
        #expect(try client.command("CONFIG", "SET", "maxmemory", "0") == .ok)
        #expect(try client.command("DBSIZE") == .integer(0))
    }
}
