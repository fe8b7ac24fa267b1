/* push_map.c: the pusher's mappings of a peer's shared regions (share.c).
 * A push into a region its owner published as shareable is a plain store
 * into this process's mapping of the same memfd pages: no system call.
 * The published description is the peer's word, so the file is checked
 * here before it is mapped: a memfd, the identity published, sealed
 * against shrinking, and as long as the region; the mapping then bounds
 * every store through it, whatever the peer publishes later.
 *
 * Mappings are made on a push's first use and live as long as the peer
 * entry (the QPs pushing to that process): a deregistration does not
 * unmap them (the key check keeps pushes out; the pages stay the file's,
 * which no one reads any more), and at most PUSH_MAPS are made per peer:
 * regions beyond them take the system call. */
#include "softnic.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define PUSH_MAPS 64

struct push_map {
    struct sn_share_ref ref;
    char *at;        /* the region's first byte in this process; NULL: refused */
    void *map;
    size_t maplen;
};

struct sn_push_maps {
    pthread_mutex_t lock;        /* making one */
    _Atomic uint32_t n;          /* made: [0, n) are immutable */
    struct push_map m[PUSH_MAPS];
};

struct sn_push_maps *push_maps_new(void)
{
    struct sn_push_maps *m = calloc(1, sizeof(*m));
    if (m)
        pthread_mutex_init(&m->lock, NULL);
    return m;
}

void push_maps_free(struct sn_push_maps *m, bool unmap)
{
    if (!m)
        return;
    for (uint32_t i = 0; unmap && i < atomic_load(&m->n); i++)
        if (m->m[i].map)
            munmap(m->m[i].map, m->m[i].maplen);
    pthread_mutex_destroy(&m->lock);
    free(m);
}

static bool same(const struct sn_share_ref *a, const struct sn_share_ref *b)
{
    return a->key == b->key && a->fd == b->fd && a->iova == b->iova && a->len == b->len && a->dev == b->dev &&
           a->ino == b->ino && a->off == b->off;
}

static const struct push_map *lookup(struct sn_push_maps *m, const struct sn_share_ref *ref)
{
    uint32_t n = atomic_load_explicit(&m->n, memory_order_acquire);
    for (uint32_t i = 0; i < n; i++)
        if (m->m[i].ref.key == ref->key && same(&m->m[i].ref, ref))
            return &m->m[i];
    return NULL;
}

/* Maps the peer's region described by ref: the address of its first byte
 * here, or NULL when the file is not what was published. */
static char *map_peer(uint32_t pid, const struct sn_share_ref *ref, void **map, size_t *maplen)
{
    char path[64], link[64];
    snprintf(path, sizeof(path), "/proc/%u/fd/%u", pid, ref->fd);
    ssize_t ln = readlink(path, link, sizeof(link) - 1);
    link[ln > 0 ? ln : 0] = 0;
    if (strncmp(link, "/memfd:", 7) != 0)
        return NULL;
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    struct stat st;
    long page = sysconf(_SC_PAGESIZE);
    char *at = NULL;
    if (page > 0 && ref->len && ref->off + ref->len > ref->off && share_file_ok(fd, ref->off + ref->len, &st) &&
        (uint64_t)st.st_dev == ref->dev && (uint64_t)st.st_ino == ref->ino) {
        uint64_t start = ref->off & ~(uint64_t)(page - 1);
        size_t len = (size_t)(ref->off + ref->len - start);
        void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)start);
        if (p != MAP_FAILED) {
            /* a forked child of this process gets no window into the peer */
            (void)madvise(p, len, MADV_DONTFORK);
            *map = p;
            *maplen = len;
            at = (char *)p + (ref->off - start);
        }
    }
    close(fd);
    return at;
}

char *push_maps_at(struct sn_push_maps *m, uint32_t pid, const struct sn_share_ref *ref)
{
    const struct push_map *e = lookup(m, ref);
    if (e)
        return e->at;
    pthread_mutex_lock(&m->lock);
    char *at = NULL;
    uint32_t n = atomic_load(&m->n);
    if ((e = lookup(m, ref))) {
        at = e->at;
    } else if (n < PUSH_MAPS) {
        struct push_map *nm = &m->m[n];
        memset(nm, 0, sizeof(*nm));
        nm->ref = *ref;
        nm->at = at = map_peer(pid, ref, &nm->map, &nm->maplen);
        if (!at)
            SN_DEBUG("push: peer pid %u: its region of key 0x%x is not the memfd it published: system calls",
                     pid, ref->key);
        atomic_store_explicit(&m->n, n + 1, memory_order_release);
    }
    pthread_mutex_unlock(&m->lock);
    return at;
}

size_t push_gather(char *to, size_t cap, const struct iovec *lv, unsigned long nl)
{
    size_t o = 0;
    for (unsigned long i = 0; i < nl && o < cap; i++) {
        size_t k = lv[i].iov_len < cap - o ? lv[i].iov_len : cap - o;
        memcpy(to + o, lv[i].iov_base, k);
        o += k;
    }
    return o;
}

void push_store(char *dst, const struct iovec *lv, unsigned long nl, uint32_t len)
{
    char tmp[SN_PUSH_MAX_BYTES];
    const char *src = lv[0].iov_base;
    if (nl > 1) {
        push_gather(tmp, sizeof(tmp), lv, nl);
        src = tmp;
    }
    sn_store_ascending(dst, src, len);
}
