import CachedTestSupport
import Foundation
import Glibc
import Testing

/// Cross-protocol scripting: a web page can make a browser send an HTTP request to a server on loopback. Both
/// servers must close such a connection at its `POST` or `Host:` line, before anything after it runs.
@Suite("Cross-protocol scripting")
struct CrossProtocolLiveTests {
    static let kinds: [ServerProcess.Kind] = [.redis, .cached]
    static let warning =
        "Possible SECURITY ATTACK detected. It looks like somebody is sending POST or Host: commands to Redis. This is likely due to an attacker attempting to use Cross Protocol Scripting to compromise your Redis instance. Connection aborted."

    /// What a browser sends for `fetch("http://127.0.0.1:6379/", {method: "POST", mode: "no-cors", body})`: a
    /// simple request (text/plain), which needs no CORS preflight.
    static func browserRequest(port: Int, body: String) -> [UInt8] {
        let head = [
            "POST / HTTP/1.1",
            "Host: 127.0.0.1:\(port)",
            "Connection: keep-alive",
            "Content-Length: \(body.utf8.count)",
            "User-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36",
            "Content-Type: text/plain;charset=UTF-8",
            "Accept: */*",
            "Origin: http://attacker.example",
            "Referer: http://attacker.example/",
            "Accept-Encoding: gzip, deflate, br",
            "Accept-Language: en-US,en;q=0.9",
        ].joined(separator: "\r\n")
        return Array((head + "\r\n\r\n" + body).utf8)
    }

    @Test("a browser's POST is closed at its first line: nothing in its body runs", arguments: kinds)
    func browserPost(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let bystander = try server.connect()
        #expect(try bystander.command("SET", "witness", "still here") == .ok)
        let attacker = try RawConnection(port: server.port)
        let body = "SET pwned yes\r\nCONFIG SET maxmemory 1\r\nFLUSHALL\r\nSHUTDOWN NOSAVE\r\n"
        try attacker.send(Self.browserRequest(port: server.port, body: body))
        // Not even an error for the request line goes back: the connection just closes.
        #expect(try attacker.readUntilClosed() == [])
        #expect(server.isRunning)
        #expect(try bystander.command("GET", "witness") == .bulk("still here"))
        #expect(try bystander.command("EXISTS", "pwned") == .integer(0))
        #expect(try bystander.command("CONFIG", "GET", "maxmemory") == .array([.bulk("maxmemory"), .bulk("0")]))
        // Nothing was counted as a command or an error.
        let stats = try bystander.info("errorstats")
        #expect(stats["errorstat_ERR"] == nil, "\(stats)")
        #expect(server.waitForLog(Self.warning))
    }

    @Test("Host: in any case, pipelined after a command: the earlier reply is dropped, nothing later runs",
          arguments: kinds)
    func pipelinedHost(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let attacker = try RawConnection(port: server.port)
        try attacker.send(
            .respCommand(["SET", "before", "1"]) + .respCommand(["hOsT:", "example.com"])
                + .respCommand(["SET", "after", "1"]))
        #expect(try attacker.readUntilClosed() == [])
        let client = try server.connect()
        // The command before the Host: line ran (as in Redis); the one after did not.
        #expect(try client.command("EXISTS", "before") == .integer(1))
        #expect(try client.command("EXISTS", "after") == .integer(0))
    }

    @Test("post inside MULTI closes the connection and discards the transaction", arguments: kinds)
    func postInsideTransaction(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let attacker = try RawConnection(port: server.port)
        try attacker.send("MULTI\r\n")
        #expect(try attacker.read(through: "\r\n") == Array("+OK\r\n".utf8))
        try attacker.send("SET queued 1\r\n")
        #expect(try attacker.read(through: "\r\n") == Array("+QUEUED\r\n".utf8))
        try attacker.send("post /x HTTP/1.0\r\nEXEC\r\n")
        #expect(try attacker.readUntilClosed() == [])
        #expect(try server.connect().command("EXISTS", "queued") == .integer(0))
    }

    @Test("an unauthenticated client's POST is closed the same way, before NOAUTH", arguments: kinds)
    func beforeAuthentication(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind, arguments: ["--requirepass", "secret"])
        defer { server.stop() }
        let attacker = try RawConnection(port: server.port)
        try attacker.send(Self.browserRequest(port: server.port, body: "AUTH secret\r\nFLUSHALL\r\n"))
        #expect(try attacker.readUntilClosed() == [])
        #expect(server.isRunning)
    }

    @Test("names that only start like the HTTP ones are unknown commands, and the warning is logged once a minute",
          arguments: kinds)
    func lookalikesAndRateLimit(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let client = try RawConnection(port: server.port)
        try client.send("POSTS\r\nHOST\r\nPING\r\n")
        let replies = try client.readReplies(3)
        #expect(replies.count == 3)
        #expect(replies.last == .status("PONG"))
        for _ in 0..<3 {
            let attacker = try RawConnection(port: server.port)
            try attacker.send("POST / HTTP/1.1\r\n")
            #expect(try attacker.readUntilClosed() == [])
        }
        // A line both servers log after the attacks: once it is in, so is every warning logged before it.
        let taken = try listenOnLoopback()
        defer { close(taken.fd) }
        #expect(try server.connect().command("CONFIG", "SET", "port", String(taken.port)) != .ok)
        #expect(server.waitForLog("Failed applying new configuration"))
        let log = server.standardErrorSoFar()
        #expect(log.components(separatedBy: Self.warning).count - 1 == 1, "\(log)")
    }
}
