#ifndef CACHED_BUSY_POLL_H
#define CACHED_BUSY_POLL_H

#include <poll.h>
#include <sys/epoll.h>

/// A new epoll set (close-on-exec), or -1 with errno set.
static inline int cached_watch_set_create(void) {
    return epoll_create1(EPOLL_CLOEXEC);
}

/// Adds `descriptor` to the set, to be reported when it has input or its peer hung up. 0, or -1 with errno set.
static inline int cached_watch_set_add(int set, int descriptor) {
    struct epoll_event event = { .events = EPOLLIN | EPOLLRDHUP };
    event.data.fd = descriptor;
    return epoll_ctl(set, EPOLL_CTL_ADD, descriptor, &event);
}

/// Whether any socket of the set is ready now (a non-blocking epoll_wait): 1 if so, 0 if not, -1 on error.
static inline int cached_watch_set_ready(int set) {
    struct epoll_event event;
    return epoll_wait(set, &event, 1, 0);
}

/// The epoll set of this process that holds `descriptor` (found through /proc/self/fd and fdinfo, matching the
/// descriptor's number and its file), -1 if none does, or -2 if the search could not be made now (out of
/// descriptors or memory).
int cached_epoll_set_holding(int descriptor);

/// Whether the epoll set `set` has anything to report (it is readable itself), without taking the report:
/// 1 if so, 0 if not (or on an error).
static inline int cached_epoll_set_ready(int set) {
    struct pollfd entry = { .fd = set, .events = POLLIN };
    return poll(&entry, 1, 0) > 0 && (entry.revents & POLLIN) != 0;
}

/// Tells the processor that the caller is waiting in a loop (`pause` on x86, `yield` on ARM), which saves power
/// and leaves the core's resources to another hardware thread meanwhile.
static inline void cached_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
    __asm__ __volatile__("yield");
#endif
}

#endif
