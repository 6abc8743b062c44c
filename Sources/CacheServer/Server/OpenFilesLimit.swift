import Glibc

/// Raises the process's open files limit so that `maxclients` connections fit, as Redis does at startup.
///
/// Each client takes a descriptor, and the server keeps ``reservedDescriptors`` more for listeners, logs and
/// the event loops. When the soft limit is lower than `maxclients + 32`, the server raises it (and the hard
/// limit too when it is allowed to); when it cannot get that far, it keeps the best limit it got and lowers
/// `maxclients` to fit, with Redis's warnings.
package enum OpenFilesLimit {
    /// Descriptors kept for everything but clients (Redis's `CONFIG_MIN_RESERVED_FDS`).
    package static let reservedDescriptors = 32

    /// What the adjustment did.
    package struct Outcome: Equatable, Sendable {
        /// The soft limit now in force, or nil when it could not be read.
        package var limit: UInt64?
        /// `maxclients` as it must now be.
        package var maxClients: Int
        /// Lines for the log, each a warning unless `raised`.
        package var messages: [String]
        /// Whether the limit was raised to what `maxclients` needs (the message is then a notice).
        package var raised: Bool
        /// Whether the limit is too low for the server to start at all.
        package var fatal: Bool
    }

    /// Adjusts this process's `RLIMIT_NOFILE` for `maxClients`.
    package static func adjust(maxClients: Int) -> Outcome {
        var current = rlimit()
        guard getrlimit(resource, &current) == 0 else {
            let error = errno
            return Outcome(
                limit: nil, maxClients: 1024 - reservedDescriptors,
                messages: [
                    "Unable to obtain the current NOFILE limit (\(describe(error))), assuming 1024 and setting the max clients configuration accordingly."
                ], raised: false, fatal: false)
        }
        return plan(maxClients: maxClients, soft: UInt64(current.rlim_cur), hard: UInt64(current.rlim_max)) { soft, hard in
            var wanted = rlimit(rlim_cur: rlim_t(soft), rlim_max: rlim_t(hard))
            return setrlimit(resource, &wanted) == 0 ? 0 : errno
        }
    }

    /// The adjustment for a process whose limits are `soft` and `hard`; `set` applies new limits and returns
    /// 0 or an errno.
    package static func plan(
        maxClients: Int, soft: UInt64, hard: UInt64, set: (_ soft: UInt64, _ hard: UInt64) -> Int32
    ) -> Outcome {
        let wanted = UInt64(maxClients) + UInt64(reservedDescriptors)
        guard soft < wanted else {
            return Outcome(limit: soft, maxClients: maxClients, messages: [], raised: false, fatal: false)
        }
        // Raise both limits (a privileged process may); failing that, the soft one as far as the hard one allows.
        var error: Int32 = 0
        var best = soft
        let first = set(wanted, max(wanted, hard))
        if first == 0 {
            best = wanted
        } else {
            error = first
            let reachable = min(wanted, hard)
            if reachable > soft && set(reachable, hard) == 0 { best = reachable }
        }
        if best >= wanted {
            return Outcome(
                limit: best, maxClients: maxClients,
                messages: ["Increased maximum number of open files to \(wanted) (it was originally set to \(soft))."],
                raised: true, fatal: false)
        }
        if best <= UInt64(reservedDescriptors) {
            return Outcome(
                limit: best, maxClients: maxClients,
                messages: [
                    "Your current 'ulimit -n' of \(best) is not enough for the server to start. Please increase your open file limit to at least \(wanted). Exiting."
                ], raised: false, fatal: true)
        }
        let reduced = Int(best) - reservedDescriptors
        return Outcome(
            limit: best, maxClients: reduced,
            messages: [
                "You requested maxclients of \(maxClients) requiring at least \(wanted) max file descriptors.",
                "Server can't set maximum open files to \(wanted) because of OS error: \(describe(error)).",
                "Current maximum open files is \(best). maxclients has been reduced to \(reduced) to compensate for low ulimit. If you need higher maxclients increase 'ulimit -n'.",
            ], raised: false, fatal: false)
    }

    private static let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)

    private static func describe(_ error: Int32) -> String {
        guard let text = strerror(error) else { return "errno \(error)" }
        return String(cString: text)
    }
}
