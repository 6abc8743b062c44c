import CacheServer
import CachedTestSupport
import Glibc
import Testing

/// MIGRATE's kept connections: at most 64, the one unused longest making room, each closed after 10 seconds
/// unused.
@Suite("MIGRATE's kept connections")
struct MigrateSocketsTests {
    /// A connection to a loopback listener (which never accepts: the kernel completes the connection).
    private static func connection(to port: Int) throws -> OutboundConnection {
        try OutboundConnection(host: "127.0.0.1", port: port, deadline: monotonicNanoseconds() + 5_000_000_000)
    }

    @Test("a connection taken is out of the cache until kept again, with the database it selected")
    func takeAndKeep() throws {
        let (listener, port) = try listenOnLoopback(backlog: 128)
        defer { close(listener) }
        let sockets = MigrateSockets()
        #expect(sockets.take("127.0.0.1:\(port)") == nil)
        let connection = try Self.connection(to: port)
        sockets.keep(connection, to: "127.0.0.1:\(port)", database: 3, now: 1_000)
        #expect(sockets.count == 1)
        let kept = try #require(sockets.take("127.0.0.1:\(port)"))
        #expect(kept.connection === connection && kept.database == 3 && kept.lastUse == 1_000)
        #expect(sockets.take("127.0.0.1:\(port)") == nil && sockets.count == 0)
        sockets.keep(connection, to: "127.0.0.1:\(port)", database: nil, now: 2_000)
        #expect(sockets.take("127.0.0.1:\(port)")?.database == nil)
    }

    @Test("at most 64 are kept: the one unused longest makes room")
    func capacity() throws {
        let (listener, port) = try listenOnLoopback(backlog: 128)
        defer { close(listener) }
        let sockets = MigrateSockets()
        for i in 0..<MigrateSockets.capacity {
            // Kept in a shuffled order of use: target 7 is the one unused longest.
            sockets.keep(try Self.connection(to: port), to: "t\(i)", database: 0, now: i == 7 ? 0 : Int64(100 + i))
        }
        #expect(sockets.count == 64)
        sockets.keep(try Self.connection(to: port), to: "t0", database: 1, now: 500)  // the same target: replaced
        #expect(sockets.count == 64)
        sockets.keep(try Self.connection(to: port), to: "new", database: 0, now: 501)
        #expect(sockets.count == 64)
        #expect(sockets.take("t7") == nil)
        #expect(sockets.take("t0")?.database == 1)
        #expect(sockets.take("new") != nil && sockets.take("t8") != nil)
    }

    @Test("a connection unused for more than 10 seconds is closed")
    func idleConnectionsClose() throws {
        let (listener, port) = try listenOnLoopback(backlog: 128)
        defer { close(listener) }
        let sockets = MigrateSockets()
        sockets.keep(try Self.connection(to: port), to: "old", database: 0, now: 1_000)
        sockets.keep(try Self.connection(to: port), to: "recent", database: 0, now: 5_000)
        sockets.closeIdle(now: 11_000)
        #expect(sockets.count == 2, "10 s exactly is not longer than 10 s")
        sockets.closeIdle(now: 11_001)
        #expect(sockets.count == 1 && sockets.take("old") == nil)
        sockets.closeIdle(now: 15_001)
        #expect(sockets.count == 0)
    }
}
