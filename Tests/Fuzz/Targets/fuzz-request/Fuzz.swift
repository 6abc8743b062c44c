// libFuzzer target for the server's request parser; the checks are in FuzzChecks.RequestParserCheck, the driver in FuzzChecks.FuzzDriver.
import FuzzChecks

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    FuzzDriver.run(data, size, RequestParserCheck.check)
}

@main
enum FuzzTarget {
    static func main() {
        FuzzDriver.main(name: "fuzz-request", testOneInput: fuzz)
    }
}
