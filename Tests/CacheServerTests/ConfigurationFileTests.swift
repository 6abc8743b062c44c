import CacheServer
import Glibc
import Testing

/// A fresh temporary directory holding the given files, removed after `body`.
private func withFiles<T>(_ files: [String: String], _ body: (String) throws -> T) throws -> T {
    var template = Array("/tmp/cached-config-test-XXXXXX".utf8CString)
    let directory = try #require(template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }.map { String(cString: $0) })
    defer {
        for name in files.keys { unlink(directory + "/" + name) }
        rmdir(directory + "/conf.d")
        rmdir(directory)
    }
    for (name, contents) in files {
        if name.hasPrefix("conf.d/") { mkdir(directory + "/conf.d", 0o755) }
        let file = try #require(fopen(directory + "/" + name, "w"))
        fputs(contents, file)
        fclose(file)
    }
    return try body(directory)
}

private func loadError(_ body: () throws(ConfigurationLoadError) -> Void) -> ConfigurationLoadError? {
    do {
        try body()
        return nil
    } catch {
        return error
    }
}

@Suite("Config file: splitting a line into arguments like sdssplitargs")
struct ConfigurationSplitArgumentsTests {
    @Test("splits at runs of white space")
    func whiteSpace() {
        #expect(ConfigurationFile.splitArguments("  save\t900   1 ") == ["save", "900", "1"])
    }

    // Checked by piping the same lines through redis-cli (which splits with sdssplitargs) to ECHO.
    @Test("double quotes understand \\n \\r \\t \\b \\a \\\\ \\\" and \\xHH")
    func doubleQuoteEscapes() {
        #expect(ConfigurationFile.splitArguments(#"ECHO "a\x41b\n""#) == ["ECHO", "aAb\n"])
        #expect(ConfigurationFile.splitArguments(#""\r\t\b\a\\\"""#) == ["\r\t\u{8}\u{7}\\\""])
        #expect(ConfigurationFile.splitArguments(#""a\qb""#) == ["aqb"])
    }

    @Test("\\x needs two hex digits to be an escape")
    func incompleteHexEscape() {
        #expect(ConfigurationFile.splitArguments(#""\x4""#) == ["x4"])
    }

    @Test("single quotes only understand \\'")
    func singleQuotes() {
        #expect(ConfigurationFile.splitArguments(#"'it\'s'"#) == ["it's"])
        #expect(ConfigurationFile.splitArguments(#"'a\nb'"#) == [#"a\nb"#])
    }

    @Test("quotes may start mid-word, and an empty pair is an empty argument")
    func quotesInsideWords() {
        #expect(ConfigurationFile.splitArguments(#"a"b c""#) == ["ab c"])
        #expect(ConfigurationFile.splitArguments(#"save """#) == ["save", ""])
    }

    @Test("a closing quote must be followed by white space or the end")
    func closingQuoteFollowedByText() {
        #expect(ConfigurationFile.splitArguments(#"ECHO a"b c"d"#) == nil)
        #expect(ConfigurationFile.splitArguments(#"ECHO "x"y"#) == nil)
        #expect(ConfigurationFile.splitArguments("'a'b") == nil)
    }

    @Test("unterminated quotes are an error")
    func unterminated() {
        #expect(ConfigurationFile.splitArguments(#"save "abc"#) == nil)
        #expect(ConfigurationFile.splitArguments("'abc") == nil)
        #expect(ConfigurationFile.splitArguments(#""abc\"#) == nil)
    }

    @Test("escapes can produce bytes that are not UTF-8")
    func rawBytes() {
        #expect(ConfigurationFile.splitArguments(Array(#""\xff\x00""#.utf8)) == [[0xFF, 0x00]])
    }
}

@Suite("Config file: parsing")
struct ConfigurationFileParseTests {
    private func parse(_ text: String) throws(ConfigurationLoadError) -> [ConfigurationLine] {
        try ConfigurationFile.parse(Array(text.utf8), path: "test.conf")
    }

    @Test("reads directives and arguments, skipping comments and blank lines, numbering lines from 1")
    func directivesAndComments() throws {
        let lines = try parse("# comment\n\n   # indented comment\nPort 7000\r\nbind 127.0.0.1 ::1\n")
        #expect(lines.map(\.directive) == ["port", "bind"])
        #expect(lines.map(\.arguments) == [["7000"], ["127.0.0.1", "::1"]])
        #expect(lines.map(\.origin) == [.file(path: "test.conf", line: 4), .file(path: "test.conf", line: 5)])
        #expect(lines[0].text == "Port 7000")
    }

    @Test("a # after a directive is an argument, not a comment")
    func noTrailingComments() throws {
        #expect(try parse("port 1 # x")[0].arguments == ["1", "#", "x"])
    }

    @Test("unbalanced quotes are reported with file, line and text")
    func unbalancedQuotes() {
        let error = loadError { () throws(ConfigurationLoadError) in _ = try parse("port 1\nsave \"abc\n") }
        #expect(error == .badLine(.file(path: "test.conf", line: 2), text: "save \"abc", reason: "Unbalanced quotes in configuration line"))
    }

    @Test("the error text has redis-server's shape")
    func errorDescription() {
        let error = ConfigurationLoadError.badLine(
            .file(path: "/etc/cached.conf", line: 4), text: "maxmemory 1x", reason: "argument must be a memory value")
        #expect(
            error.description == """

                *** FATAL CONFIG FILE ERROR ***
                Reading the configuration file '/etc/cached.conf', at line 4
                >>> 'maxmemory 1x'
                argument must be a memory value
                """)
    }
}

@Suite("Config file: loading")
struct ConfigurationLoadTests {
    @Test("applies the file's directives over the defaults")
    func appliesFile() throws {
        try withFiles(["a.conf": "port 7001\nmaxmemory 100mb\nsave 900 1\nsave 300 10\n"]) { directory in
            let configuration = try ServerConfiguration.load(configFile: directory + "/a.conf")
            #expect(configuration.port == 7001)
            #expect(configuration.maxMemory == 100 * 1024 * 1024)
            #expect(configuration.savePoints == [.init(seconds: 900, changes: 1), .init(seconds: 300, changes: 10)])
            #expect(configuration.databases == 16)
        }
    }

    @Test("the last occurrence of a directive wins")
    func lastWins() throws {
        try withFiles(["a.conf": "port 7001\nbind 10.0.0.1\nport 7002\nbind 127.0.0.1 ::1\n"]) { directory in
            let configuration = try ServerConfiguration.load(configFile: directory + "/a.conf")
            #expect(configuration.port == 7002)
            #expect(configuration.bind == ["127.0.0.1", "::1"])
        }
    }

    @Test("command-line overrides are applied after the file")
    func overridesAfterFile() throws {
        try withFiles(["a.conf": "port 7001\nhz 20\n"]) { directory in
            let flags = try ServerCommandLine.parse([directory + "/a.conf", "--port", "7002"])
            let configuration = try ServerConfiguration.load(flags)
            #expect(configuration.port == 7002)
            #expect(configuration.hz == 20)
        }
    }

    @Test("a rejected value is reported with file, line, text and reason")
    func badValue() throws {
        try withFiles(["a.conf": "port 7001\n\n# c\nmaxmemory 1x\n"]) { directory in
            let error = loadError { () throws(ConfigurationLoadError) in
                _ = try ServerConfiguration.load(configFile: directory + "/a.conf")
            }
            #expect(error == .badLine(.file(path: directory + "/a.conf", line: 4), text: "maxmemory 1x", reason: "argument must be a memory value"))
        }
    }

    @Test("an unknown directive is reported and named")
    func unknownDirective() throws {
        try withFiles(["a.conf": "port 7001\nfoo bar\n"]) { directory in
            let error = loadError { () throws(ConfigurationLoadError) in
                _ = try ServerConfiguration.load(configFile: directory + "/a.conf")
            }
            #expect(
                error == .badLine(
                    .file(path: directory + "/a.conf", line: 2), text: "foo bar",
                    reason: "Bad directive or wrong number of arguments: 'foo' is not a known directive"))
        }
    }

    @Test("rename-command lines apply in order, as Redis's: a chain is followed, a gone name or a taken one is refused")
    func renameCommandLines() throws {
        try withFiles(["a.conf": "rename-command get fetch\nrename-command fetch read\nrename-command flushall \"\"\n"]) { directory in
            let configuration = try ServerConfiguration.load(configFile: directory + "/a.conf")
            #expect(configuration.renamedCommands.map { [$0.name, $0.newName] } == [["get", "fetch"], ["fetch", "read"], ["flushall", ""]])
        }
        let refused: [(String, String)] = [
            ("rename-command get fetch\nrename-command get other\n", "No such command in rename-command"),
            ("rename-command flushall \"\"\nrename-command flushall again\n", "No such command in rename-command"),
            ("rename-command nosuch x\n", "No such command in rename-command"),
            ("rename-command get set\n", "Target command name already exists"),
        ]
        for (text, reason) in refused {
            try withFiles(["a.conf": text]) { directory in
                let error = loadError { () throws(ConfigurationLoadError) in
                    _ = try ServerConfiguration.load(configFile: directory + "/a.conf")
                }
                guard case .badLine(_, _, let said) = error else {
                    Issue.record("\(text.debugDescription) was not refused: \(String(describing: error))")
                    return
                }
                #expect(said == reason, "\(text.debugDescription)")
            }
        }
    }

    @Test("a missing file is reported with the system's reason")
    func missingFile() {
        let error = loadError { () throws(ConfigurationLoadError) in
            _ = try ServerConfiguration.load(configFile: "/nonexistent/cached.conf")
        }
        #expect(error == .cannotOpen(path: "/nonexistent/cached.conf", reason: "No such file or directory"))
        #expect(error?.description == "Fatal error, can't open config file '/nonexistent/cached.conf': No such file or directory")
    }

    @Test("include reads another file at that point, relative to the including file")
    func include() throws {
        try withFiles(["main.conf": "port 7001\ninclude extra.conf\nhz 30\n", "extra.conf": "port 7002\nhz 20\n"]) { directory in
            let configuration = try ServerConfiguration.load(configFile: directory + "/main.conf")
            #expect(configuration.port == 7002)
            #expect(configuration.hz == 30)
        }
    }

    @Test("errors in an included file name that file")
    func errorInIncludedFile() throws {
        try withFiles(["main.conf": "include extra.conf\n", "extra.conf": "\nhz x\n"]) { directory in
            let error = loadError { () throws(ConfigurationLoadError) in
                _ = try ServerConfiguration.load(configFile: directory + "/main.conf")
            }
            #expect(error == .badLine(.file(path: directory + "/extra.conf", line: 2), text: "hz x", reason: "argument couldn't be parsed into an integer"))
        }
    }

    @Test("include with a wildcard reads every match in order, and none is fine")
    func includeWildcard() throws {
        let files = [
            "main.conf": "include conf.d/*.conf\ninclude nothing-*.conf\n",
            "conf.d/10-port.conf": "port 7001\n", "conf.d/20-port.conf": "port 7002\nhz 40\n",
        ]
        try withFiles(files) { directory in
            let configuration = try ServerConfiguration.load(configFile: directory + "/main.conf")
            #expect(configuration.port == 7002)
            #expect(configuration.hz == 40)
        }
    }

    @Test("include needs exactly one path")
    func includeArity() throws {
        try withFiles(["main.conf": "include a b\n"]) { directory in
            let error = loadError { () throws(ConfigurationLoadError) in
                _ = try ServerConfiguration.load(configFile: directory + "/main.conf")
            }
            #expect(error == .badLine(.file(path: directory + "/main.conf", line: 1), text: "include a b", reason: "Bad directive or wrong number of arguments"))
        }
    }

    @Test("a missing included file is reported")
    func missingInclude() throws {
        try withFiles(["main.conf": "include missing.conf\n"]) { directory in
            let error = loadError { () throws(ConfigurationLoadError) in
                _ = try ServerConfiguration.load(configFile: directory + "/main.conf")
            }
            #expect(error == .cannotOpen(path: directory + "/missing.conf", reason: "No such file or directory"))
        }
    }

    @Test("files that include each other are reported as a cycle")
    func includeCycle() throws {
        try withFiles(["a.conf": "port 1\ninclude b.conf\n", "b.conf": "include a.conf\n"]) { directory in
            let error = loadError { () throws(ConfigurationLoadError) in
                _ = try ServerConfiguration.load(configFile: directory + "/a.conf")
            }
            guard case .badLine(let origin, let text, let reason) = error else {
                Issue.record("expected a bad line, got \(String(describing: error))")
                return
            }
            #expect(origin == .file(path: directory + "/b.conf", line: 1))
            #expect(text == "include a.conf")
            let real = try #require(realpath(directory, nil))
            defer { free(real) }
            let resolved = String(cString: real)
            #expect(reason == "Include cycle: \(resolved)/a.conf -> \(resolved)/b.conf -> \(resolved)/a.conf")
        }
    }

    @Test("a file including itself is a cycle")
    func selfInclude() throws {
        try withFiles(["a.conf": "include a.conf\n"]) { directory in
            let error = loadError { () throws(ConfigurationLoadError) in
                _ = try ServerConfiguration.load(configFile: directory + "/a.conf")
            }
            #expect(error?.description.contains("Include cycle") == true)
        }
    }
}
