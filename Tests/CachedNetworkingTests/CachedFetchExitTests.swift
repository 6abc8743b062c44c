import CachedOriginSupport
import CachedTestSupport
import Foundation
import Glibc
import Testing

/// `cached-fetch`'s failures, as curl reports its own: one `cached-fetch: …` line on standard error and an exit
/// status per kind of failure (curl's number where curl has one); the usage text only for usage errors (64).
@Suite("cached-fetch: exit statuses and messages")
struct CachedFetchExitTests {
    @Test("a refused connection: exit 7 at once (not retried until --max-time), one line, no usage")
    func refused() async throws {
        let refusing = try refusingLoopbackPort()
        defer { close(refusing.fd) }
        let url = "http://127.0.0.1:\(refusing.port)/x"
        // Killed (and failed) if it is still retrying when the run's 60 s are up.
        let output = try await cachedFetch(["--max-time", "600", url], timeout: 60)
        #expect(output.status == 7, "\(output.summary)")
        #expect(
            output.standardError == "cached-fetch: could not connect to http://127.0.0.1:\(refusing.port): Connection refused\n",
            "\(output.summary)")
        #expect(output.standardOutput.isEmpty)
    }

    @Test("a body trickled past --max-time: exit 28 with the timeout's line")
    func trickleTimesOut() async throws {
        let origin = try await OriginServer.start()
        origin.route("/trickle", reply: .init(body: String(repeating: "t", count: 600), trickle: .milliseconds(100)))
        // The trickle takes 60 s; the run is killed (and fails) after 30.
        let output = try await cachedFetch(["--max-time", "0.3", origin.url("/trickle")], timeout: 30)
        #expect(output.status == 28, "\(output.summary)")
        #expect(
            output.standardError == "cached-fetch: no complete response from http://127.0.0.1:\(origin.port) within 0.3 seconds\n",
            "\(output.summary)")
        #expect(output.standardOutput.isEmpty)
        await origin.stop()
    }

    @Test("a reply that is not HTTP: exit 8; a connection closed mid-body: exit 56")
    func protocolFailures() async throws {
        let notHTTP = try await RawOrigin.start(answering: "SSH-2.0-OpenSSH_9.6\r\n")
        let cut = try await RawOrigin.start(answering: "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part")
        let invalid = try await cachedFetch([notHTTP.url("/")])
        let lost = try await cachedFetch([cut.url("/")])
        #expect(invalid.status == 8, "\(invalid.summary)")
        #expect(invalid.standardError.hasPrefix("cached-fetch: http://127.0.0.1:\(notHTTP.port) sent an invalid HTTP response"))
        #expect(lost.status == 56, "\(lost.summary)")
        #expect(lost.standardError.hasPrefix("cached-fetch: http://127.0.0.1:\(cut.port) closed the connection"), "\(lost.summary)")
        for output in [invalid, lost] {
            #expect(output.standardError.split(separator: "\n").count == 1, "\(output.summary)")
        }
        await notHTTP.stop()
        await cut.stop()
    }

    @Test("a body over --max-filesize: exit 63; within it, or an HTTP error status: exit 0")
    func maxFilesize() async throws {
        let origin = try await OriginServer.start()
        origin.route("/big", reply: .init(body: String(repeating: "b", count: 2_048)))
        origin.route("/missing", reply: .init(status: 404, body: "not here"))
        let over = try await cachedFetch(["--max-filesize", "1k", origin.url("/big")])
        let within = try await cachedFetch(["--max-filesize", "2k", origin.url("/big")])
        let missing = try await cachedFetch([origin.url("/missing")])
        #expect(over.status == 63, "\(over.summary)")
        #expect(
            over.standardError == "cached-fetch: the response body from http://127.0.0.1:\(origin.port) is larger than 1024 bytes\n",
            "\(over.summary)")
        #expect(within.status == 0, "\(within.summary)")
        #expect(within.standardOutput == String(repeating: "b", count: 2_048))
        #expect(missing.status == 0, "\(missing.summary)")
        #expect(missing.standardOutput == "not here")
        await origin.stop()
    }

    @Test("a host name that does not resolve: exit 6")
    func unresolvedHost() async throws {
        // `.invalid` never resolves (RFC 6761); --max-time is generous for a slow resolver.
        let output = try await cachedFetch(["--max-time", "20", "http://cached-fetch-test.invalid/"])
        #expect(output.status == 6, "\(output.summary)")
        #expect(output.standardError.hasPrefix("cached-fetch: could not resolve cached-fetch-test.invalid"), "\(output.summary)")
    }

    @Test(
        "usage errors: exit 64 with the usage text",
        arguments: [
            ["--no-such-option", "http://127.0.0.1:1/"],
            ["not a url"],
            ["--store", "memcached://127.0.0.1:11211", "http://127.0.0.1:1/"],
            ["--store", "redis://127.0.0.1:notaport", "http://127.0.0.1:1/"],
            ["--max-time", "0", "http://127.0.0.1:1/"],
            ["--max-filesize", "lots", "http://127.0.0.1:1/"],
        ])
    func usageErrors(_ arguments: [String]) async throws {
        let output = try await cachedFetch(arguments)
        #expect(output.status == 64, "\(output.summary)")
        #expect(output.standardError.hasPrefix("Error: "), "\(output.summary)")
        #expect(output.standardError.contains("Usage: cached-fetch"), "\(output.summary)")
    }

    @Test("--help documents the exit statuses")
    func helpListsStatuses() async throws {
        let output = try await cachedFetch(["--help"])
        #expect(output.status == 0, "\(output.summary)")
        for line in ["  6   the origin's host name could not be resolved", "  7   no connection to the origin", "  28  no complete response within --max-time", "  64  a usage error"] {
            #expect(output.standardOutput.contains(line), "\(line) in \(output.standardOutput)")
        }
    }

    /// Runs the built `cached-fetch` with `arguments` off the cooperative pool.
    private func cachedFetch(_ arguments: [String], timeout: TimeInterval = 30) async throws -> ProgramOutput {
        try await offThread { try ExternalProgram.cachedFetch.run(arguments, timeout: timeout) }
    }
}
