import RESP

/// Replication and cluster commands, as a standalone Redis master without replicas answers them: ROLE,
/// REPLICAOF NO ONE (already a master), and the cluster commands refused with Redis's error for a server whose
/// cluster support is disabled (clients tell a standalone server from a cluster node by it).
enum StandaloneCommands {
    static let clusterDisabled = "ERR This instance has cluster support disabled"

    /// ROLE: a master, at replication offset 0, with no replicas.
    static func role(_ c: inout CommandContext) {
        c.arrayHeader(3)
        c.bulk("master")
        c.integer(0)
        c.arrayHeader(0)
    }

    /// REPLICAOF (SLAVEOF) host port. `NO ONE` is OK: the server is a master. Replicating another server is
    /// refused: this server does not replicate.
    static func replicaOf(_ c: inout CommandContext) {
        if c.arguments.matches(1, "no") && c.arguments.matches(2, "one") { return c.ok() }
        guard let port = c.arguments.integer(2), (0...65535).contains(port) else {
            return c.error("ERR Invalid master port")
        }
        c.error("ERR REPLICAOF is not supported: this server does not replicate (REPLICAOF NO ONE is accepted)")
    }

    /// READONLY, READWRITE, and every CLUSTER subcommand (HELP included): for cluster nodes only.
    static func clusterOnly(_ c: inout CommandContext) {
        c.error(clusterDisabled)
    }
}
