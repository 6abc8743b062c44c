import CacheServer
import Logging
import ServiceLifecycle

// Interim entry point: a flag parser and log handler replace this.
var configuration = ServerConfiguration()
var arguments = CommandLine.arguments.dropFirst()
while let flag = arguments.popFirst() {
    if flag == "--port", let v = arguments.popFirst(), let p = Int(v) { configuration.port = p }
    if flag == "--bind", let v = arguments.popFirst() { configuration.bind = [v] }
}
let logger = Logger(label: "cached-server")
let service = CacheServerService(configuration: configuration, logger: logger)
let group = ServiceGroup(
    configuration: .init(services: [.init(service: service)], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
try await group.run()
