/* tests/gdaki/cpu_posters.c: see cpu_posters.h. */
#include "cpu_posters.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "gdaki_queue.h"
#include "tap.h"

#define MAXLEN 4096

struct poster {
    struct gdaki_qp_dev *q;
    const struct gdaki_mr *src, *dst;
    size_t base;            /* this poster's byte range in src/dst */
    int count;
    const struct gdaki_mr *sig;   /* signal ADD after each message, or NULL */
    uint64_t add;
    int rc;
};

static size_t len_of(int i, size_t base)
{
    return 1 + ((size_t)i * 2654435761u + base) % MAXLEN;
}

static void *poster_main(void *arg)
{
    struct poster *t = arg;
    for (int i = 0; i < t->count; i++) {
        size_t off = t->base + (size_t)i * MAXLEN;
        struct gdaki_op op = { .laddr = t->src->addr + off, .lkey = t->src->lkey,
                               .len = (uint32_t)len_of(i, t->base),
                               .raddr = t->dst->addr + off, .rkey = t->dst->rkey };
        uint64_t tk = t->sig ? gdaki_q_post_signal(t->q, &op, t->sig->addr, t->sig->rkey, t->add)
                             : gdaki_q_post1(t->q, GDAKI_KIND_WRITE, &op);
        if (tk == GDAKI_SLOT_ERROR) {
            t->rc = -1;
            return NULL;
        }
    }
    t->rc = gdaki_q_quiet(t->q);
    return NULL;
}

static void reg(struct gdaki_pair *p, void *buf, size_t len, struct gdaki_mr *mr)
{
    char err[512];
    if (gdaki_pair_reg(p, buf, len, mr, err, sizeof(err)) != 0)
        tap_fail_at(__FILE__, __LINE__, "gdaki_pair_reg: %s", err);
}

static void run(struct gdaki_pair *p, int nthreads, int count, bool signal_add)
{
    EXPECT_TRUE(nthreads >= 1 && nthreads <= CPU_POSTERS_MAX);
    struct gdaki_qp_dev *q = gdaki_pair_qp_host(p);
    size_t bytes = (size_t)nthreads * count * MAXLEN;
    uint8_t *src = malloc(bytes), *dst = calloc(1, bytes);
    EXPECT_TRUE(src && dst);
    for (size_t i = 0; i < bytes; i++)
        src[i] = (uint8_t)(i * 131 + 3 * 7 + 1);
    struct gdaki_mr ms, md, mg;
    reg(p, src, bytes, &ms);
    reg(p, dst, bytes, &md);
    static uint64_t signal;
    signal = 0;
    if (signal_add)
        reg(p, &signal, sizeof(signal), &mg);
    struct poster t[CPU_POSTERS_MAX];
    pthread_t th[CPU_POSTERS_MAX];
    uint64_t sum = 0;
    for (int i = 0; i < nthreads; i++) {
        t[i] = (struct poster){ .q = q, .src = &ms, .dst = &md,
                                .base = (size_t)i * count * MAXLEN, .count = count,
                                .sig = signal_add ? &mg : NULL, .add = (uint64_t)i + 1 };
        sum += (uint64_t)count * t[i].add;
        EXPECT_EQ_INT(0, pthread_create(&th[i], NULL, poster_main, &t[i]));
    }
    for (int i = 0; i < nthreads; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < nthreads; i++) {
        EXPECT_EQ_INT(0, t[i].rc);
        for (int k = 0; k < count; k++) {
            size_t off = t[i].base + (size_t)k * MAXLEN, l = len_of(k, t[i].base);
            EXPECT_MEMEQ(src + off, dst + off, l);
            if (l < MAXLEN)
                EXPECT_EQ_INT(0, dst[off + l]);    /* nothing past the message */
        }
    }
    /* a signalled message takes two slots: the WRITE and the atomic */
    uint64_t total = (uint64_t)nthreads * count * (signal_add ? 2 : 1);
    EXPECT_EQ_U64(total, q->resv);
    EXPECT_EQ_U64(total, q->ready);
    EXPECT_EQ_U64(total, q->done);
    EXPECT_EQ_INT(0, q->err);
    if (signal_add) {
        EXPECT_EQ_U64(sum, __atomic_load_n(&signal, __ATOMIC_ACQUIRE));
        gdaki_pair_dereg(p, &mg);
    }
    gdaki_pair_dereg(p, &ms);
    gdaki_pair_dereg(p, &md);
    free(src);
    free(dst);
}

void cpu_posters_run(struct gdaki_pair *p, int nthreads, int count)
{
    run(p, nthreads, count, false);
}

void cpu_posters_signal_add_run(struct gdaki_pair *p, int nthreads, int count)
{
    run(p, nthreads, count, true);
}
