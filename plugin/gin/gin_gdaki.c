/* plugin/gin/gin_gdaki.c: the resources of the GIN GDAKI type (gin_gdaki.h
 * says what they are and when they are made). Built on plugin/gdaki's
 * DEVX queues (gdaki_pair.h building blocks on a context and PD this file
 * owns) and on the collComm's sockets for the exchanges.
 *
 * Memory the device code reads is "device memory" here: cuMemAlloc'ed GPU
 * memory, or, in the CPU-consumer mode (no CUDA), page-aligned host memory
 * whose addresses the consumer uses as they are. */
#include <endian.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../ib/config.h"
#include "cudawrap.h"
#include "gdaki_cuda.h"
#include "gdaki_devx.h"
#include "gdaki_pair.h"
#include "gin.h"
#include "gin_gdaki.h"
#include "gin_wire.h"
#include "log.h"
#include "oob.h"
#include "qp.h"

#define GIN_GDAKI_MAGIC 0x4b444747u
#define GIN_GDAKI_SQ_DEPTH 512      /* slots per QP when NCCL asks no queue depth; the CQ has twice as many CQEs */
#define GIN_GDAKI_SQ_MIN 16
#define GIN_GDAKI_SQ_MAX 16384
#define GIN_GDAKI_SINK_BYTES 4096
#define GIN_GDAKI_XSEQ 0x80000000u     /* WIN sequence numbers of this file's exchanges */
#define GIN_GDAKI_CHECK_NS 50000000ull  /* queryLastError looks at the QPs at most this often */
#define GIN_GDAKI_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | \
                          IBV_ACCESS_REMOTE_ATOMIC)

static int offered;         /* the layout, 0: the proxy type */

void gin_gdaki_set_offered(int layout)
{
    __atomic_store_n(&offered, layout, __ATOMIC_RELEASE);
}

int gin_gdaki_offered(void)
{
    return __atomic_load_n(&offered, __ATOMIC_ACQUIRE);
}

/* A block of device memory (or host memory in the CPU-consumer mode). */
struct dmem {
    void *ptr;              /* what the device code is given */
    uint64_t raw;           /* cuMemAlloc'ed base (GPU) */
    void *host;             /* aligned_alloc'ed (host mode) */
};

struct gin_gdaki_win {
    struct ibv_mr *mr;      /* zero-based, on the DEVX PD */
    struct dmem blk;        /* mem handle, then rkeys[nranks] */
};

/* What belongs to the collComm: the DEVX context and PD every GDAKI
 * context's QPs and every window's registration live on. Made at the first
 * createContext or regMrSym, freed at closeColl. */
struct gin_gdaki_res {
    struct gin_coll *coll;
    const struct ibvwrap *v;
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    int host_only, cuda_dev, is_mlx5, atomics;
    int queue_gpu;          /* RAILNET_GDAKI_QUEUE_MEM=gpu: rings in GPU memory */
    int nports;             /* the device's ports the QPs spread over (port_slot) */
    struct {
        struct ibv_port_attr pattr;
        union ibv_gid gid;
        int port, gid_index;
    } pt[HS_MAX_PORTS];
    int kept;               /* a failed context or window stays until the process exits: so do the
                             * DEVX context and PD under it */
};

/* What one createContext made (a "set"): NCCL 2.30 calls createContext once
 * per device communicator on the same collComms, so several sets live on
 * one collComm at once and go independently. The context NCCL holds is
 * this struct. */
struct gin_gdaki_set {
    uint32_t magic;         /* first: gin_errors.c tells its proxy-type context by the first word */
    struct gin_gdaki_res *base;
    struct gin_gdaki_set *next;         /* the live sets of every collComm (sets_mu) */
    int layout, backend;    /* what the device code reads (gin_gdaki_layout.c) */
    int nctx;               /* contexts; QP of context x towards peer p: qp[x * nranks + p] */
    size_t qp_size, ctx_size;
    struct gdaki_pair **qp, **comp;     /* [nctx * nranks] */
    struct dmem sig, cnt, sink;
    size_t nsig, ncnt;      /* entries of sig and cnt */
    struct ibv_mr *sig_mr, *cnt_mr, *sink_mr;
    struct dmem qps, keys, dctx;
    struct dmem gets;       /* layout 200, backend 2: last_issued_get, then last_visible_get, [nctx * nranks] each */
    ncclNetDeviceHandle_v11_t handle;
    uint64_t last_check_ns;
    int error;
    int released;           /* set_release ran (atomic): at the first error seen, or at destroy */
};

/* Every live set of the process: a context pointer is checked against it
 * before anything reads through it (a destroyed set is freed). */
static pthread_mutex_t sets_mu = PTHREAD_MUTEX_INITIALIZER;
static struct gin_gdaki_set *sets;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------ memory */

static int dmem_alloc(struct gin_gdaki_res *r, size_t len, struct dmem *m, char *err, size_t el)
{
    memset(m, 0, sizeof(*m));
    len = (len + 4095) & ~(size_t)4095;
    if (r->host_only) {
        m->host = aligned_alloc(4096, len);
        if (!m->host) {
            snprintf(err, el, "out of memory (%zu bytes)", len);
            return -1;
        }
        memset(m->host, 0, len);
        m->ptr = m->host;
        return 0;
    }
    if (gdaki_cuda_bind(r->cuda_dev, err, el) < 0 || gdaki_cuda_alloc(len, &m->raw, err, el) < 0)
        return -1;
    m->ptr = (void *)(uintptr_t)m->raw;
    void *zero = calloc(1, len);
    if (!zero) {
        snprintf(err, el, "out of memory (%zu bytes)", len);
        return -1;
    }
    int rc = gdaki_cuda_htod(m->raw, zero, len, err, el);
    free(zero);
    return rc;
}

static int dmem_put(struct gin_gdaki_res *r, const struct dmem *m, size_t off, const void *src, size_t len,
                    char *err, size_t el)
{
    if (r->host_only) {
        memcpy((uint8_t *)m->host + off, src, len);
        return 0;
    }
    return gdaki_cuda_htod(m->raw + off, src, len, err, el);
}

static void dmem_free(struct dmem *m)
{
    free(m->host);
    if (m->raw)
        gdaki_cuda_free(m->raw);
    memset(m, 0, sizeof(*m));
}

/* ------------------------------------------------------------ base */

static int current_cuda_dev(void)
{
    const struct cudawrap *cu = cudawrap_peek();
    cudawrap_ctx ctx = NULL;
    cudawrap_device d = 0;
    if (cu && cu->ctx_get_current(&ctx) == 0 && ctx && cu->ctx_get_device(&d) == 0)
        return d;
    return 0;
}

/* Frees what base_open made (the sets and windows on it are gone already). */
static void base_free(struct gin_gdaki_res *r)
{
    if (r->pd)
        r->v->dealloc_pd(r->pd);
    if (r->ctx)
        r->v->close_device(r->ctx);
    free(r);
}

/* The DEVX context and PD of the collComm's device, and the ports of that
 * device the collComm has (both of a merged dual-port NIC). */
static ncclResult_t base_open(struct gin_coll *c)
{
    if (c->gdaki)
        return ncclSuccess;
    struct gin_gdaki_res *r = calloc(1, sizeof(*r));
    if (!r)
        return ncclSystemError;
    r->coll = c;
    char err[256] = "out of memory";
    const struct rn_config *cfg = rn_config();
    char cuda_why[160];
    r->host_only = !cudawrap_get(cuda_why, sizeof(cuda_why));
    r->queue_gpu = !r->host_only && cfg->gdaki_queue_mem == 1;
    if (!r->host_only) {
        r->cuda_dev = current_cuda_dev();
        if (gdaki_cuda_open(r->cuda_dev, err, sizeof(err)) < 0)
            goto fail;
    }
    if (ibvwrap_global_load_mlx5(err, sizeof(err)) < 0)
        goto fail;
    r->v = ibvwrap_global();
    const struct qp_port *pt = &c->ports[0];
    r->is_mlx5 = r->v->mlx5dv_is_supported && r->v->mlx5dv_is_supported(pt->ctx->device);
    r->ctx = gdaki_devx_open(r->v, pt->ctx->device, err, sizeof(err));
    if (!r->ctx)
        goto fail;
    r->pd = r->v->alloc_pd(r->ctx);
    if (!r->pd) {
        snprintf(err, sizeof(err), "ibv_alloc_pd on the DEVX context failed");
        goto fail;
    }
    for (int k = 0; k < c->nports && k < HS_MAX_PORTS; k++) {
        const struct qp_port *q = &c->ports[k];
        if (q->ctx->device != pt->ctx->device)
            continue;   /* a port of another device: not on this DEVX context */
        int i = r->nports;
        r->pt[i].port = q->port_num;
        r->pt[i].gid = q->gid;
        r->pt[i].gid_index = q->gid_index;
        if (ibvwrap_query_port(r->v, r->ctx, q->port_num, &r->pt[i].pattr) != 0) {
            snprintf(err, sizeof(err), "ibv_query_port(%d) on the DEVX context failed", q->port_num);
            goto fail;
        }
        r->nports++;
    }
    struct ibv_device_attr da;
    memset(&da, 0, sizeof(da));
    r->atomics = r->v->query_device(r->ctx, &da) == 0 && da.atomic_cap != IBV_ATOMIC_NONE;
    if (!r->v->reg_mr_iova2) {
        snprintf(err, sizeof(err), "%.160s lacks ibv_reg_mr_iova2 (zero-based registrations, rdma-core >= 28)",
                 r->v->path);
        goto fail;
    }
    c->gdaki = r;
    return ncclSuccess;
fail:
    WARN("NET/railnet/GIN: device %s, rank %d: GDAKI type: %s", c->dev_name, c->rank, err);
    base_free(r);
    return ncclSystemError;
}

/* ------------------------------------------------------------ exchanges */

/* Sends mine to every peer and reads every peer's into all[] (all[rank] =
 * mine): a WIN message carrying (addr, size, rkey). Collective. A rank
 * whose part failed sends status 1; then every rank fails. A stream that
 * fails or is garbled fails the collComm and tells the peers
 * (gin_fail_exchange), as in gin_mr.c's exchange: the WINs left unread
 * would answer a later exchange. */
static ncclResult_t xchg_win(struct gin_coll *c, uint32_t step, int ok, const struct gw_win *mine,
                             struct gw_win *all)
{
    struct gw_win w = *mine;
    w.seq = GIN_GDAKI_XSEQ | step;
    w.status = ok ? 0 : 1;
    all[c->rank] = w;
    uint8_t buf[GW_WIN_SIZE];
    size_t len = gw_win_encode(&w, buf, sizeof(buf));
    uint64_t deadline = now_ns() + (uint64_t)rn_config()->handshake_timeout * 1000000000ull;
    char err[HS_ERR_LEN];
    ncclResult_t res = ok ? ncclSuccess : ncclSystemError;
    for (int p = 0; p < c->nranks; p++)
        if (p != c->rank && gw_send(c->peers[p].fd, buf, len, deadline, err)) {
            WARN("NET/railnet/GIN: rank %d: GDAKI exchange %u with rank %d: %s; failing the collComm", c->rank, step,
                 p, err);
            gin_fail_exchange(c, ncclRemoteError);
            return ncclRemoteError; /* the others' reads would meet this rank's own shutdown */
        }
    for (int p = 0; p < c->nranks; p++) {
        if (p == c->rank)
            continue;
        struct gw_rx rx;
        if (gw_recv(c->peers[p].fd, &rx, deadline, err) || gw_win_parse(rx.buf, rx.off, &all[p], err)) {
            WARN("NET/railnet/GIN: rank %d: GDAKI exchange %u, from rank %d: %s; failing the collComm", c->rank,
                 step, p, err);
            gin_fail_exchange(c, ncclRemoteError);
            return ncclRemoteError;
        }
        if (all[p].seq != w.seq) {
            WARN("NET/railnet/GIN: rank %d: GDAKI exchange %u: rank %d is at step 0x%x (ranks out of step)", c->rank,
                 step, p, all[p].seq);
            res = ncclInvalidUsage;
        } else if (all[p].status && res == ncclSuccess) {
            WARN("NET/railnet/GIN: rank %d: GDAKI exchange %u: rank %d failed its part (see its log)", c->rank, step,
                 p);
            res = ncclRemoteError;
        }
    }
    return res;
}

/* A rank that leaves the exchanges at step `step` (its socket to a peer
 * failed) still tells every peer it failed that step, so that they fail at
 * once rather than at their deadline. Best effort. */
static void xchg_leave(struct gin_coll *c, uint32_t step)
{
    struct gw_win w = { .seq = GIN_GDAKI_XSEQ | step, .status = 1 };
    uint8_t buf[GW_WIN_SIZE];
    size_t len = gw_win_encode(&w, buf, sizeof(buf));
    uint64_t deadline = now_ns() + 1000000000ull;
    char err[HS_ERR_LEN];
    for (int p = 0; p < c->nranks; p++)
        if (p != c->rank)
            (void)gw_send(c->peers[p].fd, buf, len, deadline, err);
}

/* Every rank's QP towards every other: GW_GDAKI messages. A message that
 * arrives whole but is refused (garbled, another job's, another link
 * layer) clears *ok and the others are still read, so that the next
 * exchange stays in step and tells every rank at once; an I/O failure (a
 * peer gone, the deadline passed) ends the exchange: ncclRemoteError, and
 * the caller fails the collComm (messages stay unread or half sent) once
 * xchg_leave has told the peers why. */
static ncclResult_t xchg_qps(struct gin_coll *c, struct gdaki_pair **qps, struct gdaki_qp_info *remote, int *ok)
{
    uint64_t deadline = now_ns() + (uint64_t)rn_config()->handshake_timeout * 1000000000ull;
    char err[HS_ERR_LEN];
    for (int p = 0; p < c->nranks; p++) {
        if (p == c->rank)
            continue;
        struct gw_peer m;
        memset(&m, 0, sizeof(m));
        m.nranks = (uint32_t)c->nranks;
        m.src_rank = (uint32_t)c->rank;
        m.dst_rank = (uint32_t)p;
        const struct gdaki_pair *mine = qps[p];
        m.link_layer = mine->port_attr.link_layer;
        m.nports = 1;
        m.nqps = 1;
        struct hs_qp_info *q = &m.qp[0];
        q->qpn = gdaki_pair_send_qpn(qps[p]);
        q->psn = mine->psn;
        q->lid = mine->port_attr.lid;
        q->port_num = (uint8_t)mine->port;
        q->mtu = (uint8_t)mine->port_attr.active_mtu;
        q->gid_index = (uint8_t)mine->gid_index;
        q->is_global = mine->port_attr.link_layer == IBV_LINK_LAYER_ETHERNET;
        memcpy(q->gid, mine->gid.raw, 16);
        uint8_t buf[GW_MSG_MAX];
        size_t len = gw_peer_encode(GW_GDAKI, &m, buf, sizeof(buf));
        if (gw_send(c->peers[p].fd, buf, len, deadline, err)) {
            WARN("NET/railnet/GIN: rank %d: sending the GDAKI QP to rank %d: %s; failing the collComm", c->rank, p,
                 err);
            return ncclRemoteError;
        }
    }
    for (int p = 0; p < c->nranks; p++) {
        if (p == c->rank)
            continue;
        struct gw_rx rx;
        struct gw_peer m;
        if (gw_recv(c->peers[p].fd, &rx, deadline, err)) {
            WARN("NET/railnet/GIN: rank %d: the GDAKI QP of rank %d: %s; failing the collComm", c->rank, p, err);
            return ncclRemoteError;
        }
        if (gw_peer_parse(rx.buf, rx.off, GW_GDAKI, &m, err)) {
            WARN("NET/railnet/GIN: rank %d: the GDAKI QP message of rank %d refused: %s", c->rank, p, err);
            *ok = 0;
            continue;
        }
        if (m.src_rank != (uint32_t)p || m.dst_rank != (uint32_t)c->rank || m.nranks != (uint32_t)c->nranks) {
            WARN("NET/railnet/GIN: rank %d: a GDAKI QP message on rank %d's socket claims %u -> %u of %u ranks",
                 c->rank, p, m.src_rank, m.dst_rank, m.nranks);
            *ok = 0;
            continue;
        }
        if (m.link_layer != qps[p]->port_attr.link_layer) {
            WARN("NET/railnet/GIN: rank %d: the GDAKI QP of rank %d is on link layer %u, this rank's %s port %d on "
                 "%u: cannot be connected",
                 c->rank, p, m.link_layer, c->dev_name, qps[p]->port, qps[p]->port_attr.link_layer);
            *ok = 0;
            continue;
        }
        struct gdaki_qp_info *g = &remote[p];
        memset(g, 0, sizeof(*g));
        g->magic = GDAKI_QP_INFO_MAGIC;
        g->qpn = m.qp[0].qpn;
        g->psn = m.qp[0].psn;
        g->lid = m.qp[0].lid;
        g->port = m.qp[0].port_num;
        g->mtu = m.qp[0].mtu;
        g->is_global = m.qp[0].is_global;
        memcpy(g->gid, m.qp[0].gid, 16);
    }
    return ncclSuccess;
}

/* ------------------------------------------------------------ QPs */

/* The port (index into r->pt) of the QP of context x between this rank and
 * peer: (rank + peer + x + the collComm's ordinal) mod the ports, the same
 * on both ends (a QP and the one it connects to sit on the same port
 * index: one rail of a dual-port NIC), and spread so that a rank's peers,
 * its own loop and the contexts share both ports instead of all using the
 * first. NCCL 2.28 makes a collComm per GIN context (the ordinal), 2.29
 * and 2.30 several contexts on one (x). */
static int port_slot(const struct gin_coll *c, const struct gin_gdaki_res *r, int peer, int x)
{
    return (int)(((unsigned)c->rank + (unsigned)peer + (unsigned)x + c->ordinal) % (unsigned)r->nports);
}

static int qp_new(struct gin_gdaki_res *r, int slot, uint32_t depth, struct gdaki_pair **out, char *err, size_t el)
{
    struct gdaki_pair *pr = gdaki_pair_alloc(err, el);
    if (!pr)
        return -1;
    *out = pr;
    pr->v = r->v;
    pr->ctx = r->ctx;
    pr->pd = r->pd;
    pr->borrowed = 1;
    snprintf(pr->dev_name, sizeof(pr->dev_name), "%s", r->coll->dev_name);
    pr->port = r->pt[slot].port;
    pr->port_attr = r->pt[slot].pattr;
    pr->gid = r->pt[slot].gid;
    pr->gid_index = r->pt[slot].gid_index;
    pr->atomics = r->atomics;
    pr->is_mlx5 = r->is_mlx5;
    pr->cuda_dev = r->cuda_dev;
    pr->queue_mem = r->queue_gpu ? GDAKI_QUEUE_MEM_GPU : GDAKI_QUEUE_MEM_HOST_DEVX;
    pr->psn = qp_random_psn();
    return gdaki_pair_build_send(pr, depth, err, el);
}

static void self_info(struct gdaki_pair *pr, struct gdaki_qp_info *g)
{
    memset(g, 0, sizeof(*g));
    g->magic = GDAKI_QP_INFO_MAGIC;
    g->qpn = gdaki_pair_send_qpn(pr);
    g->psn = pr->psn;
    g->lid = pr->port_attr.lid;
    g->port = (uint8_t)pr->port;
    g->mtu = (uint8_t)pr->port_attr.active_mtu;
    g->is_global = pr->port_attr.link_layer == IBV_LINK_LAYER_ETHERNET;
    memcpy(g->gid, pr->gid.raw, 16);
}

/* The queue view of a finished pair: device addresses, or host ones. */
static void queue_of(const struct gin_gdaki_res *r, const struct gdaki_pair *pr, struct gin_gdaki_queue *q)
{
    const struct gdaki_qp_dev *d = r->host_only ? pr->desc : &pr->dview;
    memset(q, 0, sizeof(*q));
    q->sq = d->sq;
    q->sq_log = d->sq_log;
    q->sq_dbrec = d->dbrec;
    q->db = d->db;
    q->cq = d->cq;
    q->cq_log = d->cq_log;
    q->cq_dbrec = d->cq_dbrec;
    q->cqn = pr->dvcq.cqn;
    q->qpn = d->qpn;
    q->gpu = r->queue_gpu;
}

/* A zero-based registration of [addr, addr+len) on the DEVX PD. */
static struct ibv_mr *reg0(struct gin_gdaki_res *r, void *addr, size_t len, char *err, size_t el)
{
    struct ibv_mr *mr = r->v->reg_mr_iova2(r->pd, addr, len, 0, GIN_GDAKI_ACCESS);
    if (!mr)
        snprintf(err, el, "zero-based ibv_reg_mr_iova2 of %zu bytes at %p on the DEVX PD failed: %s", len, addr,
                 strerror(errno));
    return mr;
}

/* Frees a set entirely (any prefix of what createContext made). */
static void set_free(struct gin_gdaki_set *s)
{
    struct gin_gdaki_res *r = s->base;
    int nq = s->nctx * r->coll->nranks;
    for (int i = 0; i < nq && s->qp && s->comp; i++) {
        gdaki_pair_close(s->qp[i]);
        gdaki_pair_close(s->comp[i]);
    }
    free(s->qp);
    free(s->comp);
    if (s->sig_mr)
        r->v->dereg_mr(s->sig_mr);
    if (s->cnt_mr)
        r->v->dereg_mr(s->cnt_mr);
    if (s->sink_mr)
        r->v->dereg_mr(s->sink_mr);
    dmem_free(&s->sig);
    dmem_free(&s->cnt);
    dmem_free(&s->sink);
    dmem_free(&s->qps);
    dmem_free(&s->keys);
    dmem_free(&s->dctx);
    dmem_free(&s->gets);
    s->magic = 0;
    free(s);
}

/* The descriptors, tables and context array in device memory, from the
 * finished QPs and every rank's table keys (all[p].addr: the signal
 * table's rkey, .size: the counter table's). Every layout goes through
 * the same steps; gin_gdaki_layout.c says the sizes and writes the images:
 * main QPs of every context first ([nctx][nranks]), then companions; the
 * signal rkeys, then the counter rkeys; one context per contextId. */
static ncclResult_t set_publish(struct gin_gdaki_set *s, const struct gw_win *all, int nsignals, int ncounters,
                                char *err, size_t el)
{
    struct gin_gdaki_res *r = s->base;
    int n = r->coll->nranks, nq = s->nctx * n;
    uint32_t *keys = calloc((size_t)2 * n, sizeof(*keys));
    uint8_t *img = calloc((size_t)2 * nq, s->qp_size);
    uint8_t *cx = calloc((size_t)s->nctx, s->ctx_size);
    ncclResult_t res = ncclSuccess;
    snprintf(err, el, "out of memory");
    if (!keys || !img || !cx)
        res = ncclSystemError;
    for (int p = 0; p < n && res == ncclSuccess; p++) {
        keys[p] = htobe32((uint32_t)all[p].addr);
        keys[n + p] = htobe32((uint32_t)all[p].size);
    }
    for (int i = 0; i < nq && res == ncclSuccess; i++) {
        struct gin_gdaki_queue q;
        queue_of(r, s->qp[i], &q);
        gin_gdaki_qp_write(s->layout, &q, img + (size_t)i * s->qp_size);
        queue_of(r, s->comp[i], &q);
        gin_gdaki_qp_write(s->layout, &q, img + (size_t)(nq + i) * s->qp_size);
    }
    int gets = gin_gdaki_ctx_gets(s->layout, s->backend);
    if (res == ncclSuccess &&
        (dmem_alloc(r, s->qp_size * 2 * nq, &s->qps, err, el) < 0 ||
         dmem_alloc(r, sizeof(*keys) * 2 * n, &s->keys, err, el) < 0 ||
         dmem_alloc(r, s->ctx_size * s->nctx, &s->dctx, err, el) < 0 ||
         (gets && dmem_alloc(r, sizeof(uint64_t) * 2 * nq, &s->gets, err, el) < 0) ||
         dmem_put(r, &s->qps, 0, img, s->qp_size * 2 * nq, err, el) < 0 ||
         dmem_put(r, &s->keys, 0, keys, sizeof(*keys) * 2 * n, err, el) < 0))
        res = ncclSystemError;
    for (int x = 0; x < s->nctx && res == ncclSuccess; x++) {
        uint8_t *dq = s->qps.ptr;
        uint32_t *dk = s->keys.ptr;
        uint64_t *dg = s->gets.ptr;
        struct gin_gdaki_ctx_desc d = {
            .gdqp = dq + (size_t)x * n * s->qp_size,
            .companion = dq + (size_t)(nq + x * n) * s->qp_size,
            .counters = { .base = s->cnt.ptr, .rkeys = dk + n, .lkey = s->cnt_mr->lkey,
                          .offset = (uint32_t)(x * ncounters) },
            .signals = { .base = s->sig.ptr, .rkeys = dk, .lkey = s->sig_mr->lkey,
                         .offset = (uint32_t)(x * nsignals) },
            .sink_lkey = s->sink_mr->lkey,
            .last_issued_get = gets ? dg + (size_t)x * n : NULL,
            .last_visible_get = gets ? dg + (size_t)(nq + x * n) : NULL,
        };
        gin_gdaki_ctx_write(s->layout, s->backend, &d, cx + (size_t)x * s->ctx_size);
    }
    if (res == ncclSuccess && dmem_put(r, &s->dctx, 0, cx, s->ctx_size * s->nctx, err, el) < 0)
        res = ncclSystemError;
    free(keys);
    free(img);
    free(cx);
    return res;
}

/* The layout and backend checks of createContext, before any exchange:
 * the same on every rank (one process decides the layout; NCCL passes the
 * same config everywhere), so a refusal here is every rank's. */
static ncclResult_t ctx_shape(struct gin_coll *c, int nsignals, int ncounters, int ncontexts, int *backend)
{
    int layout = c->gdaki_type;
    if (nsignals < 0 || ncounters < 0 || ncontexts < 1 || (int64_t)nsignals * ncontexts > (1 << 30) ||
        (int64_t)ncounters * ncontexts > (1 << 30) || (int64_t)ncontexts * c->nranks > (1 << 20)) {
        WARN("NET/railnet/GIN: createContext: %d signals, %d counters, %d contexts (%d ranks) out of range", nsignals,
             ncounters, ncontexts, c->nranks);
        return ncclInvalidArgument;
    }
    if (*backend < 0)
        *backend = RN_GIN_GDAKI_BACKEND_V2;    /* a face that does not say: the newest */
    if (!gin_gdaki_qp_size(layout) || !gin_gdaki_ctx_size(layout, *backend)) {
        WARN("NET/railnet/GIN: rank %d: createContext: GDAKI layout %d with backend version %d: railnet writes "
             "layout %d, and layout %d with backends %d (kernels of NCCL 2.30.3/2.30.4) and %d (NCCL 2.30.5 and "
             "later); a kernel built with an older NCCL cannot use NCCL 2.30's GDAKI type",
             c->rank, layout, *backend, RN_GIN_GDAKI_V100, RN_GIN_GDAKI_V200, RN_GIN_GDAKI_BACKEND_V1,
             RN_GIN_GDAKI_BACKEND_V2);
        return ncclInvalidArgument;
    }
    return ncclSuccess;
}

/* Live sets of collComm c (sets_mu held). */
static int sets_of_locked(const struct gin_coll *c)
{
    int k = 0;
    for (struct gin_gdaki_set *s = sets; s; s = s->next)
        k += s->base->coll == c;
    return k;
}

/* The send ring's slots for NCCL's queue depth (gin_gdaki.h). */
static uint32_t sq_depth_of(const struct gin_coll *c, int depth)
{
    if (depth <= 0)
        return GIN_GDAKI_SQ_DEPTH;
    uint32_t d = GIN_GDAKI_SQ_MIN;
    while (d < (uint32_t)depth && d < GIN_GDAKI_SQ_MAX)
        d <<= 1;
    if (d != (uint32_t)depth)
        INFO(NCCL_NET, "NET/railnet/GIN: rank %d: queue depth %d asked for: GDAKI send rings of %u slots (a power "
             "of two within %u..%u)", c->rank, depth, d, GIN_GDAKI_SQ_MIN, GIN_GDAKI_SQ_MAX);
    return d;
}

ncclResult_t gin_gdaki_create_context(struct gin_coll *c, int nsignals, int ncounters, int ncontexts, int backend,
                                      int depth, void **gin_ctx, ncclNetDeviceHandle_v11_t **dev_handle)
{
    ncclResult_t res = ctx_shape(c, nsignals, ncounters, ncontexts, &backend);
    if (res != ncclSuccess)
        return res;
    ncclResult_t failed = gin_failed(c, "createContext");
    if (failed)
        return failed;
    res = base_open(c);
    /* Every rank takes part in every exchange below, failed or not. Each
     * createContext has exchanges of its own: NCCL makes them in the same
     * order on every rank (each is collective over the collComm). */
    struct gin_gdaki_res *r = c->gdaki;
    int n = c->nranks, nq = ncontexts * n;
    char err[256] = "";
    int ok = res == ncclSuccess;
    struct gin_gdaki_set *s = ok ? calloc(1, sizeof(*s)) : NULL;
    if (ok && s) {
        s->base = r;
        s->layout = c->gdaki_type;
        s->backend = backend;
        s->qp_size = gin_gdaki_qp_size(s->layout);
        s->ctx_size = gin_gdaki_ctx_size(s->layout, backend);
        s->nctx = ncontexts;
        s->qp = calloc((size_t)nq, sizeof(*s->qp));
        s->comp = calloc((size_t)nq, sizeof(*s->comp));
    }
    if (ok && (!s || !s->qp || !s->comp)) {
        snprintf(err, sizeof(err), "out of memory for %d QPs", 2 * nq);
        ok = 0;
    }
    uint32_t sq = sq_depth_of(c, depth);
    /* a companion loops back on its main QP's port */
    for (int i = 0; ok && i < nq; i++) {
        int slot = port_slot(c, r, i % n, i / n);
        if (qp_new(r, slot, sq, &s->qp[i], err, sizeof(err)) < 0 ||
            qp_new(r, slot, sq, &s->comp[i], err, sizeof(err)) < 0)
            ok = 0;
    }
    /* one table of each kind for all contexts, registered once: context x
     * owns entries [x * count, (x + 1) * count) (its table offset) */
    size_t nsig_all = (size_t)nsignals * ncontexts, ncnt_all = (size_t)ncounters * ncontexts;
    size_t sig_len = (nsig_all ? nsig_all : 1) * 8, cnt_len = (ncnt_all ? ncnt_all : 1) * 8;
    if (s) {
        s->nsig = sig_len / 8;
        s->ncnt = cnt_len / 8;
    }
    if (ok && (dmem_alloc(r, sig_len, &s->sig, err, sizeof(err)) < 0 ||
               dmem_alloc(r, cnt_len, &s->cnt, err, sizeof(err)) < 0 ||
               dmem_alloc(r, GIN_GDAKI_SINK_BYTES, &s->sink, err, sizeof(err)) < 0))
        ok = 0;
    if (ok && (!(s->sig_mr = reg0(r, s->sig.ptr, sig_len, err, sizeof(err))) ||
               !(s->cnt_mr = reg0(r, s->cnt.ptr, cnt_len, err, sizeof(err))) ||
               !(s->sink_mr = reg0(r, s->sink.ptr, GIN_GDAKI_SINK_BYTES, err, sizeof(err)))))
        ok = 0;
    if (!ok && err[0])
        WARN("NET/railnet/GIN: device %s, rank %d: GDAKI createContext: %s", c->dev_name, c->rank, err);

    /* QP numbers (one round per context, the same order on every rank),
     * then the tables' rkeys (signals in addr, counters in size). */
    struct gdaki_qp_info *remote = calloc((size_t)nq, sizeof(*remote));
    struct gw_win *all = calloc((size_t)n, sizeof(*all));
    if (!remote || !all) {
        WARN("NET/railnet/GIN: rank %d: GDAKI createContext: out of memory for %d ranks", c->rank, n);
        /* the peers' messages of this exchange stay unread: no later one
         * on this collComm could trust its stream */
        gin_fail_exchange(c, ncclSystemError);
        free(remote);
        free(all);
        if (s)
            set_free(s);
        return ncclSystemError;
    }
    struct gw_win mine = { 0 };
    ncclResult_t xres = xchg_win(c, 0, ok, &mine, all);
    for (int x = 0; x < ncontexts && xres == ncclSuccess; x++)
        if ((xres = xchg_qps(c, s->qp + (size_t)x * n, remote + (size_t)x * n, &ok)) != ncclSuccess) {
            /* the peers that can still be written to read why before the EOF */
            xchg_leave(c, 1);
            gin_fail_exchange(c, ncclRemoteError);
        }
    /* NCCL's device code reads the QP images set_publish makes from each
     * pair's GPU view; railnet's own device descriptor would be a CUDA
     * allocation per QP that nothing reads */
    int gpu_view = r->host_only ? GDAKI_FINISH_HOST : GDAKI_FINISH_GPU_VIEW;
    if (xres == ncclSuccess) {
        for (int x = 0; x < ncontexts && ok; x++) {
            struct gdaki_pair **qps = s->qp + (size_t)x * n, **comps = s->comp + (size_t)x * n;
            self_info(qps[c->rank], &remote[(size_t)x * n + c->rank]);
            for (int p = 0; p < n && ok; p++) {
                struct gdaki_qp_info me;
                self_info(comps[p], &me);
                if (gdaki_devx_connect(qps[p], &remote[(size_t)x * n + p], err, sizeof(err)) < 0 ||
                    gdaki_devx_connect(comps[p], &me, err, sizeof(err)) < 0 ||
                    gdaki_pair_finish(qps[p], gpu_view, r->cuda_dev, err, sizeof(err)) < 0 ||
                    gdaki_pair_finish(comps[p], gpu_view, r->cuda_dev, err, sizeof(err)) < 0) {
                    WARN("NET/railnet/GIN: device %s, rank %d: GDAKI QP of context %d towards rank %d: %s",
                         c->dev_name, c->rank, x, p, err);
                    ok = 0;
                }
            }
        }
        if (ok) {
            mine.addr = s->sig_mr->rkey;
            mine.size = s->cnt_mr->rkey;
        }
        xres = xchg_win(c, 1, ok, &mine, all);
    }
    free(remote);
    for (int p = 0; p < n && xres == ncclSuccess; p++)
        if (all[p].addr > UINT32_MAX || all[p].size > UINT32_MAX || all[p].rkey) {
            WARN("NET/railnet/GIN: rank %d: the GDAKI table keys of rank %d (0x%llx, 0x%llx, 0x%x) are not 32-bit "
                 "rkeys",
                 c->rank, p, (unsigned long long)all[p].addr, (unsigned long long)all[p].size, all[p].rkey);
            xres = ncclRemoteError;
        }
    if (xres == ncclSuccess && ok && (xres = set_publish(s, all, nsignals, ncounters, err, sizeof(err))))
        WARN("NET/railnet/GIN: device %s, rank %d: GDAKI context in %s memory: %s", c->dev_name, c->rank,
             r->host_only ? "host" : "GPU", err);
    free(all);
    if (xres != ncclSuccess || !ok) {
        if (s)
            set_free(s);
        return xres != ncclSuccess ? xres : ncclSystemError;
    }
    s->handle.netDeviceType = (ncclNetDeviceType)NCCL_NET_DEVICE_GIN_GDAKI;
    s->handle.netDeviceVersion = s->layout;
    s->handle.handle = s->dctx.ptr;     /* NCCL 2.30 finds a device communicator's contexts by it */
    s->handle.size = s->ctx_size * (size_t)s->nctx;
    s->handle.needsProxyProgress = 0;
    s->magic = GIN_GDAKI_MAGIC;
    pthread_mutex_lock(&sets_mu);
    s->next = sets;
    sets = s;
    int live = sets_of_locked(c);
    pthread_mutex_unlock(&sets_mu);
    INFO(NCCL_NET | NCCL_INIT,
         "NET/railnet/GIN: rank %d of %d on %s: GDAKI type, layout %d%s, %d context(s) of %d DEVX QP(s) + companions "
         "of %d slots over %d port(s) (rings in %s memory), %d signals, %d counters per context, contexts in %s "
         "memory; %d createContext set(s) live on this collComm",
         c->rank, n, c->dev_name, s->layout,
         s->layout == RN_GIN_GDAKI_V200 ? (gin_gdaki_ctx_gets(s->layout, backend) ? " (backend 2: gets tracked)"
                                                                                    : " (backend 1)")
                                        : "",
         ncontexts, n, (int)sq, r->nports, r->queue_gpu ? "GPU" : "host", nsignals, ncounters,
         r->host_only ? "host" : "GPU", live);
    *gin_ctx = s;
    *dev_handle = &s->handle;
    return ncclSuccess;
}

int gin_gdaki_is_ctx(void *gin_ctx)
{
    if (!gin_ctx)
        return 0;
    pthread_mutex_lock(&sets_mu);
    struct gin_gdaki_set *s = sets;
    while (s && s != gin_ctx)
        s = s->next;
    pthread_mutex_unlock(&sets_mu);
    return s != NULL;
}

/* Takes a live set off the list: the caller frees or keeps it. NULL when
 * gin_ctx is none (never created, or destroyed already). */
static struct gin_gdaki_set *set_take(void *gin_ctx)
{
    pthread_mutex_lock(&sets_mu);
    struct gin_gdaki_set **pp = &sets;
    while (*pp && *pp != gin_ctx)
        pp = &(*pp)->next;
    struct gin_gdaki_set *s = *pp;
    if (s)
        *pp = s->next;
    pthread_mutex_unlock(&sets_mu);
    return s;
}

/* Whether the collComm failed, or another collComm of its communicator
 * (NCCL stops asking at the first context with an error, then destroys
 * them all). */
static int base_failed(const struct gin_gdaki_res *r)
{
    if (__atomic_load_n(&r->coll->error, __ATOMIC_ACQUIRE)) {
        gin_group_fail(r->coll->comm_id);
        return 1;
    }
    return gin_group_failed(r->coll->comm_id);
}

/* Whether a set failed: an error its queryLastError saw, or its
 * collComm's or communicator's (base_failed). A failed set's GPU-visible
 * memory stays as it is until the process exits: NCCL 2.28's device code
 * has no abort, so the application's kernel may still spin on these
 * queues, signals and counters while ncclCommAbort tears the communicator
 * down; cuMemHostUnregister of the rings would wait for that kernel
 * (nccl-tests' survivors of a killed peer hung there, in destroyContext),
 * and unmapping the tables under it faults it. NCCL 2.29's device code
 * aborts, but the plugin cannot tell the kernel ended; the cost is one
 * set's rings and tables per failed device communicator, for a process
 * that is about to exit. */
static int set_failed(const struct gin_gdaki_set *s)
{
    if (__atomic_load_n(&s->error, __ATOMIC_ACQUIRE)) {
        gin_group_fail(s->base->coll->comm_id);
        return 1;
    }
    return base_failed(s->base);
}

/* Something of the collComm stays in place: said once per collComm; its
 * DEVX context and PD then stay too (the kept QPs and registrations live
 * on them). */
static void base_keep(struct gin_gdaki_res *r, const char *what)
{
    if (!__atomic_exchange_n(&r->kept, 1, __ATOMIC_ACQ_REL))
        INFO(NCCL_NET | NCCL_INIT,
             "NET/railnet/GIN: device %s, rank %d: %s of a failed GDAKI context leaves its queues, signals and "
             "counters in place until the process exits (the application's kernel may still use them)",
             r->coll->dev_name, r->coll->rank, what);
}

/* A failed set's kernels: its QPs to the error state (nothing a released
 * kernel posts leaves the NIC), then gin_gdaki_release; the set stays
 * allocated until the process exits. */
static void set_release(struct gin_gdaki_set *s, const char *what)
{
    if (__atomic_exchange_n(&s->released, 1, __ATOMIC_ACQ_REL))
        return;
    struct gin_gdaki_res *r = s->base;
    base_keep(r, what);
    int nq = s->nctx * r->coll->nranks, stuck = 0;
    for (int i = 0; i < nq; i++) {
        if (s->qp[i] && gdaki_pair_send_qp_state(s->qp[i]) != IBV_QPS_ERR && gdaki_pair_send_qp_fail(s->qp[i]) < 0)
            stuck++;
        if (s->comp[i] && gdaki_pair_send_qp_state(s->comp[i]) != IBV_QPS_ERR &&
            gdaki_pair_send_qp_fail(s->comp[i]) < 0)
            stuck++;
    }
    if (stuck)
        WARN("NET/railnet/GIN: device %s, rank %d: %d GDAKI QP(s) of a failed context refused the error state",
             r->coll->dev_name, r->coll->rank, stuck);
    char who[96];
    snprintf(who, sizeof(who), "device %s, rank %d", r->coll->dev_name, r->coll->rank);
    struct gin_gdaki_release_req q = {
        .cuda_dev = r->host_only ? -1 : r->cuda_dev,
        .qps = (uint64_t)(uintptr_t)s->qps.ptr,
        .nqps = 2 * nq,
        .qp_stride = s->qp_size,
        .sig = (uint64_t)(uintptr_t)s->sig.ptr,
        .cnt = (uint64_t)(uintptr_t)s->cnt.ptr,
        .nsig = s->nsig,
        .ncnt = s->ncnt,
        .who = who,
    };
    if (q.qps)
        gin_gdaki_release(&q);
}

/* The release of every live set of a failed communicator, as soon as one
 * of its contexts reports the error: NCCL 2.29 waits for the application's
 * stream in ncclDevCommDestroy, before any destroyContext (nccl-tests'
 * survivors of a killed peer, stacks and kernels taken on an H200), and
 * NCCL stops asking at the first context with an error. */
static void sets_release_failed(void)
{
    pthread_mutex_lock(&sets_mu);
    for (struct gin_gdaki_set *s = sets; s; s = s->next)
        if (!__atomic_load_n(&s->released, __ATOMIC_ACQUIRE) && set_failed(s))
            set_release(s, "queryLastError");
    pthread_mutex_unlock(&sets_mu);
}

ncclResult_t gin_gdaki_destroy_context(void *gin_ctx)
{
    struct gin_gdaki_set *s = set_take(gin_ctx);
    if (!s) {
        WARN("NET/railnet/GIN: destroyContext: %p is not a live GDAKI context", gin_ctx);
        return ncclInvalidArgument;
    }
    if (set_failed(s) || __atomic_load_n(&s->released, __ATOMIC_ACQUIRE)) {
        set_release(s, "destroyContext");
        s->magic = 0;       /* its memory stays until the process exits (above) */
    } else {
        set_free(s);
    }
    return ncclSuccess;
}

ncclResult_t gin_gdaki_query_last_error(void *gin_ctx, bool *has_error)
{
    struct gin_gdaki_set *s = gin_ctx;
    if (!has_error || !gin_gdaki_is_ctx(gin_ctx)) {
        WARN("NET/railnet/GIN: queryLastError: %p is not a live GDAKI context", gin_ctx);
        return ncclInvalidArgument;
    }
    struct gin_coll *c = s->base->coll;
    /* ncclCommGetAsyncError may be called from several threads at once (a
     * watchdog and the application): the flag and the time of the last look
     * are atomics, and one caller per interval looks at the QPs. */
    if (__atomic_load_n(&c->error, __ATOMIC_ACQUIRE))
        __atomic_store_n(&s->error, 1, __ATOMIC_RELEASE);
    /* The QP states are firmware commands on a ConnectX: at most every 50 ms. */
    uint64_t now = now_ns(), last = __atomic_load_n(&s->last_check_ns, __ATOMIC_ACQUIRE);
    if (!__atomic_load_n(&s->error, __ATOMIC_ACQUIRE) &&
        (now - last < GIN_GDAKI_CHECK_NS ||
         !__atomic_compare_exchange_n(&s->last_check_ns, &last, now, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))) {
        *has_error = false;
        return ncclSuccess;
    }
    /* The device's async events (a port down, the device failed, a QP
     * fatal), as the proxy type's progress sees them: with a port down, a
     * spinning kernel's puts would otherwise wait out the QP retry budget
     * (gindriver gdaki-port-down runs with a 60 s one). */
    if (!__atomic_load_n(&s->error, __ATOMIC_ACQUIRE)) {
        gin_check_async(c);
        if (__atomic_load_n(&c->error, __ATOMIC_ACQUIRE))
            __atomic_store_n(&s->error, 1, __ATOMIC_RELEASE);
    }
    for (int i = 0; i < s->nctx * c->nranks && !__atomic_load_n(&s->error, __ATOMIC_ACQUIRE); i++) {
        int p = i % c->nranks;
        int st = gdaki_devx_state(s->qp[i]), cs = gdaki_devx_state(s->comp[i]);
        if (st == IBV_QPS_ERR || cs == IBV_QPS_ERR) {
            WARN("NET/railnet/GIN: device %s, rank %d: the GDAKI %sQP of context %d towards rank %d is in the error "
                 "state (an error completion: bad key or range, or the peer is gone)",
                 c->dev_name, c->rank, st == IBV_QPS_ERR ? "" : "companion ", i / c->nranks, p);
            __atomic_store_n(&s->error, 1, __ATOMIC_RELEASE);
        } else if (p != c->rank && c->peers[p].fd >= 0 && !oob_peer_alive(c->peers[p].fd)) {
            WARN("NET/railnet/GIN: device %s, rank %d: rank %d closed its connection (process exited or aborted, or "
                 "its collComm failed: see its log)",
                 c->dev_name, c->rank, p);
            __atomic_store_n(&s->error, 1, __ATOMIC_RELEASE);
        }
    }
    *has_error = __atomic_load_n(&s->error, __ATOMIC_ACQUIRE) != 0;
    if (*has_error) {
        gin_group_fail(c->comm_id);
        sets_release_failed();
    }
    return ncclSuccess;
}

/* ------------------------------------------------------------ windows */

ncclResult_t gin_gdaki_reg_window(struct gin_coll *c, struct gin_mr *m, void *data, size_t size, void **gin_handle)
{
    ncclResult_t res = base_open(c);
    struct gin_gdaki_res *r = c->gdaki;
    struct gin_gdaki_win *w = calloc(1, sizeof(*w));
    char err[256] = "out of memory";
    int ok = res == ncclSuccess && w;
    if (ok && !(w->mr = reg0(r, data, size, err, sizeof(err))))
        ok = 0;
    if (!ok && res == ncclSuccess)
        WARN("NET/railnet/GIN: device %s, rank %d: GDAKI window: %s", c->dev_name, c->rank, err);
    struct gw_win mine = { 0 };
    if (ok)
        mine.rkey = w->mr->rkey;
    struct gw_win *all = calloc((size_t)c->nranks, sizeof(*all));
    ncclResult_t xres = all ? xchg_win(c, 2 + (c->win_seq & 0xffff), ok, &mine, all) : ncclSystemError;
    if (!all) {
        WARN("NET/railnet/GIN: rank %d: GDAKI window: out of memory for %d ranks", c->rank, c->nranks);
        gin_fail_exchange(c, ncclSystemError); /* the exchange was skipped: the peers' WINs stay unread */
    }
    if (xres == ncclSuccess) {
        size_t len = sizeof(struct rn_gin_gdaki_mem_handle) + sizeof(uint32_t) * (size_t)c->nranks;
        uint8_t *img = calloc(1, len);
        if (!img || dmem_alloc(r, len, &w->blk, err, sizeof(err)) < 0) {
            xres = ncclSystemError;
        } else {
            uint32_t *keys = (uint32_t *)(img + sizeof(struct rn_gin_gdaki_mem_handle));
            for (int p = 0; p < c->nranks; p++)
                keys[p] = htobe32(all[p].rkey);
            gin_gdaki_mh_image((uint32_t *)((uint8_t *)w->blk.ptr + sizeof(struct rn_gin_gdaki_mem_handle)),
                               w->mr->lkey, (struct rn_gin_gdaki_mem_handle *)img);
            if (dmem_put(r, &w->blk, 0, img, len, err, sizeof(err)) < 0)
                xres = ncclSystemError;
        }
        if (xres != ncclSuccess)
            WARN("NET/railnet/GIN: device %s, rank %d: GDAKI window handle: %s", c->dev_name, c->rank, err);
        free(img);
    }
    free(all);
    if (xres != ncclSuccess || !ok) {
        if (w) {
            if (w->mr)
                r->v->dereg_mr(w->mr);
            dmem_free(&w->blk);
            free(w);
        }
        return xres != ncclSuccess ? xres : ncclSystemError;
    }
    m->gdaki = w;
    *gin_handle = w->blk.ptr;
    return ncclSuccess;
}

/* Whether a window's device handle must stay mapped: a kernel of a failed
 * set (kept or still live) may read it. */
static int win_keep(struct gin_gdaki_res *r)
{
    if (__atomic_load_n(&r->kept, __ATOMIC_ACQUIRE) || base_failed(r))
        return 1;
    int failed = 0;
    pthread_mutex_lock(&sets_mu);
    for (struct gin_gdaki_set *s = sets; s && !failed; s = s->next)
        failed = s->base == r && __atomic_load_n(&s->error, __ATOMIC_ACQUIRE);
    pthread_mutex_unlock(&sets_mu);
    if (failed)
        gin_group_fail(r->coll->comm_id);
    return failed;
}

void gin_gdaki_dereg_window(struct gin_mr *m)
{
    struct gin_gdaki_win *w = m->gdaki;
    if (!w)
        return;
    struct gin_gdaki_res *r = m->coll->gdaki;
    if (w->mr)
        r->v->dereg_mr(w->mr);
    if (win_keep(r))
        base_keep(r, "deregMrSym"); /* the handle stays mapped: a kernel may still read it */
    else
        dmem_free(&w->blk);
    free(w);
    m->gdaki = NULL;
}

void gin_gdaki_coll_free(struct gin_coll *c)
{
    struct gin_gdaki_res *r = c->gdaki;
    if (!r)
        return;
    /* Sets NCCL did not destroy (it destroys every context first): freed,
     * or released and kept when failed, as destroyContext would. */
    int left = 0;
    for (;;) {
        pthread_mutex_lock(&sets_mu);
        struct gin_gdaki_set *s = sets;
        while (s && s->base != r)
            s = s->next;
        pthread_mutex_unlock(&sets_mu);
        if (!s || set_take(s) != s)
            break;
        left++;
        if (set_failed(s) || __atomic_load_n(&s->released, __ATOMIC_ACQUIRE)) {
            set_release(s, "closeColl");
            s->magic = 0;
        } else {
            set_free(s);
        }
    }
    if (left)
        WARN("NET/railnet/GIN: device %s, rank %d: closeColl with %d GDAKI context(s) not destroyed: they go with "
             "the collComm (destroyContext comes first)",
             c->dev_name, c->rank, left);
    c->gdaki = NULL;
    if (__atomic_load_n(&r->kept, __ATOMIC_ACQUIRE) || base_failed(r)) {
        base_keep(r, "closeColl");
        return;
    }
    base_free(r);
}
