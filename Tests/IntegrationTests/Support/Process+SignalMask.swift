import Foundation

#if canImport(Glibc)
import Glibc
#endif

extension Process {
    /// `run()`, but the child starts with no signals blocked.
    ///
    /// A child inherits the signal mask of the thread that spawns it, and `Process.run()` does not reset it.
    /// Test code runs on Dispatch worker threads, which block most signals (SIGTERM, SIGINT, SIGHUP…), so a
    /// server started from a test would never see the SIGTERM that `stop()` sends. The spawn therefore happens
    /// on a fresh thread that unblocks every signal first.
    func runWithUnblockedSignals() throws {
        let outcome = SpawnOutcome()
        let done = DispatchSemaphore(value: 0)
        let thread = Thread { [self] in
            var none = sigset_t()
            sigemptyset(&none)
            pthread_sigmask(SIG_SETMASK, &none, nil)
            do { try self.run() } catch { outcome.error = error }
            done.signal()
        }
        thread.start()
        done.wait()
        if let error = outcome.error { throw error }
    }
}

private final class SpawnOutcome: @unchecked Sendable {
    var error: Error?
}
