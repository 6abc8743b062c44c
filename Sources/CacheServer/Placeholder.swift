// CacheServer
