import CachedTestSupport
import Foundation
import Glibc

/// A socket that listens on a loopback port and never accepts or reads: connections complete (the kernel
/// accepts them into the backlog), commands are written, and no reply ever comes.
final class SilentListener: @unchecked Sendable {
    let port: Int
    private let fd: Int32

    init() throws {
        (fd, port) = try listenOnLoopback(backlog: 64)
    }

    deinit { close(fd) }
}

/// A minimal RESP server on a thread of its own, for replies no real server gives (wrong types) and for
/// watching how the client writes. Each connection is served in turn (or each on a thread of its own): it reads
/// whatever arrived, splits it into commands, and answers each with `respond(command)` (raw reply bytes).
final class ScriptedServer: @unchecked Sendable {
    typealias Responder = @Sendable (_ command: [String]) -> [UInt8]

    /// A reply that is not sent: the server closes the connection instead (after the replies before it).
    static let hangUp: [UInt8] = Array("<hang up>".utf8)

    let port: Int
    private let listener: Int32
    private let respond: Responder
    private let replyDelay: useconds_t
    private let concurrent: Bool
    private let lock = NSLock()
    private var commandsPerRead: [Int] = []
    private var stopped = false

    /// - Parameters:
    ///   - replyDelay: how long to wait after each read before answering, so that a pipelining client has
    ///     time to queue more commands.
    ///   - concurrent: serve each connection on a thread of its own, for clients that keep several open.
    ///   - respond: the raw reply to a command, or ``hangUp``.
    ///   - port: the loopback port to listen on; 0 for any free one.
    init(port: Int = 0, replyDelay: Duration = .zero, concurrent: Bool = false, respond: @escaping Responder) throws {
        self.respond = respond
        self.concurrent = concurrent
        self.replyDelay = useconds_t(replyDelay.components.seconds * 1_000_000 + replyDelay.components.attoseconds / 1_000_000_000_000)
        (listener, self.port) = try listenOnLoopback(port: port, reuseAddress: true)
        Thread { [self] in serve() }.start()
    }

    /// How many complete commands each read brought, in order.
    var batches: [Int] { lock.withLock { commandsPerRead } }

    /// Stops accepting and closes the listener (the serving thread exits).
    func stop() {
        lock.withLock { stopped = true }
        shutdown(listener, Int32(SHUT_RDWR))
    }

    deinit {
        stop()
        close(listener)
    }

    private func serve() {
        while !lock.withLock({ stopped }) {
            let client = accept(listener, nil, nil)
            guard client >= 0 else { return }
            if concurrent {
                Thread { [self] in
                    serve(client: client)
                    close(client)
                }.start()
            } else {
                serve(client: client)
                close(client)
            }
        }
    }

    private func serve(client: Int32) {
        var pending: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = read(client, &chunk, chunk.count)
            guard n > 0 else { return }
            pending += chunk[0..<n]
            var commands: [[String]] = []
            while let (command, used) = Self.parseCommand(pending) {
                commands.append(command)
                pending.removeFirst(used)
            }
            guard !commands.isEmpty else { continue }
            lock.withLock { commandsPerRead.append(commands.count) }
            if replyDelay > 0 { usleep(replyDelay) }
            var out: [UInt8] = []
            var hangUp = false
            for command in commands {
                let reply = respond(command)
                if reply == Self.hangUp {
                    hangUp = true
                    break
                }
                out += reply
            }
            var written = 0
            while written < out.count {
                let w = out[written...].withUnsafeBytes { write(client, $0.baseAddress, $0.count) }
                guard w > 0 else { return }
                written += w
            }
            if hangUp { return }  // the caller closes the connection
        }
    }

    /// One `*<n>\r\n($<len>\r\n<bytes>\r\n)*` command from the front of `bytes`, and how many bytes it used.
    static func parseCommand(_ bytes: [UInt8]) -> ([String], Int)? {
        var index = 0
        func line() -> Int? {
            guard let end = bytes[index...].firstIndex(of: 13), end + 1 < bytes.count else { return nil }
            let value = Int(String(decoding: bytes[(index + 1)..<end], as: UTF8.self))
            index = end + 2
            return value
        }
        guard index < bytes.count, bytes[index] == UInt8(ascii: "*"), let count = line() else { return nil }
        var arguments: [String] = []
        for _ in 0..<count {
            guard index < bytes.count, bytes[index] == UInt8(ascii: "$"), let length = line(),
                index + length + 2 <= bytes.count
            else { return nil }
            arguments.append(String(decoding: bytes[index..<(index + length)], as: UTF8.self))
            index += length + 2
        }
        return (arguments, index)
    }
}

/// A server that reads the start of the first request on each connection, then resets the connection
/// (SO_LINGER 0), so that a client still writing gets EPIPE or ECONNRESET.
final class HangUpServer: @unchecked Sendable {
    let port: Int
    private let listener: Int32

    init() throws {
        let (listener, port) = try listenOnLoopback()
        self.listener = listener
        self.port = port
        Thread { [listener] in
            while true {
                let client = accept(listener, nil, nil)
                guard client >= 0 else { return }
                var chunk = [UInt8](repeating: 0, count: 1024)
                _ = read(client, &chunk, chunk.count)
                var reset = linger(l_onoff: 1, l_linger: 0)
                setsockopt(client, SOL_SOCKET, SO_LINGER, &reset, socklen_t(MemoryLayout<linger>.size))
                close(client)
            }
        }.start()
    }

    func stop() { shutdown(listener, Int32(SHUT_RDWR)) }

    deinit {
        stop()
        close(listener)
    }
}
