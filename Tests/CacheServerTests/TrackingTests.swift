import CacheCore
import CacheServer
import NIOCore
import RESP
import Testing

/// Client-side caching (CLIENT TRACKING) as Redis 7.0 does it: which reads are remembered, which changes
/// send an invalidation, to whom, and in which form.
@Suite("Client-side caching: CLIENT TRACKING and invalidations")
struct TrackingTests {
    /// An invalidation push for `keys` (RESP3).
    static func invalidate(_ keys: String...) -> RESPValue {
        .push([.bulk("invalidate"), .array(keys.map { .bulk($0) })])
    }

    /// The null invalidation a flush sends (RESP3).
    static let invalidateAll = RESPValue.push([.bulk("invalidate"), .null])

    /// A harness whose main client speaks RESP3 and tracks with `options`; `writer` is a second client.
    static func tracking(_ options: String...) -> (Harness, writer: ClientSession) {
        let h = Harness()
        _ = h.run("HELLO", "3")
        #expect(h.run((["CLIENT", "TRACKING", "on"] + options).map { Array($0.utf8) }) == .ok)
        return (h, h.newSession())
    }

    // MARK: the default mode

    @Test("a key the client read is invalidated once when another client changes it, then forgotten")
    func readThenWritten() {
        let (h, writer) = Self.tracking()
        #expect(h.run("GET", "k") == .null)
        #expect(h.pushes().isEmpty)
        #expect(h.run("SET", "k", "1", as: writer) == .ok)
        #expect(h.pushes() == [Self.invalidate("k")])
        #expect(h.run("SET", "k", "2", as: writer) == .ok)
        #expect(h.pushes().isEmpty, "the key was forgotten after its invalidation")
    }

    @Test("keys the client did not read, or only wrote, are not invalidated")
    func onlyReadKeys() {
        let (h, writer) = Self.tracking()
        #expect(h.run("SET", "mine", "1") == .ok)
        #expect(h.run("SET", "other", "1", as: writer) == .ok)
        #expect(h.run("SET", "mine", "2", as: writer) == .ok)
        #expect(h.pushes().isEmpty)
    }

    @Test("the client's own write is invalidated after its reply")
    func ownWriteAfterReply() {
        let (h, _) = Self.tracking()
        #expect(h.run("GET", "k") == .null)
        #expect(h.runAll("SET", "k", "v") == [.ok, Self.invalidate("k")])
    }

    @Test("NOLOOP: no invalidation for the client's own writes, still for others'")
    func noLoop() {
        let (h, writer) = Self.tracking("NOLOOP")
        #expect(h.run("GET", "k") == .null)
        #expect(h.runAll("SET", "k", "v") == [.ok])
        // As in Redis, the client's own write made the server forget the key for it: read it again.
        #expect(h.run("GET", "k") == .bulk("v"))
        #expect(h.run("SET", "k", "w", as: writer) == .ok)
        #expect(h.pushes() == [Self.invalidate("k")])
    }

    @Test("every key of a multi-key read is remembered, each invalidated in its own message")
    func multiKeyRead() {
        let (h, writer) = Self.tracking()
        _ = h.run("MGET", "a", "b", "c")
        #expect(h.run("MSET", "a", "1", "c", "3", as: writer) == .ok)
        #expect(h.pushes() == [Self.invalidate("a"), Self.invalidate("c")])
    }

    /// A write command that changes `k` (which exists, with the value 5 and a TTL), and its expected reply.
    static let writes: [(command: [String], reply: String)] = [
        (["SET", "k", "x"], "OK"), (["SET", "k", "x", "KEEPTTL"], "OK"), (["SETEX", "k", "10", "x"], "OK"),
        (["PSETEX", "k", "10000", "x"], "OK"), (["GETSET", "k", "x"], "5"), (["GETDEL", "k"], "5"),
        (["GETEX", "k", "EX", "100"], "5"), (["GETEX", "k", "PERSIST"], "5"), (["MSET", "z", "1", "k", "2"], "OK"),
        (["MSETNX", "k", "1"], "0"), (["APPEND", "k", "x"], "2"), (["INCR", "k"], "6"), (["DECR", "k"], "4"),
        (["INCRBY", "k", "2"], "7"), (["DECRBY", "k", "2"], "3"), (["DEL", "k"], "1"), (["UNLINK", "k"], "1"),
        (["EXPIRE", "k", "100"], "1"), (["PEXPIRE", "k", "100000"], "1"), (["EXPIREAT", "k", "1"], "1"),
        (["PEXPIREAT", "k", "1"], "1"), (["PERSIST", "k"], "1"), (["RENAME", "k", "k2"], "OK"),
        (["RENAMENX", "k", "k2"], "1"), (["RENAME", "z", "k"], "OK"), (["MOVE", "k", "1"], "1"),
    ]

    @Test("each write command that changes the key invalidates it", arguments: writes.indices)
    func writeInvalidates(_ index: Int) {
        let (command, expected) = Self.writes[index]
        let (h, writer) = Self.tracking()
        #expect(h.run("SET", "k", "5", "EX", "1000", as: writer) == .ok)
        #expect(h.run("SET", "z", "1", as: writer) == .ok)
        #expect(h.run("GET", "k") == .bulk("5"))
        let reply = h.run(command.map { Array($0.utf8) }, as: writer)
        #expect(reply.text == expected || reply.int.map(String.init) == expected, "\(command): \(reply)")
        if command == ["MSETNX", "k", "1"] {
            #expect(h.pushes().isEmpty, "MSETNX changed nothing")
        } else {
            #expect(h.pushes() == [Self.invalidate("k")], "\(command)")
        }
    }

    /// Write commands that change nothing here (`k` exists without a TTL, `missing` does not).
    static let noChanges: [[String]] = [
        ["SETNX", "k", "x"], ["SET", "k", "x", "NX"], ["SET", "missing", "x", "XX"], ["DEL", "missing"],
        ["EXPIRE", "missing", "10"], ["EXPIRE", "k", "10", "XX"], ["PERSIST", "k"], ["GETEX", "k"],
        ["GETEX", "k", "PERSIST"], ["GETDEL", "missing"], ["RENAMENX", "k", "k"], ["INCR", "k"],
    ]

    @Test("a write command that changes nothing sends nothing", arguments: noChanges)
    func unchangedNoInvalidation(_ command: [String]) {
        let (h, writer) = Self.tracking()
        #expect(h.run("SET", "k", "v", as: writer) == .ok)
        _ = h.run("MGET", "k", "missing")
        _ = h.run(command.map { Array($0.utf8) }, as: writer)
        #expect(h.pushes().isEmpty, "\(command)")
    }

    @Test("RENAME invalidates both the source and the destination")
    func renameBoth() {
        let (h, writer) = Self.tracking()
        #expect(h.run("SET", "a", "1", as: writer) == .ok)
        _ = h.run("MGET", "a", "b")
        #expect(h.run("RENAME", "a", "b", as: writer) == .ok)
        #expect(h.pushes() == [Self.invalidate("a"), Self.invalidate("b")])
    }

    // MARK: expiry, eviction, flush

    @Test("a key the client read that expires is invalidated by the sweeper")
    func sweeperExpiry() {
        let (h, writer) = Self.tracking()
        #expect(h.run("SET", "k", "v", "PX", "100", as: writer) == .ok)
        #expect(h.run("GET", "k") == .bulk("v"))
        h.advance(200)
        h.sweep()
        #expect(h.pushes() == [Self.invalidate("k")])
    }

    @Test("a key that expires when read lazily is invalidated, after the reply when the reader tracks it")
    func lazyExpiry() {
        let (h, writer) = Self.tracking()
        #expect(h.run("SET", "k", "v", "PX", "100", as: writer) == .ok)
        #expect(h.run("GET", "k") == .bulk("v"))
        h.advance(200)
        #expect(h.runAll("GET", "k") == [.null, Self.invalidate("k")])
        // The client holds the key (as missing) again: a later write is reported.
        #expect(h.run("SET", "k", "w", as: writer) == .ok)
        #expect(h.pushes() == [Self.invalidate("k")])
    }

    @Test("a key expired lazily by another client's read is invalidated at the next sweep")
    func lazyExpiryByOtherClient() {
        let (h, writer) = Self.tracking()
        #expect(h.run("SET", "k", "v", "PX", "100", as: writer) == .ok)
        #expect(h.run("GET", "k") == .bulk("v"))
        h.advance(200)
        #expect(h.run("GET", "k", as: writer) == .nullBulkString)
        h.sweep()
        #expect(h.pushes() == [Self.invalidate("k")])
    }

    @Test("an evicted key the client read is invalidated")
    func eviction() {
        let (h, writer) = Self.tracking()
        let value = String(repeating: "x", count: 100)
        for i in 0..<2000 { #expect(h.run("SET", "key:\(i)", value, as: writer) == .ok) }
        _ = h.run((["MGET"] + (0..<2000).map { "key:\($0)" }).map { Array($0.utf8) })
        h.server.keyspace.flushAccounting()
        let full = h.server.keyspace.budget.usedBytes
        #expect(h.run("CONFIG", "SET", "maxmemory-policy", "allkeys-random", "maxmemory", String(full / 2)) == .ok)
        #expect(h.run("SET", "new", value, as: writer) == .ok)
        let invalidated = h.pushes().compactMap { push -> String? in
            guard case .push(let parts) = push, parts.count == 2, let keys = parts[1].texts, keys.count == 1 else {
                return nil
            }
            return keys[0]
        }
        let remaining = (0..<2000).filter { h.run("EXISTS", "key:\($0)", as: writer) == .integer(1) }.count
        #expect(!invalidated.isEmpty)
        #expect(invalidated.count == 2000 - remaining, "one invalidation per evicted key")
    }

    @Test("FLUSHDB and FLUSHALL send every tracking client a null invalidation and clear the table")
    func flush() {
        let (h, writer) = Self.tracking()
        let other = h.newSession()
        _ = h.run("HELLO", "3", as: other)
        #expect(h.run("CLIENT", "TRACKING", "on", "BCAST", as: other) == .ok)
        _ = h.run("GET", "k")
        #expect(h.run("FLUSHDB", as: writer) == .ok)
        #expect(h.pushes() == [Self.invalidateAll])
        #expect(h.pushes(for: other) == [Self.invalidateAll])
        #expect(h.run("SET", "k", "v", as: writer) == .ok)
        #expect(h.pushes().isEmpty, "the flush forgot what the client had read")
        #expect(h.pushes(for: other) == [Self.invalidate("k")])
        #expect(h.runAll("FLUSHALL") == [.ok, Self.invalidateAll])
    }

    // MARK: BCAST

    @Test("BCAST with prefixes: one message per prefix with its modified keys in byte order")
    func broadcastPrefixes() {
        let (h, writer) = Self.tracking("BCAST", "PREFIX", "a", "PREFIX", "b")
        #expect(h.run("MSET", "b2", "1", "a1", "1", "c", "3", "a0", "1", as: writer) == .ok)
        #expect(h.pushes() == [Self.invalidate("a0", "a1"), Self.invalidate("b2")])
        #expect(h.run("SET", "c", "4", as: writer) == .ok)
        #expect(h.pushes().isEmpty)
    }

    @Test("BCAST without a prefix reports every modified key, read or not")
    func broadcastAll() {
        let (h, writer) = Self.tracking("BCAST")
        #expect(h.run("SET", "x", "1", as: writer) == .ok)
        #expect(h.run("SET", "x", "2", as: writer) == .ok)
        #expect(h.pushes() == [Self.invalidate("x"), Self.invalidate("x")])
    }

    @Test("BCAST NOLOOP leaves out the keys the client itself modified")
    func broadcastNoLoop() {
        let (h, writer) = Self.tracking("BCAST", "NOLOOP")
        #expect(h.runAll("MSET", "x", "1", "y", "2") == [.ok])
        #expect(h.run("MSET", "y", "1", "z", "2", as: writer) == .ok)
        #expect(h.pushes() == [Self.invalidate("y", "z")])
    }

    // MARK: OPTIN and OPTOUT

    @Test("OPTIN: only the read right after CLIENT CACHING YES is remembered")
    func optIn() {
        let (h, writer) = Self.tracking("OPTIN")
        _ = h.run("GET", "a")
        #expect(h.run("CLIENT", "CACHING", "yes") == .ok)
        _ = h.run("GET", "b")
        _ = h.run("GET", "c")
        #expect(h.run("MSET", "a", "1", "b", "1", "c", "1", as: writer) == .ok)
        #expect(h.pushes() == [Self.invalidate("b")])
    }

    @Test("OPTOUT: every read but the one right after CLIENT CACHING NO is remembered")
    func optOut() {
        let (h, writer) = Self.tracking("OPTOUT")
        #expect(h.run("CLIENT", "CACHING", "no") == .ok)
        _ = h.run("GET", "a")
        _ = h.run("GET", "b")
        #expect(h.run("MSET", "a", "1", "b", "1", as: writer) == .ok)
        #expect(h.pushes() == [Self.invalidate("b")])
    }

    // MARK: REDIRECT

    @Test("REDIRECT to a RESP2 client subscribed to __redis__:invalidate: pub/sub messages, null for a flush")
    func redirectToResp2Subscriber() {
        let h = Harness()
        let receiver = h.newSession()
        #expect(h.run("SUBSCRIBE", "__redis__:invalidate", as: receiver).elements?.count == 3)
        #expect(h.run("CLIENT", "TRACKING", "on", "REDIRECT", "\(receiver.id)") == .ok)
        #expect(h.run("CLIENT", "GETREDIR") == .integer(receiver.id))
        _ = h.run("GET", "k")
        #expect(h.run("SET", "k", "v") == .ok, "RESP2: nothing on the tracking connection itself")
        #expect(h.pushes(for: receiver) == [.array([.bulk("message"), .bulk("__redis__:invalidate"), .bulks("k")])])
        #expect(h.run("FLUSHALL") == .ok)
        #expect(h.pushes(for: receiver) == [.array([.bulk("message"), .bulk("__redis__:invalidate"), .nullBulkString])])
        #expect(h.pushes().isEmpty)
    }

    @Test("REDIRECT to a RESP2 client that is not subscribed sends nothing")
    func redirectToResp2Plain() {
        let h = Harness()
        let receiver = h.newSession()
        #expect(h.run("CLIENT", "TRACKING", "on", "REDIRECT", "\(receiver.id)") == .ok)
        _ = h.run("GET", "k")
        #expect(h.run("SET", "k", "v") == .ok)
        #expect(h.pushes(for: receiver).isEmpty)
    }

    @Test("REDIRECT to a client that has gone: tracking-redir-broken in RESP3, broken_redirect in TRACKINGINFO")
    func brokenRedirect() {
        let (h, writer) = Self.tracking()
        let receiver = h.newSession()
        #expect(h.run("CLIENT", "TRACKING", "on", "REDIRECT", "\(receiver.id)") == .ok)
        _ = h.run("GET", "k")
        h.server.clients.remove(receiver.id)
        #expect(h.run("SET", "k", "v", as: writer) == .ok)
        #expect(h.pushes() == [.push([.bulk("tracking-redir-broken"), .integer(receiver.id)])])
        let info = h.run("CLIENT", "TRACKINGINFO")
        guard case .map(let pairs) = info else {
            Issue.record("TRACKINGINFO: \(info)")
            return
        }
        #expect(pairs[0].value == .set([.bulk("on"), .bulk("broken_redirect")]))
    }

    // MARK: the command's replies and errors

    /// CLIENT TRACKING lines and Redis 7.0's error for each.
    static let errors: [(arguments: [String], error: String)] = [
        (["on", "PREFIX", "a"], "ERR PREFIX option requires BCAST mode to be enabled"),
        (["on", "BCAST", "PREFIX", "a", "PREFIX", "ab"],
         "ERR Prefix 'a' overlaps with another provided prefix 'ab'. Prefixes for a single client must not overlap."),
        (["on", "REDIRECT", "999999"], "ERR The client ID you want redirect to does not exist"),
        (["on", "REDIRECT", "0"], "ERR The client ID you want redirect to does not exist"),
        (["on", "REDIRECT", "x"], "ERR value is not an integer or out of range"),
        (["on", "OPTIN", "OPTOUT"], "ERR You can't specify both OPTIN mode and OPTOUT mode"),
        (["on", "BCAST", "OPTIN"], "ERR OPTIN and OPTOUT are not compatible with BCAST"),
        (["maybe"], "ERR syntax error"), (["on", "FOO"], "ERR syntax error"), (["on", "PREFIX"], "ERR syntax error"),
    ]

    @Test("CLIENT TRACKING rejects bad combinations with Redis's words", arguments: errors.indices)
    func trackingErrors(_ index: Int) {
        let h = Harness()
        let line = ["CLIENT", "TRACKING"] + Self.errors[index].arguments
        #expect(h.run(line.map { Array($0.utf8) }) == .error(Self.errors[index].error))
        #expect(h.run("CLIENT", "TRACKINGINFO").elements?.isEmpty == false)
        #expect(h.run("CLIENT", "GETREDIR") == .integer(-1), "tracking stayed off")
    }

    @Test("switching modes while on is refused; prefixes accumulate and must not overlap existing ones")
    func modeSwitches() {
        let h = Harness()
        #expect(h.run("CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "a", "PREFIX", "b", "NOLOOP") == .ok)
        #expect(h.run("CLIENT", "TRACKING", "on") == .error(
            "ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode."))
        #expect(h.run("CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "ab") == .error(
            "ERR Prefix 'ab' overlaps with an existing prefix 'a'. Prefixes for a single client must not overlap."))
        #expect(h.run("CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "c") == .ok)
        #expect(h.run("CLIENT", "TRACKINGINFO") == .array([
            .bulk("flags"), .array([.bulk("on"), .bulk("bcast")]), .bulk("redirect"), .integer(0),
            .bulk("prefixes"), .bulks("a", "b", "c"),
        ]))
        #expect(h.run("CLIENT", "TRACKING", "off") == .ok)
        #expect(h.run("CLIENT", "TRACKING", "on", "OPTIN") == .ok)
        #expect(h.run("CLIENT", "TRACKING", "on", "OPTOUT") == .error(
            "ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode."))
    }

    @Test("CLIENT CACHING needs tracking in the matching mode")
    func cachingErrors() {
        let h = Harness()
        let notTracking = "ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled"
        #expect(h.run("CLIENT", "CACHING", "yes") == .error(notTracking))
        #expect(h.run("CLIENT", "CACHING", "maybe") == .error(notTracking))
        #expect(h.run("CLIENT", "TRACKING", "on", "OPTIN") == .ok)
        #expect(h.run("CLIENT", "CACHING", "no") == .error("ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode."))
        #expect(h.run("CLIENT", "CACHING", "maybe") == .error("ERR syntax error"))
        #expect(h.run("CLIENT", "CACHING", "yes") == .ok)
        #expect(h.run("CLIENT", "TRACKINGINFO") == .array([
            .bulk("flags"), .array([.bulk("on"), .bulk("optin"), .bulk("caching-yes")]), .bulk("redirect"),
            .integer(0), .bulk("prefixes"), .array([]),
        ]))
    }

    @Test("INFO counts tracking clients, tracked keys and items, and prefixes; CLIENT LIST shows t, B and redir")
    func infoAndClientList() {
        let (h, _) = Self.tracking()
        let other = h.newSession()
        #expect(h.run("CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "p", as: other) == .ok)
        _ = h.run("MGET", "a", "b")
        let info = h.run("INFO").text ?? ""
        #expect(info.contains("tracking_clients:2\r\n"))
        #expect(info.contains("tracking_total_keys:2\r\n"))
        #expect(info.contains("tracking_total_items:2\r\n"))
        #expect(info.contains("tracking_total_prefixes:1\r\n"))
        let list = h.run("CLIENT", "LIST", "ID", "\(other.id)").text ?? ""
        #expect(list.contains(" flags=tB "), "\(list)")
        #expect(list.contains(" redir=0 "), "\(list)")
    }

    @Test("past tracking-table-max-keys the sweeper invalidates keys until the table is within the limit")
    func tableLimit() {
        let (h, writer) = Self.tracking()
        #expect(h.run("CONFIG", "SET", "tracking-table-max-keys", "3") == .ok)
        _ = h.run("MGET", "a", "b", "c", "d", "e")
        h.sweep()
        let invalidated = h.pushes().flatMap { push -> [String] in
            guard case .push(let parts) = push, parts.count == 2 else { return [] }
            return parts[1].texts ?? []
        }
        #expect(invalidated.count == 2 && Set(invalidated).isSubset(of: ["a", "b", "c", "d", "e"]), "\(invalidated)")
        #expect((h.run("INFO", "stats").text ?? "").contains("tracking_total_keys:3\r\n"))
        #expect(h.run("MSET", "a", "1", "b", "1", "c", "1", "d", "1", "e", "1", as: writer) == .ok)
        #expect(h.pushes().count == 3, "the other three keys are still tracked")
    }

    @Test("CLIENT TRACKING off stops the invalidations and, for the last client, the bookkeeping")
    func off() {
        let (h, writer) = Self.tracking()
        _ = h.run("GET", "k")
        #expect(h.run("CLIENT", "TRACKING", "off") == .ok)
        #expect(!h.server.tracking.isActive)
        #expect(h.run("SET", "k", "v", as: writer) == .ok)
        #expect(h.pushes().isEmpty)
        #expect(h.run("CLIENT", "GETREDIR") == .integer(-1))
    }
}
