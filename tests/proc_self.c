/* tests/proc_self.c: counts under /proc/self (proc_self.h). */
#include "proc_self.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* entries of dir but . and .. */
static int entries(const char *dir)
{
    int n = 0;
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));)
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

int proc_self_fds(void)
{
    return entries("/proc/self/fd") - 1; /* the directory's own fd */
}

int proc_self_threads(void)
{
    return entries("/proc/self/task");
}

int proc_self_fd_to(const char *prefix)
{
    DIR *d = opendir("/proc/self/fd");
    int fd = -1;
    for (struct dirent *e; d && fd < 0 && (e = readdir(d));) {
        char path[300], link[256];
        snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
        ssize_t n = readlink(path, link, sizeof(link) - 1);
        if (n <= 0)
            continue;
        link[n] = '\0';
        if (strncmp(link, prefix, strlen(prefix)) == 0)
            fd = atoi(e->d_name);
    }
    if (d)
        closedir(d);
    return fd;
}
