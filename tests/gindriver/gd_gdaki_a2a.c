/* tests/gindriver/gd_gdaki_a2a.c: gdaki-a2a, the shape of nccl-tests'
 * GIN alltoall kernel (alltoall_perf -D 3) on railnet's GDAKI queues,
 * posted from CPU threads as NCCL 2.28.9's device code posts them
 * (tests/gin_gdaki/doca_cpu.h):
 * - A2A_CTAS threads per rank play the kernel's CTAs; kernels follow each
 *   other with no wait on the network between them (only the CTAs of one
 *   rank meet at a kernel's end, as a stream orders kernels), so one
 *   kernel's signals, barrier signals and ring slots meet the next's;
 * - each kernel: every CTA reads its signal, then a world barrier (a
 *   signal-only atomic to every peer on the CTA's barrier signal, then a
 *   wait for the epoch), CTA 0 puts one chunk to every rank, itself
 *   included, each with an increment of signal 0 of the target, CTA 0
 *   waits until its signal has moved by nranks, every CTA flushes every
 *   QP, and a second barrier ends the kernel;
 * - many CTAs post to one QP at once (the barrier signals), as the GPU's
 *   do, which the single-threaded gdaki case never did.
 * At the end: every received chunk byte-checked, signal 0 exactly kernels
 * x nranks, every barrier signal exactly 2 x kernels x (nranks - 1), and
 * no error CQE (queryLastError).
 *
 * gdaki-release: the same kernels, but the last rank is killed after its
 * third kernel, and the CTAs behave as NCCL 2.28's device code does on a
 * failure: they ignore error CQEs and have no abort, so they spin on the
 * dead rank's signals. Each survivor waits for queryLastError to report
 * the failure, destroys its context as ncclCommAbort does, and every CTA
 * must then finish its remaining kernels within A2A_RELEASE_S.
 *
 * --sets N: N GDAKI contexts on the one collComm (N createContext calls,
 * as NCCL 2.30 makes one per device communicator), each with CTAs of its
 * own running at once; with gdaki-release every set must report the
 * failure, and destroying each (last made first) must end its CTAs. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../gin_gdaki/doca_cpu.h"
#include "gd_gdaki.h"
#include "gd_tests.h"

#define A2A_CTAS 16
#define A2A_DEADLINE_S 120.0
#define A2A_SIG_BAR(b) (A2A_CTAS + (b)) /* barrier signals after the kernel's own, as NCCL lays them */
#define A2A_RELEASE_S 10.0
#define A2A_VICTIM_AFTER 3              /* kernels the killed rank completes */
#define A2A_MAX_SETS 4

struct a2a {
    struct gk k;
    int me, n, kernels;
    size_t chunk;
    pthread_barrier_t kernel_end;
    double deadline;
    int failed;                 /* atomic: first failure wins the message */
    int release;                /* gdaki-release: no abort, error CQEs ignored (2: -query) */
    int done;                   /* atomic: kernels CTA 0 completed */
    int ended;                  /* atomic: CTAs that returned */
    uint64_t epoch[A2A_CTAS];
};

struct a2a_cta {
    struct a2a *a;
    int b;
};

static uint64_t chunk_id(int from, int to)
{
    return 0xa2a0000000000000ull | ((uint64_t)from << 16) | (uint64_t)to;
}

static void a2a_fail(struct a2a *a, const char *what, int b, int kernel, uint64_t got, uint64_t want)
{
    if (!__atomic_exchange_n(&a->failed, 1, __ATOMIC_ACQ_REL))
        printf("rank %d: CTA %d, kernel %d: %s (%llu, awaited %llu)\n", a->me, b, kernel, what,
               (unsigned long long)got, (unsigned long long)want);
}

/* waitSignal: the word reaches at least want, or the deadline passes */
static int a2a_wait_signal(struct a2a *a, int id, uint64_t want, int b, int kernel, const char *what)
{
    volatile uint64_t *sig = a->k.gc->signals_table.buffer;
    while (__atomic_load_n(&sig[id], __ATOMIC_ACQUIRE) < want) {
        if (!a->release && __atomic_load_n(&a->failed, __ATOMIC_ACQUIRE))
            return -1;
        if (gd_now() > a->deadline) {
            a2a_fail(a, what, b, kernel, __atomic_load_n(&sig[id], __ATOMIC_ACQUIRE), want);
            return -1;
        }
        sched_yield();
    }
    return 0;
}

/* ncclGinBarrierSession::sync of CTA b on the world team */
static int a2a_barrier(struct a2a *a, int b, int kernel)
{
    struct rn_gin_gdaki_gpu_ctx *gc = a->k.gc;
    struct dc_addr sink = { 0, gc->sink_buffer_lkey };
    for (int i = 0; i < a->n - 1; i++) {
        int peer = (a->me + 1 + i) % a->n;
        struct dc_addr sig = { 8u * (gc->signals_table.offset + A2A_SIG_BAR(b)), gc->signals_table.rkeys[peer] };
        dc_signal(gc->gdqp + peer, sig, sink, 1);
    }
    a->epoch[b] += (uint64_t)(a->n - 1);
    return a2a_wait_signal(a, A2A_SIG_BAR(b), a->epoch[b], b, kernel, "barrier signal stalled");
}

static void *a2a_cta_main(void *arg)
{
    struct a2a_cta *t = arg;
    struct a2a *a = t->a;
    struct rn_gin_gdaki_gpu_ctx *gc = a->k.gc;
    int b = t->b;
    volatile uint64_t *sig = gc->signals_table.buffer;
    for (int kernel = 0; kernel < a->kernels; kernel++) {
        uint64_t base = __atomic_load_n(&sig[b], __ATOMIC_ACQUIRE);
        int bad = a2a_barrier(a, b, kernel);
        if (!bad && b == 0) {
            for (int r = 0; r < a->n; r++) {
                struct dc_addr ra = { (uint64_t)a->me * a->chunk, a->k.dst_gh->rkeys[r] };
                struct dc_addr la = { (uint64_t)r * a->chunk, a->k.src_gh->lkey };
                struct dc_addr sg = { 8u * gc->signals_table.offset, gc->signals_table.rkeys[r] };
                struct dc_addr sink = { 0, gc->sink_buffer_lkey };
                dc_put_signal(gc->gdqp + r, ra, la, a->chunk, sg, sink, 1);
            }
            bad = a2a_wait_signal(a, 0, base + (uint64_t)a->n, b, kernel, "signal 0 stalled");
        }
        for (int p = 0; p < a->n && !bad; p++) {
            int w = dc_wait(gc->gdqp + p, A2A_DEADLINE_S);
            if (w == -EIO && a->release)
                w = 0;          /* the device code's flush returns nothing */
            if (w) {
                a2a_fail(a, w == -ETIMEDOUT ? "flush timed out" : "flush met an error CQE", b, kernel, (uint64_t)p,
                         0);
                bad = 1;
            }
        }
        if (!bad)
            bad = a2a_barrier(a, b, kernel);
        pthread_barrier_wait(&a->kernel_end);
        if (b == 0)
            __atomic_store_n(&a->done, kernel + 1, __ATOMIC_RELEASE);
        if (__atomic_load_n(&a->failed, __ATOMIC_ACQUIRE))
            break;
    }
    __atomic_add_fetch(&a->ended, 1, __ATOMIC_ACQ_REL);
    return NULL;
}

/* gdaki-release, with every set's CTAs started: the victim is killed
 * after A2A_VICTIM_AFTER kernels of the first set; a survivor waits for
 * each set's queryLastError to report the error, destroys the sets, last
 * made first, and gives every CTA A2A_RELEASE_S to end. 0 or 1. */
static int a2a_release(struct gd_rank *r, struct a2a **a, int nsets)
{
    int me = a[0]->me, n = a[0]->n;
    if (me == n - 1) {
        while (__atomic_load_n(&a[0]->done, __ATOMIC_ACQUIRE) < A2A_VICTIM_AFTER && gd_now() < a[0]->deadline)
            usleep(1000);
        gd_await_kill(r);
    }
    double t0 = gd_now();
    for (int s = 0; s < nsets; s++) {
        bool has = false;
        while (r->gin->queryLastError(a[s]->k.ctx, &has) == ncclSuccess && !has && gd_now() < t0 + A2A_RELEASE_S)
            usleep(1000);
        if (!has) {
            printf("rank %d: queryLastError of set %d reports nothing %.0f s into the run with rank %d killed\n", me, s,
                   A2A_RELEASE_S, n - 1);
            return 1;
        }
    }
    int at = __atomic_load_n(&a[0]->done, __ATOMIC_ACQUIRE);
    /* gdaki-release-query: NCCL 2.29 waits for the application's stream
     * before any destroyContext, so reporting the error must do it */
    int by_query = a[0]->release == 2;
    const char *by = by_query ? "queryLastError" : "destroyContext";
    for (int s = nsets - 1; s >= 0 && !by_query; s--) {
        if (r->gin->destroyContext(a[s]->k.ctx) != ncclSuccess) {
            printf("rank %d: destroyContext of failed set %d failed\n", me, s);
            return 1;
        }
        a[s]->k.ctx = NULL;
    }
    double t1 = gd_now();
    int ended = 0, ctas = nsets * A2A_CTAS;
    for (;;) {
        ended = 0;
        for (int s = 0; s < nsets; s++)
            ended += __atomic_load_n(&a[s]->ended, __ATOMIC_ACQUIRE);
        if (ended == ctas || gd_now() > t1 + A2A_RELEASE_S)
            break;
        usleep(1000);
    }
    if (ended < ctas) {
        for (int s = 0; s < nsets; s++)
            printf("rank %d: set %d: %d of %d CTAs still spin %.0f s after %s (at kernel %d of %d)\n", me, s,
                   A2A_CTAS - __atomic_load_n(&a[s]->ended, __ATOMIC_ACQUIRE), A2A_CTAS, A2A_RELEASE_S, by,
                   __atomic_load_n(&a[s]->done, __ATOMIC_ACQUIRE), a[s]->kernels);
        fflush(stdout);
        _exit(1);       /* the spinning CTAs cannot be joined */
    }
    printf("rank %d: error seen at kernel %d; after %s of %d set(s) all %d CTAs ended their %d kernels in %.2f s\n",
           me, at, by, nsets, ctas, a[0]->kernels, gd_now() - t1);
    for (int s = nsets - 1; s >= 0 && by_query; s--) {
        if (r->gin->destroyContext(a[s]->k.ctx) != ncclSuccess) {
            printf("rank %d: destroyContext of released set %d failed\n", me, s);
            return 1;
        }
        a[s]->k.ctx = NULL;
    }
    return 0;
}

/* The end checks of one set: its signals exact, its context error-free. */
static int a2a_check_set(struct gd_rank *r, struct a2a *a, int set)
{
    int bad = a->failed;
    volatile uint64_t *sig = a->k.gc->signals_table.buffer;
    if (!bad) {
        /* late atomics of the peers' last barrier: they may still land */
        uint64_t want = 2ull * (uint64_t)a->kernels * (uint64_t)(a->n - 1);
        for (int b = 0; b < A2A_CTAS && !bad; b++)
            bad = a2a_wait_signal(a, A2A_SIG_BAR(b), want, b, a->kernels, "final barrier signal");
        for (int b = 0; b < A2A_CTAS && !bad; b++)
            if (sig[A2A_SIG_BAR(b)] != want) {
                a2a_fail(a, "barrier signal overshot", b, a->kernels, sig[A2A_SIG_BAR(b)], want);
                bad = 1;
            }
        uint64_t want0 = (uint64_t)a->kernels * (uint64_t)a->n;
        if (!bad && sig[0] != want0) {
            a2a_fail(a, "signal 0 is not kernels x ranks", 0, a->kernels, sig[0], want0);
            bad = 1;
        }
        for (int b = 1; b < A2A_CTAS && !bad; b++)
            if (sig[b]) {
                a2a_fail(a, "a signal no put names moved", b, a->kernels, sig[b], 0);
                bad = 1;
            }
    }
    bool has = true;
    if (r->gin->queryLastError(a->k.ctx, &has) != ncclSuccess || has) {
        printf("rank %d: queryLastError of set %d reports an error\n", a->me, set);
        bad = 1;
    }
    if (!bad)
        printf("rank %d: set %d: %d kernels of %d CTAs to %d ranks, %zu-byte chunks, signals exact, %llu slots on a "
               "ring of %u\n",
               a->me, set, a->kernels, A2A_CTAS, a->n, a->chunk,
               (unsigned long long)a->k.gc->gdqp[(a->me + 1) % a->n].sq_rsvd_index,
               (unsigned)a->k.gc->gdqp[0].sq_wqe_num);
    return bad;
}

/* Sets made on the collComm (--sets): the first owns the windows; each
 * later one is another createContext (gd_contexts + s contexts), as NCCL
 * 2.30 makes one per device communicator. Their CTAs run at once, each
 * set's kernels on its own queues and signals; all of them put the same
 * chunks into the same windows, so the bytes are checked once. */
static int t_gdaki_a2a(struct gd_rank *r, void *arg)
{
    struct gd_opts *o = arg;
    int nsets = o->sets, bad = 0, ready = 0;
    struct a2a *a[A2A_MAX_SETS] = { 0 };
    for (; ready < nsets && !bad; ready++) {
        struct a2a *x = a[ready] = calloc(1, sizeof(*x));
        if (!x) {
            bad = 1;
            break;
        }
        x->me = r->rank;
        x->n = r->nranks;
        x->kernels = o->rounds;
        x->release = o->release;
        x->chunk = o->slot;
        bad = ready == 0 ? gk_open(r, &x->k, (size_t)x->n * x->chunk)
                         : gk_ctx_open(&a[0]->k, &x->k, gd_contexts + ready, GK_NSIG, GK_NCNT);
    }
    if (bad) {
        for (int s = ready - 1; s >= 0; s--) {
            if (a[s])
                gk_close(&a[s]->k);
            free(a[s]);
        }
        return 1;
    }
    int me = a[0]->me, n = a[0]->n;
    size_t chunk = a[0]->chunk;
    for (int t = 0; t < n; t++)
        for (size_t x = 0; x < chunk; x++)
            a[0]->k.src[(size_t)t * chunk + x] = gd_byte(chunk_id(me, t), x);
    bad = gd_barrier(r);
    pthread_t th[A2A_MAX_SETS * A2A_CTAS];
    struct a2a_cta cta[A2A_MAX_SETS * A2A_CTAS];
    int started = 0;
    for (int s = 0; s < nsets; s++) {
        pthread_barrier_init(&a[s]->kernel_end, NULL, A2A_CTAS);
        a[s]->deadline = gd_now() + A2A_DEADLINE_S;
    }
    for (int i = 0; i < nsets * A2A_CTAS && !bad; i++) {
        cta[i] = (struct a2a_cta){ a[i / A2A_CTAS], i % A2A_CTAS };
        if (pthread_create(&th[i], NULL, a2a_cta_main, &cta[i]) != 0) {
            printf("rank %d: pthread_create failed\n", me);
            bad = 1;
            break;
        }
        started++;
    }
    if (started != nsets * A2A_CTAS) {
        /* the started CTAs wait at a kernel end for the missing ones */
        printf("rank %d: %d of %d CTAs started\n", me, started, nsets * A2A_CTAS);
        fflush(stdout);
        _exit(1);
    }
    if (a[0]->release) {
        bad = a2a_release(r, a, nsets);
        for (int i = 0; i < started; i++)
            pthread_join(th[i], NULL);
        for (int s = nsets - 1; s >= 0; s--) {
            pthread_barrier_destroy(&a[s]->kernel_end);
            gk_close(&a[s]->k);
            free(a[s]);
        }
        if (!bad) {
            /* NCCL unloads the plugin after the last communicator: the
             * release (2 s of quiet yet to go) must outlive that */
            gd_unload(r, 3.0);
            printf("rank %d: the plugin unloaded 3 s ago, the rank lives on\n", r->rank);
        }
        return bad;
    }
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    for (int s = 0; s < nsets; s++)
        bad |= a2a_check_set(r, a[s], s);
    for (int q = 0; q < n && !bad; q++)
        for (size_t x = 0; x < chunk; x++)
            if (a[0]->k.dst[(size_t)q * chunk + x] != gd_byte(chunk_id(q, me), x)) {
                printf("rank %d: byte %zu of the chunk from rank %d is 0x%02x, expected 0x%02x\n", me, x, q,
                       a[0]->k.dst[(size_t)q * chunk + x], gd_byte(chunk_id(q, me), x));
                bad = 1;
                break;
            }
    if (!bad)
        printf("rank %d: every chunk byte-checked\n", me);
    if (gd_barrier(r))
        bad = 1;
    for (int s = nsets - 1; s >= 0; s--) {
        pthread_barrier_destroy(&a[s]->kernel_end);
        gk_close(&a[s]->k);
        free(a[s]);
    }
    return bad;
}

int gd_gdaki_a2a_run(const char *plugin, struct gd_opts *o, int release)
{
    o->release = release;
    if (o->ranks < 1 || o->ranks > GD_MAX_RANKS || A2A_CTAS * 2 > GK_NSIG || o->slot == 0 || o->sets < 1 ||
        o->sets > A2A_MAX_SETS) {
        printf("gdaki-a2a: 1..%d ranks, a --slot size and 1..%d --sets, please\n", GD_MAX_RANKS, A2A_MAX_SETS);
        return 1;
    }
    if (release && o->ranks < 2) {
        printf("gdaki-release%s: 2 ranks or more, please\n", release == 2 ? "-query" : "");
        return 1;
    }
    return gd_run(plugin, o->ranks, A2A_DEADLINE_S * 2, release ? o->ranks - 1 : -1, o->seed, t_gdaki_a2a, o);
}
