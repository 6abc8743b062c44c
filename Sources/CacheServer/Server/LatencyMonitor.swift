import Synchronization

/// LATENCY: Redis's latency monitor. With `latency-monitor-threshold` set (milliseconds; 0, the default, turns
/// it off), every command that runs at least that long is a sample of the event `command`, or `fast-command`
/// for commands flagged fast. Each event keeps its last 160 seconds with a sample (the worst of each second)
/// and its worst ever. Checking a command costs one relaxed load; only samples take the lock.
package final class LatencyMonitor: Sendable {
    package struct Sample: Sendable, Equatable {
        /// Unix time in seconds.
        package var time: Int
        package var milliseconds: Int

        package init(time: Int, milliseconds: Int) {
            self.time = time
            self.milliseconds = milliseconds
        }
    }

    package struct Series: Sendable {
        package var samples: [Sample] = []
        package var worst = 0
    }

    /// Redis keeps this many samples per event.
    package static let historyLength = 160

    private let threshold = Atomic<Int>(0)
    private let events = Mutex<[String: Series]>([:])

    package init() {}

    package func configure(thresholdMilliseconds: Int) {
        threshold.store(thresholdMilliseconds, ordering: .relaxed)
    }

    package var isEnabled: Bool { threshold.load(ordering: .relaxed) > 0 }

    /// Whether a command that ran for `nanoseconds` is a sample.
    @inline(__always)
    package func isSample(nanoseconds: Int) -> Bool {
        let limit = threshold.load(ordering: .relaxed)
        return limit > 0 && nanoseconds / 1_000_000 >= limit
    }

    /// Adds a sample of `event` at `time` (Unix seconds); samples of one second keep the worst.
    package func record(_ event: String, milliseconds: Int, time: Int) {
        events.withLock { events in
            var series = events[event, default: Series()]
            if let last = series.samples.last, last.time == time {
                series.samples[series.samples.count - 1].milliseconds = max(last.milliseconds, milliseconds)
            } else {
                series.samples.append(Sample(time: time, milliseconds: milliseconds))
                if series.samples.count > Self.historyLength { series.samples.removeFirst() }
            }
            series.worst = max(series.worst, milliseconds)
            events[event] = series
        }
    }

    /// Every event with its series, by name.
    package var all: [(event: String, series: Series)] {
        events.withLock { $0 }.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }

    package func series(_ event: String) -> Series? { events.withLock { $0[event] } }

    /// Forgets `names` (all events when empty); answers how many were forgotten.
    package func reset(_ names: [String]) -> Int {
        events.withLock { events in
            if names.isEmpty {
                defer { events.removeAll() }
                return events.count
            }
            var removed = 0
            for name in Set(names) where events.removeValue(forKey: name) != nil { removed += 1 }
            return removed
        }
    }
}
