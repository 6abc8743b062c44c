import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A server process started for one test: the built `cached-server`, or the system's `redis-server`, on a
/// free loopback port. It is stopped (SIGTERM, then SIGKILL) when ``stop()`` is called or the value is released.
final class ServerProcess: @unchecked Sendable {
    enum Kind: String, Sendable {
        case cached = "cached-server"
        case redis = "redis-server"
    }

    let kind: Kind
    let port: Int
    let process: Process
    private let stderrPipe: Pipe
    private let workDirectory: URL

    var pid: Int32 { process.processIdentifier }

    private init(kind: Kind, port: Int, process: Process, stderrPipe: Pipe, workDirectory: URL) {
        self.kind = kind
        self.port = port
        self.process = process
        self.stderrPipe = stderrPipe
        self.workDirectory = workDirectory
    }

    deinit { stop() }

    /// How the server learns its port and bind address.
    enum ConfigSource {
        /// `--port N --bind 127.0.0.1` flags.
        case flags
        /// A config file holding `port N` and `bind 127.0.0.1` followed by `contents`, named first on the command
        /// line as redis-server takes it (`server path.conf ...`).
        case file(contents: String)
        /// The same file given as `--config path.conf` (cached-server only; redis-server has no such flag).
        case configFlag(contents: String)
    }

    /// Starts a server of `kind` on a free loopback port with extra directives (`["--maxmemory", "1mb"]`),
    /// and waits until it answers PING.
    /// With `openFilesSoftLimit`, the server starts with that soft limit on open files (through `prlimit`).
    static func start(
        _ kind: Kind, arguments: [String] = [], config: ConfigSource = .flags, openFilesSoftLimit: Int? = nil
    ) throws -> ServerProcess {
        var executable = try executablePath(for: kind)
        var prefix: [String] = []
        if let openFilesSoftLimit {
            prefix = ["--nofile=\(openFilesSoftLimit):", executable]
            executable = try findOnPath("prlimit", package: "util-linux")
        }
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("cached-test-\(UUID().uuidString)")
        var lastError: Error = TestEnvironmentError("could not start \(kind.rawValue)")
        for _ in 0..<5 {
            // A failed attempt's stop() removed the directory.
            try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
            let port = try freeLoopbackPort()
            var args: [String]
            switch config {
            case .flags:
                args = ["--port", String(port), "--bind", "127.0.0.1"]
            case .file(let contents), .configFlag(let contents):
                let file = work.appendingPathComponent("server.conf")
                try Data("port \(port)\nbind 127.0.0.1\n\(contents)".utf8).write(to: file)
                if case .file = config { args = [file.path] } else { args = ["--config", file.path] }
            }
            args += defaultArguments(for: kind, work: work) + arguments
            let (process, err) = try spawn(executable, prefix + args, in: work)
            let server = ServerProcess(kind: kind, port: port, process: process, stderrPipe: err, workDirectory: work)
            do {
                try server.waitUntilReady(timeout: 15)
                return server
            } catch {
                lastError = error
                server.stop()
            }
        }
        throw lastError
    }

    /// Starts a server of `kind` with exactly `arguments` (plus the settings that keep redis-server from
    /// writing files) and does not wait for it to listen: for servers that should refuse to start, or that
    /// listen only on a Unix socket. ``port`` is 0.
    static func launch(_ kind: Kind, arguments: [String]) throws -> ServerProcess {
        let executable = try executablePath(for: kind)
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("cached-test-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        let (process, err) = try spawn(executable, defaultArguments(for: kind, work: work) + arguments, in: work)
        return ServerProcess(kind: kind, port: 0, process: process, stderrPipe: err, workDirectory: work)
    }

    /// A scratch directory of this server's own, removed when it stops.
    var directory: URL { workDirectory }

    /// redis-server writes no snapshot, no AOF, keeps its files in the test's directory, and logs to stderr as
    /// cached-server does (by default it logs to stdout).
    private static func defaultArguments(for kind: Kind, work: URL) -> [String] {
        guard kind == .redis else { return [] }
        return ["--save", "", "--appendonly", "no", "--dir", work.path, "--protected-mode", "no", "--logfile", "/dev/stderr"]
    }

    private static func spawn(_ executable: String, _ arguments: [String], in work: URL) throws -> (Process, Pipe) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.currentDirectoryURL = work
        let err = Pipe()
        process.standardError = err
        process.standardOutput = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.runWithUnblockedSignals()
        return (process, err)
    }

    /// Sends `signal` (SIGTERM, SIGINT...) to the server.
    func send(signal: Int32) {
        kill(process.processIdentifier, signal)
    }

    /// The exit status once the server has exited, polling for at most `timeout` seconds; nil if it is still
    /// running then. A server killed by a signal reports 128 + the signal's number.
    func waitForExit(timeout: TimeInterval) -> Int32? {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { usleep(5_000) }
        if process.isRunning { return nil }
        process.waitUntilExit()
        return process.terminationReason == .uncaughtSignal ? 128 + process.terminationStatus : process.terminationStatus
    }

    /// Whether a TCP connection to the server's port is refused (nothing listens there any more).
    func refusesConnections() -> Bool {
        guard let fd = try? connectLoopback(port: port) else { return true }
        close(fd)
        return false
    }

    /// The server process's resident memory in bytes (VmRSS).
    func residentBytes() throws -> Int {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
            let kilobytes = Int(line.split(separator: " ").dropFirst().first ?? "")
        else { throw TestEnvironmentError("no VmRSS for \(pid)") }
        return kilobytes * 1024
    }

    /// The server process's soft limit on open files, from /proc/PID/limits.
    func openFilesSoftLimit() throws -> Int {
        let limits = try String(contentsOfFile: "/proc/\(pid)/limits", encoding: .utf8)
        guard let line = limits.split(separator: "\n").first(where: { $0.hasPrefix("Max open files") }),
            let soft = Int(line.dropFirst("Max open files".count).split(separator: " ").first ?? "")
        else { throw TestEnvironmentError("no open files limit in /proc/\(pid)/limits") }
        return soft
    }

    /// Stops the server and removes its working directory.
    func stop() {
        if process.isRunning {
            kill(process.processIdentifier, SIGTERM)
            let deadline = Date().addingTimeInterval(5)
            while process.isRunning && Date() < deadline { usleep(10_000) }
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(at: workDirectory)
    }

    /// What the server wrote to stderr. Reading it to the end needs the server gone, so a server still running
    /// is stopped first.
    func standardError() -> String {
        if process.isRunning { stop() }
        return String(decoding: (try? stderrPipe.fileHandleForReading.readToEnd()) ?? Data(), as: UTF8.self)
    }

    private func waitUntilReady(timeout: TimeInterval) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            guard process.isRunning else {
                throw TestEnvironmentError("\(kind.rawValue) exited with status \(process.terminationStatus)")
            }
            if let fd = try? connectLoopback(port: port) {
                defer { close(fd) }
                let ping = Array("*1\r\n$4\r\nPING\r\n".utf8)
                if write(fd, ping, ping.count) == ping.count {
                    var reply = [UInt8](repeating: 0, count: 64)
                    let n = read(fd, &reply, reply.count)
                    // +PONG, or -NOAUTH from a server with requirepass: either way it is up.
                    if n > 0 && (reply[0] == UInt8(ascii: "+") || reply.starts(with: "-NOAUTH".utf8)) { return }
                }
            }
            usleep(20_000)
        }
        throw TestEnvironmentError("\(kind.rawValue) did not answer PING on port \(port) within \(Int(timeout)) s")
    }

    // MARK: locating executables

    /// The path of `kind`'s executable: the `cached-server` built beside this test bundle (or
    /// `CACHED_SERVER_BIN`), or `redis-server` on PATH.
    static func executablePath(for kind: Kind) throws -> String {
        switch kind {
        case .cached:
            if let override = ProcessInfo.processInfo.environment["CACHED_SERVER_BIN"] { return override }
            let selfPath = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
                ?? CommandLine.arguments[0]
            var dir = URL(fileURLWithPath: selfPath).deletingLastPathComponent()
            for _ in 0..<4 {
                let candidate = dir.appendingPathComponent("cached-server").path
                if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
                dir = dir.deletingLastPathComponent()
            }
            throw TestEnvironmentError(
                "cached-server was not found beside the test bundle: run `swift build` first (or set CACHED_SERVER_BIN)")
        case .redis:
            return try findOnPath(kind.rawValue, package: "redis-server")
        }
    }

    /// The full path of a program on PATH, or an error naming the Debian package that provides it.
    static func findOnPath(_ program: String, package: String) throws -> String {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        // (Without the map to String, the `+` below makes the elements Character arrays and no PATH entry matches.)
        for dir in path.split(separator: ":").map(String.init) + ["/usr/bin", "/usr/sbin"] {
            let candidate = "\(dir)/\(program)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        throw TestEnvironmentError("\(program) is not installed: apt-get install -y \(package) (or run `make deps`)")
    }
}

/// A precondition of the test environment that does not hold (a missing program, a server that did not start).
struct TestEnvironmentError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A TCP port on 127.0.0.1 that nothing listens on right now.
func freeLoopbackPort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw TestEnvironmentError("socket() failed: errno \(errno)") }
    defer { close(fd) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_port = 0
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    let bound = withUnsafePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard bound == 0 else { throw TestEnvironmentError("bind() failed: errno \(errno)") }
    var len = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
    }
    return Int(UInt16(bigEndian: addr.sin_port))
}

/// A blocking TCP connection to 127.0.0.1:`port`, as a file descriptor.
func connectLoopback(port: Int) throws -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw TestEnvironmentError("socket() failed: errno \(errno)") }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_port = in_port_t(UInt16(port).bigEndian)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    let rc = withUnsafePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard rc == 0 else {
        close(fd)
        throw TestEnvironmentError("connect to 127.0.0.1:\(port) failed: errno \(errno)")
    }
    var one: Int32 = 1
    setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    return fd
}
