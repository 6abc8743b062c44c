import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// What a finished external program produced.
struct ProgramOutput: Sendable {
    let command: String
    let status: Int32
    let stdout: Data
    let stderr: Data

    var standardOutput: String { String(decoding: stdout, as: UTF8.self) }
    var standardError: String { String(decoding: stderr, as: UTF8.self) }

    /// Standard output split into lines (the final newline does not start an extra empty line).
    var lines: [String] {
        var text = standardOutput
        if text.hasSuffix("\n") { text.removeLast() }
        return text.isEmpty ? [] : text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    }

    /// A one-line account for test failure messages.
    var summary: String {
        func clip(_ s: String) -> String { s.count > 2_000 ? String(s.prefix(2_000)) + "…" : s }
        return "`\(command)` exited \(status); stdout: \(clip(standardOutput).debugDescription); "
            + "stderr: \(clip(standardError).debugDescription)"
    }
}

/// A program the tests drive (redis-cli, redis-benchmark, python3), with the package that provides it.
struct ExternalProgram: Sendable {
    let name: String
    /// The Debian package that provides it, quoted in the error when it is missing.
    let package: String

    static let redisCli = ExternalProgram(name: "redis-cli", package: "redis-tools")
    static let redisBenchmark = ExternalProgram(name: "redis-benchmark", package: "redis-tools")
    static let python3 = ExternalProgram(name: "python3", package: "python3")
    /// Runs a program with other stdio buffering (`stdbuf -oL`), so that what it printed before being killed
    /// is not lost in its stdout buffer.
    static let stdbuf = ExternalProgram(name: "stdbuf", package: "coreutils")

    /// The server executable of `kind` itself, for runs that end on their own (`--version`, a bad config).
    static func server(_ kind: ServerProcess.Kind) -> ExternalProgram {
        ExternalProgram(name: kind.rawValue, package: kind == .redis ? "redis-server" : "", server: kind)
    }

    /// Set for ``server(_:)``: the program is found as ``ServerProcess`` finds it, not on PATH.
    var server: ServerProcess.Kind? = nil

    /// The program's full path (the first on PATH), or an error naming the package to install.
    func path() throws -> String {
        if let server { return try ServerProcess.executablePath(for: server) }
        return try ServerProcess.findOnPath(name, package: package)
    }

    /// Runs the program to completion with `arguments`, feeding it `input` on stdin (then end of file), and
    /// captures its exit status and output. A program still running after `timeout` seconds is killed and an
    /// error is thrown: a test never hangs on a program that waits for a reply that does not come.
    func run(_ arguments: [String], input: Data? = nil, timeout: TimeInterval = 30) throws -> ProgramOutput {
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

        // Drain both pipes and feed stdin on their own threads, so a chatty program never blocks on a full pipe.
        let io = DispatchGroup()
        let out = DataBox(), err = DataBox()
        drain(stdoutPipe.fileHandleForReading, into: out, group: io)
        drain(stderrPipe.fileHandleForReading, into: err, group: io)
        if let input {
            let writer = stdinPipe.fileHandleForWriting
            Thread.detachNewThread {
                // A program that exits without reading all of its input makes this write fail (EPIPE); the
                // program's exit status and output report that, not the writer.
                try? writer.write(contentsOf: input)
                try? writer.close()
            }
        }

        if exited.wait(timeout: .now() + timeout) == .timedOut {
            kill(process.processIdentifier, SIGKILL)
            _ = exited.wait(timeout: .now() + 5)
            _ = io.wait(timeout: .now() + 5)
            let partial = ProgramOutput(command: commandLine, status: -1, stdout: out.data, stderr: err.data)
            throw ProgramTimedOut(seconds: timeout, output: partial)
        }
        // The pipes reach end of file once the program (and anything it left holding them) is gone.
        _ = io.wait(timeout: .now() + 10)
        return ProgramOutput(command: commandLine, status: process.terminationStatus, stdout: out.data, stderr: err.data)
    }

    private func drain(_ handle: FileHandle, into box: DataBox, group: DispatchGroup) {
        group.enter()
        Thread.detachNewThread {
            while true {
                let chunk = handle.availableData  // blocks until data or end of file
                if chunk.isEmpty { break }
                box.append(chunk)
            }
            group.leave()
        }
    }
}

/// A program that did not finish in time (it was killed).
struct ProgramTimedOut: Error, CustomStringConvertible {
    let seconds: TimeInterval
    let output: ProgramOutput
    var description: String {
        "`\(output.command)` did not finish within \(Int(seconds)) s and was killed; output so far: "
            + String(output.standardOutput.suffix(1_000)).debugDescription
            + ", stderr: " + String(output.standardError.suffix(1_000)).debugDescription
    }
}

/// Bytes appended by one thread and read by another once it is done.
private final class DataBox: @unchecked Sendable {
    private let lock = NSLock()
    private var storage = Data()
    func append(_ chunk: Data) { lock.withLock { storage.append(chunk) } }
    var data: Data { lock.withLock { storage } }
}
