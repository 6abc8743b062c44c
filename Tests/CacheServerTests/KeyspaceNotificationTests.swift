import CacheCore
import CacheServer
import NIOCore
import RESP
import Testing

/// Keyspace notifications: `notify-keyspace-events` as Redis 7.0 reads and writes it, and the events commands,
/// lazy expiry, the sweeper and eviction publish (the differential corpus compares the events of each command
/// with Redis's; these tests drive what needs a clock or memory pressure).
@Suite("Keyspace notifications")
struct KeyspaceNotificationTests {
    /// A harness with notifications on for `flags`, and a second client subscribed to every event.
    func subscribed(_ flags: String) -> (Harness, ClientSession) {
        let h = Harness { $0.notifyKeyspaceEvents = KeyspaceEventFlags(parsing: flags)! }
        let subscriber = h.newSession()
        _ = h.runAll("PSUBSCRIBE", "__key*__:*", as: subscriber)
        return (h, subscriber)
    }

    /// The events `subscriber` received, as `db:event(key)` read from the keyevent channel (and `space:` lines
    /// for the keyspace channel), oldest first.
    func events(_ h: Harness, _ subscriber: ClientSession) -> [String] {
        h.pushes(for: subscriber).compactMap { push -> String? in
            guard let parts = push.elements?.compactMap(\.text), parts.count == 4, parts[0] == "pmessage" else {
                Issue.record("not a pattern message: \(push)")
                return nil
            }
            let channel = parts[2], message = parts[3]
            if channel.hasPrefix("__keyevent@") {
                let db = channel.dropFirst("__keyevent@".count).prefix { $0 != "_" }
                let event = channel.split(separator: ":", maxSplits: 1)[1]
                return "\(db):\(event)(\(message))"
            }
            let db = channel.dropFirst("__keyspace@".count).prefix { $0 != "_" }
            let key = channel.split(separator: ":", maxSplits: 1)[1]
            return "space \(db):\(key) \(message)"
        }
    }

    // MARK: the flags

    @Test("letters parse in any order; CONFIG GET's text is Redis's: classes (or A), then K, E, m")
    func flagText() throws {
        func text(_ letters: String) -> String? { KeyspaceEventFlags(parsing: letters)?.text }
        #expect(text("") == "")
        #expect(text("KEA") == "AKE")
        #expect(text("Kg") == "gK")
        #expect(text("Kxe") == "xeK")
        #expect(text("ntexzhsl$g") == "g$lshzxetn")
        #expect(text("dntexzhsl$") == "$lshzxetdn")
        #expect(text("nmEKd") == "dnKEm")
        #expect(text("Eg$lshzxetdKmn") == "AKEm", "n is not written after A, as in Redis 7.0")
        #expect(text("Ae") == "A")
        #expect(text("gggK") == "gK")
        #expect(KeyspaceEventFlags(parsing: "KAn")?.contains(.newKey) == true, "n stays on though not shown")
        #expect(KeyspaceEventFlags(parsing: "A") == .all)
        #expect(KeyspaceEventFlags.all == KeyspaceEventFlags(parsing: "g$lshzxetd"))
        for bad in ["k", "a", "KE A", "xyz", "K!", "é"] {
            #expect(KeyspaceEventFlags(parsing: bad) == nil, "\(bad)")
        }
    }

    @Test("CONFIG SET and GET notify-keyspace-events; an invalid letter gets Redis's error and changes nothing")
    func configSetGet() {
        let h = Harness()
        #expect(h.run("CONFIG", "GET", "notify-keyspace-events") == .bulks("notify-keyspace-events", ""))
        #expect(h.run("CONFIG", "SET", "notify-keyspace-events", "KEA") == .ok)
        #expect(h.run("CONFIG", "GET", "notify-keyspace-events") == .bulks("notify-keyspace-events", "AKE"))
        #expect(h.run("CONFIG", "SET", "notify-keyspace-events", "Kx$") == .ok)
        #expect(h.run("CONFIG", "GET", "notify-keyspace-events") == .bulks("notify-keyspace-events", "$xK"))
        #expect(h.run("CONFIG", "SET", "notify-keyspace-events", "KEz?") == .error(
            "ERR CONFIG SET failed (possibly related to argument 'notify-keyspace-events') - Invalid event class character. Use 'Ag$lshzxeKEtmdn'."))
        #expect(h.run("CONFIG", "GET", "notify-keyspace-events") == .bulks("notify-keyspace-events", "$xK"))
    }

    @Test("the directive in a config file and on the command line; a bad letter stops the start with Redis's reason")
    func startupDirective() throws {
        let lines = try ConfigurationFile.parse(Array("notify-keyspace-events \"Ex\"\n".utf8), path: "t.conf")
        var configuration = ServerConfiguration()
        for line in lines { try configuration.apply(directive: line.directive, arguments: line.arguments, mode: .startup) }
        #expect(configuration.notifyKeyspaceEvents == [.keyevent, .expired])
        let flags = try ServerConfiguration.load(try ServerCommandLine.parse(["--notify-keyspace-events", "KEA"]))
        #expect(flags.notifyKeyspaceEvents == KeyspaceEventFlags.all.union([.keyspace, .keyevent]))
        do {
            _ = try ServerConfiguration.load(try ServerCommandLine.parse(["--notify-keyspace-events", "xyz"]))
            Issue.record("an invalid class was accepted")
        } catch {
            guard case .badLine(_, _, let reason) = error else {
                Issue.record("\(error)")
                return
            }
            #expect(reason == "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.")
        }
    }

    // MARK: events

    @Test("keyspace then keyevent channel, in the client's database; nothing while off or without K and E")
    func channels() {
        let (h, subscriber) = subscribed("KE$")
        #expect(h.run("SELECT", "3") == .ok)
        #expect(h.run("SET", "k", "v") == .ok)
        #expect(h.pushes(for: subscriber) == [
            .bulks("pmessage", "__key*__:*", "__keyspace@3__:k", "set"),
            .bulks("pmessage", "__key*__:*", "__keyevent@3__:set", "k"),
        ])
        #expect(h.run("DEL", "k") == .integer(1))
        #expect(events(h, subscriber).isEmpty, "g is off")
        #expect(h.run("CONFIG", "SET", "notify-keyspace-events", "g$x") == .ok)
        #expect(h.run("SET", "k", "v") == .ok)
        #expect(h.run("DEL", "k") == .integer(1))
        #expect(events(h, subscriber).isEmpty, "neither K nor E")
        #expect(h.run("CONFIG", "SET", "notify-keyspace-events", "") == .ok)
        #expect(h.run("SET", "k", "v") == .ok)
        #expect(events(h, subscriber).isEmpty)
    }

    @Test("a key found expired by a command: expired first, then the command's own events")
    func lazyExpiry() {
        let (h, subscriber) = subscribed("EAnm")
        #expect(h.run("SET", "k", "v", "PX", "100") == .ok)
        #expect(events(h, subscriber) == ["0:new(k)", "0:set(k)", "0:expire(k)"])
        h.advance(101)
        #expect(h.run("GET", "k") == .nullBulkString)
        #expect(events(h, subscriber) == ["0:expired(k)", "0:keymiss(k)"])
        #expect(h.run("SET", "k", "v", "PX", "100") == .ok)
        h.advance(101)
        #expect(h.run("SET", "k", "w") == .ok)
        #expect(events(h, subscriber) == ["0:new(k)", "0:set(k)", "0:expire(k)", "0:expired(k)", "0:new(k)", "0:set(k)"])
        // No event of its own: the expired key is published after the command.
        #expect(h.run("SET", "k", "v", "PX", "100") == .ok)
        _ = events(h, subscriber)
        h.advance(101)
        #expect(h.run("EXPIRE", "k", "100") == .integer(0))
        #expect(events(h, subscriber) == ["0:expired(k)"])
    }

    @Test("the sweeper publishes expired for the keys it reclaims, in their databases; not without x")
    func sweeperExpiry() {
        let (h, subscriber) = subscribed("Ex")
        #expect(h.run("SET", "a", "1", "PX", "100") == .ok)
        #expect(h.run("SELECT", "2") == .ok)
        #expect(h.run("SET", "b", "1", "PX", "100") == .ok)
        #expect(h.run("SET", "kept", "1") == .ok)
        h.advance(200)
        h.sweep()
        #expect(events(h, subscriber).sorted() == ["0:expired(a)", "2:expired(b)"])
        #expect(h.run("CONFIG", "SET", "notify-keyspace-events", "Eg") == .ok)
        #expect(h.run("SET", "c", "1", "PX", "100") == .ok)
        #expect(events(h, subscriber) == ["2:expire(c)"])
        h.advance(200)
        h.sweep()
        #expect(h.run("DBSIZE") == .integer(1))
        #expect(events(h, subscriber).isEmpty)
    }

    @Test("keys evicted to make room are published as evicted, before the write's own events")
    func eviction() {
        let (h, subscriber) = subscribed("Ee$")
        let value = String(repeating: "x", count: 100)
        for i in 0..<200 { #expect(h.run("SET", "key:\(i)", value) == .ok) }
        h.server.keyspace.flushAccounting()
        _ = events(h, subscriber)
        let full = h.server.keyspace.budget.usedBytes
        #expect(h.run("CONFIG", "SET", "maxmemory-policy", "allkeys-random", "maxmemory", String(full / 2)) == .ok)
        // CONFIG SET evicts toward the new limit at once.
        var evicted = events(h, subscriber)
        #expect(h.run("SET", "new", value) == .ok)
        let write = events(h, subscriber)
        #expect(write.last == "0:set(new)")
        evicted += write.dropLast()
        #expect(evicted.allSatisfy { $0.hasPrefix("0:evicted(key:") }, "\(evicted)")
        let keys = h.run("DBSIZE").int ?? 0
        #expect(evicted.count == 201 - keys)
        #expect(h.infoFields("stats")["evicted_keys"] == String(evicted.count))
    }

    @Test("a RESP3 client subscribed to its own events receives them before the command's reply")
    func ownEventsInResp3() {
        let h = Harness { $0.notifyKeyspaceEvents = KeyspaceEventFlags(parsing: "KEA")! }
        _ = h.run("HELLO", "3")
        _ = h.runAll("SUBSCRIBE", "__keyevent@0__:set", "__keyspace@0__:k")
        #expect(h.runAll("SET", "k", "v") == [
            .push([.bulk("message"), .bulk("__keyspace@0__:k"), .bulk("set")]),
            .push([.bulk("message"), .bulk("__keyevent@0__:set"), .bulk("k")]),
            .ok,
        ])
    }

    @Test("MOVE and COPY publish in the databases the keys are in")
    func databases() {
        let (h, subscriber) = subscribed("EgKn")
        #expect(h.run("SET", "k", "v") == .ok)
        _ = events(h, subscriber)
        #expect(h.run("COPY", "k", "c", "DB", "4") == .integer(1))
        #expect(h.run("MOVE", "k", "5") == .integer(1))
        #expect(events(h, subscriber).filter { !$0.hasPrefix("space") } == [
            "4:new(c)", "4:copy_to(c)", "5:new(k)", "0:move_from(k)", "5:move_to(k)",
        ])
    }
}
