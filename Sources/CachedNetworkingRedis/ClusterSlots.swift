import CachedNetworking
/// Redis Cluster's key slots, as the cluster specification defines them: `CRC16(key) mod 16384`, where CRC16 is
/// the XMODEM variant (polynomial 0x1021, initial value 0, no reflection) and `key` is replaced by its hash tag
/// when it has one.
///
/// A hash tag is the text between the first `{` and the first `}` after it, provided that text is not empty:
/// `{user1000}.following` and `{user1000}.followers` hash `user1000`; `foo{}{bar}` hashes the whole key (the
/// first braces are empty); `foo{{bar}}zap` hashes `{bar`.
enum ClusterSlots {
    /// The number of slots of a cluster.
    static let count = 16384

    /// The slot of `key` (its UTF-8 bytes, as Redis sees them).
    static func slot(of key: String) -> Int {
        slot(ofKeyBytes: key.utf8)
    }

    /// The slot of a key given as bytes.
    static func slot<Bytes: Collection<UInt8>>(ofKeyBytes key: Bytes) -> Int {
        Int(crc16(hashedPart(of: key)) & UInt16(count - 1))
    }

    /// The bytes the slot is computed from: the hash tag when there is a non-empty one, else the whole key.
    static func hashedPart<Bytes: Collection<UInt8>>(of key: Bytes) -> Bytes.SubSequence {
        if let open = key.firstIndex(of: UInt8(ascii: "{")) {
            let afterOpen = key.index(after: open)
            if let close = key[afterOpen...].firstIndex(of: UInt8(ascii: "}")), close != afterOpen {
                return key[afterOpen..<close]
            }
        }
        return key[...]
    }

    /// CRC16/XMODEM of `bytes`.
    static func crc16<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> UInt16 {
        var crc: UInt16 = 0
        for byte in bytes {
            crc = (crc << 8) ^ table[Int(UInt8(truncatingIfNeeded: crc >> 8) ^ byte)]
        }
        return crc
    }

    private static let table: [UInt16] = (0..<256).map { index in
        var crc = UInt16(index) << 8
        for _ in 0..<8 {
            crc = crc & 0x8000 != 0 ? (crc << 1) ^ 0x1021 : crc << 1
        }
        return crc
    }
}

extension RESPClusterStore {
    /// A cluster node's address: where its clients connect.
    public struct Node: Sendable, Hashable, CustomStringConvertible {
        /// Host name or IP address (IPv6 without brackets).
        public var host: String
        /// TCP port (the client port, not the cluster bus port).
        public var port: Int

        /// The node at `host:port`.
        public init(host: String, port: Int = 6379) {
            self.host = host
            self.port = port
        }

        /// `host:port`, with an IPv6 address in brackets.
        public var description: String {
            host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        }
    }
}

/// A `-MOVED` or `-ASK` error reply: the slot has moved (for good, or for this one command during a migration).
struct ClusterRedirection: Sendable, Hashable {
    enum Kind: Sendable, Hashable {
        /// The slot is served by another node: update the slot map, send the command there.
        case moved
        /// The slot is being migrated and this key is already at the target: send `ASKING`, then the command,
        /// to the target, for this command only.
        case ask
    }

    let kind: Kind
    let slot: Int
    /// The node named by the error; its host is empty when the server did not know its own address (Redis
    /// then means "the host you are connected to").
    let node: RESPClusterStore.Node

    /// Parses `MOVED <slot> <host>:<port>` or `ASK <slot> <host>:<port>`; nil for any other error text.
    init?(errorText: String) {
        let parts = errorText.split(separator: " ", omittingEmptySubsequences: true)
        guard parts.count == 3 else { return nil }
        switch parts[0] {
        case "MOVED": kind = .moved
        case "ASK": kind = .ask
        default: return nil
        }
        guard let slot = Int(parts[1]), (0..<ClusterSlots.count).contains(slot) else { return nil }
        let endpoint = parts[2]
        guard let colon = endpoint.lastIndex(of: ":"),
            let port = Int(endpoint[endpoint.index(after: colon)...]), (1...65535).contains(port)
        else { return nil }
        var host = endpoint[..<colon]
        if host.hasPrefix("[") && host.hasSuffix("]") { host = host.dropFirst().dropLast() }
        self.slot = slot
        self.node = RESPClusterStore.Node(host: String(host), port: port)
    }

    /// The node to go to, given the node that answered, whose host stands in for an unknown one: empty, or `?`
    /// (a node set to announce host names that has none), as in `CLUSTER SLOTS`.
    func target(answeredBy node: RESPClusterStore.Node) -> RESPClusterStore.Node {
        self.node.host.isEmpty || self.node.host == "?" ? RESPClusterStore.Node(host: node.host, port: self.node.port) : self.node
    }
}

/// Error replies after which the same command succeeds later without any change on the client's side.
enum ClusterTransientError: Sendable, Hashable {
    /// `TRYAGAIN`: a multi-key command on a slot being migrated, with its keys split between the nodes.
    case tryAgain
    /// `CLUSTERDOWN`: the cluster cannot serve (a master failed and no replica has been promoted yet, or the
    /// node has not joined yet).
    case clusterDown
    /// `LOADING`: the node is loading its data set after a restart.
    case loading

    init?(errorText: String) {
        if errorText.hasPrefix("TRYAGAIN") {
            self = .tryAgain
        } else if errorText.hasPrefix("CLUSTERDOWN") {
            self = .clusterDown
        } else if errorText.hasPrefix("LOADING") {
            self = .loading
        } else {
            return nil
        }
    }
}

/// Which master serves each slot, from a `CLUSTER SLOTS` reply.
struct ClusterSlotMap: Sendable {
    /// For each slot, an index into ``masters``; -1 where no node serves it.
    private var owners: [Int16]
    /// The masters serving at least one slot.
    private(set) var masters: [RESPClusterStore.Node]
    /// The replicas the reply listed (asked for the slot map when masters fail).
    private(set) var replicas: [RESPClusterStore.Node]

    /// A map that knows no node.
    init() {
        owners = Array(repeating: -1, count: ClusterSlots.count)
        masters = []
        replicas = []
    }

    /// Reads a `CLUSTER SLOTS` reply: `[start, end, [host, port, id, …], [replica host, port, id, …]…]…`.
    /// An empty or unknown host (`""`, `?`, nil) means the host of `answeredBy`, the node that answered.
    init(parsing reply: RESPReply, answeredBy: RESPClusterStore.Node) throws(CacheStoreError) {
        self.init()
        guard case .array(let ranges) = reply else {
            throw CacheStoreError(.protocolViolation, "CLUSTER SLOTS answered \(reply.typeName)")
        }
        var replicaSet: Set<RESPClusterStore.Node> = []
        for range in ranges {
            guard case .array(let fields) = range, fields.count >= 3,
                case .integer(let start) = fields[0], case .integer(let end) = fields[1],
                start >= 0, start <= end, end < ClusterSlots.count
            else {
                throw CacheStoreError(.protocolViolation, "CLUSTER SLOTS answered a malformed slot range")
            }
            let master = try Self.node(fields[2], answeredBy: answeredBy)
            let index: Int
            if let known = masters.firstIndex(of: master) {
                index = known
            } else {
                index = masters.count
                masters.append(master)
            }
            for slot in Int(start)...Int(end) { owners[slot] = Int16(index) }
            for field in fields.dropFirst(3) {
                if let replica = try? Self.node(field, answeredBy: answeredBy), replicaSet.insert(replica).inserted {
                    replicas.append(replica)
                }
            }
        }
        replicas.removeAll { masters.contains($0) }
    }

    /// The master serving `slot`, if any.
    func master(of slot: Int) -> RESPClusterStore.Node? {
        let index = owners[slot]
        return index < 0 ? nil : masters[Int(index)]
    }

    /// Whether `other` gives every slot the same master as this map (replicas aside).
    func assignsSlotsAs(_ other: ClusterSlotMap) -> Bool {
        (0..<ClusterSlots.count).allSatisfy { master(of: $0) == other.master(of: $0) }
    }

    /// How many slots have a master.
    var coveredSlots: Int { owners.reduce(0) { $0 + ($1 < 0 ? 0 : 1) } }

    /// Records that `slot` is now served by `node` (after a `MOVED`).
    mutating func assign(_ slot: Int, to node: RESPClusterStore.Node) {
        if let known = masters.firstIndex(of: node) {
            owners[slot] = Int16(known)
        } else {
            owners[slot] = Int16(masters.count)
            masters.append(node)
            replicas.removeAll { $0 == node }
        }
    }

    private static func node(_ reply: RESPReply, answeredBy: RESPClusterStore.Node) throws(CacheStoreError)
        -> RESPClusterStore.Node
    {
        guard case .array(let fields) = reply, fields.count >= 2, case .integer(let port) = fields[1],
            (1...65535).contains(port)
        else {
            throw CacheStoreError(.protocolViolation, "CLUSTER SLOTS answered a malformed node")
        }
        var host = ""
        switch fields[0] {
        case .bulk(let bytes): host = String(buffer: bytes)
        case .status(let text): host = text
        default: break
        }
        if host.isEmpty || host == "?" { host = answeredBy.host }
        return RESPClusterStore.Node(host: host, port: Int(port))
    }
}
