import NIOCore
import Testing

@testable import CachedNetworking

/// The ``CacheStoreError`` `body` throws; records an issue (and returns nil) when it throws nothing.
@discardableResult
func storeError(
    _ body: () async throws(CacheStoreError) -> Void, sourceLocation: SourceLocation = #_sourceLocation
) async -> CacheStoreError? {
    do {
        try await body()
        Issue.record("expected a CacheStoreError, but the call succeeded", sourceLocation: sourceLocation)
        return nil
    } catch {
        return error
    }
}

extension ByteBuffer {
    /// The readable bytes as a string (for comparisons in tests).
    var text: String { String(buffer: self) }
}
