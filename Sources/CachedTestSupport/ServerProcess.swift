import Foundation
import Glibc

/// A server process started for tests: the built `cached-server` (or `CACHED_SERVER_BIN`), or the system's
/// `redis-server`, on a free loopback port. It can be stopped (SIGTERM, then SIGKILL), killed as a crash would,
/// and restarted on the same port; it is stopped and its scratch directory removed when the value is released.
public final class ServerProcess: @unchecked Sendable {
    public enum Kind: String, Sendable, CustomStringConvertible {
        case cached = "cached-server"
        case redis = "redis-server"

        public var description: String { rawValue }
    }

    /// How the server learns its port and bind address.
    public enum ConfigSource: Sendable {
        /// `--port N --bind 127.0.0.1` flags.
        case flags
        /// A config file holding `port N` and `bind 127.0.0.1` followed by `contents`, named first on the command
        /// line as redis-server takes it (`server path.conf ...`).
        case file(contents: String)
        /// The same file given as `--config path.conf` (cached-server only; redis-server has no such flag).
        case configFlag(contents: String)
    }

    public let kind: Kind
    /// The loopback port; 0 for a server made by ``launch(_:arguments:)``.
    public let port: Int
    /// A scratch directory of this server's own (its working directory), removed when the value is released.
    public let directory: URL
    private let executable: String
    private let arguments: [String]
    private let environment: [String: String]
    private let lock = NSLock()
    private var process: Process
    private let stderr = OutputCapture()

    private init(
        kind: Kind, port: Int, directory: URL, executable: String, arguments: [String],
        environment: [String: String] = [:]
    ) throws {
        self.kind = kind
        self.port = port
        self.directory = directory
        self.executable = executable
        self.arguments = arguments
        self.environment = environment
        self.process = Process()
        try spawn()
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(at: directory)
    }

    /// The running (or last) process's id.
    public var pid: Int32 { current.processIdentifier }

    private var current: Process { lock.withLock { process } }

    /// Whether the server process is running.
    public var isRunning: Bool { !current.hasExited }

    /// Starts a server of `kind` on a free loopback port with extra directives (`["--maxmemory", "1mb"]`),
    /// and waits until it answers PING (or an error such as `NOAUTH`: it is up either way). `environment` is added
    /// to the test's own. `choosingPort` picks the port (again for each of up to five attempts). With
    /// `openFilesSoftLimit` (and `openFilesHardLimit`), the server starts with that soft (and hard) limit on open
    /// files, through util-linux's `prlimit`.
    public static func start(
        _ kind: Kind, arguments: [String] = [], config: ConfigSource = .flags, environment: [String: String] = [:],
        openFilesSoftLimit: Int? = nil, openFilesHardLimit: Int? = nil, choosingPort: () throws -> Int = freeLoopbackPort
    ) throws -> ServerProcess {
        var executable = try ExternalProgram.server(kind).path()
        var prefix: [String] = []
        if let openFilesSoftLimit {
            prefix = ["--nofile=\(openFilesSoftLimit):\(openFilesHardLimit.map(String.init) ?? "")", executable]
            executable = try ExternalProgram.findOnPath("prlimit", package: "util-linux")
        }
        var lastError: Error = TestEnvironmentError("could not start \(kind.rawValue)")
        for _ in 0..<5 {
            let work = try makeDirectory()
            let port = try choosingPort()
            var args: [String]
            switch config {
            case .flags:
                args = ["--port", String(port), "--bind", "127.0.0.1"]
            case .file(let contents), .configFlag(let contents):
                let file = work.appendingPathComponent("server.conf")
                try Data("port \(port)\nbind 127.0.0.1\n\(contents)".utf8).write(to: file)
                if case .file = config { args = [file.path] } else { args = ["--config", file.path] }
            }
            args = prefix + args + defaultArguments(for: kind, work: work) + arguments
            do {
                let server = try ServerProcess(
                    kind: kind, port: port, directory: work, executable: executable, arguments: args,
                    environment: environment)
                do {
                    try server.waitUntilReady(timeout: 15)
                    return server
                } catch {
                    lastError = error
                }
            } catch {
                try? FileManager.default.removeItem(at: work)
                throw error
            }
        }
        throw lastError
    }

    /// Starts a server of `kind` with exactly `arguments` (plus the settings that keep redis-server from
    /// writing files) and does not wait for it to listen: for servers that should refuse to start, or that
    /// listen only on a Unix socket. ``port`` is `port` (0 unless the caller chose one for the arguments).
    public static func launch(
        _ kind: Kind, arguments: [String], environment: [String: String] = [:], port: Int = 0
    ) throws -> ServerProcess {
        let executable = try ExternalProgram.server(kind).path()
        let work = try makeDirectory()
        do {
            return try ServerProcess(
                kind: kind, port: port, directory: work, executable: executable,
                arguments: defaultArguments(for: kind, work: work) + arguments, environment: environment)
        } catch {
            try? FileManager.default.removeItem(at: work)
            throw error
        }
    }

    /// Starts the server again with the same arguments, on the same port (after ``stop()`` or ``kill()``), and
    /// waits until it answers.
    public func restart() throws {
        guard current.hasExited else { throw TestEnvironmentError("\(kind.rawValue) on port \(port) is still running") }
        try spawn()
        try waitUntilReady(timeout: 15)
    }

    /// Sends `signal` (SIGTERM, SIGINT...) to the server.
    public func send(signal: Int32) {
        Glibc.kill(current.processIdentifier, signal)
    }

    /// Kills the server with SIGKILL, as a crash would, and waits for it to exit.
    public func kill() {
        let process = current
        guard !process.hasExited else { return }
        Glibc.kill(process.processIdentifier, SIGKILL)
        process.waitForExit(timeout: 60)
    }

    /// Stops the server: SIGTERM, then SIGKILL if it is still running 5 s later.
    public func stop() {
        let process = current
        guard !process.hasExited else { return }
        Glibc.kill(process.processIdentifier, SIGTERM)
        if process.waitForExit(timeout: 5) == nil {
            Glibc.kill(process.processIdentifier, SIGKILL)
            process.waitForExit(timeout: 60)
        }
    }

    /// The exit status once the server has exited, polling for at most `timeout` seconds; nil if it is still
    /// running then. A server killed by a signal reports 128 + the signal's number.
    public func waitForExit(timeout: TimeInterval) -> Int32? {
        current.waitForExit(timeout: timeout)
    }

    /// Whether a TCP connection to the server's port is refused (nothing listens there any more).
    public func refusesConnections() -> Bool {
        guard let fd = try? connectLoopback(port: port) else { return true }
        close(fd)
        return false
    }

    /// What the server wrote to stderr, over all its runs. Reading it to the end needs the server gone, so a
    /// server still running is stopped first.
    /// What the server has written to standard error so far, while it keeps running.
    public func standardErrorSoFar() -> String {
        String(decoding: stderr.data, as: UTF8.self)
    }

    /// Waits up to `timeout` for `text` to appear in what the server writes to standard error (which reaches the
    /// test a little after the server wrote it); whether it did.
    public func waitForLog(_ text: String, timeout: TimeInterval = 10) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while !standardErrorSoFar().contains(text) {
            guard Date() < deadline else { return false }
            usleep(5_000)
        }
        return true
    }

    /// Stops the server (if it still runs) and returns everything it wrote to standard error.
    public func standardError() -> String {
        stop()
        stderr.waitForEnd(timeout: 10)
        return String(decoding: stderr.data, as: UTF8.self)
    }

    /// The server process's resident memory in bytes (VmRSS).
    public func residentBytes() throws -> Int { try statusBytes("VmRSS") }

    /// The most resident memory the server process has had since it started (VmHWM), in bytes.
    public func peakResidentBytes() throws -> Int { try statusBytes("VmHWM") }

    private func statusBytes(_ field: String) throws -> Int {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix(field + ":") }),
            let kilobytes = Int(line.split(separator: " ").dropFirst().first ?? "")
        else { throw TestEnvironmentError("no \(field) in /proc/\(pid)/status") }
        return kilobytes * 1024
    }

    /// The server process's soft limit on open files, from /proc/PID/limits.
    public func openFilesSoftLimit() throws -> Int {
        let limits = try String(contentsOfFile: "/proc/\(pid)/limits", encoding: .utf8)
        guard let line = limits.split(separator: "\n").first(where: { $0.hasPrefix("Max open files") }),
            let soft = Int(line.dropFirst("Max open files".count).split(separator: " ").first ?? "")
        else { throw TestEnvironmentError("no open files limit in /proc/\(pid)/limits") }
        return soft
    }

    // MARK: private

    private static func makeDirectory() throws -> URL {
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("cached-test-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        return work
    }

    /// redis-server writes no snapshot, no AOF, keeps its files in the test's directory, and logs to stderr as
    /// cached-server does (by default it logs to stdout).
    private static func defaultArguments(for kind: Kind, work: URL) -> [String] {
        guard kind == .redis else {
            // The test suite runs against either kind of connection I/O: CACHED_TEST_IO_FAST_PATH=no starts
            // every cached-server on plain SwiftNIO.
            guard let fastPath = ProcessInfo.processInfo.environment["CACHED_TEST_IO_FAST_PATH"], !fastPath.isEmpty
            else { return [] }
            return ["--io-fast-path", fastPath]
        }
        return ["--save", "", "--appendonly", "no", "--dir", work.path, "--protected-mode", "no", "--logfile", "/dev/stderr"]
    }

    private func spawn() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        }
        process.currentDirectoryURL = directory
        let err = Pipe()
        process.standardError = err
        process.standardOutput = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.runWithUnblockedSignals()
        lock.withLock { self.process = process }
        stderr.drain(err.fileHandleForReading)
    }

    private func waitUntilReady(timeout: TimeInterval) throws {
        let process = current
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let status = process.exitStatusIfExited {
                throw TestEnvironmentError("\(kind.rawValue) exited with status \(status)")
            }
            if let fd = try? connectLoopback(port: port) {
                defer { close(fd) }
                let ping = Array("*1\r\n$4\r\nPING\r\n".utf8)
                if write(fd, ping, ping.count) == ping.count {
                    var reply = [UInt8](repeating: 0, count: 64)
                    let n = read(fd, &reply, reply.count)
                    // +PONG, or an error such as -NOAUTH from a server with a password: either way it is up.
                    if n > 0 && (reply[0] == UInt8(ascii: "+") || reply[0] == UInt8(ascii: "-")) { return }
                }
            }
            usleep(20_000)
        }
        throw TestEnvironmentError("\(kind.rawValue) did not answer PING on port \(port) within \(Int(timeout)) s")
    }
}
