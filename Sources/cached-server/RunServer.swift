import CacheServer
import Dispatch
import Glibc
import Logging
import ServiceLifecycle

/// Runs the server with `configuration` until SIGTERM, SIGINT or SHUTDOWN stops it.
///
/// The first SIGTERM or SIGINT shuts down gracefully (stop accepting, answer what is in flight, close,
/// exit 0); a second one exits at once. SIGHUP reopens the log file (see ``SignalHandlers``).
func runServer(configuration: ServerConfiguration, logger: Logger, logOutput: LogOutput, pidFile: PidFile) async throws {
    let service = CacheServerService(
        configuration: configuration, logger: logger, systemd: SystemdNotifier.fromEnvironment(),
        onServerRunning: { _ in pidFile.record() })
    let group = ServiceGroup(
        configuration: .init(
            services: [.init(service: service, successTerminationBehavior: .gracefullyShutdownGroup)],
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger))
    let handlers = SignalHandlers(logger: logger, logOutput: logOutput, loading: { service.isLoading })
    defer { withExtendedLifetime(handlers) {} }
    try await group.run()
}

/// What the daemon does on signals besides the graceful shutdown the service group runs on SIGTERM/SIGINT:
/// it logs the first one (as Redis does), exits at once on the second, for an operator who does not want to
/// wait, and on SIGHUP reopens the log file, so that logrotate can move it away and signal (Redis ignores
/// SIGHUP; its default action would kill the process, unsaved data and all).
final class SignalHandlers {
    private let sources: [any DispatchSourceSignal]

    /// `loading` tells whether the snapshot is loading (the signal then stops the load).
    init(logger: Logger, logOutput: LogOutput, loading: @escaping @Sendable () -> Bool) {
        let queue = DispatchQueue(label: "cached-server.signals")
        let seen = SignalCounter()
        var sources = [SIGTERM, SIGINT].map { number in
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            let name = number == SIGTERM ? "SIGTERM" : "SIGINT"
            source.setEventHandler {
                if seen.increment() >= 2 {
                    logger.warning("Second signal received: exiting now")
                    _exit(1)
                }
                if loading() {
                    logger.notice("Received shutdown signal during loading, scheduling shutdown.")
                } else {
                    logger.notice("Received \(name), scheduling shutdown...")
                }
            }
            source.resume()
            return source
        }
        // A signal source only sees the signal once its default action (termination) is off.
        signal(SIGHUP, SIG_IGN)
        let hangUp = DispatchSource.makeSignalSource(signal: SIGHUP, queue: queue)
        hangUp.setEventHandler {
            guard let path = logOutput.path else {
                return logger.notice("Received SIGHUP: nothing to do (logging to standard error)")
            }
            do {
                try logOutput.reopen()
                logger.notice("Received SIGHUP: log file reopened", metadata: ["file": "\(path)"])
            } catch {
                logger.warning("Received SIGHUP: could not reopen the log file, still writing to the old one",
                               metadata: ["file": "\(path)", "error": "\(error)"])
            }
        }
        hangUp.resume()
        sources.append(hangUp)
        self.sources = sources
    }
}

/// Counts signals on the signal queue.
private final class SignalCounter: @unchecked Sendable {
    private var count = 0
    /// Called only on the serial signal queue.
    func increment() -> Int {
        count += 1
        return count
    }
}
