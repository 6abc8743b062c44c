import ArgumentParser
import CachedNetworking
import Foundation
import HTTPTypes
import Logging

/// `cached-fetch`: fetch a URL through the SDK and print it.
@main
struct CachedFetch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cached-fetch",
        abstract: "Fetch a URL through the CachedNetworking shared HTTP cache.",
        discussion: "Prints the body on standard output and the Cache-Status line on standard error."
    )

    @Option(
        name: .long,
        help: "The store: memory, redis://[user:password@]host:port[/db], or redis+cluster://[user:password@]host:port,host:port…")
    var store: String = "memory"

    @Option(name: .long, help: "The key namespace.")
    var namespace: String = "cached"

    @Flag(name: .long, help: "Print the status line and header fields before the body, like curl -i.")
    var include = false

    @Option(name: .long, help: "A request header field, 'Name: value' (repeatable).")
    var header: [String] = []

    @Flag(name: .long, help: "Log the cache's decisions on standard error.")
    var verbose = false

    @Argument(help: "The absolute http or https URL to fetch.")
    var url: String

    func validate() throws {
        _ = try FetchRequest.make(url: url, headers: header)
        _ = try StoreSpec(parsing: store)
    }

    func run() async throws {
        var logger = Logger(label: "cached-fetch") { StreamLogHandler.standardError(label: $0) }
        logger.logLevel = verbose ? .debug : .warning
        let request = try FetchRequest.make(url: url, headers: header)
        let cacheStore = try makeStore(try StoreSpec(parsing: store))
        let transport = AsyncHTTPClientTransport()
        var configuration = CachedNetworking.Configuration()
        configuration.namespace = namespace
        let cache = CachedNetworking(store: cacheStore, transport: transport, configuration: configuration, logger: logger)
        let outcome: Result<CachedResponse, CachedNetworkingError>
        do {
            outcome = .success(try await cache.run(request))
        } catch {
            outcome = .failure(error)
        }
        await cache.waitForBackgroundRefreshes()
        try? await transport.shutdown()
        await cacheStore.shutdown()
        let answer: CachedResponse
        switch outcome {
        case .success(let value): answer = value
        case .failure(let error): throw ValidationError("fetch failed: \(error)")
        }
        var output = Data()
        if include { output.append(contentsOf: FetchRequest.head(of: answer.response).utf8) }
        output.append(contentsOf: answer.body.readableBytesView)
        FileHandle.standardOutput.write(output)
        FileHandle.standardError.write(Data("Cache-Status: \(answer.cacheStatus.headerValue)\n".utf8))
    }
}

/// Building the request and printing the response head.
enum FetchRequest {
    static func make(url: String, headers: [String]) throws(ValidationError) -> HTTPRequest {
        guard let parsed = URL(string: url), let scheme = parsed.scheme?.lowercased(), scheme == "http" || scheme == "https",
            parsed.host != nil
        else {
            throw ValidationError("not an absolute http(s) URL: \(url)")
        }
        var request = HTTPRequest(method: .get, url: parsed)
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

    /// `HTTP/1.1 200 OK` and the header fields, CRLF-terminated, then an empty line.
    static func head(of response: HTTPResponse) -> String {
        var text = "HTTP/1.1 \(response.status.code) \(response.status.reasonPhrase)\r\n"
        for field in response.headerFields {
            text += "\(field.name.rawName): \(field.value)\r\n"
        }
        return text + "\r\n"
    }
}
