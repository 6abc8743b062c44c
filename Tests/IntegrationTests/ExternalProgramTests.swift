import CachedTestSupport
import Foundation
import Testing

/// The harness that runs client programs: it must never let a test hang, and must say what to install.
@Suite("running client programs")
struct ExternalProgramTests {
    @Test("a program still running at its timeout is killed and reported with its output so far")
    func timeoutKills() throws {
        let started = Date()
        let error = #expect(throws: ProgramTimedOut.self) {
            try ExternalProgram.python3.run(["-c", "import sys, time; print('waiting', flush=True); time.sleep(60)"], timeout: 5)
        }
        // Killed long before the program's minute is up (the timeout leaves Python time to start on a busy machine).
        #expect(Date().timeIntervalSince(started) < 30)
        #expect(error?.output.standardOutput == "waiting\n")
    }

    @Test("stdin is fed to the program and its exit status and both outputs are captured")
    func capturesEverything() throws {
        let script = "import sys; data = sys.stdin.read(); print(len(data)); print('to stderr', file=sys.stderr); sys.exit(3)"
        let out = try ExternalProgram.python3.run(["-c", script], input: Data(repeating: 65, count: 1_000_000))
        #expect(out.status == 3)
        #expect(out.standardOutput == "1000000\n")
        #expect(out.standardError == "to stderr\n")
    }

    @Test("a missing program is an error naming the package to install")
    func missingProgram() {
        let missing = ExternalProgram(name: "no-such-program-for-cached-tests", package: "some-package")
        let error = #expect(throws: TestEnvironmentError.self) { try missing.path() }
        #expect(error?.description.contains("apt-get install -y some-package") == true, "\(String(describing: error))")
    }
}
