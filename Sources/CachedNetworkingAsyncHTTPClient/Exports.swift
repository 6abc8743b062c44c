// The transport is used with the cache it fetches for: importing this module imports the SDK's core too.
@_exported public import CachedNetworking
