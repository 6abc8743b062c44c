/// The server's settings.
public struct ServerConfiguration: Sendable, Equatable {
    public var port = 6379
    public var bind = ["127.0.0.1"]
    public var databases = 16
    public var hz = 10
    public var maxClients = 10000
    public var protoMaxBulkLength = 512 * 1024 * 1024
    public var clientQueryBufferLimit = 1024 * 1024 * 1024
    public var requirePass = ""
    public var ioThreads = 2
    public init() {}
}
