#ifndef CACHED_MEMORY_HINTS_H
#define CACHED_MEMORY_HINTS_H

/// Asks the processor to start loading the cache line at `address` for reading. It is only a hint: it never
/// faults, whatever the address, so it may be given a pointer into memory that was freed meanwhile.
static inline void cached_prefetch(const void *address) {
    __builtin_prefetch(address, 0, 3);
}

#endif
