import Logging

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The `pidfile` directive: the process id written at startup, the file removed at exit, as redis-server
/// does. A file that cannot be written is a warning, not a reason not to run.
struct PidFile {
    private let path: String
    private let logger: Logger
    /// Whether this process wrote the file (and so removes it).
    private let written: Bool

    /// Writes the process id to `path`; nothing when `path` is empty.
    init(path: String, logger: Logger) {
        self.path = path
        self.logger = logger
        guard !path.isEmpty else {
            written = false
            return
        }
        var text = "\(getpid())\n"
        var failure: String?
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        if descriptor < 0 {
            failure = String(cString: strerror(errno))
        } else {
            let count = text.withUTF8 { write(descriptor, $0.baseAddress, $0.count) }
            if count != text.utf8.count { failure = count < 0 ? String(cString: strerror(errno)) : "short write" }
            close(descriptor)
        }
        written = failure == nil
        if let failure {
            logger.warning("Failed to write PID file", metadata: ["file": "\(path)", "error": "\(failure)"])
        }
    }

    /// Removes the file, if this process wrote it.
    func remove() {
        guard written else { return }
        logger.notice("Removing the pid file", metadata: ["file": "\(path)"])
        unlink(path)
    }
}
