import CacheCore
import Foundation
import NIOCore
import RESP

/// Server commands: INFO, TIME, MONITOR, SHUTDOWN, SAVE, BGSAVE, LASTSAVE, COMMAND.
package enum ServerCommands {
    static func time(_ c: inout CommandContext) {
        let micros = c.server.clock.nowMicroseconds()
        c.arrayHeader(2)
        c.bulk(String(micros / 1_000_000))
        c.bulk(String(micros % 1_000_000))
    }

    static func monitor(_ c: inout CommandContext) {
        // As Redis: a client expects one reply per command of a transaction, so MONITOR cannot run in one.
        if c.session.runningTransaction { return c.error("ERR MONITOR isn't allowed for DENY BLOCKING client") }
        // As Redis: a connection that already monitors gets no second reply.
        if c.session.isMonitor { return }
        c.session.isMonitor = true
        c.ok()
    }

    static func shutdown(_ c: inout CommandContext) {
        var request = ShutdownRequest(save: nil, now: false, force: false)
        var (nosave, save, abort) = (false, false, false)
        for j in 1..<c.arguments.count {
            if c.arguments.matches(j, "nosave") {
                nosave = true
            } else if c.arguments.matches(j, "save") {
                save = true
            } else if c.arguments.matches(j, "now") {
                request.now = true
            } else if c.arguments.matches(j, "force") {
                request.force = true
            } else if c.arguments.matches(j, "abort") {
                abort = true
            } else {
                return c.error(ReplyError.syntax)
            }
        }
        // As Redis: SAVE with NOSAVE, or ABORT with anything but ABORT, is a syntax error. A shutdown here
        // either happens at once or fails, so there is never one in progress to abort.
        let flagged = nosave || save || request.now || request.force
        if (nosave && save) || (abort && flagged) { return c.error(ReplyError.syntax) }
        if abort { return c.error("ERR No shutdown in progress.") }
        if nosave { request.save = false } else if save { request.save = true }
        c.server.logger.notice("User requested shutdown...")
        // As Redis does, SHUTDOWN saves first when asked to or when save points are set, and stays up if that
        // fails (unless FORCE). The save runs here, on this client's event loop; once the listeners are closed
        // the service saves again if anything changed in between, so no acknowledged write is left out.
        let config = c.server.config
        if request.save ?? !config.savePoints.isEmpty {
            c.server.logger.notice("Saving the final snapshot before exiting.")
            if case .failed = c.server.snapshots.saveNow(config, trigger: "SHUTDOWN", waitForOthers: true), !request.force {
                c.server.logger.warning("Errors trying to shut down the server: the snapshot could not be saved. Check the logs.")
                return c.error("ERR Errors trying to SHUTDOWN. Check logs.")
            }
        }
        if !c.server.requestShutdown(request) {
            c.error("ERR Errors trying to SHUTDOWN. Check logs.")
        }
        // On success Redis sends no reply: the connection closes.
        c.session.closeAfterReply = true
    }

    // MARK: snapshots

    static func save(_ c: inout CommandContext) {
        switch c.server.snapshots.saveNow(c.server.config, trigger: "SAVE") {
        case .saved:
            c.ok()
        case .busy:
            c.error("ERR Background save already in progress")
        case .failed(let error):
            c.error("ERR Error saving the snapshot: \(error.reason). Check logs.")
        }
    }

    static func bgsave(_ c: inout CommandContext) {
        var schedule = false
        if c.arguments.count > 1 {
            guard c.arguments.count == 2 && c.arguments.matches(1, "schedule") else { return c.error(ReplyError.syntax) }
            schedule = true
        }
        let server = c.server
        switch server.snapshots.saveInBackground({ server.config }, trigger: "BGSAVE", schedule: schedule) {
        case .started where c.session.runningTransaction:
            // Redis defers a BGSAVE run by EXEC until the transaction is over and says so. The save here starts
            // at once (a background save is not one point in time across shards in any case: see docs).
            c.simple("Background saving scheduled")
        case .started:
            c.simple("Background saving started")
        case .scheduled:
            c.simple("Background saving scheduled")
        case .alreadyInProgress:
            c.error("ERR Background save already in progress")
        }
    }

    static func lastsave(_ c: inout CommandContext) {
        c.integer(Int(c.server.snapshots.current.lastSaveTime / 1000))
    }

    // MARK: INFO

    /// INFO's sections without arguments, as Redis 7.0's.
    static let defaultSections = [
        "server", "clients", "memory", "persistence", "stats", "replication", "cpu", "modules", "errorstats", "cluster",
        "keyspace",
    ]
    /// Every section, in the order INFO prints them: the default ones and commandstats and latencystats.
    static let allSections = [
        "server", "clients", "memory", "persistence", "stats", "replication", "cpu", "modules", "commandstats",
        "errorstats", "latencystats", "cluster", "keyspace",
    ]

    static func info(_ c: inout CommandContext) {
        var wanted = Set<String>()
        for j in 1..<c.arguments.count { wanted.insert(c.arguments.string(j).lowercased()) }
        if wanted.contains("all") || wanted.contains("everything") { wanted.formUnion(allSections) }
        if wanted.isEmpty || wanted.contains("default") { wanted.formUnion(defaultSections) }
        let sections = allSections.filter { wanted.contains($0) }
        var text = ""
        for section in sections {
            if !text.isEmpty { text += "\r\n" }
            text += infoSection(section, server: c.server, now: c.now)
        }
        c.reply.writeRESPVerbatim(text, c.version)
    }

    static func infoSection(_ name: String, server: ServerState, now: Int64) -> String {
        var lines: [String] = []
        let config = server.config
        switch name {
        case "server":
            let uptime = (now - server.startTime) / 1000
            lines = [
                "# Server",
                "redis_version:\(ConnectionCommands.compatibleRedisVersion)",
                "cached_version:\(CacheServerVersion.current)",
                "redis_mode:standalone",
                "os:\(operatingSystem())",
                "arch_bits:64",
                "multiplexing_api:epoll",
                "process_id:\(ProcessInfo.processInfo.processIdentifier)",
                "run_id:\(server.runID)",
                "tcp_port:\(config.port)",
                "server_time_usec:\(server.clock.nowMicroseconds())",
                "uptime_in_seconds:\(uptime)",
                "uptime_in_days:\(uptime / 86400)",
                "hz:\(config.hz)",
                "configured_hz:\(config.hz)",
                "io_threads_active:\(config.ioThreads > 1 ? 1 : 0)",
                "executable:\(CommandLine.arguments.first ?? "")",
                "config_file:\(config.configFile)",
                "monotonic_clock:POSIX clock_gettime",
                "process_supervised:\(SystemdNotifier.fromEnvironment() != nil ? "systemd" : "no")",
            ]
        case "clients":
            let blocked = server.blocked.counts
            lines = [
                "# Clients",
                "connected_clients:\(server.clients.count)",
                "cluster_connections:0",
                "maxclients:\(config.maxClients)",
                "blocked_clients:\(blocked.blocked)",
                "tracking_clients:\(server.tracking.statistics.clients)",
                "clients_in_timeout_table:\(blocked.timed)",
            ]
        case "memory":
            let (dataset, heap, rss, used, peak) = memoryFigures(server)
            let startup = server.startupAllocated
            func ratio(_ a: Int, _ b: Int) -> String { String(format: "%.2f", b > 0 ? Double(a) / Double(b) : 0) }
            let system = physicalMemory()
            lines = [
                "# Memory",
                "used_memory:\(used)",
                "used_memory_human:\(humanBytes(used))",
                "used_memory_rss:\(rss)",
                "used_memory_rss_human:\(humanBytes(rss))",
                "used_memory_peak:\(peak)",
                "used_memory_peak_human:\(humanBytes(peak))",
                "used_memory_peak_perc:\(String(format: "%.2f", peak > 0 ? Double(used) * 100 / Double(peak) : 0))%",
                "used_memory_overhead:\(max(0, used - dataset))",
                "used_memory_startup:\(startup)",
                "used_memory_dataset:\(dataset)",
                "used_memory_dataset_perc:\(String(format: "%.2f", used > startup ? Double(dataset) * 100 / Double(used - startup) : 0))%",
                "allocator_allocated:\(heap.allocated)",
                "allocator_active:\(heap.active)",
                "allocator_resident:\(heap.resident)",
                "allocator_metadata:\(heap.metadata)",
                "total_system_memory:\(system)",
                "total_system_memory_human:\(humanBytes(system))",
                // No scripting here: no Lua VM, no scripts, no functions.
                "used_memory_lua:0",
                "used_memory_vm_eval:0",
                "used_memory_lua_human:0B",
                "used_memory_scripts_eval:0",
                "number_of_cached_scripts:0",
                "number_of_functions:0",
                "number_of_libraries:0",
                "used_memory_vm_functions:0",
                "used_memory_vm_total:0",
                "used_memory_vm_total_human:0B",
                "used_memory_functions:0",
                "used_memory_scripts:0",
                "used_memory_scripts_human:0B",
                "maxmemory:\(config.maxMemory)",
                "maxmemory_human:\(humanBytes(Int(clamping: config.maxMemory)))",
                "maxmemory_policy:\(config.maxMemoryPolicy.rawValue)",
                "allocator_frag_ratio:\(ratio(heap.active, heap.allocated))",
                "allocator_frag_bytes:\(heap.active - heap.allocated)",
                "allocator_rss_ratio:\(ratio(heap.resident, heap.active))",
                "allocator_rss_bytes:\(heap.resident - heap.active)",
                "rss_overhead_ratio:\(ratio(rss, heap.resident))",
                "rss_overhead_bytes:\(rss - heap.resident)",
                "mem_fragmentation_ratio:\(ratio(rss, used))",
                "mem_fragmentation_bytes:\(rss - used)",
                // Everything allocated counts toward maxmemory: no replication or AOF buffers are left out.
                "mem_not_counted_for_evict:0",
                "mem_replication_backlog:0",
                "mem_total_replication_buffers:0",
                "mem_clients_slaves:0",
                "mem_cluster_links:0",
                "mem_aof_buffer:0",
                "mem_allocator:jemalloc-5.3.0",
                "active_defrag_running:0",
                // Keys are freed when they are removed (UNLINK and FLUSHALL ASYNC too): nothing waits to be freed.
                "lazyfree_pending_objects:0",
                "lazyfreed_objects:0",
            ]
        case "persistence":
            let status = server.snapshots.current
            let changes = server.snapshots.changesSinceLastSave
            let background = status.inProgress && status.background
            lines = [
                "# Persistence",
                "loading:0",
                "async_loading:0",
                // Snapshots are written by a thread, not a forked child: no copy-on-write.
                "current_cow_peak:0",
                "current_cow_size:0",
                "current_cow_size_age:0",
                "current_fork_perc:0.00",
                "rdb_changes_since_last_save:\(changes)",
                "rdb_bgsave_in_progress:\(background ? 1 : 0)",
                "rdb_last_save_time:\(status.lastSaveTime / 1000)",
                "rdb_last_bgsave_status:\(status.lastSaveOK ? "ok" : "err")",
                "rdb_last_bgsave_time_sec:\(status.lastBackgroundSeconds)",
                "rdb_current_bgsave_time_sec:\(background ? (now - status.currentStart) / 1000 : -1)",
                "rdb_saves:\(status.saves)",
                "rdb_last_cow_size:0",
                "rdb_last_load_keys_expired:\(status.expiredOnLoad)",
                "rdb_last_load_keys_loaded:\(status.loadedKeys)",
                "snapshot_file:\(config.snapshotPath)",
                "aof_enabled:0",
                "aof_rewrite_in_progress:0",
                "aof_rewrite_scheduled:0",
                "aof_last_rewrite_time_sec:-1",
                "aof_current_rewrite_time_sec:-1",
                "aof_last_bgrewrite_status:ok",
                "aof_rewrites:0",
                "aof_rewrites_consecutive_failures:0",
                "aof_last_write_status:ok",
                "aof_last_cow_size:0",
                "module_fork_in_progress:0",
                "module_fork_last_cow_size:0",
            ]
        case "stats":
            let totals = shardTotals(server)
            let base = server.stats.baseline.withLock { $0 }
            let commands = totalCommands(server) - base.commands
            let traffic = totalTraffic(server)
            let pubsub = server.pubsub.counts
            let tracking = server.tracking.statistics
            lines = [
                "# Stats",
                "total_connections_received:\(server.stats.connectionsReceived.load(ordering: .relaxed))",
                "total_commands_processed:\(commands)",
                "instantaneous_ops_per_sec:\(server.stats.instantaneousOpsPerSecond.load(ordering: .relaxed))",
                "instantaneous_input_kbps:\(String(format: "%.2f", Double(server.stats.instantaneousInputBytesPerSecond.load(ordering: .relaxed)) / 1024))",
                "instantaneous_output_kbps:\(String(format: "%.2f", Double(server.stats.instantaneousOutputBytesPerSecond.load(ordering: .relaxed)) / 1024))",
                "total_net_input_bytes:\(traffic.input - base.input)",
                "total_net_output_bytes:\(traffic.output - base.output)",
                "total_net_repl_input_bytes:0",
                "total_net_repl_output_bytes:0",
                "instantaneous_input_repl_kbps:0.00",
                "instantaneous_output_repl_kbps:0.00",
                "rejected_connections:\(server.stats.rejectedConnections.load(ordering: .relaxed))",
                "sync_full:0",
                "sync_partial_ok:0",
                "sync_partial_err:0",
                "expired_keys:\(totals.expired - base.expired)",
                "evicted_keys:\(server.keyspace.evictedKeys - base.evicted)",
                "evicted_clients:0",
                "keyspace_hits:\(totals.hits - base.hits)",
                "keyspace_misses:\(totals.misses - base.misses)",
                "total_error_replies:\(server.commandStatistics.totals.errors.values.reduce(0, +))",
                "pubsub_channels:\(pubsub.channels)",
                "pubsub_patterns:\(pubsub.patterns)",
                "pubsubshard_channels:0",
                "latest_fork_usec:0",
                "total_forks:0",
                "migrate_cached_sockets:\(server.migrateSockets.count)",
                "slave_expires_tracked_keys:0",
                "active_defrag_hits:0",
                "active_defrag_misses:0",
                "active_defrag_key_hits:0",
                "active_defrag_key_misses:0",
                "total_active_defrag_time:0",
                "current_active_defrag_time:0",
                "tracking_total_keys:\(tracking.keys)",
                "tracking_total_items:\(tracking.items)",
                "tracking_total_prefixes:\(tracking.prefixes)",
                "unexpected_error_replies:0",
            ]
        case "replication":
            lines = [
                "# Replication", "role:master", "connected_slaves:0", "master_failover_state:no-failover",
                "master_replid:\(server.replicationID)", "master_replid2:0000000000000000000000000000000000000000",
                "master_repl_offset:0", "second_repl_offset:-1", "repl_backlog_active:0",
                "repl_backlog_first_byte_offset:0", "repl_backlog_histlen:0",
            ]
        case "cpu":
            var usage = rusage()
            getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
            func seconds(_ t: timeval) -> String { String(format: "%.6f", Double(t.tv_sec) + Double(t.tv_usec) / 1e6) }
            var children = rusage()
            getrusage(__rusage_who_t(RUSAGE_CHILDREN.rawValue), &children)
            lines = [
                "# CPU", "used_cpu_sys:\(seconds(usage.ru_stime))", "used_cpu_user:\(seconds(usage.ru_utime))",
                "used_cpu_sys_children:\(seconds(children.ru_stime))", "used_cpu_user_children:\(seconds(children.ru_utime))",
            ]
        case "commandstats":
            let totals = server.commandStatistics.totals
            lines = ["# Commandstats"]
            for (slot, name) in server.commandStatistics.slotNames.enumerated()
            where totals.calls[slot] != 0 || totals.failed[slot] != 0 || totals.rejected[slot] != 0 {
                let calls = totals.calls[slot]
                let micros = totals.nanoseconds[slot] / 1000
                let perCall = calls > 0 ? Double(micros) / Double(calls) : 0
                lines.append(
                    "cmdstat_\(name):calls=\(calls),usec=\(micros),usec_per_call=\(String(format: "%.2f", perCall)),"
                        + "rejected_calls=\(totals.rejected[slot]),failed_calls=\(totals.failed[slot])")
            }
        case "errorstats":
            lines = ["# Errorstats"]
            for (prefix, count) in server.commandStatistics.totals.errors.sorted(by: { $0.key < $1.key }) {
                lines.append("errorstat_\(prefix):count=\(count)")
            }
        case "latencystats":
            lines = ["# Latencystats"]
            guard config.latencyTracking else { break }
            let totals = server.commandStatistics.totals
            let percentiles = config.latencyTrackingInfoPercentiles
            for (slot, name) in server.commandStatistics.slotNames.enumerated() {
                guard let counts = totals.latencies[slot] else { continue }
                let values = percentiles.map { p in
                    let micros = Double(LatencyBuckets.value(atPercentile: p, of: counts)) / 1000
                    return "p\(ServerConfiguration.formatPercentile(p))=\(String(format: "%.3f", micros))"
                }
                lines.append("latency_percentiles_usec_\(name):" + values.joined(separator: ","))
            }
        case "modules":
            lines = ["# Modules"]
        case "cluster":
            lines = ["# Cluster", "cluster_enabled:0"]
        case "keyspace":
            lines = ["# Keyspace"]
            for (i, db) in server.keyspace.databases.enumerated() {
                let s = db.statistics(now: now)
                if s.keys > 0 { lines.append("db\(i):keys=\(s.keys),expires=\(s.expires),avg_ttl=\(s.averageTTL)") }
            }
        default:
            return ""
        }
        return lines.joined(separator: "\r\n") + "\r\n"
    }

    static func shardTotals(_ server: ServerState) -> (hits: Int, misses: Int, expired: Int) {
        var totals = (hits: 0, misses: 0, expired: 0)
        for db in server.keyspace.databases {
            for shard in db.shards {
                shard.lock.lock()
                totals.hits += shard.hits
                totals.misses += shard.misses
                totals.expired += shard.expiredKeys
                shard.lock.unlock()
            }
        }
        return totals
    }

    static func totalCommands(_ server: ServerState) -> Int {
        server.stats.commandsOfClosedClients.load(ordering: .relaxed)
            + server.clients.all.reduce(0) { $0 + $1.commandsProcessed }
    }

    /// Bytes read from and written to clients, closed ones included.
    static func totalTraffic(_ server: ServerState) -> (input: Int, output: Int) {
        var input = server.stats.netInputBytes.load(ordering: .relaxed)
        var output = server.stats.netOutputBytes.load(ordering: .relaxed)
        for session in server.clients.all {
            input += session.inputBytes
            output += session.outputBytes
        }
        return (input, output)
    }

    /// CONFIG RESETSTAT: the counters INFO reports start again from zero.
    static func resetStatistics(_ server: ServerState) {
        let totals = shardTotals(server)
        let commands = totalCommands(server)
        let traffic = totalTraffic(server)
        let evicted = server.keyspace.evictedKeys
        server.stats.baseline.withLock {
            $0 = (totals.hits, totals.misses, totals.expired, evicted, commands, traffic.input, traffic.output)
        }
        server.stats.connectionsReceived.store(0, ordering: .relaxed)
        server.stats.rejectedConnections.store(0, ordering: .relaxed)
        server.commandStatistics.reset()
    }

    /// The memory figures INFO memory, MEMORY STATS and MEMORY DOCTOR report, read once: the keyspace's bytes,
    /// the allocator's statistics, the resident set, the memory in use — what maxmemory is compared with, the
    /// dataset plus the rest of the heap, as Redis counts every allocation — and the peak, this reading included.
    static func memoryFigures(_ server: ServerState)
        -> (dataset: Int, heap: AllocatorStatistics, rss: Int, used: Int, peak: Int)
    {
        let dataset = server.keyspace.usedBytes
        let heap = AllocatorStatistics.current()
        let used = dataset + EntryMemory.overheadBytes(datasetBytes: dataset, statistics: heap)
        return (dataset, heap, residentBytes(), used, server.notePeak(used))
    }

    /// The machine's memory in bytes (INFO total_system_memory).
    static func physicalMemory() -> Int {
        Int(sysconf(Int32(_SC_PHYS_PAGES))) * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    static func residentBytes() -> Int {
        guard let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let fields = statm.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    static func humanBytes(_ bytes: Int) -> String {
        let d = Double(bytes)
        if d < 1024 { return "\(bytes)B" }
        if d < 1024 * 1024 { return String(format: "%.2fK", d / 1024) }
        if d < 1024 * 1024 * 1024 { return String(format: "%.2fM", d / 1024 / 1024) }
        return String(format: "%.2fG", d / 1024 / 1024 / 1024)
    }

    static func operatingSystem() -> String {
        var u = utsname()
        uname(&u)
        func field<T>(_ value: T) -> String {
            withUnsafeBytes(of: value) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        }
        return "\(field(u.sysname)) \(field(u.release)) \(field(u.machine))"
    }

    // MARK: COMMAND

    /// COMMAND (no subcommand), and COMMAND INFO without names: every command's details.
    static func command(_ c: inout CommandContext) {
        let table = c.server.commands.commands
        c.arrayHeader(table.count)
        for spec in table { writeInfo(&c, spec) }
    }

    static func commandCount(_ c: inout CommandContext) {
        c.integer(c.server.commands.commands.count)
    }

    /// COMMAND LIST [FILTERBY MODULE name | ACLCAT category | PATTERN pattern]
    static func commandList(_ c: inout CommandContext) {
        let a = c.arguments
        let table = c.server.commands.commands
        // FILTERBY is accepted only in its simplest form.
        if a.count > 2 && !(a.count == 5 && a.matches(2, "filterby")) { return c.error(ReplyError.syntax) }
        // As Redis 7.0 does, the list names subcommands too, as `container|subcommand`.
        let specs = table.flatMap { spec in
            [(spec.name, spec)] + spec.listedSubcommands.map { ("\(spec.name)|\($0.name)", $0) }
        }
        var names = specs.map(\.0)
        if a.count == 5 {
            let value = a.string(4).lowercased()
            if a.matches(3, "aclcat") {
                names = specs.filter { $0.1.categories.contains(value) }.map(\.0)
            } else if a.matches(3, "pattern") {
                names = names.filter { Glob.matches(pattern: Array(value.utf8), subject: Array($0.utf8), caseInsensitive: true) }
            } else if !a.matches(3, "module") {
                return c.error(ReplyError.syntax)
            } else {
                names = []
            }
        }
        c.arrayHeader(names.count)
        for name in names { c.bulk(name) }
    }

    /// COMMAND INFO [command ...]
    static func commandInfo(_ c: inout CommandContext) {
        let a = c.arguments
        guard a.count > 2 else { return command(&c) }
        let table = c.server.commands.commands
        c.arrayHeader(a.count - 2)
        for j in 2..<a.count {
            if let (spec, parent) = namedSpec(a.string(j), table) { writeInfo(&c, spec, parent: parent) } else { c.null() }
        }
    }

    /// COMMAND DOCS [command ...]
    static func commandDocs(_ c: inout CommandContext) {
        let a = c.arguments
        let table = c.server.commands.commands
        let specs = a.count == 2 ? table.map { ($0, nil) } : (2..<a.count).compactMap { namedSpec(a.string($0), table) }
        c.reply.writeRESPMapHeader(specs.count, c.version)
        for (spec, parent) in specs { writeDocs(&c, spec, parent: parent) }
    }

    static func commandGetKeys(_ c: inout CommandContext) {
        getKeys(&c, c.server.commands.commands, withFlags: false)
    }

    static func commandGetKeysAndFlags(_ c: inout CommandContext) {
        getKeys(&c, c.server.commands.commands, withFlags: true)
    }

    static func commandHelp(_ c: inout CommandContext) {
        ConnectionCommands.help(&c, [
            "(no subcommand)", "    Return details about all Redis commands.",
            "COUNT", "    Return the total number of commands in this Redis server.",
            "LIST", "    Return a list of all commands in this Redis server.",
            "INFO [<command-name> ...]",
            "    Return details about multiple Redis commands.",
            "    If no command names are given, documentation details for all",
            "    commands are returned.",
            "DOCS [<command-name> ...]",
            "    Return documentation details about multiple Redis commands.",
            "    If no command names are given, documentation details for all",
            "    commands are returned.",
            "GETKEYS <full-command>",
            "    Return the keys from a full Redis command.",
            "GETKEYSANDFLAGS <full-command>",
            "    Return the keys and the access flags from a full Redis command.",
        ])
    }

    /// The spec COMMAND INFO and DOCS mean by `name` (the name a command answers to): a command, or a
    /// subcommand as `container|subcommand` (with its container's own name, which they report).
    static func namedSpec(_ name: String, _ table: [CommandSpec]) -> (CommandSpec, String?)? {
        let name = name.lowercased()
        guard let bar = name.firstIndex(of: "|") else { return table.first { $0.lookupName == name }.map { ($0, nil) } }
        let container = String(name[..<bar])
        let sub = name[name.index(after: bar)...]
        guard let parent = table.first(where: { $0.lookupName == container }),
            let spec = parent.listedSubcommands.first(where: { $0.name == sub })
        else { return nil }
        return (spec, parent.name)
    }

    /// COMMAND GETKEYS command [arg ...]: the keys of a full command, found as Redis 7.0 finds them (its key
    /// positions), with its errors; COMMAND GETKEYSANDFLAGS (`withFlags`): each key with the flags of its key
    /// specification (``KeySpecFlags``).
    static func getKeys(_ c: inout CommandContext, _ table: [CommandSpec], withFlags: Bool) {
        let a = c.arguments
        let argc = a.count - 2
        guard let index = c.server.commands.lookup(a[2]) else { return c.error("ERR Invalid command specified") }
        var spec = table[index]
        var name = spec.name
        if !spec.subcommands.isEmpty && argc > 1 {
            // A container names a subcommand, as in Redis's lookup; an unknown one is no command.
            guard let sub = spec.subcommandIndex(named: a[3]), !spec.subcommands[sub].flags.contains(.unlisted) else {
                return c.error("ERR Invalid command specified")
            }
            spec = spec.subcommands[sub]
            name += "|" + spec.name
        }
        guard spec.firstKey > 0 else { return c.error("ERR The command has no key arguments") }
        guard spec.acceptsArgumentCount(argc) else { return c.error("ERR Invalid number of arguments specified for command") }
        let last = spec.lastKey < 0 ? argc + spec.lastKey : spec.lastKey
        guard spec.firstKey <= last, last < argc else { return c.error("ERR Invalid arguments specified for command") }
        var positions = Array(stride(from: spec.firstKey, through: last, by: max(1, spec.keyStep)))
        if case .movable(let find)? = spec.variableKeys {
            guard let found = find(a, 2, argc) else {
                return c.error("ERR Invalid arguments specified for command")
            }
            positions = found
        }
        c.arrayHeader(positions.count)
        for position in positions {
            guard withFlags else {
                c.bulk(a[position + 2])
                continue
            }
            c.arrayHeader(2)
            c.bulk(a[position + 2])
            let flags = KeySpecFlags.flags(of: name, firstKey: position == spec.firstKey, arguments: a, from: 2)
            c.reply.writeRESPSetHeader(flags.count, c.version)
            for flag in flags { c.reply.writeRESPSimpleString(flag) }
        }
    }

    /// One command's COMMAND INFO entry, in Redis 7's ten-field layout.
    static func writeInfo(_ c: inout CommandContext, _ spec: CommandSpec, parent: String? = nil) {
        c.arrayHeader(10)
        c.bulk(parent.map { "\($0)|\(spec.name)" } ?? spec.name)
        c.integer(spec.arity)
        let flags = spec.flags.names
        c.reply.writeRESPSetHeader(flags.count, c.version)
        for flag in flags { c.reply.writeRESPSimpleString(flag) }
        c.integer(spec.firstKey)
        c.integer(spec.lastKey)
        c.integer(spec.keyStep)
        c.reply.writeRESPSetHeader(spec.categories.count, c.version)
        for category in spec.categories { c.reply.writeRESPSimpleString("@" + category) }
        c.arrayHeader(0)  // tips
        c.arrayHeader(0)  // key specifications
        let subcommands = spec.listedSubcommands
        c.arrayHeader(subcommands.count)
        for sub in subcommands { writeInfo(&c, sub, parent: spec.name) }
    }

    static func writeDocs(_ c: inout CommandContext, _ spec: CommandSpec, parent: String? = nil) {
        c.bulk(parent.map { "\($0)|\(spec.name)" } ?? spec.name)
        let subcommands = spec.listedSubcommands
        let hasSubcommands = !subcommands.isEmpty
        c.reply.writeRESPMapHeader(hasSubcommands ? 5 : 4, c.version)
        c.bulk("summary")
        c.bulk(spec.summary)
        c.bulk("since")
        c.bulk(spec.since)
        c.bulk("group")
        c.bulk(spec.group)
        c.bulk("complexity")
        c.bulk(spec.complexity)
        if hasSubcommands {
            c.bulk("subcommands")
            c.reply.writeRESPMapHeader(subcommands.count, c.version)
            for sub in subcommands { writeDocs(&c, sub, parent: spec.name) }
        }
    }
}

/// The version of this server.
public enum CacheServerVersion {
    public static let current = "0.1.0"
}
