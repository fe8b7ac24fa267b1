/* tests/gdaki/test_gdaki_ring_pool.c: the GPU queue pool
 * (plugin/gdaki/gdaki_ring_pool.c) carving host-memory blocks: regions are
 * 64 KiB-aligned, disjoint, packed into shared blocks, a block goes back
 * when its last region does, and bad frees are refused. */
#include <stdlib.h>
#include <string.h>

#include "gdaki_ring_pool.h"
#include "tap.h"

struct host_blocks {
    int live, allocs, fail, skew;
};

static int host_alloc(void *ctx, size_t len, uint64_t *base, char *err, size_t errlen)
{
    struct host_blocks *h = ctx;
    if (h->fail) {
        snprintf(err, errlen, "no memory (test)");
        return -1;
    }
    /* aligned, then moved off the boundary by skew bytes when asked */
    char *p = aligned_alloc(GDAKI_RING_UNIT, len + GDAKI_RING_UNIT);
    if (!p)
        return -1;
    *base = (uint64_t)(uintptr_t)(p + h->skew);
    h->live++;
    h->allocs++;
    return 0;
}

static void host_free(void *ctx, uint64_t base, size_t len)
{
    struct host_blocks *h = ctx;
    (void)len;
    free((char *)(uintptr_t)base - h->skew);
    h->live--;
}

static void pool_of(struct gdaki_ring_pool *p, struct host_blocks *h)
{
    memset(h, 0, sizeof(*h));
    struct gdaki_ring_ops ops = { host_alloc, host_free, h };
    gdaki_ring_pool_init(p, &ops);
}

/* A QP's region at the default 512 slots: 32 KiB ring, 64 KiB CQ, 4 KiB of
 * doorbells -> two units. */
#define QP_REGION (100u << 10)

TAP_CASE(test_regions_share_blocks_aligned_and_disjoint)
{
    struct gdaki_ring_pool p;
    struct host_blocks h;
    pool_of(&p, &h);
    char err[128];
    uint64_t a[40];
    for (int i = 0; i < 40; i++) {
        EXPECT_EQ_INT(0, gdaki_ring_pool_get(&p, QP_REGION, &a[i], err, sizeof(err)));
        EXPECT_EQ_U64(0, a[i] % GDAKI_RING_UNIT);
        memset((void *)(uintptr_t)a[i], i + 1, QP_REGION);
    }
    /* 16 two-unit regions a 2 MiB block: 40 regions in 3 blocks, not 40 */
    EXPECT_EQ_INT(3, h.allocs);
    EXPECT_EQ_INT(3, (int)gdaki_ring_pool_blocks(&p));
    /* no region overwrote another */
    for (int i = 0; i < 40; i++) {
        const unsigned char *b = (const unsigned char *)(uintptr_t)a[i];
        EXPECT_TRUE(b[0] == i + 1 && b[QP_REGION - 1] == i + 1);
        for (int j = 0; j < i; j++)
            EXPECT_TRUE(a[i] >= a[j] + 2 * GDAKI_RING_UNIT || a[j] >= a[i] + 2 * GDAKI_RING_UNIT);
    }
    for (int i = 0; i < 40; i++)
        EXPECT_EQ_INT(0, gdaki_ring_pool_put(&p, a[i]));
    EXPECT_EQ_INT(0, h.live);
    EXPECT_EQ_INT(0, (int)gdaki_ring_pool_blocks(&p));
}

TAP_CASE(test_freed_units_are_reused_and_empty_blocks_return)
{
    struct gdaki_ring_pool p;
    struct host_blocks h;
    pool_of(&p, &h);
    char err[128];
    uint64_t a[16], b;
    for (int i = 0; i < 16; i++)
        EXPECT_EQ_INT(0, gdaki_ring_pool_get(&p, QP_REGION, &a[i], err, sizeof(err)));
    EXPECT_EQ_INT(1, h.live);
    EXPECT_EQ_INT(0, gdaki_ring_pool_put(&p, a[5]));
    EXPECT_EQ_INT(0, gdaki_ring_pool_get(&p, QP_REGION, &b, err, sizeof(err)));
    EXPECT_EQ_U64(a[5], b);   /* the hole, not a new block */
    EXPECT_EQ_INT(1, h.allocs);
    /* a one-unit region fits where a two-unit one no longer does */
    EXPECT_EQ_INT(0, gdaki_ring_pool_put(&p, a[9]));
    uint64_t c, d;
    EXPECT_EQ_INT(0, gdaki_ring_pool_get(&p, 1, &c, err, sizeof(err)));
    EXPECT_EQ_U64(a[9], c);
    EXPECT_EQ_INT(0, gdaki_ring_pool_get(&p, QP_REGION, &d, err, sizeof(err)));
    EXPECT_EQ_INT(2, h.allocs);
    a[5] = b;
    a[9] = c;
    for (int i = 0; i < 16; i++)
        EXPECT_EQ_INT(0, gdaki_ring_pool_put(&p, a[i]));
    EXPECT_EQ_INT(1, h.live);  /* d's block */
    EXPECT_EQ_INT(0, gdaki_ring_pool_put(&p, d));
    EXPECT_EQ_INT(0, h.live);
}

TAP_CASE(test_large_region_gets_its_own_block)
{
    struct gdaki_ring_pool p;
    struct host_blocks h;
    pool_of(&p, &h);
    char err[128];
    uint64_t big, small;
    /* 32768 slots: a 2 MiB ring alone */
    EXPECT_EQ_INT(0, gdaki_ring_pool_get(&p, (3u << 20) + 4096, &big, err, sizeof(err)));
    EXPECT_EQ_U64(0, big % GDAKI_RING_UNIT);
    memset((void *)(uintptr_t)big, 0xab, (3u << 20) + 4096);
    EXPECT_EQ_INT(0, gdaki_ring_pool_get(&p, QP_REGION, &small, err, sizeof(err)));
    EXPECT_EQ_INT(2, h.allocs);
    EXPECT_EQ_INT(0, gdaki_ring_pool_put(&p, big));
    EXPECT_EQ_INT(1, h.live);
    EXPECT_EQ_INT(0, gdaki_ring_pool_put(&p, small));
    EXPECT_EQ_INT(0, h.live);
}

TAP_CASE(test_unaligned_blocks_still_give_aligned_regions)
{
    struct gdaki_ring_pool p;
    struct host_blocks h;
    pool_of(&p, &h);
    h.skew = 256;   /* as cuMemAlloc may give */
    char err[128];
    uint64_t a[15];
    for (int i = 0; i < 15; i++) {
        EXPECT_EQ_INT(0, gdaki_ring_pool_get(&p, QP_REGION, &a[i], err, sizeof(err)));
        EXPECT_EQ_U64(0, a[i] % GDAKI_RING_UNIT);
        memset((void *)(uintptr_t)a[i], 1, QP_REGION);
    }
    /* 31 whole units after the boundary: 15 regions in one block */
    EXPECT_EQ_INT(1, h.allocs);
    for (int i = 0; i < 15; i++)
        EXPECT_EQ_INT(0, gdaki_ring_pool_put(&p, a[i]));
    EXPECT_EQ_INT(0, h.live);
}

TAP_CASE(test_bad_frees_and_failures_are_refused)
{
    struct gdaki_ring_pool p;
    struct host_blocks h;
    pool_of(&p, &h);
    char err[128] = "";
    uint64_t a, b;
    EXPECT_EQ_INT(-1, gdaki_ring_pool_get(&p, 0, &a, err, sizeof(err)));
    EXPECT_EQ_INT(0, gdaki_ring_pool_get(&p, QP_REGION, &a, err, sizeof(err)));
    EXPECT_EQ_INT(0, gdaki_ring_pool_get(&p, QP_REGION, &b, err, sizeof(err)));
    EXPECT_EQ_INT(-1, gdaki_ring_pool_put(&p, a + 4096));           /* inside a region */
    EXPECT_EQ_INT(-1, gdaki_ring_pool_put(&p, a + GDAKI_RING_UNIT)); /* its second unit */
    EXPECT_EQ_INT(-1, gdaki_ring_pool_put(&p, 12345));               /* no block's */
    EXPECT_EQ_INT(0, gdaki_ring_pool_put(&p, a));
    EXPECT_EQ_INT(-1, gdaki_ring_pool_put(&p, a));                   /* twice */
    EXPECT_EQ_INT(1, h.live);                                        /* b keeps the block */
    EXPECT_EQ_INT(0, gdaki_ring_pool_put(&p, b));
    EXPECT_EQ_INT(0, h.live);
    h.fail = 1;
    err[0] = '\0';
    EXPECT_EQ_INT(-1, gdaki_ring_pool_get(&p, QP_REGION, &a, err, sizeof(err)));
    EXPECT_STREQ("no memory (test)", err);
    EXPECT_EQ_INT(0, (int)gdaki_ring_pool_blocks(&p));
}

int main(int argc, char **argv)
{
    return tap_run(argc, argv);
}
