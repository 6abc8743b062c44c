// libFuzzer target for the server's request parser; the checks are in FuzzChecks.RequestParserCheck.
// Built by `make fuzz` with -sanitize=fuzzer,address -D FUZZING. SwiftPM links an executable's `main` from its
// @main type, so libFuzzer's own `main` is not used: ours hands the command line to libFuzzer's driver. A plain
// `swift build` gets a program that says how to build the target.
import FuzzChecks

#if canImport(Glibc)
import Glibc
#endif

#if FUZZING
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    if let failure = RequestParserCheck.check(UnsafeRawBufferPointer(start: data, count: size)) {
        fatalError(failure)
    }
    return 0
}

/// libFuzzer's entry point for programs that have their own `main`.
@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
    _ callback: @convention(c) (UnsafePointer<UInt8>, Int) -> CInt
) -> CInt

@main
enum FuzzTarget {
    static func main() {
        var argc = CommandLine.argc
        var argv = CommandLine.unsafeArgv
        exit(LLVMFuzzerRunDriver(&argc, &argv, fuzz))
    }
}
#else
@main
enum FuzzTarget {
    static func main() {
        print("fuzz-request is a libFuzzer target: build and run it with `make fuzz` (see the Hardening section of docs/architecture.md).")
        exit(2)
    }
}
#endif
