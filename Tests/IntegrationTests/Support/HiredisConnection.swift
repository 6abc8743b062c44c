import CHiredis
import Foundation
import Testing

/// A blocking connection through hiredis, the C client library most Redis clients are built on.
/// Not thread safe: use one connection per thread.
final class HiredisConnection {
    private let context: UnsafeMutablePointer<redisContext>

    /// Connects to 127.0.0.1:`port`, giving up after `connectTimeout`; every later read or write gives up
    /// after `ioTimeout` (so a server that never answers fails the test instead of hanging it).
    init(port: Int, connectTimeout: TimeInterval = 5, ioTimeout: TimeInterval = 10) throws {
        _ = Self.ignoreBrokenPipes
        guard let context = redisConnectWithTimeout("127.0.0.1", Int32(port), timeval(connectTimeout)) else {
            throw HiredisError("redisConnectWithTimeout could not allocate a context")
        }
        if context.pointee.err != 0 {
            let message = Self.errorString(context)
            redisFree(context)
            throw HiredisError("connect to 127.0.0.1:\(port) failed: \(message)")
        }
        redisSetTimeout(context, timeval(ioTimeout))
        self.context = context
    }

    deinit { redisFree(context) }

    /// hiredis writes with plain write(2): to a connection the server has closed, that raises SIGPIPE, which
    /// would end the whole test process instead of failing one test with EPIPE. Ignored once, for the process.
    private static let ignoreBrokenPipes: Void = { signal(SIGPIPE, SIG_IGN) }()

    /// Sends one command (binary-safe arguments) and waits for its reply.
    func command(_ arguments: [[UInt8]]) throws -> RedisReply {
        let raw = withArgv(arguments) { argc, argv, lengths in redisCommandArgv(context, argc, argv, lengths) }
        return try take(raw, what: "redisCommandArgv")
    }

    /// Sends one command given as text arguments and waits for its reply.
    @discardableResult
    func command(_ arguments: String...) throws -> RedisReply {
        try command(arguments)
    }

    func command(_ arguments: [String]) throws -> RedisReply {
        try command(arguments.map { Array($0.utf8) })
    }

    /// Queues a command in the output buffer without waiting; `reply()` flushes and reads replies in order.
    func append(_ arguments: [[UInt8]]) throws {
        let rc = withArgv(arguments) { argc, argv, lengths in redisAppendCommandArgv(context, argc, argv, lengths) }
        guard rc == REDIS_OK else { throw HiredisError("redisAppendCommandArgv: \(Self.errorString(context))") }
    }

    func append(_ arguments: String...) throws {
        try append(arguments.map { Array($0.utf8) })
    }

    /// The next reply: flushes queued commands, then reads (blocking) until a whole reply has arrived.
    func reply() throws -> RedisReply {
        var raw: UnsafeMutableRawPointer?
        let rc = redisGetReply(context, &raw)
        guard rc == REDIS_OK else { throw HiredisError("redisGetReply: \(Self.errorString(context))") }
        return try take(raw, what: "redisGetReply")
    }

    /// Copies and frees a reply hiredis handed over.
    private func take(_ raw: UnsafeMutableRawPointer?, what: String) throws -> RedisReply {
        guard let raw else { throw HiredisError("\(what) returned no reply: \(Self.errorString(context))") }
        defer { freeReplyObject(raw) }
        return RedisReply(UnsafePointer(raw.assumingMemoryBound(to: redisReply.self)))
    }

    private func withArgv<R>(
        _ arguments: [[UInt8]],
        _ body: (Int32, UnsafeMutablePointer<UnsafePointer<CChar>?>, UnsafePointer<Int>) -> R
    ) -> R {
        // One contiguous copy of every argument; argv points into it (an empty argument still gets a valid pointer).
        // (Appended argument by argument: a flattening copy goes byte by byte, which takes minutes for a few
        // hundred megabytes in a debug build.)
        var joined: [UInt8] = []
        joined.reserveCapacity(arguments.reduce(1) { $0 + $1.count })
        for argument in arguments { joined.append(contentsOf: argument) }
        joined.append(0)
        return joined.withUnsafeBufferPointer { storage in
            let base = UnsafeRawPointer(storage.baseAddress!).assumingMemoryBound(to: CChar.self)
            var offset = 0
            var argv: [UnsafePointer<CChar>?] = []
            var lengths: [Int] = []
            for argument in arguments {
                argv.append(base + offset)
                lengths.append(argument.count)
                offset += argument.count
            }
            return argv.withUnsafeMutableBufferPointer { argvBuffer in
                lengths.withUnsafeBufferPointer { lengthBuffer in
                    body(Int32(arguments.count), argvBuffer.baseAddress!, lengthBuffer.baseAddress!)
                }
            }
        }
    }

    private static func errorString(_ context: UnsafeMutablePointer<redisContext>) -> String {
        withUnsafeBytes(of: context.pointee.errstr) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
    }
}

/// Decodes a stream of RESP2 reply bytes read from a raw socket, using hiredis's reader.
final class HiredisReplyReader {
    private let reader: UnsafeMutablePointer<redisReader>

    init() { reader = redisReaderCreate() }
    deinit { redisReaderFree(reader) }

    func feed(_ bytes: [UInt8]) throws {
        let rc = bytes.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { redisReaderFeed(reader, $0.baseAddress, $0.count) }
        }
        guard rc == REDIS_OK else { throw HiredisError("redisReaderFeed: \(errorString)") }
    }

    /// The next complete reply, or nil when more bytes are needed.
    func next() throws -> RedisReply? {
        var raw: UnsafeMutableRawPointer?
        guard redisReaderGetReply(reader, &raw) == REDIS_OK else {
            throw HiredisError("the server sent bytes that are not RESP: \(errorString)")
        }
        guard let raw else { return nil }
        defer { freeReplyObject(raw) }
        return RedisReply(UnsafePointer(raw.assumingMemoryBound(to: redisReply.self)))
    }

    private var errorString: String {
        withUnsafeBytes(of: reader.pointee.errstr) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
    }
}

struct HiredisError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

private func timeval(_ seconds: TimeInterval) -> timeval {
    let whole = Int(seconds)
    return Glibc.timeval(tv_sec: whole, tv_usec: Int((seconds - Double(whole)) * 1_000_000))
}

extension HiredisConnection {
    /// The fields of INFO `sections` (the default ones when none is named) as name → value.
    func info(_ sections: String...) throws -> [String: String] {
        let text = try #require(try command(["INFO"] + sections).text, "INFO gave no text")
        var fields: [String: String] = [:]
        for line in text.split(separator: "\r\n") {
            let parts = line.split(separator: ":", maxSplits: 1)
            if parts.count == 2 { fields[String(parts[0])] = String(parts[1]) }
        }
        return fields
    }

    /// A numeric field of INFO `section`; nil when there is none.
    func infoInteger(_ section: String, _ field: String) throws -> Int? {
        try info(section)[field].flatMap { Int($0) }
    }
}
