import CacheCore

extension ServerConfiguration {
    /// The canonical names of every directive this server understands, in table order.
    package static var directiveNames: [String] {
        ConfigurationDirective.all.map(\.name)
    }

    /// Applies one directive, as a config file line `name arguments...` would.
    ///
    /// Directives that `CONFIG SET` may not change are accepted here; use
    /// ``configSet(_:)`` for run-time changes.
    ///
    /// - Parameters:
    ///   - name: The directive name or alias, in any case.
    ///   - arguments: Its arguments, already unquoted.
    ///   - mode: ``ConfigurationApplyMode/startup`` while loading configuration.
    /// - Throws: ``ConfigurationDirectiveError`` with redis-server's reason.
    package mutating func apply(
        directive name: String, arguments: [String], mode: ConfigurationApplyMode = .startup
    ) throws(ConfigurationDirectiveError) {
        guard let directive = ConfigurationDirective.named(name) else {
            throw .unknownDirective(name)
        }
        try directive.apply(arguments, to: &self, mode: mode)
    }

    /// Applies `CONFIG SET name value [name value ...]`: all changes or none.
    ///
    /// Each directive must be changeable at run time and named once. Values of list
    /// directives (`bind`, `save`) are split at each space, as Redis does.
    ///
    /// - Parameters:
    ///   - changes: The name/value pairs, in the order given.
    ///   - allowProtected: Whether the protected configs (`dir`, `dbfilename`) may change: as
    ///     `enable-protected-configs` says for the client asking.
    /// - Throws: ``ConfigurationDirectiveError``; its ``ConfigurationDirectiveError/configSetReply``
    ///   is the error reply. The configuration is unchanged when this throws.
    package mutating func configSet(
        _ changes: [(name: String, value: String)], allowProtected: Bool = false
    ) throws(ConfigurationDirectiveError) {
        var directives: [ConfigurationDirective] = []
        var seen: Set<String> = []
        for (name, _) in changes {
            guard let directive = ConfigurationDirective.named(name), directive.isParameter else {
                throw .unknownDirective(name)
            }
            switch directive.mutability {
            case .runtime:
                break
            case .startupOnly:
                throw .notChangeableAtRuntime(directive: name, reason: "can't set immutable config")
            case .protected where allowProtected:
                break
            case .protected:
                throw .notChangeableAtRuntime(directive: name, reason: "can't set protected config")
            }
            guard seen.insert(directive.name).inserted else {
                throw .duplicate(directive: name)
            }
            directives.append(directive)
        }
        var updated = self
        for (directive, (_, value)) in zip(directives, changes) {
            let arguments: [String]
            switch directive.arity {
            case .single:
                arguments = [value]
            case .list:
                arguments = value.isEmpty ? [] : value.split(separator: " ", omittingEmptySubsequences: false).map(String.init)
            }
            try directive.apply(arguments, to: &updated, mode: .runtime)
        }
        self = updated
    }

    /// Answers `CONFIG GET pattern [pattern ...]` as redis-server 7.0 does.
    ///
    /// A pattern without `*`, `?` or `[` names one directive or alias, in any case,
    /// and is reported under the name as given. Other patterns are globs matched
    /// without regard to case against every name and alias. Each directive appears
    /// at most once, in the order first matched (Redis's order is unspecified).
    ///
    /// - Returns: Name/value pairs; empty when nothing matches.
    package func configGet(_ patterns: [String]) -> [(name: String, value: String)] {
        var result: [(name: String, value: String)] = []
        var reported: Set<String> = []
        for pattern in patterns {
            let isGlob = pattern.utf8.contains { $0 == UInt8(ascii: "*") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "[") }
            if !isGlob {
                guard !reported.contains(pattern.lowercased()),
                    let directive = ConfigurationDirective.named(pattern), directive.isParameter
                else { continue }
                reported.insert(pattern.lowercased())
                result.append((pattern, directive.render(self)))
                continue
            }
            for directive in ConfigurationDirective.all where directive.isParameter && !directive.isHidden {
                for name in [directive.name] + directive.aliases
                where !reported.contains(directive.name) && !reported.contains(name)
                    && Glob.matches(pattern: pattern, subject: name, caseInsensitive: true)
                {
                    reported.insert(name)
                    result.append((name, directive.render(self)))
                }
            }
        }
        return result
    }
}
