/* gdaki_ring_pool.h: GPU memory for the DEVX queues of GDAKI QPs, carved
 * from shared blocks.
 *
 * Why: a QP's region (send ring, CQ, doorbell records: about 100 KiB at
 * 512 slots) as a GPU allocation of its own is rounded by the VMM API to
 * its granularity (2 MiB on H100), so a GIN full mesh paid 2 MiB per QP,
 * 4 MiB per peer per rank. Here regions are whole units of 64 KiB (the GPU
 * page that a peer-memory or dmabuf registration pins: no two QPs' umems
 * share one) taken first-fit from blocks of GDAKI_RING_BLOCK bytes; a block
 * goes back to the driver when its last region does. A region over half a
 * block gets a block of its own size.
 *
 * Contract: the pool gets and frees its blocks through ops (the CUDA
 * driver in gdaki_cuda.c; host memory in the unit test), which need not
 * align them: units start at the first 64 KiB boundary of a block.
 * get/put are thread-safe. put of an address get did not return, or twice,
 * is ignored and returns -1. */
#ifndef RAILNET_GDAKI_RING_POOL_H
#define RAILNET_GDAKI_RING_POOL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define GDAKI_RING_UNIT (64u << 10)
#define GDAKI_RING_BLOCK (2u << 20)

struct gdaki_ring_ops {
    int (*alloc)(void *ctx, size_t len, uint64_t *base, char *err, size_t errlen);
    void (*free)(void *ctx, uint64_t base, size_t len);
    void *ctx;
};

struct gdaki_ring_block;

struct gdaki_ring_pool {
    struct gdaki_ring_ops ops;
    pthread_mutex_t lock;
    struct gdaki_ring_block *blocks;
};

void gdaki_ring_pool_init(struct gdaki_ring_pool *p, const struct gdaki_ring_ops *ops);
/* A region of len bytes (rounded up to whole units), 64 KiB-aligned. */
int gdaki_ring_pool_get(struct gdaki_ring_pool *p, size_t len, uint64_t *addr, char *err, size_t errlen);
int gdaki_ring_pool_put(struct gdaki_ring_pool *p, uint64_t addr);
/* Blocks the pool holds from ops now. */
unsigned gdaki_ring_pool_blocks(struct gdaki_ring_pool *p);

#endif
