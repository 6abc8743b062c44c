import Logging
import Tracing

/// The logger of the request the current task works for, when its caller gave one
/// (``CachedNetworking/run(_:body:policy:transport:logger:)``): the cache's log lines about that request go there.
enum RequestLogging {
    @TaskLocal static var logger: Logger?
}

extension CachedNetworking {
    /// Where a line about the current request goes: the request's logger when its caller gave one, else the
    /// cache's.
    var log: Logger { RequestLogging.logger ?? logger }
}

extension StoreAccess {
    /// Where a line about the current request's store call goes: as ``CachedNetworking/log``.
    var log: Logger { RequestLogging.logger ?? logger }
}

/// What background work started for a request runs with: that request's logger and trace context. Captured when
/// the work is scheduled, as work run as a child task of ``CachedNetworking/run()`` would inherit neither.
struct RequestScope: Sendable {
    let logger: Logger?
    let context: ServiceContext?

    /// The current task's request logger and, when `tracing`, its trace context.
    init(tracing: Bool) {
        logger = RequestLogging.logger
        context = tracing ? ServiceContext.current : nil
    }

    /// Runs `work` with the captured logger and context.
    func run(_ work: @Sendable () async -> Void) async {
        await RequestLogging.$logger.withValue(logger) {
            await ServiceContext.withValue(context) { await work() }
        }
    }
}
