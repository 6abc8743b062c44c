import Glibc
import RESP
import SystemPackage

/// One directive with its arguments, as read from a config file or the command line.
package struct ConfigurationLine: Sendable, Equatable {
    /// Where a line came from, for error messages.
    package enum Origin: Sendable, Equatable {
        /// Line `line` (counting from 1) of the config file at `path`.
        case file(path: String, line: Int)
        /// A `--directive` flag on the command line.
        case commandLine
    }

    /// The directive name, lowercased.
    package var directive: String
    /// The arguments, unquoted.
    package var arguments: [String]
    /// Where the line came from.
    package var origin: Origin
    /// The line as written (trimmed), or for flags as redis-server shows them.
    package var text: String

    /// A line for `directive` (lowercased here) with `arguments`.
    package init(directive: String, arguments: [String], origin: Origin, text: String) {
        self.directive = directive.lowercased()
        self.arguments = arguments
        self.origin = origin
        self.text = text
    }
}

/// A configuration that cannot be loaded. Its ``description`` is what redis-server
/// prints before exiting, naming the file and line.
package enum ConfigurationLoadError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A config file (or included file) could not be read.
    case cannotOpen(path: String, reason: String)
    /// A line is malformed or its directive rejected it.
    case badLine(ConfigurationLine.Origin, text: String, reason: String)
    /// The command line itself is malformed.
    case badCommandLine(reason: String)

    /// The fatal error text, for example:
    ///
    /// ```
    /// *** FATAL CONFIG FILE ERROR ***
    /// Reading the configuration file '/etc/cached.conf', at line 4
    /// >>> 'maxmemory 1x'
    /// argument must be a memory value
    /// ```
    package var description: String {
        switch self {
        case .cannotOpen(let path, let reason):
            return "Fatal error, can't open config file '\(path)': \(reason)"
        case .badLine(let origin, let text, let reason):
            let location: String
            switch origin {
            case .file(let path, let line):
                location = "Reading the configuration file '\(path)', at line \(line)"
            case .commandLine:
                location = "Reading the command line options"
            }
            return "\n*** FATAL CONFIG FILE ERROR ***\n\(location)\n>>> '\(text)'\n\(reason)"
        case .badCommandLine(let reason):
            return "Bad command line: \(reason)"
        }
    }
}

/// Reading redis.conf-style config files.
///
/// Each line holds a directive and its arguments separated by white space. Blank
/// lines and lines starting with `#` are ignored. Arguments may be quoted as in
/// redis-server (see ``splitArguments(_:)-([UInt8])``). `include PATH` reads another
/// file at that point; a relative path is taken from the including file's
/// directory, and a path with `*`, `?` or `[` includes every matching file (none is fine).
package enum ConfigurationFile {
    /// Splits one line into arguments like Redis's `sdssplitargs`.
    ///
    /// Arguments are separated by spaces, tabs, CR or LF. In double quotes,
    /// `\n \r \t \b \a \\ \"` and `\xHH` are escapes; in single quotes only `\'` is.
    /// A closing quote must be followed by white space or the end of the line.
    ///
    /// - Returns: The arguments' bytes, or `nil` when quotes are unbalanced.
    package static func splitArguments(_ line: [UInt8]) -> [[UInt8]]? {
        RESPRequestParser.splitArguments(line)
    }

    /// Splits one line into arguments like Redis's `sdssplitargs`; see
    /// ``splitArguments(_:)-([UInt8])``. Bytes that are not UTF-8 are replaced.
    package static func splitArguments(_ line: String) -> [String]? {
        splitArguments(Array(line.utf8))?.map { String(decoding: $0, as: UTF8.self) }
    }

    /// The directive lines of a config file's contents, without following `include`s.
    ///
    /// - Parameters:
    ///   - contents: The file's bytes.
    ///   - path: The file's name, for error messages.
    /// - Throws: ``ConfigurationLoadError/badLine(_:text:reason:)`` for unbalanced quotes.
    package static func parse(_ contents: [UInt8], path: String) throws(ConfigurationLoadError) -> [ConfigurationLine] {
        var lines: [ConfigurationLine] = []
        for (number, rawLine) in contents.split(separator: 0x0A, omittingEmptySubsequences: false).enumerated() {
            let trimmed = rawLine.drop { isTrimmed($0) }.reversed().drop { isTrimmed($0) }.reversed()
            guard let first = trimmed.first, first != UInt8(ascii: "#") else { continue }
            let text = String(decoding: trimmed, as: UTF8.self)
            let origin = ConfigurationLine.Origin.file(path: path, line: number + 1)
            guard let arguments = splitArguments(Array(trimmed)) else {
                throw .badLine(origin, text: text, reason: "Unbalanced quotes in configuration line")
            }
            guard let name = arguments.first else { continue }
            lines.append(
                ConfigurationLine(
                    directive: String(decoding: name, as: UTF8.self),
                    arguments: arguments.dropFirst().map { String(decoding: $0, as: UTF8.self) },
                    origin: origin, text: text))
        }
        return lines
    }

    /// The directive lines of the config file at `path`, with every `include`
    /// replaced by the lines of the files it names.
    ///
    /// - Throws: ``ConfigurationLoadError`` if a file cannot be read, a line has
    ///   unbalanced quotes, an `include` is malformed, or files include each other in a cycle.
    package static func read(path: String) throws(ConfigurationLoadError) -> [ConfigurationLine] {
        var reading: [String] = []
        return try read(path: path, reading: &reading)
    }

    /// `lines` with every `include` replaced by the lines of the files it names;
    /// relative paths are taken from the current directory. Used for command-line flags.
    package static func expandingIncludes(_ lines: [ConfigurationLine]) throws(ConfigurationLoadError) -> [ConfigurationLine] {
        var reading: [String] = []
        return try expandingIncludes(lines, baseDirectory: nil, reading: &reading)
    }

    private static func read(path: String, reading: inout [String]) throws(ConfigurationLoadError) -> [ConfigurationLine] {
        let contents: [UInt8]
        do {
            contents = try Self.contents(of: path)
        } catch {
            throw .cannotOpen(path: path, reason: "\(error)")
        }
        let canonical = canonicalPath(path) ?? path
        reading.append(canonical)
        defer { reading.removeLast() }
        return try expandingIncludes(parse(contents, path: path), baseDirectory: directoryName(of: path), reading: &reading)
    }

    private static func expandingIncludes(
        _ lines: [ConfigurationLine], baseDirectory: String?, reading: inout [String]
    ) throws(ConfigurationLoadError) -> [ConfigurationLine] {
        var result: [ConfigurationLine] = []
        for line in lines {
            guard line.directive == "include" else {
                result.append(line)
                continue
            }
            guard line.arguments.count == 1 else {
                throw .badLine(line.origin, text: line.text, reason: "Bad directive or wrong number of arguments")
            }
            var target = line.arguments[0]
            if let baseDirectory, !target.hasPrefix("/") {
                target = baseDirectory + "/" + target
            }
            for path in try includedPaths(target) {
                if let canonical = canonicalPath(path), let start = reading.firstIndex(of: canonical) {
                    let cycle = (reading[start...] + [canonical]).joined(separator: " -> ")
                    throw .badLine(line.origin, text: line.text, reason: "Include cycle: \(cycle)")
                }
                result += try read(path: path, reading: &reading)
            }
        }
        return result
    }

    /// The files an `include` names: the path itself, or every match of a wildcard pattern.
    private static func includedPaths(_ target: String) throws(ConfigurationLoadError) -> [String] {
        guard target.contains(where: { $0 == "*" || $0 == "?" || $0 == "[" }) else { return [target] }
        var matches = glob_t()
        defer { globfree(&matches) }
        guard glob(target, 0, nil, &matches) == 0 else { return [] }
        var paths: [String] = []
        for index in 0..<Int(matches.gl_pathc) {
            if let path = matches.gl_pathv[index] {
                paths.append(String(cString: path))
            }
        }
        return paths
    }

    /// The bytes of the file at `path` (a config file, an included one, the ACL file). The error is the
    /// system's (an `Errno`, which reads as its explanation).
    static func contents(of path: String) throws -> [UInt8] {
        let file = try FileDescriptor.open(FilePath(path), .readOnly)
        defer { try? file.close() }
        var contents: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = try chunk.withUnsafeMutableBytes { try file.read(into: $0) }
            if count == 0 { return contents }
            contents += chunk[0..<count]
        }
    }

    private static func canonicalPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    private static func directoryName(of path: String) -> String? {
        guard let slash = path.lastIndex(of: "/") else { return nil }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    private static func isTrimmed(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0D || byte == 0x0A
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
