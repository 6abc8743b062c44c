import ArgumentParser
import AsyncHTTPClient
import CachedNetworking
import CachedNetworkingAsyncHTTPClient
import CachedNetworkingRedis
import Foundation
import HTTPTypes
import Logging
import NIOCore
import NIOPosix

/// `cached-fetch`: fetch a URL through the SDK and print it.
@main
struct CachedFetch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cached-fetch",
        abstract: "Fetch a URL through the CachedNetworking shared HTTP cache.",
        discussion: """
            Prints the body on standard output and the Cache-Status line on standard error. A failed fetch is \
            reported in one line on standard error, and the exit status says what failed (curl's numbers where \
            curl has one):

            """ + FetchFailure.statusTable
    )

    @Option(
        name: .long,
        help: "The store: memory, redis://[user:password@]host:port[/db], or redis+cluster://[user:password@]host:port,host:port…; rediss:// and rediss+cluster:// for TLS, verified against the system's CAs (SSL_CERT_FILE names others).")
    var store: String = "memory"

    @Option(name: .long, help: "The key namespace.")
    var namespace: String = "cached"

    @Flag(name: .long, help: "Print the status line and header fields before the body, like curl -i.")
    var include = false

    @Option(name: .long, help: "A request header field, 'Name: value' (repeatable).")
    var header: [String] = []

    @Option(
        name: [.customShort("X"), .long],
        help: "The request method, like curl -X (default GET, or POST with --data). Only GET and HEAD responses are cached; a successful unsafe method (POST, PUT, DELETE...) invalidates what is stored for its URL.")
    var request: String?

    @Option(name: [.customShort("d"), .long], help: "A request body, like curl -d (the method is then POST unless -X says otherwise).")
    var data: String?

    @Flag(name: .long, help: "Log the cache's decisions on standard error.")
    var verbose = false

    @Option(
        name: [.customShort("m"), .long],
        help: "Seconds a fetch may take, like curl -m: connecting, sending, and receiving the whole response (exit status 28 past it).")
    var maxTime: Double = 30

    @Option(
        name: .long,
        help: "The largest response body to accept, in bytes or with a suffix (e.g. 512m), like curl --max-filesize (exit status 63 past it; default 4 GiB - 1, the most the transport holds).")
    var maxFilesize: String?

    @Option(
        name: .long,
        help: "Keep a near cache of this many bytes (e.g. 16m) in front of a redis:// or redis+cluster:// store, kept coherent by the servers' invalidation messages.")
    var nearCache: String?

    @Flag(name: .long, help: "Near cache in broadcast mode: the server (each master of a cluster) invalidates every key under '<namespace>:'.")
    var nearCacheBroadcast = false

    @Option(name: .long, help: "Fetch this many times, printing one line per fetch on standard error.")
    var `repeat`: Int = 1

    @Option(name: .long, help: "Milliseconds to wait between repeated fetches.")
    var interval: Int = 0

    @Flag(name: .long, help: "With --repeat: stop at the first body that differs from the first fetch's.")
    var untilChanged = false

    @Argument(help: "The absolute http or https URL to fetch.")
    var url: String

    /// The method the flags ask for.
    private var method: String { request ?? (data == nil ? "GET" : "POST") }

    func validate() throws {
        _ = try FetchRequest.make(url: url, headers: header, method: method)
        do {
            let spec = try StoreSpec(parsing: store)
            try spec.check()
            if let nearCache {
                _ = try parseByteCount(nearCache)
                if spec == .memory { throw ValidationError("--near-cache needs a redis:// or redis+cluster:// store") }
            } else if nearCacheBroadcast {
                throw ValidationError("--near-cache-broadcast needs --near-cache")
            }
            if let maxFilesize { _ = try parseByteCount(maxFilesize) }
        } catch let error as StoreSpecError {
            throw ValidationError(error.message)
        }
        guard `repeat` >= 1 else { throw ValidationError("--repeat must be at least 1") }
        guard interval >= 0 else { throw ValidationError("--interval must not be negative") }
        guard maxTime > 0, maxTime <= 1e9 else { throw ValidationError("--max-time must be a positive number of seconds") }
    }

    /// The near cache the flags ask for.
    private func nearCacheSettings() throws -> RESPStore.NearCache? {
        guard let nearCache else { return nil }
        var settings = RESPStore.NearCache(maxBytes: try parseByteCount(nearCache))
        if nearCacheBroadcast { settings.mode = .broadcast(prefixes: ["\(namespace):"]) }
        return settings
    }

    func run() async throws {
        var logger = Logger(label: "cached-fetch") { StreamLogHandler.standardError(label: $0) }
        logger.logLevel = verbose ? .debug : .warning
        let request = try FetchRequest.make(url: url, headers: header, method: method)
        let body = data.map { ByteBuffer(string: $0) }
        let made: MadeStore
        do {
            made = try makeStore(try StoreSpec(parsing: store), nearCache: try nearCacheSettings(), logger: logger)
        } catch {
            throw ValidationError("\(error)")
        }
        var clientConfiguration = AsyncHTTPClientTransport.clientConfiguration
        // As curl does: a refused connection fails the fetch at once, rather than being retried until --max-time.
        clientConfiguration.connectionPool.retryConnectionEstablishment = false
        let client = HTTPClient(eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: clientConfiguration)
        let transport = AsyncHTTPClientTransport(
            client: client, timeout: .milliseconds(Int64((maxTime * 1_000).rounded(.up))),
            maximumBodySize: try maxFilesize.map(parseByteCount) ?? AsyncHTTPClientTransport.largestBodySize)
        var configuration = CachedNetworking.Configuration()
        configuration.namespace = namespace
        let cache = CachedNetworking(store: made.store, transport: transport, configuration: configuration, logger: logger)
        let outcome: Result<CachedResponse, CachedNetworkingError>
        if `repeat` == 1 {
            do {
                outcome = .success(try await cache.run(request, body: body))
            } catch {
                outcome = .failure(error)
            }
        } else {
            outcome = await fetchRepeatedly(cache, request, body: body, nearCacheStatistics: made.nearCacheStatistics)
        }
        // The cache first (its background work uses the client and the store), then what it was given.
        await cache.shutdown()
        try? await client.shutdown()
        await made.store.shutdown()
        let answer: CachedResponse
        switch outcome {
        case .success(let value):
            answer = value
        case .failure(let error):
            let failure = FetchFailure(error)
            FileHandle.standardError.write(Data("cached-fetch: \(failure.message)\n".utf8))
            throw ExitCode(failure.status)
        }
        var output = Data()
        if include { output.append(contentsOf: FetchRequest.head(of: answer.response).utf8) }
        output.append(contentsOf: answer.body.readableBytesView)
        FileHandle.standardOutput.write(output)
        if `repeat` == 1 {
            FileHandle.standardError.write(Data("Cache-Status: \(answer.cacheStatus.headerValue)\n".utf8))
        }
    }

    /// Fetches up to `repeat` times, `interval` apart, writing after each fetch a line like
    /// `fetch=3 time=1732251234.123456 changed=no near-hits=2 Cache-Status: cached; hit; ttl=59` on standard
    /// error (`time` in seconds since 1970 when the answer came; `changed` whether the body differs from the first
    /// fetch's; `near-hits` the near cache's hits so far, with --near-cache). Stops early with --until-changed.
    /// - Returns: the last answer, or the first failure.
    private func fetchRepeatedly(
        _ cache: CachedNetworking, _ request: HTTPRequest, body: ByteBuffer?,
        nearCacheStatistics: () -> RESPStore.NearCacheStatistics?
    ) async -> Result<CachedResponse, CachedNetworkingError> {
        var first: ByteBuffer?
        var last: CachedResponse?
        for fetch in 1...`repeat` {
            let answer: CachedResponse
            do {
                answer = try await cache.run(request, body: body)
            } catch {
                return .failure(error)
            }
            let time = Date().timeIntervalSince1970
            if first == nil { first = answer.body }
            let changed = answer.body != first
            var line = "fetch=\(fetch) time=\(String(format: "%.6f", time)) changed=\(changed ? "yes" : "no")"
            if let statistics = nearCacheStatistics() { line += " near-hits=\(statistics.hits)" }
            FileHandle.standardError.write(Data("\(line) Cache-Status: \(answer.cacheStatus.headerValue)\n".utf8))
            last = answer
            if changed && untilChanged { break }
            if fetch < `repeat` && interval > 0 {
                try? await Task.sleep(for: .milliseconds(interval))
            }
        }
        return last.map { .success($0) } ?? .failure(CachedNetworkingError(.invalidRequest, "no fetch"))
    }
}

/// Building the request and printing the response head.
enum FetchRequest {
    static func make(url: String, headers: [String], method: String = "GET") throws(ValidationError) -> HTTPRequest {
        guard let parsed = URL(string: escapingInvalidCharacters(url)), let scheme = parsed.scheme?.lowercased(),
            scheme == "http" || scheme == "https", parsed.host != nil
        else {
            throw ValidationError("not an absolute http(s) URL: \(url)")
        }
        guard let requestMethod = HTTPRequest.Method(method) else {
            throw ValidationError("not an HTTP method: \(method)")
        }
        var request = HTTPRequest(method: requestMethod, url: parsed)
        guard request.authority != nil else { throw ValidationError("not an absolute http(s) URL: \(url)") }
        for line in headers {
            guard let colon = line.firstIndex(of: ":"),
                let name = HTTPField.Name(String(line[..<colon]).trimmingCharacters(in: .whitespaces))
            else {
                throw ValidationError("a header must be 'Name: value': \(line)")
            }
            let value = String(line[line.index(after: colon)...]).trimmingCharacters(in: .whitespaces)
            request.headerFields.append(HTTPField(name: name, value: value))
        }
        return request
    }

    /// `url` with the characters a URL may not hold (space, `|`, `"`, `<`, `>`, `\\`, `^`, backquote, braces,
    /// controls, non-ASCII, a `%` that starts no escape) percent-encoded, and everything else, `%XX` escapes
    /// included, left as typed: `URL(string:)` alone would encode every `%` too once it finds one such character.
    static func escapingInvalidCharacters(_ url: String) -> String {
        var escaped = ""
        let bytes = Array(url.utf8)
        func isHex(_ byte: UInt8) -> Bool {
            (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte | 0x20)
        }
        for (index, byte) in bytes.enumerated() {
            // A `%` that does not start an escape is escaped itself (as `%25`).
            let strayPercent = byte == UInt8(ascii: "%")
                && !(index + 2 < bytes.count && isHex(bytes[index + 1]) && isHex(bytes[index + 2]))
            let allowed = byte > 0x20 && byte < 0x7F && !Array(#" "<>\^`{|}"#.utf8).contains(byte) && !strayPercent
            if allowed {
                escaped.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                let digits = Array("0123456789ABCDEF")
                escaped += "%" + String(digits[Int(byte >> 4)]) + String(digits[Int(byte & 0x0F)])
            }
        }
        return escaped
    }

    /// `HTTP/1.1 200 OK` and the header fields, CRLF-terminated, then an empty line.
    static func head(of response: HTTPResponse) -> String {
        var text = "HTTP/1.1 \(response.status.code) \(response.status.reasonPhrase)\r\n"
        for field in response.headerFields {
            text += "\(field.name.rawName): \(field.value)\r\n"
        }
        return text + "\r\n"
    }
}
