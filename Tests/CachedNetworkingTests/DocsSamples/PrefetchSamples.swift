// The Swift sample of docs/sdk.md whose imports are exactly these, as the docs show it (``DocsSampleTests`` checks
// that the sample is here, with its imports, and runs it).
import CachedNetworking
import HTTPTypes
import Logging

// docs/sdk.md, Prefetching

func warmUp(_ cache: CachedNetworking, ids: [Int], logger: Logger) async {
    let requests = ids.map { id in
        HTTPRequest(method: .get, scheme: "https", authority: "api.example.com", path: "/items/\(id)")
    }
    let outcomes = await cache.prefetch(requests, maxConcurrency: 4)
    for (request, outcome) in zip(requests, outcomes) where !outcome.isStored {
        logger.warning("not prefetched", metadata: [
            "path": "\(request.path ?? "/")",
            "reason": "\(outcome.error?.description ?? "not storable")",
        ])
    }
}
