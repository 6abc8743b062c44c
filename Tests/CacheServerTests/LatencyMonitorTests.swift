import CacheCore
import CacheServer
import RESP
import Testing

@Suite("LATENCY and SLOWLOG on commands that take time")
struct LatencyMonitorTests {
    @Test("Samples of one second keep the worst; at most 160 seconds are kept; RESET forgets events by name")
    func series() {
        let monitor = LatencyMonitor()
        monitor.record("command", milliseconds: 5, time: 100)
        monitor.record("command", milliseconds: 9, time: 100)
        monitor.record("command", milliseconds: 3, time: 100)
        monitor.record("command", milliseconds: 2, time: 101)
        #expect(monitor.series("command")?.samples == [.init(time: 100, milliseconds: 9), .init(time: 101, milliseconds: 2)])
        #expect(monitor.series("command")?.worst == 9)
        for second in 200..<400 { monitor.record("fast-command", milliseconds: second, time: second) }
        let fast = monitor.series("fast-command")
        #expect(fast?.samples.count == LatencyMonitor.historyLength)
        #expect(fast?.samples.first?.time == 400 - LatencyMonitor.historyLength)
        #expect(fast?.worst == 399)
        #expect(monitor.reset(["nosuch", "command", "command"]) == 1)
        #expect(monitor.all.map(\.event) == ["fast-command"])
        #expect(monitor.reset([]) == 1)
        #expect(monitor.all.isEmpty)
    }

    @Test("A command that runs past the thresholds is a LATENCY sample and a SLOWLOG entry; fast ones are not")
    func slowCommandIsRecorded() {
        let h = Harness()
        let value = String(repeating: "v", count: 10)
        for i in 0..<50_000 { h.run("SET", "key:\(i)", value) }
        #expect(h.run("CONFIG", "SET", "latency-monitor-threshold", "1", "slowlog-log-slower-than", "1000") == .ok)
        #expect(h.run("SLOWLOG", "RESET") == .ok)
        h.run("GET", "key:1")
        guard case .array(let keys) = h.run("KEYS", "*") else {
            Issue.record("KEYS is not an array")
            return
        }
        #expect(keys.count == 50_000)
        guard case .array(let latest) = h.run("LATENCY", "LATEST"), case .array(let event) = latest.first else {
            Issue.record("LATENCY LATEST has no event")
            return
        }
        #expect(latest.count == 1, "GET is fast, and took less than 1 ms")
        #expect(event.first == .bulk("command"))
        guard case .integer(let milliseconds) = event[2] else { return }
        #expect(milliseconds >= 1)
        guard case .array(let entries) = h.run("SLOWLOG", "GET"), case .array(let entry) = entries.first else {
            Issue.record("SLOWLOG has no entry")
            return
        }
        #expect(entries.count == 1)
        #expect(entry[3] == .bulks("KEYS", "*"))
        guard case .integer(let microseconds) = entry[2] else { return }
        #expect(microseconds >= 1000 && microseconds / 1000 >= milliseconds)
        #expect(h.run("LATENCY", "DOCTOR").text?.contains("command:") == true)
    }
}
