import Foundation

#if canImport(Glibc)
import Glibc
#endif

// A small twin of IntegrationTests' ServerProcess (test targets cannot import each other).

/// A `cached-server` or `redis-server` started for tests on a loopback port; stopped with SIGTERM (then SIGKILL)
/// by ``stop()`` or when released.
final class StoreServerProcess: @unchecked Sendable {
    enum Kind: String, Sendable {
        case cached = "cached-server"
        case redis = "redis-server"
    }

    let kind: Kind
    let port: Int
    let arguments: [String]
    private let lock = NSLock()
    private var process: Process?
    private let workDirectory: URL

    private init(kind: Kind, port: Int, arguments: [String]) {
        self.kind = kind
        self.port = port
        self.arguments = arguments
        self.workDirectory = FileManager.default.temporaryDirectory
            .appendingPathComponent("cached-store-test-\(UUID().uuidString)")
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(at: workDirectory)
    }

    /// Starts a server of `kind` on a free loopback port, with extra arguments (`["--requirepass", "pw"]`),
    /// and waits until it answers PING (or `NOAUTH`, when it wants a password).
    static func start(_ kind: Kind, arguments: [String] = []) throws -> StoreServerProcess {
        var lastError: Error = StoreTestEnvironmentError("could not start \(kind.rawValue)")
        for _ in 0..<5 {
            let server = StoreServerProcess(kind: kind, port: try freeLoopbackPort(), arguments: arguments)
            do {
                try server.launch()
                return server
            } catch {
                lastError = error
                server.stop()
            }
        }
        throw lastError
    }

    /// Starts the server again on the same port (after ``stop()`` or ``kill()``).
    func restart() throws {
        try launch()
    }

    /// Kills the server with SIGKILL, as a crash would, and waits for it to exit.
    func kill() {
        lock.lock()
        let process = self.process
        self.process = nil
        lock.unlock()
        guard let process, process.isRunning else { return }
        Glibc.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// Stops the server with SIGTERM (SIGKILL after 5 s).
    func stop() {
        lock.lock()
        let process = self.process
        self.process = nil
        lock.unlock()
        guard let process, process.isRunning else { return }
        Glibc.kill(process.processIdentifier, SIGTERM)
        let deadline = Date().addingTimeInterval(5)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning { Glibc.kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }

    private func launch() throws {
        try FileManager.default.createDirectory(at: workDirectory, withIntermediateDirectories: true)
        var args = ["--port", String(port), "--bind", "127.0.0.1"]
        if kind == .redis {
            args += ["--save", "", "--appendonly", "no", "--dir", workDirectory.path, "--protected-mode", "no"]
        }
        args += arguments
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try Self.executablePath(for: kind))
        process.arguments = args
        process.currentDirectoryURL = workDirectory
        process.standardError = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.runWithUnblockedSignalsForStoreTests()
        lock.lock()
        self.process = process
        lock.unlock()
        try waitUntilReady(process, timeout: 15)
    }

    private func waitUntilReady(_ process: Process, timeout: TimeInterval) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            guard process.isRunning else {
                throw StoreTestEnvironmentError("\(kind.rawValue) exited with status \(process.terminationStatus)")
            }
            if let fd = try? connectLoopback(port: port) {
                defer { close(fd) }
                let ping = Array("*1\r\n$4\r\nPING\r\n".utf8)
                if write(fd, ping, ping.count) == ping.count {
                    var reply = [UInt8](repeating: 0, count: 64)
                    let n = read(fd, &reply, reply.count)
                    // "+PONG", or "-NOAUTH" from a server started with --requirepass.
                    if n > 0 && (reply[0] == UInt8(ascii: "+") || reply[0] == UInt8(ascii: "-")) { return }
                }
            }
            usleep(20_000)
        }
        throw StoreTestEnvironmentError("\(kind.rawValue) did not answer PING on port \(port) within \(Int(timeout)) s")
    }

    /// `cached-server` beside the test bundle (or `CACHED_SERVER_BIN`), or `redis-server` on PATH.
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
            throw StoreTestEnvironmentError(
                "cached-server was not found beside the test bundle: run `swift build --product cached-server` first (or set CACHED_SERVER_BIN)")
        case .redis:
            let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
            for dir in path.split(separator: ":").map(String.init) + ["/usr/bin", "/usr/sbin"] {
                let candidate = "\(dir)/redis-server"
                if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            }
            throw StoreTestEnvironmentError("redis-server is not installed: apt-get install -y redis-server")
        }
    }
}

/// A precondition of the test environment that does not hold.
struct StoreTestEnvironmentError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

extension Process {
    /// `run()` from a fresh thread with every signal unblocked: a child inherits the spawning thread's signal
    /// mask, and test threads block SIGTERM, so a server spawned from one would ignore `stop()`.
    func runWithUnblockedSignalsForStoreTests() throws {
        final class Outcome: @unchecked Sendable { var error: Error? }
        let outcome = Outcome()
        let done = DispatchSemaphore(value: 0)
        let thread = Thread { [self] in
            var none = sigset_t()
            sigemptyset(&none)
            pthread_sigmask(SIG_SETMASK, &none, nil)
            do { try self.run() } catch { outcome.error = error }
            done.signal()
        }
        thread.start()
        done.wait()
        if let error = outcome.error { throw error }
    }
}

/// A TCP port on 127.0.0.1 that nothing listens on right now.
func freeLoopbackPort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw StoreTestEnvironmentError("socket() failed: errno \(errno)") }
    defer { close(fd) }
    var addr = loopbackAddress(port: 0)
    let bound = withUnsafePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard bound == 0 else { throw StoreTestEnvironmentError("bind() failed: errno \(errno)") }
    return try boundPort(fd)
}

/// A blocking TCP connection to 127.0.0.1:`port`.
func connectLoopback(port: Int) throws -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw StoreTestEnvironmentError("socket() failed: errno \(errno)") }
    var addr = loopbackAddress(port: port)
    let rc = withUnsafePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard rc == 0 else {
        close(fd)
        throw StoreTestEnvironmentError("connect to 127.0.0.1:\(port) failed: errno \(errno)")
    }
    return fd
}

func loopbackAddress(port: Int) -> sockaddr_in {
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_port = in_port_t(UInt16(port).bigEndian)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    return addr
}

func boundPort(_ fd: Int32) throws -> Int {
    var addr = sockaddr_in()
    var len = socklen_t(MemoryLayout<sockaddr_in>.size)
    let rc = withUnsafeMutablePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
    }
    guard rc == 0 else { throw StoreTestEnvironmentError("getsockname() failed: errno \(errno)") }
    return Int(UInt16(bigEndian: addr.sin_port))
}
