import CachedTestSupport
import Foundation
import Glibc
import Testing

/// A datagram socket standing in for systemd's notification socket.
final class NotifySocket {
    let fd: Int32
    /// The value for `NOTIFY_SOCKET`: a path, or `@name` for the abstract namespace.
    let address: String
    private let path: String?

    init(abstract: Bool) throws {
        let name = "cached-notify-\(UUID().uuidString.prefix(8))"
        path = abstract ? nil : FileManager.default.temporaryDirectory.appendingPathComponent(name).path
        address = abstract ? "@" + name : path!
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw TestEnvironmentError("socket: errno \(errno)") }
        var socketAddress = sockaddr_un()
        socketAddress.sun_family = sa_family_t(AF_UNIX)
        var bytes = Array((path ?? name).utf8)
        if abstract { bytes.insert(0, at: 0) }
        withUnsafeMutableBytes(of: &socketAddress.sun_path) { raw in for (i, b) in bytes.enumerated() { raw[i] = b } }
        let length = MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + bytes.count + (abstract ? 0 : 1)
        let rc = withUnsafePointer(to: &socketAddress) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(length)) }
        }
        guard rc == 0 else { throw TestEnvironmentError("bind \(address): errno \(errno)") }
    }

    deinit {
        close(fd)
        if let path { unlink(path) }
    }

    /// The next datagram, or nil when none arrives within `timeout` seconds.
    func receive(timeout: TimeInterval) -> String? {
        var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard Glibc.poll(&descriptor, 1, Int32(max(0, timeout) * 1000)) == 1 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = recv(fd, &buffer, buffer.count, 0)
        return n > 0 ? String(decoding: buffer[0..<n], as: UTF8.self) : nil
    }

    /// Datagrams until one has a line `line`; all of them, in order. Fails after `timeout` seconds.
    func receive(until line: String, timeout: TimeInterval) throws -> [String] {
        let deadline = Date().addingTimeInterval(timeout)
        var messages: [String] = []
        while Date() < deadline {
            guard let message = receive(timeout: deadline.timeIntervalSinceNow) else { break }
            messages.append(message)
            if message.split(separator: "\n").contains(Substring(line)) { return messages }
        }
        throw TestEnvironmentError("no \(line) within \(Int(timeout)) s; received \(messages)")
    }
}

/// The daemon under systemd: notifications, the unit file, the installed tree.
@Suite("systemd integration")
struct SystemdLiveTests {
    static let root: String = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }
        return url.path
    }()

    @Test("sd_notify: READY=1 with a STATUS once listening, STOPPING=1 on SIGTERM", arguments: [false, true])
    func notifications(abstract: Bool) throws {
        let notify = try NotifySocket(abstract: abstract)
        let port = try freeLoopbackPort()
        let server = try ServerProcess.launch(
            .cached, arguments: ["--port", String(port), "--bind", "127.0.0.1"],
            environment: ["NOTIFY_SOCKET": notify.address], port: port)
        defer { server.stop() }

        let startup = try notify.receive(until: "READY=1", timeout: 15)

        // READY=1 comes after the listener is up: a connection succeeds at once.
        let fd = try connectLoopback(port: port)
        close(fd)
        let ready = try #require(startup.last)
        #expect(ready.contains("STATUS=Ready to accept connections on port \(port)"), "\(ready)")
        #expect(!startup.dropLast().contains { $0.contains("STOPPING=1") })

        server.send(signal: SIGTERM)
        let stopping = try notify.receive(until: "STOPPING=1", timeout: 10)
        #expect(stopping.last?.contains("STATUS=Shutting down") == true)
        #expect(server.waitForExit(timeout: 10) == 0)
    }

    @Test("loading a snapshot at start and saving one at exit: systemd is told to extend its timeouts")
    func timeoutExtensions() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cached-notify-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let settings = ["--dir", directory.path, "--save", "3600 1"]
        do {
            let first = try ServerProcess.start(.cached, arguments: settings)
            let c = try first.connect()
            #expect(try c.command("SET", "k", "v") == .ok)
            #expect(try c.command("SAVE") == .ok)
            first.stop()
        }

        let notify = try NotifySocket(abstract: false)
        let port = try freeLoopbackPort()
        let server = try ServerProcess.launch(
            .cached, arguments: ["--port", String(port), "--bind", "127.0.0.1"] + settings,
            environment: ["NOTIFY_SOCKET": notify.address], port: port)
        defer { server.stop() }

        let startup = try notify.receive(until: "READY=1", timeout: 15)
        let loading = try #require(startup.firstIndex { $0.contains("STATUS=Loading the snapshot") }, "\(startup)")
        let extended = try #require(startup.firstIndex { $0.contains("EXTEND_TIMEOUT_USEC=30000000") }, "\(startup)")
        #expect(loading < extended)

        let c = try server.connect()
        #expect(try c.command("GET", "k") == .bulk("v"))
        #expect(try c.command("SET", "k", "w") == .ok)
        server.send(signal: SIGTERM)
        let saving = try notify.receive(until: "STATUS=Saving the final snapshot", timeout: 10)
        #expect(saving.contains { $0.contains("STOPPING=1") })
        _ = try notify.receive(until: "EXTEND_TIMEOUT_USEC=30000000", timeout: 10)
        #expect(server.waitForExit(timeout: 15) == 0)
    }

    @Test("without NOTIFY_SOCKET nothing is sent and nothing is logged about systemd")
    func noNotifySocket() throws {
        let server = try ServerProcess.start(.cached)
        server.send(signal: SIGTERM)
        #expect(server.waitForExit(timeout: 10) == 0)
        #expect(!server.standardError().contains("systemd"))
    }

    /// `systemd-analyze verify` on a copy of the unit whose ExecStart names the binary built for these tests
    /// (verify checks that the program exists).
    private func verify(_ unit: String) throws -> ProgramOutput {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cached-unit-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("cached-server.service")
        try Data(unit.utf8).write(to: file)
        let analyze = ExternalProgram(name: "systemd-analyze", package: "systemd")
        return try analyze.run(["verify", file.path], timeout: 30)
    }

    private func unitForBuiltBinary() throws -> String {
        let shipped = try String(contentsOfFile: Self.root + "/deploy/cached-server.service", encoding: .utf8)
        let binary = try ExternalProgram.server(.cached).path()
        let replaced = shipped.replacingOccurrences(
            of: "\nExecStart=/usr/local/bin/cached-server ", with: "\nExecStart=\(binary) ")
        #expect(replaced != shipped)
        return replaced
    }

    @Test("systemd-analyze verify accepts the unit without a warning (and does warn about a misspelt setting)")
    func analyzeVerify() throws {
        let clean = try verify(try unitForBuiltBinary())
        #expect(clean.status == 0, "\(clean.summary)")
        #expect(!clean.standardError.contains("cached-server.service"), "\(clean.summary)")

        let misspelt = try verify(try unitForBuiltBinary().replacingOccurrences(of: "\nPrivateTmp=yes", with: "\nPrivateTemp=yes"))
        #expect(misspelt.standardError.contains("Unknown key 'PrivateTemp'"), "\(misspelt.summary)")
    }

    @Test("a daemon that refuses a damaged snapshot exits with a status the unit does not restart on")
    func damagedSnapshotIsNotRestarted() throws {
        let shipped = try String(contentsOfFile: Self.root + "/deploy/cached-server.service", encoding: .utf8)
        let line = try #require(shipped.split(separator: "\n").first { $0.hasPrefix("RestartPreventExitStatus=") })
        let statuses = line.dropFirst("RestartPreventExitStatus=".count).split(separator: " ").compactMap { Int32($0) }
        #expect(shipped.contains("\nRestart=on-failure\n"))

        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cached-unit-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try Data("this is not a snapshot\n".utf8).write(to: directory.appendingPathComponent("cached.snapshot"))
        let server = try ServerProcess.launch(
            .cached, arguments: ["--port", "0", "--unixsocket", directory.path + "/s.sock", "--dir", directory.path])
        defer { server.stop() }

        let status = try #require(server.waitForExit(timeout: 15))
        #expect(statuses.contains(status), "exit status \(status), RestartPreventExitStatus \(statuses)")
    }

    @Test("make install-files DESTDIR=...: binary, unit for PREFIX, config kept on a second install")
    func makeInstall() throws {
        let destination = FileManager.default.temporaryDirectory.appendingPathComponent("cached-install-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: destination) }
        let binary = try ExternalProgram.server(.cached).path()
        let make = ExternalProgram(name: "make", package: "make")
        func install(_ extra: [String] = []) throws {
            let out = try make.run(["-s", "-C", Self.root, "install-files", "DESTDIR=\(destination)", "INSTALL_BIN=\(binary)"] + extra)
            #expect(out.status == 0, "\(out.summary)")
        }
        let manager = FileManager.default

        try install()

        let installed = destination + "/usr/local/bin/cached-server"
        #expect(manager.isExecutableFile(atPath: installed))
        #expect(manager.contentsEqual(atPath: installed, andPath: binary))
        let unit = try String(contentsOfFile: destination + "/usr/local/lib/systemd/system/cached-server.service", encoding: .utf8)
        #expect(unit.contains("\nExecStart=/usr/local/bin/cached-server /etc/cached/cached.conf\n"))
        #expect(try manager.attributesOfItem(atPath: destination + "/usr/local/lib/systemd/system/cached-server.service")[.posixPermissions] as? Int == 0o644)
        let config = destination + "/etc/cached/cached.conf"
        #expect(manager.contentsEqual(atPath: config, andPath: Self.root + "/deploy/cached.conf"))

        // An operator's config survives a reinstall; the shipped one goes beside it.
        try Data("port 7000\n".utf8).write(to: URL(fileURLWithPath: config))
        try install()
        #expect(try String(contentsOfFile: config, encoding: .utf8) == "port 7000\n")
        #expect(manager.contentsEqual(atPath: config + ".default", andPath: Self.root + "/deploy/cached.conf"))

        // Another PREFIX: the unit follows the binary.
        try install(["PREFIX=/opt/cached"])
        let other = try String(contentsOfFile: destination + "/opt/cached/lib/systemd/system/cached-server.service", encoding: .utf8)
        #expect(other.contains("\nExecStart=/opt/cached/bin/cached-server /etc/cached/cached.conf\n"))
        #expect(manager.isExecutableFile(atPath: destination + "/opt/cached/bin/cached-server"))
    }
}
