/* plugin/gin/gin_put.c: iput, iputSignal, test and ginProgress (gin.h).
 *
 * A request joins its peer's FIFO and is posted from there, in order:
 *  - a plain put's WRITE goes on the peer's next QP (round robin over the
 *    ports), when that send queue has room; a put with signal goes where its
 *    fence is free if it can (signal_qp); a put of RAILNET_SPLIT_MIN bytes
 *    or more is cut in one page-aligned part per QP, posted at once;
 *  - a put with signal notes, at that moment, how far each other QP of the
 *    peer had posted (need[]); its FETCH_AND_ADD follows on the write's own
 *    QP (which orders it after the write) once every other QP has retired
 *    up to there, so the signal also implies the earlier puts' data;
 *  - a request behind a waiting one waits too (the FIFO is the order NCCL
 *    gave), so a fence only ever waits on requests fully posted before it.
 * Signaling: the last work request of each request on each QP is signaled
 * (NCCL tests every descriptor on its own, so each put needs its own
 * completion); the write of a put with signal on the atomic's QP is not (the
 * atomic's completion covers it). The CQ is polled in batches; a success
 * completion retires its QP up to that work request (its wr_id carries the
 * sequence number). */
#include <stdlib.h>
#include <string.h>

#include "gin.h"
#include "log.h"
#include "mr.h"

#define POLL_BATCH 64

static struct gin_req *req_get(struct gin_coll *c, uint32_t peer)
{
    struct gin_peer *pe = &c->peers[peer];
    if (pe->nfree == 0)
        return NULL;
    uint32_t i = pe->free_list[--pe->nfree];
    struct gin_req *r = &c->reqs[(size_t)peer * GIN_PEER_REQS + i];
    memset(r, 0, sizeof(*r));
    r->peer = peer;
    r->index = peer * GIN_PEER_REQS + i;
    r->state = GR_QUEUED;
    c->pending++;
    return r;
}

static void req_put(struct gin_coll *c, struct gin_req *r)
{
    struct gin_peer *pe = &c->peers[r->peer];
    if (r->state != GR_DONE)
        c->pending--;
    r->state = GR_FREE;
    pe->free_list[pe->nfree++] = r->index % GIN_PEER_REQS;
}

int gin_outstanding(const struct gin_coll *c)
{
    return c->pending;
}

/* Posts wr on QP qi of r's peer, its wr_id naming the sequence number it
 * gets there. */
static int post(struct gin_coll *c, struct gin_req *r, int qi, struct ibv_send_wr *wr)
{
    struct gin_qp *q = &c->peers[r->peer].qps[qi];
    wr->wr_id = GIN_WR_ID(q->posted + 1, qi, r->index);
    struct ibv_send_wr *bad;
    int rc = ibv_post_send(q->conn.qp, wr, &bad);
    if (rc) {
        WARN("NET/railnet/GIN: device %s, rank %d: ibv_post_send towards rank %u (QP 0x%x) failed: %s", c->dev_name,
             c->rank, r->peer, q->conn.qp->qp_num, strerror(rc));
        gin_fail(c, ncclSystemError);
        return -1;
    }
    q->posted++;
    if (wr->send_flags & IBV_SEND_SIGNALED)
        r->owed++;
    return 0;
}

/* Bytes [off, off + len) of r's put. */
static int post_write(struct gin_coll *c, struct gin_req *r, int qi, uint64_t off, uint32_t len, int signaled)
{
    struct gin_qp *q = &c->peers[r->peer].qps[qi];
    struct ibv_sge sge = { .addr = r->laddr + off, .length = len, .lkey = r->lkey };
    struct ibv_send_wr wr;
    memset(&wr, 0, sizeof(wr));
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    /* inline only from host memory: the CPU copies the bytes at post time
     * (a CUDA window's address is not readable by the CPU) */
    wr.send_flags = (signaled ? IBV_SEND_SIGNALED : 0) |
                    (r->src_host && len <= q->conn.max_inline ? IBV_SEND_INLINE : 0);
    wr.wr.rdma.remote_addr = r->raddr + off;
    wr.wr.rdma.rkey = r->rkey;
    return post(c, r, qi, &wr);
}

static int post_atomic(struct gin_coll *c, struct gin_req *r, int qi)
{
    struct ibv_sge sge = {
        .addr = (uint64_t)(uintptr_t)&c->scratch[r->peer % 512],
        .length = 8,
        .lkey = c->scratch_lkey,
    };
    struct ibv_send_wr wr;
    memset(&wr, 0, sizeof(wr));
    wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.atomic.remote_addr = r->sig_raddr;
    wr.wr.atomic.rkey = r->sig_rkey;
    wr.wr.atomic.compare_add = r->sig_add;
    return post(c, r, qi, &wr);
}

static int fence_clear(const struct gin_peer *pe, const struct gin_req *r)
{
    for (int o = 0; o < pe->nqps; o++)
        if (o != r->qp && pe->qps[o].retired < r->need[o])
            return 0;
    return 1;
}

/* The QP of a put with signal: where its fence costs nothing if it can. A
 * QP's earlier writes are ordered before the atomic by the QP itself; only
 * the other QPs' unretired writes make the signal wait. So: the one busy QP
 * when only one is busy, the latest write's QP when none or several are. */
static int signal_qp(const struct gin_peer *pe)
{
    int busy = -1, nbusy = 0;
    for (int o = 0; o < pe->nqps; o++)
        if (pe->qps[o].posted > pe->qps[o].retired)
            busy = o, nbusy++;
    return nbusy == 1 ? busy : (int)pe->last_qp;
}

static int room(const struct gin_qp *q, int n)
{
    return q->posted - q->retired + (uint64_t)n <= GIN_SQ_DEPTH;
}

/* Posts r's write(s); 1 when posted, 0 when a send queue is full (nothing
 * posted), -1 on error. A large put is cut in one part per QP, each
 * signaled except the part on the atomic's own QP (the atomic covers it):
 * the fence needs the other parts to retire their QPs. */
static int post_writes(struct gin_coll *c, struct gin_peer *pe, struct gin_req *r)
{
    int split = pe->nqps > 1 && r->len >= c->split_min;
    if (!split) {
        int qi = r->has_signal ? signal_qp(pe) : (int)(pe->next_qp % (unsigned)pe->nqps);
        if (!room(&pe->qps[qi], r->has_write + r->has_signal))
            return 0;
        r->qp = (uint8_t)qi;
        if (r->has_write) {
            if (post_write(c, r, qi, 0, r->len, !r->has_signal))
                return -1;
            if (!r->has_signal)
                pe->next_qp++;
            pe->last_qp = (unsigned)qi;
        }
        return 1;
    }
    int aq = r->has_signal ? signal_qp(pe) : -1;
    for (int o = 0; o < pe->nqps; o++)
        if (!room(&pe->qps[o], 1 + (o == aq)))
            return 0;
    uint32_t part = (r->len / (uint32_t)pe->nqps + 4095) & ~4095u; /* page-aligned parts */
    for (int o = 0; o < pe->nqps; o++) {
        uint64_t off = (uint64_t)o * part;
        if (off >= r->len)
            break;
        uint32_t len = off + part > r->len ? r->len - (uint32_t)off : part;
        if (post_write(c, r, o, off, len, o != aq))
            return -1;
    }
    r->qp = (uint8_t)(aq >= 0 ? aq : 0);
    pe->last_qp = r->qp;
    return 1;
}

/* Posts what the head of the peer's FIFO allows, in order. */
static void peer_advance(struct gin_coll *c, uint32_t peer)
{
    struct gin_peer *pe = &c->peers[peer];
    while (pe->head != pe->tail && !c->error) {
        struct gin_req *r = &c->reqs[(size_t)peer * GIN_PEER_REQS + pe->fifo[pe->head % GIN_PEER_REQS]];
        if (r->state == GR_QUEUED) {
            int p = post_writes(c, pe, r);
            if (p <= 0)
                return; /* full: completions will make room; or failed */
            if (!r->has_signal) {
                r->state = GR_POSTED;
                pe->head++;
                continue;
            }
            for (int o = 0; o < pe->nqps; o++)
                r->need[o] = pe->qps[o].posted;
            r->state = GR_WRITTEN;
        }
        /* GR_WRITTEN: the signal waits for the other QPs' earlier writes */
        if (!fence_clear(pe, r))
            return;
        if (post_atomic(c, r, r->qp))
            return;
        r->state = GR_POSTED;
        pe->head++;
    }
}

static void poll_cq(struct gin_coll *c)
{
    struct ibv_wc wc[POLL_BATCH];
    size_t nreqs = (size_t)c->nranks * GIN_PEER_REQS;
    for (;;) {
        int n = ibv_poll_cq(c->cq, POLL_BATCH, wc);
        if (n < 0) {
            WARN("NET/railnet/GIN: device %s: ibv_poll_cq failed (%d)", c->dev_name, n);
            gin_fail(c, ncclSystemError);
            return;
        }
        for (int i = 0; i < n; i++) {
            uint32_t idx = GIN_WR_IDX(wc[i].wr_id);
            int qi = GIN_WR_QP(wc[i].wr_id);
            if (idx >= nreqs || qi >= c->peers[idx / GIN_PEER_REQS].nqps) {
                WARN("NET/railnet/GIN: device %s: completion with unknown wr_id 0x%llx", c->dev_name,
                     (unsigned long long)wc[i].wr_id);
                gin_fail(c, ncclInternalError);
                continue;
            }
            if (wc[i].status != IBV_WC_SUCCESS) {
                gin_report_wc(c, &wc[i]);
                continue;
            }
            struct gin_req *r = &c->reqs[idx];
            struct gin_qp *q = &c->peers[r->peer].qps[qi];
            uint64_t seq = GIN_WR_SEQ(wc[i].wr_id);
            if (seq > q->retired)
                q->retired = seq; /* a QP completes in order: all before it are done too */
            if (r->owed && --r->owed == 0 && r->state == GR_POSTED) {
                r->state = GR_DONE;
                c->pending--;
            }
        }
        if (n < POLL_BATCH)
            return;
    }
}

ncclResult_t gin_progress(void *coll_comm)
{
    struct gin_coll *c = gin_coll_of(coll_comm, "ginProgress");
    if (!c)
        return ncclInvalidArgument;
    poll_cq(c);
    for (int p = 0; p < c->nranks; p++)
        if (c->peers[p].head != c->peers[p].tail)
            peer_advance(c, (uint32_t)p);
    if (c->pending)
        gin_check_peers(c);
    return c->error;
}

/* Checks shared by iput and iputSignal; fills the write part of r's
 * parameters into *w (NULL windows allowed for size 0). */
static ncclResult_t check_put(struct gin_coll *c, const char *what, uint64_t src_off, void *src_mh, size_t size,
                              uint64_t dst_off, void *dst_mh, uint32_t rank, struct gin_req *w)
{
    if (rank >= (uint32_t)c->nranks) {
        WARN("NET/railnet/GIN: %s: rank %u out of range (%d ranks)", what, rank, c->nranks);
        return ncclInvalidArgument;
    }
    if (size == 0)
        return ncclSuccess;
    if (size >= GIN_MAX_PUT) {
        WARN("NET/railnet/GIN: %s: %zu bytes in one put; at most %zu", what, size, GIN_MAX_PUT - 1);
        return ncclInvalidArgument;
    }
    struct gin_mr *src = gin_mr_of(c, src_mh, what);
    struct gin_mr *dst = gin_mr_of(c, dst_mh, what);
    if (!src || !dst)
        return ncclInvalidArgument;
    if (src_off > src->size || size > src->size - src_off || dst_off > dst->len[rank] ||
        size > dst->len[rank] - dst_off) {
        WARN("NET/railnet/GIN: %s: %zu bytes from offset %llu of a %llu-byte window to offset %llu of rank %u's "
             "%llu-byte window: out of bounds",
             what, size, (unsigned long long)src_off, (unsigned long long)src->size, (unsigned long long)dst_off,
             rank, (unsigned long long)dst->len[rank]);
        return ncclInvalidArgument;
    }
    w->has_write = 1;
    w->laddr = src->base + src_off;
    w->lkey = src->lkey;
    w->src_host = !mr_is_cuda(src->mh);
    w->len = (uint32_t)size;
    w->raddr = dst->addr[rank] + dst_off;
    w->rkey = dst->rkey[rank];
    return ncclSuccess;
}

static ncclResult_t submit(struct gin_coll *c, const struct gin_req *tmpl, uint32_t rank, void **request)
{
    struct gin_req *r = req_get(c, rank);
    if (!r) {
        /* more than GIN_PEER_REQS (NCCL's own bound) outstanding to one
         * peer: not now; the caller tests its requests and retries */
        TRACE(NCCL_NET, "NET/railnet/GIN: rank %d: %d requests outstanding to rank %u; try again", c->rank,
              GIN_PEER_REQS, rank);
        return ncclSuccess;
    }
    uint32_t index = r->index;
    *r = *tmpl;
    r->peer = rank;
    r->index = index;
    r->state = GR_QUEUED;
    if (!r->has_write && !r->has_signal) {
        r->state = GR_DONE; /* an empty put has nothing to deliver */
        c->pending--;
    } else {
        struct gin_peer *pe = &c->peers[rank];
        pe->fifo[pe->tail++ % GIN_PEER_REQS] = index % GIN_PEER_REQS;
        peer_advance(c, rank);
    }
    *request = r;
    return c->error;
}

ncclResult_t gin_iput(void *coll_comm, uint64_t src_off, void *src_mh, size_t size, uint64_t dst_off, void *dst_mh,
                      uint32_t rank, void **request)
{
    if (request)
        *request = NULL;
    struct gin_coll *c = gin_coll_of(coll_comm, "iput");
    if (!c || !request)
        return ncclInvalidArgument;
    if (c->error)
        return c->error;
    struct gin_req t;
    memset(&t, 0, sizeof(t));
    CHECK(check_put(c, "iput", src_off, src_mh, size, dst_off, dst_mh, rank, &t));
    return submit(c, &t, rank, request);
}

ncclResult_t gin_iput_signal(void *coll_comm, uint64_t src_off, void *src_mh, size_t size, uint64_t dst_off,
                             void *dst_mh, uint32_t rank, uint64_t sig_off, void *sig_mh, uint64_t sig_value,
                             uint32_t sig_op, void **request)
{
    if (request)
        *request = NULL;
    struct gin_coll *c = gin_coll_of(coll_comm, "iputSignal");
    if (!c || !request)
        return ncclInvalidArgument;
    if (c->error)
        return c->error;
    if (sig_op != NCCL_NET_SIGNAL_OP_INC && sig_op != NCCL_NET_SIGNAL_OP_ADD) {
        WARN("NET/railnet/GIN: iputSignal: signal op %u is neither INC (%d) nor ADD (%d)", sig_op,
             NCCL_NET_SIGNAL_OP_INC, NCCL_NET_SIGNAL_OP_ADD);
        return ncclInvalidArgument;
    }
    struct gin_req t;
    memset(&t, 0, sizeof(t));
    CHECK(check_put(c, "iputSignal", src_off, src_mh, size, dst_off, dst_mh, rank, &t));
    struct gin_mr *sig = gin_mr_of(c, sig_mh, "iputSignal (signal window)");
    if (!sig)
        return ncclInvalidArgument;
    if (sig_off % 8 || sig_off > sig->len[rank] || sig->len[rank] - sig_off < 8 ||
        (sig->addr[rank] + sig_off) % 8) {
        WARN("NET/railnet/GIN: iputSignal: signal at offset %llu of rank %u's %llu-byte window is not an aligned "
             "64-bit word inside it",
             (unsigned long long)sig_off, rank, (unsigned long long)sig->len[rank]);
        return ncclInvalidArgument;
    }
    t.has_signal = 1;
    t.sig_raddr = sig->addr[rank] + sig_off;
    t.sig_rkey = sig->rkey[rank];
    t.sig_add = sig_op == NCCL_NET_SIGNAL_OP_INC ? 1 : sig_value;
    return submit(c, &t, rank, request);
}

ncclResult_t gin_test(void *coll_comm, void *request, int *done)
{
    if (done)
        *done = 0;
    struct gin_coll *c = gin_coll_of(coll_comm, "test");
    if (!c || !done)
        return ncclInvalidArgument;
    struct gin_req *r = request;
    size_t nreqs = (size_t)c->nranks * GIN_PEER_REQS;
    if (!r || r < c->reqs || r >= c->reqs + nreqs || r->state == GR_FREE) {
        WARN("NET/railnet/GIN: test: %p is not a live request of this collComm", request);
        return ncclInvalidArgument;
    }
    if (r->state != GR_DONE)
        (void)gin_progress(c);
    if (r->state == GR_DONE) {
        *done = 1;
        req_put(c, r);
        return ncclSuccess;
    }
    return c->error;
}
