/* tests/gindriver/gd_rma.c: the RMA cases (--rma-version 13|14, gd.h),
 * driving an RMA table as NCCL 2.30's proxies do: createContext with a
 * context count, NCCL's "undefined" traffic class and a rank stride; puts,
 * puts with signal, signal-only puts, gets and flushes each naming a
 * context index; test on the collComm and the progress entry between
 * tries; never a retry of a call that gave no request (NCCL's GIN proxy
 * has none: it would test a NULL request), so the plugin must take NCCL's
 * queue depth (32 * maxRecvs) per context and peer.
 *   rma      - 2 contexts; per peer and context, --puts puts (random sizes
 *              and offsets, --queue of them in flight per context and peer),
 *              one in four with a signal counting them: a receiver seeing a
 *              signal checks that every put it counts, on that context, has
 *              landed (strong signals); meanwhile a second thread makes and
 *              destroys contexts; signal-only INC/ADD from every rank
 *              on both contexts into one word, summed exactly; gets from
 *              every rank's exposed window on both contexts (random sizes,
 *              then whole slots, split over both ports), every byte checked;
 *              a flush of the landing window (says whether it gave a
 *              request: only where RAILNET_GDR_FLUSH asks for one); with
 *              RAILNET_GIN=gdaki, the GIN v14 table's type is decided
 *              first, as NCCL 2.30.7 loads both: the RMA collComm has its
 *              proxy QPs all the same;
 *   rma-bad  - invalid configs and operations refused with
 *              ncclInvalidArgument (a WARN each), the context still working
 *              afterwards; a context whose collComm was closed first is
 *              refused, and can still be destroyed;
 *   rma-kill - the last rank is SIGKILLed: the others' test reports
 *              ncclRemoteError and queryLastError agrees, no hang. */
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../tools/common/plugin_tables.h"
#include "gd.h"
#include "gd_tests.h"
#include "gin.h"
#include "nccl_gin_v14.h"

#define DEADLINE_S 120.0
#define NCTX 2
#define NCCL_CONFIG_UNDEF_INT INT_MIN /* NCCL's config value for "not set" */
#define SHARED_WORD 63                /* signal-only sums land here */

/* words of rma-kill's strict signal window */
#define SIG_WORDS 64

static void *alloc_host(size_t len)
{
    void *p = NULL;
    if (posix_memalign(&p, 4096, len ? len : 4096))
        return NULL;
    memset(p, 0, len);
    return p;
}

static int reg(struct gd_rank *r, void *buf, size_t len, uint64_t flags, void **mh)
{
    ncclResult_t e = gd_rma->regMrSym(r->coll, buf, len, NCCL_PTR_HOST, flags, mh);
    if (e != ncclSuccess || !*mh) {
        printf("rank %d: regMrSym of %zu bytes failed (%d)\n", r->rank, len, e);
        return -1;
    }
    return 0;
}

static ncclResult_t create(struct gd_rank *r, int ncontexts, int tc, int stride, void **ctx)
{
    ncclRmaConfig_v14_t cfg = { ncontexts, tc, stride };
    *ctx = NULL;
    return gd_rma->createContext(r->coll, &cfg, ctx);
}

/* test until done, the progress entry between tries (NCCL's loop). */
static ncclResult_t wait_req(void *coll, void *ctx, void *req, double deadline)
{
    for (;;) {
        int done = 0;
        ncclResult_t e = gd_rma->test(coll, req, &done);
        if (e != ncclSuccess || done)
            return e;
        if (gd_rma->rmaProgress && (e = gd_rma->rmaProgress(ctx)) != ncclSuccess)
            return e;
        if (gd_now() > deadline)
            return ncclInternalError;
    }
}

static uint64_t put_id(uint64_t seed, int c, int s, int d, int i)
{
    return seed ^ ((uint64_t)(c + 1) << 48 | (uint64_t)s << 40 | (uint64_t)d << 32 | (uint64_t)i);
}

struct plan {
    size_t size, soff, doff;
};

/* Size and offsets of transfer id in a chunk of `chunk` bytes. */
static struct plan plan_of(uint64_t id, size_t chunk)
{
    uint64_t st = id * 31 + 7;
    struct plan p;
    size_t max = (gd_rand(&st) % 4 == 0 && chunk > 64) ? 64 : chunk;
    p.size = 1 + gd_rand(&st) % max;
    p.soff = gd_rand(&st) % (chunk - p.size + 1);
    p.doff = gd_rand(&st) % (chunk - p.size + 1);
    return p;
}

/* ------------------------------------------------------------------ rma */

struct rma_bufs {
    size_t slot, chunk;
    uint8_t *src, *win, *exp, *land;
    uint64_t *sig;
    void *msrc, *mwin, *mexp, *mland, *msig;
};

/* NCCL creates and destroys contexts (devComms) from the user's thread
 * while its progress thread drives others on the same collComm: phase A
 * does the same on a second thread. */
struct ctx_churn {
    struct gd_rank *r;
    volatile int stop;
    int made, failed;
};

static void *churn_thread(void *arg)
{
    struct ctx_churn *j = arg;
    while (!j->stop && !j->failed) {
        void *x = NULL;
        if (create(j->r, 1 + j->made % 3, NCCL_CONFIG_UNDEF_INT, 1, &x) != ncclSuccess || !x ||
            gd_rma->destroyContext(x) != ncclSuccess)
            j->failed = 1;
        else
            j->made++;
    }
    return NULL;
}

/* Phase A: puts and strong signals on NCTX contexts (see the top). */
static int rma_puts(struct gd_rank *r, const struct gd_opts *o, void *ctx, struct rma_bufs *b)
{
    int n = r->nranks, me = r->rank, k = o->puts;
    size_t slot = b->slot, chunk = b->chunk;
    for (int d = 0; d < n; d++)
        for (int c = 0; c < NCTX; c++)
            for (int i = 0; i < k; i++) {
                uint64_t id = put_id(r->seed, c, me, d, i);
                struct plan p = plan_of(id, chunk);
                uint8_t *s = b->src + ((size_t)d * NCTX + (size_t)c) * slot + (size_t)i * chunk + p.soff;
                for (size_t j = 0; j < p.size; j++)
                    s[j] = gd_byte(id, j);
            }
    if (gd_barrier(r))
        return 1;
    int nq = n * NCTX; /* queues: (peer, context) */
    void **reqs = calloc((size_t)nq * (size_t)k, sizeof(void *));
    int *issued = calloc((size_t)nq, sizeof(int)), *oldest = calloc((size_t)nq, sizeof(int));
    int *checked = calloc((size_t)nq, sizeof(int)), *since = calloc((size_t)nq, sizeof(int));
    if (!reqs || !issued || !oldest || !checked || !since)
        return 1;
    int bad = 0, max_inflight = 0;
    struct ctx_churn churn = { .r = r };
    pthread_t th;
    int threaded = pthread_create(&th, NULL, churn_thread, &churn) == 0;
    double deadline = gd_now() + DEADLINE_S;
    for (;;) {
        /* issue: interleaved over peers and contexts, up to o->queue in
         * flight per (peer, context), as NCCL's proxy walks its queues */
        for (int q = 0; q < nq && !bad; q++) {
            int d = q / NCTX, c = q % NCTX;
            while (issued[q] < k && issued[q] - oldest[q] < o->queue) {
                int i = issued[q];
                struct plan p = plan_of(put_id(r->seed, c, me, d, i), chunk);
                uint64_t soff = ((uint64_t)d * NCTX + (uint64_t)c) * slot + (uint64_t)i * chunk + p.soff;
                uint64_t doff = ((uint64_t)me * NCTX + (uint64_t)c) * slot + (uint64_t)i * chunk + p.doff;
                void **req = &reqs[q * k + i];
                since[q]++;
                ncclResult_t e;
                if (i % 4 == 3 || i == k - 1) {
                    /* the signal word of (me, c) at d: the puts it covers */
                    uint64_t covers = (uint64_t)since[q];
                    uint32_t op = covers == 1 ? NCCL_NET_SIGNAL_OP_INC : NCCL_NET_SIGNAL_OP_ADD;
                    e = gd_rma->iputSignal(ctx, c, soff, b->msrc, p.size, doff, b->mwin, (uint32_t)d,
                                           ((uint64_t)me * NCTX + (uint64_t)c) * 8, b->msig, covers, op, true, req);
                    since[q] = 0;
                } else {
                    e = gd_rma->iput(ctx, c, soff, b->msrc, p.size, doff, b->mwin, (uint32_t)d, req);
                }
                if (e != ncclSuccess || !*req) {
                    printf("rank %d: put %d to rank %d on context %d: %s (%d) with %d in flight there\n", me, i, d,
                           c, e != ncclSuccess ? "failed" : "no request (NCCL 2.30 never retries)", e,
                           issued[q] - oldest[q]);
                    bad = 1;
                    break;
                }
                issued[q]++;
                if (issued[q] - oldest[q] > max_inflight)
                    max_inflight = issued[q] - oldest[q];
            }
        }
        if (bad)
            break;
        /* test what is in flight, oldest first, as NCCL's proxy does */
        int mine_done = 1;
        for (int q = 0; q < nq && !bad; q++) {
            for (int i = oldest[q]; i < issued[q]; i++) {
                void **req = &reqs[q * k + i];
                if (!*req)
                    continue;
                int done = 0;
                ncclResult_t e = gd_rma->test(r->coll, *req, &done);
                if (e != ncclSuccess) {
                    printf("rank %d: test of put %d to rank %d on context %d failed (%d)\n", me, i, q / NCTX,
                           q % NCTX, e);
                    bad = 1;
                    break;
                }
                if (done)
                    *req = NULL;
            }
            while (oldest[q] < issued[q] && !reqs[q * k + oldest[q]])
                oldest[q]++;
            if (oldest[q] < k)
                mine_done = 0;
        }
        if (bad)
            break;
        if (gd_rma->rmaProgress && gd_rma->rmaProgress(ctx) != ncclSuccess) {
            printf("rank %d: progress failed\n", me);
            bad = 1;
            break;
        }
        /* receive side: a signal's count on (s, c) means those puts of
         * context c from s have landed */
        int all_seen = 1;
        for (int q = 0; q < nq && !bad; q++) {
            int s = q / NCTX, c = q % NCTX;
            uint64_t v = __atomic_load_n(&b->sig[q], __ATOMIC_ACQUIRE);
            if (v > (uint64_t)k) {
                printf("rank %d: signal word of rank %d context %d is %llu, more than the %d puts it sent\n", me,
                       s, c, (unsigned long long)v, k);
                bad = 1;
                break;
            }
            for (; (uint64_t)checked[q] < v && !bad; checked[q]++) {
                uint64_t id = put_id(r->seed, c, s, me, checked[q]);
                struct plan p = plan_of(id, chunk);
                const uint8_t *got =
                    b->win + ((size_t)s * NCTX + (size_t)c) * slot + (size_t)checked[q] * chunk + p.doff;
                for (size_t j = 0; j < p.size; j++)
                    if (got[j] != gd_byte(id, j)) {
                        printf("rank %d: a signal from rank %d on context %d counted put %d, but its byte %zu is "
                               "not there yet\n",
                               me, s, c, checked[q], j);
                        bad = 1;
                        break;
                    }
            }
            if (checked[q] < k)
                all_seen = 0;
        }
        if (bad || (mine_done && all_seen))
            break;
        if (gd_now() > deadline) {
            printf("rank %d: puts or signals stopped\n", me);
            bad = 1;
            break;
        }
    }
    churn.stop = 1;
    if (threaded)
        pthread_join(th, NULL);
    if (!threaded || churn.failed) {
        printf("rank %d: contexts made and destroyed on a second thread meanwhile: %s\n", me,
               threaded ? "one failed" : "no thread");
        bad = 1;
    }
    if (!bad)
        printf("rank %d: %d puts per peer on each of %d contexts, up to %d in flight per peer and context, never "
               "refused; no signal before the data of its context's puts; %d contexts made and destroyed "
               "meanwhile\n",
               me, k, NCTX, max_inflight, churn.made);
    free(reqs), free(issued), free(oldest), free(checked), free(since);
    return bad;
}

static uint64_t add_value(int s, int i)
{
    return ((uint64_t)(s + 1) << 33) + (uint64_t)i * 7 + 1;
}

/* Phase B: signal-only puts (no data, no windows) into one word. */
static int rma_adds(struct gd_rank *r, const struct gd_opts *o, void *ctx, struct rma_bufs *b)
{
    int n = r->nranks, me = r->rank, bad = 0;
    void **reqs = calloc((size_t)o->adds * (size_t)n, sizeof(void *));
    if (!reqs || gd_barrier(r))
        return 1;
    for (int i = 0; i < o->adds && !bad; i++)
        for (int d = 0; d < n && !bad; d++) {
            uint32_t op = i % 5 == 0 ? NCCL_NET_SIGNAL_OP_INC : NCCL_NET_SIGNAL_OP_ADD;
            ncclResult_t e = gd_rma->iputSignal(ctx, i % NCTX, 0, NULL, 0, 0, NULL, (uint32_t)d, SHARED_WORD * 8,
                                                b->msig, add_value(me, i), op, i % 2 == 0, &reqs[i * n + d]);
            if (e != ncclSuccess || !reqs[i * n + d]) {
                printf("rank %d: signal-only iputSignal to rank %d: %d, request %p\n", me, d, e, reqs[i * n + d]);
                bad = 1;
            }
        }
    double deadline = gd_now() + DEADLINE_S;
    for (int q = 0; q < o->adds * n && !bad; q++) {
        ncclResult_t e = wait_req(r->coll, ctx, reqs[q], deadline);
        if (e != ncclSuccess) {
            printf("rank %d: signal-only request %d did not complete (%d)\n", me, q, e);
            bad = 1;
        }
    }
    free(reqs);
    if (bad || gd_barrier(r))
        return 1;
    uint64_t want = 0;
    for (int s = 0; s < n; s++)
        for (int i = 0; i < o->adds; i++)
            want += i % 5 == 0 ? 1 : add_value(s, i);
    uint64_t got = __atomic_load_n(&b->sig[SHARED_WORD], __ATOMIC_ACQUIRE);
    if (got != want) {
        printf("rank %d: shared signal word is %llu, expected %llu\n", me, (unsigned long long)got,
               (unsigned long long)want);
        return 1;
    }
    printf("rank %d: signal-only INC/ADD on %d contexts from %d ranks: sum exact\n", me, NCTX, n);
    return 0;
}

/* Phase C: gets from every rank's exposed window, then the flush. */
static int rma_gets(struct gd_rank *r, const struct gd_opts *o, void *ctx, struct rma_bufs *b)
{
    int n = r->nranks, me = r->rank, k = o->puts, bad = 0;
    size_t slot = b->slot, chunk = b->chunk;
    for (size_t j = 0; j < slot; j++)
        b->exp[j] = gd_byte(put_id(r->seed, 7, me, me, 0), j);
    size_t land_len = ((size_t)n * NCTX + (size_t)n) * slot;
    memset(b->land, 0xee, land_len);
    if (gd_barrier(r))
        return 1;
    int ng = n * NCTX * k;
    void **reqs = calloc((size_t)ng + (size_t)n, sizeof(void *));
    if (!reqs)
        return 1;
    /* k gets per (peer, context), random pieces of the peer's slot into
     * chunk i of the landing area (peer, context), in rounds of --queue per
     * peer and context (all in flight, then all waited for); then one whole
     * slot per peer on context 1 (split over both ports when large) */
    double deadline = gd_now() + DEADLINE_S;
    for (int base = 0; base < k && !bad; base += o->queue) {
        int end = base + o->queue < k ? base + o->queue : k;
        for (int g = base * n * NCTX; g < end * n * NCTX && !bad; g++) {
            int d = g % n, c = (g / n) % NCTX, i = g / (n * NCTX);
            struct plan p = plan_of(put_id(r->seed, c + 2, d, me, i), chunk);
            uint64_t roff = (uint64_t)i * chunk + p.soff;
            uint64_t loff = ((uint64_t)d * NCTX + (uint64_t)c) * slot + (uint64_t)i * chunk + p.doff;
            ncclResult_t e = gd_rma->iget(ctx, c, roff, b->mexp, p.size, loff, b->mland, (uint32_t)d, &reqs[g]);
            if (e != ncclSuccess || !reqs[g]) {
                printf("rank %d: iget %d from rank %d on context %d: %d, request %p\n", me, i, d, c, e, reqs[g]);
                bad = 1;
            }
        }
        for (int g = base * n * NCTX; g < end * n * NCTX && !bad; g++) {
            ncclResult_t e = wait_req(r->coll, ctx, reqs[g], deadline);
            if (e != ncclSuccess) {
                printf("rank %d: get %d did not complete (%d)\n", me, g, e);
                bad = 1;
            }
        }
    }
    for (int d = 0; d < n && !bad; d++) {
        uint64_t loff = ((uint64_t)n * NCTX + (uint64_t)d) * slot;
        ncclResult_t e = gd_rma->iget(ctx, 1, 0, b->mexp, slot, loff, b->mland, (uint32_t)d, &reqs[ng + d]);
        if (e != ncclSuccess || !reqs[ng + d]) {
            printf("rank %d: iget of %zu bytes from rank %d: %d\n", me, slot, d, e);
            bad = 1;
        }
    }
    for (int d = 0; d < n && !bad; d++) {
        ncclResult_t e = wait_req(r->coll, ctx, reqs[ng + d], deadline);
        if (e != ncclSuccess) {
            printf("rank %d: the get of %zu bytes from rank %d did not complete (%d)\n", me, slot, d, e);
            bad = 1;
        }
    }
    free(reqs);
    /* every byte of the landing area: what the gets read, the guard elsewhere */
    uint8_t *expect = malloc(land_len);
    if (!expect)
        return 1;
    memset(expect, 0xee, land_len);
    for (int g = 0; g < ng; g++) {
        int d = g % n, c = (g / n) % NCTX, i = g / (n * NCTX);
        struct plan p = plan_of(put_id(r->seed, c + 2, d, me, i), chunk);
        for (size_t j = 0; j < p.size; j++)
            expect[((size_t)d * NCTX + (size_t)c) * slot + (size_t)i * chunk + p.doff + j] =
                gd_byte(put_id(r->seed, 7, d, d, 0), (size_t)i * chunk + p.soff + j);
    }
    for (int d = 0; d < n; d++)
        for (size_t j = 0; j < slot; j++)
            expect[((size_t)n * NCTX + (size_t)d) * slot + j] = gd_byte(put_id(r->seed, 7, d, d, 0), j);
    for (size_t j = 0; j < land_len && !bad; j++)
        if (b->land[j] != expect[j]) {
            printf("rank %d: byte %zu of the landing window is 0x%02x, expected 0x%02x\n", me, j, b->land[j],
                   expect[j]);
            bad = 1;
        }
    free(expect);
    if (bad)
        return 1;
    printf("rank %d: %d gets per peer on each of %d contexts and one of %zu bytes per peer: every byte checked\n",
           me, k, NCTX, slot);
    /* the flush NCCL's proxy posts after its gets (naming its own rank),
     * and one naming another rank */
    for (int t = 0; t < 2; t++) {
        uint32_t to = t == 0 ? (uint32_t)me : (uint32_t)((me + 1) % n);
        void *req = NULL;
        ncclResult_t e = gd_rma->iflush(ctx, t, b->mland, to, &req);
        if (e == ncclSuccess && req)
            e = wait_req(r->coll, ctx, req, gd_now() + DEADLINE_S);
        if (e != ncclSuccess) {
            printf("rank %d: iflush naming rank %u failed (%d)\n", me, to, e);
            return 1;
        }
        printf("rank %d: iflush naming rank %u on context %d: %s\n", me, to, t,
               req ? "a request, completed" : "no request (nothing to flush)");
    }
    return 0;
}

/* RAILNET_GIN=gdaki: NCCL 2.30.7 asks the GIN v14 table's properties
 * beside the RMA table; this process then offers the GDAKI type. 1 when
 * it does (0: not asked), -1 when it does not (said on stdout). */
static int beside_gdaki(struct gd_rank *r)
{
    const char *mode = getenv("RAILNET_GIN");
    if (!mode || strcmp(mode, "gdaki"))
        return 0;
    char err[PATH_MAX + 256];
    const ncclGin_v14_t *g = plugin_tables_get(r->lib, &plugin_table_gin_v14, PLUGIN_TABLES_NAME, err, sizeof(err));
    ncclNetProperties_v12_t p;
    if (!g || g->getProperties(0, &p) != ncclSuccess || p.netDeviceType != NCCL_NET_DEVICE_GIN_GDAKI) {
        printf("rank %d: RAILNET_GIN=gdaki: the GIN v14 table offers no GDAKI type%s%s\n", r->rank, g ? "" : ": ",
               g ? "" : err);
        return -1;
    }
    return 1;
}

static int t_rma(struct gd_rank *r, void *arg)
{
    const struct gd_opts *o = arg;
    int gdaki = beside_gdaki(r);
    if (gdaki < 0)
        return 1;
    if (gd_connect_said(r))
        return 1;
    ncclResult_t e = ncclSuccess;
    int n = r->nranks;
    const struct gin_coll *c = r->coll;
    for (int p = 0; p < n; p++)
        if (!c->proxy_qps || c->peers[p].nqps != c->nports) {
            printf("rank %d: the RMA collComm has %d QPs towards rank %d (proxy QPs %d), expected %d\n", r->rank,
                   c->peers[p].nqps, p, c->proxy_qps, c->nports);
            return 1;
        }
    if (gdaki)
        printf("rank %d: beside the GIN table's GDAKI type, the RMA collComm has %d proxy QPs per peer\n", r->rank,
               c->nports);
    void *ctx = NULL;
    /* NCCL's GIN proxy: its context count, the config's undefined traffic
     * class, a rank stride of 1 (full GIN connections) */
    if ((e = create(r, NCTX, NCCL_CONFIG_UNDEF_INT, 1, &ctx)) != ncclSuccess || !ctx) {
        printf("rank %d: createContext failed (%d)\n", r->rank, e);
        return 1;
    }
    struct rma_bufs b = { .slot = o->slot, .chunk = o->slot / (size_t)o->puts };
    size_t area = (size_t)n * NCTX * b.slot;
    b.src = alloc_host(area);
    b.win = alloc_host(area);
    b.exp = alloc_host(b.slot);
    b.land = alloc_host(area + (size_t)n * b.slot);
    b.sig = alloc_host(4096);
    if (!b.src || !b.win || !b.exp || !b.land || !b.sig || reg(r, b.src, area, 0, &b.msrc) ||
        reg(r, b.win, area, 0, &b.mwin) || reg(r, b.exp, b.slot, 0, &b.mexp) ||
        reg(r, b.land, area + (size_t)n * b.slot, 0, &b.mland) ||
        reg(r, b.sig, 4096, NCCL_NET_MR_FLAG_FORCE_SO, &b.msig))
        return 1;
    int bad = rma_puts(r, o, ctx, &b) || rma_adds(r, o, ctx, &b) || rma_gets(r, o, ctx, &b);
    bool has = true;
    if (!bad && (gd_rma->queryLastError(ctx, &has) != ncclSuccess || has)) {
        printf("rank %d: queryLastError reports an error\n", r->rank);
        bad = 1;
    }
    if (gd_barrier(r))
        bad = 1;
    gd_rma->deregMrSym(r->coll, b.msig);
    gd_rma->deregMrSym(r->coll, b.mland);
    gd_rma->deregMrSym(r->coll, b.mexp);
    gd_rma->deregMrSym(r->coll, b.mwin);
    gd_rma->deregMrSym(r->coll, b.msrc);
    if (gd_rma->destroyContext(ctx) != ncclSuccess) {
        printf("rank %d: destroyContext failed\n", r->rank);
        bad = 1;
    }
    return bad;
}

/* -------------------------------------------------------------- rma-bad */

static int refused(int me, const char *what, ncclResult_t e)
{
    if (e == ncclInvalidArgument) {
        printf("rank %d: refused: %s\n", me, what);
        return 0;
    }
    printf("rank %d: %s: returned %d, not ncclInvalidArgument (%d)\n", me, what, e, ncclInvalidArgument);
    return 1;
}

static int t_rma_bad(struct gd_rank *r, void *arg)
{
    (void)arg;
    if (gd_connect_said(r))
        return 1;
    ncclResult_t e = ncclSuccess;
    int me = r->rank, n = r->nranks, bad = 0;
    void *ctx = NULL, *req = NULL;
    /* configs */
    bad |= refused(me, "createContext without a config", gd_rma->createContext(r->coll, NULL, &ctx));
    bad |= refused(me, "createContext of 0 contexts", create(r, 0, -1, 1, &ctx));
    bad |= refused(me, "createContext of -1 contexts", create(r, -1, -1, 1, &ctx));
    bad |= refused(me, "createContext of 257 contexts", create(r, 257, -1, 1, &ctx));
    bad |= refused(me, "createContext with traffic class 256", create(r, 1, 256, 1, &ctx));
    if (gd_rma_version == 14) { /* v13 has no rank stride */
        bad |= refused(me, "createContext with rank stride 0", create(r, 1, -1, 0, &ctx));
        bad |= refused(me, "createContext with rank stride -2", create(r, 1, -1, -2, &ctx));
        bad |= refused(me, "createContext with a rank stride that does not divide the ranks",
                       create(r, 1, -1, n + 1, &ctx));
    }
    if (ctx) {
        printf("rank %d: a refused createContext left a context\n", me);
        bad = 1;
    }
    /* a good context: with v14 a stride of n ranks (each rank reaches
     * itself only), as NCCL's railed contexts do */
    int stride = gd_rma_version == 14 ? n : 1;
    if ((e = create(r, 2, 3, stride, &ctx)) != ncclSuccess || !ctx) {
        printf("rank %d: createContext (2 contexts, class 3, stride %d) failed (%d)\n", me, stride, e);
        return 1;
    }
    size_t len = 1 << 16;
    uint8_t *buf = alloc_host(len);
    uint64_t *sig = alloc_host(4096);
    void *mh, *msig;
    if (!buf || !sig || reg(r, buf, len, 0, &mh) || reg(r, sig, 4096, NCCL_NET_MR_FLAG_FORCE_SO, &msig))
        return 1;
    uint32_t self = (uint32_t)me, other = (uint32_t)((me + 1) % n);
    /* operations */
    bad |= refused(me, "iput on context -1", gd_rma->iput(ctx, -1, 0, mh, 8, 0, mh, self, &req));
    bad |= refused(me, "iput on context 2 of 2", gd_rma->iput(ctx, 2, 0, mh, 8, 0, mh, self, &req));
    bad |= refused(me, "iput to a rank out of range", gd_rma->iput(ctx, 0, 0, mh, 8, 0, mh, (uint32_t)n, &req));
    if (stride > 1)
        bad |= refused(me, "iput to a rank outside the stride", gd_rma->iput(ctx, 0, 0, mh, 8, 0, mh, other, &req));
    bad |= refused(me, "iput past the window", gd_rma->iput(ctx, 0, len - 4, mh, 8, 0, mh, self, &req));
    bad |= refused(me, "iput without a request pointer", gd_rma->iput(ctx, 0, 0, mh, 8, 0, mh, self, NULL));
    bad |= refused(me, "iputSignal with op 7",
                   gd_rma->iputSignal(ctx, 0, 0, mh, 8, 0, mh, self, 0, msig, 1, 7, true, &req));
    bad |= refused(me, "iputSignal without a signal window",
                   gd_rma->iputSignal(ctx, 0, 0, mh, 8, 0, mh, self, 0, NULL, 1, NCCL_NET_SIGNAL_OP_INC, true, &req));
    bad |= refused(me, "iputSignal at an unaligned signal",
                   gd_rma->iputSignal(ctx, 1, 0, mh, 8, 0, mh, self, 4, msig, 1, NCCL_NET_SIGNAL_OP_INC, true, &req));
    bad |= refused(me, "iputSignal on context 9",
                   gd_rma->iputSignal(ctx, 9, 0, mh, 8, 0, mh, self, 0, msig, 1, NCCL_NET_SIGNAL_OP_INC, true, &req));
    bad |= refused(me, "iget on context -5", gd_rma->iget(ctx, -5, 0, mh, 8, 0, mh, self, &req));
    bad |= refused(me, "iget past the remote window", gd_rma->iget(ctx, 0, len, mh, 8, 0, mh, self, &req));
    bad |= refused(me, "iget into a window that is none", gd_rma->iget(ctx, 0, 0, mh, 8, 0, buf, self, &req));
    bad |= refused(me, "iflush on context 2", gd_rma->iflush(ctx, 2, mh, self, &req));
    bad |= refused(me, "iflush of a window that is none", gd_rma->iflush(ctx, 0, sig, self, &req));
    bad |= refused(me, "iflush naming a rank out of range", gd_rma->iflush(ctx, 0, mh, (uint32_t)n + 3, &req));
    bad |= refused(me, "test of a request that is none", gd_rma->test(r->coll, &req, &(int){ 0 }));
    uint64_t fake[16] = { 0 };
    bad |= refused(me, "iput on a context that is none", gd_rma->iput(fake, 0, 0, mh, 8, 0, mh, self, &req));
    bad |= refused(me, "progress of a context that is none",
                   gd_rma->rmaProgress ? gd_rma->rmaProgress(fake) : ncclInvalidArgument);
    bool has = false;
    bad |= refused(me, "queryLastError of a context that is none", gd_rma->queryLastError(fake, &has));
    bad |= refused(me, "destroyContext of a context that is none", gd_rma->destroyContext(fake));
    if (req) {
        printf("rank %d: a refused call left a request\n", me);
        bad = 1;
    }
    /* the context still works: a put with signal to itself on context 1 */
    for (int j = 0; j < 8; j++)
        buf[j] = (uint8_t)(0xa0 + j);
    e = gd_rma->iputSignal(ctx, 1, 0, mh, 8, 1024, mh, self, 8, msig, 5, NCCL_NET_SIGNAL_OP_ADD, true, &req);
    if (e == ncclSuccess)
        e = wait_req(r->coll, ctx, req, gd_now() + DEADLINE_S);
    if (e != ncclSuccess || memcmp(buf, buf + 1024, 8) || __atomic_load_n(&sig[1], __ATOMIC_ACQUIRE) != 5 ||
        gd_rma->queryLastError(ctx, &has) != ncclSuccess || has) {
        printf("rank %d: after the refusals, a put with signal to itself failed (%d) or landed wrong\n", me, e);
        bad = 1;
    } else {
        printf("rank %d: after the refusals the context still puts and signals; no error reported\n", me);
    }
    if (gd_barrier(r))
        return 1;
    gd_rma->deregMrSym(r->coll, msig);
    gd_rma->deregMrSym(r->coll, mh);
    if (gd_rma->destroyContext(ctx) != ncclSuccess) {
        printf("rank %d: destroyContext failed\n", me);
        bad = 1;
    }
    /* a context outliving its collComm */
    void *late = NULL;
    if ((e = create(r, 1, -1, 1, &late)) != ncclSuccess || gd_barrier(r)) {
        printf("rank %d: createContext failed (%d)\n", me, e);
        return 1;
    }
    gd_rma->closeColl(r->coll);
    r->coll = NULL;
    bad |= refused(me, "iput on a context whose collComm was closed",
                   gd_rma->iput(late, 0, 0, NULL, 0, 0, NULL, self, &req));
    bad |= refused(me, "queryLastError of a context whose collComm was closed", gd_rma->queryLastError(late, &has));
    if (gd_rma->destroyContext(late) != ncclSuccess) {
        printf("rank %d: destroyContext after closeColl failed\n", me);
        bad = 1;
    } else {
        printf("rank %d: a context destroyed after its collComm's close\n", me);
    }
    free(buf);
    free(sig);
    return bad;
}

/* ------------------------------------------------------------- rma-kill */

static int t_rma_kill(struct gd_rank *r, void *arg)
{
    (void)arg;
    if (gd_connect_said(r))
        return 1;
    ncclResult_t e = ncclSuccess;
    int victim = r->nranks - 1;
    size_t len = 1 << 20;
    uint8_t *buf = alloc_host(len);
    /* a signal buffer as NCCL's GIN proxy registers it (strict order) */
    uint64_t *sig = alloc_host(SIG_WORDS * 8);
    void *mh, *msig, *ctx = NULL;
    if (!buf || !sig || reg(r, buf, len, 0, &mh) || reg(r, sig, SIG_WORDS * 8, NCCL_NET_MR_FLAG_FORCE_SO, &msig) ||
        create(r, NCTX, -1, 1, &ctx) != ncclSuccess || gd_barrier(r))
        return 1;
    /* the live ranks signal each other before the fault: an indexed signal
     * in the strict window and a VA signal at the end of the data window */
    const uint64_t va_off = len - 8, quiet_off = 8192;
    if (r->rank != victim) {
        uint32_t peer = (uint32_t)((r->rank + 1) % victim);
        void *q1 = NULL, *q2 = NULL;
        double dl = gd_now() + DEADLINE_S;
        if (gd_rma->iputSignal(ctx, 0, 0, NULL, 0, 0, NULL, peer, 3 * 8, msig, 1, NCCL_NET_SIGNAL_OP_INC, true,
                               &q1) != ncclSuccess ||
            wait_req(r->coll, ctx, q1, dl) != ncclSuccess ||
            gd_rma->iputSignal(ctx, 0, 0, mh, 8, 4096, mh, peer, va_off, mh, 1, NCCL_NET_SIGNAL_OP_INC, true, &q2) !=
                ncclSuccess ||
            wait_req(r->coll, ctx, q2, dl) != ncclSuccess) {
            printf("rank %d: signals before the fault failed\n", r->rank);
            return 1;
        }
    }
    if (gd_barrier(r))
        return 1;
    uint64_t sig_before[SIG_WORDS], va_before, quiet_before;
    memcpy(sig_before, sig, sizeof(sig_before));
    memcpy(&va_before, buf + va_off, 8);
    memcpy(&quiet_before, buf + quiet_off, 8);
    if (r->rank == victim) {
        gd_await_kill(r);
    }
    bool has = true;
    if (gd_rma->queryLastError(ctx, &has) != ncclSuccess || has) {
        printf("rank %d: queryLastError reports an error before any fault\n", r->rank);
        return 1;
    }
    double t0 = gd_now(), deadline = t0 + DEADLINE_S;
    void *reqs[64] = { 0 };
    e = ncclSuccess;
    /* puts and gets in flight towards the victim on both contexts, as
     * NCCL's GIN proxy keeps them, until queryLastError says it failed */
    has = false;
    const char *which = "";
    while (e == ncclSuccess && !has && gd_now() < deadline) {
        for (int q = 0; q < 64 && e == ncclSuccess; q++) {
            if (!reqs[q]) {
                which = q % 2 ? "iget" : "iput";
                e = q % 2 ? gd_rma->iget(ctx, q % NCTX, 0, mh, 65536, 0, mh, (uint32_t)victim, &reqs[q])
                          : gd_rma->iput(ctx, q % NCTX, 0, mh, 65536, 0, mh, (uint32_t)victim, &reqs[q]);
                continue;
            }
            int done = 0;
            which = "test";
            e = gd_rma->test(r->coll, reqs[q], &done);
            if (done)
                reqs[q] = NULL;
        }
        if (e == ncclSuccess && gd_rma->rmaProgress && (which = "rmaProgress"))
            e = gd_rma->rmaProgress(ctx);
        if (e == ncclSuccess && (which = "queryLastError"))
            e = gd_rma->queryLastError(ctx, &has);
    }
    double took = gd_now() - t0;
    if (e != ncclSuccess) {
        printf("rank %d: %s returned %d after rank %d was killed: the failure is queryLastError's to say\n",
               r->rank, which, e, victim);
        return 1;
    }
    if (!has) {
        printf("rank %d: queryLastError reports nothing %.0f s after rank %d was killed\n", r->rank, took, victim);
        return 1;
    }
    /* then NCCL's proxy goes on draining its GPU queue: every request in
     * flight, and every one posted from now on, completes at once */
    int left = 0;
    for (int q = 0; q < 64; q++) {
        int done = 0;
        if (reqs[q] && (gd_rma->test(r->coll, reqs[q], &done) != ncclSuccess || !done))
            left++;
        reqs[q] = NULL;
    }
    int later = 0, bad = 0;
    for (int i = 0; i < 1000 && !bad; i++) {
        void *req = NULL;
        int done = 0;
        ncclResult_t pe = i % 3 == 0 ? gd_rma->iget(ctx, i % NCTX, 0, mh, 4096, 0, mh, (uint32_t)victim, &req)
                        : i % 3 == 1 ? gd_rma->iput(ctx, i % NCTX, 0, mh, 4096, 0, mh, (uint32_t)r->rank == 0 ? 1u : 0u,
                                                    &req)
                                     : gd_rma->iflush(ctx, i % NCTX, mh, (uint32_t)r->rank, &req);
        if (pe != ncclSuccess || !req || gd_rma->test(r->coll, req, &done) != ncclSuccess || !done)
            bad = 1;
        else
            later++;
    }
    if (left || bad) {
        printf("rank %d: after the failure %d request(s) in flight did not complete, and %d of 1000 later ones "
               "did\n",
               r->rank, left, later);
        return 1;
    }
    /* and the signals a kernel of this rank could wait on move, as NCCL's
     * progress thread keeps calling rmaProgress: every word of the strict
     * window and the VA signal's word, by 2^16 or more; data stays */
    int moved = 0;
    for (double dl = gd_now() + 5; gd_now() < dl && !moved;) {
        if (gd_rma->rmaProgress)
            gd_rma->rmaProgress(ctx);
        uint64_t va_now;
        memcpy(&va_now, buf + va_off, 8);
        moved = va_now >= va_before + (1ull << 16);
        for (int w = 0; w < SIG_WORDS; w++)
            moved &= __atomic_load_n(&sig[w], __ATOMIC_ACQUIRE) >= sig_before[w] + (1ull << 16);
    }
    uint64_t quiet_now;
    memcpy(&quiet_now, buf + quiet_off, 8);
    if (!gd_rma->rmaProgress) {
        printf("rank %d: the table has no rmaProgress: NCCL 2.30's proxy calls it\n", r->rank);
        return 1;
    }
    if (!moved || quiet_now != quiet_before) {
        printf("rank %d: after the failure the signals %s by 2^16 within 5 s (strict word 3: %llu -> %llu), "
               "and a data word %s\n",
               r->rank, moved ? "moved" : "did not move", (unsigned long long)sig_before[3],
               (unsigned long long)__atomic_load_n(&sig[3], __ATOMIC_ACQUIRE),
               quiet_now == quiet_before ? "stayed" : "changed");
        return 1;
    }
    printf("rank %d: killed rank %d reported by queryLastError after %.1f s; every request in flight and 1000 "
           "later ones completed at once; its signals advanced, its data left alone\n",
           r->rank, victim, took);
    gd_rma->destroyContext(ctx);
    return 0;
}

int gd_rma_run(const char *plugin, const char *name, struct gd_opts *o)
{
    if (!gd_rma_version) {
        printf("gindriver: %s needs --rma-version 13 or 14\n", name);
        return 1;
    }
    if (!strcmp(name, "rma"))
        return gd_run(plugin, o->ranks, DEADLINE_S * 2, -1, o->seed, t_rma, o);
    if (!strcmp(name, "rma-bad"))
        return gd_run(plugin, o->ranks, DEADLINE_S * 2, -1, o->seed, t_rma_bad, o);
    if (!strcmp(name, "rma-kill"))
        return gd_run(plugin, o->ranks, DEADLINE_S * 2, o->ranks - 1, o->seed, t_rma_kill, o);
    return -1;
}
