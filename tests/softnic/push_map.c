/* push_map.c: the pusher's mappings of a peer's shared regions (share.c).
 * A push into a region its owner published as shareable is a plain store
 * into this process's mapping of the same memfd pages: no system call.
 * The published description is the peer's word, so the file is checked
 * here before it is mapped: a memfd, the identity published, sealed
 * against shrinking, and as long as the region; the mapping then bounds
 * every store through it, whatever the peer publishes later.
 *
 * Mappings are made on a push's first use, at most PUSH_MAPS per peer.
 * A deregistration does not unmap them (the key check keeps pushes out),
 * but once the table is full, an entry whose region is gone makes room:
 * a connection's areas come and go with it, and without this every
 * connection after the first few dozen to one peer took the system call
 * for good.  Gone (push.c) means its key is no longer published and no
 * pusher is counted on its key's entry, so no store through the mapping
 * can be under way or start.  Lookups take no lock, so an entry changes
 * under a sequence count (odd while it changes).  The evicted range
 * becomes private anonymous memory at once (the owner's pages are let go)
 * and is unmapped only after RETIRE_NS: the owner's drain stops waiting
 * for a pusher after PUSH_DRAIN_NS (one that stalled in its push), and a
 * store of such a pusher then lands nowhere that matters, not in an
 * unmapped page.  So at most PUSH_RETIRED entries are evicted within
 * RETIRE_NS; regions beyond that take the system call meanwhile. */
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
#define PUSH_RETIRED 256
#define RETIRE_NS 2000000000ull   /* twice the owner's drain (PUSH_DRAIN_NS) */
/* a full table of live regions: the pushes beyond it take the system
 * call, and look for room again only this long after */
#define RESCAN_NS 1000000ull

struct push_map {
    _Atomic uint32_t seq;        /* odd while the entry changes (under the lock) */
    struct sn_share_ref ref;
    char *at;        /* the region's first byte in this process; NULL: refused */
    void *map;
    size_t maplen;
};

struct retired {
    void *map;
    size_t len;
    uint64_t since;
};

struct sn_push_maps {
    pthread_mutex_t lock;        /* making or changing one */
    _Atomic uint32_t n;          /* entries [0, n) were made */
    struct push_map m[PUSH_MAPS];
    struct retired old[PUSH_RETIRED];
    uint32_t nold;
    uint64_t rescan_at;          /* no room was found: not before this */
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
    for (uint32_t i = 0; unmap && i < m->nold; i++)
        munmap(m->old[i].map, m->old[i].len);
    pthread_mutex_destroy(&m->lock);
    free(m);
}

static bool same(const struct sn_share_ref *a, const struct sn_share_ref *b)
{
    return a->key == b->key && a->fd == b->fd && a->iova == b->iova && a->len == b->len && a->dev == b->dev &&
           a->ino == b->ino && a->off == b->off;
}

/* e's description and address as one consistent snapshot: false while it
 * changes (a writer holds the lock). */
static bool snapshot(const struct push_map *e, struct sn_share_ref *ref, char **at)
{
    uint32_t s = atomic_load_explicit(&e->seq, memory_order_acquire);
    if (s & 1)
        return false;
    ref->key = __atomic_load_n(&e->ref.key, __ATOMIC_RELAXED);
    ref->fd = __atomic_load_n(&e->ref.fd, __ATOMIC_RELAXED);
    ref->iova = __atomic_load_n(&e->ref.iova, __ATOMIC_RELAXED);
    ref->len = __atomic_load_n(&e->ref.len, __ATOMIC_RELAXED);
    ref->dev = __atomic_load_n(&e->ref.dev, __ATOMIC_RELAXED);
    ref->ino = __atomic_load_n(&e->ref.ino, __ATOMIC_RELAXED);
    ref->off = __atomic_load_n(&e->ref.off, __ATOMIC_RELAXED);
    *at = __atomic_load_n(&e->at, __ATOMIC_RELAXED);
    atomic_thread_fence(memory_order_acquire);
    return atomic_load_explicit(&e->seq, memory_order_relaxed) == s;
}

/* The entry for ref: true with its address (NULL: refused), or false. */
static bool lookup(struct sn_push_maps *m, const struct sn_share_ref *ref, char **at)
{
    uint32_t n = atomic_load_explicit(&m->n, memory_order_acquire);
    for (uint32_t i = 0; i < n; i++) {
        struct sn_share_ref r;
        if (__atomic_load_n(&m->m[i].ref.key, __ATOMIC_RELAXED) == ref->key && snapshot(&m->m[i], &r, at) &&
            same(&r, ref))
            return true;
    }
    return false;
}

/* Writes e (m->lock held), lookups skipping it meanwhile. */
static void entry_set(struct push_map *e, const struct sn_share_ref *ref, char *at, void *map, size_t maplen)
{
    uint32_t s = atomic_load_explicit(&e->seq, memory_order_relaxed);
    atomic_store_explicit(&e->seq, s + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    __atomic_store_n(&e->ref.key, ref->key, __ATOMIC_RELAXED);
    __atomic_store_n(&e->ref.fd, ref->fd, __ATOMIC_RELAXED);
    __atomic_store_n(&e->ref.iova, ref->iova, __ATOMIC_RELAXED);
    __atomic_store_n(&e->ref.len, ref->len, __ATOMIC_RELAXED);
    __atomic_store_n(&e->ref.dev, ref->dev, __ATOMIC_RELAXED);
    __atomic_store_n(&e->ref.ino, ref->ino, __ATOMIC_RELAXED);
    __atomic_store_n(&e->ref.off, ref->off, __ATOMIC_RELAXED);
    __atomic_store_n(&e->at, at, __ATOMIC_RELAXED);
    e->map = map;
    e->maplen = maplen;
    atomic_store_explicit(&e->seq, s + 2, memory_order_release);
}

/* Unmaps the retired ranges whose time is up (m->lock held). */
static void reap_locked(struct sn_push_maps *m, uint64_t now)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < m->nold; i++) {
        if (now - m->old[i].since >= RETIRE_NS)
            munmap(m->old[i].map, m->old[i].len);
        else
            m->old[k++] = m->old[i];
    }
    m->nold = k;
}

/* An entry to reuse once the table is full: one whose key its owner no
 * longer publishes, with room to retire its mapping; NULL: none. */
static struct push_map *victim_locked(struct sn_push_maps *m, bool (*gone)(const void *, uint32_t),
                                      const void *arg)
{
    uint64_t now = sn_now_ns();
    if (now < m->rescan_at)
        return NULL;
    m->rescan_at = now + RESCAN_NS;
    reap_locked(m, now);
    for (uint32_t i = 0; i < PUSH_MAPS; i++) {
        struct push_map *e = &m->m[i];
        if (!gone(arg, e->ref.key))
            continue;
        if (e->map) {   /* none for a refused region */
            if (m->nold == PUSH_RETIRED)
                return NULL;
            /* the owner's pages go now; the range stays until no store
             * can be on its way into it */
            void *p = mmap(e->map, e->maplen, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
            if (p == MAP_FAILED)
                return NULL;
            m->old[m->nold++] = (struct retired){ e->map, e->maplen, now };
        }
        m->rescan_at = 0;
        return e;
    }
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

char *push_maps_at(struct sn_push_maps *m, uint32_t pid, const struct sn_share_ref *ref,
                   bool (*gone)(const void *arg, uint32_t key), const void *arg)
{
    char *at = NULL;
    if (lookup(m, ref, &at))
        return at;
    pthread_mutex_lock(&m->lock);
    uint32_t n = atomic_load(&m->n);
    if (!lookup(m, ref, &at)) {
        struct push_map *e = n < PUSH_MAPS ? &m->m[n] : victim_locked(m, gone, arg);
        if (e) {
            void *map = NULL;
            size_t maplen = 0;
            at = map_peer(pid, ref, &map, &maplen);
            if (!at)
                SN_DEBUG("push: peer pid %u: its region of key 0x%x is not the memfd it published: system calls",
                         pid, ref->key);
            entry_set(e, ref, at, map, maplen);
            if (n < PUSH_MAPS)
                atomic_store_explicit(&m->n, n + 1, memory_order_release);
        }
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
