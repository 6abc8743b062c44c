import Foundation

/// Failures reported from client threads, read once they are done.
final class ProblemLog: @unchecked Sendable {
    private let lock = NSLock()
    private var problems: [String] = []
    func add(_ problem: String) { lock.withLock { problems.append(problem) } }
    var all: [String] { lock.withLock { problems } }
}
