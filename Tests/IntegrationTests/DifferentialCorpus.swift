import CachedTestSupport
import Foundation

// The corpus line format (documented for corpus authors in Corpus/README.md).

/// How a reply is compared between the reference and the candidate server.
struct ReplyComparison: OptionSet, Sendable, Hashable {
    let rawValue: UInt8
    /// `?`: integer values are ignored (a client id, a PTTL that may have ticked); everything else is exact.
    static let ignoreIntegers = ReplyComparison(rawValue: 1 << 0)
    /// `??`: only the shape is compared: reply types, aggregate sizes, null versus non-null.
    static let shapeOnly = ReplyComparison(rawValue: 1 << 1)
    /// `~`: an aggregate whose elements are all scalars is compared as a multiset (a map: as a set of pairs).
    static let unordered = ReplyComparison(rawValue: 1 << 2)
}

/// One entry of a corpus file, with the line it came from.
struct CorpusEntry: Sendable {
    enum Action: Sendable {
        /// Send `arguments` as a RESP multibulk and compare the one reply.
        case command(arguments: [[UInt8]], comparison: ReplyComparison, knownDifference: String?)
        /// Send `bytes` as they are and compare the next `replies` replies.
        case raw(bytes: [UInt8], replies: Int)
        /// Send `bytes` as they are, then compare everything the server writes until it closes the connection.
        case rawUntilClose(bytes: [UInt8])
        /// Close both connections and open fresh ones (RESP2, database 0, no name).
        case reconnect
        /// Send `arguments` on the subscriber connections (opened on first use) and compare what they answer.
        case subscriber(arguments: [[UInt8]], comparison: ReplyComparison)
    }

    let line: Int
    /// The line as written in the file, for failure messages.
    let text: String
    let action: Action
}

/// A parsed corpus file.
struct CorpusFile: Sendable {
    let name: String
    /// Commands the reference Redis is started without (`!absent`): cached-server does not implement them, so
    /// both must answer with the unknown-command error.
    let absentCommands: [String]
    /// Commands both servers are started with renamed (`!rename`): old name, new name.
    var renamedCommands: [(String, String)] = []
    let entries: [CorpusEntry]
}

struct CorpusSyntaxError: Error, CustomStringConvertible {
    let file: String
    let line: Int
    let message: String
    var description: String { "\(file):\(line): \(message)" }
}

enum CorpusParser {
    /// The most bytes one `!raw` line sends. The runner sends them in one `send` on a loopback connection with
    /// nothing else in flight: they go out as one segment and are all there when the server wakes, and each
    /// server takes that many in one pass of its event loop (Redis reads 16 KB at a time; SwiftNIO reads up to
    /// 16 times, at least 64 bytes each, before it reports the read complete). So a pipeline on one line is
    /// handled as one read, and what Redis does after a read (tracking's BCAST invalidations) comes out the same.
    static let rawLimit = 1024

    /// A token of a line, and whether it was (at least partly) quoted: quoted tokens are never modifiers or
    /// directives.
    struct Token: Equatable {
        var bytes: [UInt8]
        var quoted: Bool
        var text: String { String(decoding: bytes, as: UTF8.self) }
    }

    static func parse(name: String, contents: String) throws -> CorpusFile {
        var absent: [String] = []
        var renamed: [(String, String)] = []
        var entries: [CorpusEntry] = []
        var lineNumber = 0
        for rawLine in contents.split(separator: "\n", omittingEmptySubsequences: false) {
            lineNumber += 1
            let line = String(rawLine)
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.isEmpty || trimmed.hasPrefix("#") { continue }
            func fail(_ message: String) -> CorpusSyntaxError {
                CorpusSyntaxError(file: name, line: lineNumber, message: message)
            }
            var tokens: [Token]
            do {
                tokens = try tokenize(Array(line.utf8))
            } catch let error as TokenizeError {
                throw fail(error.message)
            }
            let head = tokens[0]
            if !head.quoted, head.text.hasPrefix("!") {
                switch head.text {
                case "!absent":
                    guard entries.isEmpty else { throw fail("!absent must come before the first command") }
                    guard tokens.count > 1 else { throw fail("!absent needs at least one command name") }
                    absent += tokens.dropFirst().map { $0.text.uppercased() }
                case "!rename":
                    guard entries.isEmpty else { throw fail("!rename must come before the first command") }
                    guard tokens.count == 3 else { throw fail("!rename needs a command name and its new name") }
                    renamed.append((tokens[1].text, tokens[2].text))
                case "!subscriber":
                    var rest = Array(tokens.dropFirst())
                    var comparison: ReplyComparison = []
                    while let first = rest.first, !first.quoted, first.text == "?" || first.text == "~" {
                        comparison.insert(first.text == "?" ? .ignoreIntegers : .unordered)
                        rest.removeFirst()
                    }
                    guard !rest.isEmpty else { throw fail("!subscriber needs a command") }
                    entries.append(CorpusEntry(
                        line: lineNumber, text: trimmed,
                        action: .subscriber(arguments: rest.map(\.bytes), comparison: comparison)))
                case "!reconnect":
                    guard tokens.count == 1 else { throw fail("!reconnect takes no arguments") }
                    entries.append(CorpusEntry(line: lineNumber, text: trimmed, action: .reconnect))
                case "!raw":
                    guard tokens.count == 3 else { throw fail("usage: !raw <replies>|close \"bytes\"") }
                    let bytes = tokens[2].bytes
                    guard !bytes.isEmpty else { throw fail("!raw needs bytes to send") }
                    guard bytes.count <= rawLimit else {
                        throw fail("!raw sends at most \(rawLimit) bytes (they must arrive in one read), not \(bytes.count)")
                    }
                    if tokens[1].text == "close" {
                        entries.append(CorpusEntry(line: lineNumber, text: trimmed, action: .rawUntilClose(bytes: bytes)))
                    } else if let count = Int(tokens[1].text), count >= 0 {
                        entries.append(CorpusEntry(line: lineNumber, text: trimmed, action: .raw(bytes: bytes, replies: count)))
                    } else {
                        throw fail("!raw: the reply count must be a number or `close`, not \(tokens[1].text)")
                    }
                default:
                    throw fail("unknown directive \(head.text)")
                }
                continue
            }
            var comparison: ReplyComparison = []
            var known: String?
            while let first = tokens.first, !first.quoted {
                let text = first.text
                if text == "?" {
                    comparison.insert(.ignoreIntegers)
                } else if text == "??" {
                    comparison.insert(.shapeOnly)
                } else if text == "~" {
                    comparison.insert(.unordered)
                } else if text.hasPrefix("@"), text.count > 1 {
                    guard known == nil else { throw fail("more than one known-difference marker") }
                    known = String(text.dropFirst())
                } else {
                    break
                }
                tokens.removeFirst()
            }
            guard !tokens.isEmpty else { throw fail("a comparison modifier without a command") }
            entries.append(CorpusEntry(
                line: lineNumber, text: trimmed,
                action: .command(arguments: tokens.map(\.bytes), comparison: comparison, knownDifference: known)))
        }
        return CorpusFile(name: name, absentCommands: absent, renamedCommands: renamed, entries: entries)
    }

    struct TokenizeError: Error {
        let message: String
    }

    /// Splits a line into arguments the way `redis-cli` does (Redis's `sdssplitargs`): whitespace separates
    /// arguments; `"..."` understands `\n \r \t \b \a \\ \" \xHH` (any other `\c` is `c`); `'...'` understands
    /// only `\'`; a closing quote must be followed by whitespace or the end of the line.
    static func tokenize(_ line: [UInt8]) throws -> [Token] {
        var tokens: [Token] = []
        var i = 0
        let n = line.count
        func isSpace(_ c: UInt8) -> Bool { c == 0x20 || (c >= 0x09 && c <= 0x0D) }
        func hexValue(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
            default: return nil
            }
        }
        while true {
            while i < n && isSpace(line[i]) { i += 1 }
            if i >= n { break }
            var token = Token(bytes: [], quoted: false)
            var inDouble = false
            var inSingle = false
            var done = false
            while !done {
                if inDouble {
                    guard i < n else { throw TokenizeError(message: "unbalanced double quotes") }
                    let c = line[i]
                    if c == UInt8(ascii: "\\") && i + 3 < n && line[i + 1] == UInt8(ascii: "x"),
                       let hi = hexValue(line[i + 2]), let lo = hexValue(line[i + 3]) {
                        token.bytes.append(hi << 4 | lo)
                        i += 3
                    } else if c == UInt8(ascii: "\\") && i + 1 < n {
                        i += 1
                        switch line[i] {
                        case UInt8(ascii: "n"): token.bytes.append(0x0A)
                        case UInt8(ascii: "r"): token.bytes.append(0x0D)
                        case UInt8(ascii: "t"): token.bytes.append(0x09)
                        case UInt8(ascii: "b"): token.bytes.append(0x08)
                        case UInt8(ascii: "a"): token.bytes.append(0x07)
                        default: token.bytes.append(line[i])
                        }
                    } else if c == UInt8(ascii: "\"") {
                        guard i + 1 >= n || isSpace(line[i + 1]) else {
                            throw TokenizeError(message: "a closing quote must be followed by a space")
                        }
                        done = true
                    } else {
                        token.bytes.append(c)
                    }
                } else if inSingle {
                    guard i < n else { throw TokenizeError(message: "unbalanced single quotes") }
                    let c = line[i]
                    if c == UInt8(ascii: "\\") && i + 1 < n && line[i + 1] == UInt8(ascii: "'") {
                        token.bytes.append(UInt8(ascii: "'"))
                        i += 1
                    } else if c == UInt8(ascii: "'") {
                        guard i + 1 >= n || isSpace(line[i + 1]) else {
                            throw TokenizeError(message: "a closing quote must be followed by a space")
                        }
                        done = true
                    } else {
                        token.bytes.append(c)
                    }
                } else {
                    if i >= n || isSpace(line[i]) {
                        done = true
                        continue  // do not step past the end
                    }
                    switch line[i] {
                    case UInt8(ascii: "\""): inDouble = true; token.quoted = true
                    case UInt8(ascii: "'"): inSingle = true; token.quoted = true
                    default: token.bytes.append(line[i])
                    }
                }
                if i < n { i += 1 }
            }
            tokens.append(token)
        }
        return tokens
    }
}

/// The intentional differences listed in `docs/commands.md` under "Known differences": each is a level-3
/// heading that starts with its id in backticks, e.g. ``### `example-id`: what differs``.
struct KnownDifferences: Sendable {
    let ids: Set<String>

    static func parse(markdown: String) -> KnownDifferences {
        var ids: Set<String> = []
        var inSection = false
        for line in markdown.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("## ") {
                inSection = line.dropFirst(3).trimmingCharacters(in: .whitespaces).lowercased() == "known differences"
            } else if inSection, line.hasPrefix("### `") {
                let rest = line.dropFirst(5)
                if let end = rest.firstIndex(of: "`"), end > rest.startIndex {
                    ids.insert(String(rest[rest.startIndex..<end]))
                }
            }
        }
        return KnownDifferences(ids: ids)
    }

    /// The supported commands listed in the first column of the table(s) under "Supported commands": the
    /// leading upper-case words of each row's first code span (`CLIENT SETNAME`, `GET`).
    static func supportedCommands(markdown: String) -> [String] {
        var commands: [String] = []
        var inSection = false
        for line in markdown.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("## ") {
                inSection = line.dropFirst(3).trimmingCharacters(in: .whitespaces).lowercased() == "supported commands"
            } else if inSection, line.hasPrefix("| `") {
                let rest = line.dropFirst(3)
                guard let end = rest.firstIndex(of: "`") else { continue }
                let words = rest[rest.startIndex..<end].split(separator: " ")
                let name = words.prefix { $0.allSatisfy { $0.isUppercase } }.joined(separator: " ")
                if !name.isEmpty { commands.append(name) }
            }
        }
        return commands
    }
}

/// Where the corpus and the documentation live in the source tree (for failure locations and the docs file).
enum DifferentialPaths {
    static let testsDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    static let sourceCorpusDirectory = testsDirectory.appendingPathComponent("Corpus")
    static let commandsDocument = testsDirectory
        .deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("docs/commands.md")

    /// The corpus files copied into the test bundle, sorted by name.
    static func bundledCorpusFiles() -> [String] {
        guard let dir = Bundle.module.url(forResource: "Corpus", withExtension: nil),
              let names = try? FileManager.default.contentsOfDirectory(atPath: dir.path)
        else { return [] }
        return names.filter { $0.hasSuffix(".corpus") }.sorted()
    }

    static func bundledCorpusContents(_ name: String) throws -> String {
        guard let dir = Bundle.module.url(forResource: "Corpus", withExtension: nil) else {
            throw TestEnvironmentError("the Corpus resource is missing from the test bundle")
        }
        return try String(contentsOf: dir.appendingPathComponent(name), encoding: .utf8)
    }
}
