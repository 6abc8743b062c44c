import CacheServer
import RESP
import Testing

/// CLIENT PAUSE, WAIT and CLIENT UNBLOCK as the executor and ``BlockedClients`` decide them, on a manual clock.
/// The connections that wait and resume are in the live tests.
@Suite("pauses and waiting clients, without a network")
struct BlockedClientsTests {
    static func releases(_ session: ClientSession) -> [BlockedClients.Release] {
        (session.outlet as? CollectingOutlet)?.releases.withLock { $0 } ?? []
    }

    @Test("two pauses: the stricter mode and the later end hold; a pause that ran out passes nothing on")
    func pausesCombine() {
        let blocked = BlockedClients()
        blocked.pause(.write, until: 600, now: 0)
        blocked.pause(.all, until: 100, now: 0)
        #expect(blocked.pauseMode(now: 50) == .all)
        #expect(blocked.pauseMode(now: 599) == .all)
        #expect(blocked.pauseEnd(now: 599) == 600)
        #expect(blocked.pauseMode(now: 600) == .none)
        #expect(!blocked.mayBePaused)

        blocked.pause(.all, until: 700, now: 650)
        blocked.pause(.write, until: 900, now: 800)
        #expect(blocked.pauseMode(now: 800) == .write)
        #expect(blocked.pauseEnd(now: 800) == 900)
        blocked.unpause()
        #expect(blocked.pauseMode(now: 800) == .none)
        #expect(blocked.pauseEnd(now: 800) == nil)
    }

    @Test("CLIENT PAUSE WRITE holds writes and PUBLISH, not reads; UNPAUSE releases the held clients")
    func writePause() {
        let h = Harness()
        let (writer, reader, publisher) = (h.newSession(), h.newSession(), h.newSession())
        #expect(h.run("CLIENT", "PAUSE", "1000", "WRITE") == .ok)
        #expect(h.runAll("SET", "k", "v", as: writer).isEmpty)
        #expect(writer.blockKind == .postponed)
        #expect(writer.blockDeadline == h.now + 1000)
        #expect(h.run("GET", "k", as: reader) == .nullBulkString)
        #expect(reader.blockKind == .none)
        #expect(h.runAll("PUBLISH", "channel", "message", as: publisher).isEmpty)
        #expect(h.infoFields("clients")["blocked_clients"] == "2")
        let list = h.run("CLIENT", "LIST", "ID", "\(writer.id)").text ?? ""
        #expect(list.contains(" flags=b "), "\(list)")
        // Held commands did not run, and were not counted.
        #expect(h.run("EXISTS", "k") == .integer(0))
        #expect(writer.commandsProcessed == 0)

        #expect(h.run("CLIENT", "UNPAUSE") == .ok)
        #expect(Self.releases(writer) == [.resume])
        #expect(Self.releases(publisher) == [.resume])
        #expect(Self.releases(reader).isEmpty)
        #expect(h.infoFields("clients")["blocked_clients"] == "0")
    }

    @Test("CLIENT PAUSE ALL holds every command, CLIENT UNPAUSE included; its end releases them")
    func allPause() {
        let h = Harness()
        let other = h.newSession()
        #expect(h.run("CLIENT", "PAUSE", "300") == .ok)
        #expect(h.runAll("PING", as: other).isEmpty)
        #expect(h.runAll("CLIENT", "UNPAUSE").isEmpty)
        h.advance(299)
        #expect(h.server.blocked.pauseMode(now: h.now) == .all)
        #expect(Self.releases(other).isEmpty)
        h.advance(1)
        #expect(h.server.blocked.pauseMode(now: h.now) == .none)
        #expect(Self.releases(other) == [.resume])
        #expect(Self.releases(h.session) == [.resume])
    }

    @Test("under WRITE, EXEC waits only for a transaction with a write; queuing a write waits too")
    func transactionsUnderPause() {
        let h = Harness()
        let (reading, writing, queuing) = (h.newSession(), h.newSession(), h.newSession())
        for session in [reading, writing, queuing] { #expect(h.run("MULTI", as: session) == .ok) }
        #expect(h.run("GET", "k", as: reading) == .simple("QUEUED"))
        #expect(h.run("INCR", "k", as: writing) == .simple("QUEUED"))
        #expect(h.run("CLIENT", "PAUSE", "1000", "WRITE") == .ok)
        #expect(h.run("EXEC", as: reading) == .array([.nullBulkString]))
        #expect(h.runAll("EXEC", as: writing).isEmpty)
        #expect(h.runAll("SET", "k", "1", as: queuing).isEmpty)
        #expect(h.run("GET", "k", as: queuing) == .simple("QUEUED"))
    }

    @Test("WAIT blocks until its timeout unless no replica is asked for; CLIENT UNBLOCK releases it once")
    func waitAndUnblock() {
        let h = Harness()
        let waiter = h.newSession()
        #expect(h.run("WAIT", "0", "100", as: waiter) == .integer(0))
        #expect(waiter.blockKind == .none)
        #expect(h.runAll("WAIT", "1", "500", as: waiter).isEmpty)
        #expect(waiter.blockKind == .waiting)
        #expect(waiter.blockDeadline == h.now + 500)
        #expect(h.infoFields("clients")["blocked_clients"] == "1")
        #expect(h.infoFields("clients")["clients_in_timeout_table"] == "1")
        #expect(h.run("CLIENT", "UNBLOCK", "\(waiter.id)", "ERROR") == .integer(1))
        #expect(Self.releases(waiter) == [.error])
        #expect(h.run("CLIENT", "UNBLOCK", "\(waiter.id)") == .integer(0))
        #expect(!h.server.blocked.endWait(waiter.id))
        #expect(h.infoFields("clients")["blocked_clients"] == "0")
        waiter.unblock()

        // Without a timeout: not in the timeout table; the timer and UNBLOCK cannot both release it.
        #expect(h.runAll("WAIT", "2", "0", as: waiter).isEmpty)
        #expect(waiter.blockDeadline == 0)
        #expect(h.infoFields("clients")["clients_in_timeout_table"] == "0")
        #expect(h.server.blocked.endWait(waiter.id))
        #expect(h.run("CLIENT", "UNBLOCK", "\(waiter.id)") == .integer(0))
    }

    @Test("a paused client is not released by CLIENT UNBLOCK, and is forgotten when it leaves")
    func pausedClientsStayHeld() {
        let h = Harness()
        let writer = h.newSession()
        #expect(h.run("CLIENT", "PAUSE", "1000", "WRITE") == .ok)
        #expect(h.runAll("DEL", "k", as: writer).isEmpty)
        #expect(h.run("CLIENT", "UNBLOCK", "\(writer.id)") == .integer(0))
        #expect(Self.releases(writer).isEmpty)
        h.server.blocked.remove(writer.id)
        #expect(h.infoFields("clients")["blocked_clients"] == "0")
        #expect(h.run("CLIENT", "UNPAUSE") == .ok)
        #expect(Self.releases(writer).isEmpty)
    }

    @Test("while paused, a lowered maxmemory evicts nothing; once the pause ends, it evicts")
    func noEvictionWhilePaused() {
        let h = Harness()
        for i in 0..<1000 { h.run("SET", "key:\(i)", String(repeating: "v", count: 100)) }
        h.server.keyspace.flushAccounting()
        let full = h.server.keyspace.budget.usedBytes
        #expect(h.run("CLIENT", "PAUSE", "1000", "WRITE") == .ok)
        #expect(h.run("CONFIG", "SET", "maxmemory", String(full / 2)) == .ok)
        #expect(h.run("DBSIZE") == .integer(1000))
        #expect(h.server.evictToLimit(now: h.now) == .withinLimit)
        #expect(h.run("DBSIZE") == .integer(1000))
        h.advance(1000)
        while h.server.evictToLimit(now: h.now) == .budgetSpent {}
        let left = h.run("DBSIZE")
        #expect(left != .integer(1000) && left != .integer(0), "\(left)")
    }
}
