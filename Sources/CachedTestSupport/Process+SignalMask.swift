import Foundation
import Glibc

extension Process {
    /// `run()`, but the child starts with no signals blocked.
    ///
    /// A child inherits the signal mask of the thread that spawns it, and `Process.run()` does not reset it.
    /// Test code runs on Dispatch worker threads, which block most signals (SIGTERM, SIGINT, SIGHUP…), so a
    /// server started from a test would never see the SIGTERM that `stop()` sends. The spawn therefore happens
    /// on a fresh thread that unblocks every signal first.
    public func runWithUnblockedSignals() throws {
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

/// Bytes that drain threads append while a test reads them.
final class OutputCapture: @unchecked Sendable {
    private let lock = NSLock()
    private var storage = Data()
    private let drains = DispatchGroup()

    var data: Data { lock.withLock { storage } }

    /// Reads `handle` to its end on a thread of its own, appending what arrives, so that the writer never blocks
    /// on a full pipe.
    func drain(_ handle: FileHandle) {
        drains.enter()
        Thread.detachNewThread { [self] in
            while true {
                let chunk = handle.availableData  // blocks until data or end of file
                if chunk.isEmpty { break }
                lock.withLock { storage.append(chunk) }
            }
            drains.leave()
        }
    }

    /// Waits (at most `timeout` seconds) until every drained handle has reached its end.
    @discardableResult
    func waitForEnd(timeout: TimeInterval) -> Bool {
        drains.wait(timeout: .now() + timeout) == .success
    }
}

extension Process {
    /// The exit status of a child that has exited (128 + the signal's number when a signal ended it), or nil
    /// while it runs, asked of the kernel first.
    ///
    /// Foundation learns of a child's exit through a socket the child holds, and can miss it: the child then
    /// stays a zombie that `isRunning` reports running and `waitUntilExit()` spins on for ever. The kernel
    /// knows; `waitid` with `WNOWAIT` asks it without reaping the child, which stays Foundation's to reap.
    var exitStatusIfExited: Int32? {
        let pid = processIdentifier
        guard pid > 0 else { return nil }
        // Reaped already (by Foundation): it knows the status.
        if !isRunning { return terminationReason == .uncaughtSignal ? 128 + terminationStatus : terminationStatus }
        var info = siginfo_t()
        guard waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0, info._sifields._sigchld.si_pid == pid
        else { return nil }
        let status = info._sifields._sigchld.si_status
        return info.si_code == Int32(CLD_EXITED) ? status : 128 + status
    }

    /// Whether the child has exited (``exitStatusIfExited``).
    var hasExited: Bool { exitStatusIfExited != nil }

    /// Waits until the child has exited, polling the kernel rather than trusting Foundation to notice
    /// (``exitStatusIfExited``), for at most `timeout` seconds.
    /// - Returns: its exit status, or nil if it is still running then.
    @discardableResult
    func waitForExit(timeout: TimeInterval) -> Int32? {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let status = exitStatusIfExited { return status }
            guard Date() < deadline else { return nil }
            usleep(5_000)
        }
    }
}
