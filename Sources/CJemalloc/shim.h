#ifndef CACHED_CJEMALLOC_SHIM_H
#define CACHED_CJEMALLOC_SHIM_H
#include <jemalloc/jemalloc.h>

/// mallocx/dallocx flags for an explicit arena, bypassing the thread cache (so that memory of that arena
/// is never handed to allocations of another one). Swift does not import function-like macros.
static inline int cached_jemalloc_arena_flags(unsigned arena) {
    return MALLOCX_ARENA(arena) | MALLOCX_TCACHE_NONE;
}

/// dallocx flags that bypass the thread cache; jemalloc finds the block's arena itself.
static inline int cached_jemalloc_uncached_flags(void) {
    return MALLOCX_TCACHE_NONE;
}
#endif
