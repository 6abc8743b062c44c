import BenchmarkLoopback
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A `cached-server` on a free loopback port, persistence off, for the benchmarks that need a live store.
///
/// The binary is `CACHED_SERVER_BIN`, else the parent package's release build (`.build/release/cached-server`,
/// found from the working directory or from this file's place in the repository). The server is spawned from a
/// thread of its own under `setpriv --pdeathsig KILL`, and that thread waits for it: if the benchmark process
/// dies without stopping it, the thread is gone and the kernel kills the server.
final class CachedServer: @unchecked Sendable {
    let port: Int
    private let directory: String
    private let lock = NSLock()
    private var pid: pid_t = 0
    private var exited = false
    private let spawned = DispatchSemaphore(value: 0)
    private let reaped = DispatchSemaphore(value: 0)
    private var spawnError: String?

    /// Starts a server and waits until it answers PING (5 attempts on fresh ports).
    static func start() throws -> CachedServer {
        let binary = try findBinary()
        var lastError: any Error = BenchmarkSetupError("cached-server did not start")
        for _ in 0..<5 {
            let server = try CachedServer(binary: binary, port: freeLoopbackPort())
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

    private init(binary: String, port: Int) throws {
        self.port = port
        let template = NSTemporaryDirectory() + "cached-bench-XXXXXX"
        var buffer = Array(template.utf8CString)
        guard mkdtemp(&buffer) != nil else { throw BenchmarkSetupError("mkdtemp failed: errno \(errno)") }
        directory = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        var argv = [
            binary, "--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
            "--dir", directory,
        ]
        if FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") {
            argv = ["/usr/bin/setpriv", "--pdeathsig", "KILL", "--"] + argv
        }
        let command = argv
        let thread = Thread { [self] in self.spawnAndWait(command) }
        thread.name = "cached-server-\(port)"
        thread.start()
        spawned.wait()
        if let spawnError { throw BenchmarkSetupError(spawnError) }
    }

    deinit { stop() }

    private func spawnAndWait(_ argv: [String]) {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        // Its log (start and shutdown notices) would land in the middle of the benchmark tool's output.
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        let cArguments = argv.map { strdup($0) } + [nil]
        defer { cArguments.forEach { free($0) } }
        var child: pid_t = 0
        let status = posix_spawn(&child, argv[0], &actions, nil, cArguments, environ)
        lock.withLock {
            if status == 0 { pid = child } else { spawnError = "cannot start \(argv[0]): error \(status)" }
        }
        spawned.signal()
        guard status == 0 else { return }
        var exitStatus: Int32 = 0
        while waitpid(child, &exitStatus, 0) < 0 && errno == EINTR {}
        lock.withLock { exited = true }
        reaped.signal()
    }

    /// SIGTERM, then SIGKILL if the server is still running 5 s later; removes its directory.
    func stop() {
        let (child, done) = lock.withLock { (pid, exited) }
        if child > 0 && !done {
            kill(child, SIGTERM)
            if reaped.wait(timeout: .now() + 5) == .timedOut {
                kill(child, SIGKILL)
                reaped.wait()
            }
        }
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func waitUntilReady(timeout: TimeInterval) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if lock.withLock({ exited }) { throw BenchmarkSetupError("cached-server exited at start (port \(port))") }
            if let fd = try? connectLoopback(port: port) {
                defer { close(fd) }
                let ping = Array("*1\r\n$4\r\nPING\r\n".utf8)
                if write(fd, ping, ping.count) == ping.count {
                    var reply = [UInt8](repeating: 0, count: 16)
                    if read(fd, &reply, reply.count) > 0 && reply[0] == UInt8(ascii: "+") { return }
                }
            }
            usleep(20_000)
        }
        throw BenchmarkSetupError("cached-server did not answer PING on port \(port) within \(Int(timeout)) s")
    }

    private static func findBinary() throws -> String {
        if let path = ProcessInfo.processInfo.environment["CACHED_SERVER_BIN"], !path.isEmpty {
            guard FileManager.default.isExecutableFile(atPath: path) else {
                throw BenchmarkSetupError("CACHED_SERVER_BIN=\(path) is not an executable")
            }
            return path
        }
        let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
        let candidates = [
            "../.build/release/cached-server", ".build/release/cached-server",
            repository + "/.build/release/cached-server",
        ]
        for candidate in candidates where FileManager.default.isExecutableFile(atPath: candidate) {
            return URL(fileURLWithPath: candidate).standardizedFileURL.path
        }
        throw BenchmarkSetupError(
            "no cached-server binary: build it with `swift build -c release --product cached-server` in the repository "
                + "root, or set CACHED_SERVER_BIN")
    }
}
