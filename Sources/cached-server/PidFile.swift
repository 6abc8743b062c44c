import Glibc
import Logging
import Synchronization
import SystemPackage

/// The `pidfile` directive: the process id written once the server listens, the file removed at exit, as
/// redis-server does. Written only after the listeners are up, so that a second server started with the same
/// configuration, which fails to bind, neither overwrites nor removes the running one's file; removed only if it
/// still holds this process's id. A file that cannot be written is a warning, not a reason to stop.
final class PidFile: Sendable {
    private let path: String
    private let logger: Logger
    private let pid = getpid()
    /// Whether this process wrote the file.
    private let written = Mutex(false)

    /// A pid file at `path`; nothing is written or removed when `path` is empty.
    init(path: String, logger: Logger) {
        self.path = path
        self.logger = logger
    }

    /// Writes the process id.
    func record() {
        guard !path.isEmpty else { return }
        let failure: String?
        do {
            let file = try FileDescriptor.open(
                FilePath(path), .writeOnly, options: [.create, .truncate, .closeOnExec],
                permissions: [.ownerReadWrite, .groupRead, .otherRead])
            defer { try? file.close() }
            try file.writeAll("\(pid)\n".utf8)
            failure = nil
        } catch {
            failure = "\(error)"
        }
        written.withLock { $0 = failure == nil }
        if let failure {
            logger.warning("Failed to write PID file", metadata: ["file": "\(path)", "error": "\(failure)"])
        }
    }

    /// Removes the file, if this process wrote it and it still holds this process's id.
    func remove() {
        guard written.withLock({ $0 }) else { return }
        var buffer = [UInt8](repeating: 0, count: 32)
        guard let file = try? FileDescriptor.open(FilePath(path), .readOnly, options: .closeOnExec) else { return }
        let count = (try? buffer.withUnsafeMutableBytes { try file.read(into: $0) }) ?? 0
        try? file.close()
        guard count > 0, String(decoding: buffer[0..<count], as: UTF8.self) == "\(pid)\n" else { return }
        logger.notice("Removing the pid file", metadata: ["file": "\(path)"])
        unlink(path)
    }
}
