import CacheCore
import CacheServer
import Logging
import NIOCore
import RESP

/// The properties the command layer must have on any bytes a client sends, checked on one input.
///
/// The input is parsed as a connection parses it, and every command runs through ``CommandExecutor`` against
/// a ``ServerState`` in its initial state on a ``ManualClock`` that moves 250 ms per command (so TTLs set by the input
/// expire during it). Every command must produce exactly one well-formed reply. Afterwards, with expired
/// keys reclaimed, every database must agree with itself: DBSIZE, the keys KEYS * lists (no repeats), a full
/// SCAN, INFO keyspace, and the expiry count.
package enum CommandCheck {
    /// How far the clock moves after each command.
    static let tick: Int64 = 250
    /// Databases of the server under test (Redis's default).
    static let databases = 16

    /// The server every input runs against, made once per process: a `ServerState` costs thousands of
    /// allocations, which would dominate the fuzzer's time. ``reset()`` brings it back to its first state
    /// before each input (all that can differ is counters and client ids, which the checks do not read).
    final class Fixture {
        let clock = ManualClock()
        let start: Int64
        let configuration: ServerConfiguration
        let server: ServerState

        init() {
            var configuration = ServerConfiguration()
            configuration.databases = CommandCheck.databases
            // SETRANGE makes a value as long as its offset from a few bytes of input: at most 1 MiB here, so that
            // an input cannot take the fuzzer's memory.
            configuration.protoMaxBulkLength = 1 << 20
            // MIGRATE would open connections to whatever address an input names (and wait for it).
            configuration.renamedCommands = [.init(name: "migrate", newName: "")]
            self.configuration = configuration
            start = clock.nowMilliseconds()
            server = ServerState(
                configuration: configuration, clock: clock, logger: Logger(label: "fuzz") { _ in SwiftLogNoOpLogHandler() })
        }

        func reset() {
            clock.set(milliseconds: start)
            server.updateConfiguration { $0 = configuration }
            server.blocked.unpause()
            for database in server.keyspace.databases { database.removeAll() }
        }
    }

    nonisolated(unsafe) static var fixture: Fixture?

    /// Runs the checks on `input`; returns a description of the first property that does not hold.
    package static func check(_ input: UnsafeRawBufferPointer) -> String? {
        let fixture = Self.fixture ?? Fixture()
        Self.fixture = fixture
        fixture.reset()
        let clock = fixture.clock
        let server = fixture.server
        let client = session(server, port: 40001)
        // A second client, for CLIENT LIST / KILL to find, and the one the checks run as.
        let checker = session(server, port: 40002)
        defer {
            server.clients.remove(client.id)
            server.clients.remove(checker.id)
        }

        var parser = RESPRequestParser()
        var start = 0
        var commands = 0
        while start < input.count && !client.closeAfterReply {
            let frame = UnsafeRawBufferPointer(rebasing: input[start...])
            let result: RESPRequestParser.Result
            do throws(RESPProtocolError) {
                result = try parser.parse(frame, limits: server.requestLimits.parser, authenticated: client.authenticated)
            } catch {
                break  // the connection would be closed after the error reply
            }
            switch result {
            case .incomplete:
                start = input.count
            case .skip(let consumed):
                start += consumed
            case .command(let consumed, let isInline):
                var reply = ByteBuffer()
                let name = parser.arguments.withUnsafeBufferPointer { spans in
                    if isInline {
                        return parser.inlineStorage.withUnsafeBytes { storage in
                            let arguments = Arguments(base: storage.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!, spans: spans)
                            CommandExecutor.execute(arguments, session: client, server: server, now: clock.nowMilliseconds(), reply: &reply)
                            return RESPText.quoted(arguments[0])
                        }
                    }
                    let arguments = Arguments(base: frame.baseAddress!, spans: spans)
                    CommandExecutor.execute(arguments, session: client, server: server, now: clock.nowMilliseconds(), reply: &reply)
                    return RESPText.quoted(arguments[0])
                }
                if let failure = checkReply(reply) { return "command \(commands) (\(name)): \(failure)" }
                commands += 1
                start += consumed
                clock.advance(milliseconds: tick)
            }
        }
        return checkKeyspace(server, as: checker, now: clock.nowMilliseconds())
    }

    private static func session(_ server: ServerState, port: Int) -> ClientSession {
        let session = ClientSession(
            id: server.clients.makeID(), remoteAddress: "127.0.0.1:\(port)", localAddress: "127.0.0.1:6379",
            isLocal: true, now: server.clock.nowMilliseconds(), authenticated: true,
            user: server.users.defaultUser, channel: nil)
        server.clients.add(session)
        return session
    }

    /// One command's reply: exactly one complete RESP2 or RESP3 value.
    static func checkReply(_ reply: ByteBuffer) -> String? {
        guard reply.readableBytes > 0 else { return "no reply" }
        do {
            guard let length = try RESPValue.frameLength(in: reply) else {
                return "an incomplete reply: \(String(buffer: reply).debugDescription.prefix(300))"
            }
            guard length == reply.readableBytes else {
                return "more than one reply: \(String(buffer: reply).debugDescription.prefix(300))"
            }
            guard try RESPValue.decode(reply) != nil else { return "a reply that scans but does not decode" }
        } catch {
            return "a malformed reply (\(error)): \(String(buffer: reply).debugDescription.prefix(300))"
        }
        return nil
    }

    /// Runs one command as `session` and returns its decoded reply.
    static func run(_ arguments: [String], server: ServerState, as session: ClientSession, now: Int64) -> RESPValue? {
        var request = ByteBuffer()
        request.writeRESPCommand(arguments: arguments)
        var reply = ByteBuffer()
        request.withUnsafeReadableBytes { raw in
            var parser = RESPRequestParser()
            guard case .command? = try? parser.parse(raw, limits: RESPRequestLimits()) else { return }
            parser.arguments.withUnsafeBufferPointer { spans in
                CommandExecutor.execute(
                    Arguments(base: raw.baseAddress!, spans: spans), session: session, server: server, now: now, reply: &reply)
            }
        }
        return try? RESPValue.decode(reply)?.value
    }

    /// The keyspace agrees with itself once expired keys are reclaimed.
    static func checkKeyspace(_ server: ServerState, as session: ClientSession, now: Int64) -> String? {
        // The input may have set a password or renamed nothing (rename-command is not settable at run time);
        // the checking client is authenticated from the start, and speaks RESP2.
        session.protocolVersion = .resp2
        var sweeps = 0
        while server.keyspace.sweepExpired(now: now, budgetPerShard: 1 << 20).exhausted {
            sweeps += 1
            if sweeps > 1000 { return "expired keys are still being reclaimed after 1000 sweeps" }
        }
        guard let info = run(["INFO", "keyspace"], server: server, as: session, now: now).flatMap(text) else {
            return "INFO keyspace did not return text"
        }
        var total = 0
        for db in 0..<databases {
            let database = server.keyspace.databases[db]
            guard run(["SELECT", String(db)], server: server, as: session, now: now) == .simpleString(ByteBuffer(string: "OK")) else {
                return "SELECT \(db) failed"
            }
            guard case .integer(let size)? = run(["DBSIZE"], server: server, as: session, now: now) else {
                return "DBSIZE did not return an integer in db \(db)"
            }
            guard case .array(let listed)? = run(["KEYS", "*"], server: server, as: session, now: now) else {
                return "KEYS * did not return an array in db \(db)"
            }
            let keys = listed.compactMap(bytes)
            let distinct = Set(keys)
            guard keys.count == listed.count else { return "KEYS * returned something other than bulk strings" }
            guard size == keys.count else { return "db \(db): DBSIZE is \(size), KEYS * lists \(keys.count) keys" }
            guard distinct.count == keys.count else { return "db \(db): KEYS * lists a key twice" }
            guard database.count == size else { return "db \(db): the engine counts \(database.count) keys, DBSIZE \(size)" }
            let expires = database.expiresCount
            guard expires >= 0 && expires <= size else { return "db \(db): \(expires) keys with a TTL out of \(size)" }

            // A full SCAN returns every key (each at least once) and nothing else.
            var cursor = size == 0 ? "done" : "0"
            var scanned = Set<[UInt8]>()
            var calls = 0
            while cursor != "done" {
                guard case .array(let parts)? = run(["SCAN", cursor, "COUNT", "7"], server: server, as: session, now: now),
                    parts.count == 2, let next = text(parts[0]), case .array(let batch) = parts[1]
                else { return "db \(db): SCAN \(cursor) did not return [cursor, keys]" }
                scanned.formUnion(batch.compactMap(bytes))
                cursor = next == "0" ? "done" : next
                calls += 1
                if calls > 4 * size + 1000 { return "db \(db): SCAN did not finish after \(calls) calls for \(size) keys" }
            }
            guard scanned == distinct else {
                return "db \(db): SCAN returned \(scanned.count) keys, KEYS * \(distinct.count), not the same ones"
            }

            // INFO keyspace lists the databases with keys: "db3:keys=2,expires=1,avg_ttl=...".
            let line = info.split(separator: "\r\n").first { $0.hasPrefix("db\(db):") }
            if size > 0 {
                guard let line, line.hasPrefix("db\(db):keys=\(size),expires=\(expires),") else {
                    return "db \(db): INFO keyspace shows \(line.map(String.init) ?? "nothing") for \(size) keys, \(expires) with a TTL"
                }
            } else if let line {
                return "db \(db): INFO keyspace shows \(line) for an empty database"
            }
            total += size
        }
        guard server.keyspace.totalKeys == total else { return "the keyspace counts \(server.keyspace.totalKeys) keys, the databases \(total)" }
        guard server.keyspace.usedBytes >= 0 else { return "used memory is negative: \(server.keyspace.usedBytes)" }
        return nil
    }

    private static func text(_ value: RESPValue) -> String? {
        switch value {
        case .bulkString(let b), .simpleString(let b): return String(buffer: b)
        case .verbatimString(_, let b): return String(buffer: b)
        default: return nil
        }
    }

    private static func bytes(_ value: RESPValue) -> [UInt8]? {
        if case .bulkString(let b) = value { return Array(b.readableBytesView) }
        return nil
    }
}
