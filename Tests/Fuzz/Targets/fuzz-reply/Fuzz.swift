// libFuzzer target for the client's reply decoder; the checks are in FuzzChecks.ReplyDecoderCheck, the driver in FuzzChecks.FuzzDriver.
import FuzzChecks

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    FuzzDriver.run(data, size, ReplyDecoderCheck.check)
}

@main
enum FuzzTarget {
    static func main() {
        FuzzDriver.main(name: "fuzz-reply", testOneInput: fuzz)
    }
}
