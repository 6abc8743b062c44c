import Foundation
import Glibc

/// A precondition of the test environment that does not hold (a missing program, a server that did not start).
public struct TestEnvironmentError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// Runs blocking work (spawning or stopping processes, socket calls) on a thread of its own, so that async tests
/// do not hold up the cooperative pool that the code under test resumes its callers on.
public func offThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try body() }) }.start()
    }
}

/// Polls `condition` every 10 ms until it holds, failing after `timeout` seconds.
public func poll(_ what: String, timeout: TimeInterval = 10, _ condition: () throws -> Bool) throws {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if try condition() { return }
        usleep(10_000)
    }
    throw TestEnvironmentError("timed out after \(Int(timeout)) s waiting for \(what)")
}
