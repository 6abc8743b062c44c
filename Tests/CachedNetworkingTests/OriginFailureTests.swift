import AsyncHTTPClient
import CachedNetworking
import CachedNetworkingAsyncHTTPClient
import CachedNetworkingTesting
import CachedOriginSupport
import CachedTestSupport
import Foundation
import Glibc
import HTTPTypes
import NIOCore
import NIOPosix
import Testing

/// Origins that misbehave: slow heads and bodies, refused connections, replies that are not HTTP or end early.
/// Each failure comes out of the transports as the ``HTTPTransportError`` that names it, and out of the cache as
/// a `.transport` error carrying it. The timeouts here are 300 ms; the origins would take 60 s to answer, and the
/// tests allow 30 s, so that a busy machine (or every test of the target run at once) does not fail them.
@Suite("origins that misbehave: timeouts and failures")
struct OriginFailureTests {
    /// 600 bytes, one every 100 ms: 60 s in all, and never 300 ms without a byte (no idle timeout fires).
    static let trickled = OriginServer.Reply(
        headers: [("Cache-Control", "max-age=60")], body: String(repeating: "t", count: 600), trickle: .milliseconds(100))

    @Test("a body trickled past the transport's timeout fails the fetch with .timeout at the timeout")
    func trickledBodyTimesOut() async throws {
        let h = try await Harness.make(transport: impatientTransport)
        h.origin.route("/trickle", reply: Self.trickled)
        let start = ContinuousClock.now
        let error = try await fetchFailure(h.cache, h.origin.request("/trickle"))
        let elapsed = ContinuousClock.now - start
        #expect(error.kind == .transport)
        #expect(transportKind(error) == .timeout, "\(error)")
        #expect(elapsed >= .milliseconds(300))
        #expect(elapsed < .seconds(30), "\(elapsed)")
        #expect(h.store.keys.isEmpty)
        await h.stop()
    }

    @Test("a head that comes after the transport's timeout fails the fetch with .timeout")
    func slowHeadTimesOut() async throws {
        let h = try await Harness.make(transport: impatientTransport)
        h.origin.route("/slow-head", reply: .init(body: "late", delay: .seconds(60)))
        let start = ContinuousClock.now
        let error = try await fetchFailure(h.cache, h.origin.request("/slow-head"))
        #expect(transportKind(error) == .timeout, "\(error)")
        #expect(ContinuousClock.now - start < .seconds(30))
        await h.stop()
    }

    @Test("a body that ends within the timeout is not cut short: the whole trickle arrives")
    func trickleWithinTimeout() async throws {
        let h = try await Harness.make()
        h.origin.route("/short-trickle", reply: .init(body: "abc", trickle: .milliseconds(20)))
        let answer = try await h.get("/short-trickle")
        #expect(answer.text == "abc")
        await h.stop()
    }

    @Test("the URLSession transport's timeout covers the body too")
    func urlSessionTrickledBodyTimesOut() async throws {
        let origin = try await OriginServer.start()
        origin.route("/trickle", reply: Self.trickled)
        let transport = URLSessionTransport(timeout: 0.3)
        let start = ContinuousClock.now
        var failure: (any Error)? = nil
        do {
            _ = try await transport.send(origin.request("/trickle"), body: nil)
        } catch {
            failure = error
        }
        let elapsed = ContinuousClock.now - start
        #expect((failure as? HTTPTransportError)?.kind == .timeout, "\(String(describing: failure))")
        #expect(elapsed >= .milliseconds(300), "\(elapsed)")
        #expect(elapsed < .seconds(30), "\(elapsed)")
        await origin.stop()
    }

    @Test("stale-if-error serves the stored response when the origin's body times out")
    func staleIfErrorOnBodyTimeout() async throws {
        let h = try await Harness.make(transport: impatientTransport)
        let trickle = Tally()
        h.serve("/sie") { _ in
            trickle.next() == 1
                ? .init(headers: [("Cache-Control", "max-age=10, stale-if-error=60")], body: "kept")
                : Self.trickled
        }
        _ = try await h.get("/sie")
        h.advance(15)
        let answer = try await h.get("/sie")
        #expect(answer.source == .stale)
        #expect(answer.text == "kept")
        #expect(answer.cacheStatus.detail == "stale-if-error")
        await h.stop()
    }

    @Test("a refused connection is .connectionFailed")
    func refusedConnection() async throws {
        let refusing = try refusingLoopbackPort()
        defer { close(refusing.fd) }
        let request = HTTPRequest(method: .get, scheme: "http", authority: "127.0.0.1:\(refusing.port)", path: "/")
        let failure = try await sendFailure(impatientTransport, request)
        #expect(failure?.kind == .connectionFailed, "\(String(describing: failure))")
        #expect(failure?.message.contains("Connection refused") == true, "\(String(describing: failure))")
    }

    @Test("a host name that does not resolve is .hostNotFound")
    func unresolvedHost() async throws {
        // `.invalid` never resolves (RFC 6761). The client does not retry (AsyncHTTPClient's default would retry
        // until its 10 s connection timeout), and the deadline is generous for a slow resolver.
        var configuration = AsyncHTTPClientTransport.clientConfiguration
        configuration.connectionPool.retryConnectionEstablishment = false
        let client = HTTPClient(eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: configuration)
        let transport = AsyncHTTPClientTransport(client: client, timeout: .seconds(20))
        let request = HTTPRequest(method: .get, scheme: "http", authority: "cached-fetch-test.invalid", path: "/")
        let failure = try await sendFailure(transport, request)
        #expect(failure?.kind == .hostNotFound, "\(String(describing: failure))")
        try await client.shutdown()
    }

    @Test("a reply that is not HTTP is .invalidResponse")
    func notHTTP() async throws {
        let origin = try await RawOrigin.start(answering: "SSH-2.0-OpenSSH_9.6\r\n")
        let failure = try await sendFailure(sharedTransport, origin.request("/"))
        #expect(failure?.kind == .invalidResponse, "\(String(describing: failure))")
        await origin.stop()
    }

    @Test("a connection closed in the middle of the body is .connectionLost")
    func closedMidBody() async throws {
        let origin = try await RawOrigin.start(answering: "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part")
        let failure = try await sendFailure(sharedTransport, origin.request("/"))
        #expect(failure?.kind == .connectionLost, "\(String(describing: failure))")
        await origin.stop()
    }

    @Test("a body over the transport's maximumBodySize is .bodyTooLarge")
    func bodyOverTransportMaximum() async throws {
        let origin = try await OriginServer.start()
        origin.route("/big", reply: .init(body: String(repeating: "b", count: 2_048)))
        origin.route("/fits", reply: .init(body: String(repeating: "f", count: 1_024)))
        let transport = AsyncHTTPClientTransport(timeout: .seconds(10), maximumBodySize: 1_024)
        let failure = try await sendFailure(transport, origin.request("/big"))
        #expect(failure?.kind == .bodyTooLarge, "\(String(describing: failure))")
        #expect(try await transport.send(origin.request("/fits"), body: nil).body.readableBytes == 1_024)
        try await transport.shutdown()
        await origin.stop()
    }

    /// The error `cache.run(request)` fails with; records an issue if it succeeds.
    private func fetchFailure(_ cache: CachedNetworking, _ request: HTTPRequest) async throws -> CachedNetworkingError {
        let answer: CachedResponse
        do {
            answer = try await cache.run(request)
        } catch {
            return error
        }
        Issue.record("the fetch succeeded: \(answer.response.status), \(answer.body.readableBytes) bytes")
        throw TestEnvironmentError("no failure")
    }

    /// The ``HTTPTransportError`` `transport.send(request)` fails with (nil for another error, or none).
    private func sendFailure(_ transport: any HTTPTransport, _ request: HTTPRequest) async throws -> HTTPTransportError? {
        do {
            let answer = try await transport.send(request, body: nil)
            Issue.record("the exchange succeeded: \(answer.response.status)")
            return nil
        } catch let error as HTTPTransportError {
            return error
        } catch {
            Issue.record("not an HTTPTransportError: \(error)")
            return nil
        }
    }

    private func transportKind(_ error: CachedNetworkingError) -> HTTPTransportError.Kind? {
        (error.underlying as? HTTPTransportError)?.kind
    }
}
