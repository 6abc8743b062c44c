import Foundation
/// The command line of `cached-server`, split into a config file and directive flags,
/// following redis-server's rules:
///
/// ```
/// cached-server [configfile] [--config FILE] [--<directive> value [value ...]] ...
/// ```
///
/// - A first argument not starting with `-` names the config file; so does `--config FILE`.
/// - `--name` starts a directive. The argument after it is always its first value,
///   even if it starts with `--` (so `--requirepass --secret` works). Further
///   arguments not starting with `--` are more values: `--save 900 1 300 10`,
///   `--bind 127.0.0.1 ::1`.
/// - `--save` followed by another flag or by nothing means `--save ""`.
/// - `"--port 7000"` as one argument is split like a config file line.
///
/// Directives are applied after the config file, in order, so flags win.
package struct ServerCommandLine: Sendable, Equatable {
    /// The config file to read first, if any.
    package var configFile: String?
    /// The directive flags, in the order given, with lowercased names.
    package var directives: [ConfigurationLine]

    /// A command line with the given parts.
    package init(configFile: String? = nil, directives: [ConfigurationLine] = []) {
        self.configFile = configFile
        self.directives = directives
    }

    /// Splits the arguments (without the program name).
    ///
    /// - Throws: ``ConfigurationLoadError/badCommandLine(reason:)`` for an argument
    ///   that is neither the config file nor part of a directive, a second config file,
    ///   `--config` without a file, or unbalanced quotes inside one argument.
    ///   Unknown directives are not detected here but when applying them.
    package static func parse(_ arguments: [String]) throws(ConfigurationLoadError) -> ServerCommandLine {
        var result = ServerCommandLine()
        var index = arguments.startIndex
        if let first = arguments.first, !first.hasPrefix("-") {
            result.configFile = first
            index += 1
        }
        // The directive being collected, and whether it has a value yet.
        var current: (name: String, arguments: [String])?
        var currentHasValue = false
        func finishCurrent() {
            if let current {
                result.directives.append(flagLine(current.name, current.arguments))
            }
            current = nil
        }
        while index < arguments.endIndex {
            let argument = arguments[index]
            let startsDirective = argument.hasPrefix("--") && (current == nil || currentHasValue)
            guard startsDirective else {
                guard current != nil else {
                    if argument == "-" {
                        throw .badCommandLine(reason: "reading the configuration from standard input is not supported")
                    }
                    throw .badCommandLine(
                        reason: "unexpected argument '\(argument)': directives are given as --name value")
                }
                current?.arguments.append(argument)
                currentHasValue = true
                index += 1
                continue
            }
            finishCurrent()
            guard let words = ConfigurationFile.splitArguments(String(argument.dropFirst(2))) else {
                throw .badCommandLine(reason: "unbalanced quotes in '\(argument)'")
            }
            guard let name = words.first?.lowercased() else {
                throw .badCommandLine(reason: "unexpected argument '\(argument)': directives are given as --name value")
            }
            if name == "config" && words.count == 1 {
                guard index + 1 < arguments.endIndex else {
                    throw .badCommandLine(reason: "--config needs the path of a config file")
                }
                let file = arguments[index + 1]
                if let existing = result.configFile {
                    throw .badCommandLine(reason: "more than one config file given ('\(existing)' and '\(file)')")
                }
                result.configFile = file
                index += 2
                continue
            }
            current = (name, Array(words.dropFirst()))
            currentHasValue = words.count > 1
            let next = index + 1 < arguments.endIndex ? arguments[index + 1] : nil
            if name == "save" && words.count == 1 && (next == nil || next!.hasPrefix("--")) {
                current?.arguments = [""]
                currentHasValue = true
            }
            index += 1
        }
        finishCurrent()
        return result
    }

    /// A flag as redis-server shows it in errors: the name, then each value quoted.
    private static func flagLine(_ name: String, _ arguments: [String]) -> ConfigurationLine {
        let text = ([name] + arguments.map(quoted)).joined(separator: " ")
        return ConfigurationLine(directive: name, arguments: arguments, origin: .commandLine, text: text)
    }

    /// Quotes like Redis's `sdscatrepr`.
    private static func quoted(_ value: String) -> String {
        var result = "\""
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "\\"): result += "\\\\"
            case UInt8(ascii: "\""): result += "\\\""
            case 0x0A: result += "\\n"
            case 0x0D: result += "\\r"
            case 0x09: result += "\\t"
            case 0x07: result += "\\a"
            case 0x08: result += "\\b"
            case 0x20...0x7E: result += String(UnicodeScalar(byte))
            default:
                let hex = String(byte, radix: 16)
                result += "\\x" + (hex.count == 1 ? "0" + hex : hex)
            }
        }
        return result + "\""
    }
}

extension ServerConfiguration {
    /// Builds a configuration the way redis-server does at startup: defaults, then
    /// the config file (with its `include`s), then `overrides` in order.
    ///
    /// - Parameters:
    ///   - configFile: Path of the config file, or `nil` for none.
    ///   - overrides: Directives from the command line; they may `include` files too.
    /// - Throws: ``ConfigurationLoadError`` naming the file and line (or flag) at fault.
    package static func load(
        configFile: String?, overrides: [ConfigurationLine] = []
    ) throws(ConfigurationLoadError) -> ServerConfiguration {
        var lines: [ConfigurationLine] = []
        if let configFile {
            lines = try ConfigurationFile.read(path: configFile)
        }
        lines += try ConfigurationFile.expandingIncludes(overrides)
        var configuration = ServerConfiguration()
        if let configFile {
            configuration.configFile = configFile.hasPrefix("/")
                ? configFile : FileManager.default.currentDirectoryPath + "/" + configFile
        }
        for line in lines {
            do {
                try configuration.apply(directive: line.directive, arguments: line.arguments, mode: .startup)
            } catch {
                throw .badLine(line.origin, text: line.text, reason: error.configFileReason)
            }
        }
        return configuration
    }

    /// Builds the configuration a command line asks for; see ``load(configFile:overrides:)``.
    package static func load(_ commandLine: ServerCommandLine) throws(ConfigurationLoadError) -> ServerConfiguration {
        try load(configFile: commandLine.configFile, overrides: commandLine.directives)
    }
}
