import CacheCore
import CacheServer
import Logging
import NIOCore
import NIOEmbedded
import RESP
import Testing

/// Messages that are not replies, through the connection handler: a publisher's message or an invalidation
/// reaches another connection on that connection's own event loop, after any reply it owes, and a closed
/// connection leaves no subscription or tracking state behind.
@Suite("Connection handler: pub/sub messages and invalidations between connections")
struct ConnectionHandlerMessageTests {
    let server = ServerState(configuration: ServerConfiguration(), clock: ManualClock(), logger: Logger(label: "cached.tests"))

    /// A connected handler on its own embedded event loop.
    func connect(port: Int) throws -> EmbeddedChannel {
        let channel = EmbeddedChannel(handler: ConnectionHandler(server: server))
        channel.remoteAddress = try SocketAddress(ipAddress: "127.0.0.1", port: port)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 6379)).wait()
        return channel
    }

    /// Sends one command and returns what the connection wrote for it.
    func send(_ arguments: [String], on channel: EmbeddedChannel) throws -> String {
        var request = ByteBuffer()
        request.writeRESPCommand(arguments: arguments)
        try channel.writeInbound(request)
        return try written(channel)
    }

    func written(_ channel: EmbeddedChannel) throws -> String {
        var text = ""
        while let out = try channel.readOutbound(as: ByteBuffer.self) { text += String(buffer: out) }
        return text
    }

    @Test("PUBLISH on one connection: the subscriber's loop writes the message, nothing before its loop runs")
    func publishAcrossConnections() throws {
        let subscriber = try connect(port: 50001)
        let publisher = try connect(port: 50002)
        #expect(try send(["SUBSCRIBE", "news"], on: subscriber) == "*3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n")
        #expect(try send(["PUBLISH", "news", "one"], on: publisher) == ":1\r\n")
        #expect(try send(["PUBLISH", "news", "two"], on: publisher) == ":1\r\n")
        #expect(try written(subscriber) == "", "written only on the subscriber's own event loop")
        subscriber.embeddedEventLoop.run()
        #expect(try written(subscriber)
            == "*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$3\r\none\r\n*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$3\r\ntwo\r\n")
        _ = try subscriber.finish()
        _ = try publisher.finish()
    }

    @Test("an invalidation for a RESP3 tracking connection is written on its loop")
    func invalidationAcrossConnections() throws {
        let tracker = try connect(port: 50003)
        let writer = try connect(port: 50004)
        _ = try send(["HELLO", "3"], on: tracker)
        #expect(try send(["CLIENT", "TRACKING", "on"], on: tracker) == "+OK\r\n")
        #expect(try send(["GET", "k"], on: tracker) == "_\r\n")
        #expect(try send(["SET", "k", "v"], on: writer) == "+OK\r\n")
        tracker.embeddedEventLoop.run()
        #expect(try written(tracker) == ">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n")
        _ = try tracker.finish()
        _ = try writer.finish()
    }

    @Test("a closed connection's subscriptions and tracking are gone, and messages queued for it are dropped")
    func closeCleansUp() throws {
        let subscriber = try connect(port: 50005)
        let tracker = try connect(port: 50006)
        let other = try connect(port: 50007)
        _ = try send(["PSUBSCRIBE", "n*"], on: subscriber)
        _ = try send(["SUBSCRIBE", "news"], on: subscriber)
        _ = try send(["CLIENT", "TRACKING", "on", "BCAST"], on: tracker)
        #expect(try send(["PUBLISH", "news", "late"], on: other) == ":2\r\n")
        _ = try subscriber.finish()
        _ = try tracker.finish()
        subscriber.embeddedEventLoop.run()
        #expect(try send(["PUBSUB", "NUMSUB", "news"], on: other) == "*2\r\n$4\r\nnews\r\n:0\r\n")
        #expect(try send(["PUBSUB", "NUMPAT"], on: other) == ":0\r\n")
        #expect(!server.tracking.isActive, "the last tracking client has gone")
        _ = try other.finish()
    }
}
