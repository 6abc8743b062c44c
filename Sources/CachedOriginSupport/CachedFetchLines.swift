import CachedTestSupport
import Foundation
import Testing

/// Reading the lines `cached-fetch --repeat` writes on standard error, one per fetch:
/// `fetch=3 time=1732251234.123456 changed=no near-hits=2 Cache-Status: …`.
public enum CachedFetchLines {
    /// Waits until `program` reports at least `count` near-cache hits on standard error; records an issue and
    /// throws when it does not within 30 seconds.
    public static func waitForNearHits(
        _ program: RunningProgram, atLeast count: Int, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            let lines = program.standardErrorSoFar.split(separator: "\n")
            if let hits = lines.last(where: { $0.contains("near-hits=") }).flatMap(nearHits), hits >= count { return }
            try await Task.sleep(for: .milliseconds(10))
        }
        Issue.record(
            "\(program.command) did not answer from its near cache within 30 s: \(program.standardErrorSoFar.suffix(2_000))",
            sourceLocation: sourceLocation)
        throw TestEnvironmentError("no near-cache hits")
    }

    /// One round of an overwrite seen by `cached-fetch --repeat --until-changed` processes: waits until each of
    /// `programs` answers from its near cache, runs `overwrite` (which must change what they fetch to `expected`
    /// and return once the store acknowledged it), then waits for each to exit with `expected`.
    /// - Returns: for each process, the time from `overwrite`'s return to its first changed answer, on the wall
    ///   clock the processes share (slightly negative when a process saw the change before this one got its
    ///   acknowledgement).
    public static func measureOverwrite(
        seenBy programs: [RunningProgram], expecting expected: String, overwrite: () async throws -> Void,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> [Duration] {
        for program in programs {
            try await waitForNearHits(program, atLeast: 3, sourceLocation: sourceLocation)
        }
        try await overwrite()
        let acknowledged = Date().timeIntervalSince1970
        let outputs = try await offThread { try programs.map { try $0.wait(timeout: 60) } }
        var delays: [Duration] = []
        for output in outputs {
            #expect(output.status == 0, "\(output.summary)", sourceLocation: sourceLocation)
            #expect(output.standardOutput == expected, "\(output.summary)", sourceLocation: sourceLocation)
            guard let changedAt = changedAt(output.standardError) else {
                Issue.record("no changed=yes line: \(output.summary)", sourceLocation: sourceLocation)
                continue
            }
            delays.append(.microseconds(Int64(((changedAt - acknowledged) * 1e6).rounded())))
        }
        return delays
    }

    /// `near-hits=N` in a line.
    public static func nearHits(_ line: Substring) -> Int? {
        line.split(separator: " ").first { $0.hasPrefix("near-hits=") }.flatMap { Int($0.dropFirst("near-hits=".count)) }
    }

    /// The `time=` of the first `changed=yes` line.
    public static func changedAt(_ standardError: String) -> Double? {
        guard let line = standardError.split(separator: "\n").first(where: { $0.contains(" changed=yes") }) else { return nil }
        return line.split(separator: " ").first { $0.hasPrefix("time=") }.flatMap { Double($0.dropFirst("time=".count)) }
    }
}
