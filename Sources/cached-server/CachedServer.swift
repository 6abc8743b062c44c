import ArgumentParser
import CacheServer
import Glibc
import Logging

/// The version `--version` prints.
let cachedServerVersion = CacheServerVersion.current

/// `cached-server`: reads the configuration, sets up logging, and runs the server.
@main
struct CachedServer: AsyncParsableCommand {
    /// The exit status when the snapshot to load is damaged (sysexits' EX_DATAERR).
    static let damagedSnapshotExitStatus: Int32 = 65

    static let configuration = CommandConfiguration(
        commandName: "cached-server",
        abstract: "A cache server that speaks the Redis protocol (RESP).",
        usage: """
            cached-server [<configfile>] [--config <file>] [--<directive> <value>...]...
              cached-server --version
              cached-server --help
            """,
        discussion: """
            Configuration comes from redis.conf-style directives: first the defaults,
            then the config file (given first, or with --config), then any directive
            given as a flag, in order. Every config file directive works as a flag:
            --name followed by its values, up to the next --flag.

            Examples:
              cached-server /etc/cached/cached.conf
              cached-server --port 7000 --bind 127.0.0.1 ::1
              cached-server cached.conf --save 900 1 --maxmemory 2gb --maxmemory-policy allkeys-lru
              cached-server --unixsocket /run/cached/cached.sock --port 0

            Directives: \(ServerConfiguration.directiveNames.joined(separator: ", ")).

            Exit status: 0 after a normal shutdown; 65 when the snapshot to load is
            damaged (see snapshot-load-corrupt); 1 for any other failure.

            Logs go to standard error (or to the logfile directive's file), one line
            per event; under systemd they carry journald priorities.
            """,
        version: cachedServerVersion)

    @Argument(
        parsing: .captureForPassthrough,
        help: ArgumentHelp("An optional config file, then directives as --name value... flags.", valueName: "arguments"))
    var arguments: [String] = []

    func run() async throws {
        // Everything is captured for the directive splitter, so the usual flags are
        // recognised here, as redis-server does, when they come first.
        switch arguments.first {
        case "--help", "-h":
            print(Self.helpMessage())
            return
        case "--version", "-v":
            print("cached-server v=\(cachedServerVersion)")
            return
        default:
            break
        }

        var configuration: ServerConfiguration
        do {
            configuration = try ServerConfiguration.load(ServerCommandLine.parse(arguments))
        } catch {
            writeToStandardError("\(error)\n")
            throw ExitCode.failure
        }

        let output: LogOutput
        do {
            output = try LogOutput(path: configuration.logFile)
        } catch {
            writeToStandardError("Can't open the log file: \(error)\n")
            throw ExitCode.failure
        }
        let level = configuration.logLevel.loggerLevel
        LoggingSystem.bootstrap { label in
            guard let level else { return SwiftLogNoOpLogHandler(label) }
            return LineLogHandler(label: label, logLevel: level, output: output)
        }
        let logger = Logger(label: "cached-server")

        logger.notice(
            "cached-server \(cachedServerVersion) starting",
            metadata: ["pid": "\(getpid())", "config": .dictionary(effectiveSettings(configuration))])
        if configuration.appendOnly {
            logger.warning("appendonly is accepted for compatibility, but cached-server writes no append-only file (see save for snapshots)")
        }
        // As Redis does: room for maxclients connections and 32 more descriptors, or fewer clients.
        let files = OpenFilesLimit.adjust(maxClients: configuration.maxClients)
        for message in files.messages {
            if files.raised { logger.notice("\(message)") } else { logger.warning("\(message)") }
        }
        if files.fatal { throw ExitCode.failure }
        configuration.maxClients = files.maxClients

        let pidFile = PidFile(path: configuration.pidFile, logger: logger)
        defer { pidFile.remove() }
        do {
            try await runServer(configuration: configuration, logger: logger, logOutput: output, pidFile: pidFile)
        } catch let error as ListenError {
            logger.critical("\(error)")
            throw ExitCode.failure
        } catch let error as SnapshotLoadError {
            logger.critical("\(error)")
            // A damaged snapshot stays damaged: a status of its own, which the systemd unit lists in
            // RestartPreventExitStatus, so that the service does not restart in a loop.
            throw error.isDamage ? ExitCode(Self.damagedSnapshotExitStatus) : ExitCode.failure
        } catch let error as SnapshotSaveFailure {
            logger.critical("\(error)")
            throw ExitCode.failure
        } catch let error as AclSetupError {
            logger.critical("\(error)")
            throw ExitCode.failure
        } catch {
            logger.critical("cached-server exiting", metadata: ["error": "\(error)"])
            throw ExitCode.failure
        }
    }

    /// Every directive's value as CONFIG GET reports it, with the password hidden.
    private func effectiveSettings(_ configuration: ServerConfiguration) -> Logger.Metadata {
        var settings: Logger.Metadata = [:]
        for (name, value) in configuration.configGet(["*"]) {
            settings[name] = name == "requirepass" ? (value.isEmpty ? "" : "(set)") : .string(value)
        }
        return settings
    }
}

/// Writes `text` to standard error, for the errors printed before logging is set up (a bad config file, a
/// log file that cannot be opened). Under systemd every line carries the `err` priority, so that
/// `journalctl -p warning` shows why the service did not start.
func writeToStandardError(_ text: String) {
    guard LogOutput.standardError.isJournal else { return LogOutput.standardError.write(text) }
    var lines = text.split(separator: "\n", omittingEmptySubsequences: false)
    if lines.last?.isEmpty == true { lines.removeLast() }
    LogOutput.standardError.write(lines.map { "<\(LineLogHandler.syslogPriority(.error))>\($0)\n" }.joined())
}
