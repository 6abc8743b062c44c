import CachedNetworking
import CachedTestSupport
import Foundation
import HTTPTypes
import NIOCore
import Testing

@testable import CachedNetworking
@testable import CachedNetworkingRedis

/// A master killed with SIGKILL while traffic runs: the store retries until its replica is promoted, and the SDK
/// (over `FailOpenStore`) never fails a request and caches again once the cluster has recovered.
@Suite("RESPClusterStore when a master dies")
struct ClusterFailoverTests {
    @Test("a master killed during traffic: calls wait for the failover and succeed, values stay right")
    func storeRetriesThroughFailover() async throws {
        try await withRedisCluster { cluster in
            // The retry time covers a failover (node timeout 1 s, then the election) with room for a busy machine.
            let store = try makeClusterStore(cluster) {
                $0.poolSize = 2
                $0.retryTimeout = .seconds(30)
                $0.minReconnectDelay = .milliseconds(20)
                $0.maxReconnectDelay = .milliseconds(200)
            }
            let victim = try await offThread { try cluster.masters()[0] }
            let victimSlots = victim.slots
            let tasks = 12
            let keysOfTask: [[String]] = (0..<tasks).map { task in (0..<30).map { "failover:\(task):\($0)" } }
            #expect(keysOfTask.joined().contains { key in victimSlots.contains { $0.contains(ClusterSlots.slot(of: key)) } })

            let tally = TrafficTally()
            let stop = StopFlag()
            let window = FailoverWindow()
            await withTaskGroup(of: Void.self) { group in
                for task in 0..<tasks {
                    group.addTask {
                        await runTraffic(
                            store: store, keys: keysOfTask[task], task: task, tally: tally, stop: stop, failover: window)
                    }
                }
                await window.killAndWaitForFailover(of: victim, in: cluster)
                stop.stop()
            }

            let (operations, failures, mismatches) = tally.summary
            #expect(failures.isEmpty, "\(failures.count) failed calls: \(failures.prefix(10))")
            #expect(mismatches.isEmpty, "\(mismatches.count) wrong values: \(mismatches.prefix(10))")
            #expect(operations > 500, "only \(operations) calls")
            // The promoted replica serves the dead master's slots, in the store's map too.
            let promoted = try await offThread { try cluster.masters() }
            let newOwner = try #require(promoted.first { $0.slots.contains { $0.contains(victimSlots[0].lowerBound) } })
            #expect(newOwner.port != victim.port)
            #expect(store.router.slotMap.master(of: victimSlots[0].lowerBound)?.port == newOwner.port)
            #expect(store.router.counters.retried > 0, "\(store.router.counters)")
            await store.shutdown()
            #expect(store.router.runningThreadCount == 0)
        }
    }

    @Test("the SDK over FailOpenStore while a master dies: every request answered; after the failover, hits again")
    func facadeFailsOpenThenHitsAgain() async throws {
        try await withRedisCluster { cluster in
            let store = FailOpenStore(
                wrapping: try makeClusterStore(cluster) {
                    $0.poolSize = 2
                    $0.retryTimeout = .seconds(1)
                    $0.minReconnectDelay = .milliseconds(20)
                    $0.maxReconnectDelay = .milliseconds(200)
                },
                failureThreshold: 5, coolDown: .milliseconds(500))
            let origin = EchoOrigin()
            var configuration = CachedNetworking.Configuration()
            configuration.namespace = "failover-\(UUID().uuidString)"
            configuration.storeTimeout = .seconds(2)
            let cache = CachedNetworking(store: store, transport: origin, configuration: configuration)
            let victim = try await offThread { try cluster.masters()[0] }
            // Paths whose cache entries live in the victim's slots.
            func onVictim(_ path: String) -> Bool {
                let slot = ClusterSlots.slot(of: CacheKeys.slotTag("https://origin.test\(path)"))
                return victim.slots.contains { $0.contains(slot) }
            }

            let tally = TrafficTally()
            let stop = StopFlag()
            await withTaskGroup(of: Void.self) { group in
                for task in 0..<8 {
                    group.addTask {
                        var round = 0
                        let deadline = ContinuousClock.now + .seconds(180)
                        while !stop.isStopped && ContinuousClock.now < deadline {
                            round += 1
                            let path = "/\(task)/\(round % 25)"
                            do {
                                let answer = try await cache.run(
                                    HTTPRequest(method: .get, scheme: "https", authority: "origin.test", path: path))
                                if String(buffer: answer.body) != "body of \(path)" {
                                    tally.mismatched("\(path): \(String(buffer: answer.body))")
                                }
                                tally.succeeded()
                            } catch {
                                tally.failed("\(path): \(error)")
                            }
                        }
                    }
                }
                await FailoverWindow().killAndWaitForFailover(of: victim, in: cluster)
                stop.stop()
            }
            let (answered, failures, mismatches) = tally.summary
            #expect(failures.isEmpty, "\(failures.count) failed requests: \(failures.prefix(10))")
            #expect(mismatches.isEmpty, "\(mismatches.count) wrong bodies: \(mismatches.prefix(10))")
            #expect(answered > 100, "only \(answered) requests")

            // New URLs in the dead master's former slots: the first request stores, the second hits (the breaker
            // may need a cool-down and a probe first, and the store a slot-map refresh: bounded retries).
            var checked = 0
            var candidate = 0
            while checked < 5 {
                candidate += 1
                let path = "/after/\(candidate)"
                guard onVictim(path) else { continue }
                checked += 1
                let request = HTTPRequest(method: .get, scheme: "https", authority: "origin.test", path: path)
                var stored = false
                let deadline = ContinuousClock.now + .seconds(30)
                while !stored && ContinuousClock.now < deadline {
                    let answer = try await cache.run(request)
                    #expect(String(buffer: answer.body) == "body of \(path)")
                    stored = answer.cacheStatus.stored || answer.source == .cache
                    if !stored { try await Task.sleep(for: .milliseconds(100)) }
                }
                #expect(stored, "\(path) was never stored")
                let hit = try await cache.run(request)
                #expect(hit.source == .cache, "\(path): \(hit.cacheStatus.headerValue)")
                #expect(String(buffer: hit.body) == "body of \(path)")
            }
            #expect(store.state == .closed(consecutiveFailures: 0))
            await store.shutdown()
        }
    }
}

/// An origin that answers every GET with `body of <path>`, cacheable for ten minutes.
struct EchoOrigin: HTTPTransport {
    func send(_ request: HTTPRequest, body: ByteBuffer?) async throws -> HTTPTransportResponse {
        HTTPTransportResponse(
            response: HTTPResponse(status: .ok, headerFields: [.cacheControl: "max-age=600"]),
            body: ByteBuffer(string: "body of \(request.path ?? "")"))
    }
}
