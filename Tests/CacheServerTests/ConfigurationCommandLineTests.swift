import CacheServer
import Testing

private func split(_ arguments: String...) throws -> ServerCommandLine {
    try ServerCommandLine.parse(arguments)
}

private func directives(_ commandLine: ServerCommandLine) -> [[String]] {
    commandLine.directives.map { [$0.directive] + $0.arguments }
}

private func failure(_ arguments: String...) -> ConfigurationLoadError? {
    do {
        _ = try ServerCommandLine.parse(arguments)
        return nil
    } catch {
        return error
    }
}

private func loadFailure(_ commandLine: ServerCommandLine) -> ConfigurationLoadError? {
    do {
        _ = try ServerConfiguration.load(commandLine)
        return nil
    } catch {
        return error
    }
}

@Suite("Command line: splitting argv into a config file and directives")
struct ConfigurationCommandLineTests {
    @Test("no arguments means no config file and no directives")
    func empty() throws {
        #expect(try split() == ServerCommandLine())
    }

    @Test("a first argument without a dash is the config file")
    func positionalConfigFile() throws {
        let commandLine = try split("/etc/cached.conf", "--port", "7000")
        #expect(commandLine.configFile == "/etc/cached.conf")
        #expect(directives(commandLine) == [["port", "7000"]])
    }

    @Test("--config names the config file anywhere among the flags")
    func configFlag() throws {
        let commandLine = try split("--port", "7000", "--config", "cached.conf", "--hz", "20")
        #expect(commandLine.configFile == "cached.conf")
        #expect(directives(commandLine) == [["port", "7000"], ["hz", "20"]])
    }

    @Test("a directive takes every following argument up to the next --flag")
    func multiWordValues() throws {
        let commandLine = try split("--save", "900", "1", "300", "10", "--port", "7000", "--bind", "127.0.0.1", "::1")
        #expect(directives(commandLine) == [["save", "900", "1", "300", "10"], ["port", "7000"], ["bind", "127.0.0.1", "::1"]])
    }

    @Test("the first value may itself start with --")
    func valueStartingWithDashes() throws {
        #expect(directives(try split("--requirepass", "--secret", "--port", "1")) == [["requirepass", "--secret"], ["port", "1"]])
    }

    @Test("values may start with a single dash")
    func singleDashValue() throws {
        #expect(directives(try split("--bind", "127.0.0.1", "-::1")) == [["bind", "127.0.0.1", "-::1"]])
    }

    @Test("--save followed by another flag or nothing means save \"\"")
    func bareSave() throws {
        #expect(directives(try split("--save", "--port", "1")) == [["save", ""], ["port", "1"]])
        #expect(directives(try split("--port", "1", "--save")) == [["port", "1"], ["save", ""]])
    }

    @Test("a flag and its value in one argument are split like a config line")
    func flagWithValueInOneArgument() throws {
        #expect(directives(try split("--port 7000", "--maxmemory", "1gb")) == [["port", "7000"], ["maxmemory", "1gb"]])
    }

    @Test("directive names are lowercased")
    func lowercased() throws {
        #expect(directives(try split("--MaxMemory", "1gb")) == [["maxmemory", "1gb"]])
    }

    @Test("a trailing directive without a value is kept, to be rejected when applied")
    func missingValue() throws {
        let commandLine = try split("--port")
        #expect(directives(commandLine) == [["port"]])
        let error = loadFailure(commandLine)
        #expect(error == .badLine(.commandLine, text: "port", reason: "wrong number of arguments"))
    }

    @Test("an unknown directive is named when applied, with the flag shown as redis-server shows it")
    func unknownDirective() throws {
        let commandLine = try split("--nosuch", "1")
        let error = loadFailure(commandLine)
        #expect(
            error == .badLine(
                .commandLine, text: "nosuch \"1\"",
                reason: "Bad directive or wrong number of arguments: 'nosuch' is not a known directive"))
    }

    @Test("flags are applied in order after the defaults")
    func appliedInOrder() throws {
        let configuration = try ServerConfiguration.load(try split("--port", "7000", "--port", "7001", "--bind", "127.0.0.1", "::1"))
        #expect(configuration.port == 7001)
        #expect(configuration.bind == ["127.0.0.1", "::1"])
    }

    @Test("a stray argument is an error")
    func strayArgument() {
        #expect(failure("a.conf", "b.conf") == .badCommandLine(reason: "unexpected argument 'b.conf': directives are given as --name value"))
        #expect(failure("-x") == .badCommandLine(reason: "unexpected argument '-x': directives are given as --name value"))
    }

    @Test("two config files are an error")
    func twoConfigFiles() {
        #expect(failure("a.conf", "--config", "b.conf") == .badCommandLine(reason: "more than one config file given ('a.conf' and 'b.conf')"))
    }

    @Test("--config needs a file")
    func configWithoutFile() {
        #expect(failure("--config") == .badCommandLine(reason: "--config needs the path of a config file"))
    }

    @Test("reading the configuration from standard input is refused")
    func standardInput() {
        #expect(failure("-") == .badCommandLine(reason: "reading the configuration from standard input is not supported"))
    }
}
