import CachedTLS
import Logging
import NIOCore

/// The settings of a `cached-server`, one typed field per supported redis.conf directive.
///
/// Every field starts at the value Redis 7.0 uses by default (except where noted),
/// so `ServerConfiguration()` behaves like a stock `redis-server` with no save points.
/// Fields are usually filled from a config file and the command line with
/// ``load(configFile:overrides:)``, and changed at run time through
/// `CONFIG SET` with ``configSet(_:)``.
public struct ServerConfiguration: Sendable, Equatable {
    /// TCP port to listen on (`port`); 0 disables the TCP listener.
    public var port: Int = 6379

    /// Addresses to listen on (`bind`). An address prefixed with `-` is optional:
    /// failing to bind it is not an error. Empty means no TCP listener.
    public var bind: [String] = ["127.0.0.1"]

    /// TCP port for TLS connections (`tls-port`), on the same `bind` addresses; 0 for none.
    public var tlsPort: Int = 0

    /// The server's certificate chain and private key (PEM), and the key's password if it is encrypted
    /// (`tls-cert-file`, `tls-key-file`, `tls-key-file-pass`).
    public var tlsCertFile = ""
    public var tlsKeyFile = ""
    public var tlsKeyFilePass = ""

    /// The certificate and key this server presents when it connects to another server as a client
    /// (`tls-client-cert-file`, `tls-client-key-file`, `tls-client-key-file-pass`); Redis uses them for
    /// replication and the cluster bus, which this server does not have: accepted and checked, not used.
    public var tlsClientCertFile = ""
    public var tlsClientKeyFile = ""
    public var tlsClientKeyFilePass = ""

    /// Trusted CAs for client certificates: a PEM file, a hashed directory, or both (`tls-ca-cert-file`,
    /// `tls-ca-cert-dir`).
    public var tlsCaCertFile = ""
    public var tlsCaCertDir = ""

    /// Whether TLS clients must present a certificate signed by a trusted CA (`tls-auth-clients`): `yes`
    /// requires one, `optional` checks one if given, `no` asks for none.
    public var tlsAuthClients: TLSConfiguration.PeerVerification = .yes

    /// The TLS versions allowed (`tls-protocols`, e.g. `"TLSv1.2 TLSv1.3"`); empty for TLS 1.2 and 1.3.
    public var tlsProtocols = ""

    /// OpenSSL's cipher list for TLS 1.2 and below, and its TLS 1.3 cipher suites (`tls-ciphers`,
    /// `tls-ciphersuites`); empty for OpenSSL's defaults.
    public var tlsCiphers = ""
    public var tlsCiphersuites = ""

    /// Whether the server's cipher order wins over the client's (`tls-prefer-server-ciphers`).
    public var tlsPreferServerCiphers = false

    /// TLS session resumption (`tls-session-caching`), with the most sessions kept and for how many seconds
    /// (`tls-session-cache-size`, `tls-session-cache-timeout`).
    public var tlsSessionCaching = true
    public var tlsSessionCacheSize = 20480
    public var tlsSessionCacheTimeout = 300

    /// Diffie-Hellman parameters (PEM) for the DHE ciphers (`tls-dh-params-file`); empty to let OpenSSL choose.
    public var tlsDhParamsFile = ""

    /// Redis's TLS for replication and the cluster bus (`tls-replication`, `tls-cluster`): this server has
    /// neither; as in Redis, either one set makes the server load its TLS settings.
    public var tlsReplication = false
    public var tlsCluster = false

    /// Whether the server uses its TLS settings (and must be able to load them): a TLS port, or Redis's other
    /// uses of TLS.
    package var usesTLS: Bool { tlsPort != 0 || tlsReplication || tlsCluster }

    /// Number of logical databases, selectable with `SELECT` (`databases`).
    public var databases: Int = 16

    /// Frequency of background tasks such as expiring keys, in hertz (`hz`), 1...500.
    public var hz: Int = 10

    /// How much to log (`loglevel`).
    public var logLevel: LogLevel = .notice

    /// Maximum number of connected clients (`maxclients`).
    public var maxClients: Int = 10_000

    /// Seconds a graceful shutdown waits for clients to take the replies already written to them before it
    /// closes them anyway (`shutdown-timeout`). Redis uses this directive to wait for lagging replicas; this
    /// server has none, so it bounds the wait for lagging clients instead.
    public var shutdownTimeout: Int = 10

    /// Seconds a client may stay idle before it is disconnected; 0 disables (`timeout`).
    public var timeout: Int = 0

    /// Interval of TCP keepalive probes in seconds; 0 disables (`tcp-keepalive`).
    public var tcpKeepalive: Int = 300

    /// Length of the queue of connections waiting to be accepted (`tcp-backlog`).
    public var tcpBacklog: Int = 511

    /// Largest bulk string a client may send, in bytes (`proto-max-bulk-len`).
    public var protoMaxBulkLength: Int = 512 * 1024 * 1024

    /// Longest inline command, and longest `*N` / `$N` header line, in bytes (`proto-inline-max-size`;
    /// not a Redis directive: Redis builds this limit in at 64 KiB).
    public var protoInlineMaxSize: Int = 64 * 1024

    /// Largest amount of unprocessed input a client may accumulate, in bytes
    /// (`client-query-buffer-limit`).
    public var clientQueryBufferLimit: Int = 1024 * 1024 * 1024

    /// How much unread output a client may have before it is disconnected (`client-output-buffer-limit`).
    /// Unlike Redis (no limit for normal clients), normal clients are limited by default, so that a client
    /// that sends but never reads cannot exhaust memory.
    public var clientOutputBufferLimits = OutputBufferLimits()

    /// Commands renamed or disabled (`rename-command name new-name`; an empty new name disables).
    public var renamedCommands: [RenamedCommand] = []

    /// One `rename-command` line.
    public struct RenamedCommand: Sendable, Equatable {
        /// The command's lowercase name.
        public var name: String
        /// Its new lowercase name; empty to disable it.
        public var newName: String

        public init(name: String, newName: String) {
            self.name = name
            self.newName = newName
        }
    }

    /// Memory limit for the data set in bytes; 0 means no limit (`maxmemory`).
    public var maxMemory: UInt64 = 0

    /// What to do when `maxMemory` is reached (`maxmemory-policy`).
    ///
    /// Unlike Redis, whose default is `noeviction`, the default is `allkeys-sieve`: a cache should make room.
    public var maxMemoryPolicy: MaxMemoryPolicy = .allKeysSieve

    /// Number of keys sampled per eviction by the approximated LRU/LFU/TTL
    /// policies (`maxmemory-samples`).
    public var maxMemorySamples: Int = 5

    /// The most keys the client-side caching table remembers for default-mode tracking clients
    /// (`tracking-table-max-keys`); past it, keys are invalidated as if modified. 0: no limit.
    public var trackingTableMaxKeys: Int = 1_000_000

    /// The keyspace notifications published on pub/sub (`notify-keyspace-events`); none by default.
    public var notifyKeyspaceEvents: KeyspaceEventFlags = []

    /// Commands that run for at least this many microseconds are logged in SLOWLOG; negative turns the log
    /// off, 0 logs every command (`slowlog-log-slower-than`).
    public var slowlogLogSlowerThan: Int = 10_000

    /// The most entries SLOWLOG keeps; older ones are dropped (`slowlog-max-len`).
    public var slowlogMaxLen: Int = 128

    /// The most entries ACL LOG keeps; older ones are dropped when a new one comes (`acllog-max-len`).
    public var acllogMaxLen: Int = 128

    /// Whether each command's latencies are counted for INFO latencystats and LATENCY HISTOGRAM
    /// (`latency-tracking`).
    public var latencyTracking = true

    /// The percentiles INFO latencystats reports (`latency-tracking-info-percentiles`).
    public var latencyTrackingInfoPercentiles: [Double] = [50, 99, 99.9]

    /// Commands that run for at least this many milliseconds are LATENCY samples; 0 turns the latency
    /// monitor off (`latency-monitor-threshold`).
    public var latencyMonitorThreshold: Int = 0

    /// Password clients must give with `AUTH`; empty means none (`requirepass`).
    public var requirePass: String = ""

    /// The ACL file: users are read from it at startup and by ACL LOAD, and written by ACL SAVE (`aclfile`);
    /// empty for none.
    public var aclFile: String = ""

    /// Users declared in the configuration (`user <name> <rule> ...`, one line each), applied in order.
    public var users: [[String]] = []

    /// The channels a new user may use: none (`resetchannels`, Redis 7.0's default) or all
    /// (`allchannels`) (`acl-pubsub-default`).
    public var aclPubsubDefault: AclPubsubDefault = .resetchannels

    /// `acl-pubsub-default`'s values.
    public enum AclPubsubDefault: String, Sendable, CaseIterable {
        case allchannels
        case resetchannels
    }

    /// Whether CONFIG SET may change the protected configs (`dir`, `dbfilename`): never, always, or from
    /// loopback and Unix socket connections only (`enable-protected-configs`).
    public var enableProtectedConfigs: ProtectedConfigs = .no

    /// `enable-protected-configs`' values.
    public enum ProtectedConfigs: String, Sendable, CaseIterable {
        case no
        case yes
        case local
    }

    /// Whether a server with no password accepts only loopback and Unix socket
    /// clients (`protected-mode`).
    public var protectedMode: Bool = true

    /// Microseconds the snapshot load at start sleeps after each key (`key-load-delay`, as in Redis, where it
    /// serves tests that must catch a load in progress); a negative -n sleeps 1 µs after every n-th key; 0 (the
    /// default) for none.
    public var keyLoadDelay: Int = 0

    /// How long an event loop watches its client connections for the next request after a read before it may
    /// sleep, in microseconds (`busy-poll`), 0...100000; 0 turns it off. See `BusyPoll`.
    public var busyPoll: Int = 20

    /// Whether connections go through the server's own I/O fast path (`io-fast-path`, the default): its own
    /// accepting threads, replies sent straight to the socket, busy polling. `no` runs plain SwiftNIO instead
    /// (and `busy-poll` has no effect). See `ConnectionIO`.
    public var ioFastPath: Bool = true

    /// Number of event-loop threads (`io-threads`), 1...128.
    ///
    /// The default is ``defaultIOThreads(cores:)`` of the machine's cores.
    public var ioThreads: Int = ServerConfiguration.defaultIOThreads(cores: System.coreCount)

    /// The default number of event loops on a machine with `cores` CPU cores, after Redis's advice for its
    /// I/O threads: one on up to two cores, since the clients' traffic needs the kernel's network stack and
    /// usually other processes on the same machine, and a second loop would compete with them for the other
    /// core (measured on two cores: a second loop raises pipelined throughput but makes the tail latency of
    /// unpipelined clients worse than one loop's); from three cores, three quarters of them (at least two),
    /// leaving the rest to the network stack; at most 128.
    public static func defaultIOThreads(cores: Int) -> Int {
        cores <= 2 ? 1 : min(max(2, cores * 3 / 4), 128)
    }

    /// When to write a snapshot in the background (`save <seconds> <changes>`...): after
    /// `seconds` since the last save if at least `changes` keys changed. Empty (the default)
    /// writes none on a schedule; `SAVE`, `BGSAVE` and `SHUTDOWN SAVE` still do.
    public var savePoints: [SavePoint] = []

    /// Whether write commands (and PING) are refused with `MISCONF` while the last background save failed and
    /// save points are set (`stop-writes-on-bgsave-error`, on by default as in Redis): clients learn that their
    /// writes would not survive a restart instead of losing them silently. A successful save lifts it.
    public var stopWritesOnBackgroundSaveError: Bool = true

    /// Whether the append-only file is on (`appendonly`). Accepted and reported
    /// for compatibility; this server never writes one.
    public var appendOnly: Bool = false

    /// Directory of the snapshot file (`dir`). Reported by `CONFIG GET dir` as an
    /// absolute path.
    public var directory: String = "./"

    /// File name of the snapshot in ``directory`` (`dbfilename`). Not Redis's RDB
    /// format, hence not Redis's default name `dump.rdb`.
    public var dbFilename: String = "cached.snapshot"

    /// What to do at startup when the snapshot file is damaged, truncated, of an unknown
    /// format version or unusable (`snapshot-load-corrupt`; not a Redis directive).
    public var snapshotLoadCorrupt: SnapshotLoadCorrupt = .fail

    /// File to write the process id to; empty for none (`pidfile`).
    public var pidFile: String = ""

    /// The config file the server started with, as an absolute path; empty when there was none (INFO's
    /// `config_file`). Not a directive.
    public var configFile: String = ""

    /// File to append the log to; empty means standard error (`logfile`).
    public var logFile: String = ""

    /// Path of a Unix domain socket to listen on; empty for none (`unixsocket`).
    public var unixSocket: String = ""

    /// Permissions of the Unix socket, for example `0o770`; 0 leaves the
    /// default (`unixsocketperm`).
    public var unixSocketPermissions: Int = 0

    /// A configuration with every directive at its default.
    public init() {}

    /// What CONFIG GET shows for a password that is set.
    package static let hiddenPassword = "(hidden)"

    /// An output buffer limit: disconnect past `hard` bytes, or past `soft` bytes for `softSeconds` seconds
    /// (0 disables either).
    public struct OutputBufferLimit: Sendable, Equatable {
        public var hard: Int
        public var soft: Int
        public var softSeconds: Int

        public init(hard: Int, soft: Int, softSeconds: Int) {
            self.hard = hard
            self.soft = soft
            self.softSeconds = softSeconds
        }
    }

    /// Output buffer limits per client class.
    public struct OutputBufferLimits: Sendable, Equatable {
        /// No limit, as in Redis 7.0: any value that can be written (up to `proto-max-bulk-len`) can be read.
        public var normal = OutputBufferLimit(hard: 0, soft: 0, softSeconds: 0)
        public var replica = OutputBufferLimit(hard: 256 * 1024 * 1024, soft: 64 * 1024 * 1024, softSeconds: 60)
        public var pubsub = OutputBufferLimit(hard: 32 * 1024 * 1024, soft: 8 * 1024 * 1024, softSeconds: 60)

        public init() {}
    }

    /// Levels of the `loglevel` directive, from most to least verbose.
    public enum LogLevel: String, Sendable, CaseIterable {
        /// Everything, including detail useful only when developing.
        case debug
        /// Much rarely useful information, but not as noisy as `debug`.
        case verbose
        /// Moderately verbose; what you probably want in production.
        case notice
        /// Only very important or critical messages.
        case warning
        /// Nothing at all.
        case nothing

        /// The least severe swift-log level logged at this Redis level, or `nil`
        /// for ``nothing``: debug → trace, verbose → debug (and info),
        /// notice → notice, warning → warning.
        public var loggerLevel: Logger.Level? {
            switch self {
            case .debug: .trace
            case .verbose: .debug
            case .notice: .notice
            case .warning: .warning
            case .nothing: nil
            }
        }
    }

    /// Policies of the `maxmemory-policy` directive, named as in Redis.
    public enum MaxMemoryPolicy: String, Sendable, CaseIterable {
        /// Evict keys with an expiry, least recently used first.
        case volatileLRU = "volatile-lru"
        /// Evict keys with an expiry, least frequently used first.
        case volatileLFU = "volatile-lfu"
        /// Evict random keys that have an expiry.
        case volatileRandom = "volatile-random"
        /// Evict keys with an expiry, nearest expiry first.
        case volatileTTL = "volatile-ttl"
        /// Evict any key, least recently used first.
        case allKeysLRU = "allkeys-lru"
        /// Evict any key, least frequently used first.
        case allKeysLFU = "allkeys-lfu"
        /// Evict random keys.
        case allKeysRandom = "allkeys-random"
        /// Evict nothing; refuse writes that need memory.
        case noEviction = "noeviction"
        /// Evict any key with a SIEVE-style hand that spares keys read since it last passed (not in Redis).
        case allKeysSieve = "allkeys-sieve"
    }

    /// Values of the `snapshot-load-corrupt` directive.
    public enum SnapshotLoadCorrupt: String, Sendable, CaseIterable {
        /// Log the problem and exit with a non-zero status, leaving the file as it is.
        case fail
        /// Keep the keys of the intact blocks before the damage, move the file aside to
        /// `<dbfilename>.corrupt`, log a warning and start.
        case skip
    }

    /// One `save <seconds> <changes>` point.
    public struct SavePoint: Sendable, Equatable {
        /// Seconds since the last snapshot, at least 1.
        public var seconds: Int
        /// Number of changes in that time, at least 0.
        public var changes: Int

        /// A save point after `seconds` seconds if at least `changes` keys changed.
        public init(seconds: Int, changes: Int) {
            self.seconds = seconds
            self.changes = changes
        }
    }
}

extension ServerConfiguration {
    /// A percentile as Redis writes it in CONFIG GET and INFO latencystats: `%f` without trailing zeros
    /// (50, 99.9, 99.99).
    package static func formatPercentile(_ value: Double) -> String {
        var text = String(format: "%f", value)
        if text.contains(".") {
            while text.hasSuffix("0") { text.removeLast() }
            if text.hasSuffix(".") { text.removeLast() }
        }
        return text
    }
}
