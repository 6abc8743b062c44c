// The HTTP caching rules are part of the SDK's API (configuration, Cache-Status, directives).
@_exported public import HTTPCaching
// So are swift-http-types' requests and responses: a service that imports the SDK can name them without a
// dependency of its own on swift-http-types.
@_exported public import HTTPTypes
// And NIO's ByteBuffer, in which stores keep values and responses carry bodies.
@_exported public import struct NIOCore.ByteBuffer
