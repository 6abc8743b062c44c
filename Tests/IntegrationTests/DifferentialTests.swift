import CachedTestSupport
import Foundation
import Testing

/// Runs every corpus file under `Corpus/` against a reference `redis-server` and a candidate server, and
/// requires byte-identical replies. The candidate is `cached-server`, or a second `redis-server` when the
/// environment has `DIFF_AGAINST=redis` (which proves the corpus itself is deterministic).
@Suite("Differential: replies identical to Redis")
struct DifferentialTests {
    @Test("corpus file", arguments: DifferentialPaths.bundledCorpusFiles())
    func corpusFile(_ name: String) throws {
        let contents = try DifferentialPaths.bundledCorpusContents(name)
        let file = try CorpusParser.parse(name: name, contents: contents)
        let known = try KnownDifferences.parse(markdown: Self.commandsDocument())
        try DifferentialRun(file: file, knownDifferences: known, candidateKind: Self.candidateKind).run()
    }

    @Test("the corpus is bundled and every corpus file parses")
    func corpusParses() throws {
        let names = DifferentialPaths.bundledCorpusFiles()
        #expect(names.count >= 10, "corpus files found in the test bundle: \(names)")
        var commands = 0
        for name in names {
            let file = try CorpusParser.parse(name: name, contents: try DifferentialPaths.bundledCorpusContents(name))
            commands += file.entries.count
        }
        #expect(commands >= 300)
    }

    @Test("every command in docs/commands.md is exercised by the corpus")
    func corpusCoversSupportedCommands() throws {
        let supported = KnownDifferences.supportedCommands(markdown: try Self.commandsDocument())
        #expect(supported.count >= 40, "commands parsed from the table: \(supported)")
        var sent: Set<String> = []
        for name in DifferentialPaths.bundledCorpusFiles() {
            let file = try CorpusParser.parse(name: name, contents: try DifferentialPaths.bundledCorpusContents(name))
            for entry in file.entries {
                guard case .command(let arguments, _, _) = entry.action else { continue }
                let words = arguments.prefix(2).map { String(decoding: $0, as: UTF8.self).uppercased() }
                sent.insert(words[0])
                sent.insert(words.joined(separator: " "))
            }
        }
        for command in supported {
            #expect(sent.contains(command), "\(command) is in docs/commands.md but no corpus line sends it")
        }
    }

    @Test("corpus lines split like redis-cli arguments")
    func tokenizer() throws {
        func split(_ line: String) throws -> [String] {
            try CorpusParser.tokenize(Array(line.utf8)).map { Escaped.render($0.bytes) }
        }
        #expect(try split(#"SET k "a b""#) == [#""SET""#, #""k""#, #""a b""#])
        #expect(try split(#"ECHO "\x00\xff\r\n\q" 'it\'s' """#) == [#""ECHO""#, #""\x00\xff\r\nq""#, #""it's""#, #""""#])
        #expect(try split(#"ECHO 'a\nb'"#) == [#""ECHO""#, #""a\\nb""#])
        #expect(throws: CorpusParser.TokenizeError.self) { try split(#"ECHO "abc"#) }
        #expect(throws: CorpusParser.TokenizeError.self) { try split(#"ECHO "a"b"#) }
        let file = try CorpusParser.parse(name: "t", contents: "!absent lpush\n# comment\n~ ? @x KEYS *\n\"~\" KEYS\n!raw 2 \"PING\\r\\nPING\\r\\n\"\n!raw close \"*x\\r\\n\"\n")
        #expect(file.absentCommands == ["LPUSH"])
        #expect(file.entries.count == 4)
        guard case .command(let args, let comparison, let known) = file.entries[0].action else {
            Issue.record("not a command: \(file.entries[0])")
            return
        }
        #expect(args == [Array("KEYS".utf8), Array("*".utf8)] && comparison == [.unordered, .ignoreIntegers] && known == "x")
        guard case .command(let quoted, let none, nil) = file.entries[1].action else {
            Issue.record("not a command: \(file.entries[1])")
            return
        }
        #expect(quoted.count == 2 && none == [])
        guard case .raw(let bytes, 2) = file.entries[2].action, case .rawUntilClose = file.entries[3].action else {
            Issue.record("not raw entries: \(file.entries[2...])")
            return
        }
        #expect(bytes == Array("PING\r\nPING\r\n".utf8))
        let subscriber = try CorpusParser.parse(name: "t", contents: "!subscriber ? HELLO 3\n!subscriber PSUBSCRIBE \"?\"\n")
        guard case .subscriber(let hello, .ignoreIntegers) = subscriber.entries[0].action,
            case .subscriber(let psubscribe, []) = subscriber.entries[1].action
        else {
            Issue.record("not subscriber entries: \(subscriber.entries)")
            return
        }
        #expect(hello == [Array("HELLO".utf8), Array("3".utf8)] && psubscribe == [Array("PSUBSCRIBE".utf8), Array("?".utf8)])
        #expect(throws: CorpusSyntaxError.self) { try CorpusParser.parse(name: "t", contents: "!subscriber ?\n") }
        #expect(throws: CorpusSyntaxError.self) { try CorpusParser.parse(name: "t", contents: "GET a\n!absent lpush\n") }
        #expect(throws: CorpusSyntaxError.self) { try CorpusParser.parse(name: "t", contents: "!raw x \"PING\\r\\n\"\n") }
        let long = String(repeating: "PING\\r\\n", count: CorpusParser.rawLimit / 6 + 1)
        #expect(throws: CorpusSyntaxError.self) { try CorpusParser.parse(name: "t", contents: "!raw 1 \"\(long)\"\n") }
    }

    @Test("?, ?? and ~ compare only what is deterministic")
    func normalisation() throws {
        func same(_ a: String, _ b: String, _ comparison: ReplyComparison) throws -> Bool {
            try ReplyNode.parse(Array(a.utf8)).normalized(comparison) == ReplyNode.parse(Array(b.utf8)).normalized(comparison)
        }
        #expect(try same(":1\r\n", ":2\r\n", .ignoreIntegers))
        #expect(try !same("$1\r\na\r\n", "$1\r\nb\r\n", .ignoreIntegers))
        #expect(try same("*2\r\n$2\r\n10\r\n$1\r\n5\r\n", "*2\r\n$2\r\n11\r\n$3\r\n100\r\n", .shapeOnly))
        #expect(try !same("$-1\r\n", "$1\r\na\r\n", .shapeOnly))
        #expect(try !same("*1\r\n:1\r\n", "*2\r\n:1\r\n:1\r\n", .shapeOnly))
        #expect(try same("*2\r\n+a\r\n+b\r\n", "*2\r\n+b\r\n+a\r\n", .unordered))
        #expect(try !same("*2\r\n+a\r\n+b\r\n", "*2\r\n+b\r\n+a\r\n", []))
        #expect(try !same("*2\r\n+a\r\n+a\r\n", "*2\r\n+a\r\n+b\r\n", .unordered))
        #expect(try same("%2\r\n+a\r\n:1\r\n+b\r\n:2\r\n", "%2\r\n+b\r\n:2\r\n+a\r\n:1\r\n", .unordered))
        #expect(try !same("%2\r\n+a\r\n:1\r\n+b\r\n:2\r\n", "%2\r\n+a\r\n:2\r\n+b\r\n:1\r\n", .unordered))
        // SCAN: the cursor stays in place, the keys are a set.
        #expect(try same("*2\r\n$1\r\n0\r\n*2\r\n$1\r\na\r\n$1\r\nb\r\n", "*2\r\n$1\r\n0\r\n*2\r\n$1\r\nb\r\n$1\r\na\r\n", .unordered))
        #expect(try !same("*2\r\n$1\r\n0\r\n*1\r\n$1\r\na\r\n", "*2\r\n$1\r\n3\r\n*1\r\n$1\r\na\r\n", .unordered))
    }

    @Test("known differences are read from the Known differences section only")
    func knownDifferencesSection() throws {
        let markdown = """
            ## Supported commands
            | `GET key` | none |
            | `CLIENT SETNAME connection-name` | none |
            ### `not-here`: outside the section
            ## Known differences
            ### `kd-one`: something
            text
            ## Other
            ### `kd-two`: also outside
            """
        #expect(KnownDifferences.parse(markdown: markdown).ids == ["kd-one"])
        #expect(KnownDifferences.supportedCommands(markdown: markdown) == ["GET", "CLIENT SETNAME"])
        // The real document parses, and has the section.
        let real = try Self.commandsDocument()
        #expect(real.contains("\n## Known differences\n"))
    }

    static var candidateKind: ServerProcess.Kind {
        ProcessInfo.processInfo.environment["DIFF_AGAINST"] == "redis" ? .redis : .cached
    }

    static func commandsDocument() throws -> String {
        do {
            return try String(contentsOf: DifferentialPaths.commandsDocument, encoding: .utf8)
        } catch {
            throw TestEnvironmentError("cannot read docs/commands.md beside the package: \(error)")
        }
    }
}

/// One corpus file run against a fresh reference and a fresh candidate server.
struct DifferentialRun {
    let file: CorpusFile
    let knownDifferences: KnownDifferences
    let candidateKind: ServerProcess.Kind
    /// After this many mismatches in one file the rest are counted, not reported one by one.
    static let reportLimit = 25

    private func location(_ entry: CorpusEntry) -> SourceLocation {
        SourceLocation(
            fileID: "IntegrationTests/\(file.name)",
            filePath: DifferentialPaths.sourceCorpusDirectory.appendingPathComponent(file.name).path,
            line: entry.line, column: 1)
    }

    func run() throws {
        // Every known-difference marker must name an entry of docs/commands.md.
        for entry in file.entries {
            if case .command(_, _, let id?) = entry.action, !knownDifferences.ids.contains(id) {
                Issue.record(
                    "@\(id) is not listed under \"Known differences\" in docs/commands.md",
                    sourceLocation: location(entry))
            }
        }

        // Commands cached-server does not implement are disabled in Redis, so both give the unknown-command error.
        let disabled = file.absentCommands.flatMap { ["--rename-command", $0, ""] }
        let renamed = file.renamedCommands.flatMap { ["--rename-command", $0.0, $0.1] }
        let reference = try ServerProcess.start(.redis, arguments: disabled + renamed)
        let candidate: ServerProcess
        do {
            candidate = try ServerProcess.start(candidateKind, arguments: (candidateKind == .redis ? disabled : []) + renamed)
        } catch {
            reference.stop()
            throw error
        }
        defer {
            // Both at once: stopping a server can take seconds.
            let servers = [reference, candidate]
            DispatchQueue.concurrentPerform(iterations: servers.count) { servers[$0].stop() }
        }
        let transcript = ProcessInfo.processInfo.environment["DIFF_TRANSCRIPT"] != nil
        let candidateName = candidateKind == .redis ? "redis-server (candidate)" : "cached-server"

        func connect() throws -> (DifferentialConnection, DifferentialConnection) {
            (try DifferentialConnection(port: reference.port), try DifferentialConnection(port: candidate.port))
        }
        if candidateKind == .redis {
            // Shift the candidate's client ids by one, so that two Redis servers do not agree by chance on
            // replies that contain one (CLIENT ID, HELLO): a line that forgets its `?` fails here too.
            _ = try DifferentialConnection(port: candidate.port)
        }
        var (ref, cand) = try connect()
        let flush = DifferentialConnection.multibulk([Array("FLUSHALL".utf8)])
        for (name, connection) in [("redis-server", ref), (candidateName, cand)] {
            let reply = connection.send(flush) ? connection.readReplies(1) : .closedEarly([])
            guard reply == .bytes(Array("+OK\r\n".utf8), closed: false) else {
                Issue.record("FLUSHALL before \(file.name) on \(name): \(reply)")
                return
            }
        }

        var mismatches = 0
        // The subscriber connections of `!subscriber`, once opened: after every entry, what they received is
        // compared too.
        var subscribers: (reference: DifferentialConnection, candidate: DifferentialConnection)?
        func compareSubscribers(_ entry: CorpusEntry, comparison: ReplyComparison = []) -> Bool {
            guard let pair = subscribers else { return true }
            switch Self.drain(reference: pair.reference, candidate: pair.candidate) {
            case .failure(let problem):
                Issue.record(
                    "\(file.name):\(entry.line): subscriber after this entry: \(problem)", sourceLocation: location(entry))
                return false
            case .success(let (expected, received)):
                if transcript {
                    print("    subscriber -> \(expected.map { Escaped.render($0) }.joined(separator: " "))")
                }
                let equal = expected.count == received.count
                    && zip(expected, received).allSatisfy { Self.same(.bytes($0, closed: false), .bytes($1, closed: false), comparison) }
                if !equal {
                    mismatches += 1
                    Issue.record(
                        """
                        \(file.name):\(entry.line): the subscriber received different messages
                          \(entry.text)
                          redis-server:  \(expected.map { Escaped.render($0) }.joined(separator: " "))
                          \(candidateName): \(received.map { Escaped.render($0) }.joined(separator: " "))
                        """,
                        sourceLocation: location(entry))
                }
                return true
            }
        }
        for entry in file.entries {
            let referenceReply: Received
            let candidateReply: Received
            var comparison: ReplyComparison = []
            var knownID: String?
            var expectClose = false

            switch entry.action {
            case .reconnect:
                (ref, cand) = try connect()
                continue
            case .subscriber(let arguments, let c):
                if subscribers == nil {
                    subscribers = (try DifferentialConnection(port: reference.port), try DifferentialConnection(port: candidate.port))
                }
                let bytes = DifferentialConnection.multibulk(arguments)
                guard subscribers!.reference.send(bytes), subscribers!.candidate.send(bytes),
                    compareSubscribers(entry, comparison: c)
                else { return }
                continue
            case .command(let arguments, let c, let id):
                comparison = c
                knownID = id
                let bytes = DifferentialConnection.multibulk(arguments)
                referenceReply = ref.send(bytes) ? ref.readReplies(1) : .closedEarly([])
                candidateReply = cand.send(bytes) ? cand.readReplies(1) : .closedEarly([])
            case .raw(let bytes, let count):
                referenceReply = ref.send(bytes) ? ref.readReplies(count) : .closedEarly([])
                candidateReply = cand.send(bytes) ? cand.readReplies(count) : .closedEarly([])
            case .rawUntilClose(let bytes):
                expectClose = true
                referenceReply = ref.send(bytes) ? ref.readUntilClose() : .closedEarly([])
                candidateReply = cand.send(bytes) ? cand.readUntilClose() : .closedEarly([])
            }

            // The reference defines the expected behaviour; if it does not behave as the entry says, the
            // corpus is wrong.
            let referenceAsWritten: Bool
            if case .bytes(_, let closed) = referenceReply { referenceAsWritten = closed == expectClose } else {
                referenceAsWritten = false
            }
            if !referenceAsWritten {
                Issue.record(
                    """
                    \(file.name):\(entry.line): the corpus entry does not match what redis-server does
                      \(entry.text)
                      redis-server: \(referenceReply)
                    """,
                    sourceLocation: location(entry))
                return
            }

            if transcript {
                print("\(file.name):\(entry.line): \(entry.text)\n    -> \(referenceReply)")
            }
            let equal = Self.same(referenceReply, candidateReply, comparison)
            if let knownID, candidateKind == .cached, knownDifferences.ids.contains(knownID) {
                if equal {
                    Issue.record(
                        "\(file.name):\(entry.line): cached-server now matches Redis here; remove @\(knownID) (and its docs entry if unused)",
                        sourceLocation: location(entry))
                }
            } else if !equal {
                mismatches += 1
                if mismatches <= Self.reportLimit {
                    let how = Self.describe(comparison)
                    Issue.record(
                        """
                        \(file.name):\(entry.line): replies differ\(how)
                          \(entry.text)
                          redis-server:  \(referenceReply)
                          \(candidateName): \(candidateReply)
                        """,
                        sourceLocation: location(entry))
                }
            }
            if !candidateReply.isUsable && !expectClose {
                Issue.record(
                    "\(file.name):\(entry.line): \(candidateName) connection unusable after this entry; the rest of the file was not run",
                    sourceLocation: location(entry))
                return
            }
            if expectClose { (ref, cand) = try connect() }
            guard compareSubscribers(entry) else { return }
        }
        if mismatches > Self.reportLimit {
            Issue.record("\(file.name): \(mismatches) mismatches in all; only the first \(Self.reportLimit) are shown")
        }
    }

    /// What each subscriber connection received since the last call: the replies up to the reply to a PING
    /// sent now, that reply left out. The reference's are read until its PING reply; the candidate's are
    /// read as many, and its PING reply may come anywhere among them: the order of a message published by
    /// another connection and a reply to the subscriber's own PING is the event loops', not the server's.
    static func drain(
        reference: DifferentialConnection, candidate: DifferentialConnection
    ) -> Result<([[UInt8]], [[UInt8]]), DrainProblem> {
        let ping = DifferentialConnection.multibulk([Array("PING".utf8)])
        let pongs = [Array("*2\r\n$4\r\npong\r\n$0\r\n\r\n".utf8), Array("+PONG\r\n".utf8)]
        guard reference.send(ping), candidate.send(ping) else { return .failure(DrainProblem("connection closed")) }
        var expected: [[UInt8]] = []
        while true {
            guard case .bytes(let reply, false) = reference.readReplies(1) else {
                return .failure(DrainProblem("redis-server did not answer PING"))
            }
            if pongs.contains(reply) { break }
            expected.append(reply)
            if expected.count > 10_000 { return .failure(DrainProblem("redis-server sent no end of messages")) }
        }
        var received: [[UInt8]] = []
        var sawPong = false
        for _ in 0...expected.count {
            let next = candidate.readReplies(1)
            guard case .bytes(let reply, false) = next else {
                return .failure(DrainProblem("cached-server: \(next) after \(received.map { Escaped.render($0) })"))
            }
            if !sawPong && pongs.contains(reply) { sawPong = true } else { received.append(reply) }
        }
        if !sawPong {
            // More messages than the reference: the ones up to the PING reply are what differs.
            while received.count < expected.count + 100 {
                guard case .bytes(let reply, false) = candidate.readReplies(1) else { break }
                if pongs.contains(reply) { break }
                received.append(reply)
            }
        }
        return .success((expected, received))
    }

    struct DrainProblem: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    static func same(_ a: Received, _ b: Received, _ comparison: ReplyComparison) -> Bool {
        guard !comparison.isEmpty, case .bytes(let x, let xClosed) = a, case .bytes(let y, let yClosed) = b,
              xClosed == yClosed,
              let nx = try? ReplyNode.parse(x), let ny = try? ReplyNode.parse(y)
        else { return a == b }
        return nx.normalized(comparison) == ny.normalized(comparison)
    }

    static func describe(_ comparison: ReplyComparison) -> String {
        var parts: [String] = []
        if comparison.contains(.ignoreIntegers) { parts.append("integers ignored") }
        if comparison.contains(.shapeOnly) { parts.append("shape only") }
        if comparison.contains(.unordered) { parts.append("order ignored") }
        return parts.isEmpty ? "" : " (" + parts.joined(separator: ", ") + ")"
    }
}
