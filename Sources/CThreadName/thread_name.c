#define _GNU_SOURCE
#include <pthread.h>
#include <string.h>
#include "thread_name.h"

void cached_name_current_thread(const char *name) {
    char shortened[16];
    strncpy(shortened, name, sizeof shortened - 1);
    shortened[sizeof shortened - 1] = '\0';
    (void)pthread_setname_np(pthread_self(), shortened);
}
