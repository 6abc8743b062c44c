import CacheServer
import CachedTestSupport
import Glibc
import Testing

/// MIGRATE's kept connections: at most 64, the one unused longest making room, each closed after 10 seconds
/// unused.
@Suite("MIGRATE's kept connections")
struct MigrateSocketsTests {
    /// A connection to a loopback listener, and the listener's end of it (to tell whether it was closed).
    private static func connection(_ listener: CInt, port: Int) throws -> (OutboundConnection, peer: CInt) {
        let connection = try OutboundConnection(host: "127.0.0.1", port: port, deadline: monotonicNanoseconds() + 5_000_000_000)
        let peer = accept(listener, nil, nil)
        try #require(peer >= 0, "accept: errno \(errno)")
        return (connection, peer)
    }

    /// Keeps a new connection to the listener for `target` (the cache holding the only reference), and returns
    /// the listener's end of it.
    private static func keepNew(
        _ listener: CInt, port: Int, in sockets: MigrateSockets, to target: String, database: Int = 0, now: Int64
    ) throws -> CInt {
        let (connection, peer) = try connection(listener, port: port)
        sockets.keep(connection, to: target, database: database, now: now)
        return peer
    }

    /// Whether the other end of the connection whose listener's end is `peer` closes it (within 5 seconds).
    private static func closed(_ peer: CInt) -> Bool {
        var entry = pollfd(fd: peer, events: Int16(POLLIN), revents: 0)
        guard poll(&entry, 1, 5_000) == 1 else { return false }
        var byte: UInt8 = 0
        return recv(peer, &byte, 1, Int32(MSG_DONTWAIT)) == 0
    }

    /// Whether the connection whose listener's end is `peer` is open, with nothing sent on it.
    private static func open(_ peer: CInt) -> Bool {
        var byte: UInt8 = 0
        return recv(peer, &byte, 1, Int32(MSG_DONTWAIT)) < 0 && errno == EAGAIN
    }

    @Test("a connection taken is out of the cache until kept again, with the database it selected")
    func takeAndKeep() throws {
        let (listener, port) = try listenOnLoopback(backlog: 128)
        defer { close(listener) }
        let sockets = MigrateSockets()
        #expect(sockets.take("127.0.0.1:\(port)") == nil)
        let (connection, peer) = try Self.connection(listener, port: port)
        defer { close(peer) }
        sockets.keep(connection, to: "127.0.0.1:\(port)", database: 3, now: 1_000)
        #expect(sockets.count == 1)
        let kept = try #require(sockets.take("127.0.0.1:\(port)"))
        #expect(kept.connection === connection && kept.database == 3 && kept.lastUse == 1_000)
        #expect(sockets.take("127.0.0.1:\(port)") == nil && sockets.count == 0)
        sockets.keep(connection, to: "127.0.0.1:\(port)", database: nil, now: 2_000)
        #expect(sockets.take("127.0.0.1:\(port)")?.database == nil)
        #expect(connection.isQuiet(), "nothing unread, and open")
        #expect(send(peer, "+OK\r\n", 5, 0) == 5)
        #expect(!connection.isQuiet(), "bytes nobody asked for")
    }

    @Test("at most 64 are kept: the one unused longest makes room and is closed")
    func capacity() throws {
        let (listener, port) = try listenOnLoopback(backlog: 128)
        defer { close(listener) }
        let sockets = MigrateSockets()
        var peers: [String: CInt] = [:]
        defer { for peer in peers.values { close(peer) } }
        for i in 0..<MigrateSockets.capacity {
            // Kept in a shuffled order of use: target 7 is the one unused longest.
            peers["t\(i)"] = try Self.keepNew(listener, port: port, in: sockets, to: "t\(i)", now: i == 7 ? 0 : Int64(100 + i))
        }
        #expect(sockets.count == 64)
        // The same target again: the old connection goes.
        let replacementPeer = try Self.keepNew(listener, port: port, in: sockets, to: "t0", database: 1, now: 500)
        #expect(sockets.count == 64 && Self.closed(peers["t0"]!))
        close(peers["t0"]!)
        peers["t0"] = replacementPeer
        peers["new"] = try Self.keepNew(listener, port: port, in: sockets, to: "new", now: 501)
        #expect(sockets.count == 64)
        #expect(Self.closed(peers["t7"]!) && sockets.take("t7") == nil)
        #expect(Self.open(peers["t8"]!) && Self.open(peers["t0"]!))
        #expect(sockets.take("t0")?.database == 1)
        #expect(sockets.take("new") != nil && sockets.take("t8") != nil)
    }

    @Test("a connection unused for more than 10 seconds is closed")
    func idleConnectionsClose() throws {
        let (listener, port) = try listenOnLoopback(backlog: 128)
        defer { close(listener) }
        let sockets = MigrateSockets()
        let oldPeer = try Self.keepNew(listener, port: port, in: sockets, to: "old", now: 1_000)
        let recentPeer = try Self.keepNew(listener, port: port, in: sockets, to: "recent", now: 5_000)
        defer {
            close(oldPeer)
            close(recentPeer)
        }
        sockets.closeIdle(now: 11_000)
        #expect(sockets.count == 2, "10 s exactly is not longer than 10 s")
        #expect(Self.open(oldPeer))
        sockets.closeIdle(now: 11_001)
        #expect(sockets.count == 1 && Self.closed(oldPeer) && Self.open(recentPeer))
        sockets.closeIdle(now: 15_001)
        #expect(sockets.count == 0 && Self.closed(recentPeer))
    }
}
