/* tests/proc_self.c: counts under /proc/self (proc_self.h). */
#include "proc_self.h"

#include <dirent.h>

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
