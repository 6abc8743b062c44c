import CachedNetworking

/// How `cached-fetch` reports a fetch that failed: one line for standard error and an exit status, curl's number
/// where curl has one for the same failure.
struct FetchFailure {
    /// The exit status.
    let status: Int32
    /// The line's text, without the `cached-fetch: ` it is written after.
    let message: String

    /// The exit statuses and what they mean, for `--help` (and docs/sdk.md, which repeats them).
    static let statuses: [(status: Int32, meaning: String)] = [
        (0, "a response came, whatever its HTTP status (as curl without --fail)"),
        (1, "any other failure"),
        (6, "the origin's host name could not be resolved"),
        (7, "no connection to the origin could be made (refused, unreachable)"),
        (8, "what the origin sent is not a valid HTTP response"),
        (28, "no complete response within --max-time"),
        (56, "the connection ended before the response was complete"),
        (63, "the response body is larger than --max-filesize"),
        (64, "a usage error (unknown option, bad URL or --store...), with the usage; sysexits' EX_USAGE, where curl has 2 or 3"),
    ]

    /// ``statuses`` as lines of `--help`.
    static var statusTable: String {
        statuses.map { entry in
            let number = String(entry.status)
            return "  " + number + String(repeating: " ", count: max(1, 4 - number.count)) + entry.meaning
        }.joined(separator: "\n")
    }

    /// The report of `error`, which `CachedNetworking.run` threw.
    init(_ error: CachedNetworkingError) {
        guard error.kind == .transport else {
            self.init(status: 1, message: "\(error)")
            return
        }
        guard let failure = error.underlying as? HTTPTransportError else {
            self.init(status: 1, message: "the exchange with the origin failed: \(error.message)")
            return
        }
        let status: Int32 =
            switch failure.kind {
            case .hostNotFound: 6
            case .connectionFailed: 7
            case .invalidResponse: 8
            case .timeout: 28
            case .connectionLost: 56
            case .bodyTooLarge: 63
            default: 1
            }
        self.init(status: status, message: failure.message)
    }

    init(status: Int32, message: String) {
        self.status = status
        self.message = message
    }
}
