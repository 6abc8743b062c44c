import CachedNetworking
extension RESPStore {
    /// Where a ``RESPStore`` connects and how it manages its connections.
    ///
    /// Build one from a URL with ``init(url:)`` and adjust the pool and timeouts, or set every field yourself.
    public struct Configuration: Sendable, Hashable {
        /// The server's host name or IP address (IPv6 without brackets).
        public var host: String
        /// The server's TCP port.
        public var port: Int
        /// The user to `AUTH` as; nil authenticates with the password alone (Redis's `default` user).
        public var username: String?
        /// The password to `AUTH` with; nil sends no `AUTH`.
        public var password: String?
        /// The database to `SELECT` on connect (0 sends no `SELECT`).
        public var database: Int
        /// How many connections (each with its own thread) the store keeps. Default 4.
        public var poolSize: Int
        /// TLS for every connection (the store's pool and its near cache's invalidation connection); nil for plain
        /// TCP. A `rediss://` URL sets the defaults of ``RESPStore/TLS``: the server's certificate is verified
        /// against the system's CAs and must be for ``host``. Default nil.
        public var tls: RESPStore.TLS?
        /// How long establishing a connection may take: the TCP connect and, with ``tls``, the TLS handshake, each.
        /// Default 1 second.
        public var connectTimeout: Duration
        /// How long a command may wait: for its turn in the connection's queue, then for each read or write on
        /// the socket. A command that times out fails with ``CacheStoreError/Kind/timeout`` and its connection
        /// is discarded (its reply may still come, and would be mistaken for the next command's). Default 1 second.
        public var commandTimeout: Duration
        /// The most commands a connection sends together before reading their replies. Default 64.
        public var maxPipelineDepth: Int
        /// The first delay before reconnecting after a failed connection attempt; it doubles with each further
        /// failure up to ``maxReconnectDelay``. While every connection waits out its delay, calls fail at once
        /// with ``CacheStoreError/Kind/unreachable``. Default 50 ms.
        public var minReconnectDelay: Duration
        /// The longest delay between connection attempts. Default 2 seconds.
        public var maxReconnectDelay: Duration
        /// A near cache in this process's memory in front of the server, kept coherent by the server's
        /// invalidation messages (see ``RESPStore/NearCache``); nil for none. Default nil.
        public var nearCache: RESPStore.NearCache?
        /// How long a call that finds its connection idle waits on its own thread for the reply, polling the
        /// socket without blocking, before it hands the rest to the connection's thread. A reply that comes
        /// within it (a server on the same host or in the same rack) then costs no thread hand-off at all; the
        /// price is up to this much CPU on the caller's thread per call. The pool stops polling for a while
        /// after calls whose replies took longer, so a distant server costs nothing once it is noticed. Zero
        /// turns polling off. Default 50 µs.
        public var replyPolling: Duration

        /// A configuration for `host:port` with the default pool and timeouts.
        /// - Parameters:
        ///   - host: host name or IP address.
        ///   - port: TCP port. Default 6379.
        ///   - username: the user to authenticate as, with `password`.
        ///   - password: the password to authenticate with.
        ///   - database: the database to select. Default 0.
        ///   - tls: TLS settings; nil for plain TCP. Default nil.
        public init(
            host: String, port: Int = 6379, username: String? = nil, password: String? = nil, database: Int = 0,
            tls: RESPStore.TLS? = nil
        ) {
            self.host = host
            self.port = port
            self.username = username
            self.password = password
            self.database = database
            self.tls = tls
            self.poolSize = 4
            self.connectTimeout = .seconds(1)
            self.commandTimeout = .seconds(1)
            self.maxPipelineDepth = 64
            self.minReconnectDelay = .milliseconds(50)
            self.maxReconnectDelay = .seconds(2)
            self.nearCache = nil
            self.replyPolling = .microseconds(50)
        }

        /// A configuration from a URL: `redis://[[user]:password@]host[:port][/db]`, or `rediss://` for TLS.
        ///
        /// - `redis://cache.internal:6379` — no authentication, database 0;
        /// - `redis://:s3cret@cache.internal:6379/2` — `AUTH s3cret`, then `SELECT 2`;
        /// - `redis://app:s3cret@cache.internal/2` — `AUTH app s3cret` (port 6379), as the ACL user `app`;
        /// - `redis://s3cret@cache.internal` — without a colon the user-info is a password, as in `redis-cli -u`;
        /// - `redis://[::1]:6380` — an IPv6 address in brackets;
        /// - `rediss://app:s3cret@cache.internal:6380` — the same over TLS: ``tls`` is set to the defaults of
        ///   ``RESPStore/TLS`` (the server's certificate verified against the system's CAs, for
        ///   `cache.internal`). Change ``tls`` afterwards for your own CA, a client certificate or another name.
        ///
        /// User and password may be percent-encoded (`%40` for `@`).
        ///
        /// - Parameter url: the URL.
        /// - Throws: ``RESPStore/ConfigurationError`` naming what is wrong.
        public init(url: String) throws(ConfigurationError) {
            // Error messages quote the URL without its user-info, so that a password never reaches a log.
            let shown = Self.redacted(url).debugDescription
            let schemeEnd = url.range(of: "://")
            guard let schemeEnd else {
                throw ConfigurationError("\(shown) is not a redis:// URL")
            }
            let scheme = url[..<schemeEnd.lowerBound].lowercased()
            switch scheme {
            case "redis", "rediss": break
            case "redis+cluster", "rediss+cluster":
                throw ConfigurationError("\(shown) names a Redis Cluster: use RESPClusterStore for \(scheme):// URLs")
            default:
                throw ConfigurationError(
                    "unsupported scheme \(scheme.debugDescription) in \(shown): use redis:// or rediss:// (TLS)")
            }
            var rest = url[schemeEnd.upperBound...]
            if rest.contains("?") || rest.contains("#") {
                throw ConfigurationError("\(shown): query strings and fragments are not supported")
            }
            var path = Substring("")
            if let slash = rest.firstIndex(of: "/") {
                path = rest[rest.index(after: slash)...]
                rest = rest[..<slash]
            }
            var username: String?
            var password: String?
            if let at = rest.lastIndex(of: "@") {
                let userInfo = rest[..<at]
                rest = rest[rest.index(after: at)...]
                if let colon = userInfo.firstIndex(of: ":") {
                    let user = try Self.percentDecoded(userInfo[..<colon], in: url)
                    username = user.isEmpty ? nil : user
                    password = try Self.percentDecoded(userInfo[userInfo.index(after: colon)...], in: url)
                } else if !userInfo.isEmpty {
                    password = try Self.percentDecoded(userInfo, in: url)
                }
            }
            var host: Substring
            var portText: Substring?
            if rest.hasPrefix("[") {
                guard let close = rest.firstIndex(of: "]") else {
                    throw ConfigurationError("\(shown): unterminated [ in the IPv6 address")
                }
                host = rest[rest.index(after: rest.startIndex)..<close]
                let after = rest[rest.index(after: close)...]
                if !after.isEmpty {
                    guard after.hasPrefix(":") else { throw ConfigurationError("\(shown): junk after ]") }
                    portText = after.dropFirst()
                }
            } else if let colon = rest.lastIndex(of: ":") {
                host = rest[..<colon]
                portText = rest[rest.index(after: colon)...]
            } else {
                host = rest
            }
            guard !host.isEmpty else { throw ConfigurationError("\(shown) has no host") }
            var port = 6379
            if let portText {
                guard let parsed = Int(portText), (1...65535).contains(parsed) else {
                    throw ConfigurationError("\(shown): the port must be a number from 1 to 65535")
                }
                port = parsed
            }
            var database = 0
            if !path.isEmpty {
                guard let parsed = Int(path), parsed >= 0, path.allSatisfy(\.isASCII) else {
                    throw ConfigurationError(
                        "\(shown): the path must be a database number, like /2")
                }
                database = parsed
            }
            self.init(
                host: String(host), port: port, username: username, password: password, database: database,
                tls: scheme == "rediss" ? RESPStore.TLS() : nil)
        }

        /// `url` with any user-info replaced by `***`.
        static func redacted(_ url: String) -> String {
            guard let schemeEnd = url.range(of: "://") else { return url }
            let afterScheme = url[schemeEnd.upperBound...]
            let authorityEnd = afterScheme.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? url.endIndex
            guard let at = url[schemeEnd.upperBound..<authorityEnd].lastIndex(of: "@") else { return url }
            return String(url[..<schemeEnd.upperBound]) + "***" + String(url[at...])
        }

        private static func percentDecoded(_ text: Substring, in url: String) throws(ConfigurationError) -> String {
            var bytes: [UInt8] = []
            var utf8 = text.utf8[...]
            while let byte = utf8.popFirst() {
                guard byte == UInt8(ascii: "%") else {
                    bytes.append(byte)
                    continue
                }
                let hex = utf8.prefix(2)
                guard hex.count == 2, let value = UInt8(String(decoding: hex, as: UTF8.self), radix: 16) else {
                    throw ConfigurationError("\(Self.redacted(url).debugDescription): bad percent-encoding in the user or password")
                }
                bytes.append(value)
                utf8 = utf8.dropFirst(2)
            }
            return String(decoding: bytes, as: UTF8.self)
        }
    }
}

extension RESPStore.Configuration: CustomStringConvertible {
    /// The server as a URL with the password masked, the TLS settings, and the pool's settings (safe to log).
    public var description: String {
        var userInfo = ""
        if password != nil { userInfo = "\(username ?? ""):***@" }
        let shownHost = host.contains(":") ? "[\(host)]" : host
        return "\(tls == nil ? "redis" : "rediss")://\(userInfo)\(shownHost):\(port)/\(database) ("
            + (tls.map { "\($0), " } ?? "") + "pool \(poolSize), connect timeout \(connectTimeout), "
            + "command timeout \(commandTimeout), pipeline depth \(maxPipelineDepth), "
            + "reconnect delay \(minReconnectDelay)–\(maxReconnectDelay)"
            + (nearCache.map { ", \($0)" } ?? "") + ")"
    }
}

extension RESPStore {
    /// A ``RESPStore/Configuration`` that cannot be used: a malformed or unsupported URL.
    public struct ConfigurationError: Error, Sendable, Hashable, CustomStringConvertible {
        /// What is wrong, for logs and error messages.
        public let message: String

        /// An error explaining `message`.
        public init(_ message: String) { self.message = message }

        /// The message, prefixed with what it is about.
        public var description: String { "invalid cache store configuration: \(message)" }
    }
}
