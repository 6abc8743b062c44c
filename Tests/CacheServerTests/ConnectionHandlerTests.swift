import CacheCore
import CacheServer
import Logging
import NIOCore
import NIOEmbedded
import RESP
import Testing

/// The connection handler on an in-memory channel: however the network cuts the byte stream, every command
/// runs once, in order, and its reply is the same.
@Suite("Connection handler: commands cut anywhere by the network")
struct ConnectionHandlerTests {
    /// A handler on an embedded channel that looks connected from 127.0.0.1.
    private static func connectedChannel() throws -> EmbeddedChannel {
        let server = ServerState(configuration: ServerConfiguration(), clock: ManualClock(), logger: Logger(label: "cached.tests"))
        let channel = EmbeddedChannel(handler: ConnectionHandler(server: server))
        channel.remoteAddress = try SocketAddress(ipAddress: "127.0.0.1", port: 50000)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 6379)).wait()
        return channel
    }

    /// Feeds `bytes` to the channel `chunk` bytes per read and returns everything it wrote back.
    private static func exchange(_ bytes: [UInt8], chunk: Int, on channel: EmbeddedChannel) throws -> [UInt8] {
        var reply: [UInt8] = []
        var offset = 0
        while offset < bytes.count {
            let end = min(offset + chunk, bytes.count)
            try channel.writeInbound(ByteBuffer(bytes: bytes[offset..<end]))
            while let out = try channel.readOutbound(as: ByteBuffer.self) { reply += Array(out.readableBytesView) }
            offset = end
        }
        return reply
    }

    private static func command(_ arguments: [String]) -> [UInt8] {
        var buffer = ByteBuffer()
        buffer.writeRESPCommand(arguments: arguments)
        return Array(buffer.readableBytesView)
    }

    /// 200 SETs of 100-byte values, then 200 GETs, then an inline PING: one stream.
    private static let pipeline: (request: [UInt8], expected: [UInt8]) = {
        var request: [UInt8] = []
        var expected: [UInt8] = []
        for i in 0..<200 {
            request += command(["SET", "key:\(i)", String(repeating: Character(UnicodeScalar(65 + i % 26)!), count: 100)])
            expected += Array("+OK\r\n".utf8)
        }
        for i in 0..<200 {
            request += command(["GET", "key:\(i)"])
            expected += Array("$100\r\n\(String(repeating: Character(UnicodeScalar(65 + i % 26)!), count: 100))\r\n".utf8)
        }
        request += Array("PING\r\n".utf8)
        expected += Array("+PONG\r\n".utf8)
        return (request, expected)
    }()

    @Test("a pipeline cut into reads of any size gets the same replies", arguments: [1, 2, 7, 100, 131, 1023, 1024, 1025, 4096, 65536])
    func pipelineInPieces(chunk: Int) throws {
        let channel = try Self.connectedChannel()
        let reply = try Self.exchange(Self.pipeline.request, chunk: chunk, on: channel)
        #expect(reply == Self.pipeline.expected)
        _ = try channel.finish()
    }

    @Test("a 1 MB value arriving in reads of any size is stored whole", arguments: [65536, 9000, 1000])
    func largeValue(chunk: Int) throws {
        let channel = try Self.connectedChannel()
        let value = String((0..<(1 << 20)).map { Character(UnicodeScalar(97 + $0 % 26)!) })
        let set = try Self.exchange(Self.command(["SET", "big", value]), chunk: chunk, on: channel)
        #expect(set == Array("+OK\r\n".utf8))
        let get = try Self.exchange(Self.command(["GET", "big"]), chunk: 65536, on: channel)
        #expect(get == Array("$\(value.utf8.count)\r\n\(value)\r\n".utf8))
        _ = try channel.finish()
    }

    @Test("an HTTP request cut into reads of any size closes the connection at its POST line: nothing runs or replies",
          arguments: [1, 3, 16, 17, 64, 4096])
    func httpRequestInPieces(chunk: Int) throws {
        let server = ServerState(configuration: ServerConfiguration(), clock: ManualClock(), logger: Logger(label: "cached.tests"))
        func connected() throws -> EmbeddedChannel {
            let channel = EmbeddedChannel(handler: ConnectionHandler(server: server))
            channel.remoteAddress = try SocketAddress(ipAddress: "127.0.0.1", port: 50000)
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 6379)).wait()
            return channel
        }
        let attacker = try connected()
        let request = "PING\r\nPOST / HTTP/1.1\r\nHost: 127.0.0.1:6379\r\nContent-Type: text/plain\r\n\r\nSET pwned 1\r\nFLUSHALL\r\n"
        var reply: [UInt8] = []
        var offset = 0
        let bytes = Array(request.utf8)
        while offset < bytes.count && attacker.isActive {
            let end = min(offset + chunk, bytes.count)
            try attacker.writeInbound(ByteBuffer(bytes: bytes[offset..<end]))
            while let out = try attacker.readOutbound(as: ByteBuffer.self) { reply += Array(out.readableBytesView) }
            offset = end
        }
        #expect(!attacker.isActive)
        // PONG was sent when the read that held the PING ended before the whole POST line (23 bytes in) had come;
        // else it is dropped with the connection.
        let pongSent = chunk < 23
        #expect(reply == (pongSent ? Array("+PONG\r\n".utf8) : []), "\(String(decoding: reply, as: UTF8.self))")
        let witness = try connected()
        let check = try Self.exchange(Self.command(["EXISTS", "pwned"]), chunk: 64, on: witness)
        #expect(check == Array(":0\r\n".utf8))
        _ = try witness.finish()
    }

    @Test("POST and Host: are recognised in any case, and only as whole names")
    func httpCommandNames() {
        for name in ["POST", "post", "pOsT", "HOST:", "host:", "Host:"] {
            #expect(Array(name.utf8).withUnsafeBytes { CrossProtocolGuard.isHTTPCommandName($0) }, "\(name)")
        }
        for name in ["POSTS", "POS", "HOST", "HOST;", "HOST:X", "host\u{1A}", "GET", "", "PUT"] {
            #expect(!Array(name.utf8).withUnsafeBytes { CrossProtocolGuard.isHTTPCommandName($0) }, "\(name)")
        }
    }

    @Test("a protocol error after a partial command closes the connection after the replies owed")
    func protocolErrorAcrossReads() throws {
        let channel = try Self.connectedChannel()
        let reply = try Self.exchange(Array("*1\r\n$4\r\nPING\r\n*1\r\n$x\r\n".utf8), chunk: 3, on: channel)
        #expect(reply == Array("+PONG\r\n-ERR Protocol error: invalid bulk length\r\n".utf8))
        #expect(!channel.isActive)
    }
}

/// Who may connect, before any command runs.
@Suite("Connection handler: admission")
struct ConnectionAdmissionTests {
    private static func channel(from address: String, configure: (inout ServerConfiguration) -> Void = { _ in })
        throws -> EmbeddedChannel
    {
        var configuration = ServerConfiguration()
        configure(&configuration)
        let server = ServerState(configuration: configuration, clock: ManualClock(), logger: Logger(label: "cached.tests"))
        let channel = EmbeddedChannel(handler: ConnectionHandler(server: server))
        channel.remoteAddress = try SocketAddress(ipAddress: address, port: 50000)
        try channel.connect(to: SocketAddress(ipAddress: address, port: 6379)).wait()
        return channel
    }

    private static func written(_ channel: EmbeddedChannel) throws -> String {
        var text = ""
        while let out = try channel.readOutbound(as: ByteBuffer.self) { text += String(buffer: out) }
        return text
    }

    @Test("protected mode refuses a client from another host with Redis's DENIED error")
    func protectedModeRefusesRemote() throws {
        let channel = try Self.channel(from: "10.1.2.3")
        let reply = try Self.written(channel)
        #expect(reply.hasPrefix("-DENIED Redis is running in protected mode because protected mode is enabled"))
        #expect(reply.hasSuffix("accepting connections from the outside.\r\n"))
        #expect(!channel.isActive)
    }

    @Test("protected mode lets loopback clients in", arguments: ["127.0.0.1", "::1"])
    func protectedModeAllowsLoopback(address: String) throws {
        let channel = try Self.channel(from: address)
        try channel.writeInbound(ByteBuffer(string: "PING\r\n"))
        let pong = try Self.written(channel)
        #expect(pong == "+PONG\r\n")
        _ = try channel.finish()
    }

    @Test("a password, or protected-mode no, lets remote clients in")
    func remoteAllowedWhenProtectedModeDoesNotApply() throws {
        let withPassword = try Self.channel(from: "10.1.2.3") { $0.requirePass = "secret" }
        try withPassword.writeInbound(ByteBuffer(string: "AUTH secret\r\nPING\r\n"))
        #expect(try Self.written(withPassword) == "+OK\r\n+PONG\r\n")
        _ = try withPassword.finish()
        let unprotected = try Self.channel(from: "10.1.2.3") { $0.protectedMode = false }
        try unprotected.writeInbound(ByteBuffer(string: "PING\r\n"))
        #expect(try Self.written(unprotected) == "+PONG\r\n")
        _ = try unprotected.finish()
    }

    @Test("rename-command moves a command to a new name and \"\" removes it")
    func renamedCommands() throws {
        let channel = try Self.channel(from: "127.0.0.1") {
            $0.renamedCommands = [.init(name: "flushall", newName: ""), .init(name: "config", newName: "cfg-7f3a")]
        }
        try channel.writeInbound(ByteBuffer(string: "FLUSHALL\r\nCONFIG GET hz\r\nCFG-7F3A GET hz\r\n"))
        #expect(try Self.written(channel) == "-ERR unknown command 'FLUSHALL', with args beginning with: \r\n"
            + "-ERR unknown command 'CONFIG', with args beginning with: 'GET' 'hz' \r\n"
            + "*2\r\n$2\r\nhz\r\n$2\r\n10\r\n")
        _ = try channel.finish()
    }

    @Test("CONFIG GET never shows the password")
    func passwordHidden() throws {
        let channel = try Self.channel(from: "127.0.0.1") { $0.requirePass = "s3cret-value" }
        try channel.writeInbound(ByteBuffer(string: "AUTH s3cret-value\r\nCONFIG GET requirepass\r\n"))
        let reply = try Self.written(channel)
        #expect(reply == "+OK\r\n*2\r\n$11\r\nrequirepass\r\n$8\r\n(hidden)\r\n")
        #expect(!reply.contains("s3cret"))
        _ = try channel.finish()
    }
}
