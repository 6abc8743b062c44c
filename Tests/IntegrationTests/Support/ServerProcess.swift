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

    /// Starts a server of `kind` on a free loopback port with extra directives (`["--maxmemory", "1mb"]`),
    /// and waits until it answers PING.
    static func start(_ kind: Kind, arguments: [String] = []) throws -> ServerProcess {
        let executable = try executablePath(for: kind)
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("cached-test-\(UUID().uuidString)")
        var lastError: Error = TestEnvironmentError("could not start \(kind.rawValue)")
        for _ in 0..<5 {
            // A failed attempt's stop() removed the directory.
            try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
            let port = try freeLoopbackPort()
            var args = ["--port", String(port), "--bind", "127.0.0.1"]
            if kind == .redis {
                args += ["--save", "", "--appendonly", "no", "--dir", work.path, "--protected-mode", "no"]
            }
            args += arguments
            let process = Process()
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = args
            process.currentDirectoryURL = work
            let err = Pipe()
            process.standardError = err
            process.standardOutput = FileHandle.nullDevice
            process.standardInput = FileHandle.nullDevice
            try process.runWithUnblockedSignals()
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

    /// What the server wrote to stderr so far (only after it stopped, to avoid blocking).
    func standardError() -> String {
        String(decoding: stderrPipe.fileHandleForReading.availableData, as: UTF8.self)
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
                    if n > 0 && reply[0] == UInt8(ascii: "+") { return }
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
