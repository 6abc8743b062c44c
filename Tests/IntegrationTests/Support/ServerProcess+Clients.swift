import CachedTestSupport
import Foundation

/// The client programs Redis users point at a server, aimed at this one.
extension ServerProcess {
    /// `redis-cli -h 127.0.0.1 -p PORT arguments…`, not attached to a terminal (so it prints replies the way
    /// scripts see them, not the `(nil)` / `(integer) 1` forms of an interactive session).
    func redisCli(_ arguments: [String], input: Data? = nil, timeout: TimeInterval = 15) throws -> ProgramOutput {
        try ExternalProgram.redisCli.run(["-h", "127.0.0.1", "-p", String(port)] + arguments, input: input, timeout: timeout)
    }

    func redisCli(_ arguments: String...) throws -> ProgramOutput {
        try redisCli(arguments)
    }

    /// `redis-cli` with line-buffered stdout, for modes that never end (`--stat`): it is killed after `seconds`
    /// and what it printed until then is returned.
    func redisCliUntilKilled(_ arguments: [String], after seconds: TimeInterval) throws -> ProgramOutput {
        let cli = try ExternalProgram.redisCli.path()
        do {
            let output = try ExternalProgram.stdbuf.run(
                ["-oL", cli, "-h", "127.0.0.1", "-p", String(port)] + arguments, timeout: seconds)
            throw TestEnvironmentError("redis-cli \(arguments.joined(separator: " ")) ended by itself: \(output.summary)")
        } catch let timedOut as ProgramTimedOut {
            return timedOut.output
        }
    }

    /// `redis-benchmark -h 127.0.0.1 -p PORT arguments…`.
    func redisBenchmark(_ arguments: [String], timeout: TimeInterval = 60) throws -> ProgramOutput {
        try ExternalProgram.redisBenchmark.run(["-h", "127.0.0.1", "-p", String(port)] + arguments, timeout: timeout)
    }

    /// A hiredis connection to this server.
    func connect() throws -> HiredisConnection {
        try HiredisConnection(port: port)
    }

    /// Stores `count` keys through one pipelined connection: SET `name(i)` `value(i)` for i in 0..<count.
    func load(count: Int, name: (Int) -> String, value: (Int) -> String = { "v\($0)" }) throws {
        let connection = try connect()
        for start in stride(from: 0, to: count, by: 1_000) {
            let batch = start..<Swift.min(start + 1_000, count)
            for i in batch { try connection.append("SET", name(i), value(i)) }
            for i in batch {
                let reply = try connection.reply()
                guard reply == .ok else { throw TestEnvironmentError("SET \(name(i)) while loading: \(reply)") }
            }
        }
    }
}

/// Python scripts kept beside these tests, run with the system python3 and redis-py.
enum PythonScript {
    /// The directory that holds the scripts (in the source tree, beside this file's parent).
    static var directory: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Python")
    }

    /// Runs `name` with `arguments`; throws a clear error when python3 or redis-py is not installed.
    static func run(_ name: String, _ arguments: [String], timeout: TimeInterval = 30) throws -> ProgramOutput {
        let check = try ExternalProgram.python3.run(["-c", "import redis"], timeout: timeout)
        guard check.status == 0 else {
            let python = (try? ExternalProgram.python3.path()) ?? "python3"
            throw TestEnvironmentError(
                "redis-py is not installed for \(python): pip install redis (or run `make deps`); "
                    + "`import redis` said: \(check.standardError.split(separator: "\n").last ?? "")")
        }
        let script = directory.appendingPathComponent(name).path
        guard FileManager.default.fileExists(atPath: script) else {
            throw TestEnvironmentError("the test script \(name) is missing from \(directory.lastPathComponent)/")
        }
        return try ExternalProgram.python3.run([script] + arguments, timeout: timeout)
    }
}
