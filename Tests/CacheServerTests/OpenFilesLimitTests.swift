import CacheServer
import Testing

/// The open files limit at startup: raised to maxclients + 32 when possible, else maxclients lowered, as Redis does.
@Suite("Open files limit")
struct OpenFilesLimitTests {
    /// Records the limits the plan asks for, succeeding only for those `allowed` accepts.
    final class Recorder {
        var calls: [(UInt64, UInt64)] = []
        let allowed: (UInt64, UInt64) -> Bool
        init(allowed: @escaping (UInt64, UInt64) -> Bool) { self.allowed = allowed }
        func set(_ soft: UInt64, _ hard: UInt64) -> Int32 {
            calls.append((soft, hard))
            return allowed(soft, hard) ? 0 : 1  // EPERM
        }
    }

    @Test("a soft limit already high enough is left alone")
    func enough() {
        let recorder = Recorder { _, _ in true }
        let outcome = OpenFilesLimit.plan(maxClients: 10_000, soft: 10_032, hard: 10_032, set: recorder.set)
        #expect(recorder.calls.isEmpty)
        #expect(outcome.limit == 10_032 && outcome.maxClients == 10_000 && outcome.messages.isEmpty)
        #expect(!outcome.raised && !outcome.fatal)
    }

    @Test("a privileged process raises both limits to maxclients + 32")
    func privileged() {
        let recorder = Recorder { _, _ in true }
        let outcome = OpenFilesLimit.plan(maxClients: 10_000, soft: 1024, hard: 4096, set: recorder.set)
        #expect(recorder.calls.map { [$0.0, $0.1] } == [[10_032, 10_032]])
        #expect(outcome.raised && outcome.limit == 10_032 && outcome.maxClients == 10_000)
        #expect(outcome.messages == ["Increased maximum number of open files to 10032 (it was originally set to 1024)."])
    }

    @Test("an unprivileged process raises the soft limit up to a hard limit that suffices")
    func softUpToHard() {
        let recorder = Recorder { _, hard in hard <= 65_536 }
        let outcome = OpenFilesLimit.plan(maxClients: 10_000, soft: 1024, hard: 65_536, set: recorder.set)
        #expect(recorder.calls.map { [$0.0, $0.1] } == [[10_032, 65_536]])
        #expect(outcome.raised && outcome.limit == 10_032 && outcome.maxClients == 10_000)
    }

    @Test("when the hard limit is too low, the soft limit goes up to it and maxclients is reduced to fit")
    func reduced() {
        let recorder = Recorder { soft, hard in hard <= 4096 && soft <= 4096 }
        let outcome = OpenFilesLimit.plan(maxClients: 10_000, soft: 1024, hard: 4096, set: recorder.set)
        #expect(recorder.calls.map { [$0.0, $0.1] } == [[10_032, 10_032], [4096, 4096]])
        #expect(!outcome.raised && !outcome.fatal && outcome.limit == 4096 && outcome.maxClients == 4064)
        #expect(outcome.messages.count == 3)
        #expect(outcome.messages.first == "You requested maxclients of 10000 requiring at least 10032 max file descriptors.")
        #expect(outcome.messages.last?.hasPrefix("Current maximum open files is 4096. maxclients has been reduced to 4064") == true)
    }

    @Test("a limit that cannot be raised at all keeps it, and a limit of 32 or less is fatal")
    func stuck() {
        let refuse = Recorder { _, _ in false }
        let kept = OpenFilesLimit.plan(maxClients: 10_000, soft: 1024, hard: 1024, set: refuse.set)
        #expect(kept.limit == 1024 && kept.maxClients == 992 && !kept.fatal)
        let fatal = OpenFilesLimit.plan(maxClients: 10, soft: 32, hard: 32, set: Recorder { _, _ in false }.set)
        #expect(fatal.fatal)
    }

    @Test("this process: after adjusting for 100 clients, the soft limit is at least 132 or maxclients fits it")
    func live() {
        let outcome = OpenFilesLimit.adjust(maxClients: 100)
        #expect(outcome.limit.map { $0 >= 132 || UInt64(outcome.maxClients) + 32 <= $0 } == true)
    }
}
