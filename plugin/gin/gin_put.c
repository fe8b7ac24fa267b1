/* plugin/gin/gin_put.c: lanes, iput, iputSignal, test and progress (gin.h).
 *
 * A request joins its peer's FIFO in its lane and is posted from there, in
 * order:
 *  - a plain put's WRITE goes on the peer's next QP (round robin over the
 *    ports), when that send queue has room; a put with signal goes where its
 *    fence is free if it can (signal_qp); a put of RAILNET_SPLIT_MIN bytes
 *    or more is cut in one page-aligned part per QP, posted at once;
 *  - a put with signal notes, at that moment, how far each other QP of the
 *    peer had posted (need[]); its FETCH_AND_ADD follows on the write's own
 *    QP (which orders it after the write) once every other QP has retired
 *    up to there, so the signal also implies the earlier puts' data;
 *  - a request behind a waiting one waits too (the FIFO is the order NCCL
 *    gave), so a fence only ever waits on requests fully posted before it;
 *    requests of other lanes do not wait for it (NCCL orders only within a
 *    context), but its fence covers what they posted before its write.
 *
 * Selective signaling. NCCL keeps up to 256 puts in flight per peer; a
 * completion for each costs the NIC a CQE write and this thread a poll.
 * An RC QP completes in order, so one successful completion retires every
 * work request posted before it on that QP (q->retired), and a request is
 * done once each QP it used has retired its last work request (r->last[]).
 * A work request is signaled when
 *  - nothing signaled is in flight on its QP (retired >= sig_seq): a lone
 *    put, or the first of a burst, reports its completion as soon as the
 *    NIC has it (a put with signal's write is exempt: its atomic follows;
 *    so is a request with more queued behind it, as after a fence: the
 *    batch's end is covered by the rules below);
 *  - RAILNET_GIN_SIGNAL_EVERY work requests have been posted on the QP
 *    since the last signaled one, or an eighth of what the QP has in
 *    flight (at least 8), or the send queue is nearly full: in a stream,
 *    requests retire in batches, and a batch holds little of the caller's
 *    window of requests (a completion reported late keeps its slot);
 *  - it is a split part another QP's signal will wait for (the fence), or
 *    a plain put right before a put with signal in the FIFO (that one then
 *    takes another QP and finds this tail covered: no marker, signal_qp).
 * What is left behind the last signaled work request of a QP (a tail) is
 * closed by a completion marker, a signaled zero-byte RDMA WRITE to the
 * waiting request's own target (no key is checked for zero bytes), posted
 *  - by test, when the same request is found waiting on an uncovered tail
 *    twice with nothing posted on that QP in between and nothing signaled
 *    in flight there: the proxy went once around its loop without putting
 *    to that QP again (had it, rule one would have signaled that put), or
 *    after more such tests than the peer has requests (a caller that
 *    stopped testing the first one it was seen with); a plain put goes to
 *    a QP a test waits on this way, rather than round robin, and closes
 *    the tail itself;
 *  - at once, for a signal's fence over an uncovered tail of another QP.
 * Error completions come for signaled and unsignaled work requests alike
 * (flushes included) and never retire anything: a request is reported done
 * only when successful completions prove that everything it posted landed;
 * the rest fail with the comm's error. The CQ is polled in batches. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gin.h"
#include "log.h"
#include "mr.h"

#define POLL_BATCH 64
/* A run of unsignaled work requests is at most 1/8 of the QP's work in
 * flight (at least 8, at most RAILNET_GIN_SIGNAL_EVERY). */
#define GIN_RUN_FRACTION 8
#define GIN_RUN_MIN 8

/* ---------------------------------------------------------------- lanes */

static void pending_add(struct gin_coll *c, struct gin_lane *l, int n)
{
    l->pending += n;
    __atomic_add_fetch(&c->pending, n, __ATOMIC_RELAXED);
}

int gin_outstanding(const struct gin_coll *c)
{
    return __atomic_load_n(&c->pending, __ATOMIC_RELAXED);
}

static struct gin_lane *lane_new(struct gin_coll *c)
{
    struct gin_lane *l = calloc(1, sizeof(*l));
    if (!l)
        return NULL;
    l->coll = c;
    /* large zeroed allocations: pages are committed only for the peers used */
    l->reqs = calloc((size_t)c->nranks * GIN_PEER_REQS, sizeof(*l->reqs));
    l->lp = calloc((size_t)c->nranks, sizeof(*l->lp));
    if (!l->reqs || !l->lp) {
        free(l->reqs);
        free(l->lp);
        free(l);
        return NULL;
    }
    return l;
}

static void lane_free(struct gin_lane *l)
{
    free(l->reqs);
    free(l->lp);
    free(l);
}

static int lane_link(struct gin_coll *c, struct gin_lane *l)
{
    pthread_mutex_lock(&c->lanes_mu);
    if (c->nlanes == c->lanes_cap) {
        int cap = c->lanes_cap ? 2 * c->lanes_cap : 4;
        struct gin_lane **a = realloc(c->lanes, (size_t)cap * sizeof(*a));
        if (!a) {
            pthread_mutex_unlock(&c->lanes_mu);
            return -1;
        }
        c->lanes = a;
        c->lanes_cap = cap;
    }
    c->lanes[c->nlanes++] = l;
    pthread_mutex_unlock(&c->lanes_mu);
    return 0;
}

ncclResult_t gin_lanes_init(struct gin_coll *c)
{
    c->lane0 = lane_new(c);
    if (!c->lane0 || lane_link(c, c->lane0)) {
        WARN("NET/railnet/GIN: connect: out of memory for the requests of %d ranks", c->nranks);
        if (c->lane0)
            lane_free(c->lane0);
        c->lane0 = NULL;
        return ncclSystemError;
    }
    return ncclSuccess;
}

void gin_lanes_release(struct gin_coll *c)
{
    pthread_mutex_lock(&c->lanes_mu);
    for (int i = 0; i < c->nlanes; i++) {
        if (c->lanes[i] == c->lane0)
            lane_free(c->lane0);
        else
            c->lanes[i]->coll = NULL; /* its context frees it */
    }
    c->lane0 = NULL;
    free(c->lanes);
    c->lanes = NULL;
    c->nlanes = c->lanes_cap = 0;
    pthread_mutex_unlock(&c->lanes_mu);
}

ncclResult_t gin_lane_add(struct gin_coll *c, struct gin_lane **out)
{
    *out = lane_new(c);
    if (!*out || lane_link(c, *out)) {
        WARN("NET/railnet/GIN: rank %d: out of memory for a lane of requests to %d ranks", c->rank, c->nranks);
        if (*out)
            lane_free(*out);
        *out = NULL;
        return ncclSystemError;
    }
    return ncclSuccess;
}

void gin_lane_remove(struct gin_lane *l)
{
    if (!l)
        return;
    struct gin_coll *c = l->coll;
    if (c) {
        pthread_mutex_lock(&c->lanes_mu);
        for (int i = 0; i < c->nlanes; i++) {
            if (c->lanes[i] == l) {
                c->lanes[i] = c->lanes[--c->nlanes];
                break;
            }
        }
        pthread_mutex_unlock(&c->lanes_mu);
        if (l->pending)
            INFO(NCCL_NET, "NET/railnet/GIN: rank %d: a context goes with %d request(s) not completed", c->rank,
                 l->pending);
        __atomic_sub_fetch(&c->pending, l->pending, __ATOMIC_RELAXED);
    }
    lane_free(l);
}

/* The lane holding request pointer r, or NULL when r is none of c's live
 * requests (lanes_mu held): nothing is read from r before this. */
static struct gin_lane *lane_of_req(const struct gin_coll *c, const struct gin_req *r)
{
    size_t nreqs = (size_t)c->nranks * GIN_PEER_REQS;
    for (int i = 0; i < c->nlanes; i++) {
        const struct gin_req *base = c->lanes[i]->reqs;
        if ((uintptr_t)r >= (uintptr_t)base && (uintptr_t)r < (uintptr_t)(base + nreqs) &&
            ((uintptr_t)r - (uintptr_t)base) % sizeof(*r) == 0)
            return r->state == GR_FREE ? NULL : c->lanes[i];
    }
    return NULL;
}

static struct gin_req *req_get(struct gin_coll *c, struct gin_lane *l, uint32_t peer)
{
    struct gin_lane_peer *lp = &l->lp[peer];
    uint32_t i;
    if (lp->nfree)
        i = lp->free_list[--lp->nfree];
    else if (lp->fresh < GIN_PEER_REQS)
        i = lp->fresh++;
    else
        return NULL;
    struct gin_req *r = &l->reqs[(size_t)peer * GIN_PEER_REQS + i];
    memset(r, 0, sizeof(*r));
    r->peer = peer;
    r->index = peer * GIN_PEER_REQS + i;
    r->state = GR_QUEUED;
    pending_add(c, l, 1);
    return r;
}

static void req_put(struct gin_coll *c, struct gin_lane *l, struct gin_req *r)
{
    struct gin_lane_peer *lp = &l->lp[r->peer];
    if (r->state != GR_DONE)
        pending_add(c, l, -1);
    r->state = GR_FREE;
    lp->free_list[lp->nfree++] = r->index % GIN_PEER_REQS;
}

/* The request at the head of peer's FIFO in l. */
static struct gin_req *fifo_head(const struct gin_lane *l, uint32_t peer)
{
    const struct gin_lane_peer *lp = &l->lp[peer];
    return &l->reqs[(size_t)peer * GIN_PEER_REQS + lp->fifo[lp->head % GIN_PEER_REQS]];
}

/* ------------------------------------------------------------ posting */

/* Every work request r posted is retired. */
static int req_retired(const struct gin_coll *c, const struct gin_req *r)
{
    const struct gin_peer *pe = &c->peers[r->peer];
    for (int qi = 0; qi < pe->nqps; qi++)
        if (pe->qps[qi].retired < r->last[qi])
            return 0;
    return 1;
}

int gin_peer_busy(const struct gin_coll *c, int p)
{
    for (int k = 0; k < c->nlanes; k++) {
        const struct gin_lane *l = c->lanes[k];
        const struct gin_req *r = &l->reqs[(size_t)p * GIN_PEER_REQS];
        for (uint32_t i = 0; i < l->lp[p].fresh; i++)
            if (r[i].state == GR_QUEUED || r[i].state == GR_WRITTEN ||
                (r[i].state == GR_POSTED && !req_retired(c, &r[i])))
                return 1;
    }
    return 0;
}

/* Whether the next work request on q is signaled; `more`: another work
 * request follows that will report for this one (the same request's next
 * on q, or later requests already queued behind it: a batch, whose end,
 * fence or test covers it). */
static int signal_next(const struct gin_coll *c, const struct gin_qp *q, int more)
{
    if (!more && q->retired >= q->sig_seq)
        return 1; /* nothing signaled in flight: report this one promptly */
    uint64_t run = q->posted + 1 - q->sig_seq, inflight = q->posted + 1 - q->retired;
    /* a completion reported late holds its request's slot in the caller's
     * window (NCCL's 256 per peer): runs stay a small part of what is in
     * flight, so that batching costs the window little */
    uint64_t every = inflight / GIN_RUN_FRACTION;
    if (every < GIN_RUN_MIN)
        every = GIN_RUN_MIN;
    if (every > c->signal_every)
        every = c->signal_every;
    return run >= every || inflight + 1 >= GIN_SQ_DEPTH;
}

/* Posts wr on QP qi of peer, its wr_id naming the sequence number it gets
 * there; r (NULL for a marker) records it as its last on qi. */
static int post(struct gin_coll *c, uint32_t peer, struct gin_req *r, int qi, struct ibv_send_wr *wr)
{
    struct gin_qp *q = &c->peers[peer].qps[qi];
    uint64_t seq = q->posted + 1;
    wr->wr_id = GIN_WR_ID(seq, r == NULL, qi, r ? r->index : peer * GIN_PEER_REQS);
    struct ibv_send_wr *bad;
    int rc = ibv_post_send(q->conn.qp, wr, &bad);
    if (rc) {
        WARN("NET/railnet/GIN: device %s, rank %d: ibv_post_send towards rank %u (QP 0x%x) failed: %s", c->dev_name,
             c->rank, peer, q->conn.qp->qp_num, strerror(rc));
        gin_fail(c, ncclSystemError);
        return -1;
    }
    q->posted = seq;
    c->stats.wrs++;
    if (wr->send_flags & IBV_SEND_SIGNALED) {
        q->sig_seq = seq;
        c->stats.signaled++;
    }
    if (r)
        r->last[qi] = seq;
    else
        c->stats.markers++;
    return 0;
}

/* Requests wait in r's peer's FIFO behind r (r is its head). */
static int queued_behind(const struct gin_lane *l, const struct gin_req *r)
{
    const struct gin_lane_peer *lp = &l->lp[r->peer];
    return lp->tail - lp->head > 1;
}

/* The request behind r in its peer's FIFO is a put with signal: r's write
 * is signaled, so that the signal can take another QP and find this one's
 * tail covered (signal_qp), its fence needing no marker. */
static int signal_next_in_fifo(const struct gin_lane *l, const struct gin_req *r)
{
    const struct gin_lane_peer *lp = &l->lp[r->peer];
    if (lp->tail - lp->head < 2)
        return 0;
    return l->reqs[(size_t)r->peer * GIN_PEER_REQS + lp->fifo[(lp->head + 1) % GIN_PEER_REQS]].has_signal;
}

/* Bytes [off, off + len) of r's data part (a WRITE, or a READ for a get);
 * force: signaled whatever the rules. */
static int post_data(struct gin_coll *c, struct gin_req *r, int qi, uint64_t off, uint32_t len, int more, int force)
{
    struct gin_qp *q = &c->peers[r->peer].qps[qi];
    struct ibv_sge sge = { .addr = r->laddr + off, .length = len, .lkey = r->lkey };
    struct ibv_send_wr wr;
    memset(&wr, 0, sizeof(wr));
    wr.opcode = r->is_get ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    /* inline only from host memory: the CPU copies the bytes at post time
     * (a CUDA window's address is not readable by the CPU); never a READ */
    wr.send_flags = (force || signal_next(c, q, more) ? IBV_SEND_SIGNALED : 0) |
                    (!r->is_get && r->src_host && len <= q->conn.max_inline ? IBV_SEND_INLINE : 0);
    wr.wr.rdma.remote_addr = r->raddr + off;
    wr.wr.rdma.rkey = r->rkey;
    return post(c, r->peer, r, qi, &wr);
}

static int post_atomic(struct gin_coll *c, struct gin_lane *l, struct gin_req *r, int qi)
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
    wr.send_flags = signal_next(c, &c->peers[r->peer].qps[qi], queued_behind(l, r)) ? IBV_SEND_SIGNALED : 0;
    wr.wr.atomic.remote_addr = r->sig_raddr;
    wr.wr.atomic.rkey = r->sig_rkey;
    wr.wr.atomic.compare_add = r->sig_add;
    return post(c, r->peer, r, qi, &wr);
}

/* A completion marker on QP qi of r's peer: zero bytes to r's own target
 * (its write's, else its signal word), signaled. */
static int post_marker(struct gin_coll *c, const struct gin_req *r, int qi)
{
    struct gin_qp *q = &c->peers[r->peer].qps[qi];
    if (q->posted + 1 - q->retired > GIN_SQ_DEPTH)
        return 0; /* cannot happen (gin.h's depth counts it); a later call tries again */
    struct ibv_send_wr wr;
    memset(&wr, 0, sizeof(wr));
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = r->has_data ? r->raddr : r->sig_raddr;
    wr.wr.rdma.rkey = r->has_data ? r->rkey : r->sig_rkey;
    return post(c, r->peer, NULL, qi, &wr);
}

static int fence_clear(const struct gin_peer *pe, const struct gin_req *r)
{
    for (int o = 0; o < pe->nqps; o++)
        if (o != r->qp && pe->qps[o].retired < r->need[o])
            return 0;
    return 1;
}

/* The fence of r waits on the other QPs: each needs a signaled work
 * request at or after need[o], or it never retires that far. */
static int fence_cover(struct gin_coll *c, struct gin_peer *pe, const struct gin_req *r)
{
    for (int o = 0; o < pe->nqps; o++) {
        const struct gin_qp *q = &pe->qps[o];
        if (o != r->qp && q->retired < r->need[o] && q->sig_seq < r->need[o] && post_marker(c, r, o))
            return -1;
    }
    return 0;
}

/* test found r posted and not retired: on each QP where only an uncovered
 * tail holds it back and nothing signaled is in flight, a marker once the
 * same request has been found so twice with nothing posted there between
 * (see the top of this file). */
static void test_cover(struct gin_coll *c, const struct gin_lane *l, const struct gin_req *r)
{
    struct gin_peer *pe = &c->peers[r->peer];
    /* a signal of r's lane waiting on its fence will post its atomic
     * behind the tail */
    const struct gin_req *h = l->lp[r->peer].head != l->lp[r->peer].tail ? fifo_head(l, r->peer) : NULL;
    for (int qi = 0; qi < pe->nqps; qi++) {
        struct gin_qp *q = &pe->qps[qi];
        if (q->retired >= r->last[qi] || q->sig_seq >= r->last[qi] || q->retired < q->sig_seq)
            continue; /* retired, or a signaled one is on its way */
        if (h && h->state == GR_WRITTEN && h->qp == qi)
            continue;
        if (q->probe_req && q->probe_posted == q->posted) {
            /* the recorded request again; or more tests than the peer has
             * requests, in case the caller stopped testing that one */
            if ((q->probe_req == r->index + 1 || ++q->probe_tests > GIN_PEER_REQS) && post_marker(c, r, qi))
                return;
        } else {
            q->probe_req = r->index + 1;
            q->probe_posted = q->posted;
            q->probe_tests = 0;
        }
    }
}

/* The QP of a put with signal: where its fence costs nothing if it can. A
 * QP's earlier writes are ordered before the atomic by the QP itself; only
 * the other QPs' unretired writes make the signal wait. So: the one busy QP
 * when only one is busy; when several are, one whose others' tails are
 * covered by a signaled work request (no marker needed), the latest
 * write's QP first. */
static int signal_qp(const struct gin_peer *pe)
{
    int busy = -1, nbusy = 0;
    for (int o = 0; o < pe->nqps; o++)
        if (pe->qps[o].posted > pe->qps[o].retired)
            busy = o, nbusy++;
    if (nbusy == 1)
        return busy;
    for (int k = 0; k < pe->nqps; k++) {
        int a = (int)((pe->last_qp + (unsigned)k) % (unsigned)pe->nqps), covered = 1;
        for (int o = 0; o < pe->nqps; o++)
            if (o != a && pe->qps[o].sig_seq < pe->qps[o].posted && pe->qps[o].retired < pe->qps[o].posted)
                covered = 0;
        if (covered)
            return a;
    }
    return (int)pe->last_qp;
}

/* A test waits on q's uncovered tail, nothing signaled in flight there and
 * nothing posted since: the next put to the peer goes there, signaled (rule
 * one), and closes the tail without a marker. */
static int tail_wanted(const struct gin_qp *q)
{
    return q->probe_req && q->probe_posted == q->posted && q->retired >= q->sig_seq && q->posted > q->retired;
}

/* The QP of a plain put: round robin over the peer's QPs, unless a test
 * waits on one's tail. */
static int plain_qp(const struct gin_peer *pe)
{
    for (int o = 0; o < pe->nqps; o++)
        if (tail_wanted(&pe->qps[o]))
            return o;
    return (int)(pe->next_qp % (unsigned)pe->nqps);
}

/* Room for n work requests, and for the one marker a test may ask for. */
static int room(const struct gin_qp *q, int n)
{
    return q->posted - q->retired + (uint64_t)n + 1 <= GIN_SQ_DEPTH;
}

/* Posts r's write(s); 1 when posted, 0 when a send queue is full (nothing
 * posted), -1 on error. A large put is cut in one part per QP; with a
 * signal, the parts on QPs other than the atomic's are signaled (the fence
 * waits for them to retire). */
static int post_writes(struct gin_coll *c, struct gin_lane *l, struct gin_peer *pe, struct gin_req *r)
{
    int split = pe->nqps > 1 && r->len >= c->split_min;
    if (!split) {
        int qi = r->has_signal ? signal_qp(pe) : plain_qp(pe);
        if (!room(&pe->qps[qi], r->has_data + r->has_signal))
            return 0;
        r->qp = (uint8_t)qi;
        if (r->has_data) {
            int more = r->has_signal || queued_behind(l, r);
            if (post_data(c, r, qi, 0, r->len, more, !r->has_signal && signal_next_in_fifo(l, r)))
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
        if (post_data(c, r, o, off, len, o == aq || queued_behind(l, r), aq >= 0 && o != aq))
            return -1;
    }
    r->qp = (uint8_t)(aq >= 0 ? aq : 0);
    pe->last_qp = r->qp;
    return 1;
}

/* Posts what the head of the peer's FIFO in l allows, in order. */
static void peer_advance(struct gin_coll *c, struct gin_lane *l, uint32_t peer)
{
    struct gin_peer *pe = &c->peers[peer];
    struct gin_lane_peer *lp = &l->lp[peer];
    while (lp->head != lp->tail && !c->error) {
        struct gin_req *r = fifo_head(l, peer);
        if (r->state == GR_QUEUED) {
            int p = post_writes(c, l, pe, r);
            if (p <= 0)
                return; /* full: completions will make room; or failed */
            if (!r->has_signal) {
                r->state = GR_POSTED;
                lp->head++;
                l->queued--;
                continue;
            }
            for (int o = 0; o < pe->nqps; o++)
                r->need[o] = pe->qps[o].posted;
            r->state = GR_WRITTEN;
        }
        /* GR_WRITTEN: the signal waits for the other QPs' earlier writes
         * (covered by a signaled one; asked on every pass, it posts a
         * marker at most once per QP) */
        if (fence_cover(c, pe, r) || !fence_clear(pe, r))
            return;
        if (post_atomic(c, l, r, r->qp))
            return;
        r->state = GR_POSTED;
        lp->head++;
        l->queued--;
    }
}

static void poll_cq(struct gin_coll *c)
{
    struct ibv_wc wc[POLL_BATCH];
    for (;;) {
        int n = ibv_poll_cq(c->cq, POLL_BATCH, wc);
        if (n < 0) {
            WARN("NET/railnet/GIN: device %s: ibv_poll_cq failed (%d)", c->dev_name, n);
            gin_fail(c, ncclSystemError);
            return;
        }
        for (int i = 0; i < n; i++) {
            uint32_t peer = GIN_WR_PEER(wc[i].wr_id);
            int qi = GIN_WR_QP(wc[i].wr_id);
            if (peer >= (uint32_t)c->nranks || qi >= c->peers[peer].nqps) {
                WARN("NET/railnet/GIN: device %s: completion with unknown wr_id 0x%llx", c->dev_name,
                     (unsigned long long)wc[i].wr_id);
                gin_fail(c, ncclInternalError);
                continue;
            }
            if (wc[i].status != IBV_WC_SUCCESS) {
                gin_report_wc(c, &wc[i]);
                continue; /* retires nothing: what it and its flushes covered never completes */
            }
            c->stats.cqes++;
            struct gin_qp *q = &c->peers[peer].qps[qi];
            uint64_t seq = GIN_WR_SEQ(wc[i].wr_id);
            if (seq > q->retired)
                q->retired = seq; /* a QP completes in order: all before it are done too */
        }
        if (n < POLL_BATCH)
            return;
    }
}

/* lanes_mu held */
static ncclResult_t progress_locked(struct gin_coll *c)
{
    if (c->cq)
        poll_cq(c); /* none without proxy QPs: progress only watches the device (gin_check_async) */
    unsigned start = c->lane_turn++;
    for (int k = 0; k < c->nlanes; k++) {
        struct gin_lane *l = c->lanes[(start + (unsigned)k) % (unsigned)c->nlanes];
        for (int p = 0; p < c->nranks && l->queued; p++)
            if (l->lp[p].head != l->lp[p].tail)
                peer_advance(c, l, (uint32_t)p);
    }
    gin_check_async(c);
    if (gin_outstanding(c))
        gin_check_peers(c);
    return c->error;
}

ncclResult_t gin_progress(void *coll_comm)
{
    struct gin_coll *c = gin_coll_of(coll_comm, "ginProgress");
    if (!c)
        return ncclInvalidArgument;
    pthread_mutex_lock(&c->lanes_mu);
    ncclResult_t e = progress_locked(c);
    pthread_mutex_unlock(&c->lanes_mu);
    return e;
}

/* Checks shared by puts and gets; fills the data part of r's parameters
 * into *w (NULL windows allowed for size 0): bytes between the local window
 * at local_off and rank's part of the remote window at remote_off, towards
 * the remote one for a put, from it for a get. */
static ncclResult_t check_xfer(struct gin_coll *c, const char *what, int get, uint64_t local_off, void *local_mh,
                               size_t size, uint64_t remote_off, void *remote_mh, uint32_t rank, struct gin_req *w)
{
    if (rank >= (uint32_t)c->nranks) {
        WARN("NET/railnet/GIN: %s: rank %u out of range (%d ranks)", what, rank, c->nranks);
        return ncclInvalidArgument;
    }
    if (size == 0)
        return ncclSuccess;
    if (size >= GIN_MAX_PUT) {
        WARN("NET/railnet/GIN: %s: %zu bytes in one %s; at most %zu", what, size, get ? "get" : "put",
             GIN_MAX_PUT - 1);
        return ncclInvalidArgument;
    }
    struct gin_mr *loc = gin_mr_of(c, local_mh, what);
    struct gin_mr *rem = gin_mr_of(c, remote_mh, what);
    if (!loc || !rem)
        return ncclInvalidArgument;
    if (local_off > loc->size || size > loc->size - local_off || remote_off > rem->len[rank] ||
        size > rem->len[rank] - remote_off) {
        if (get)
            WARN("NET/railnet/GIN: %s: %zu bytes from offset %llu of rank %u's %llu-byte window to offset %llu of a "
                 "%llu-byte window: out of bounds",
                 what, size, (unsigned long long)remote_off, rank, (unsigned long long)rem->len[rank],
                 (unsigned long long)local_off, (unsigned long long)loc->size);
        else
            WARN("NET/railnet/GIN: %s: %zu bytes from offset %llu of a %llu-byte window to offset %llu of rank %u's "
                 "%llu-byte window: out of bounds",
                 what, size, (unsigned long long)local_off, (unsigned long long)loc->size,
                 (unsigned long long)remote_off, rank, (unsigned long long)rem->len[rank]);
        return ncclInvalidArgument;
    }
    w->has_data = 1;
    w->is_get = (uint8_t)get;
    w->laddr = loc->base + local_off;
    w->lkey = loc->lkey;
    w->src_host = !get && !mr_is_cuda(loc->mh);
    w->len = (uint32_t)size;
    w->raddr = rem->addr[rank] + remote_off;
    w->rkey = rem->rkey[rank];
    return ncclSuccess;
}

static ncclResult_t submit(struct gin_coll *c, struct gin_lane *l, const struct gin_req *tmpl, uint32_t rank,
                           void **request)
{
    struct gin_req *r = req_get(c, l, rank);
    if (!r) {
        /* more than GIN_PEER_REQS (NCCL's own bound) outstanding to one
         * peer in this lane: not now; the caller tests its requests and
         * retries */
        TRACE(NCCL_NET, "NET/railnet/GIN: rank %d: %d requests outstanding to rank %u; try again", c->rank,
              GIN_PEER_REQS, rank);
        return ncclSuccess;
    }
    uint32_t index = r->index;
    *r = *tmpl;
    r->peer = rank;
    r->index = index;
    r->state = GR_QUEUED;
    if (!r->has_data && !r->has_signal) {
        r->state = GR_DONE; /* an empty put or get has nothing to deliver */
        pending_add(c, l, -1);
    } else {
        struct gin_lane_peer *lp = &l->lp[rank];
        lp->fifo[lp->tail++ % GIN_PEER_REQS] = index % GIN_PEER_REQS;
        l->queued++;
        peer_advance(c, l, rank);
    }
    *request = r;
    return c->error;
}

ncclResult_t gin_lane_put(struct gin_coll *c, struct gin_lane *l, const char *what, uint64_t src_off, void *src_mh,
                          size_t size, uint64_t dst_off, void *dst_mh, uint32_t rank, uint64_t sig_off, void *sig_mh,
                          uint64_t sig_value, uint32_t sig_op, void **request)
{
    *request = NULL;
    if (c->error)
        return c->error;
    if (sig_mh && sig_op != NCCL_NET_SIGNAL_OP_INC && sig_op != NCCL_NET_SIGNAL_OP_ADD) {
        WARN("NET/railnet/GIN: %s: signal op %u is neither INC (%d) nor ADD (%d)", what, sig_op,
             NCCL_NET_SIGNAL_OP_INC, NCCL_NET_SIGNAL_OP_ADD);
        return ncclInvalidArgument;
    }
    struct gin_req t;
    memset(&t, 0, sizeof(t));
    CHECK(check_xfer(c, what, 0, src_off, src_mh, size, dst_off, dst_mh, rank, &t));
    if (sig_mh) {
        char sig_what[64];
        snprintf(sig_what, sizeof(sig_what), "%s (signal window)", what);
        struct gin_mr *sig = gin_mr_of(c, sig_mh, sig_what);
        if (!sig)
            return ncclInvalidArgument;
        if (sig_off % 8 || sig_off > sig->len[rank] || sig->len[rank] - sig_off < 8 ||
            (sig->addr[rank] + sig_off) % 8) {
            WARN("NET/railnet/GIN: %s: signal at offset %llu of rank %u's %llu-byte window is not an aligned "
                 "64-bit word inside it",
                 what, (unsigned long long)sig_off, rank, (unsigned long long)sig->len[rank]);
            return ncclInvalidArgument;
        }
        gin_rma_release_note_signal(sig, sig_off);   /* what a failure release advances */
        t.has_signal = 1;
        t.sig_raddr = sig->addr[rank] + sig_off;
        t.sig_rkey = sig->rkey[rank];
        t.sig_add = sig_op == NCCL_NET_SIGNAL_OP_INC ? 1 : sig_value;
    }
    return submit(c, l, &t, rank, request);
}

ncclResult_t gin_lane_failed_request(struct gin_coll *c, struct gin_lane *l, uint32_t rank, void **request)
{
    *request = NULL;
    if (rank >= (uint32_t)c->nranks)
        return ncclInvalidArgument;
    struct gin_req *r = req_get(c, l, rank);
    if (!r)
        return c->error;
    r->state = GR_DONE;
    pending_add(c, l, -1);
    __atomic_fetch_add(&c->fail_posts, 1, __ATOMIC_RELAXED);   /* kernels still post: the release's pace */
    *request = r;
    return ncclSuccess;
}

ncclResult_t gin_lane_get(struct gin_coll *c, struct gin_lane *l, const char *what, uint64_t remote_off,
                          void *remote_mh, size_t size, uint64_t local_off, void *local_mh, uint32_t rank,
                          void **request)
{
    *request = NULL;
    if (c->error)
        return c->error;
    struct gin_req t;
    memset(&t, 0, sizeof(t));
    CHECK(check_xfer(c, what, 1, local_off, local_mh, size, remote_off, remote_mh, rank, &t));
    return submit(c, l, &t, rank, request);
}

ncclResult_t gin_lane_flush(struct gin_coll *c, struct gin_lane *l, const char *what, void *mh, void **request)
{
    *request = NULL;
    if (c->error)
        return c->error;
    struct gin_mr *m = gin_mr_of(c, mh, what);
    if (!m)
        return ncclInvalidArgument;
    if (!mr_needs_gdr_flush(m->mh) || m->size == 0)
        return ncclSuccess; /* nothing between the NIC and the CPU to wait for */
    /* one byte of the window read back through this rank's QP to itself,
     * landing in the scratch page */
    struct gin_req t;
    memset(&t, 0, sizeof(t));
    t.has_data = 1;
    t.is_get = 1;
    t.laddr = (uint64_t)(uintptr_t)&c->scratch[(uint32_t)c->rank % 512];
    t.lkey = c->scratch_lkey;
    t.len = 1;
    t.raddr = m->addr[c->rank];
    t.rkey = m->rkey[c->rank];
    return submit(c, l, &t, (uint32_t)c->rank, request);
}

ncclResult_t gin_iput(void *coll_comm, uint64_t src_off, void *src_mh, size_t size, uint64_t dst_off, void *dst_mh,
                      uint32_t rank, void **request)
{
    if (request)
        *request = NULL;
    struct gin_coll *c = gin_coll_of(coll_comm, "iput");
    if (!c || !request)
        return ncclInvalidArgument;
    CHECK(gin_proxy_only(c, "iput"));
    return gin_lane_put(c, c->lane0, "iput", src_off, src_mh, size, dst_off, dst_mh, rank, 0, NULL, 0, 0, request);
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
    CHECK(gin_proxy_only(c, "iputSignal"));
    if (!sig_mh) {
        (void)gin_mr_of(c, sig_mh, "iputSignal (signal window)"); /* says why */
        return ncclInvalidArgument;
    }
    return gin_lane_put(c, c->lane0, "iputSignal", src_off, src_mh, size, dst_off, dst_mh, rank, sig_off, sig_mh,
                        sig_value, sig_op, request);
}

ncclResult_t gin_test(void *coll_comm, void *request, int *done)
{
    if (done)
        *done = 0;
    struct gin_coll *c = gin_coll_of(coll_comm, "test");
    if (!c || !done)
        return ncclInvalidArgument;
    CHECK(gin_proxy_only(c, "test"));
    struct gin_req *r = request;
    pthread_mutex_lock(&c->lanes_mu);
    /* NCCL hands back what a put or get gave it; anything else (a pointer
     * into the middle of an element included) is refused before a field
     * is read */
    struct gin_lane *l = lane_of_req(c, r);
    if (!l) {
        pthread_mutex_unlock(&c->lanes_mu);
        WARN("NET/railnet/GIN: test: %p is not a live request of this collComm", request);
        return ncclInvalidArgument;
    }
    for (int pass = 0; pass < 2 && r->state != GR_DONE; pass++) {
        if (r->state == GR_POSTED && req_retired(c, r)) {
            r->state = GR_DONE;
            pending_add(c, l, -1);
        } else if (pass == 0) {
            (void)progress_locked(c);
        } else if (r->state == GR_POSTED && !c->error) {
            test_cover(c, l, r);
        }
    }
    ncclResult_t e = c->error;
    if (r->state != GR_DONE && e != ncclSuccess && __atomic_load_n(&c->errors_by_query, __ATOMIC_ACQUIRE)) {
        /* an RMA request of a failed collComm: complete (its work requests
         * still retire on the QPs by sequence number), the error goes
         * through queryLastError (gin_rma.c says why) */
        r->state = GR_DONE;
        pending_add(c, l, -1);
    }
    if (r->state == GR_DONE) {
        *done = 1;
        req_put(c, l, r);
        e = ncclSuccess;
    }
    pthread_mutex_unlock(&c->lanes_mu);
    return e;
}
