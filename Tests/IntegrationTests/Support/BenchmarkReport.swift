import CachedTestSupport
import Foundation

/// The throughput lines of a `redis-benchmark -q` run: `SET: 125000.00 requests per second, p50=0.351 msec`.
/// (Progress updates share the output, separated by carriage returns; only final lines end a test.)
struct BenchmarkReport {
    /// Requests per second by test name as redis-benchmark prints it (`SET`, `INCR`, `MSET (10 keys)`).
    let requestsPerSecond: [String: Double]

    init(_ output: ProgramOutput) {
        var results: [String: Double] = [:]
        let segments = output.standardOutput.split(whereSeparator: { $0 == "\r" || $0 == "\n" })
        for segment in segments {
            guard let range = segment.range(of: " requests per second") else { continue }
            let head = segment[..<range.lowerBound]
            guard let colon = head.lastIndex(of: ":") else { continue }
            let name = head[..<colon].trimmingCharacters(in: .whitespaces)
            if let rps = Double(head[head.index(after: colon)...].trimmingCharacters(in: .whitespaces)) {
                results[name] = rps
            }
        }
        requestsPerSecond = results
    }
}

extension ProgramOutput {
    /// redis-benchmark's way of reporting an error reply: it prints `Error from server: …` and exits 1.
    var benchmarkErrors: [String] {
        (standardOutput + "\n" + standardError).split(whereSeparator: { $0 == "\r" || $0 == "\n" })
            .filter { $0.contains("Error") || $0.contains("ERR") }
            .map(String.init)
    }
}
