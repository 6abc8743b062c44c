import CacheCore
import NIOCore
import RESP

/// MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE] [AUTH password | AUTH2 username password]
/// [KEYS key [key ...]]: moves keys to another server (cached-server or Redis) with RESTORE, as Redis does.
///
/// The keys' DUMP payloads and TTLs are sent in one pipeline (AUTH and SELECT first), the replies read, and each
/// key the target restored is deleted here, unless COPY. As in Redis, the command holds the server while it
/// talks to the target (`timeout` milliseconds for each step; 1000 when not positive): no other client's
/// command runs between reading a key and deleting it, so no write is lost. The connection is kept for the next
/// MIGRATE to the same target (``MigrateSockets``), which sends SELECT only for another database.
enum MigrateCommand {
    static func migrate(_ c: inout CommandContext) {
        let a = c.arguments
        var copy = false
        var replace = false
        var credentials: [[UInt8]] = []
        var keyArguments = [3]
        var j = 6
        while j < a.count {
            let more = a.count - 1 - j
            if a.matches(j, "copy") {
                copy = true
            } else if a.matches(j, "replace") {
                replace = true
            } else if a.matches(j, "auth") {
                guard more >= 1 else { return c.error(ReplyError.syntax) }
                credentials = [Array(a[j + 1])]
                j += 1
            } else if a.matches(j, "auth2") {
                guard more >= 2 else { return c.error(ReplyError.syntax) }
                credentials = [Array(a[j + 1]), Array(a[j + 2])]
                j += 2
            } else if a.matches(j, "keys") {
                guard a[3].isEmpty else {
                    return c.error("ERR When using MIGRATE KEYS option, the key argument must be set to the empty string")
                }
                keyArguments = Array((j + 1)..<a.count)
                break
            } else {
                return c.error(ReplyError.syntax)
            }
            j += 1
        }
        guard var timeout = c.integerArgument(5), let database = c.integerArgument(4) else { return }
        if timeout <= 0 { timeout = 1000 }

        // Run alone: with several event loops, the others wait until the keys are moved.
        c.server.transactions.exclusively(from: c.session.lane) { run(&c, keyArguments, database, timeout, copy, replace, credentials) }
    }

    private static func run(
        _ c: inout CommandContext, _ keyArguments: [Int], _ database: Int, _ timeout: Int, _ copy: Bool, _ replace: Bool,
        _ credentials: [[UInt8]]
    ) {
        // A RESTORE (DUMP payload, the time left) for each key that exists.
        var restores = ByteBuffer()
        var moving: [Int] = []
        for i in keyArguments {
            // Looked up as a read, as Redis does: the hit or miss counted, `keymiss` for a missing key, the key
            // marked.
            c.withKeyForRead(i) { c, shard, index in
                guard let index else { return }
                let entry = shard.entry(at: index)
                let ttl = entry.expiry.map { max(1, $0 - c.now) } ?? 0
                var arguments = [Array("RESTORE".utf8), Array(c.arguments[i]), Array(String(ttl).utf8), DumpPayload.encode(entry.value)]
                if replace { arguments.append(Array("REPLACE".utf8)) }
                restores.writeRESPCommand(arguments: arguments)
                moving.append(i)
            }
        }
        guard !moving.isEmpty else { return c.simple("NOKEY") }

        // Nanoseconds per step; a timeout of 34 years or more counts as that much (no overflow).
        let step = min(timeout, 1 << 40) * 1_000_000
        let host = c.arguments.string(1)
        let target = host + ":" + c.arguments.string(2)
        let sockets = c.server.migrateSockets
        // As Redis: a connection that fails before the target has answered for a key (a kept one the target has
        // closed since, say) is replaced by a new one once, unless the step timed out.
        var mayRetry = true
        while true {
            let connection: OutboundConnection
            var selected: Int?
            // A kept connection the target has closed since (or that has bytes nobody asked for) is dropped.
            if let kept = sockets.take(target), kept.connection.isQuiet() {
                (connection, selected) = (kept.connection, kept.database)
            } else {
                do {
                    connection = try OutboundConnection(
                        host: host, port: c.arguments.integer(2) ?? 0, deadline: monotonicNanoseconds() &+ step)
                } catch {
                    return c.error(ioConnecting)
                }
            }
            // AUTH, SELECT unless the connection has the database selected already, then the RESTOREs.
            let select = selected != database
            var request = ByteBuffer()
            if !credentials.isEmpty { request.writeRESPCommand(arguments: [Array("AUTH".utf8)] + credentials) }
            if select { request.writeRESPCommand(arguments: [Array("SELECT".utf8), Array(String(database).utf8)]) }
            request.writeImmutableBuffer(restores)
            do {
                try request.withUnsafeReadableBytes { bytes throws(OutboundConnection.Failure) in
                    try connection.write(bytes, step: step)
                }
            } catch {
                if mayRetry && !error.timedOut {
                    mayRetry = false
                    continue
                }
                return c.error(ioWriting)
            }

            // The first error the target gave (AUTH's, SELECT's, then the keys' in order) is the answer; a key the
            // target restored is removed here whatever happened to the other keys.
            var targetError: [UInt8]?
            var answered = 0
            var failure: OutboundConnection.Failure?
            do {
                var preambleError: [UInt8]?
                for _ in 0..<((credentials.isEmpty ? 0 : 1) + (select ? 1 : 0)) {
                    let error = Self.errorText(try connection.readReply(step: step))
                    if preambleError == nil { preambleError = error }
                }
                for argument in moving {
                    let error = Self.errorText(try connection.readReply(step: step))
                    answered += 1
                    // As Redis: AUTH's or SELECT's error counts once a key's reply has come (if none comes, the
                    // connection failed: retried, or an IOERR). After it, no key counts as restored.
                    if targetError == nil { targetError = preambleError }
                    if error != nil || preambleError != nil {
                        if targetError == nil { targetError = error }
                    } else if !copy {
                        remove(&c, argument)
                    }
                }
            } catch {
                failure = error
            }
            if let failure {
                // The connection is dropped (closed as it is released).
                if targetError == nil && answered == 0 && mayRetry && !failure.timedOut {
                    mayRetry = false
                    continue
                }
                // As Redis: an error the target gave before the connection failed is the answer.
                if targetError == nil { return c.error(ioReading) }
            } else if !connection.hasUnreadBytes {
                // Kept for the next MIGRATE to this target; after an error from the target, it selects again.
                sockets.keep(
                    connection, to: target, database: targetError == nil ? database : nil,
                    now: c.server.clock.nowMilliseconds())
            }
            if let targetError {
                return c.reply.writeRESPError(bytes: Array("ERR Target instance replied with error: ".utf8) + targetError)
            }
            return c.ok()
        }
    }

    /// The text of an error reply (without its `-`), or nil for any other reply.
    private static func errorText(_ reply: RESPValue) -> [UInt8]? {
        switch reply {
        case .simpleError(let text), .bulkError(let text): Array(text.readableBytesView)
        default: nil
        }
    }

    /// Deletes the key in argument `index` (moved to the target).
    private static func remove(_ c: inout CommandContext, _ index: Int) {
        c.withKeyForWrite(index) { c, shard, _, slot in
            guard let slot else { return }
            shard.remove(at: slot)
            c.keyModified(index)
            c.notify(.generic, "del", key: index)
        }
    }

    static let ioConnecting = "IOERR error or timeout connecting to the client"
    static let ioWriting = "IOERR error or timeout writing to target instance"
    static let ioReading = "IOERR error or timeout reading to target instance"

    /// The keys of a MIGRATE command line (COMMAND GETKEYS), found as Redis 7.0 finds them: when its key
    /// specifications see a `KEYS` (searching back from the second-to-last argument), by reading the options
    /// (AUTH and AUTH2 skip their arguments) up to `KEYS`, whose keys follow it; otherwise, and when no `KEYS`
    /// is read, the key argument. Nil for `KEYS` after a key that is not empty: no keys.
    static func keyPositions(_ arguments: Arguments, offset: Int, count: Int) -> [Int]? {
        guard (1...max(1, count - 2)).reversed().contains(where: { arguments.matches(offset + $0, "keys") }) else {
            return [3]
        }
        var j = 6
        while j < count {
            if arguments.matches(offset + j, "keys") {
                return arguments[offset + 3].isEmpty ? Array((j + 1)..<count) : nil
            } else if arguments.matches(offset + j, "auth") {
                j += 1
            } else if arguments.matches(offset + j, "auth2") {
                j += 2
            }
            j += 1
        }
        return [3]
    }

    /// MIGRATE's secrets: the password of its AUTH option, the user name and password of AUTH2 (options after
    /// KEYS are keys).
    static func secrets(_ arguments: Arguments) -> Set<Int> {
        var secrets: Set<Int> = []
        var j = 6
        while j < arguments.count {
            if arguments.matches(j, "auth") && j + 1 < arguments.count {
                secrets.insert(j + 1)
                j += 1
            } else if arguments.matches(j, "auth2") && j + 2 < arguments.count {
                secrets.formUnion([j + 1, j + 2])
                j += 2
            } else if arguments.matches(j, "keys") {
                break
            }
            j += 1
        }
        return secrets
    }
}
