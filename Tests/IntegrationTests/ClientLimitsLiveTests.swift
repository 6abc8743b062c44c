import CachedTestSupport
import Foundation
import Testing

/// Clients that sit idle or never read their replies, against both servers with the same directives.
@Suite("Idle and slow clients")
struct ClientLimitsLiveTests {
    static let kinds: [ServerProcess.Kind] = [.redis, .cached]

    @Test("--timeout 1: a client that stays silent is disconnected; one that keeps talking is not", arguments: kinds)
    func idleTimeout(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind, arguments: ["--timeout", "1"])
        defer { server.stop() }
        let silent = try RawConnection(port: server.port)
        let talker = try server.connect()
        let start = Date()
        // The silent client is closed within the server's once-a-second check after a second of silence.
        var talked = 0
        while Date().timeIntervalSince(start) < 2.5 {
            #expect(try talker.command("PING") == .status("PONG"))
            talked += 1
            usleep(200_000)
        }
        #expect(try silent.closedByServer(within: 5))
        #expect(try talker.command("PING") == .status("PONG"), "after \(talked) pings 200 ms apart")
    }

    @Test("client-output-buffer-limit: a client that sends but never reads is disconnected; memory stays bounded",
          arguments: kinds)
    func slowReader(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind, arguments: ["--client-output-buffer-limit", "normal 4mb 1mb 2"])
        defer { server.stop() }
        let bystander = try server.connect()
        #expect(try bystander.command("SET", "big", String(repeating: "v", count: 100_000)) == .ok)
        let before = try server.residentBytes()

        // 3000 GETs of a 100 KB value (300 MB of replies), sent without reading a byte.
        let reader = try RawConnection(port: server.port)
        let request = [UInt8](repeating: 0, count: 0) + Array(String(repeating: "GET big\r\n", count: 3000).utf8)
        _ = reader.trySend(request)
        // Not a byte read for a second, time enough for the replies to fill the socket buffers and overflow the
        // 4 MB hard limit. Reading at once would make this a fast reader: a client that drains its replies as
        // quickly as the server writes them may never have 4 MB waiting, and is rightly left alone.
        Thread.sleep(forTimeInterval: 1)

        #expect(try reader.closedByServer(within: 10))
        let growth = try server.residentBytes() - before
        #expect(growth < 64 << 20, "resident memory grew by \(growth >> 20) MB for a 4 MB limit")
        #expect(try bystander.command("GET", "big").text?.count == 100_000)
    }

    @Test("CONFIG SET maxclients raises the open files limit, or refuses with the most the system allows", arguments: kinds)
    func maxClientsAtRunTime(_ kind: ServerProcess.Kind) throws {
        // Soft limit 1000, enough for maxclients 900 and 32 more descriptors: nothing to raise at start.
        let roomy = try ServerProcess.start(kind, arguments: ["--maxclients", "900"], openFilesSoftLimit: 1000)
        defer { roomy.stop() }
        let c = try roomy.connect()
        #expect(try roomy.openFilesSoftLimit() == 1000)
        #expect(try c.command("CONFIG", "SET", "maxclients", "3000") == .ok)
        #expect(try roomy.openFilesSoftLimit() == 3032)
        #expect(try c.command("CONFIG", "GET", "maxclients") == .array([.bulk("maxclients"), .bulk("3000")]))

        // Hard limit 1000 too: maxclients is lowered to 968 (1000 less 32 reserved descriptors) at start, nothing
        // above that is possible, and the value stays as it was.
        let tight = try ServerProcess.start(kind, openFilesSoftLimit: 1000, openFilesHardLimit: 1000)
        defer { tight.stop() }
        let t = try tight.connect()
        #expect(try t.command("CONFIG", "SET", "maxclients", "5000") == .error(
            "ERR CONFIG SET failed (possibly related to argument 'maxclients') - The operating system is not able to handle the specified number of clients, try with 968"))
        #expect(try t.command("CONFIG", "GET", "maxclients") == .array([.bulk("maxclients"), .bulk("968")]))
        #expect(try t.command("CONFIG", "SET", "maxclients", "500") == .ok)
        #expect(try tight.openFilesSoftLimit() == 1000)
    }
}
