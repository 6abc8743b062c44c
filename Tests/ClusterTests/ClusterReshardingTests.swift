import CachedNetworking
import CachedTestSupport
import Foundation
import NIOCore
import Testing

@testable import CachedNetworking
@testable import CachedNetworkingRedis

/// Continuous traffic while `redis-cli --cluster reshard` moves slots between masters: every call succeeds and
/// every read returns what was written last, through `MOVED`, `ASK` and `TRYAGAIN`.
@Suite("RESPClusterStore while slots move")
struct ClusterReshardingTests {
    @Test("16 tasks of set, get and multi-key calls while 1500 slots move: no failure, no wrong value")
    func trafficDuringResharding() async throws {
        try await withRedisCluster { cluster in
            let store = try makeClusterStore(cluster) {
                $0.poolSize = 2
                $0.retryTimeout = .seconds(20)
            }
            let masters = try await offThread { try cluster.masters() }
            let source = masters[0]
            let target = masters[1]
            // Keys in the slots that will move (redis-cli takes them from the start of the source's first range),
            // and keys elsewhere.
            let moving = source.slots[0].lowerBound..<(source.slots[0].lowerBound + 1500)
            let tasks = 16
            let keysPerTask = 40
            var keys: [[String]] = Array(repeating: [], count: tasks)
            var candidate = 0
            while keys.contains(where: { $0.count < keysPerTask }) {
                let key = "reshard:\(candidate)"
                candidate += 1
                let owner = candidate % tasks
                let inMovingSlots = moving.contains(ClusterSlots.slot(of: key))
                // Three quarters of each task's keys are in the moving slots.
                let wanted = keys[owner].count % 4 == 3 ? !inMovingSlots : inMovingSlots
                if wanted && keys[owner].count < keysPerTask { keys[owner].append(key) }
            }
            let keysOfTask = keys

            let tally = TrafficTally()
            let stop = StopFlag()
            let reshard = Task {
                try await offThread { () -> ProgramOutput in
                    // Let the traffic get going first.
                    usleep(500_000)
                    return try cluster.startResharding(from: source, to: target, slots: moving.count).wait(timeout: 300)
                }
            }
            await withTaskGroup(of: Void.self) { group in
                for task in 0..<tasks {
                    group.addTask {
                        await runTraffic(store: store, keys: keysOfTask[task], task: task, tally: tally, stop: stop)
                    }
                }
                let output: ProgramOutput
                do {
                    output = try await reshard.value
                } catch {
                    Issue.record("resharding did not run: \(error)")
                    stop.stop()
                    return
                }
                #expect(output.status == 0, "\(output.summary)")
                // A little more traffic on the new layout, then stop.
                try? await Task.sleep(for: .milliseconds(500))
                stop.stop()
            }

            let (operations, failures, mismatches) = tally.summary
            #expect(failures.isEmpty, "\(failures.count) failed calls: \(failures.prefix(10))")
            #expect(mismatches.isEmpty, "\(mismatches.count) wrong values: \(mismatches.prefix(10))")
            #expect(operations > 1000, "only \(operations) calls")

            // The slots moved, and the store knows it.
            let after = try await offThread { try cluster.masters() }
            let newOwner = try #require(after.first { $0.id == target.id })
            #expect(newOwner.slots.contains { $0.contains(moving.lowerBound) && $0.contains(moving.upperBound - 1) })
            #expect(store.router.slotMap.master(of: moving.lowerBound)?.port == target.port)
            // The traffic met the moving slots: redirections were followed (ASK and TRYAGAIN only when a call
            // lands on a slot in the middle of its migration, so they are not required).
            #expect(store.router.counters.moved > 0, "\(store.router.counters)")
            // Every key reads back as its task last wrote it.
            for task in 0..<tasks {
                let values = try await store.get(keysOfTask[task])
                #expect(values.allSatisfy { $0 != nil }, "task \(task)")
            }
            await store.shutdown()
        }
    }
}
