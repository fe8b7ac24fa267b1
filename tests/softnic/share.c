/* share.c: whether a registered host region is memory a same-host peer
 * can map.  A region that lies in one MAP_SHARED mapping of a memfd sealed
 * against shrinking can be written by a pusher (push.c) with plain stores
 * into its own mapping of the same pages: no system call, as a NIC places
 * a write without either CPU.  Private memory (malloc, the stack) cannot be
 * mapped by another process; its pushes stay one system call each.
 *
 * The seal is what makes the peer's mapping safe: a memfd that could
 * shrink under a pusher's mapping would fault it (SIGBUS), so one without
 * F_SEAL_SHRINK is not offered. */
#include "softnic.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* The mapping of /proc/self/maps that holds addr: its range, whether it is
 * a writable shared memfd mapping, the file's offset at addr and its
 * identity.  false when none holds it. */
static bool maps_find(uintptr_t addr, uintptr_t *start, uintptr_t *end, bool *memfd, uint64_t *off,
                      dev_t *dev, ino_t *ino)
{
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f)
        return false;
    char line[512];
    bool found = false;
    while (!found && fgets(line, sizeof(line), f)) {
        uintptr_t s, e;
        char perms[5], path[64] = "";
        unsigned long long pgoff, inode;
        unsigned maj, min;
        if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %4s %llx %x:%x %llu %63s", &s, &e, perms, &pgoff, &maj,
                   &min, &inode, path) < 7)
            continue;
        if (addr < s || addr >= e)
            continue;
        found = true;
        *start = s;
        *end = e;
        *memfd = perms[0] == 'r' && perms[1] == 'w' && perms[3] == 's' && strncmp(path, "/memfd:", 7) == 0;
        *off = pgoff + (addr - s);
        *dev = makedev(maj, min);
        *ino = (ino_t)inode;
    }
    /* a line longer than the buffer continues on the next read: its tail
     * does not parse as a mapping (it holds no "-" range with perms) */
    fclose(f);
    return found;
}

/* An fd of this process for the file (dev, ino), dup'ed close-on-exec:
 * through the mapping itself (/proc/self/map_files, which needs
 * CAP_CHECKPOINT_RESTORE), else an fd the program holds open. */
static int fd_of(uintptr_t start, uintptr_t end, dev_t dev, ino_t ino)
{
    char path[96];
    struct stat st;
    snprintf(path, sizeof(path), "/proc/self/map_files/%" PRIxPTR "-%" PRIxPTR, start, end);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd >= 0) {
        if (fstat(fd, &st) == 0 && st.st_dev == dev && st.st_ino == ino)
            return fd;
        close(fd);
    }
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    int dfd = dirfd(d), got = -1;
    struct dirent *de;
    while (got < 0 && (de = readdir(d))) {
        char *endp;
        long n = strtol(de->d_name, &endp, 10);
        if (*endp || n < 0 || n == dfd)
            continue;
        if (fstat((int)n, &st) == 0 && S_ISREG(st.st_mode) && st.st_dev == dev && st.st_ino == ino &&
            (fcntl((int)n, F_GETFL) & O_ACCMODE) == O_RDWR)
            got = fcntl((int)n, F_DUPFD_CLOEXEC, 0);
    }
    closedir(d);
    return got;
}

bool share_file_ok(int fd, uint64_t need, struct stat *st)
{
    int seals = fcntl(fd, F_GET_SEALS);
    struct statfs fs;
    return seals >= 0 && (seals & F_SEAL_SHRINK) && fstat(fd, st) == 0 && S_ISREG(st->st_mode) &&
           (uint64_t)st->st_size >= need && fstatfs(fd, &fs) == 0 && fs.f_type != HUGETLBFS_MAGIC;
}

bool share_find(const void *addr, uint64_t len, struct sn_share *out)
{
    uintptr_t a = (uintptr_t)addr, start, end;
    bool memfd;
    uint64_t off;
    dev_t dev;
    ino_t ino;
    if (!len || a + len < a || !maps_find(a, &start, &end, &memfd, &off, &dev, &ino) || !memfd ||
        a + len > end)
        return false;
    int fd = fd_of(start, end, dev, ino);
    if (fd < 0)
        return false;
    struct stat st;
    if (!share_file_ok(fd, off + len, &st)) {
        close(fd);
        return false;
    }
    out->fd = fd;
    out->dev = (uint64_t)dev;
    out->ino = (uint64_t)ino;
    out->off = off;
    return true;
}

void share_drop(struct sn_share *s)
{
    if (s->fd >= 0)
        close(s->fd);
    s->fd = -1;
}
