// fds.hpp — test helper: how many file descriptors this process has open now.
#pragma once

#include <dirent.h>

inline int open_fds() {
    int n = 0;
    if (DIR* d = opendir("/proc/self/fd")) {
        while (readdir(d)) ++n;
        closedir(d);
    }
    return n;
}
