import CJemalloc
import CacheCore
import Glibc
import NIOCore
import RESP

/// OBJECT and MEMORY: what the server knows about one key's value and about its memory, for `redis-cli
/// --memkeys`, `--hotkeys` and operators.
enum IntrospectionCommands {
    // MARK: OBJECT

    static func objectHelp(_ c: inout CommandContext) {
        ConnectionCommands.help(&c, [
            "ENCODING <key>",
            "    Return the kind of internal representation used in order to store the value",
            "    associated with a <key>.",
            "FREQ <key>",
            "    Return the access frequency index of the <key>. The returned integer is",
            "    proportional to the logarithm of the recent access frequency of the key.",
            "IDLETIME <key>",
            "    Return the idle time of the <key>, that is the approximated number of",
            "    seconds elapsed since the last access to the key.",
            "REFCOUNT <key>",
            "    Return the number of references of the value associated with the specified",
            "    <key>.",
        ])
    }

    /// What OBJECT tells of a key: its subcommands.
    enum ObjectField {
        case encoding, frequency, idleTime, references
    }

    static func objectEncoding(_ c: inout CommandContext) { object(&c, .encoding) }
    static func objectFrequency(_ c: inout CommandContext) { object(&c, .frequency) }
    static func objectIdleTime(_ c: inout CommandContext) { object(&c, .idleTime) }
    static func objectReferences(_ c: inout CommandContext) { object(&c, .references) }

    static func object(_ c: inout CommandContext, _ field: ObjectField) {
        let a = c.arguments
        let encoding = field == .encoding, frequency = field == .frequency, references = field == .references
        let policy = c.server.keyspace.budget.policy
        // As Redis: an expired key is gone, and looking does not count as an access (but as a hit or a miss,
        // without a `keymiss` event).
        c.withKeyForRead(2, .none, keymiss: false) { c, shard, index in
            guard let index else { return c.null() }
            let entry = shard.entry(at: index)
            if encoding {
                c.bulk(Self.encoding(of: entry).name)
            } else if references {
                c.integer(Self.encoding(of: entry).shared(config: c.server.config) ? Int(Int32.max) : 1)
            } else if frequency {
                guard policy.tracksFrequency else {
                    return c.error(
                        "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust."
                    )
                }
                c.integer(shard.frequency(entry, now: c.now))
            } else {
                guard !policy.tracksFrequency else {
                    return c.error(
                        "ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust."
                    )
                }
                c.integer(Int(shard.idleSeconds(entry, now: c.now)))
            }
        }
    }

    /// How Redis would hold a value (OBJECT ENCODING): `int` for a canonical 64-bit decimal of up to 20
    /// characters, `embstr` for up to 44 bytes, `raw` beyond, and `raw` for any value APPEND or SETRANGE
    /// changed; INCRBYFLOAT's results are never `int`.
    enum Encoding {
        case integer(Int)
        case embedded
        case raw

        var name: String {
            switch self {
            case .integer: "int"
            case .embedded: "embstr"
            case .raw: "raw"
            }
        }

        /// Whether Redis would share the object (OBJECT REFCOUNT 2147483647): integers 0...9999, unless a
        /// memory limit with an LRU or LFU policy needs each key's own access stamp.
        func shared(config: ServerConfiguration) -> Bool {
            guard case .integer(let value) = self, value >= 0 && value < 10_000 else { return false }
            if config.maxMemory == 0 { return true }
            switch config.maxMemoryPolicy {
            case .allKeysLRU, .volatileLRU, .allKeysLFU, .volatileLFU: return false
            default: return true
            }
        }
    }

    static func encoding(of entry: Entry) -> Encoding {
        let flags = entry.flags
        if flags & Entry.modifiedInPlaceFlag != 0 { return .raw }
        let value = entry.value
        if flags & Entry.notIntegerFlag == 0 && value.count <= 20, let number = RESPInteger.parse(value) {
            return .integer(number)
        }
        return value.count <= 44 ? .embedded : .raw
    }

    // MARK: SLOWLOG

    /// SLOWLOG GET [count]
    static func slowlogGet(_ c: inout CommandContext) {
        let a = c.arguments
        // Its arity lets more arguments through than it takes.
        guard a.count <= 3 else { return c.reply.writeRESPError(bytes: ReplyError.subcommandSyntax(a[1], of: c.arguments.string(0))) }
        var count: Int? = 10
        if a.count == 3 {
            guard let n = RESPInteger.parse(a[2]), n >= -1 else {
                return c.error("ERR count should be greater than or equal to -1")
            }
            count = n == -1 ? nil : n
        }
        let entries = c.server.slowLog.newest(count)
        c.arrayHeader(entries.count)
        for entry in entries {
            c.arrayHeader(6)
            c.integer(entry.id)
            c.integer(entry.time)
            c.integer(entry.microseconds)
            c.arrayHeader(entry.arguments.count)
            for argument in entry.arguments { argument.withUnsafeBytes { c.bulk($0) } }
            c.bulk(entry.client)
            c.bulk(entry.name)
        }
    }

    static func slowlogLength(_ c: inout CommandContext) {
        c.integer(c.server.slowLog.count)
    }

    static func slowlogReset(_ c: inout CommandContext) {
        c.server.slowLog.reset()
        c.ok()
    }

    static func slowlogHelp(_ c: inout CommandContext) {
        ConnectionCommands.help(&c, [
            "GET [<count>]",
            "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
            "    Entries are made of:",
            "    id, timestamp, time in microseconds, arguments array, client IP and port,",
            "    client name",
            "LEN",
            "    Return the length of the slowlog.",
            "RESET",
            "    Reset the slowlog.",
        ])
    }

    // MARK: LATENCY

    static func latencyLatest(_ c: inout CommandContext) {
        let events = c.server.latency.all
        c.arrayHeader(events.count)
        for (event, series) in events {
            let last = series.samples.last ?? LatencyMonitor.Sample(time: 0, milliseconds: 0)
            c.arrayHeader(4)
            c.bulk(event)
            c.integer(last.time)
            c.integer(last.milliseconds)
            c.integer(series.worst)
        }
    }

    /// LATENCY HISTORY event
    static func latencyHistory(_ c: inout CommandContext) {
        let samples = c.server.latency.series(c.arguments.string(2))?.samples ?? []
        c.arrayHeader(samples.count)
        for sample in samples {
            c.arrayHeader(2)
            c.integer(sample.time)
            c.integer(sample.milliseconds)
        }
    }

    /// LATENCY RESET [event ...]: the number of events reset.
    static func latencyReset(_ c: inout CommandContext) {
        let a = c.arguments
        c.integer(c.server.latency.reset((2..<a.count).map { a.string($0) }))
    }

    static func latencyDoctor(_ c: inout CommandContext) {
        c.reply.writeRESPVerbatim(latencyReport(c.server), c.version)
    }

    static func latencyHelp(_ c: inout CommandContext) {
        ConnectionCommands.help(&c, [
            "DOCTOR",
            "    Return a human readable latency analysis report.",
            "HISTORY <event>",
            "    Return time-latency samples for the <event> class.",
            "LATEST",
            "    Return the latest latency samples for all events.",
            "RESET [<event> ...]",
            "    Reset latency data of one or more <event> classes.",
            "    (default: reset all data for all event classes)",
            "HISTOGRAM [COMMAND ...]",
            "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
            "    If no commands are specified then all histograms are replied.",
        ])
    }

    /// LATENCY HISTOGRAM [command ...]: for each command with timed calls (all of them, or those named, with the
    /// subcommands of a container; `container|subcommand` names one subcommand), its calls and their cumulative counts at powers of two microseconds.
    static func latencyHistogram(_ c: inout CommandContext) {
        let statistics = c.server.commandStatistics
        let totals = statistics.totals
        var slots: [Int] = []
        if c.arguments.count == 2 {
            slots = Array(statistics.slotNames.indices)
        } else {
            for j in 2..<c.arguments.count {
                let name = c.arguments.bytes(j)
                // `container|subcommand` names one subcommand, as in Redis.
                if let bar = name.firstIndex(of: UInt8(ascii: "|")) {
                    let container = Array(name[..<bar])
                    let subName = Array(name[(bar + 1)...])
                    guard let index = container.withUnsafeBytes({ c.server.commands.lookup($0) }),
                        let sub = subName.withUnsafeBytes({ c.server.commands.commands[index].subcommandIndex(named: $0) })
                    else { continue }
                    slots.append(statistics.slot(command: index, subcommand: sub))
                    continue
                }
                // Unknown names are skipped, as in Redis.
                guard let index = c.server.commands.lookup(c.arguments[j]) else { continue }
                let spec = c.server.commands.commands[index]
                slots.append(statistics.slot(command: index, subcommand: nil))
                for sub in spec.subcommands.indices { slots.append(statistics.slot(command: index, subcommand: sub)) }
            }
        }
        let shown = slots.compactMap { slot in totals.latencies[slot].map { (slot, $0) } }
        c.reply.writeRESPMapHeader(shown.count, c.version)
        for (slot, counts) in shown {
            c.bulk(statistics.slotNames[slot])
            c.reply.writeRESPMapHeader(2, c.version)
            c.bulk("calls")
            c.integer(counts.reduce(0, +))
            c.bulk("histogram_usec")
            let rows = LatencyBuckets.cumulativeRows(counts)
            c.reply.writeRESPMapHeader(rows.count, c.version)
            for row in rows {
                c.integer(row.microseconds)
                c.integer(row.calls)
            }
        }
    }

    /// LATENCY DOCTOR: each event's samples in plain words, and what to look at.
    static func latencyReport(_ server: ServerState) -> String {
        let threshold = server.config.latencyMonitorThreshold
        guard threshold > 0 else {
            return "Latency monitoring is off. CONFIG SET latency-monitor-threshold <milliseconds> records every "
                + "command that runs at least that long.\n"
        }
        let events = server.latency.all
        guard !events.isEmpty else {
            return "No command has run for \(threshold) ms or more (latency-monitor-threshold) since the monitor was "
                + "turned on or reset.\n"
        }
        var report = "Latency events (commands running \(threshold) ms or more):\n\n"
        for (n, (event, series)) in events.enumerated() {
            let total = series.samples.reduce(0) { $0 + $1.milliseconds }
            let average = series.samples.isEmpty ? 0 : total / series.samples.count
            report += "\(n + 1). \(event): \(series.samples.count) seconds with samples, latest \(series.samples.last?.milliseconds ?? 0) ms, "
                + "worst \(series.worst) ms, average \(average) ms.\n"
        }
        report += "\nSLOWLOG GET lists the commands themselves (slowlog-log-slower-than, in microseconds). Commands that "
            + "read or write many keys at once (KEYS, FLUSHALL, large MSET or MGET) and snapshots taken with SAVE are the "
            + "usual causes; SCAN and BGSAVE do the same work without holding up other clients.\n"
        return report
    }

    // MARK: MEMORY

    static func memoryDoctor(_ c: inout CommandContext) {
        c.reply.writeRESPVerbatim(doctor(c.server), c.version)
    }

    static func memoryMallocStats(_ c: inout CommandContext) {
        c.reply.writeRESPVerbatim(allocatorReport(), c.version)
    }

    static func memoryPurge(_ c: inout CommandContext) {
        EntryMemory.purgeAll()
        c.ok()
    }

    static func memoryHelp(_ c: inout CommandContext) {
        ConnectionCommands.help(&c, [
            "DOCTOR",
            "    Return memory problems reports.",
            "MALLOC-STATS",
            "    Return internal statistics report from the memory allocator.",
            "PURGE",
            "    Attempt to purge dirty pages for reclamation by the allocator.",
            "STATS",
            "    Return information about the memory usage of the server.",
            "USAGE <key> [SAMPLES <count>]",
            "    Return memory in bytes used by <key> and its value. Nested values are",
            "    sampled up to <count> times (default: 5, 0 means sample all).",
        ])
    }

    /// MEMORY STATS: Redis's breakdown of the memory in use, from this server's figures: the heap at start,
    /// each database's table and expiry index (its "overhead"), the keys' entries (the dataset), and the
    /// allocator's and the process's view of the pages.
    static func memoryStats(_ c: inout CommandContext) {
        let server = c.server
        let (dataset, heap, rss, used, peak) = ServerCommands.memoryFigures(server)
        let startup = server.startupAllocated
        var databases: [(index: Int, table: Int, expires: Int)] = []
        var keys = 0
        var structures = 0
        for (index, db) in server.keyspace.databases.enumerated() {
            var (count, table, expires) = (0, 0, 0)
            for shard in db.shards {
                shard.lock.lock()
                count += shard.count
                table += shard.tableCapacity * MemoryLayout<UInt64>.stride
                expires += shard.expiryRegistrations * 8
                shard.lock.unlock()
            }
            keys += count
            structures += table + expires
            if count > 0 { databases.append((index, table, expires)) }
        }
        // The keys' entries are the dataset; the tables and expiry indexes are overhead, and so is the heap
        // beyond the keyspace and what was there at start (connections' buffers, the server's own structures),
        // counted as the normal clients'.
        let datasetBytes = max(0, dataset - structures)
        let clients = max(0, used - startup - dataset)
        let overhead = used - datasetBytes
        func ratio(_ a: Int, _ b: Int) -> Double { b > 0 ? Double(a) / Double(b) : 0 }
        func double(_ value: Double) { c.reply.writeRESPDouble(formatted: String(format: "%.17g", value), c.version) }
        c.reply.writeRESPMapHeader(27 + databases.count, c.version)
        for (name, value) in [("peak.allocated", peak), ("total.allocated", used), ("startup.allocated", startup),
                              ("replication.backlog", 0), ("clients.slaves", 0), ("clients.normal", clients),
                              ("cluster.links", 0), ("aof.buffer", 0), ("lua.caches", 0), ("functions.caches", 0)] {
            c.bulk(name)
            c.integer(value)
        }
        for db in databases {
            c.bulk("db.\(db.index)")
            c.reply.writeRESPMapHeader(3, c.version)
            c.bulk("overhead.hashtable.main")
            c.integer(db.table)
            c.bulk("overhead.hashtable.expires")
            c.integer(db.expires)
            c.bulk("overhead.hashtable.slot-to-keys")
            c.integer(0)
        }
        c.bulk("overhead.total")
        c.integer(overhead)
        c.bulk("keys.count")
        c.integer(keys)
        c.bulk("keys.bytes-per-key")
        c.integer(keys > 0 ? (used - startup) / keys : 0)
        c.bulk("dataset.bytes")
        c.integer(datasetBytes)
        c.bulk("dataset.percentage")
        double(ratio(datasetBytes, used - startup) * 100)
        c.bulk("peak.percentage")
        double(ratio(used, peak) * 100)
        c.bulk("allocator.allocated")
        c.integer(heap.allocated)
        c.bulk("allocator.active")
        c.integer(heap.active)
        c.bulk("allocator.resident")
        c.integer(heap.resident)
        c.bulk("allocator-fragmentation.ratio")
        double(ratio(heap.active, heap.allocated))
        c.bulk("allocator-fragmentation.bytes")
        c.integer(heap.active - heap.allocated)
        c.bulk("allocator-rss.ratio")
        double(ratio(heap.resident, heap.active))
        c.bulk("allocator-rss.bytes")
        c.integer(heap.resident - heap.active)
        c.bulk("rss-overhead.ratio")
        double(ratio(rss, heap.resident))
        c.bulk("rss-overhead.bytes")
        c.integer(rss - heap.resident)
        c.bulk("fragmentation")
        double(ratio(rss, used))
        c.bulk("fragmentation.bytes")
        c.integer(rss - used)
    }

    /// MEMORY USAGE key [SAMPLES count]: the bytes the key takes: its entry (key, value, lengths and expiry in
    /// one block, at the allocator's size class) and its slot in the table. SAMPLES is accepted, as values
    /// here have no parts to sample.
    static func memoryUsage(_ c: inout CommandContext) {
        let a = c.arguments
        var j = 3
        while j < a.count {
            guard a.matches(j, "samples") && j + 1 < a.count else { return c.error(ReplyError.syntax) }
            guard let samples = c.integerArgument(j + 1) else { return }
            guard samples >= 0 else { return c.error(ReplyError.syntax) }
            j += 2
        }
        // As Redis, the key is looked up without expiring it.
        c.withKeyShard(2) { c, shard, hash in
            guard let index = shard.find(c.arguments[2], hash: hash) else { return c.null() }
            c.integer(shard.entry(at: index).allocatedSize + MemoryLayout<UInt64>.size)
        }
    }

    /// MEMORY DOCTOR: what in the memory figures deserves an operator's attention, in plain words.
    static func doctor(_ server: ServerState) -> String {
        let (_, heap, rss, used, _) = ServerCommands.memoryFigures(server)
        let limit = Int(clamping: server.config.maxMemory)
        let human = ServerCommands.humanBytes
        if used < 5 << 20 {
            return "This instance holds little data (\(human(used)) in use), too little for a diagnosis: "
                + "the figures of a nearly empty process are dominated by its fixed costs.\n"
        }
        var findings: [String] = []
        // The allocator's figures leave out the process's fixed costs (code, thread stacks, runtime), which
        // dominate the resident size of a small instance.
        if heap.resident > heap.active + (10 << 20) && Double(heap.resident) > Double(heap.active) * 1.4 {
            findings.append(
                "* The allocator keeps \(human(heap.resident)) resident for \(human(heap.active)) of pages in use: "
                    + "memory freed by deleted or expired keys that has not gone back to the system yet. It goes "
                    + "back within about a second of the dataset settling; MEMORY PURGE returns it at once.")
        }
        if heap.allocated > 0 && heap.active > heap.allocated + (10 << 20) && Double(heap.active) > Double(heap.allocated) * 1.2 {
            findings.append(
                "* The allocator's pages in use (\(human(heap.active))) exceed its allocated bytes "
                    + "(\(human(heap.allocated))) by \(String(format: "%.0f", (Double(heap.active) / Double(heap.allocated) - 1) * 100))%: "
                    + "many partly used pages, typically after many keys of mixed sizes were deleted or expired. "
                    + "They fill again as keys are written.")
        }
        if limit > 0 && used > limit / 10 * 9 {
            let policy = server.config.maxMemoryPolicy
            findings.append(
                "* Memory in use (\(human(used))) is \(used >= limit ? "at" : "near") maxmemory (\(human(limit))). "
                    + (policy == .noEviction
                        ? "The policy is noeviction, so writes that need memory are refused with OOM errors."
                        : "Keys are being evicted under \(policy.rawValue) to stay within it."))
        }
        if findings.isEmpty {
            return "No memory problems found: \(human(used)) in use, \(human(rss)) resident, "
                + "allocator \(human(heap.allocated)) allocated in \(human(heap.active)) of active pages.\n"
        }
        return "Memory report (\(human(used)) in use, \(human(rss)) resident):\n\n" + findings.joined(separator: "\n\n") + "\n"
    }

    /// MEMORY MALLOC-STATS: the allocator's own statistics report (jemalloc's `malloc_stats_print`).
    static func allocatorReport() -> String {
        final class Collected { var bytes: [UInt8] = [] }
        let collected = Collected()
        withExtendedLifetime(collected) {
            malloc_stats_print({ context, text in
                guard let context, let text else { return }
                let collected = Unmanaged<Collected>.fromOpaque(context).takeUnretainedValue()
                collected.bytes.append(contentsOf: UnsafeRawBufferPointer(start: text, count: strlen(text)))
            }, Unmanaged.passUnretained(collected).toOpaque(), nil)
        }
        return String(decoding: collected.bytes, as: UTF8.self)
    }
}
