// The HTTP caching rules are part of the SDK's API (configuration, Cache-Status, directives).
@_exported public import HTTPCaching
