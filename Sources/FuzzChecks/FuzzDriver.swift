import Glibc

/// The `main` of every libFuzzer target (`Tests/Fuzz/Targets`). SwiftPM links an executable's `main` from its
/// @main type, so libFuzzer's own `main` is not used: built with `-D FUZZING` (by `make fuzz`), this hands the
/// command line to libFuzzer's driver, which calls the target's `LLVMFuzzerTestOneInput`; a plain `swift build`
/// gets a program that says how to build the target.
public enum FuzzDriver {
    /// Runs the target `name`, whose `LLVMFuzzerTestOneInput` is `testOneInput`.
    public static func main(
        name: String, testOneInput: @convention(c) (UnsafePointer<UInt8>, Int) -> CInt
    ) -> Never {
        #if FUZZING
        var argc = CommandLine.argc
        var argv = CommandLine.unsafeArgv
        exit(LLVMFuzzerRunDriver(&argc, &argv, testOneInput))
        #else
        print("\(name) is a libFuzzer target: build and run it with `make fuzz` (see the Hardening section of docs/architecture.md).")
        exit(2)
        #endif
    }

    /// Runs `check` on one input and turns a failure into a crash, which libFuzzer reports with the input.
    public static func run(_ data: UnsafePointer<UInt8>, _ size: Int, _ check: (UnsafeRawBufferPointer) -> String?) -> CInt {
        if let failure = check(UnsafeRawBufferPointer(start: data, count: size)) {
            fatalError(failure)
        }
        return 0
    }
}

#if FUZZING
/// libFuzzer's entry point for programs that have their own `main`.
@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
    _ callback: @convention(c) (UnsafePointer<UInt8>, Int) -> CInt
) -> CInt
#endif
