/* tests/gindriver/gd_gdaki.c: the GDAKI type of railnet's GIN driven from
 * the CPU (gd_tests.h): the plugin offers NCCL_NET_DEVICE_GIN_GDAKI
 * (RAILNET_GIN=gdaki with RAILNET_GDAKI_QUEUE_MEM=host-devx and no CUDA:
 * every structure in host memory), createContext gives the
 * ncclGinGdakiGPUContext image, regMrSym the ncclGinGdakiMemHandle ones,
 * and each rank posts into the described queues exactly as NCCL's device
 * code does (tests/gin_gdaki/doca_cpu.h), on softnic.
 *   gdaki        per round and peer (self included): a put, a put with a
 *                signal, a put with a counter (companion QP: WAIT + add),
 *                a put with signal and counter, an 8-byte PutValue with a
 *                signal, a signal alone; rounds wrap the rings several
 *                times. Receivers wait for their signals, then check every
 *                byte; senders wait for their counters and flush every QP;
 *                each rank then prints the payload bytes softnic sent on
 *                each port of the first device (the QPs spread over both);
 *   gdaki-error  rank 0 puts with a corrupted rkey: the slot's CQE is an
 *                error, and queryLastError reports it;
 *   gdaki-kill   the last rank is SIGKILLed after createContext: the
 *                others' queryLastError reports it, and a put to it
 *                completes with an error CQE (no hang);
 *   gdaki-mismatch  rank 1 runs with RAILNET_GIN=proxy: its collComm has
 *                proxy QPs, rank 0's (GDAKI) none; both connects fail at
 *                once with ncclInvalidUsage (each side's WARN names both).
 * Every connect of these (gk_open) is checked to make no proxy QPs: the
 * collComm has no QP towards any peer and no CQ, and softnic counts no QP,
 * CQ or MR more after it; gdaki also checks that the host's data path on
 * the collComm is refused (iput, iputSignal, test, an RMA context:
 * ncclInvalidUsage, nothing posted). */
#include <dlfcn.h>
#include <endian.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../tools/common/plugin_tables.h"
#include "../gin_gdaki/doca_cpu.h"
#include "../softnic/softnic_ctl.h"
#include "gd.h"
#include "gd_tests.h"
#include "gd_gdaki.h"
#include "gin.h"
#include "railnet_gin_gdaki.h"

#define GK_DEADLINE_S 120.0
#define GK_CHUNK 512                  /* bytes per round per source rank */

/* signal ids on the target: 3 per source rank */
#define SIG_PUT(q) (3 * (q))
#define SIG_VAL(q) (3 * (q) + 1)
#define SIG_ONLY(q) (3 * (q) + 2)


static uint8_t *alloc_pages(size_t len)
{
    void *p = NULL;
    if (posix_memalign(&p, 4096, len))
        return NULL;
    memset(p, 0, len);
    return p;
}

/* A layout-100 descriptor for doca_cpu of a layout-200 one: the same
 * rings, doorbells and CQ; the posting counters start in the copy (only
 * this CPU posts on it). What NCCL 2.30's device code reads beyond layout
 * 100's fields is checked here: the 5-segment QP number, the doorbell mode,
 * the memory type, the CQ's reserved room. */
static int qp_from_v200(const struct rn_doca_qp_v200 *d, struct rn_doca_qp *q, int rank, int peer)
{
    memset(q, 0, sizeof(*q));
    int bad = d->sq_num_shift8_be_5ds != htobe32(d->sq_num << 8 | 5) ||
              d->sq_num_shift8_be_4ds != htobe32(d->sq_num << 8 | 4) ||
              d->nic_handler != RN_DOCA_NIC_HANDLER_GPU_SM_DB || d->mem_type != RN_DOCA_MEM_TYPE_HOST ||
              d->cq_sq.cqe_size != 64 || d->cq_sq.mem_type != RN_DOCA_MEM_TYPE_HOST || d->sq_rsvd_index ||
              d->sq_wqe_pi || d->sq_lock || d->cq_sq.cqe_ci;
    for (size_t i = 0; i < sizeof(d->reserved2); i++)
        bad |= d->reserved2[i] != 0;
    if (bad) {
        printf("rank %d: layout 200 QP descriptor towards rank %d: 5ds 0x%x for QP 0x%x, nic_handler %d, mem_type "
               "%d, cqe_size %u, counters not zero or reserved room written\n",
               rank, peer, (unsigned)be32toh(d->sq_num_shift8_be_5ds), d->sq_num, d->nic_handler, d->mem_type,
               d->cq_sq.cqe_size);
        return 1;
    }
    q->sq_num = d->sq_num;
    q->sq_num_shift8 = d->sq_num_shift8;
    q->sq_num_shift8_be = d->sq_num_shift8_be;
    q->sq_num_shift8_be_1ds = d->sq_num_shift8_be_1ds;
    q->sq_num_shift8_be_2ds = d->sq_num_shift8_be_2ds;
    q->sq_num_shift8_be_3ds = d->sq_num_shift8_be_3ds;
    q->sq_num_shift8_be_4ds = d->sq_num_shift8_be_4ds;
    q->sq_wqe_num = d->sq_wqe_num;
    q->sq_wqe_mask = d->sq_wqe_mask;
    q->sq_wqe_daddr = d->sq_wqe_daddr;
    q->sq_dbrec = d->sq_dbrec;
    q->sq_db = d->sq_db;
    q->cq_sq.cqe_daddr = d->cq_sq.cqe_daddr;
    q->cq_sq.cq_num = d->cq_sq.cq_num;
    q->cq_sq.cqe_num = d->cq_sq.cqe_num;
    q->cq_sq.dbrec = d->cq_sq.dbrec;
    q->cq_sq.cqe_mask = d->cq_sq.cqe_mask;
    q->cq_sq.cqe_size = d->cq_sq.cqe_size;
    q->cq_sq.mem_type = d->cq_sq.mem_type;
    q->nic_handler = d->nic_handler;
    q->mem_type = d->mem_type;
    return 0;
}

/* The device handle as NCCL's device code of this layout reads it: an
 * array of k->nctx contexts, context x's table parts at offset x * count
 * (its buffer already there), QPs of its own, zeroed get tracking per peer
 * (layout 200, backend 2). Then k->gc: a layout-100 view of the last
 * context for doca_cpu (descriptors copied for layout 200). */
static int gk_check_handle(struct gk *k)
{
    struct gd_rank *r = k->r;
    int n = r->nranks, nctx = k->nctx, layout = k->layout;
    int gets = layout == RN_GIN_GDAKI_V200 && gd_backend == RN_GIN_GDAKI_BACKEND_V2;
    size_t csz = gets ? sizeof(struct rn_gin_gdaki_gpu_ctx_v200) : sizeof(struct rn_gin_gdaki_gpu_ctx);
    size_t qsz = layout == RN_GIN_GDAKI_V200 ? sizeof(struct rn_doca_qp_v200) : sizeof(struct rn_doca_qp);
    if (k->dh->netDeviceVersion != layout || k->dh->size != csz * (size_t)nctx) {
        printf("rank %d: device handle: version %d (getProperties said %d), size %zu (%d contexts of %zu bytes)\n",
               r->rank, k->dh->netDeviceVersion, layout, k->dh->size, nctx, csz);
        return 1;
    }
    const uint8_t *arr = k->dh->handle;
    const struct rn_gin_gdaki_gpu_ctx *c0 = (const void *)arr;
    for (int x = 0; x < nctx; x++) {
        const struct rn_gin_gdaki_gpu_ctx *c = (const void *)(arr + (size_t)x * csz);
        uint32_t so = (uint32_t)x * k->nsig, co = (uint32_t)x * k->ncnt;
        if (c->signals_table.offset != so || c->counters_table.offset != co ||
            c->signals_table.buffer != c0->signals_table.buffer + so ||
            c->counters_table.buffer != c0->counters_table.buffer + co ||
            c->signals_table.rkeys != c0->signals_table.rkeys || c->sink_buffer_lkey != c0->sink_buffer_lkey ||
            (uint8_t *)c->gdqp != (uint8_t *)c0->gdqp + (size_t)x * n * qsz ||
            (uint8_t *)c->companion_gdqp != (uint8_t *)c0->companion_gdqp + (size_t)x * n * qsz) {
            printf("rank %d: context %d of %d: table offsets %u/%u (want %u/%u), buffers, keys or QP arrays not "
                   "its own\n",
                   r->rank, x, nctx, c->signals_table.offset, c->counters_table.offset, so, co);
            return 1;
        }
        if (gets) {
            const struct rn_gin_gdaki_gpu_ctx_v200 *g = (const void *)c, *g0 = (const void *)c0;
            int bad = !g->last_issued_get || !g->last_visible_get || g->last_issued_get != g0->last_issued_get + x * n;
            for (int p = 0; p < n && !bad; p++)
                bad = g->last_issued_get[p] || g->last_visible_get[p];
            if (bad) {
                printf("rank %d: context %d: get tracking arrays missing, shared or not zeroed\n", r->rank, x);
                return 1;
            }
        }
    }
    const struct rn_gin_gdaki_gpu_ctx *last = (const void *)(arr + (size_t)(nctx - 1) * csz);
    k->view = *last;
    k->gc = &k->view;
    /* NCCL's queue depth (GIN v12's connect, v14's createContext config)
     * sizes the send rings: a power of two within 16..16384 at or above
     * it, 512 when none is asked (GIN v11 asks none) */
    int depth = gd_gin_version == 12 || gd_gin_version == 14 ? gd_queue_depth : 0;
    uint32_t want = 512;
    if (depth > 0)
        for (want = 16; want < (uint32_t)depth && want < 16384; want <<= 1)
            ;
    uint32_t got = layout == RN_GIN_GDAKI_V200 ? ((const struct rn_doca_qp_v200 *)last->gdqp)->sq_wqe_num
                                               : ((const struct rn_doca_qp *)last->gdqp)->sq_wqe_num;
    if (got != want) {
        printf("rank %d: send rings of %u slots for queue depth %d (GIN v%d), want %u\n", r->rank, got, depth,
               gd_gin_version, want);
        return 1;
    }
    if (layout != RN_GIN_GDAKI_V200)
        return 0;
    k->shadow = calloc((size_t)2 * n, sizeof(*k->shadow));
    if (!k->shadow)
        return 1;
    for (int p = 0; p < n; p++)
        if (qp_from_v200((const struct rn_doca_qp_v200 *)last->gdqp + p, k->shadow + p, r->rank, p) ||
            qp_from_v200((const struct rn_doca_qp_v200 *)last->companion_gdqp + p, k->shadow + n + p, r->rank, p))
            return 1;
    k->view.gdqp = k->shadow;
    k->view.companion_gdqp = k->shadow + n;
    return 0;
}

/* createContext on k->r's collComm, and the handle checked (gk_check_handle). */
static int gk_create(struct gk *k, int nctx, int nsig, int ncnt)
{
    struct gd_rank *r = k->r;
    if (gd_gin_version == 11)
        nctx = 1;               /* GIN v11's createContext has no context count */
    k->nctx = nctx, k->nsig = nsig, k->ncnt = ncnt;
    int asked = gd_contexts;    /* the table adapters pass gd_contexts on (gd_tables.c) */
    gd_contexts = nctx;
    ncclResult_t e = r->gin->createContext(r->coll, nsig, ncnt, &k->ctx, &k->dh);
    gd_contexts = asked;
    if (e != ncclSuccess || !k->dh) {
        printf("rank %d: createContext (%d contexts, %d signals, %d counters) failed: %d\n", r->rank, nctx, nsig,
               ncnt, e);
        k->ctx = NULL;
        return 1;
    }
    if (k->dh->netDeviceType != NCCL_NET_DEVICE_GIN_GDAKI || k->dh->needsProxyProgress || !k->dh->handle) {
        printf("rank %d: device handle: type %d version %d proxy progress %d size %zu\n", r->rank,
               (int)k->dh->netDeviceType, k->dh->netDeviceVersion, k->dh->needsProxyProgress, k->dh->size);
        return 1;
    }
    return gk_check_handle(k);
}

int gk_ctx_open(struct gk *k, struct gk *x, int nctx, int nsig, int ncnt)
{
    memset(x, 0, sizeof(*x));
    x->r = k->r;
    x->layout = k->layout;
    x->borrowed = 1;
    x->src = k->src, x->dst = k->dst, x->len = k->len;
    x->src_mh = k->src_mh, x->dst_mh = k->dst_mh;
    x->src_gh = k->src_gh, x->dst_gh = k->dst_gh;
    return gk_create(x, nctx, nsig, ncnt);
}

/* A GDAKI-type collComm holds no proxy QPs: no QP towards any peer, no
 * CQ, and its connect left softnic's live QPs, CQs and MRs as they were
 * (a before, b after). */
static int gk_check_no_proxy_qps(const struct gd_rank *r, const struct gd_objs *a, const struct gd_objs *b)
{
    const struct gin_coll *c = r->coll;
    int qps = 0;
    for (int p = 0; p < c->nranks; p++)
        qps += c->peers[p].nqps;
    if (c->proxy_qps || c->cq || qps || b->qps != a->qps || b->cqs != a->cqs || b->mrs != a->mrs) {
        printf("rank %d: the GDAKI collComm has %d proxy QPs (flag %d) and %s CQ; its connect made %lld QPs, %lld "
               "CQs, %lld MRs: expected none\n",
               r->rank, qps, c->proxy_qps, c->cq ? "a" : "no", (long long)(b->qps - a->qps),
               (long long)(b->cqs - a->cqs), (long long)(b->mrs - a->mrs));
        return 1;
    }
    return 0;
}

int gk_open(struct gd_rank *r, struct gk *k, size_t len)
{
    memset(k, 0, sizeof(*k));
    k->r = r;
    ncclNetProperties_v11_t p;
    if (r->gin->getProperties(0, &p) != ncclSuccess || p.netDeviceType != NCCL_NET_DEVICE_GIN_GDAKI ||
        (p.netDeviceVersion != RN_GIN_GDAKI_V100 && p.netDeviceVersion != RN_GIN_GDAKI_V200)) {
        printf("rank %d: the plugin does not offer the GDAKI type (netDeviceType %d, version %d)\n", r->rank,
               p.netDeviceType, p.netDeviceVersion);
        return 1;
    }
    objects_fn objects = gd_find_objects();
    struct gd_objs before, after;
    if (!objects || objects(&before)) {
        printf("rank %d: softnic_ctl_objects not found: run on softnic (LD_LIBRARY_PATH=.../tests/softnic)\n",
               r->rank);
        return 1;
    }
    if (gd_connect(r) != ncclSuccess) {
        printf("rank %d: connect failed\n", r->rank);
        return 1;
    }
    if (objects(&after) || gk_check_no_proxy_qps(r, &before, &after))
        return 1;
    k->layout = p.netDeviceVersion;
    if (gk_create(k, gd_contexts, GK_NSIG, GK_NCNT))
        return 1;
    k->len = len;
    k->src = alloc_pages(len);
    k->dst = alloc_pages(len);
    if (!k->src || !k->dst)
        return 1;
    if (r->gin->regMrSym(r->coll, k->src, len, NCCL_PTR_HOST, 0, &k->src_mh, (void **)&k->src_gh) != ncclSuccess ||
        r->gin->regMrSym(r->coll, k->dst, len, NCCL_PTR_HOST, 0, &k->dst_mh, (void **)&k->dst_gh) != ncclSuccess ||
        !k->src_gh || !k->dst_gh || (void *)k->src_gh == k->src_mh) {
        printf("rank %d: regMrSym failed or gave no GDAKI window handle\n", r->rank);
        return 1;
    }
    return 0;
}

void gk_close(struct gk *k)
{
    struct gd_rank *r = k->r;
    if (k->borrowed) {
        if (k->ctx)
            r->gin->destroyContext(k->ctx);
        free(k->shadow);
        return;
    }
    if (k->dst_mh)
        r->gin->deregMrSym(r->coll, k->dst_mh);
    if (k->src_mh)
        r->gin->deregMrSym(r->coll, k->src_mh);
    if (k->ctx)
        r->gin->destroyContext(k->ctx);
    free(k->src);
    free(k->dst);
    free(k->shadow);
}

static uint64_t put_id(int from, int to, int round, int kind)
{
    return ((uint64_t)from << 40) | ((uint64_t)to << 32) | ((uint64_t)round << 4) | (uint64_t)kind;
}

/* Chunk layout (GK_CHUNK bytes): [0,96) put, [96,200) put+signal,
 * [200,320) put+counter, [320,480) put+signal+counter, [480,488) value. */
static const struct { size_t off, len; } part[4] = { { 0, 96 }, { 96, 104 }, { 200, 120 }, { 320, 160 } };
#define VAL_OFF 480

static uint64_t value_of(int from, int to, int round)
{
    return 0xa5a5000000000000ull ^ put_id(from, to, round, 7);
}

/* The host has no data path on a GDAKI-type collComm (NCCL never calls
 * one there): iput, iputSignal (GIN v11, v12: v14 has none), test of a
 * request and an RMA context on it are each refused with ncclInvalidUsage,
 * and nothing is posted (no request given); ginProgress succeeds. */
static int gk_check_host_path_refused(struct gk *k)
{
    struct gd_rank *r = k->r;
    uint32_t peer = (uint32_t)((r->rank + 1) % r->nranks);
    int bad = 0;
    void *req = &bad;
    ncclResult_t e;
    if (r->gin->iput) {
        e = r->gin->iput(r->coll, 0, k->src_mh, 8, 0, k->dst_mh, peer, &req);
        if (e != ncclInvalidUsage || req) {
            printf("rank %d: iput on the GDAKI collComm: %d, request %p (want ncclInvalidUsage, none)\n", r->rank, e,
                   req);
            bad = 1;
        }
        req = &bad;
        e = r->gin->iputSignal(r->coll, 0, k->src_mh, 8, 0, k->dst_mh, peer, 0, k->dst_mh, 1, NCCL_NET_SIGNAL_OP_INC,
                               &req);
        if (e != ncclInvalidUsage || req) {
            printf("rank %d: iputSignal on the GDAKI collComm: %d, request %p (want ncclInvalidUsage, none)\n",
                   r->rank, e, req);
            bad = 1;
        }
    }
    if (r->gin->test) {
        int done = 1;
        e = r->gin->test(r->coll, &bad, &done);
        if (e != ncclInvalidUsage || done) {
            printf("rank %d: test on the GDAKI collComm: %d, done %d (want ncclInvalidUsage, 0)\n", r->rank, e, done);
            bad = 1;
        }
    }
    /* ginProgress still answers: it only watches the device there */
    if (r->gin->ginProgress && (e = r->gin->ginProgress(r->coll)) != ncclSuccess) {
        printf("rank %d: ginProgress on the GDAKI collComm: %d\n", r->rank, e);
        bad = 1;
    }
    char err[PATH_MAX + 256];
    const ncclRma_v14_t *rma = plugin_tables_get(r->lib, &plugin_table_rma_v14, PLUGIN_TABLES_NAME, err, sizeof(err));
    void *ctx = &bad;
    ncclRmaConfig_v14_t cfg = { .nContexts = 1, .trafficClass = -1, .rankStride = 1 };
    if (!rma || (e = rma->createContext(r->coll, &cfg, &ctx)) != ncclInvalidUsage || ctx) {
        printf("rank %d: RMA createContext on the GDAKI collComm: %s%d, context %p (want ncclInvalidUsage, none)\n",
               r->rank, rma ? "" : err, rma ? (int)e : -1, ctx);
        bad = 1;
    }
    if (!bad)
        printf("rank %d: iput, iputSignal, test and RMA createContext on the GDAKI collComm refused "
               "(ncclInvalidUsage)\n",
               r->rank);
    return bad;
}

static int t_gdaki(struct gd_rank *r, void *arg)
{
    struct gd_opts *o = arg;
    int n = r->nranks, me = r->rank, rounds = o->rounds;
    size_t len = (size_t)n * (size_t)rounds * GK_CHUNK;
    struct gk k;
    if (gk_open(r, &k, len))
        return 1;
    unsigned long long tx0[2] = { 0, 0 }, tx1[2] = { 0, 0 };
    int no_tx = gd_port_tx(tx0);
    struct rn_gin_gdaki_gpu_ctx *gc = k.gc;
    /* source bytes: for target t, round i: chunk (t * rounds + i) */
    for (int t = 0; t < n; t++)
        for (int i = 0; i < rounds; i++)
            for (int j = 0; j < 4; j++) {
                uint8_t *b = k.src + ((size_t)t * rounds + i) * GK_CHUNK + part[j].off;
                for (size_t x = 0; x < part[j].len; x++)
                    b[x] = gd_byte(put_id(me, t, i, j), x);
            }
    if (gd_barrier(r))
        return 1;
    struct dc_addr sink = { 0, gc->sink_buffer_lkey };
    for (int i = 0; i < rounds; i++) {
        for (int t = 0; t < n; t++) {
            struct rn_doca_qp *qp = gc->gdqp + t, *comp = gc->companion_gdqp + t;
            /* the target's chunk for (me, i), the source chunk for (t, i) */
            uint64_t doff = ((uint64_t)me * rounds + i) * GK_CHUNK, soff = ((uint64_t)t * rounds + i) * GK_CHUNK;
            /* on the wire, ids count from the table's start: the context's offset first */
            uint64_t so = gc->signals_table.offset, co = gc->counters_table.offset;
            struct dc_addr sig_put = { 8u * (so + SIG_PUT(me)), gc->signals_table.rkeys[t] };
            struct dc_addr sig_val = { 8u * (so + SIG_VAL(me)), gc->signals_table.rkeys[t] };
            struct dc_addr sig_only = { 8u * (so + SIG_ONLY(me)), gc->signals_table.rkeys[t] };
            struct dc_addr cnt = { 8u * (co + (uint64_t)t), gc->counters_table.rkeys[me] };
            struct dc_addr ra, la;
#define AT(j) (ra = (struct dc_addr){ doff + part[j].off, k.dst_gh->rkeys[t] }, \
               la = (struct dc_addr){ soff + part[j].off, k.src_gh->lkey })
            AT(0);
            dc_put(qp, ra, la, part[0].len);
            AT(1);
            dc_put_signal(qp, ra, la, part[1].len, sig_put, sink, 1);
            AT(2);
            dc_put_counter(qp, ra, la, part[2].len, comp, cnt, sink, 1);
            AT(3);
            dc_put_signal_counter(qp, ra, la, part[3].len, sig_put, sink, 2, comp, cnt, sink, 1);
#undef AT
            struct dc_addr rv = { doff + VAL_OFF, k.dst_gh->rkeys[t] };
            dc_p_signal(qp, rv, value_of(me, t, i), sig_val, sink, 3);
            dc_signal(qp, sig_only, sink, 5);
        }
    }
    int bad = 0;
    double deadline = gd_now() + GK_DEADLINE_S;
    /* receiver: every source's signals reach their sums, then every byte */
    volatile uint64_t *sig = gc->signals_table.buffer;
    for (int q = 0; q < n; q++) {
        uint64_t want[3] = { 3ull * rounds, 3ull * rounds, 5ull * rounds };
        for (int s = 0; s < 3; s++) {
            while (__atomic_load_n(&sig[3 * q + s], __ATOMIC_ACQUIRE) < want[s] && gd_now() < deadline)
                usleep(100);
            uint64_t got = __atomic_load_n(&sig[3 * q + s], __ATOMIC_ACQUIRE);
            if (got != want[s]) {
                printf("rank %d: signal %d from rank %d is %llu, expected %llu\n", me, 3 * q + s, q,
                       (unsigned long long)got, (unsigned long long)want[s]);
                bad = 1;
            }
        }
        for (int i = 0; i < rounds && !bad; i++) {
            const uint8_t *c = k.dst + ((size_t)q * rounds + i) * GK_CHUNK;
            for (int j = 0; j < 4 && !bad; j++)
                for (size_t x = 0; x < part[j].len; x++)
                    if (c[part[j].off + x] != gd_byte(put_id(q, me, i, j), x)) {
                        printf("rank %d: byte %zu of put %d of round %d from rank %d is 0x%02x, expected 0x%02x\n",
                               me, x, j, i, q, c[part[j].off + x], gd_byte(put_id(q, me, i, j), x));
                        bad = 1;
                        break;
                    }
            uint64_t v;
            memcpy(&v, c + VAL_OFF, 8);
            if (!bad && v != value_of(q, me, i)) {
                printf("rank %d: value of round %d from rank %d is 0x%llx, expected 0x%llx\n", me, i, q,
                       (unsigned long long)v, (unsigned long long)value_of(q, me, i));
                bad = 1;
            }
        }
    }
    /* sender: every counter (this rank's table, id = target) reaches
     * 2 per round; every QP flushed without an error CQE */
    volatile uint64_t *cnt = gc->counters_table.buffer;
    for (int t = 0; t < n; t++) {
        while (__atomic_load_n(&cnt[t], __ATOMIC_ACQUIRE) < 2ull * rounds && gd_now() < deadline)
            usleep(100);
        if (cnt[t] != 2ull * rounds) {
            printf("rank %d: counter of target %d is %llu, expected %llu\n", me, t, (unsigned long long)cnt[t],
                   2ull * rounds);
            bad = 1;
        }
        int w = dc_wait(gc->gdqp + t, 30.0), wc = dc_wait(gc->companion_gdqp + t, 30.0);
        if (w || wc) {
            printf("rank %d: flush of the QP towards rank %d: %d, companion %d\n", me, t, w, wc);
            bad = 1;
        }
    }
    bool has = true;
    if (r->gin->queryLastError(k.ctx, &has) != ncclSuccess || has) {
        printf("rank %d: queryLastError reports an error after a clean run\n", me);
        bad = 1;
    }
    if (gk_check_host_path_refused(&k))
        bad = 1;
    unsigned long long slots = (unsigned long long)gc->gdqp[(me + 1) % n].sq_rsvd_index;
    if (!bad)
        printf("rank %d: %d rounds to %d ranks byte-checked, signals and counters exact, %llu slots on a ring of %u\n",
               me, rounds, n, slots, (unsigned)gc->gdqp[0].sq_wqe_num);
    if (!no_tx && !gd_port_tx(tx1))
        printf("rank %d: payload bytes sent: port 1 %llu, port 2 %llu\n", me, tx1[0] - tx0[0], tx1[1] - tx0[1]);
    if (gd_barrier(r))
        bad = 1;
    gk_close(&k);
    return bad;
}

static int t_gdaki_error(struct gd_rank *r, void *arg)
{
    (void)arg;
    struct gk k;
    if (gk_open(r, &k, 1 << 16))
        return 1;
    struct rn_gin_gdaki_gpu_ctx *gc = k.gc;
    int bad = 0;
    if (gd_barrier(r))
        return 1;
    if (r->rank == 0) {
        struct rn_doca_qp *qp = gc->gdqp + 1;
        struct dc_addr ra = { 0, k.dst_gh->rkeys[1] }, la = { 0, k.src_gh->lkey };
        dc_put(qp, ra, la, 4096);                       /* a good one first */
        int first = dc_wait(qp, 30.0);
        ra.key ^= htobe32(0x00a5a500u);                 /* not a key rank 1 has */
        dc_put(qp, ra, la, 4096);
        int second = dc_wait(qp, 30.0);
        bool has = false;
        double deadline = gd_now() + 30.0;
        while (r->gin->queryLastError(k.ctx, &has) == ncclSuccess && !has && gd_now() < deadline)
            usleep(1000);
        if (first != 0 || second != -5 /* -EIO */ || !has) {
            printf("rank 0: good put %d, bad-key put %d (want -EIO), queryLastError %d\n", first, second, has);
            bad = 1;
        } else {
            printf("rank 0: a put with a bad rkey completed in error (-EIO) and queryLastError reports it\n");
        }
    }
    if (gd_barrier(r))
        bad = 1;
    if (r->rank == 1) {
        /* The responder of a bad-key write moves its QP to the error state
         * too (an IB responder error): either answer is right here. */
        bool has = false;
        if (r->gin->queryLastError(k.ctx, &has) != ncclSuccess) {
            printf("rank 1: queryLastError failed\n");
            bad = 1;
        }
        printf("rank 1: queryLastError %s\n", has ? "reports the broken connection" : "reports nothing");
    }
    if (gd_barrier(r))
        bad = 1;
    /* A context made after the broken one was destroyed has new QPs: its
     * queryLastError starts clean (past the 50 ms between looks). */
    r->gin->destroyContext(k.ctx);
    k.ctx = NULL;
    ncclNetDeviceHandle_v11_t *dh = NULL;
    if (r->gin->createContext(r->coll, GK_NSIG, GK_NCNT, &k.ctx, &dh) != ncclSuccess) {
        printf("rank %d: createContext after destroyContext failed\n", r->rank);
        k.ctx = NULL;
        bad = 1;
    } else {
        usleep(60000);
        bool has = true;
        if (r->gin->queryLastError(k.ctx, &has) != ncclSuccess || has) {
            printf("rank %d: the new context's queryLastError reports an error (%d)\n", r->rank, has);
            bad = 1;
        } else {
            printf("rank %d: a new context after the broken one reports no error\n", r->rank);
        }
    }
    if (gd_barrier(r))
        bad = 1;
    gk_close(&k);
    return bad;
}

static int t_gdaki_kill(struct gd_rank *r, void *arg)
{
    (void)arg;
    struct gk k;
    if (gk_open(r, &k, 1 << 16) || gd_barrier(r))
        return 1;
    int victim = r->nranks - 1;
    if (r->rank == victim) {
        gd_await_kill(r);
    }
    bool has = false;
    double t0 = gd_now();
    while (r->gin->queryLastError(k.ctx, &has) == ncclSuccess && !has && gd_now() < t0 + GK_DEADLINE_S)
        usleep(10000);
    if (!has) {
        printf("rank %d: queryLastError reports nothing %.0f s after rank %d was killed\n", r->rank, gd_now() - t0,
               victim);
        return 1;
    }
    printf("rank %d: killed rank %d reported by queryLastError after %.1f s\n", r->rank, victim, gd_now() - t0);
    /* what a kernel still putting to it sees: its wait ends, with an error
     * CQE or through the release that reporting the error started (the
     * context's CQs then answer every wait), never a hang */
    struct rn_doca_qp *qp = k.gc->gdqp + victim;
    struct dc_addr ra = { 0, k.dst_gh->rkeys[victim] }, la = { 0, k.src_gh->lkey };
    dc_put(qp, ra, la, 4096);
    t0 = gd_now();
    int w = dc_wait(qp, 60.0);
    if (w != -5 /* -EIO */ && w != 0) {
        printf("rank %d: a put to the killed rank: %d after %.1f s, expected its wait to end (an error CQE, or "
               "released)\n",
               r->rank, w, gd_now() - t0);
        return 1;
    }
    printf("rank %d: a put to the killed rank ended %s after %.1f s\n", r->rank, w ? "in error" : "released",
           gd_now() - t0);
    gk_close(&k);
    return 0;
}

/* gdaki-sets: GDAKI contexts come and go on one collComm as NCCL 2.30's
 * device communicators do (a createContext each, destroyed in any order).
 * Three sets, each of a different shape: A (gk_open's, --contexts
 * contexts), B (one context more, twice the signals), C (two more, half
 * the signals and counters). Phase 1 posts through A and B, slot after
 * slot in turn; then A is destroyed; phase 2 posts through B alone; C is
 * made; phase 3 posts through B and C in turn; then C and B are destroyed.
 * A slot is a put with a signal from every rank to every rank (self
 * included) through the set's last context: its own bytes in the window,
 * and 1 added to the target's signal nsig - 1 - source in that set's
 * table. After each phase every byte of its slots is checked, and every
 * live set's signal words are exactly what went through it (no word of
 * another set's moved). Last, a fourth set D is made and left for
 * closeColl (the rank's end), which must free it (gin_gdaki.sh checks its
 * WARN; ASan that nothing is read after it is freed). */
#define GS_CHUNK 256
#define GS_SLOTS_PER_ROUND 5          /* A, B; B; B, C */

struct gs {
    struct gk *k;
    const char *name;
    uint64_t posts;                   /* slots posted through it: each source's signal sum */
};

static uint64_t gs_id(int from, int to, int slot)
{
    return 0x5e70000000000000ull | ((uint64_t)from << 40) | ((uint64_t)to << 32) | (uint64_t)slot;
}

/* Slot `slot` through set g: to every rank, its chunk with a signal. */
static void gs_post(struct gk *w, struct gs *g, int slot)
{
    struct rn_gin_gdaki_gpu_ctx *gc = g->k->gc;
    int n = w->r->nranks, me = w->r->rank;
    struct dc_addr sink = { 0, gc->sink_buffer_lkey };
    for (int t = 0; t < n; t++) {
        struct dc_addr ra = { ((uint64_t)slot * n + me) * GS_CHUNK, w->dst_gh->rkeys[t] };
        struct dc_addr la = { ((uint64_t)slot * n + t) * GS_CHUNK, w->src_gh->lkey };
        uint64_t id = (uint64_t)g->k->nsig - 1 - (uint64_t)me;
        struct dc_addr sig = { 8u * (gc->signals_table.offset + id), gc->signals_table.rkeys[t] };
        dc_put_signal(gc->gdqp + t, ra, la, GS_CHUNK, sig, sink, 1);
    }
    g->posts++;
}

/* Every word of g's signal part (its last context's): source q's word at
 * its sum once it gets there, every other word zero. */
static int gs_check_signals(struct gd_rank *r, struct gs *g, double deadline)
{
    volatile uint64_t *sig = g->k->gc->signals_table.buffer;
    int n = r->nranks, nsig = g->k->nsig;
    for (int i = 0; i < nsig; i++) {
        int q = nsig - 1 - i;
        uint64_t want = q < n ? g->posts : 0;
        while (__atomic_load_n(&sig[i], __ATOMIC_ACQUIRE) < want && gd_now() < deadline)
            usleep(100);
        uint64_t got = __atomic_load_n(&sig[i], __ATOMIC_ACQUIRE);
        if (got != want) {
            printf("rank %d: set %s: signal %d (%s) is %llu, expected %llu\n", r->rank, g->name, i,
                   q < n ? "a source's" : "no source's", (unsigned long long)got, (unsigned long long)want);
            return 1;
        }
    }
    return 0;
}

/* One phase: rounds x nu slots through use[] in turn from *slot on; then
 * signals and bytes checked, every QP used flushed, queryLastError of
 * each quiet, and a barrier (no rank destroys a set a peer still posts
 * into). */
static int gs_phase(struct gk *w, struct gs **use, int nu, int rounds, int *slot, const char *what)
{
    struct gd_rank *r = w->r;
    int n = r->nranks, me = r->rank, first = *slot, bad = 0;
    for (int i = 0; i < rounds; i++)
        for (int u = 0; u < nu; u++)
            gs_post(w, use[u], (*slot)++);
    double deadline = gd_now() + GK_DEADLINE_S;
    for (int u = 0; u < nu && !bad; u++)
        bad = gs_check_signals(r, use[u], deadline);
    for (int s = first; s < *slot && !bad; s++)
        for (int q = 0; q < n && !bad; q++) {
            const uint8_t *c = w->dst + ((size_t)s * n + q) * GS_CHUNK;
            for (size_t x = 0; x < GS_CHUNK; x++)
                if (c[x] != gd_byte(gs_id(q, me, s), x)) {
                    printf("rank %d: %s: byte %zu of slot %d from rank %d is 0x%02x, expected 0x%02x\n", me, what, x,
                           s, q, c[x], gd_byte(gs_id(q, me, s), x));
                    bad = 1;
                    break;
                }
        }
    for (int u = 0; u < nu && !bad; u++) {
        for (int t = 0; t < n && !bad; t++)
            if (dc_wait(use[u]->k->gc->gdqp + t, 30.0)) {
                printf("rank %d: %s: the flush of set %s towards rank %d failed\n", me, what, use[u]->name, t);
                bad = 1;
            }
        bool has = true;
        if (!bad && (r->gin->queryLastError(use[u]->k->ctx, &has) != ncclSuccess || has)) {
            printf("rank %d: %s: queryLastError of set %s reports an error\n", me, what, use[u]->name);
            bad = 1;
        }
    }
    if (!bad)
        printf("rank %d: %s: %d slots to %d ranks byte-checked, signals exact\n", me, what, *slot - first, n);
    if (gd_barrier(r))
        bad = 1;
    return bad;
}

static int gs_destroy(struct gd_rank *r, struct gk *k, const char *name)
{
    ncclResult_t e = r->gin->destroyContext(k->ctx);
    k->ctx = NULL;
    if (e != ncclSuccess)
        printf("rank %d: destroyContext of set %s: %d\n", r->rank, name, e);
    return e != ncclSuccess;
}

static int t_gdaki_sets(struct gd_rank *r, void *arg)
{
    struct gd_opts *o = arg;
    int n = r->nranks, me = r->rank, rounds = o->rounds, slots = GS_SLOTS_PER_ROUND * rounds;
    struct gk ka, kb, kc;
    memset(&kb, 0, sizeof(kb));
    memset(&kc, 0, sizeof(kc));
    if (gk_open(r, &ka, (size_t)slots * n * GS_CHUNK))
        return 1;
    for (int s = 0; s < slots; s++)
        for (int t = 0; t < n; t++)
            for (size_t x = 0; x < GS_CHUNK; x++)
                ka.src[((size_t)s * n + t) * GS_CHUNK + x] = gd_byte(gs_id(me, t, s), x);
    struct gs a = { &ka, "A", 0 }, b = { &kb, "B", 0 }, c = { &kc, "C", 0 };
    int bad = gk_ctx_open(&ka, &kb, ka.nctx + 1, 2 * GK_NSIG, GK_NCNT);
    if (!bad && (kb.dh->handle == ka.dh->handle || kb.gc->signals_table.buffer == ka.gc->signals_table.buffer ||
                 kb.gc->gdqp[0].sq_num == ka.gc->gdqp[0].sq_num)) {
        printf("rank %d: sets A and B share their device handle, signal table or QPs\n", me);
        bad = 1;
    }
    int slot = 0;
    struct gs *ab[] = { &a, &b }, *bo[] = { &b }, *bc[] = { &b, &c };
    if (!bad)
        bad = gs_phase(&ka, ab, 2, rounds, &slot, "sets A and B");
    if (!bad)
        bad = gs_destroy(r, &ka, "A");
    if (!bad)
        bad = gs_phase(&ka, bo, 1, rounds, &slot, "set B after A was destroyed");
    if (!bad && gk_ctx_open(&ka, &kc, ka.nctx + 2, GK_NSIG / 2, GK_NCNT / 2))
        bad = 1;
    if (!bad)
        bad = gs_phase(&ka, bc, 2, rounds, &slot, "sets B and C");
    if (!bad)
        bad = gs_destroy(r, &kc, "C") | gs_destroy(r, &kb, "B");
    if (!bad)
        printf("rank %d: three GDAKI contexts on one collComm made, used and destroyed\n", me);
    gk_close(&kc);
    gk_close(&kb);
    struct gk kd;
    if (!bad && gk_ctx_open(&ka, &kd, 1, GK_NSIG, GK_NCNT))
        bad = 1;
    else if (!bad)
        free(kd.shadow);        /* its context is closeColl's */
    gk_close(&ka);
    return bad;
}

/* gdaki-port-down: rank 0 takes port 2 of its device down while every
 * rank holds a GDAKI context (a kernel spinning on a signal would be
 * waiting): its queryLastError must report it at once, not after the QP
 * retry budget (the case runs with a 60 s one). */
#define GK_PORT_DOWN_WITHIN_S 5.0
static int t_gdaki_port_down(struct gd_rank *r, void *arg)
{
    (void)arg;
    struct gk k;
    set_state_fn set_state = gd_find_set_state();
    if (!set_state || gk_open(r, &k, 4096))
        return 1;
    int bad = gd_barrier(r);
    if (!bad && r->rank == 0) {
        bool has = true;
        if (r->gin->queryLastError(k.ctx, &has) != ncclSuccess || has) {
            printf("rank 0: queryLastError reports an error before the port went down\n");
            bad = 1;
        }
        double t0 = gd_now();
        if (!bad && set_state(((struct gin_coll *)r->coll)->ports[0].ctx, 2, 0) != 0) {
            printf("rank 0: cannot take port 2 down\n");
            bad = 1;
        }
        has = false;
        while (!bad && !has && gd_now() < t0 + GK_PORT_DOWN_WITHIN_S) {
            if (r->gin->queryLastError(k.ctx, &has) != ncclSuccess) {
                printf("rank 0: queryLastError failed\n");
                bad = 1;
            }
            usleep(1000);
        }
        if (!bad && !has) {
            printf("rank 0: no error %.0f s after port 2 went down\n", GK_PORT_DOWN_WITHIN_S);
            bad = 1;
        } else if (!bad) {
            printf("rank 0: port 2 down: queryLastError reports it after %.3f s\n", gd_now() - t0);
        }
    }
    if (gd_barrier(r))
        bad = 1;
    gk_close(&k);
    return bad;
}

/* A second collComm of the communicator k1's belongs to (a second listen
 * on the init context, as NCCL makes one per GIN context) with a GDAKI
 * context on it in k2; r->coll and r->listen are the second's until
 * gk_second_close puts the first's back. 0, or 1 (said why). */
struct gk_second {
    void *coll1, *listen1, *coll2, *listen2;
};

static int gk_second_open(struct gd_rank *r, struct gk *k2, size_t len, struct gk_second *s)
{
    s->coll1 = r->coll, s->listen1 = r->listen, s->coll2 = NULL, s->listen2 = NULL;
    r->coll = NULL;
    int bad = gd_listen_again(r, &s->listen2);
    r->listen = s->listen2;
    if (bad || gk_open(r, k2, len)) {
        printf("rank %d: the second collComm failed\n", r->rank);
        bad = 1;
    }
    s->coll2 = r->coll;
    return bad;
}

/* Closes k2 and the second collComm and listen; 0, or 1 when closeColl failed. */
static int gk_second_close(struct gd_rank *r, struct gk *k2, struct gk_second *s)
{
    int bad = 0;
    gk_close(k2);
    if (s->coll2 && r->gin->closeColl(s->coll2) != ncclSuccess)
        bad = 1;
    if (s->listen2)
        r->gin->closeListen(s->listen2);
    r->coll = s->coll1, r->listen = s->listen1;
    return bad;
}

/* gdaki-group-fail: each rank holds two GDAKI contexts of one communicator
 * (two listens and collComms with the init context's id, as NCCL opens one
 * per GIN context); rank 0 takes port 2 down and asks queryLastError of the
 * first context only, as NCCL stops at the first context with an error.
 * The teardown of the second must know its communicator failed too (the
 * application's kernel may still spin on it): gin_gdaki.sh counts rank 0's
 * contexts kept. */
static int t_gdaki_group_fail(struct gd_rank *r, void *arg)
{
    (void)arg;
    struct gk k1, k2;
    set_state_fn set_state = gd_find_set_state();
    if (!set_state || gk_open(r, &k1, 4096))
        return 1;
    struct gk_second sec;
    int bad = gk_second_open(r, &k2, 4096, &sec);
    if (!bad && gd_barrier(r))
        bad = 1;
    if (!bad && r->rank == 0) {
        double t0 = gd_now();
        bool has = false;
        if (set_state(((struct gin_coll *)sec.coll1)->ports[0].ctx, 2, 0) != 0) {
            printf("rank 0: cannot take port 2 down\n");
            bad = 1;
        }
        while (!bad && !has && gd_now() < t0 + GK_PORT_DOWN_WITHIN_S)
            if (r->gin->queryLastError(k1.ctx, &has) != ncclSuccess)
                bad = 1;
            else
                usleep(1000);
        if (!bad && !has) {
            printf("rank 0: the first context saw no error\n");
            bad = 1;
        }
    }
    if (gd_barrier(r))
        bad = 1;
    if (gk_second_close(r, &k2, &sec))
        bad = 1;
    gk_close(&k1);
    if (!bad)
        printf("rank %d: two contexts torn down\n", r->rank);
    return bad;
}

/* gdaki-ports: two GDAKI collComms of one communicator, as NCCL 2.28 opens
 * one per GIN context (two listens on the init context): on each, one put
 * of GK_PORT_PUT bytes to the other rank, flushed, and the port whose sent
 * bytes grew by it printed. gin_gdaki.sh checks that both ranks name the
 * same port for a collComm (its QP and the peer's sit on one port) and
 * that the two collComms use different ports. */
#define GK_PORT_PUT 65536
static int port_of_put(struct gd_rank *r, struct gk *k, int which)
{
    int peer = 1 - r->rank;
    unsigned long long t0[2], t1[2];
    if (gd_port_tx(t0))
        return 1;
    struct dc_addr ra = { 0, k->dst_gh->rkeys[peer] }, la = { 0, k->src_gh->lkey };
    dc_put(k->gc->gdqp + peer, ra, la, GK_PORT_PUT);
    int w = dc_wait(k->gc->gdqp + peer, 30.0);
    if (w || gd_port_tx(t1)) {
        printf("rank %d: collComm %d: the put to rank %d did not complete (%d)\n", r->rank, which, peer, w);
        return 1;
    }
    unsigned long long d1 = t1[0] - t0[0], d2 = t1[1] - t0[1];
    int port = d1 >= GK_PORT_PUT && d2 < GK_PORT_PUT ? 1 : d2 >= GK_PORT_PUT && d1 < GK_PORT_PUT ? 2 : 0;
    printf("rank %d: collComm %d: the put to rank %d went on port %d (%llu, %llu bytes)\n", r->rank, which, peer,
           port, d1, d2);
    return port ? 0 : 1;
}

static int t_gdaki_ports(struct gd_rank *r, void *arg)
{
    (void)arg;
    struct gk k1, k2;
    if (gk_open(r, &k1, GK_PORT_PUT))
        return 1;
    struct gk_second sec;
    int bad = gk_second_open(r, &k2, GK_PORT_PUT, &sec);
    bad = bad || gd_barrier(r) || port_of_put(r, &k1, 1) || gd_barrier(r) || port_of_put(r, &k2, 2);
    if (gd_barrier(r))
        bad = 1;
    if (gk_second_close(r, &k2, &sec))
        bad = 1;
    gk_close(&k1);
    return bad;
}

/* gdaki-mismatch: rank 1 offers the proxy type (gd_rank_env), rank 0 the
 * GDAKI type: rank 0 refuses rank 1's HELLO, and both connects fail at once
 * with ncclInvalidUsage rather than after RAILNET_HANDSHAKE_TIMEOUT. */
#define GK_MISMATCH_WITHIN_S 10.0
static int t_gdaki_mismatch(struct gd_rank *r, void *arg)
{
    (void)arg;
    ncclNetProperties_v11_t p;
    if (r->gin->getProperties(0, &p) != ncclSuccess) {
        printf("rank %d: getProperties failed\n", r->rank);
        return 1;
    }
    int want = r->rank == 1 ? NCCL_NET_DEVICE_GIN_PROXY : NCCL_NET_DEVICE_GIN_GDAKI;
    if ((int)p.netDeviceType != want) {
        printf("rank %d: the plugin offers type %d, the case needs %d\n", r->rank, (int)p.netDeviceType, want);
        return 1;
    }
    double t0 = gd_now();
    ncclResult_t e = gd_connect(r);
    double took = gd_now() - t0;
    if (e != ncclInvalidUsage || r->coll || took > GK_MISMATCH_WITHIN_S) {
        printf("rank %d: connect beside a rank of the other type: %d after %.1f s (want ncclInvalidUsage within "
               "%.0f s)\n",
               r->rank, e, took, GK_MISMATCH_WITHIN_S);
        return 1;
    }
    printf("rank %d: connect beside a rank of the other type refused (ncclInvalidUsage) after %.1f s\n", r->rank,
           took);
    return 0;
}

int gd_gdaki_run(const char *plugin, const char *name, struct gd_opts *o)
{
    if (!strcmp(name, "gdaki-mismatch")) {
        gd_rank_env[1] = (struct gd_env){ "RAILNET_GIN", "proxy" };
        return gd_run(plugin, 2, GK_DEADLINE_S, -1, o->seed, t_gdaki_mismatch, o);
    }
    if (!strcmp(name, "gdaki-group-fail"))
        return gd_run(plugin, 2, GK_DEADLINE_S, -1, o->seed, t_gdaki_group_fail, o);
    if (!strcmp(name, "gdaki-ports"))
        return gd_run(plugin, 2, GK_DEADLINE_S, -1, o->seed, t_gdaki_ports, o);
    if (!strcmp(name, "gdaki-port-down"))
        return gd_run(plugin, 2, GK_DEADLINE_S, -1, o->seed, t_gdaki_port_down, o);
    if (!strncmp(name, "gdaki-forged-", 13))
        return gd_forge_run(plugin, name + 13, o);
    if (!strcmp(name, "gdaki"))
        return gd_run(plugin, o->ranks, GK_DEADLINE_S * 2, -1, o->seed, t_gdaki, o);
    if (!strcmp(name, "gdaki-error"))
        return gd_run(plugin, 2, GK_DEADLINE_S * 2, -1, o->seed, t_gdaki_error, o);
    if (!strcmp(name, "gdaki-a2a"))
        return gd_gdaki_a2a_run(plugin, o, 0);
    if (!strcmp(name, "gdaki-sets"))
        return gd_run(plugin, o->ranks, GK_DEADLINE_S * 2, -1, o->seed, t_gdaki_sets, o);
    if (!strcmp(name, "gdaki-release"))
        return gd_gdaki_a2a_run(plugin, o, 1);
    if (!strcmp(name, "gdaki-release-query"))
        return gd_gdaki_a2a_run(plugin, o, 2);
    if (!strcmp(name, "gdaki-kill"))
        return gd_run(plugin, o->ranks, GK_DEADLINE_S * 2, o->ranks - 1, o->seed, t_gdaki_kill, o);
    return -1;
}
