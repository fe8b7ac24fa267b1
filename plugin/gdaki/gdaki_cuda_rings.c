/* gdaki_cuda_rings.c: the ring pools of gdaki_cuda_ring_alloc, one per CUDA
 * device, over gdaki_cuda_alloc (the caller has that device's context
 * current, as gdaki_cuda_alloc needs). */
#include "gdaki_cuda.h"

#include <pthread.h>
#include <stdio.h>

#include "gdaki_ring_pool.h"

#define MAX_DEVS 64

static struct gdaki_ring_pool pools[MAX_DEVS];
static int ready[MAX_DEVS];
static pthread_mutex_t pools_lock = PTHREAD_MUTEX_INITIALIZER;

static int block_alloc(void *ctx, size_t len, uint64_t *base, char *err, size_t errlen)
{
    (void)ctx;
    return gdaki_cuda_alloc(len, base, err, errlen);
}

static void block_free(void *ctx, uint64_t base, size_t len)
{
    (void)ctx;
    (void)len;
    gdaki_cuda_free(base);
}

int gdaki_cuda_ring_alloc(int dev, size_t len, uint64_t *dptr, char *err, size_t errlen)
{
    if (dev < 0 || dev >= MAX_DEVS) {
        snprintf(err, errlen, "CUDA device %d: GPU queues serve devices 0..%d", dev, MAX_DEVS - 1);
        return -1;
    }
    pthread_mutex_lock(&pools_lock);
    if (!ready[dev]) {
        static const struct gdaki_ring_ops ops = { block_alloc, block_free, NULL };
        gdaki_ring_pool_init(&pools[dev], &ops);
        ready[dev] = 1;
    }
    pthread_mutex_unlock(&pools_lock);
    return gdaki_ring_pool_get(&pools[dev], len, dptr, err, errlen);
}

void gdaki_cuda_ring_free(uint64_t dptr)
{
    if (!dptr)
        return;
    for (int d = 0; d < MAX_DEVS; d++) {
        pthread_mutex_lock(&pools_lock);
        int r = ready[d];
        pthread_mutex_unlock(&pools_lock);
        if (r && gdaki_ring_pool_put(&pools[d], dptr) == 0)
            return;
    }
}
