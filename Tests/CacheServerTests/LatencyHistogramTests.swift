import CacheServer
import RESP
import Testing

@Suite("Latency histograms: INFO latencystats and LATENCY HISTOGRAM")
struct LatencyHistogramTests {
    @Test("Every value falls in a bucket whose bounds hold it, no wider than 1/16 of its lower bound past 32 ns")
    func bucketBounds() {
        var values = Array(0...5000)
        var v = 5000
        while v < 1 << 38 {
            values += [v - 1, v, v + 1]
            v = v * 5 / 4 + 3
        }
        for value in values {
            let index = LatencyBuckets.index(value)
            #expect(index >= 0 && index < LatencyBuckets.count)
            let clamped = min(value, (1 << 37) - 1)
            #expect(LatencyBuckets.upperBound(index) >= clamped, "\(value)")
            if index > 0 { #expect(LatencyBuckets.upperBound(index - 1) < clamped, "\(value)") }
            if index >= 32 && index > 0 {
                let width = LatencyBuckets.upperBound(index) - LatencyBuckets.upperBound(index - 1)
                #expect(width * 16 <= LatencyBuckets.upperBound(index - 1) + 1, "\(value)")
            }
        }
    }

    @Test("Percentiles and Redis's cumulative rows from known counts")
    func percentilesAndRows() {
        var counts = [Int](repeating: 0, count: LatencyBuckets.count)
        func add(_ nanoseconds: Int, _ n: Int) { counts[LatencyBuckets.index(nanoseconds)] += n }
        add(500, 3)
        add(1_500, 2)
        add(40_000, 1)
        let rows = LatencyBuckets.cumulativeRows(counts)
        #expect(rows.map(\.microseconds) == [1, 2, 66])
        #expect(rows.map(\.calls) == [3, 5, 6])
        #expect(LatencyBuckets.value(atPercentile: 50, of: counts) >= 500)
        #expect(LatencyBuckets.value(atPercentile: 50, of: counts) < 532)
        #expect(LatencyBuckets.value(atPercentile: 99, of: counts) >= 40_000)
        #expect(LatencyBuckets.value(atPercentile: 99, of: counts) < 42_500)
        #expect(LatencyBuckets.value(atPercentile: 0, of: counts) < 532)
        #expect(LatencyBuckets.value(atPercentile: 50, of: [Int](repeating: 0, count: LatencyBuckets.count)) == 0)
        // One call per microsecond from 1 to 1,000: the median within a bucket of 500 µs.
        counts = [Int](repeating: 0, count: LatencyBuckets.count)
        for us in 1...1000 { add(us * 1000, 1) }
        let median = LatencyBuckets.value(atPercentile: 50, of: counts)
        #expect(median >= 500_000 && median <= 500_000 + 500_000 / 16)
        #expect(LatencyBuckets.cumulativeRows(counts).last?.calls == 1000)
        #expect(LatencyBuckets.cumulativeRows(counts).map(\.microseconds) == [1, 2, 4, 8, 16, 33, 66, 132, 264, 528, 1056])
    }

    @Test("Commands are timed per name and subcommand; CONFIG SET changes the percentiles; RESETSTAT and latency-tracking no")
    func serverCounts() throws {
        let h = Harness()
        for _ in 0..<25 { h.run("GET", "k") }
        h.run("CLIENT", "ID")
        let histogram = try #require(h.run("LATENCY", "HISTOGRAM", "get", "CLIENT", "nosuch").elements)
        #expect(histogram.count == 4)
        #expect(histogram[0].text == "get" && histogram[2].text == "client|id")
        let get = try #require(histogram[1].elements)
        #expect(get[0].text == "calls" && get[1] == .integer(25) && get[2].text == "histogram_usec")
        let rows = try #require(get[3].elements)
        #expect(rows.count >= 2 && rows.count % 2 == 0 && rows.last == .integer(25))

        var info = try #require(h.run("INFO", "latencystats").text)
        #expect(info.hasPrefix("# Latencystats\r\n"))
        #expect(info.contains("latency_percentiles_usec_get:p50="))
        #expect(info.contains(",p99=") && info.contains(",p99.9="))
        #expect(try #require(h.run("INFO").text).contains("Latencystats") == false, "not a default section")
        #expect(try #require(h.run("INFO", "all").text).contains("latency_percentiles_usec_get:"))

        #expect(h.run("CONFIG", "SET", "latency-tracking-info-percentiles", "0 99.99 100") == .ok)
        info = try #require(h.run("INFO", "latencystats").text)
        #expect(info.contains("latency_percentiles_usec_get:p0="))
        #expect(info.contains(",p99.99=") && info.contains(",p100="))
        #expect(h.run("CONFIG", "GET", "latency-tracking-info-percentiles").elements?.last?.text == "0 99.99 100")

        #expect(h.run("CONFIG", "RESETSTAT") == .ok)
        #expect(h.run("LATENCY", "HISTOGRAM", "get").elements?.isEmpty == true)
        #expect(h.run("CONFIG", "SET", "latency-tracking", "no") == .ok)
        for _ in 0..<5 { h.run("GET", "k") }
        #expect(h.run("LATENCY", "HISTOGRAM", "get").elements?.isEmpty == true)
        #expect(try #require(h.run("INFO", "latencystats").text) == "# Latencystats\r\n")
        #expect(h.run("CONFIG", "SET", "latency-tracking", "yes") == .ok)
        h.run("GET", "k")
        #expect(h.run("LATENCY", "HISTOGRAM", "get").elements?.count == 2)
    }
}
