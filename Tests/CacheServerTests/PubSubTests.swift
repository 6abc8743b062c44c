import CacheCore
import CacheServer
import NIOCore
import RESP
import Testing

/// SUBSCRIBE, PSUBSCRIBE, PUBLISH and PUBSUB, and RESP2's subscribed context, as Redis 7.0 answers them.
@Suite("Pub/sub")
struct PubSubTests {
    static func message(_ channel: String, _ text: String) -> RESPValue { .bulks("message", channel, text) }

    @Test("SUBSCRIBE confirms each channel with the client's subscription count; PUBLISH reaches subscribers")
    func subscribeAndPublish() {
        let h = Harness()
        let subscriber = h.newSession()
        #expect(h.runAll("SUBSCRIBE", "a", "b", as: subscriber) == [
            .array([.bulk("subscribe"), .bulk("a"), .integer(1)]), .array([.bulk("subscribe"), .bulk("b"), .integer(2)]),
        ])
        #expect(h.run("PUBLISH", "a", "hello") == .integer(1))
        #expect(h.run("PUBLISH", "nobody", "x") == .integer(0))
        #expect(h.run("PUBLISH", "b", "") == .integer(1))
        #expect(h.pushes(for: subscriber) == [Self.message("a", "hello"), Self.message("b", "")])
    }

    @Test("PSUBSCRIBE delivers pmessage with the pattern; a client matching twice receives twice")
    func patterns() {
        let h = Harness()
        let subscriber = h.newSession()
        _ = h.runAll("PSUBSCRIBE", "news.*", as: subscriber)
        _ = h.runAll("SUBSCRIBE", "news.sport", as: subscriber)
        #expect(h.run("PUBLISH", "news.sport", "goal") == .integer(2))
        #expect(h.pushes(for: subscriber) == [
            Self.message("news.sport", "goal"), .bulks("pmessage", "news.*", "news.sport", "goal"),
        ])
        #expect(h.run("PUBSUB", "NUMPAT") == .integer(1))
    }

    @Test("a RESP3 subscriber receives pushes and may run any command")
    func resp3Subscriber() {
        let h = Harness()
        let subscriber = h.newSession()
        _ = h.run("HELLO", "3", as: subscriber)
        #expect(h.runAll("SUBSCRIBE", "c", as: subscriber) == [.push([.bulk("subscribe"), .bulk("c"), .integer(1)])])
        #expect(h.run("SET", "k", "v", as: subscriber) == .ok)
        #expect(h.run("PING", as: subscriber) == .simple("PONG"))
        _ = h.run("PUBLISH", "c", "m")
        #expect(h.pushes(for: subscriber) == [.push([.bulk("message"), .bulk("c"), .bulk("m")])])
        // Publishing to its own channel: the message comes before PUBLISH's reply, as in Redis.
        #expect(h.runAll("PUBLISH", "c", "self", as: subscriber) == [
            .push([.bulk("message"), .bulk("c"), .bulk("self")]), .integer(1),
        ])
    }

    @Test("a RESP2 subscriber may only (un)subscribe, PING and QUIT; PING answers [pong, argument]")
    func subscribedContext() {
        let h = Harness()
        _ = h.runAll("SUBSCRIBE", "c")
        let context = "only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"
        #expect(h.run("GET", "k") == .error("ERR Can't execute 'get': \(context)"))
        #expect(h.run("PUBLISH", "c", "m") == .error("ERR Can't execute 'publish': \(context)"))
        #expect(h.run("CLIENT", "ID") == .error("ERR Can't execute 'client|id': \(context)"))
        #expect(h.run("PUBSUB", "NUMPAT") == .error("ERR Can't execute 'pubsub|numpat': \(context)"))
        #expect(h.run("CLIENT", "FOO") == .error("ERR unknown subcommand 'FOO'. Try CLIENT HELP."))
        #expect(h.run("NOSUCH").errorText?.hasPrefix("ERR unknown command") == true)
        #expect(h.run("GET") == .error("ERR wrong number of arguments for 'get' command"))
        #expect(h.run("PING") == .bulks("pong", ""))
        #expect(h.run("PING", "hi") == .bulks("pong", "hi"))
        #expect(h.runAll("PSUBSCRIBE", "p*").count == 1)
        #expect(h.runAll("UNSUBSCRIBE").count == 1)
        #expect(h.run("GET", "k") == .error("ERR Can't execute 'get': \(context)"), "still subscribed to a pattern")
        #expect(h.runAll("PUNSUBSCRIBE") == [.array([.bulk("punsubscribe"), .bulk("p*"), .integer(0)])])
        #expect(h.run("GET", "k") == .nullBulkString)
        #expect(h.run("PING") == .simple("PONG"))
    }

    @Test("UNSUBSCRIBE without channels leaves every channel, or confirms with a null when there were none")
    func unsubscribeAll() {
        let h = Harness()
        #expect(h.runAll("UNSUBSCRIBE") == [.array([.bulk("unsubscribe"), .nullBulkString, .integer(0)])])
        _ = h.runAll("SUBSCRIBE", "b", "a")
        #expect(h.runAll("UNSUBSCRIBE") == [
            .array([.bulk("unsubscribe"), .bulk("a"), .integer(1)]), .array([.bulk("unsubscribe"), .bulk("b"), .integer(0)]),
        ])
        #expect(h.run("PUBLISH", "a", "m") == .integer(0))
        #expect(h.runAll("UNSUBSCRIBE", "never") == [.array([.bulk("unsubscribe"), .bulk("never"), .integer(0)])])
    }

    @Test("PUBSUB CHANNELS, NUMSUB and NUMPAT count channels with subscribers, not pattern matches")
    func introspection() {
        let h = Harness()
        let one = h.newSession()
        let two = h.newSession()
        _ = h.runAll("SUBSCRIBE", "news", "sport", as: one)
        _ = h.runAll("SUBSCRIBE", "news", as: two)
        _ = h.runAll("PSUBSCRIBE", "n*", "s*", as: two)
        #expect(Set(h.run("PUBSUB", "CHANNELS").texts ?? []) == ["news", "sport"])
        #expect(h.run("PUBSUB", "CHANNELS", "n*") == .bulks("news"))
        #expect(h.run("PUBSUB", "NUMSUB", "news", "sport", "none") == .array([
            .bulk("news"), .integer(2), .bulk("sport"), .integer(1), .bulk("none"), .integer(0),
        ]))
        #expect(h.run("PUBSUB", "NUMSUB") == .array([]))
        #expect(h.run("PUBSUB", "NUMPAT") == .integer(2))
        let info = h.run("INFO", "stats").text ?? ""
        #expect(info.contains("pubsub_channels:2\r\n") && info.contains("pubsub_patterns:2\r\n"))
        let list = h.run("CLIENT", "LIST", "TYPE", "pubsub").text ?? ""
        #expect(list.split(separator: "\n").count == 2)
        #expect(list.contains("id=\(two.id) ") && list.contains(" flags=P ") && list.contains(" sub=1 psub=2 "))
        #expect(h.run("CLIENT", "LIST", "TYPE", "normal").text?.contains("id=\(one.id) ") == false)
        #expect(h.run("PUBSUB", "CHANNELS", "a", "b") == .error(
            "ERR unknown subcommand or wrong number of arguments for 'CHANNELS'. Try PUBSUB HELP."))
        #expect(h.run("PUBSUB", "NUMPAT", "x") == .error("ERR wrong number of arguments for 'pubsub|numpat' command"))
    }
}
