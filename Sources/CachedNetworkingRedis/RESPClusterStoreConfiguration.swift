import CachedNetworking
extension RESPClusterStore {
    /// Where a ``RESPClusterStore`` finds its cluster and how it manages its connections.
    ///
    /// Build one from a URL with ``init(url:)`` and adjust the pool and timeouts, or set every field yourself.
    public struct Configuration: Sendable, Hashable {
        /// Nodes to ask for the slot map (`CLUSTER SLOTS`) when the store starts and whenever no known node
        /// answers. One reachable node is enough; list several so that one being down does not matter.
        public var seeds: [Node]
        /// The user to `AUTH` as; nil authenticates with the password alone (Redis's `default` user).
        public var username: String?
        /// The password to `AUTH` with (on every node); nil sends no `AUTH`.
        public var password: String?
        /// How many connections (each with its own thread) the store keeps to each master. Default 4.
        public var poolSize: Int
        /// TLS for every connection to every node (the cluster's `tls-cluster yes`, with the nodes' TLS ports
        /// announced); nil for plain TCP. A `rediss+cluster://` URL sets the defaults of ``RESPStore/TLS``: each
        /// node's certificate is verified against the system's CAs and must be for the host the node is reached
        /// at, which is the address the cluster announces (usually an IP address: give the certificates IP
        /// addresses, or set ``RESPStore/TLS/serverName`` to a name every node's certificate has). Default nil.
        public var tls: RESPStore.TLS?
        /// How long establishing a connection may take: the TCP connect and, with ``tls``, the TLS handshake, each.
        /// Default 1 second.
        public var connectTimeout: Duration
        /// How long one attempt of a command may wait: for its turn in the connection's queue, then for each read
        /// or write on the socket (see ``RESPStore/Configuration/commandTimeout``). Default 1 second.
        public var commandTimeout: Duration
        /// How long a call keeps retrying after `TRYAGAIN`, `CLUSTERDOWN`, `LOADING` or a node it cannot reach
        /// (while a failover promotes a replica), backing off between attempts. No attempt starts after this
        /// time; one under way still ends within ``connectTimeout`` and ``commandTimeout``. Redirections
        /// (`MOVED`, `ASK`) are followed at once and count against ``maxRedirections`` instead. Default 2 seconds.
        public var retryTimeout: Duration
        /// The most `MOVED` and `ASK` redirections one attempt of a call follows before the call fails with
        /// ``CacheStoreError/Kind/server``; a retry (after `TRYAGAIN`, say) starts the count again. Default 5.
        public var maxRedirections: Int
        /// The most commands a connection sends together before reading their replies. Default 64.
        public var maxPipelineDepth: Int
        /// The first delay before reconnecting to a node after a failed connection attempt; it doubles with each
        /// further failure up to ``maxReconnectDelay``. Default 50 ms.
        public var minReconnectDelay: Duration
        /// The longest delay between connection attempts to a node. Default 2 seconds.
        public var maxReconnectDelay: Duration
        /// A near cache in this process's memory, kept coherent by invalidation messages from every master (see
        /// ``RESPClusterStore`` and ``RESPStore/NearCache``); nil for none. Default nil.
        public var nearCache: RESPStore.NearCache?
        /// How long a call that finds its connection to a node idle polls for the reply on its own thread before
        /// handing over to the connection's thread (see ``RESPStore/Configuration/replyPolling``); zero turns it
        /// off. Default 50 µs.
        public var replyPolling: Duration

        /// A configuration for the cluster that `seeds` belong to, with the default pool and timeouts.
        /// - Parameters:
        ///   - seeds: one or more nodes of the cluster.
        ///   - username: the user to authenticate as, with `password`.
        ///   - password: the password to authenticate with.
        ///   - tls: TLS settings; nil for plain TCP. Default nil.
        public init(seeds: [Node], username: String? = nil, password: String? = nil, tls: RESPStore.TLS? = nil) {
            self.seeds = seeds
            self.username = username
            self.password = password
            self.tls = tls
            self.poolSize = 4
            self.connectTimeout = .seconds(1)
            self.commandTimeout = .seconds(1)
            self.retryTimeout = .seconds(2)
            self.maxRedirections = 5
            self.maxPipelineDepth = 64
            self.minReconnectDelay = .milliseconds(50)
            self.maxReconnectDelay = .seconds(2)
            self.nearCache = nil
            self.replyPolling = .microseconds(50)
        }

        /// A configuration from a URL: `redis+cluster://[[user]:password@]host[:port][,host[:port]…]`, or
        /// `rediss+cluster://` for TLS.
        ///
        /// - `redis+cluster://10.0.0.1:7000,10.0.0.2:7000,10.0.0.3:7000` — three seeds, no authentication;
        /// - `redis+cluster://:s3cret@cache-0.internal,cache-1.internal` — `AUTH s3cret` on every node, port 6379;
        /// - `redis+cluster://app:s3cret@[::1]:7000` — `AUTH app s3cret`, an IPv6 seed;
        /// - `rediss+cluster://app:s3cret@10.0.0.1:7000,10.0.0.2:7000` — over TLS: ``tls`` is set to the defaults
        ///   of ``RESPStore/TLS``.
        ///
        /// User and password are written and percent-encoded as in a `redis://` URL (see
        /// ``RESPStore/Configuration/init(url:)``). A path may only be empty or `/0`: a cluster has database 0
        /// only.
        ///
        /// - Parameter url: the URL.
        /// - Throws: ``RESPStore/ConfigurationError`` naming what is wrong.
        public init(url: String) throws(RESPStore.ConfigurationError) {
            let shown = RESPStore.Configuration.redacted(url).debugDescription
            guard let schemeEnd = url.range(of: "://") else {
                throw RESPStore.ConfigurationError("\(shown) is not a redis+cluster:// URL")
            }
            let scheme = url[..<schemeEnd.lowerBound].lowercased()
            switch scheme {
            case "redis+cluster", "rediss+cluster": break
            default:
                throw RESPStore.ConfigurationError(
                    "unsupported scheme \(scheme.debugDescription) in \(shown): use redis+cluster:// or rediss+cluster:// (TLS)")
            }
            var authority = url[schemeEnd.upperBound...]
            if let slash = authority.firstIndex(of: "/") {
                let path = authority[authority.index(after: slash)...]
                guard path.isEmpty || path == "0" else {
                    throw RESPStore.ConfigurationError(
                        "\(shown): a cluster has database 0 only; leave the path out or write /0")
                }
                authority = authority[..<slash]
            }
            var userInfo = ""
            if let at = authority.lastIndex(of: "@") {
                userInfo = String(authority[...at])
                authority = authority[authority.index(after: at)...]
            }
            // Each seed is read as the host and port of a redis:// URL, with the same user-info, so that every
            // rule of that format (brackets, default port, percent-encoding) applies unchanged.
            var seeds: [Node] = []
            var username: String?
            var password: String?
            for seed in authority.split(separator: ",", omittingEmptySubsequences: false) {
                guard !seed.isEmpty else { throw RESPStore.ConfigurationError("\(shown) has an empty seed") }
                let single: RESPStore.Configuration
                do {
                    single = try RESPStore.Configuration(url: "redis://\(userInfo)\(seed)")
                } catch {
                    throw RESPStore.ConfigurationError("\(shown): seed \(String(seed).debugDescription): \(error.message)")
                }
                username = single.username
                password = single.password
                seeds.append(Node(host: single.host, port: single.port))
            }
            self.init(
                seeds: seeds, username: username, password: password,
                tls: scheme == "rediss+cluster" ? RESPStore.TLS() : nil)
        }

        /// The configuration of the connection pool to `node`, with `poolSize` connections.
        func nodeConfiguration(_ node: Node, poolSize: Int) -> RESPStore.Configuration {
            var configuration = RESPStore.Configuration(
                host: node.host, port: node.port, username: username, password: password, tls: tls)
            configuration.poolSize = poolSize
            configuration.connectTimeout = connectTimeout
            configuration.commandTimeout = commandTimeout
            configuration.maxPipelineDepth = maxPipelineDepth
            configuration.minReconnectDelay = minReconnectDelay
            configuration.maxReconnectDelay = maxReconnectDelay
            configuration.replyPolling = replyPolling
            return configuration
        }
    }
}

extension RESPClusterStore.Configuration: CustomStringConvertible {
    /// The seeds as a URL with the password masked, the TLS settings, and the pool's settings (safe to log).
    public var description: String {
        var userInfo = ""
        if password != nil { userInfo = "\(username ?? ""):***@" }
        let seedList = seeds.map(\.description).joined(separator: ",")
        return "\(tls == nil ? "redis" : "rediss")+cluster://\(userInfo)\(seedList) ("
            + (tls.map { "\($0), " } ?? "") + "pool \(poolSize) per master, connect timeout \(connectTimeout), "
            + "command timeout \(commandTimeout), retry timeout \(retryTimeout), redirections \(maxRedirections), "
            + "pipeline depth \(maxPipelineDepth), reconnect delay \(minReconnectDelay)–\(maxReconnectDelay)"
            + (nearCache.map { ", \($0)" } ?? "") + ")"
    }
}
