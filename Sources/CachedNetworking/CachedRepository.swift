public import Foundation
public import HTTPTypes
import Synchronization

/// Why a ``CachedRepository`` could not produce a value.
///
/// A struct over a private enum, so that new cases are not a breaking change.
public struct CachedRepositoryError: Error, Sendable, CustomStringConvertible {
    /// What went wrong, broadly.
    public struct Kind: Sendable, Hashable, CustomStringConvertible {
        enum Base: Sendable, Hashable { case network, status, decoding }
        let base: Base

        /// The request failed (see ``CachedRepositoryError/networkError``).
        public static let network = Kind(base: .network)
        /// The response's status was not 2xx (see ``CachedRepositoryError/status``).
        public static let status = Kind(base: .status)
        /// The body could not be decoded.
        public static let decoding = Kind(base: .decoding)

        public var description: String {
            switch base {
            case .network: "network"
            case .status: "status"
            case .decoding: "decoding"
            }
        }
    }

    /// The broad kind of failure.
    public let kind: Kind
    /// The request's error, for ``Kind/network``.
    public let networkError: CachedNetworkingError?
    /// The response's status, for ``Kind/status``.
    public let status: HTTPResponse.Status?
    /// Details for logs.
    public let message: String

    public var description: String { "\(kind): \(message)" }
}

/// Decoded values over ``CachedNetworking``, decoded once per stored entry version.
///
/// Repeated answers with the same entry identity (the entry's key and its strong `ETag`, or the time its body was
/// stored) return the value already decoded, without decoding again; a 304 revalidation keeps the identity. A
/// response that was not stored is decoded every time. At most `capacity` values are kept (oldest first out).
///
/// ```swift
/// let items = CachedRepository<[Item]>(network: cache)
/// let list = try await items.value(for: request)
/// ```
public final class CachedRepository<Value: Decodable & Sendable>: Sendable {
    /// Fetches a response for a request (``CachedNetworking/run(_:body:policy:transport:)`` or a stand-in).
    public typealias Fetch = @Sendable (HTTPRequest, CachePolicy) async throws(CachedNetworkingError) -> CachedResponse
    /// Decodes a body.
    public typealias Decode = @Sendable (Data) throws -> Value

    private struct Memo {
        var values: [String: (version: String, value: Value)] = [:]
        var order: [String] = []
    }

    private let fetch: Fetch
    private let decode: Decode
    private let capacity: Int
    private let memo = Mutex(Memo())

    /// A repository over `fetch` that decodes with `decode`.
    /// - Parameters:
    ///   - capacity: How many decoded values to keep.
    public init(capacity: Int = 256, fetch: @escaping Fetch, decode: @escaping Decode) {
        self.fetch = fetch
        self.decode = decode
        self.capacity = max(1, capacity)
    }

    /// A repository over `network` that decodes JSON.
    public convenience init(network: CachedNetworking, capacity: Int = 256) {
        self.init(
            capacity: capacity,
            fetch: { request, policy async throws(CachedNetworkingError) in try await network.run(request, policy: policy) },
            decode: { data in try JSONDecoder().decode(Value.self, from: data) }
        )
    }

    /// The decoded value of the response to `request`.
    /// - Throws: ``CachedRepositoryError`` when the request fails, the status is not 2xx, or decoding fails.
    public func value(
        for request: HTTPRequest,
        policy: CachePolicy = .useProtocolCachePolicy
    ) async throws(CachedRepositoryError) -> Value {
        let answer: CachedResponse
        do {
            answer = try await fetch(request, policy)
        } catch {
            throw CachedRepositoryError(kind: .network, networkError: error, status: nil, message: "\(error)")
        }
        guard answer.status.kind == .successful else {
            throw CachedRepositoryError(kind: .status, networkError: nil, status: answer.status, message: "status \(answer.status.code)")
        }
        if let entry = answer.entry, let known = memo.withLock({ $0.values[entry.key] }), known.version == entry.version {
            return known.value
        }
        let value: Value
        do {
            value = try decode(Data(answer.body.readableBytesView))
        } catch {
            throw CachedRepositoryError(kind: .decoding, networkError: nil, status: answer.status, message: "\(error)")
        }
        if let entry = answer.entry {
            let capacity = self.capacity
            memo.withLock { memo in
                if memo.values.updateValue((entry.version, value), forKey: entry.key) == nil {
                    memo.order.append(entry.key)
                    if memo.order.count > capacity {
                        memo.values[memo.order.removeFirst()] = nil
                    }
                }
            }
        }
        return value
    }
}
