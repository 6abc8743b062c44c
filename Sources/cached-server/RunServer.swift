import CacheServer
import Dispatch
import Logging
import ServiceLifecycle

#if canImport(Glibc)
import Glibc
#endif

/// Runs the server with `configuration` until SIGTERM, SIGINT or SHUTDOWN stops it.
///
/// The first SIGTERM or SIGINT shuts down gracefully (stop accepting, answer what is in flight, close,
/// exit 0); a second one exits at once.
func runServer(configuration: ServerConfiguration, logger: Logger) async throws {
    let service = CacheServerService(
        configuration: configuration, logger: logger, systemd: SystemdNotifier.fromEnvironment())
    let group = ServiceGroup(
        configuration: .init(
            services: [.init(service: service, successTerminationBehavior: .gracefullyShutdownGroup)],
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger))
    let impatience = SecondSignalExit(logger: logger)
    defer { withExtendedLifetime(impatience) {} }
    try await group.run()
}

/// Exits the process on the second SIGTERM/SIGINT, for an operator who does not want to wait.
final class SecondSignalExit {
    private let sources: [any DispatchSourceSignal]

    init(logger: Logger) {
        let queue = DispatchQueue(label: "cached-server.signals")
        let seen = SignalCounter()
        sources = [SIGTERM, SIGINT].map { number in
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler {
                if seen.increment() >= 2 {
                    logger.warning("Second signal received: exiting now")
                    _exit(1)
                }
            }
            source.resume()
            return source
        }
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
