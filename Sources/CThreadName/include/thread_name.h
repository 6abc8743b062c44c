#ifndef CACHED_THREAD_NAME_H
#define CACHED_THREAD_NAME_H

/// Names the calling thread as `top -H`, `ps -L`, core dumps and debuggers show it. Linux keeps the first 15
/// bytes. (Foundation's `Thread.name` names only the `Thread` object on Linux, not the system thread, and Swift's
/// Glibc module leaves out `pthread_setname_np`, a GNU extension.)
void cached_name_current_thread(const char *name);

#endif
