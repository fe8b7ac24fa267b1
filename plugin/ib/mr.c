/* plugin/ib/mr.c: registration of host and GPU memory, with a cache
 * (mr.h). */
#include "mr.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "gpumem.h"
#include "devices.h"
#include "ibvwrap.h"
#include "log.h"

#define PAGE 4096ull

enum mr_path { PATH_HOST = 0, PATH_PEERMEM, PATH_DMABUF, PATH_NCCL_DMABUF };
static const char *const path_name[] = { "host", "peer memory", "dmabuf", "dmabuf (NCCL's fd)" };

struct mr_handle {
    struct ibv_pd *pd;
    uintptr_t start, end;   /* registered range */
    enum mr_path path;
    int strict;             /* registered without relaxed ordering (MR_FLAG_STRICT) */
    int refs;
    struct ibv_mr *mr;
    struct mr_handle *next;
};

static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static struct mr_handle *cache;
static int cache_n;
static int warned_no_ro;

/* Remote atomics are allowed on every registration: GIN signals are 64-bit
 * fetch-and-adds into NCCL's windows, and the cache shares one MR between
 * the p2p and GIN faces of a device. */
static int access_flags(int strict)
{
    int a = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    int ro = strict ? 0 : rn_config()->relaxed_ordering;
    if (ro != 0 && ibvwrap_global()->reg_mr_iova2)
        a |= IBV_ACCESS_RELAXED_ORDERING;
    else if (ro == 1 && !__atomic_exchange_n(&warned_no_ro, 1, __ATOMIC_RELAXED))
        WARN("NET/railnet: RAILNET_RELAXED_ORDERING=1 but %s lacks ibv_reg_mr_iova2 (rdma-core < 28): "
             "registering without relaxed ordering",
             ibvwrap_global()->path);
    return a;
}

/* cache_mu held: a registration by path covering [s, e), with one more
 * reference taken, or NULL. */
static struct mr_handle *cache_ref(struct ibv_pd *pd, uintptr_t s, uintptr_t e, enum mr_path path, int strict)
{
    for (struct mr_handle *h = cache; h; h = h->next) {
        if (h->pd == pd && h->path == path && h->strict == strict && h->start <= s && e <= h->end) {
            h->refs++;
            return h;
        }
    }
    return NULL;
}

/* cache_mu held: records mr (one reference). It owns mr: when the entry
 * cannot be allocated, mr is deregistered and NULL returned. */
static struct mr_handle *cache_add(struct ibv_pd *pd, uintptr_t s, uintptr_t e, enum mr_path path,
                                   int strict, struct ibv_mr *mr)
{
    struct mr_handle *h = calloc(1, sizeof(*h));
    if (!h) {
        ibvwrap_global()->dereg_mr(mr);
        return NULL;
    }
    h->pd = pd, h->start = s, h->end = e, h->path = path, h->strict = strict, h->mr = mr, h->refs = 1;
    h->next = cache;
    cache = h;
    cache_n++;
    return h;
}

static struct ibv_mr *reg_dmabuf_range(struct ibv_pd *pd, uintptr_t base, size_t size, int access)
{
    int fd;
    if (gpumem_dmabuf_fd(base, size, &fd))
        return NULL;
    struct ibv_mr *mr = ibvwrap_global()->reg_dmabuf_mr(pd, 0, size, base, fd, access);
    int e = errno;
    close(fd);
    errno = e;
    return mr;
}

static const struct rn_device *device_of(int dev)
{
    const struct rn_device *d = devices_get(dev);
    if (!d)
        WARN("NET/railnet: regMr: the comm belongs to no device (%d)", dev);
    return d;
}

ncclResult_t mr_register(int dev, void *data, size_t size, int type, void **mhandle)
{
    return mr_register_dev(dev, data, size, type, 0, mhandle);
}

ncclResult_t mr_register_dmabuf(int dev, void *data, size_t size, int type, uint64_t offset, int fd,
                                void **mhandle)
{
    return mr_register_dmabuf_dev(dev, data, size, type, offset, fd, 0, mhandle);
}

ncclResult_t mr_register_dev(int dev, void *data, size_t size, int type, int flags, void **mhandle)
{
    *mhandle = NULL;
    const struct rn_device *d = device_of(dev);
    if (!d)
        return ncclInvalidArgument;
    int strict = (flags & MR_FLAG_STRICT) != 0;
    if (type != NCCL_PTR_HOST && type != NCCL_PTR_CUDA) {
        WARN("NET/railnet: regMr on %s: pointer type %d is neither HOST nor CUDA", d->name, type);
        return ncclInvalidArgument;
    }
    if (type == NCCL_PTR_CUDA && !(d->ptr_support & NCCL_PTR_CUDA)) {
        WARN("NET/railnet: regMr on %s: CUDA memory cannot be registered on this host (see the init log)", d->name);
        return ncclInvalidUsage;
    }
    struct ibv_pd *pd = d->ports[0].pd;
    const struct ibvwrap *v = ibvwrap_global();
    uintptr_t s = (uintptr_t)data & ~(uintptr_t)(PAGE - 1);
    uintptr_t e = ((uintptr_t)data + size + PAGE - 1) & ~(uintptr_t)(PAGE - 1);
    if (size == 0)
        e = s + PAGE;
    int access = access_flags(strict);
    int want_dmabuf = type == NCCL_PTR_CUDA && rn_config()->dmabuf != 0 && (d->ptr_support & NCCL_PTR_DMABUF);
    enum mr_path path = type == NCCL_PTR_HOST ? PATH_HOST : want_dmabuf ? PATH_DMABUF : PATH_PEERMEM;
    if (path == PATH_DMABUF) {
        /* the whole allocation: later buffers inside it hit the cache */
        uintptr_t base;
        size_t len;
        if (gpumem_range(data, &base, &len) == 0)
            s = base, e = base + len;
    }

    pthread_mutex_lock(&cache_mu);
    struct mr_handle *h = cache_ref(pd, (uintptr_t)data, (uintptr_t)data + size, path, strict);
    if (h) {
        pthread_mutex_unlock(&cache_mu);
        *mhandle = h;
        return ncclSuccess;
    }
    struct ibv_mr *mr = NULL;
    if (path == PATH_DMABUF) {
        mr = reg_dmabuf_range(pd, s, e - s, access);
        if (!mr && rn_config()->dmabuf == RN_AUTO) {
            INFO(NCCL_NET | NCCL_REG, "NET/railnet: %s: dmabuf registration of %p failed (%s); trying peer memory",
                 d->name, data, strerror(errno));
            path = PATH_PEERMEM;
            s = (uintptr_t)data & ~(uintptr_t)(PAGE - 1);
            e = ((uintptr_t)data + size + PAGE - 1) & ~(uintptr_t)(PAGE - 1);
        }
    }
    if (path != PATH_DMABUF)
        mr = ibvwrap_reg_mr(v, pd, (void *)s, e - s, access, NULL);
    if (!mr) {
        int err = errno;
        pthread_mutex_unlock(&cache_mu);
        WARN("NET/railnet: regMr on %s: registering %zu bytes of %s memory at %p by %s failed: %s%s", d->name, size,
             type == NCCL_PTR_CUDA ? "CUDA" : "host", data, path_name[path], strerror(err),
             path == PATH_PEERMEM ? " (is nvidia_peermem loaded?)" : "");
        return ncclSystemError;
    }
    h = cache_add(pd, s, e, path, strict, mr);
    pthread_mutex_unlock(&cache_mu);
    if (!h)
        return ncclSystemError;
    TRACE(NCCL_NET | NCCL_REG, "NET/railnet: %s: registered [%p, +%zu) by %s, lkey 0x%x", d->name, (void *)s,
          (size_t)(e - s), path_name[path], mr->lkey);
    *mhandle = h;
    return ncclSuccess;
}

ncclResult_t mr_register_dmabuf_dev(int dev, void *data, size_t size, int type, uint64_t offset, int fd, int flags,
                                    void **mhandle)
{
    *mhandle = NULL;
    const struct rn_device *d = device_of(dev);
    if (!d)
        return ncclInvalidArgument;
    if (type == NCCL_PTR_HOST || fd < 0)
        return mr_register_dev(dev, data, size, type, flags, mhandle);
    int strict = (flags & MR_FLAG_STRICT) != 0;
    const struct ibvwrap *v = ibvwrap_global();
    if (!v->reg_dmabuf_mr || !(d->ptr_support & NCCL_PTR_DMABUF)) {
        WARN("NET/railnet: regMrDmaBuf on %s: dmabuf registration is not supported here (%s)", d->name,
             v->reg_dmabuf_mr ? "the init test registration failed" : "rdma-core < 34");
        return ncclInvalidUsage;
    }
    struct ibv_pd *pd = d->ports[0].pd;
    pthread_mutex_lock(&cache_mu);
    /* an fd is NCCL's: the cache matches the address range, never the fd */
    struct mr_handle *h = cache_ref(pd, (uintptr_t)data, (uintptr_t)data + size, PATH_NCCL_DMABUF, strict);
    if (h) {
        pthread_mutex_unlock(&cache_mu);
        *mhandle = h;
        return ncclSuccess;
    }
    struct ibv_mr *mr = v->reg_dmabuf_mr(pd, offset, size, (uint64_t)(uintptr_t)data, fd, access_flags(strict));
    if (!mr) {
        int err = errno;
        pthread_mutex_unlock(&cache_mu);
        WARN("NET/railnet: regMrDmaBuf on %s: ibv_reg_dmabuf_mr(fd %d, offset %llu, %zu bytes) failed: %s", d->name,
             fd, (unsigned long long)offset, size, strerror(err));
        return ncclSystemError;
    }
    h = cache_add(pd, (uintptr_t)data, (uintptr_t)data + size, PATH_NCCL_DMABUF, strict, mr);
    pthread_mutex_unlock(&cache_mu);
    if (!h)
        return ncclSystemError;
    *mhandle = h;
    return ncclSuccess;
}

ncclResult_t mr_deregister(void *comm, void *mhandle)
{
    (void)comm;
    struct mr_handle *h = mhandle;
    if (!h)
        return ncclSuccess;
    pthread_mutex_lock(&cache_mu);
    struct mr_handle **pp = &cache;
    while (*pp && *pp != h)
        pp = &(*pp)->next;
    if (!*pp) {
        pthread_mutex_unlock(&cache_mu);
        WARN("NET/railnet: deregMr: %p is not a registration of this plugin (already deregistered?)", mhandle);
        return ncclInvalidArgument;
    }
    if (--h->refs > 0) {
        pthread_mutex_unlock(&cache_mu);
        return ncclSuccess;
    }
    *pp = h->next;
    cache_n--;
    pthread_mutex_unlock(&cache_mu);
    int rc = ibvwrap_global()->dereg_mr(h->mr);
    free(h);
    if (rc) {
        WARN("NET/railnet: deregMr: ibv_dereg_mr failed: %s", strerror(rc));
        return ncclSystemError;
    }
    return ncclSuccess;
}

uint32_t mr_lkey(const void *mhandle, int port_idx)
{
    (void)port_idx; /* the ports of a device share one protection domain */
    return ((const struct mr_handle *)mhandle)->mr->lkey;
}

uint32_t mr_rkey(const void *mhandle, int port_idx)
{
    (void)port_idx;
    return ((const struct mr_handle *)mhandle)->mr->rkey;
}

int mr_is_cuda(const void *mhandle)
{
    const struct mr_handle *h = mhandle;
    return h && h->path != PATH_HOST;
}

int mr_needs_gdr_flush(const void *mhandle)
{
    int mode = rn_config()->gdr_flush;
    if (!mhandle || mode == 0)
        return 0;
    return mode == 2 || mr_is_cuda(mhandle);
}

int mr_cache_entries(void)
{
    pthread_mutex_lock(&cache_mu);
    int n = cache_n;
    pthread_mutex_unlock(&cache_mu);
    return n;
}

int mr_probe_gpu(int dev, const struct rn_device *r)
{
    char err[256];
    struct gpumem_probe p;
    if (gpumem_probe_alloc(&p, 2u << 20, err, sizeof(err))) {
        INFO(NCCL_NET | NCCL_INIT, "NET/railnet: device %d (%s): host memory only: %s", dev, r->name, err);
        return 0;
    }
    const struct ibvwrap *v = ibvwrap_global();
    struct ibv_pd *pd = r->ports[0].pd;
    int access = access_flags(0);
    int bits = 0;
    const char *dmabuf_why = "disabled by RAILNET_DMABUF=0";
    if (rn_config()->dmabuf != 0) {
        struct ibv_mr *mr = NULL;
        if (!v->reg_dmabuf_mr)
            dmabuf_why = "rdma-core < 34 has no ibv_reg_dmabuf_mr";
        else if (!gpumem_dmabuf_supported())
            dmabuf_why = "the GPU or driver does not support dmabuf";
        else if (!(mr = reg_dmabuf_range(pd, p.ptr, p.size, access)))
            dmabuf_why = strerror(errno);
        if (mr) {
            v->dereg_mr(mr);
            bits |= NCCL_PTR_CUDA | NCCL_PTR_DMABUF;
        }
    }
    const char *peer_why = "disabled by RAILNET_DMABUF=1";
    int peer_ok = 0;
    if (rn_config()->dmabuf != 1) {
        struct ibv_mr *mr = ibvwrap_reg_mr(v, pd, (void *)p.ptr, p.size, access, NULL);
        if (mr) {
            v->dereg_mr(mr);
            peer_ok = 1;
            bits |= NCCL_PTR_CUDA;
        } else {
            peer_why = strerror(errno);
        }
    }
    gpumem_probe_free(&p);
    char dm[160], pm[160];
    snprintf(dm, sizeof(dm), bits & NCCL_PTR_DMABUF ? "yes" : "no (%s)", dmabuf_why);
    snprintf(pm, sizeof(pm), peer_ok ? "yes" : "no (%s)", peer_why);
    INFO(NCCL_NET | NCCL_INIT, "NET/railnet: device %d (%s): GPU memory registration: dmabuf %s, peer memory %s, "
         "relaxed ordering %s", dev, r->name, dm, pm, access & IBV_ACCESS_RELAXED_ORDERING ? "on" : "off");
    return bits;
}
