import BenchmarkLoopback
import CHiredis

#if canImport(Glibc)
import Glibc
#endif

/// A blocking hiredis context issuing one prepared `GET key` at a time: the floor the SDK's `RESPStore` hit is
/// compared with. The command's arguments are prepared once, so a call is `redisCommandArgv` and
/// `freeReplyObject` and nothing else.
final class RawHiredisGet {
    private let context: UnsafeMutablePointer<redisContext>
    private let argv: UnsafeMutablePointer<UnsafePointer<CChar>?>
    private let lengths: UnsafeMutablePointer<Int>

    init(port: Int, key: String) throws {
        guard let context = redisConnect("127.0.0.1", Int32(port)) else {
            throw BenchmarkSetupError("cannot allocate a hiredis context")
        }
        guard context.pointee.err == 0 else {
            let message = withUnsafeBytes(of: context.pointee.errstr) {
                String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
            }
            redisFree(context)
            throw BenchmarkSetupError("hiredis cannot connect to 127.0.0.1:\(port): \(message)")
        }
        self.context = context
        argv = .allocate(capacity: 2)
        argv[0] = UnsafePointer(strdup("GET"))
        argv[1] = UnsafePointer(strdup(key))
        lengths = .allocate(capacity: 2)
        lengths[0] = 3
        lengths[1] = key.utf8.count
    }

    deinit {
        redisFree(context)
        free(UnsafeMutablePointer(mutating: argv[0]))
        free(UnsafeMutablePointer(mutating: argv[1]))
        argv.deallocate()
        lengths.deallocate()
    }

    /// Sends `GET key` and reads the reply: the value's length, or nil when the reply is not a string.
    func get() -> Int? {
        guard let raw = redisCommandArgv(context, 2, argv, lengths) else { return nil }
        defer { freeReplyObject(raw) }
        let reply = raw.assumingMemoryBound(to: redisReply.self).pointee
        return reply.type == REDIS_REPLY_STRING ? reply.len : nil
    }
}
