import Foundation
import Glibc

/// What a finished external program produced.
public struct ProgramOutput: Sendable {
    public let command: String
    public let status: Int32
    public let stdout: Data
    public let stderr: Data

    public var standardOutput: String { String(decoding: stdout, as: UTF8.self) }
    public var standardError: String { String(decoding: stderr, as: UTF8.self) }

    /// Standard output split into lines (the final newline does not start an extra empty line).
    public var lines: [String] {
        var text = standardOutput
        if text.hasSuffix("\n") { text.removeLast() }
        return text.isEmpty ? [] : text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    }

    /// A one-line account for test failure messages.
    public var summary: String {
        func clip(_ s: String) -> String { s.count > 2_000 ? String(s.prefix(2_000)) + "…" : s }
        return "`\(command)` exited \(status); stdout: \(clip(standardOutput).debugDescription); "
            + "stderr: \(clip(standardError).debugDescription)"
    }
}

/// A program the tests drive (redis-cli, python3, cached-fetch…), and where it is found.
public struct ExternalProgram: Sendable {
    /// Where a program is found.
    public enum Location: Sendable {
        /// On PATH; `package` is the Debian package that provides it, quoted in the error when it is missing.
        case path(package: String)
        /// An executable of this package, built beside the test bundle, or where the environment variable
        /// `overrideVariable` says.
        case built(overrideVariable: String)
    }

    public let name: String
    public let location: Location

    /// A program on PATH, provided by the Debian package `package`.
    public init(name: String, package: String) {
        self.init(name: name, location: .path(package: package))
    }

    public init(name: String, location: Location) {
        self.name = name
        self.location = location
    }

    public static let redisCli = ExternalProgram(name: "redis-cli", package: "redis-tools")
    public static let redisBenchmark = ExternalProgram(name: "redis-benchmark", package: "redis-tools")
    public static let python3 = ExternalProgram(name: "python3", package: "python3")
    /// OpenSSL's command-line tool, which makes the TLS tests' certificates.
    public static let openssl = ExternalProgram(name: "openssl", package: "openssl")
    /// Runs a program with other stdio buffering (`stdbuf -oL`), so that what it printed before being killed
    /// is not lost in its stdout buffer.
    public static let stdbuf = ExternalProgram(name: "stdbuf", package: "coreutils")
    /// `env`, to run a program with variables set for it alone (`env NAME=value program …`).
    public static let env = ExternalProgram(name: "env", package: "coreutils")
    /// This package's `cached-fetch` (or `CACHED_FETCH_BIN`).
    public static let cachedFetch = ExternalProgram(name: "cached-fetch", location: .built(overrideVariable: "CACHED_FETCH_BIN"))

    /// The server executable of `kind` itself, for runs that end on their own (`--version`, a bad config).
    public static func server(_ kind: ServerProcess.Kind) -> ExternalProgram {
        switch kind {
        case .cached: ExternalProgram(name: kind.rawValue, location: .built(overrideVariable: "CACHED_SERVER_BIN"))
        case .redis: ExternalProgram(name: kind.rawValue, package: "redis-server")
        }
    }

    /// The program's full path, or an error saying how to get it.
    public func path() throws -> String {
        switch location {
        case .path(let package): try Self.findOnPath(name, package: package)
        case .built(let variable): try Self.findBuilt(name, overrideVariable: variable)
        }
    }

    /// Runs the program to completion with `arguments`, feeding it `input` on stdin (then end of file), and
    /// captures its exit status and output. A program still running after `timeout` seconds is killed and an
    /// error is thrown: a test never hangs on a program that waits for a reply that does not come.
    public func run(_ arguments: [String], input: Data? = nil, timeout: TimeInterval = 30) throws -> ProgramOutput {
        try start(arguments, input: input).wait(timeout: timeout)
    }

    /// Starts the program with `arguments` and returns at once; ``RunningProgram/wait(timeout:)`` collects it.
    /// Both outputs are drained while it runs, so a chatty program never blocks on a full pipe.
    public func start(_ arguments: [String], input: Data? = nil) throws -> RunningProgram {
        let executable = try path()
        let commandLine = ([name] + arguments).joined(separator: " ")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let stdoutPipe = Pipe(), stderrPipe = Pipe(), stdinPipe = Pipe()
        process.standardOutput = stdoutPipe
        process.standardError = stderrPipe
        process.standardInput = input == nil ? FileHandle.nullDevice : stdinPipe
        let exited = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in exited.signal() }
        do {
            try process.runWithUnblockedSignals()
        } catch {
            throw TestEnvironmentError("could not start \(commandLine): \(error)")
        }
        let running = RunningProgram(command: commandLine, process: process, exited: exited)
        running.out.drain(stdoutPipe.fileHandleForReading)
        running.err.drain(stderrPipe.fileHandleForReading)
        if let input {
            let writer = stdinPipe.fileHandleForWriting
            Thread.detachNewThread {
                // A program that exits without reading all of its input makes this write fail (EPIPE); the
                // program's exit status and output report that, not the writer.
                try? writer.write(contentsOf: input)
                try? writer.close()
            }
        }
        return running
    }

    // MARK: locating executables

    /// The full path of a program on PATH, or an error naming the Debian package that provides it.
    public static func findOnPath(_ program: String, package: String) throws -> String {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        // (Without the map to String, the `+` below makes the elements Character arrays and no PATH entry matches.)
        for dir in path.split(separator: ":").map(String.init) + ["/usr/bin", "/usr/sbin"] {
            let candidate = "\(dir)/\(program)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        throw TestEnvironmentError("\(program) is not installed: apt-get install -y \(package) (or run `make deps`)")
    }

    /// An executable product of this package: the value of `overrideVariable` if set, else the file built beside
    /// the running test bundle (`swift build` puts every product in one directory).
    public static func findBuilt(_ product: String, overrideVariable: String) throws -> String {
        if let override = ProcessInfo.processInfo.environment[overrideVariable] { return override }
        let selfPath = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        var dir = URL(fileURLWithPath: selfPath).deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = dir.appendingPathComponent(product).path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            dir = dir.deletingLastPathComponent()
        }
        throw TestEnvironmentError(
            "\(product) was not found beside the test bundle: run `swift build` first (or set \(overrideVariable))")
    }
}

/// A program started by ``ExternalProgram/start(_:input:)``.
public final class RunningProgram: @unchecked Sendable {
    public let command: String
    private let process: Process
    private let exited: DispatchSemaphore
    let out = OutputCapture()
    let err = OutputCapture()

    init(command: String, process: Process, exited: DispatchSemaphore) {
        self.command = command
        self.process = process
        self.exited = exited
    }

    public var pid: Int32 { process.processIdentifier }

    /// What the program has written to standard error so far (it may still be running).
    public var standardErrorSoFar: String { String(decoding: err.data, as: UTF8.self) }

    /// Waits for the program to exit and returns what it produced. A program still running after `timeout`
    /// seconds is killed, and ``ProgramTimedOut`` carries its output so far.
    public func wait(timeout: TimeInterval) throws -> ProgramOutput {
        if exited.wait(timeout: .now() + timeout) == .timedOut {
            kill(process.processIdentifier, SIGKILL)
            _ = exited.wait(timeout: .now() + 5)
            out.waitForEnd(timeout: 5)
            err.waitForEnd(timeout: 5)
            throw ProgramTimedOut(seconds: timeout, output: output(status: -1))
        }
        exited.signal()  // a later wait returns at once
        // The pipes reach end of file once the program (and anything it left holding them) is gone.
        out.waitForEnd(timeout: 10)
        err.waitForEnd(timeout: 10)
        return output(status: process.terminationStatus)
    }

    private func output(status: Int32) -> ProgramOutput {
        ProgramOutput(command: command, status: status, stdout: out.data, stderr: err.data)
    }
}

/// A program that did not finish in time (it was killed).
public struct ProgramTimedOut: Error, CustomStringConvertible {
    public let seconds: TimeInterval
    public let output: ProgramOutput
    public var description: String {
        "`\(output.command)` did not finish within \(Int(seconds)) s and was killed; output so far: "
            + String(output.standardOutput.suffix(1_000)).debugDescription
            + ", stderr: " + String(output.standardError.suffix(1_000)).debugDescription
    }
}
