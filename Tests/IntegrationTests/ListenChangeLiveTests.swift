import CachedTestSupport
import Foundation
import Glibc
import Testing

/// CONFIG SET of `port` and `bind` changes where the server listens at once, or, when it cannot listen there,
/// changes nothing at all: both servers, the same replies.
@Suite("Listening changes at run time")
struct ListenChangeLiveTests {
    static let kinds: [ServerProcess.Kind] = [.redis, .cached]
    static let portFailure =
        "ERR CONFIG SET failed (possibly related to argument 'port') - Unable to listen on this port. Check server logs."
    static let bindFailure =
        "ERR CONFIG SET failed (possibly related to argument 'bind') - Failed to bind to specified addresses."
    /// An address of TEST-NET-1 (RFC 5737): no interface here has it, so binding it fails at once, and nothing
    /// is ever sent to it.
    static let foreignAddress = "192.0.2.1"

    @Test("CONFIG SET port moves the listener: the new port accepts, the old one refuses", arguments: kinds)
    func portMoves(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let client = try server.connect()
        let newPort = try freeLoopbackPort()
        #expect(try client.command("CONFIG", "SET", "port", String(newPort)) == .ok)
        #expect(try client.command("CONFIG", "GET", "port") == .array([.bulk("port"), .bulk(String(newPort))]))
        #expect(acceptsConnections(port: newPort))
        #expect(!acceptsConnections(port: server.port))
        // The connection that asked is not affected.
        #expect(try client.command("PING") == .status("PONG"))
        #expect(try HiredisConnection(port: newPort).command("PING") == .status("PONG"))
    }

    @Test("a port taken by another program: the whole CONFIG SET is refused and the old port keeps listening",
          arguments: kinds)
    func portTaken(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let taken = try listenOnLoopback()
        defer { close(taken.fd) }
        let client = try server.connect()
        #expect(
            try client.command("CONFIG", "SET", "maxmemory", "10mb", "port", String(taken.port))
                == .error(Self.portFailure))
        #expect(try client.command("CONFIG", "GET", "maxmemory") == .array([.bulk("maxmemory"), .bulk("0")]))
        #expect(try client.command("CONFIG", "GET", "port") == .array([.bulk("port"), .bulk(String(server.port))]))
        #expect(acceptsConnections(port: server.port))
        #expect(try server.connect().command("PING") == .status("PONG"))
        #expect(
            server.waitForLog(
                "Failed applying new configuration. Possibly related to new port setting. Restoring previous settings."))
    }

    @Test("narrowing bind from every address to 127.0.0.1 stops accepting on the others", arguments: kinds)
    func bindNarrows(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind, arguments: ["--bind", "*"])
        defer { server.stop() }
        #expect(acceptsConnections(port: server.port, host: "127.0.0.2"))
        let client = try server.connect()
        #expect(try client.command("CONFIG", "SET", "bind", "127.0.0.1") == .ok)
        #expect(try client.command("CONFIG", "GET", "bind") == .array([.bulk("bind"), .bulk("127.0.0.1")]))
        #expect(!acceptsConnections(port: server.port, host: "127.0.0.2"))
        #expect(acceptsConnections(port: server.port, host: "127.0.0.1"))
        // And back: widening works the same way.
        #expect(try client.command("CONFIG", "SET", "bind", "127.0.0.1 127.0.0.2") == .ok)
        #expect(acceptsConnections(port: server.port, host: "127.0.0.2"))
        #expect(!acceptsConnections(port: server.port, host: "127.0.0.3"))
    }

    @Test("an address that cannot be bound refuses the change; the same address marked optional is skipped",
          arguments: kinds)
    func bindFails(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let client = try server.connect()
        #expect(
            try client.command("CONFIG", "SET", "bind", "127.0.0.2 \(Self.foreignAddress)", "maxmemory", "10mb")
                == .error(Self.bindFailure))
        #expect(try client.command("CONFIG", "GET", "bind") == .array([.bulk("bind"), .bulk("127.0.0.1")]))
        #expect(try client.command("CONFIG", "GET", "maxmemory") == .array([.bulk("maxmemory"), .bulk("0")]))
        #expect(acceptsConnections(port: server.port))
        #expect(!acceptsConnections(port: server.port, host: "127.0.0.2"))
        #expect(try client.command("CONFIG", "SET", "bind", "127.0.0.2 -\(Self.foreignAddress)") == .ok)
        #expect(acceptsConnections(port: server.port, host: "127.0.0.2"))
        #expect(!acceptsConnections(port: server.port, host: "127.0.0.1"))
    }

    @Test("with port and bind in one CONFIG SET, the error names the first of them", arguments: kinds)
    func errorNamesTheFirst(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        let taken = try listenOnLoopback()
        defer { close(taken.fd) }
        let client = try server.connect()
        #expect(
            try client.command("CONFIG", "SET", "PORT", String(taken.port), "bind", "127.0.0.1 127.0.0.2")
                == .error(Self.portFailure))
        #expect(
            try client.command("CONFIG", "SET", "bind", "127.0.0.1 127.0.0.2", "port", String(taken.port))
                == .error(Self.bindFailure))
        #expect(try client.command("CONFIG", "GET", "bind") == .array([.bulk("bind"), .bulk("127.0.0.1")]))
        #expect(acceptsConnections(port: server.port))
        #expect(!acceptsConnections(port: server.port, host: "127.0.0.2"))
    }

    @Test("a later argument that fails to apply (maxclients) undoes a port change already made; the first failure is named",
          arguments: kinds)
    func laterFailureUndoesPort(_ kind: ServerProcess.Kind) throws {
        // Hard limit 1000 on open files: maxclients 5000 cannot be applied.
        let server = try ServerProcess.start(kind, openFilesSoftLimit: 1000, openFilesHardLimit: 1000)
        defer { server.stop() }
        let client = try server.connect()
        let maxClientsFailure =
            "ERR CONFIG SET failed (possibly related to argument 'maxclients') - The operating system is not able to handle the specified number of clients, try with 968"
        let newPort = try freeLoopbackPort()
        #expect(
            try client.command("CONFIG", "SET", "port", String(newPort), "maxmemory", "10mb", "maxclients", "5000")
                == .error(maxClientsFailure))
        #expect(try client.command("CONFIG", "GET", "port") == .array([.bulk("port"), .bulk(String(server.port))]))
        #expect(try client.command("CONFIG", "GET", "maxmemory") == .array([.bulk("maxmemory"), .bulk("0")]))
        #expect(!acceptsConnections(port: newPort))
        #expect(acceptsConnections(port: server.port))
        #expect(
            server.waitForLog(
                "Failed applying new configuration. Possibly related to new maxclients setting. Restoring previous settings."))
        // Applied in the order given: the first to fail is named.
        let taken = try listenOnLoopback()
        defer { close(taken.fd) }
        #expect(try client.command("CONFIG", "SET", "maxclients", "5000", "port", String(taken.port)) == .error(maxClientsFailure))
        #expect(try client.command("CONFIG", "SET", "port", String(taken.port), "maxclients", "5000") == .error(Self.portFailure))
        #expect(try client.command("CONFIG", "GET", "maxclients") == .array([.bulk("maxclients"), .bulk("968")]))
        #expect(try server.connect().command("PING") == .status("PONG"))
    }

    @Test("port 0 stops listening on TCP; the Unix socket stays and can set a port again", arguments: kinds)
    func portZero(_ kind: ServerProcess.Kind) throws {
        let socket = FileManager.default.temporaryDirectory.appendingPathComponent("cached-listen-\(UUID().uuidString).sock").path
        let server = try ServerProcess.start(kind, arguments: ["--unixsocket", socket])
        defer { server.stop() }
        #expect(try server.connect().command("CONFIG", "SET", "port", "0") == .ok)
        #expect(!acceptsConnections(port: server.port))
        let newPort = try freeLoopbackPort()
        let output = try ExternalProgram.redisCli.run(["-s", socket, "CONFIG", "SET", "port", String(newPort)])
        #expect(output.standardOutput == "OK\n", "\(output.summary)")
        #expect(try HiredisConnection(port: newPort).command("PING") == .status("PONG"))
    }

    @Test("unixsocket cannot be changed at run time, as in Redis 7.0", arguments: kinds)
    func unixSocketImmutable(_ kind: ServerProcess.Kind) throws {
        let server = try ServerProcess.start(kind)
        defer { server.stop() }
        #expect(
            try server.connect().command("CONFIG", "SET", "unixsocket", "/tmp/elsewhere.sock")
                == .error("ERR CONFIG SET failed (possibly related to argument 'unixsocket') - can't set immutable config"))
    }
}
