/* plugin/ib/area.c: a connection's areas (area.h). */
#include "area.h"
#include "log.h"
#include "memfd.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static size_t pages(size_t len)
{
    long pg = sysconf(_SC_PAGESIZE);
    size_t p = pg > 0 ? (size_t)pg : 4096;
    return (len + p - 1) / p * p;
}

/* Says once why a peer-written area is private memory after all (it still
 * works: a software NIC then places the peer's writes by system call). */
static void tell_private(const char *what, int err)
{
    static atomic_int told;
    if (!atomic_exchange(&told, 1))
        INFO(NCCL_NET, "NET/railnet: %s failed (%s): CTS rings and sizes areas in private memory", what,
             strerror(err));
}

static void *map_shared(size_t len, int *fd)
{
    int f = rn_memfd_create("railnet-area", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (f < 0) {
        tell_private("memfd_create", errno);
        return NULL;
    }
    void *p = MAP_FAILED;
    /* sealed: whoever maps it (a software NIC) cannot be cut short by a
     * truncation */
    if (ftruncate(f, (off_t)len) != 0)
        tell_private("ftruncate of a memfd", errno);
    else if (fcntl(f, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
        tell_private("sealing a memfd", errno);
    else if ((p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0)) == MAP_FAILED)
        tell_private("mapping a memfd", errno);
    if (p == MAP_FAILED) {
        close(f);
        return NULL;
    }
    *fd = f;
    return p;
}

void *area_alloc(size_t len, int shared, int *fd)
{
    *fd = -1;
    len = pages(len);
    void *p = shared ? map_shared(len, fd) : NULL;
    if (!p) {
        p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return NULL;
    }
    /* a forked child must not write into what the NIC and the peer share */
    (void)madvise(p, len, MADV_DONTFORK);
    return p;   /* zeroed: fresh pages of a new file or anonymous memory */
}

void area_release(void *p, size_t len)
{
    if (p)
        munmap(p, pages(len));
}
