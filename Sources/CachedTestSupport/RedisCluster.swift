import Foundation
import Glibc

/// A real Redis Cluster on loopback for tests: `redis-server --cluster-enabled yes` nodes on free ports (each
/// with its cluster bus port, port + 10000, free too), joined with `redis-cli --cluster create`, and waited on
/// until every node reports `cluster_state:ok` and agrees on the masters.
///
/// A short `cluster-node-timeout` (1 s by default) makes a failover take seconds, and
/// `cluster-replica-validity-factor 0` lets any replica take over. Nodes write no snapshot and keep their files in
/// directories of their own. ``stop()`` (or releasing the value) kills every node and removes the directories;
/// ``withRedisCluster(masters:replicasPerMaster:nodeTimeout:tls:_:)`` does that even when the test fails.
///
/// With ``TestCertificates``, the cluster runs on TLS (`tls-cluster yes`, `tls-replication yes`: the cluster bus,
/// replication and the ports the cluster announces are TLS, client certificates from the test CA required),
/// and each node keeps a plain port too, for the helpers here (``cli(_:_:timeout:)``).
public final class RedisCluster: @unchecked Sendable {
    /// A node as `CLUSTER NODES` describes it.
    public struct Node: Sendable, Hashable, CustomStringConvertible {
        public let id: String
        public let port: Int
        public let flags: Set<String>
        /// The master's id, for a replica.
        public let masterID: String?
        /// The slots the node serves (for a master), as closed ranges.
        public let slots: [ClosedRange<Int>]

        public var isMaster: Bool { flags.contains("master") }
        /// Whether the node is flagged as failed (`fail` or `fail?`).
        public var isFailing: Bool { flags.contains("fail") || flags.contains("fail?") }
        public var slotCount: Int { slots.reduce(0) { $0 + $1.count } }
        public var description: String { "\(port) \(id.prefix(8)) \(flags.sorted().joined(separator: ",")) \(slotCount) slots" }
    }

    /// The node servers, in creation order (the first `masters` were created as masters).
    public let servers: [ServerProcess]
    /// The cluster node timeout, in milliseconds.
    public let nodeTimeout: Int
    /// The certificates of a TLS cluster; nil for a plain one.
    public let certificates: TestCertificates?
    /// Each server's TLS port (the port the cluster announces), in the order of ``servers``; empty for a plain
    /// cluster.
    public let tlsPorts: [Int]

    private init(servers: [ServerProcess], nodeTimeout: Int, certificates: TestCertificates?, tlsPorts: [Int]) {
        self.servers = servers
        self.nodeTimeout = nodeTimeout
        self.certificates = certificates
        self.tlsPorts = tlsPorts
    }

    deinit { stop() }

    /// Starts `masters` masters with `replicasPerMaster` replicas each, creates the cluster, and waits until
    /// it is healthy; on TLS with `tls`. Blocks (seconds): call it off the cooperative pool (``offThread(_:)``).
    /// - Throws: ``TestEnvironmentError`` when redis-server or redis-cli is missing, or the cluster does not form
    ///   within `timeout` seconds (every node started so far is stopped).
    public static func start(
        masters: Int = 3, replicasPerMaster: Int = 1, nodeTimeout: Int = 1000, tls: TestCertificates? = nil,
        timeout: TimeInterval = 60
    ) throws -> RedisCluster {
        _ = try ExternalProgram.redisCli.path()
        let arguments = [
            "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
            "--cluster-node-timeout", String(nodeTimeout), "--cluster-replica-validity-factor", "0",
        ]
        var servers: [ServerProcess] = []
        var tlsPorts: [Int] = []
        do {
            for _ in 0..<(masters * (1 + replicasPerMaster)) {
                if let tls {
                    // The cluster bus listens at the TLS port + 10000.
                    let tlsPort = try freeLoopbackPort(alsoFreeAt: 10000)
                    let tlsArguments = [
                        "--tls-port", String(tlsPort), "--tls-cluster", "yes", "--tls-replication", "yes",
                        "--cluster-port", String(tlsPort + 10000),
                    ] + tls.serverArguments
                    servers.append(try ServerProcess.start(.redis, arguments: arguments + tlsArguments))
                    tlsPorts.append(tlsPort)
                } else {
                    servers.append(
                        try ServerProcess.start(.redis, arguments: arguments, choosingPort: { try freeLoopbackPort(alsoFreeAt: 10000) }))
                }
            }
            let cluster = RedisCluster(servers: servers, nodeTimeout: nodeTimeout, certificates: tls, tlsPorts: tlsPorts)
            let tlsOptions = tls.map { ["--tls", "--cacert", $0.caCertificate, "--cert", $0.clientCertificate, "--key", $0.clientKey] }
            let create = try ExternalProgram.redisCli.run(
                (tlsOptions ?? []) + ["--cluster", "create"] + cluster.announcedPorts.map { "127.0.0.1:\($0)" }
                    + ["--cluster-replicas", String(replicasPerMaster), "--cluster-yes"],
                timeout: timeout)
            guard create.status == 0 else { throw TestEnvironmentError("creating the cluster failed: \(create.summary)") }
            try cluster.waitUntilHealthy(timeout: timeout)
            return cluster
        } catch {
            for server in servers { server.stop() }
            throw error
        }
    }

    /// The ports the cluster announces, in the order of ``servers``: the TLS ports of a TLS cluster.
    public var announcedPorts: [Int] { certificates == nil ? servers.map(\.port) : tlsPorts }

    /// `redis+cluster://` (`rediss+cluster://` for a TLS cluster) with every node as a seed.
    public var url: String {
        (certificates == nil ? "redis+cluster://" : "rediss+cluster://")
            + announcedPorts.map { "127.0.0.1:\($0)" }.joined(separator: ",")
    }

    /// The nodes whose process is running.
    public var liveServers: [ServerProcess] { servers.filter { !$0.refusesConnections() } }

    /// Runs `redis-cli` against the node on `port` (`redis-cli -h 127.0.0.1 -p port arguments…`).
    public func cli(_ port: Int, _ arguments: [String], timeout: TimeInterval = 20) throws -> ProgramOutput {
        try ExternalProgram.redisCli.run(["-h", "127.0.0.1", "-p", String(port)] + arguments, timeout: timeout)
    }

    /// The cluster as the node on `port` sees it (`CLUSTER NODES`).
    public func nodes(seenFrom port: Int) throws -> [Node] {
        let output = try cli(port, ["cluster", "nodes"])
        guard output.status == 0 else { throw TestEnvironmentError("CLUSTER NODES failed: \(output.summary)") }
        return try output.lines.filter { !$0.isEmpty }.map(Self.parseNode)
    }

    /// The masters serving slots, as a live node sees them, most slots first.
    public func masters() throws -> [Node] {
        guard let observer = liveServers.first else { throw TestEnvironmentError("no cluster node is running") }
        return try nodes(seenFrom: observer.port).filter { $0.isMaster && !$0.isFailing && $0.slotCount > 0 }
            .sorted { $0.slotCount > $1.slotCount }
    }

    /// The server of the node on `port` (its plain port or, on a TLS cluster, its TLS port).
    public func server(port: Int) throws -> ServerProcess {
        guard let index = servers.firstIndex(where: { $0.port == port }) ?? tlsPorts.firstIndex(of: port) else {
            throw TestEnvironmentError("no cluster node listens on port \(port)")
        }
        return servers[index]
    }

    /// Waits until every running node says `cluster_state:ok`, and every running node sees the same masters,
    /// none of them failing, serving all 16384 slots between them.
    public func waitUntilHealthy(timeout: TimeInterval = 60) throws {
        var last = "nothing checked yet"
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let problem = try healthProblem() { last = problem } else { return }
            usleep(100_000)
        }
        throw TestEnvironmentError("the cluster did not become healthy within \(Int(timeout)) s: \(last)")
    }

    /// Waits until the node on `port` (killed) is no longer a master of any slot as every running node sees it,
    /// and the cluster is healthy again: its replica has been promoted.
    public func waitForFailover(of port: Int, timeout: TimeInterval = 60) throws {
        let deadline = Date().addingTimeInterval(timeout)
        var last = "nothing checked yet"
        while Date() < deadline {
            var problem: String? = nil
            for server in liveServers {
                let view = try nodes(seenFrom: server.port)
                if let old = view.first(where: { $0.port == port }), old.isMaster, old.slotCount > 0 {
                    problem = "\(server.port) still sees \(old)"
                    break
                }
            }
            if problem == nil { problem = try healthProblem() }
            guard let problem else { return }
            last = problem
            usleep(100_000)
        }
        throw TestEnvironmentError("no failover of the node on port \(port) within \(Int(timeout)) s: \(last)")
    }

    /// Moves `slots` slots from `source` to `target` with `redis-cli --cluster reshard`, in the background.
    public func startResharding(from source: Node, to target: Node, slots: Int) throws -> RunningProgram {
        try ExternalProgram.redisCli.start([
            "--cluster", "reshard", "127.0.0.1:\(source.port)", "--cluster-from", source.id, "--cluster-to", target.id,
            "--cluster-slots", String(slots), "--cluster-yes",
        ])
    }

    /// Kills every node and removes its directory (`nodes.conf`, replication files). Safe to call more than once.
    public func stop() {
        for server in servers { server.send(signal: SIGKILL) }
        for server in servers {
            server.kill()
            try? FileManager.default.removeItem(at: server.directory)
        }
    }

    // MARK: private

    private func healthProblem() throws -> String? {
        let live = liveServers
        guard !live.isEmpty else { return "no node is running" }
        var mastersSeen: Set<Set<String>> = []
        for server in live {
            let info = try cli(server.port, ["cluster", "info"])
            guard info.standardOutput.contains("cluster_state:ok") else {
                return "\(server.port): \(info.lines.first ?? info.summary)"
            }
            let view = try nodes(seenFrom: server.port)
            let serving = view.filter { $0.isMaster && $0.slotCount > 0 }
            if let failing = serving.first(where: \.isFailing) { return "\(server.port) sees \(failing)" }
            let covered = serving.reduce(0) { $0 + $1.slotCount }
            guard covered == 16384 else { return "\(server.port) sees \(covered) slots served" }
            mastersSeen.insert(Set(serving.map(\.id)))
        }
        return mastersSeen.count == 1 ? nil : "the nodes disagree on the masters"
    }

    /// Parses one `CLUSTER NODES` line: `id host:port@bus[,hostname] flags master ping pong epoch link slot…`.
    static func parseNode(_ line: String) throws -> Node {
        let fields = line.split(separator: " ").map(String.init)
        guard fields.count >= 8 else { throw TestEnvironmentError("malformed CLUSTER NODES line: \(line)") }
        let address = fields[1].split(separator: "@").first.map(String.init) ?? ""
        guard let colon = address.lastIndex(of: ":"), let port = Int(address[address.index(after: colon)...]) else {
            throw TestEnvironmentError("malformed address in CLUSTER NODES line: \(line)")
        }
        var slots: [ClosedRange<Int>] = []
        for field in fields.dropFirst(8) where !field.hasPrefix("[") {
            let bounds = field.split(separator: "-").compactMap { Int($0) }
            if bounds.count == 2 { slots.append(bounds[0]...bounds[1]) } else if bounds.count == 1 { slots.append(bounds[0]...bounds[0]) }
        }
        let flags = Set(fields[2].split(separator: ",").map(String.init))
        return Node(
            id: fields[0], port: port, flags: flags.subtracting(["myself"]), masterID: fields[3] == "-" ? nil : fields[3],
            slots: slots)
    }
}

/// Starts a ``RedisCluster`` (off the cooperative pool; on TLS with `tls`), runs `body` with it, and stops it
/// however `body` ends.
public func withRedisCluster<T>(
    masters: Int = 3, replicasPerMaster: Int = 1, nodeTimeout: Int = 1000, tls: TestCertificates? = nil,
    _ body: (RedisCluster) async throws -> T
) async throws -> T {
    let cluster = try await offThread {
        try RedisCluster.start(masters: masters, replicasPerMaster: replicasPerMaster, nodeTimeout: nodeTimeout, tls: tls)
    }
    do {
        let result = try await body(cluster)
        _ = try? await offThread { cluster.stop() }
        return result
    } catch {
        _ = try? await offThread { cluster.stop() }
        throw error
    }
}
