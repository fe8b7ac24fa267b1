/* gdaki_ring_pool.c: see gdaki_ring_pool.h. A block's units are a 64-bit
 * map (a 2 MiB block has 32 units; a dedicated block may have more, but it
 * holds one region only, so its map is never searched). */
#include "gdaki_ring_pool.h"

#include <stdio.h>
#include <stdlib.h>

struct gdaki_ring_block {
    uint64_t base;           /* what ops->alloc gave */
    size_t len;
    uint64_t first;          /* the first unit's address (64 KiB-aligned) */
    unsigned units;          /* whole units from first to the block's end */
    uint64_t used;           /* unit i taken: bit i (shared blocks) */
    uint8_t run[64];         /* at a region's first unit: its length in units */
    int dedicated;           /* one region of over half a block */
    struct gdaki_ring_block *next;
};

void gdaki_ring_pool_init(struct gdaki_ring_pool *p, const struct gdaki_ring_ops *ops)
{
    p->ops = *ops;
    pthread_mutex_init(&p->lock, NULL);
    p->blocks = NULL;
}

static uint64_t run_mask(unsigned at, unsigned n)
{
    return (n >= 64 ? ~0ull : ((1ull << n) - 1)) << at;
}

/* First fit of n units in b; -1 when none. */
static int fit(const struct gdaki_ring_block *b, unsigned n)
{
    for (unsigned at = 0; at + n <= b->units; at++)
        if (!(b->used & run_mask(at, n)))
            return (int)at;
    return -1;
}

static struct gdaki_ring_block *new_block(struct gdaki_ring_pool *p, size_t len, char *err, size_t errlen)
{
    struct gdaki_ring_block *b = calloc(1, sizeof(*b));
    if (!b) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (p->ops.alloc(p->ops.ctx, len, &b->base, err, errlen) < 0) {
        free(b);
        return NULL;
    }
    b->len = len;
    b->first = (b->base + GDAKI_RING_UNIT - 1) & ~(uint64_t)(GDAKI_RING_UNIT - 1);
    b->units = (unsigned)((b->base + len - b->first) / GDAKI_RING_UNIT);
    return b;
}

int gdaki_ring_pool_get(struct gdaki_ring_pool *p, size_t len, uint64_t *addr, char *err, size_t errlen)
{
    if (!len || len > ((size_t)1 << 40)) {
        snprintf(err, errlen, "GPU queue region of %zu bytes", len);
        return -1;
    }
    unsigned n = (unsigned)((len + GDAKI_RING_UNIT - 1) / GDAKI_RING_UNIT);
    int dedicated = n > GDAKI_RING_BLOCK / GDAKI_RING_UNIT / 2, at = -1;
    pthread_mutex_lock(&p->lock);
    struct gdaki_ring_block *b = NULL;
    if (!dedicated)
        for (b = p->blocks; b && (b->dedicated || (at = fit(b, n)) < 0); b = b->next)
            ;
    if (!b) {
        /* a dedicated block has one unit more than asked: blocks need not
         * be aligned */
        b = new_block(p, dedicated ? (size_t)(n + 1) * GDAKI_RING_UNIT : GDAKI_RING_BLOCK, err, errlen);
        if (!b) {
            pthread_mutex_unlock(&p->lock);
            return -1;
        }
        b->dedicated = dedicated;
        at = dedicated ? 0 : fit(b, n);
        if (at < 0) { /* an unaligned block one unit short of n */
            p->ops.free(p->ops.ctx, b->base, b->len);
            free(b);
            pthread_mutex_unlock(&p->lock);
            snprintf(err, errlen, "a GPU block of %u bytes holds no %u units of 64 KiB", GDAKI_RING_BLOCK, n);
            return -1;
        }
        b->next = p->blocks;
        p->blocks = b;
    }
    if (!dedicated) {
        b->used |= run_mask((unsigned)at, n);
        b->run[at] = (uint8_t)n;
    }
    *addr = b->first + (uint64_t)at * GDAKI_RING_UNIT;
    pthread_mutex_unlock(&p->lock);
    return 0;
}

int gdaki_ring_pool_put(struct gdaki_ring_pool *p, uint64_t addr)
{
    pthread_mutex_lock(&p->lock);
    struct gdaki_ring_block **at = &p->blocks, *b;
    for (; (b = *at); at = &b->next)
        if (addr >= b->first && addr < b->first + (uint64_t)b->units * GDAKI_RING_UNIT)
            break;
    int rc = -1;
    if (b) {
        unsigned u = (unsigned)((addr - b->first) / GDAKI_RING_UNIT);
        if (b->dedicated) {
            rc = addr == b->first ? 0 : -1;
        } else if (addr == b->first + (uint64_t)u * GDAKI_RING_UNIT && b->run[u]) {
            b->used &= ~run_mask(u, b->run[u]);
            b->run[u] = 0;
            rc = 0;
        }
        if (!rc && (b->dedicated || !b->used)) {
            *at = b->next;
            p->ops.free(p->ops.ctx, b->base, b->len);
            free(b);
        }
    }
    pthread_mutex_unlock(&p->lock);
    return rc;
}

unsigned gdaki_ring_pool_blocks(struct gdaki_ring_pool *p)
{
    pthread_mutex_lock(&p->lock);
    unsigned n = 0;
    for (struct gdaki_ring_block *b = p->blocks; b; b = b->next)
        n++;
    pthread_mutex_unlock(&p->lock);
    return n;
}
