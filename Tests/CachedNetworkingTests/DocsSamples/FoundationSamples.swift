// The Swift sample of docs/sdk.md whose imports are exactly these, as the docs show it (``DocsSampleTests`` checks
// that the sample is here, with its imports, and runs it).
import CachedNetworking
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

// docs/sdk.md, Quick start

func load(_ cache: CachedNetworking, _ url: URL) {
    cache.run(URLRequest(url: url)) { data, response, error, fromCache in
        // data and an HTTPURLResponse, or an error; fromCache is true for cache, revalidated and stale answers
    }
}
