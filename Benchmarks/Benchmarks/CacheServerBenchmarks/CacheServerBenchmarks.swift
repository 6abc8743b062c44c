import Benchmark
import BenchmarkLoopback
import CacheServer
import Foundation
import Logging

#if canImport(Glibc)
import Glibc
#endif

// The server's per-command path, counted (docs/performance.md, "SDK benchmarks", row 5).
//
// A `CacheServerService` runs in this process, as `cached-server` runs it, on a loopback port; the client is a
// blocking socket driven with plain system calls over buffers made before the measured part, so it allocates
// nothing: every allocation the malloc counter sees during a sample is the server's (its event loop reading,
// parsing, running the command, replying; a sweeper cycle when one falls in the sample). A sample is 1,000
// commands, and the table shows each metric per sample, so that the allocation count is exact (the tool rounds a
// count divided per command to a whole number).
//
// - S1, S2: GET and SET of existing keys (100-byte values, 1,000 keys), one command per round trip, as
//   `redis-benchmark` sends them unpipelined;
// - S3: GET, 16 commands per write, as `redis-benchmark -P 16` sends them.

/// Keys in the server, all with 100-byte values; every command addresses one of them.
let serverKeys = 1_000
let serverValueBytes = 100

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .mallocCountTotal],
        timeUnits: .microseconds,
        warmupIterations: 5,
        maxDuration: .seconds(3),
        maxIterations: 100_000
    )

    let server = InProcessServer()
    let paths: [(name: String, command: InProcessServer.Command, perWrite: Int)] = [
        ("S1 Server: GET, one per round trip", .get, 1),
        ("S2 Server: SET, one per round trip", .set, 1),
        ("S3 Server: GET, 16 per write", .get, 16),
    ]
    for path in paths {
        Benchmark(path.name) { benchmark in
            server.run(benchmark, command: path.command, perWrite: path.perWrite)
        } setup: {
            try await server.start()
        } teardown: {
            await server.stop()
        }
    }
}

/// A cache server in this process, and a client connection to it.
final class InProcessServer: @unchecked Sendable {
    enum Command { case get, set }

    private var service: CacheServerService?
    private var task: Task<Void, any Error>?
    private var socket: Int32 = -1
    /// 1,000 GETs and 1,000 SETs, back to back, and where each command starts (the last offset is the end).
    private var gets = CommandBlock(commands: [])
    private var sets = CommandBlock(commands: [])
    private let replies = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)

    deinit { replies.deallocate() }

    /// Starts the server on a free loopback port, connects, and stores the keys.
    func start() async throws {
        let value = String(repeating: "v", count: serverValueBytes)
        let keys = (0..<serverKeys).map { String(format: "key:%09d", $0) }
        gets = CommandBlock(commands: keys.map { ["GET", $0] })
        sets = CommandBlock(commands: keys.map { ["SET", $0, value] })

        var lastError: any Error = BenchmarkSetupError("the server did not start")
        for _ in 0..<5 {
            var configuration = ServerConfiguration()
            configuration.port = try freeLoopbackPort()
            configuration.bind = ["127.0.0.1"]
            let (ports, continuation) = AsyncStream.makeStream(of: [Int].self)
            let service = CacheServerService(
                configuration: configuration, logger: Logger(label: "bench") { _ in SwiftLogNoOpLogHandler() },
                onServerRunning: { continuation.yield($0); continuation.finish() })
            let task = Task {
                // The stream ends however the server ends, so that a server that does not start is not waited for.
                defer { continuation.finish() }
                try await service.run()
            }
            var bound: [Int]?
            for await reported in ports { bound = reported }
            if let port = bound?.first {
                self.service = service
                self.task = task
                socket = try connectLoopback(port: port)
                // The keys, so that every GET hits and every SET overwrites.
                try exchange(sets, count: serverKeys, perWrite: 16, reply: (UInt8(ascii: "+"), 5))
                return
            }
            do { try await task.value } catch { lastError = error }
        }
        throw lastError
    }

    func stop() async {
        if socket >= 0 { close(socket) }
        socket = -1
        service?.stopListening()
        _ = try? await task?.value
        service = nil
        task = nil
    }

    /// One sample: 1,000 commands (one per key, ``serverKeys``), `perWrite` per `send`, each write's replies read
    /// before the next.
    func run(_ benchmark: Benchmark, command: Command, perWrite: Int) {
        let block = command == .get ? gets : sets
        // "$100\r\n<value>\r\n" or "+OK\r\n"
        let reply = command == .get ? (first: UInt8(ascii: "$"), bytes: 1 + 3 + 2 + serverValueBytes + 2) : (UInt8(ascii: "+"), 5)
        do {
            try exchange(block, count: serverKeys, perWrite: perWrite, reply: reply)
        } catch {
            benchmark.error("\(error)")
        }
    }

    /// Sends `count` commands of `block`, `perWrite` at a time, and after each write reads the replies: each
    /// `reply.bytes` long and starting with `reply.first`.
    private func exchange(_ block: CommandBlock, count: Int, perWrite: Int, reply: (first: UInt8, bytes: Int)) throws {
        var index = 0
        while index < count {
            let end = min(count, index + perWrite)
            try block.bytes.withUnsafeBytes { raw in
                try sendAll(UnsafeRawBufferPointer(rebasing: raw[block.offsets[index]..<block.offsets[end]]))
            }
            let total = (end - index) * reply.bytes
            try receive(exactly: total)
            // Another reply (an error) would have another length, which shows where each reply begins and ends.
            for start in stride(from: 0, to: total, by: reply.bytes)
            where replies[start] != reply.first || replies[start + reply.bytes - 1] != UInt8(ascii: "\n") {
                let shown = UnsafeRawBufferPointer(rebasing: replies[start..<min(total, start + 64)])
                throw BenchmarkSetupError("unexpected reply: \(String(decoding: shown, as: UTF8.self))")
            }
            index = end
        }
    }

    private func sendAll(_ bytes: UnsafeRawBufferPointer) throws {
        var sent = 0
        while sent < bytes.count {
            let n = send(socket, bytes.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL))
            guard n > 0 else { throw BenchmarkSetupError("send failed: errno \(errno)") }
            sent += n
        }
    }

    private func receive(exactly total: Int) throws {
        var received = 0
        while received < total {
            let n = recv(socket, replies.baseAddress! + received, min(replies.count, total) - received, 0)
            guard n > 0 else { throw BenchmarkSetupError(n == 0 ? "the server closed the connection" : "recv failed: errno \(errno)") }
            received += n
        }
    }
}

/// RESP commands back to back, and where each starts (one more offset: the end).
struct CommandBlock {
    let bytes: [UInt8]
    let offsets: [Int]

    init(commands: [[String]]) {
        var bytes: [UInt8] = []
        var offsets: [Int] = []
        for arguments in commands {
            offsets.append(bytes.count)
            bytes += Array("*\(arguments.count)\r\n".utf8)
            for argument in arguments {
                bytes += Array("$\(argument.utf8.count)\r\n\(argument)\r\n".utf8)
            }
        }
        offsets.append(bytes.count)
        self.bytes = bytes
        self.offsets = offsets
    }
}
