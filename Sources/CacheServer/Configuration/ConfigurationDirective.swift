import Glibc

/// When a directive is being applied, which changes what is allowed.
package enum ConfigurationApplyMode: Sendable, Equatable {
    /// While reading the config file and command line. Every directive may be set,
    /// and repeated `save` lines add save points, as in redis-server.
    case startup
    /// Through `CONFIG SET` on a running server. Only ``ConfigurationDirective/Mutability/runtime``
    /// directives may be set, and `save` replaces the save points.
    case runtime
}

/// Why a directive could not be applied. Each case renders with redis-server 7.0's
/// wording, both for config files (``configFileReason``) and for `CONFIG SET` (``configSetReply``).
package enum ConfigurationDirectiveError: Error, Equatable, Sendable {
    /// No directive has this name (as given).
    case unknownDirective(String)
    /// A directive taking one value was given zero or several.
    case wrongNumberOfArguments(directive: String)
    /// The value is not acceptable; `reason` is Redis's explanation.
    case invalidValue(directive: String, reason: String)
    /// `CONFIG SET` of a directive fixed at startup; `directive` is the name as given.
    case notChangeableAtRuntime(directive: String, reason: String)
    /// `CONFIG SET` naming one directive twice; `directive` is the second name as given.
    case duplicate(directive: String)

    /// The last line of redis-server's fatal config error for this problem,
    /// such as `argument must be a memory value`.
    package var configFileReason: String {
        switch self {
        case .unknownDirective(let name):
            "Bad directive or wrong number of arguments: '\(name)' is not a known directive"
        case .wrongNumberOfArguments:
            "wrong number of arguments"
        case .invalidValue(_, let reason), .notChangeableAtRuntime(_, let reason):
            reason
        case .duplicate:
            "duplicate parameter"
        }
    }

    /// The error reply to `CONFIG SET`, without the leading `-`, for example
    /// `ERR CONFIG SET failed (possibly related to argument 'maxmemory') - argument must be a memory value`.
    package var configSetReply: String {
        switch self {
        case .unknownDirective(let name):
            "ERR Unknown option or number of arguments for CONFIG SET - '\(name)'"
        case .wrongNumberOfArguments(let name):
            "ERR CONFIG SET failed (possibly related to argument '\(name)') - wrong number of arguments"
        case .invalidValue(let name, let reason), .notChangeableAtRuntime(let name, let reason):
            "ERR CONFIG SET failed (possibly related to argument '\(name)') - \(reason)"
        case .duplicate(let name):
            "ERR CONFIG SET failed (possibly related to argument '\(name)') - duplicate parameter"
        }
    }
}

/// One entry of the directive table: a redis.conf directive this server understands.
package struct ConfigurationDirective: Sendable {
    /// Whether `CONFIG SET` may change a directive, and if not, why.
    package enum Mutability: Sendable, Equatable {
        /// `CONFIG SET` may change it.
        case runtime
        /// Fixed at startup (Redis's immutable configs).
        case startupOnly
        /// Fixed at startup because changing it at run time would be a security risk
        /// (Redis's protected configs, with `enable-protected-configs no`).
        case protected
    }

    /// How many arguments the directive takes.
    package enum Arity: Sendable, Equatable {
        /// Exactly one.
        case single
        /// Any number; `CONFIG SET` splits its value at spaces.
        case list
    }

    /// The canonical, lowercase name.
    package let name: String
    /// Other names that refer to the same directive.
    package let aliases: [String]
    /// Whether `CONFIG SET` may change it.
    package let mutability: Mutability
    /// How many arguments it takes.
    package let arity: Arity
    /// Whether CONFIG GET and CONFIG SET know it: false for a config-file-only line that Redis does not keep
    /// as a parameter either (`rename-command`).
    package private(set) var isParameter = true
    /// Whether a `CONFIG GET` pattern leaves it out (it is got by its name only), as Redis's hidden configs.
    package private(set) var isHidden = false
    let assign: @Sendable (inout ServerConfiguration, [String], ConfigurationApplyMode) throws(InvalidValue) -> Void
    let format: @Sendable (ServerConfiguration) -> String

    /// A directive reading its arguments with `assign` and rendered for `CONFIG GET` with `format`.
    init(
        _ name: String,
        aliases: [String] = [],
        _ mutability: Mutability,
        arity: Arity = .single,
        assign: @escaping @Sendable (inout ServerConfiguration, [String], ConfigurationApplyMode) throws(InvalidValue) -> Void,
        format: @escaping @Sendable (ServerConfiguration) -> String
    ) {
        self.name = name
        self.aliases = aliases
        self.mutability = mutability
        self.arity = arity
        self.assign = assign
        self.format = format
    }

    /// The directive as one that only config files and flags use (see ``isParameter``).
    func fileOnly() -> Self {
        var copy = self
        copy.isParameter = false
        return copy
    }

    /// The directive as one that `CONFIG GET` patterns leave out (see ``isHidden``).
    func hidden() -> Self {
        var copy = self
        copy.isHidden = true
        return copy
    }

    /// Sets this directive in `configuration` from its arguments.
    ///
    /// `mode` is not checked against ``mutability`` here; ``ServerConfiguration/configSet(_:)`` does that.
    package func apply(
        _ arguments: [String], to configuration: inout ServerConfiguration, mode: ConfigurationApplyMode
    ) throws(ConfigurationDirectiveError) {
        if arity == .single && arguments.count != 1 {
            throw .wrongNumberOfArguments(directive: name)
        }
        // A list given as one quoted argument (`--save "900 1"`, `client-output-buffer-limit "normal 0 0 0"`)
        // is split at spaces, as redis-server does for its multi-argument directives.
        var arguments = arguments
        if arity == .list && arguments.count == 1 && arguments[0].contains(" ") {
            arguments = arguments[0].split(separator: " ").map(String.init)
        }
        do {
            try assign(&configuration, arguments, mode)
        } catch {
            throw .invalidValue(directive: name, reason: error.reason)
        }
    }

    /// The value `CONFIG GET` reports for this directive, exactly as redis-server 7.0 renders it.
    package func render(_ configuration: ServerConfiguration) -> String {
        format(configuration)
    }

    /// An unacceptable argument, with Redis's explanation.
    struct InvalidValue: Error {
        let reason: String
    }
}

// MARK: - Builders for the common kinds of directive

extension ConfigurationDirective {
    typealias Field<Value> = WritableKeyPath<ServerConfiguration, Value> & Sendable

    /// A decimal integer directive bounded to `range`, like Redis's int and long configs.
    static func integer(
        _ name: String, _ mutability: Mutability, _ field: Field<Int>, in range: ClosedRange<Int>,
        adjust: @escaping @Sendable (Int) -> Int = { $0 }
    ) -> Self {
        Self(name, mutability) { (configuration, arguments, _) throws(InvalidValue) in
            guard let value = ConfigurationValues.integer(arguments[0]) else {
                throw InvalidValue(reason: "argument couldn't be parsed into an integer")
            }
            guard value >= Int64(range.lowerBound), value <= Int64(range.upperBound) else {
                throw InvalidValue(
                    reason: "argument must be between \(range.lowerBound) and \(range.upperBound) inclusive")
            }
            configuration[keyPath: field] = adjust(Int(value))
        } format: { String($0[keyPath: field]) }
    }

    /// A memory amount directive stored as a signed count, bounded to `range`.
    static func memory(
        _ name: String, _ mutability: Mutability, _ field: Field<Int>, in range: ClosedRange<Int>
    ) -> Self {
        Self(name, mutability) { (configuration, arguments, _) throws(InvalidValue) in
            guard let value = ConfigurationValues.memory(arguments[0]) else {
                throw InvalidValue(reason: "argument must be a memory value")
            }
            guard value >= UInt64(range.lowerBound), value <= UInt64(range.upperBound) else {
                throw InvalidValue(
                    reason: "argument must be between \(range.lowerBound) and \(range.upperBound) inclusive")
            }
            configuration[keyPath: field] = Int(value)
        } format: { String($0[keyPath: field]) }
    }

    /// A `yes`/`no` directive.
    static func boolean(_ name: String, _ mutability: Mutability, _ field: Field<Bool>) -> Self {
        Self(name, mutability) { (configuration, arguments, _) throws(InvalidValue) in
            guard let value = ConfigurationValues.boolean(arguments[0]) else {
                throw InvalidValue(reason: "argument must be 'yes' or 'no'")
            }
            configuration[keyPath: field] = value
        } format: { $0[keyPath: field] ? "yes" : "no" }
    }

    /// A directive whose value is one of the raw values of `Value`, in any case.
    static func enumeration<Value: RawRepresentable & CaseIterable & Sendable>(
        _ name: String, _ mutability: Mutability, _ field: Field<Value>
    ) -> Self where Value.RawValue == String {
        Self(name, mutability) { (configuration, arguments, _) throws(InvalidValue) in
            guard let value = Value(rawValue: arguments[0].lowercased()) else {
                let names = Value.allCases.map(\.rawValue).joined(separator: ", ")
                throw InvalidValue(reason: "argument(s) must be one of the following: \(names)")
            }
            configuration[keyPath: field] = value
        } format: { $0[keyPath: field].rawValue }
    }

    /// A free-form string directive.
    static func string(
        _ name: String, _ mutability: Mutability, _ field: Field<String>,
        validate: @escaping @Sendable (String) -> String? = { _ in nil }
    ) -> Self {
        Self(name, mutability) { (configuration, arguments, _) throws(InvalidValue) in
            if let problem = validate(arguments[0]) {
                throw InvalidValue(reason: problem)
            }
            configuration[keyPath: field] = arguments[0]
        } format: { $0[keyPath: field] }
    }
}

// MARK: - The table

extension ConfigurationDirective {
    /// Every directive this server understands, in the order `CONFIG GET *` lists them.
    ///
    /// Mutability, bounds, error wording and rendering follow redis-server 7.0.
    package static let all: [ConfigurationDirective] = [
        .integer("port", .runtime, \.port, in: 0...65535),
        bindDirective,
        .integer("databases", .startupOnly, \.databases, in: 1...Int(Int32.max)),
        // Redis accepts any non-negative hz and then clamps it to 1...500.
        .integer("hz", .runtime, \.hz, in: 0...Int(Int32.max)) { min(max($0, 1), 500) },
        .enumeration("loglevel", .runtime, \.logLevel),
        .integer("maxclients", .runtime, \.maxClients, in: 1...Int(UInt32.max)),
        .integer("timeout", .runtime, \.timeout, in: 0...Int(Int32.max)),
        .integer("shutdown-timeout", .runtime, \.shutdownTimeout, in: 0...Int(Int32.max)),
        .integer("tcp-keepalive", .runtime, \.tcpKeepalive, in: 0...Int(Int32.max)),
        .integer("tcp-backlog", .startupOnly, \.tcpBacklog, in: 0...Int(Int32.max)),
        .memory("proto-max-bulk-len", .runtime, \.protoMaxBulkLength, in: (1024 * 1024)...Int.max),
        .memory("client-query-buffer-limit", .runtime, \.clientQueryBufferLimit, in: (1024 * 1024)...Int.max),
        // Not a Redis directive: Redis fixes this limit at 64 KiB when it is built.
        .memory("proto-inline-max-size", .runtime, \.protoInlineMaxSize, in: 1024...(512 * 1024 * 1024)),
        maxMemoryDirective,
        .enumeration("maxmemory-policy", .runtime, \.maxMemoryPolicy),
        .integer("maxmemory-samples", .runtime, \.maxMemorySamples, in: 1...Int(Int32.max)),
        .integer("tracking-table-max-keys", .runtime, \.trackingTableMaxKeys, in: 0...Int.max),
        notifyKeyspaceEventsDirective,
        .integer("slowlog-log-slower-than", .runtime, \.slowlogLogSlowerThan, in: -1...Int.max),
        .integer("slowlog-max-len", .runtime, \.slowlogMaxLen, in: 0...Int.max),
        .integer("acllog-max-len", .runtime, \.acllogMaxLen, in: 0...Int.max),
        .integer("latency-monitor-threshold", .runtime, \.latencyMonitorThreshold, in: 0...Int.max),
        .boolean("latency-tracking", .runtime, \.latencyTracking),
        latencyPercentilesDirective,
        requirePassDirective,
        .string("aclfile", .startupOnly, \.aclFile),
        userDirective.fileOnly(),
        .enumeration("acl-pubsub-default", .runtime, \.aclPubsubDefault),
        protectedConfigsDirective,
        clientOutputBufferLimitDirective,
        renameCommandDirective.fileOnly(),
        .boolean("protected-mode", .runtime, \.protectedMode),
        .integer("io-threads", .startupOnly, \.ioThreads, in: 1...128),
        // Not a Redis directive: Redis's event loop sleeps as soon as it has nothing to do.
        .integer("busy-poll", .runtime, \.busyPoll, in: 0...100_000),
        // Not a Redis directive: the server's own connection I/O, or plain SwiftNIO (see ConnectionIO).
        .boolean("io-fast-path", .startupOnly, \.ioFastPath),
        saveDirective,
        // Hidden in Redis too: it slows the snapshot load down for tests.
        .integer("key-load-delay", .runtime, \.keyLoadDelay, in: Int(Int32.min)...Int(Int32.max)).hidden(),
        .boolean("stop-writes-on-bgsave-error", .runtime, \.stopWritesOnBackgroundSaveError),
        .boolean("appendonly", .runtime, \.appendOnly),
        directoryDirective,
        .string("dbfilename", .protected, \.dbFilename) { name in
            name.contains("/") ? "dbfilename can't be a path, just a filename" : nil
        },
        // Not a Redis directive: Redis refuses to start on a damaged RDB file, with no option.
        .enumeration("snapshot-load-corrupt", .startupOnly, \.snapshotLoadCorrupt),
        .string("pidfile", .startupOnly, \.pidFile),
        .string("logfile", .startupOnly, \.logFile),
        daemonizeDirective,
        .string("unixsocket", .startupOnly, \.unixSocket),
        unixSocketPermissionsDirective,
        .integer("tls-port", .runtime, \.tlsPort, in: 0...65535),
        .string("tls-cert-file", .runtime, \.tlsCertFile),
        .string("tls-key-file", .runtime, \.tlsKeyFile),
        secret("tls-key-file-pass", \.tlsKeyFilePass),
        .string("tls-client-cert-file", .runtime, \.tlsClientCertFile),
        .string("tls-client-key-file", .runtime, \.tlsClientKeyFile),
        secret("tls-client-key-file-pass", \.tlsClientKeyFilePass),
        .string("tls-ca-cert-file", .runtime, \.tlsCaCertFile),
        .string("tls-ca-cert-dir", .runtime, \.tlsCaCertDir),
        .enumeration("tls-auth-clients", .runtime, \.tlsAuthClients),
        .string("tls-protocols", .runtime, \.tlsProtocols),
        .string("tls-ciphers", .runtime, \.tlsCiphers),
        .string("tls-ciphersuites", .runtime, \.tlsCiphersuites),
        .boolean("tls-prefer-server-ciphers", .runtime, \.tlsPreferServerCiphers),
        .boolean("tls-session-caching", .runtime, \.tlsSessionCaching),
        .integer("tls-session-cache-size", .runtime, \.tlsSessionCacheSize, in: 0...Int(Int32.max)),
        .integer("tls-session-cache-timeout", .runtime, \.tlsSessionCacheTimeout, in: 0...Int(Int32.max)),
        .string("tls-dh-params-file", .runtime, \.tlsDhParamsFile),
        .boolean("tls-replication", .runtime, \.tlsReplication),
        .boolean("tls-cluster", .runtime, \.tlsCluster),
    ]

    /// The directives whose change makes the server load its TLS settings again (Redis's `applyTlsCfg`): every
    /// `tls-*` directive but `tls-port`.
    package static let tlsSettings: Set<String> = Set(
        all.map(\.name).filter { $0.hasPrefix("tls-") && $0 != "tls-port" })

    /// A password directive: CONFIG GET shows a fixed mask when it is set, never the password.
    static func secret(_ name: String, _ field: Field<String>) -> Self {
        Self(name, .runtime) { (configuration, arguments, _) throws(InvalidValue) in
            configuration[keyPath: field] = arguments[0]
        } format: { $0[keyPath: field].isEmpty ? "" : ServerConfiguration.hiddenPassword }
    }

    /// Redis refuses more than this many `bind` addresses.
    static let maximumBindAddresses = 16

    static let bindDirective = Self("bind", .runtime, arity: .list) { (configuration, arguments, _) throws(InvalidValue) in
        guard arguments.count <= maximumBindAddresses else {
            throw InvalidValue(reason: "Too many bind addresses specified.")
        }
        configuration.bind = arguments
    } format: { $0.bind.joined(separator: " ") }

    /// `latency-tracking-info-percentiles "50 99 99.9"`: numbers from 0 to 100; an empty value reports none.
    static let latencyPercentilesDirective = Self("latency-tracking-info-percentiles", .runtime, arity: .list) {
        (configuration, arguments, _) throws(InvalidValue) in
        var percentiles: [Double] = []
        for text in arguments where !(arguments.count == 1 && text.isEmpty) {
            guard let value = Double(text), !value.isNaN else {
                throw InvalidValue(reason: "Invalid latency-tracking-info-percentiles parameters")
            }
            guard value >= 0 && value <= 100 else {
                throw InvalidValue(reason: "latency-tracking-info-percentiles parameters should sit between [0.0,100.0]")
            }
            percentiles.append(value)
        }
        configuration.latencyTrackingInfoPercentiles = percentiles
    } format: { $0.latencyTrackingInfoPercentiles.map(ServerConfiguration.formatPercentile).joined(separator: " ") }

    /// The password is never shown: CONFIG GET answers a fixed mask when one is set.
    static let notifyKeyspaceEventsDirective = Self("notify-keyspace-events", .runtime) {
        (configuration, arguments, _) throws(InvalidValue) in
        guard let flags = KeyspaceEventFlags(parsing: arguments[0]) else {
            throw InvalidValue(reason: KeyspaceEventFlags.invalidMessage)
        }
        configuration.notifyKeyspaceEvents = flags
    } format: { $0.notifyKeyspaceEvents.text }

    static let requirePassDirective = secret("requirepass", \.requirePass)

    /// `client-output-buffer-limit <class> <hard> <soft> <soft-seconds> [...]`; classes normal, replica
    /// (or slave) and pubsub are accepted, and the normal class is enforced.
    static let clientOutputBufferLimitDirective = Self("client-output-buffer-limit", .runtime, arity: .list) {
        (configuration, arguments, _) throws(InvalidValue) in
        // An empty value changes nothing (as `CONFIG SET client-output-buffer-limit ""` in Redis).
        guard !arguments.isEmpty else { return }
        guard arguments.count.isMultiple(of: 4) else {
            throw InvalidValue(reason: "Wrong number of arguments in buffer limit configuration.")
        }
        var limits = configuration.clientOutputBufferLimits
        for index in stride(from: 0, to: arguments.count, by: 4) {
            let name = arguments[index].lowercased()
            guard let hard = ConfigurationValues.memory(arguments[index + 1]),
                let soft = ConfigurationValues.memory(arguments[index + 2]),
                let seconds = ConfigurationValues.cInteger(arguments[index + 3], base: 10), seconds >= 0
            else { throw InvalidValue(reason: "Error in hard, soft or soft_seconds setting in buffer limit configuration.") }
            let limit = ServerConfiguration.OutputBufferLimit(hard: Int(clamping: hard), soft: Int(clamping: soft), softSeconds: Int(seconds))
            switch name {
            case "normal": limits.normal = limit
            case "replica", "slave": limits.replica = limit
            case "pubsub": limits.pubsub = limit
            default: throw InvalidValue(reason: "Invalid client class specified in buffer limit configuration.")
            }
        }
        configuration.clientOutputBufferLimits = limits
    } format: { configuration in
        let l = configuration.clientOutputBufferLimits
        func text(_ limit: ServerConfiguration.OutputBufferLimit) -> String { "\(limit.hard) \(limit.soft) \(limit.softSeconds)" }
        return "normal \(text(l.normal)) slave \(text(l.replica)) pubsub \(text(l.pubsub))"
    }

    /// `rename-command <name> <new-name>` (config file and flags only): the command answers to the new name, or
    /// to none when the new name is "".
    static let renameCommandDirective = Self("rename-command", .startupOnly, arity: .list) {
        (configuration, arguments, _) throws(InvalidValue) in
        guard arguments.count == 2 else { throw InvalidValue(reason: "wrong number of arguments") }
        let (name, newName) = (arguments[0].lowercased(), arguments[1].lowercased())
        // Checked as Redis applies them, in order: against the names the earlier lines left.
        var names = Set(CommandRegistry.all.renamed(configuration.renamedCommands).map(\.lookupName))
        guard names.remove(name) != nil else { throw InvalidValue(reason: "No such command in rename-command") }
        guard newName.isEmpty || !names.contains(newName) else {
            throw InvalidValue(reason: "Target command name already exists")
        }
        configuration.renamedCommands.append(.init(name: name, newName: newName))
    } format: { _ in "" }

    /// `user <name> <rule> ...` (config file and flags only): a user, checked when the server starts.
    static let userDirective = Self("user", .startupOnly, arity: .list) { (configuration, arguments, _) throws(InvalidValue) in
        guard !arguments.isEmpty else { throw InvalidValue(reason: "wrong number of arguments") }
        configuration.users.append(arguments)
    } format: { _ in "" }

    /// `enable-protected-configs no|yes|local`; Redis also takes `yes`/`no` spelled as booleans.
    static let protectedConfigsDirective = Self("enable-protected-configs", .startupOnly) {
        (configuration, arguments, _) throws(InvalidValue) in
        guard let value = ServerConfiguration.ProtectedConfigs(rawValue: arguments[0].lowercased()) else {
            throw InvalidValue(reason: "argument(s) must be one of the following: no, yes, local")
        }
        configuration.enableProtectedConfigs = value
    } format: { $0.enableProtectedConfigs.rawValue }

    static let maxMemoryDirective = Self("maxmemory", .runtime) { (configuration, arguments, _) throws(InvalidValue) in
        guard let value = ConfigurationValues.memory(arguments[0]) else {
            throw InvalidValue(reason: "argument must be a memory value")
        }
        configuration.maxMemory = value
    } format: { String($0.maxMemory) }

    static let saveDirective = Self("save", .runtime, arity: .list) { (configuration, arguments, mode) throws(InvalidValue) in
        // A single empty argument means "no save points".
        let arguments = arguments == [""] ? [] : arguments
        guard arguments.count.isMultiple(of: 2) else {
            throw InvalidValue(reason: "Invalid save parameters")
        }
        var points: [ServerConfiguration.SavePoint] = []
        for index in stride(from: 0, to: arguments.count, by: 2) {
            guard let seconds = ConfigurationValues.cInteger(arguments[index], base: 10), seconds >= 1,
                let changes = ConfigurationValues.cInteger(arguments[index + 1], base: 10), changes >= 0
            else {
                throw InvalidValue(reason: "Invalid save parameters")
            }
            points.append(.init(seconds: Int(seconds), changes: Int(changes)))
        }
        // In config files every `save` line adds points (`save ""` clears them);
        // CONFIG SET replaces them.
        if mode == .startup && !arguments.isEmpty {
            configuration.savePoints += points
        } else {
            configuration.savePoints = points
        }
    } format: { configuration in
        configuration.savePoints.map { "\($0.seconds) \($0.changes)" }.joined(separator: " ")
    }

    static let directoryDirective = Self("dir", .protected) { (configuration, arguments, _) throws(InvalidValue) in
        configuration.directory = try resolveDirectory(arguments[0])
    } format: { configuration in
        (try? resolveDirectory(configuration.directory)) ?? configuration.directory
    }

    static let daemonizeDirective = Self("daemonize", .startupOnly) { (_, arguments, _) throws(InvalidValue) in
        switch ConfigurationValues.boolean(arguments[0]) {
        case false?:
            break
        case true?:
            throw InvalidValue(
                reason: "cached-server does not daemonize: run it in the foreground under a "
                    + "service manager such as systemd, which also captures its log; set 'daemonize no'")
        case nil:
            throw InvalidValue(reason: "argument must be 'yes' or 'no'")
        }
    } format: { _ in "no" }

    static let unixSocketPermissionsDirective = Self("unixsocketperm", .startupOnly) { (configuration, arguments, _) throws(InvalidValue) in
        guard let value = ConfigurationValues.cInteger(arguments[0], base: 8) else {
            throw InvalidValue(reason: "argument couldn't be parsed as an octal number")
        }
        guard value >= 0, value <= 0o777 else {
            throw InvalidValue(reason: "argument must be between 0 and 777 inclusive")
        }
        configuration.unixSocketPermissions = Int(value)
    } format: { ConfigurationValues.octal($0.unixSocketPermissions) }

    /// The absolute, symlink-free path of an existing directory, failing with the
    /// system's explanation (as redis-server's `chdir` does) otherwise.
    static func resolveDirectory(_ path: String) throws(InvalidValue) -> String {
        guard let resolved = realpath(path, nil) else {
            throw InvalidValue(reason: String(cString: strerror(errno)))
        }
        defer { free(resolved) }
        var status = stat()
        guard stat(resolved, &status) == 0 else {
            throw InvalidValue(reason: String(cString: strerror(errno)))
        }
        guard (status.st_mode & S_IFMT) == S_IFDIR else {
            throw InvalidValue(reason: String(cString: strerror(ENOTDIR)))
        }
        return String(cString: resolved)
    }

    private static let index: [String: Int] = {
        var index: [String: Int] = [:]
        for (position, directive) in all.enumerated() {
            for name in [directive.name] + directive.aliases {
                index[name] = position
            }
        }
        return index
    }()

    /// The directive called `name` (or with the alias `name`), in any case.
    package static func named(_ name: String) -> ConfigurationDirective? {
        index[name.lowercased()].map { all[$0] }
    }
}
