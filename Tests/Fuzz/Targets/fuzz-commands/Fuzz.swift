// libFuzzer target for the command layer; the checks are in FuzzChecks.CommandCheck, the driver in FuzzChecks.FuzzDriver.
import FuzzChecks

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    FuzzDriver.run(data, size, CommandCheck.check)
}

@main
enum FuzzTarget {
    static func main() {
        FuzzDriver.main(name: "fuzz-commands", testOneInput: fuzz)
    }
}
