import Glibc
import Logging
import SystemPackage

/// Where log lines go: standard error, or a file opened for appending.
final class LogOutput: Sendable {
    /// Standard error, formatted for journald when systemd captures it.
    static let standardError = LogOutput(
        file: .standardError, isJournal: isatty(STDERR_FILENO) == 0 && getenv("JOURNAL_STREAM") != nil)

    /// The file lines are written to.
    let file: FileDescriptor
    /// Whether lines are formatted for journald: written to standard error, which is
    /// not a terminal, with `JOURNAL_STREAM` set by systemd.
    let isJournal: Bool
    /// The log file, or nil for standard error.
    let path: String?

    private init(file: FileDescriptor, isJournal: Bool, path: String? = nil) {
        self.file = file
        self.isJournal = isJournal
        self.path = path
    }

    /// Opens `path` for appending, or uses standard error when `path` is empty.
    convenience init(path: String) throws(LogFileError) {
        if path.isEmpty {
            self.init(file: Self.standardError.file, isJournal: Self.standardError.isJournal)
            return
        }
        self.init(file: try Self.openForAppending(path), isJournal: false, path: path)
    }

    private static func openForAppending(_ path: String) throws(LogFileError) -> FileDescriptor {
        do {
            return try FileDescriptor.open(
                FilePath(path), .writeOnly, options: [.append, .create, .closeOnExec],
                permissions: [.ownerReadWrite, .groupRead, .otherRead])
        } catch {
            throw LogFileError(reason: "\(error)")
        }
    }

    /// Opens the log file again by its path (after logrotate moved it away): later lines go to the file now
    /// at that path. The descriptor keeps its number, so a line being written meanwhile goes to one file or
    /// the other, whole. Does nothing for standard error.
    func reopen() throws(LogFileError) {
        guard let path else { return }
        let fresh = try Self.openForAppending(path)
        defer { try? fresh.close() }
        do {
            try fresh.duplicate(as: file, options: .closeOnExec)
        } catch {
            throw LogFileError(reason: "\(error)")
        }
    }

    /// Writes `text` with as few `write` calls as possible, so that whole lines from
    /// concurrent loggers do not interleave.
    func write(_ text: String) {
        _ = try? file.writeAll(text.utf8)
    }
}

/// The log file could not be opened; `reason` is the system's explanation.
struct LogFileError: Error, CustomStringConvertible {
    let reason: String
    var description: String { reason }
}

/// A swift-log handler writing one line per event, without colours.
///
/// For journald the line is `<N>label: message key=value ...`, where `<N>` is the
/// syslog priority journald reads (SyslogLevelPrefix) and journald adds the time.
/// Otherwise it is `2026-01-31T12:00:00.000Z notice label: message key=value ...`.
struct LineLogHandler: LogHandler {
    let label: String
    var logLevel: Logger.Level
    var metadata: Logger.Metadata = [:]
    let output: LogOutput

    init(label: String, logLevel: Logger.Level, output: LogOutput) {
        self.label = label
        self.logLevel = logLevel
        self.output = output
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var merged = metadata
        if let explicit = event.metadata { merged.merge(explicit) { _, new in new } }
        if let error = event.error { merged["error"] = "\(error)" }
        var text = output.isJournal ? "<\(Self.syslogPriority(event.level))>" : "\(Self.timestamp()) \(event.level) "
        text += "\(label): \(Self.singleLine(event.message.description))"
        for (key, value) in merged.sorted(by: { $0.key < $1.key }) {
            text += " \(key)=\(Self.singleLine(Self.render(value)))"
        }
        output.write(text + "\n")
    }

    /// The syslog priority of a swift-log level (trace and debug 7 ... critical 2).
    static func syslogPriority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: 7
        case .info: 6
        case .notice: 5
        case .warning: 4
        case .error: 3
        case .critical: 2
        }
    }

    private static func render(_ value: Logger.Metadata.Value) -> String {
        switch value {
        case .string(let string):
            string.isEmpty || string.contains(" ") ? "\"\(string)\"" : string
        case .stringConvertible(let convertible):
            convertible.description
        case .array(let values):
            "[" + values.map(render).joined(separator: ", ") + "]"
        case .dictionary(let dictionary):
            "{" + dictionary.sorted(by: { $0.key < $1.key }).map { "\($0.key)=\(render($0.value))" }.joined(separator: " ") + "}"
        }
    }

    /// Keeps an event on one line by escaping line breaks.
    private static func singleLine(_ text: String) -> String {
        guard text.contains(where: { $0 == "\n" || $0 == "\r" || $0 == "\r\n" }) else { return text }
        var result = ""
        for character in text {
            switch character {
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\r\n": result += "\\r\\n"
            default: result.append(character)
            }
        }
        return result
    }

    /// The current UTC time as ISO 8601 with milliseconds.
    private static func timestamp() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var parts = tm()
        var seconds = now.tv_sec
        gmtime_r(&seconds, &parts)
        var buffer = [CChar](repeating: 0, count: 32)
        let count = strftime(&buffer, buffer.count, "%Y-%m-%dT%H:%M:%S", &parts)
        let base = String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let milliseconds = String(Int(now.tv_nsec) / 1_000_000)
        return base + "." + String(repeating: "0", count: 3 - milliseconds.count) + milliseconds + "Z"
    }
}
