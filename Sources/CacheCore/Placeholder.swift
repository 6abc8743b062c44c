// CacheCore
