// The stores are used with the cache they store for: importing this module imports the SDK's core too.
@_exported public import CachedNetworking
