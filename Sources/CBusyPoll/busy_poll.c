// The small helpers are inline functions in include/busy_poll.h; the search through /proc is here.
#include "busy_poll.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/// Whether the epoll set `set` holds `descriptor`, by its `tfd:` lines in /proc/self/fdinfo.
static int holds(int set, int descriptor) {
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fdinfo/%d", set);
    FILE *info = fopen(path, "re");
    if (!info) return 0;
    char line[256];
    int found = 0;
    while (!found && fgets(line, sizeof line, info)) {
        int target;
        if (sscanf(line, "tfd: %d", &target) == 1 && target == descriptor) found = 1;
    }
    fclose(info);
    return found;
}

int cached_epoll_set_holding(int descriptor) {
    DIR *directory = opendir("/proc/self/fd");
    if (!directory) return -1;
    int result = -1;
    struct dirent *item;
    char target[64];
    while (result < 0 && (item = readdir(directory)) != NULL) {
        if (item->d_name[0] < '0' || item->d_name[0] > '9') continue;
        ssize_t length = readlinkat(dirfd(directory), item->d_name, target, sizeof target - 1);
        if (length <= 0) continue;
        target[length] = 0;
        if (strcmp(target, "anon_inode:[eventpoll]") != 0) continue;
        int set = atoi(item->d_name);
        if (holds(set, descriptor)) result = set;
    }
    closedir(directory);
    return result;
}
