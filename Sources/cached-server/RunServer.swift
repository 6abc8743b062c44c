import CacheServer
import Logging

/// Runs the server with `configuration` until it shuts down.
///
/// The serving library is not part of this build yet, so this reports that and
/// fails; the real wiring (a ServiceGroup with graceful shutdown on SIGTERM and
/// SIGINT) replaces this file.
func runServer(configuration: ServerConfiguration, logger: Logger) async throws {
    logger.error("no server to run: the serving library is not part of this build yet")
    throw ServerUnavailable()
}

/// The error ``runServer(configuration:logger:)`` fails with while the server is missing.
struct ServerUnavailable: Error, CustomStringConvertible {
    var description: String { "the server is not available in this build" }
}
