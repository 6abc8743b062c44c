import CacheCore
import CacheServer
import NIOCore
import RESP
import Synchronization
import Testing

/// Runs commands against a server without a network: one `ServerState` on a `ManualClock`, one client.
///
/// Each command is written as a client would send it, parsed by the server's request parser into argument
/// spans, executed, and its reply decoded. Time moves only through ``advance(_:)``.
final class Harness {
    let clock: ManualClock
    let server: ServerState
    let session: ClientSession

    init(requirePass: String = "", databases: Int = 16, configure: (inout ServerConfiguration) -> Void = { _ in }) {
        clock = ManualClock()
        var configuration = ServerConfiguration()
        configuration.requirePass = requirePass
        configuration.databases = databases
        configure(&configuration)
        server = ServerState(configuration: configuration, clock: clock, logger: .init(label: "cached.tests"))
        session = Self.makeSession(server)
    }

    /// Another client of the same server.
    func newSession() -> ClientSession { Self.makeSession(server) }

    private static func makeSession(_ server: ServerState) -> ClientSession {
        let session = ClientSession(
            id: server.clients.makeID(), remoteAddress: "127.0.0.1:40000", localAddress: "127.0.0.1:6379",
            isLocal: true, now: server.clock.nowMilliseconds(), authenticated: server.users.defaultAuthenticates,
            user: server.users.defaultUser, channel: nil)
        session.outlet = CollectingOutlet(session: session)
        server.clients.add(session)
        return session
    }

    /// The messages that are not replies (pub/sub messages, invalidations) sent to `client` since the last call.
    func pushes(for client: ClientSession? = nil) -> [RESPValue] {
        let session = client ?? self.session
        guard let outlet = session.outlet as? CollectingOutlet else { return [] }
        var buffer = outlet.take()
        var values: [RESPValue] = []
        while buffer.readableBytes > 0 {
            guard let (value, length) = try? RESPValue.decode(buffer) else {
                Issue.record("undecodable push \(String(buffer: buffer).debugDescription)")
                break
            }
            values.append(value)
            buffer.moveReaderIndex(forwardBy: length)
        }
        return values
    }

    /// Runs the part of the sweeper that tells tracking clients about keys expiry and eviction removed, and
    /// enforces `tracking-table-max-keys`, and publishes their keyspace notifications.
    func sweep() {
        server.keyspace.sweepExpired(now: now)
        server.sendBackgroundInvalidations(tableLimit: server.config.trackingTableMaxKeys)
        server.notifications.publishBackgroundRemovals()
    }

    /// Runs one command and returns every value it wrote: its reply, and any message written to the same
    /// connection before or after it (a RESP3 client's own invalidations, its own PUBLISH's message).
    func runAll(_ arguments: String..., as client: ClientSession? = nil) -> [RESPValue] {
        var reply = execute(arguments.map { Array($0.utf8) }, as: client)
        var values: [RESPValue] = []
        while reply.readableBytes > 0, let (value, length) = try? RESPValue.decode(reply) {
            values.append(value)
            reply.moveReaderIndex(forwardBy: length)
        }
        #expect(reply.readableBytes == 0, "undecodable bytes left: \(String(buffer: reply).debugDescription)")
        return values
    }

    /// The clock, in milliseconds since the epoch.
    var now: Int64 { clock.nowMilliseconds() }

    /// INFO `section`'s `name:value` lines.
    func infoFields(_ section: String) -> [String: String] {
        var fields: [String: String] = [:]
        for line in (run("INFO", section).text ?? "").split(separator: "\r\n") {
            let parts = line.split(separator: ":", maxSplits: 1)
            if parts.count == 2 { fields[String(parts[0])] = String(parts[1]) }
        }
        return fields
    }

    /// Moves the clock forward.
    func advance(_ milliseconds: Int64) { clock.advance(milliseconds: milliseconds) }

    /// Runs one command given as text arguments and returns its decoded reply.
    @discardableResult
    func run(_ arguments: String..., as client: ClientSession? = nil) -> RESPValue {
        run(arguments.map { Array($0.utf8) }, as: client)
    }

    /// Runs one command given as byte arguments and returns its decoded reply.
    @discardableResult
    func run(_ arguments: [[UInt8]], as client: ClientSession? = nil) -> RESPValue {
        let reply = execute(arguments, as: client)
        do {
            guard let (value, length) = try RESPValue.decode(reply) else {
                Issue.record("incomplete reply: \(String(buffer: reply).debugDescription)")
                return .null
            }
            #expect(length == reply.readableBytes, "more than one reply: \(String(buffer: reply).debugDescription)")
            return value
        } catch {
            Issue.record("undecodable reply \(String(buffer: reply).debugDescription): \(error)")
            return .null
        }
    }

    /// Parses and executes one command; returns everything written for it.
    private func execute(_ arguments: [[UInt8]], as client: ClientSession?) -> ByteBuffer {
        var request = ByteBuffer()
        request.writeRESPCommand(arguments: arguments)
        var reply = ByteBuffer()
        let session = client ?? self.session
        request.withUnsafeReadableBytes { raw in
            var parser = RESPRequestParser()
            guard case .command(let consumed, false)? = try? parser.parse(raw, limits: server.requestLimits.parser) else {
                Issue.record("the request parser did not return one whole command")
                return
            }
            #expect(consumed == raw.count)
            parser.arguments.withUnsafeBufferPointer { spans in
                let parsed = Arguments(base: raw.baseAddress!, spans: spans)
                CommandExecutor.execute(parsed, session: session, server: server, now: now, reply: &reply)
            }
        }
        // As a connection does once it has run what it read: the BCAST invalidations collected go out.
        if server.tracking.hasPendingBroadcast { server.sendBroadcastInvalidations(current: session, reply: &reply) }
        return reply
    }
}

/// An outlet that writes at once into a buffer the test reads (the harness has no event loops).
final class CollectingOutlet: SessionOutlet {
    private let session: ClientSession
    private let buffer = Mutex(ByteBuffer())

    init(session: ClientSession) { self.session = session }

    func send(_ write: @escaping @Sendable (ClientSession, inout ByteBuffer) -> Void) {
        buffer.withLock { write(session, &$0) }
    }

    /// The releases from waits it was asked to deliver, in order.
    let releases = Mutex<[BlockedClients.Release]>([])

    func release(_ release: BlockedClients.Release) {
        releases.withLock { $0.append(release) }
    }

    func take() -> ByteBuffer {
        buffer.withLock { buffer in
            defer { buffer.clear() }
            return buffer
        }
    }
}

extension RESPValue {
    static func bulk(_ text: String) -> RESPValue { .bulkString(ByteBuffer(string: text)) }
    static func simple(_ text: String) -> RESPValue { .simpleString(ByteBuffer(string: text)) }
    static func error(_ text: String) -> RESPValue { .simpleError(ByteBuffer(string: text)) }
    static let ok = RESPValue.simple("OK")
    /// An array of bulk strings.
    static func bulks(_ texts: String...) -> RESPValue { .array(texts.map { .bulk($0) }) }

    /// The text of a bulk, simple or verbatim string or error.
    var text: String? {
        switch self {
        case .bulkString(let b), .simpleString(let b), .simpleError(let b): return String(buffer: b)
        case .verbatimString(_, let b): return String(buffer: b)
        default: return nil
        }
    }

    /// The bytes of a bulk string.
    var bytes: [UInt8]? {
        if case .bulkString(let b) = self { return Array(b.readableBytesView) }
        return nil
    }

    /// The integer of an integer reply.
    var int: Int? {
        if case .integer(let n) = self { return n }
        return nil
    }

    /// The elements of an array or set reply.
    var elements: [RESPValue]? {
        switch self {
        case .array(let a), .set(let a): return a
        default: return nil
        }
    }

    /// The texts of an array of strings.
    var texts: [String]? { elements?.compactMap(\.text) }

    /// The error text, when this is an error reply.
    var errorText: String? {
        if case .simpleError(let b) = self { return String(buffer: b) }
        return nil
    }
}

extension Harness {
    /// Runs a full SCAN iteration with extra `options` and returns every key it returned (with repeats) and
    /// the number of calls.
    func scanAll(_ options: String...) -> (keys: [String], calls: Int) {
        var cursor = "0"
        var keys: [String] = []
        var calls = 0
        repeat {
            let reply = run((["SCAN", cursor] + options).map { Array($0.utf8) })
            guard let parts = reply.elements, parts.count == 2, let next = parts[0].text, let batch = parts[1].texts
            else {
                Issue.record("unexpected SCAN reply \(reply)")
                break
            }
            keys += batch
            cursor = next
            calls += 1
        } while cursor != "0" && calls < 100_000
        return (keys, calls)
    }
}

extension Harness {
    /// Runs `command` as `writer` while the harness's own client WATCHes `key`, then runs an empty transaction:
    /// whether the command aborted it (a write to `key`) and whether it counted as a change for the save points.
    func changeSeen(watching key: String, run command: [String], as writer: ClientSession)
        -> (aborted: Bool, counted: Bool)
    {
        let before = server.keyspace.totalChanges
        _ = run("WATCH", key)
        run(command.map { Array($0.utf8) }, as: writer)
        _ = run("MULTI")
        run("PING")
        let exec = run("EXEC")
        return (exec == .nullArray, server.keyspace.totalChanges != before)
    }
}
