// The small helpers are inline functions in include/busy_poll.h; the search through /proc is here.
#include "busy_poll.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/// Whether the epoll set `set` holds the file open as `descriptor` whose inode is `inode`: a `tfd:` line of
/// /proc/self/fdinfo/<set> with that number and that `ino:`. (The number alone could match a set inherited from
/// another process, whose lines give that process's numbers.)
static int holds(int set, int descriptor, unsigned long inode) {
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fdinfo/%d", set);
    FILE *info = fopen(path, "re");
    if (!info) return 0;
    char line[256];
    int found = 0;
    while (!found && fgets(line, sizeof line, info)) {
        int target;
        if (sscanf(line, "tfd: %d", &target) != 1 || target != descriptor) continue;
        const char *field = strstr(line, " ino:");
        if (field && strtoul(field + 5, NULL, 16) == inode) found = 1;
    }
    fclose(info);
    return found;
}

int cached_epoll_set_holding(int descriptor) {
    struct stat file;
    if (fstat(descriptor, &file) != 0) return -2;
    DIR *directory = opendir("/proc/self/fd");
    if (!directory) return errno == EMFILE || errno == ENFILE || errno == ENOMEM ? -2 : -1;
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
        if (holds(set, descriptor, (unsigned long)file.st_ino)) result = set;
    }
    closedir(directory);
    return result;
}
