import Logging
import Synchronization
import Tracing

/// The logger of the request the current task works for, when its caller gave one
/// (``CachedNetworking/run(_:body:policy:transport:logger:)``): the cache's log lines about that request go there.
enum RequestLogging {
    @TaskLocal static var logger: Logger?

    /// Set once any caller has given a request logger: until then no task can have one, and a line below the
    /// cache's own log level is dropped without looking.
    static let everGiven = Atomic(false)

    /// Runs `body` with `logger` as the request's logger.
    static func with<T>(_ logger: Logger, _ body: () async -> T) async -> T {
        everGiven.store(true, ordering: .relaxed)
        return await $logger.withValue(logger) { await body() }
    }
}

extension CachedNetworking {
    /// Where a line about the current request goes: the request's logger when its caller gave one, else the
    /// cache's.
    var log: Logger { RequestLogging.logger ?? logger }

    /// Whether a line at `level` about the current request goes anywhere (see ``log``): without a look at the
    /// request's logger while none was ever given, as on the hit path of a service that gives none.
    func logs(_ level: Logger.Level) -> Bool {
        if logger.logLevel <= level { return true }
        guard RequestLogging.everGiven.load(ordering: .relaxed), let requestLogger = RequestLogging.logger else { return false }
        return requestLogger.logLevel <= level
    }
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
