/* responder.c: the receive side of a QP.  One thread per incoming
 * connection (a peer requester) runs the checks in the order the IB spec
 * lists them, each with the status the requester gets:
 *   hello: magic/version, destination QP exists, QP in RTR/RTS/SQD, the
 *          peer is the QP's configured remote (QPN and GID) -- otherwise
 *          the connection is dropped, as hardware drops such packets, and
 *          the requester ends with IBV_WC_RETRY_EXC_ERR;
 *   request: opcode and sequence (else the connection is dropped);
 *   WRITE/READ: rkey valid, same PD, MR and QP access, bounds
 *          -> NAK IBV_WC_REM_ACCESS_ERR (this QP goes to ERR too, with
 *          IBV_EVENT_QP_ACCESS_ERR);
 *   atomics: the same, and alignment (do_atomic says which status);
 *   SEND/WRITE_IMM: a receive WQE (waits, sending RNR_WAIT, for the RNR
 *          budget -> NAK IBV_WC_RNR_RETRY_EXC_ERR), receive SGEs valid
 *          (-> local IBV_WC_LOC_PROT_ERR, NAK IBV_WC_REM_OP_ERR) and large
 *          enough (-> local IBV_WC_LOC_LEN_ERR, NAK IBV_WC_REM_INV_REQ_ERR).
 * A requester of this host and network namespace may name a WRITE/SEND
 * payload instead of sending it (SN_REQ_CMA): place() pulls it from the
 * requester's memory at the point where it would have read the stream, so
 * order and every check above are the same (cma.c).
 * Requests on one connection execute in order, so a WRITE_WITH_IMM
 * completion means every earlier WRITE of that QP is in memory.  ACKs are
 * coalesced: one cumulative ACK before each blocking read. */
#include "softnic.h"
#include "rbuf.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define READ_PACE_BYTES (256 * 1024)
#define PEND_WC 64

/* A receive completion held back until the ACK (or NAK) covering its
 * request is on the wire: once a receiver sees a completion, the sender's
 * acknowledgement must not depend on the receiver staying alive. */
struct pend_wc {
    struct ibv_wc wc;
    bool solicited;
};

/* Placements whose CUDA writes may be in flight at once (land_writes). */
#define LAND_MAX 32

struct sn_rconn {
    int fd;
    struct sn_qp *qp;
    struct sn_port *port;
    struct sn_rconn *next;
    bool no_kick;             /* this thread is failing the QP itself */
    uint8_t rnr_retry;
    uint32_t peer_qpn;
    uint32_t expect_seq;
    bool ack_pending;
    uint32_t ack_seq;
    int err;                  /* first send error */
    int deferred;             /* placements whose CUDA writes are in flight (land_writes) */
    struct sn_mr *held[LAND_MAX]; /* and their MRs, a reference each until then */
    int npend;
    struct pend_wc pend[PEND_WC];
    struct sn_rbuf rb;
    uint32_t cma_pid;         /* the requester's pid when it may be pulled from */
    int cma_pidfd;            /* and a pidfd of it; -1 otherwise */
    /* the current request's payload when it is pulled (SN_REQ_CMA), else NULL */
    const struct sn_cma_seg *src;
    struct sn_cma_seg src_seg[SN_MAX_SGE];
    int src_nseg;
    uint64_t src_off;
    char *bounce;             /* pulled bytes bound for CUDA memory */
};

#define CMA_BOUNCE (1024 * 1024)

/* Moves len bytes of the current request's payload into mr at addr: off
 * the wire, or pulled from the requester's memory (cma.c). */
static int place(struct sn_rconn *rc, struct sn_mr *mr, uint64_t addr, size_t len)
{
    if (!rc->src)
        return rbuf_place(&rc->rb, mr, addr, len, rc->port);
    if (!mr->gpu) {
        int err = cma_pull(rc->cma_pidfd, rc->cma_pid, rc->src, rc->src_nseg, rc->src_off,
                           mr_host_ptr(mr, addr), len);
        rc->src_off += len;
        return err;
    }
    /* CUDA memory: pulled into host memory first, then copied by the driver */
    if (!rc->bounce && !(rc->bounce = malloc(CMA_BOUNCE)))
        return ENOMEM;
    bool vf_slow = rc->port->conf.vf && !(mr->access & IBV_ACCESS_RELAXED_ORDERING);
    uint64_t since = vf_slow ? sn_now_ns() : 0;   /* as rbuf_place's */
    while (len) {
        size_t n = len < CMA_BOUNCE ? len : CMA_BOUNCE;
        int err = cma_pull(rc->cma_pidfd, rc->cma_pid, rc->src, rc->src_nseg, rc->src_off,
                           rc->bounce, n);
        if (err)
            return err;
        if (vf_slow)
            rate_take(&rc->port->vf_rate, n, since);
        if ((err = mr_write(mr, addr, rc->bounce, n)))
            return err;
        rc->src_off += n;
        addr += n;
        len -= n;
    }
    return 0;
}

/* Lands the writes into CUDA memory this thread left in flight (gpu.c's
 * gpu_defer_writes: one CUDA sync per batch of requests instead of one per
 * write) before anything says they are there: an ACK or other response,
 * a receive completion.  Their placements stay counted in qp->placing until
 * then, so ibv_modify_qp(ERR) still returns only once nothing more lands. */
static int land_writes(struct sn_rconn *rc)
{
    int err = gpu_flush();
    if (rc->deferred) {
        struct sn_qp *qp = rc->qp;
        for (int i = 0; i < rc->deferred; i++)
            mr_put(rc->held[i]);
        pthread_mutex_lock(&qp->lock);
        qp->placing -= rc->deferred;
        rc->deferred = 0;
        if (qp->placing == 0 && qp->placing_waiters > 0)
            pthread_cond_broadcast(&qp->cond);
        pthread_mutex_unlock(&qp->lock);
    }
    if (err && !rc->err)
        rc->err = err;
    return err;
}

static bool qp_receiving(struct sn_qp *qp)
{
    enum ibv_qp_state s = qp->attr.qp_state;
    return !qp->stopping && (s == IBV_QPS_RTR || s == IBV_QPS_RTS || s == IBV_QPS_SQD);
}

/* place() for a request of a QP that still receives: a QP in ERR (moved
 * there by the application while this request waited for its delivery
 * time, for the CPU or for a receive) drops it, as a NIC drops packets for
 * a QP in ERR.  ibv_modify_qp(ERR) waits for a placement under way
 * (qp->placing), so once it returns nothing more lands in this QP's MRs: a
 * failover that writes a chunk again elsewhere relies on it. */
static int place_live(struct sn_rconn *rc, struct sn_mr *mr, uint64_t addr, size_t len)
{
    struct sn_qp *qp = rc->qp;
    pthread_mutex_lock(&qp->lock);
    bool live = qp_receiving(qp);
    if (live)
        qp->placing++;
    pthread_mutex_unlock(&qp->lock);
    if (!live)
        return ECONNABORTED;
    int err = place(rc, mr, addr, len);
    if (gpu_writes_pending()) {
        if (!err && rc->deferred < LAND_MAX) {
            /* the placement and the MR (ibv_dereg_mr waits for it) are
             * given back by land_writes */
            atomic_fetch_add(&mr->refs, 1);
            rc->held[rc->deferred++] = mr;
            return 0;
        }
        land_writes(rc);
    }
    pthread_mutex_lock(&qp->lock);
    /* Only ibv_modify_qp(ERR) waits for the count to reach 0: a broadcast
     * for every write placed woke whatever else sleeps on qp->cond (an idle
     * completer, one wake-up and two context switches per message) */
    if (--qp->placing == 0 && qp->placing_waiters > 0)
        pthread_cond_broadcast(&qp->cond);
    pthread_mutex_unlock(&qp->lock);
    return err;
}

static int send_resp(struct sn_rconn *rc, uint8_t type, uint8_t syndrome, uint32_t seq,
                     uint32_t len)
{
    land_writes(rc);
    struct sn_wire_resp r = { .type = type, .syndrome = syndrome, .seq = seq, .len = len };
    int err = wire_send_all(rc->fd, &r, sizeof(r));
    if (err && !rc->err)
        rc->err = err;
    return err;
}

static void push_pending_wcs(struct sn_rconn *rc)
{
    land_writes(rc);
    for (int i = 0; i < rc->npend; i++)
        cq_push((struct sn_cq *)rc->qp->ibqp.recv_cq, &rc->pend[i].wc, rc->pend[i].solicited);
    rc->npend = 0;
}

static void send_ack(struct sn_rconn *rc)
{
    if (rc->ack_pending) {
        rc->ack_pending = false;
        sn_stat_add(SN_ST_ACKS, 1);
        send_resp(rc, SN_RESP_ACK, 0, rc->ack_seq, 0);
    }
}

/* The coalesced ACK goes out, then the completions it covers appear. */
static void flush_ack(void *arg)
{
    struct sn_rconn *rc = arg;
    send_ack(rc);
    push_pending_wcs(rc);
}

static void qp_wait(struct sn_qp *qp, long ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += ms * 1000000L;
    while (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&qp->cond, &qp->lock, &ts);
}

/* Fails the request with a NAK; with qp_err the QP goes to ERR too. */
static void fail_request(struct sn_rconn *rc, uint32_t seq, enum ibv_wc_status nak, bool qp_err,
                         enum ibv_event_type ev)
{
    /* counted before the requester can learn of it */
    atomic_fetch_add(&rc->port->cnt.errors, 1);
    atomic_fetch_add(&rc->qp->cnt.errors, 1);
    send_ack(rc);
    send_resp(rc, SN_RESP_NAK, (uint8_t)nak, seq, 0);
    push_pending_wcs(rc);
    if (qp_err) {
        pthread_mutex_lock(&rc->qp->lock);
        rc->no_kick = true;
        bool was_err = rc->qp->attr.qp_state == IBV_QPS_ERR;
        qp_error_locked(rc->qp, UINT64_MAX, IBV_WC_WR_FLUSH_ERR, 0);
        pthread_mutex_unlock(&rc->qp->lock);
        if (!was_err)
            async_post_qp(&rc->qp->ibqp, ev);
    }
}

static void recv_wc(struct sn_rconn *rc, uint64_t wr_id, enum ibv_wc_status st,
                    enum ibv_wc_opcode op, uint32_t len, const struct sn_wire_req *h)
{
    struct ibv_wc wc;
    memset(&wc, 0, sizeof(wc));
    wc.wr_id = wr_id;
    wc.status = st;
    wc.opcode = op;
    wc.byte_len = len;
    wc.qp_num = rc->qp->ibqp.qp_num;
    wc.src_qp = rc->peer_qpn;
    if (h->op == SN_OP_SEND_IMM || h->op == SN_OP_WRITE_IMM) {
        wc.wc_flags = IBV_WC_WITH_IMM;
        wc.imm_data = h->imm;
    }
    /* do_request flushes before the array can fill: one WC per request */
    rc->pend[rc->npend].wc = wc;
    rc->pend[rc->npend].solicited = (h->flags & SN_REQ_SOLICITED) != 0;
    rc->npend++;
}

/* Gets a receive WQE, waiting up to the RNR budget; false on failure
 * (NAK already sent when the budget ran out). */
static bool take_recv(struct sn_rconn *rc, const struct sn_wire_req *h, struct sn_rwqe *out)
{
    struct sn_qp *qp = rc->qp;
    if (qp_take_recv(qp, out))
        return true;
    flush_ack(rc);
    uint64_t start = sn_now_ns(), last_note = 0;
    uint64_t budget = qp_rnr_budget_ns(rc->rnr_retry, qp->attr.min_rnr_timer);
    for (;;) {
        uint64_t now = sn_now_ns();
        if (now - start > budget) {
            fail_request(rc, h->seq, IBV_WC_RNR_RETRY_EXC_ERR, false, 0);
            return false;
        }
        if (now - last_note > 20000000ull) {
            /* one RNR NAK per retry, as the requester's keep-alive */
            atomic_fetch_add(&qp->cnt.rnr_naks, 1);
            if (send_resp(rc, SN_RESP_RNR_WAIT, 0, h->seq, 0))
                return false;
            last_note = now;
        }
        pthread_mutex_lock(&qp->lock);
        bool alive = qp_receiving(qp);
        if (alive && !qp->ibqp.srq && qp->rq_count == 0) {
            qp->recv_waiters++;
            qp_wait(qp, 5);
            qp->recv_waiters--;
        }
        pthread_mutex_unlock(&qp->lock);
        if (!alive)
            return false;
        if (qp->ibqp.srq) {
            struct sn_srq *srq = (struct sn_srq *)qp->ibqp.srq;
            pthread_mutex_lock(&srq->lock);
            if (srq->count == 0) {
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                ts.tv_nsec += 5000000L;
                if (ts.tv_nsec >= 1000000000L) {
                    ts.tv_sec++;
                    ts.tv_nsec -= 1000000000L;
                }
                pthread_cond_timedwait(&srq->cond, &srq->lock, &ts);
            }
            pthread_mutex_unlock(&srq->lock);
        }
        if (qp_take_recv(qp, out))
            return true;
    }
}

/* Places a payload into the SGEs of a receive WQE. */
static int do_send(struct sn_rconn *rc, const struct sn_wire_req *h)
{
    struct sn_rwqe r;
    if (!take_recv(rc, h, &r))
        return ECONNABORTED;
    struct sn_qp *qp = rc->qp;
    uint64_t room = 0;
    struct sn_mr *mrs[SN_MAX_SGE] = { 0 };
    int bad = 0;
    for (int s = 0; s < r.num_sge && !bad; s++) {
        if (!r.sge[s].length)
            continue;
        if (mr_get(r.sge[s].lkey, false, qp->ibqp.pd, IBV_ACCESS_LOCAL_WRITE, r.sge[s].addr,
                   r.sge[s].length, &mrs[s]))
            bad = 1;
        room += r.sge[s].length;
    }
    if (!bad && room < h->len)
        bad = 2;
    int err = 0;
    if (bad) {
        for (int s = 0; s < r.num_sge; s++)
            mr_put(mrs[s]);
        recv_wc(rc, r.wr_id, bad == 1 ? IBV_WC_LOC_PROT_ERR : IBV_WC_LOC_LEN_ERR, IBV_WC_RECV, 0, h);
        fail_request(rc, h->seq, bad == 1 ? IBV_WC_REM_OP_ERR : IBV_WC_REM_INV_REQ_ERR, true,
                     IBV_EVENT_QP_REQ_ERR);
        return ECONNABORTED;
    }
    uint32_t left = h->len;
    for (int s = 0; s < r.num_sge && left && !err; s++) {
        uint32_t n = r.sge[s].length < left ? r.sge[s].length : left;
        if (n)
            err = place_live(rc, mrs[s], r.sge[s].addr, n);
        left -= n;
    }
    for (int s = 0; s < r.num_sge; s++)
        mr_put(mrs[s]);
    if (err == ECONNABORTED) {
        recv_wc(rc, r.wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, 0, h);
        push_pending_wcs(rc);
    }
    if (err)
        return err;
    recv_wc(rc, r.wr_id, IBV_WC_SUCCESS, IBV_WC_RECV, h->len, h);
    return 0;
}

static int check_remote(struct sn_rconn *rc, const struct sn_wire_req *h, int access,
                        struct sn_mr **mr)
{
    *mr = NULL;
    int err = 0;
    if (!(rc->qp->attr.qp_access_flags & (unsigned)access))
        err = EACCES;
    else if (h->len)   /* a zero-length RDMA access checks no key */
        err = mr_get(h->rkey, true, rc->qp->ibqp.pd, access, h->raddr, h->len, mr);
    if (err)
        SN_DEBUG("responder: QP 0x%x: op %u seq %u refused (%s): addr 0x%llx len %u", rc->qp->ibqp.qp_num,
                 (unsigned)h->op, (unsigned)h->seq, strerror(err), (unsigned long long)h->raddr, (unsigned)h->len);
    return err;
}

static int do_write(struct sn_rconn *rc, const struct sn_wire_req *h)
{
    struct sn_mr *mr;
    if (check_remote(rc, h, IBV_ACCESS_REMOTE_WRITE, &mr)) {
        fail_request(rc, h->seq, IBV_WC_REM_ACCESS_ERR, true, IBV_EVENT_QP_ACCESS_ERR);
        return ECONNABORTED;
    }
    struct sn_rwqe r;
    if (h->op == SN_OP_WRITE_IMM) {
        /* no MR reference while waiting for a receive (RNR): a
         * deregistration must not wait for the peer's receive */
        mr_put(mr);
        if (!take_recv(rc, h, &r))
            return ECONNABORTED;
        if (check_remote(rc, h, IBV_ACCESS_REMOTE_WRITE, &mr)) {
            recv_wc(rc, r.wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV_RDMA_WITH_IMM, 0, h);
            fail_request(rc, h->seq, IBV_WC_REM_ACCESS_ERR, true, IBV_EVENT_QP_ACCESS_ERR);
            return ECONNABORTED;
        }
    }
    int err = h->len ? place_live(rc, mr, h->raddr, h->len) : 0;
    mr_put(mr);
    if (err == ECONNABORTED && h->op == SN_OP_WRITE_IMM) {
        /* the QP went to ERR: the receive WQE taken for it flushes */
        recv_wc(rc, r.wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV_RDMA_WITH_IMM, 0, h);
        push_pending_wcs(rc);
    }
    if (err)
        return err;
    if (h->op == SN_OP_WRITE_IMM)
        recv_wc(rc, r.wr_id, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, h->len, h);
    return 0;
}

static int do_read(struct sn_rconn *rc, const struct sn_wire_req *h)
{
    struct sn_mr *mr;
    if (check_remote(rc, h, IBV_ACCESS_REMOTE_READ, &mr)) {
        fail_request(rc, h->seq, IBV_WC_REM_ACCESS_ERR, true, IBV_EVENT_QP_ACCESS_ERR);
        return ECONNABORTED;
    }
    struct sn_wire_resp r = { .type = SN_RESP_READ, .seq = h->seq, .len = h->len };
    uint64_t asked_ns = sn_now_ns();   /* the response's bytes wait from here */
    /* GPU memory goes through a bounce of one paced piece, read piece by
     * piece as a NIC reads it: a 2 GiB READ must not allocate 2 GiB */
    char *host = NULL, *bounce = NULL;
    int err = 0;
    if (h->len) {
        if (mr->gpu) {
            if (!(bounce = malloc(h->len < READ_PACE_BYTES ? h->len : READ_PACE_BYTES)))
                err = EIO;
        } else {
            host = mr_host_ptr(mr, h->raddr);
        }
    }
    land_writes(rc);
    rc->ack_pending = false;   /* the response acknowledges everything before */
    /* header first, then the data in paced pieces: the requester's
     * completer is reading (not timing out) once the header is there */
    for (uint32_t off = 0, first = 1; !err && (first || off < h->len); first = 0) {
        uint32_t n = h->len - off < READ_PACE_BYTES ? h->len - off : READ_PACE_BYTES;
        struct iovec iov[2];
        int cnt = 0;
        if (first)
            iov[cnt++] = (struct iovec){ &r, sizeof(r) };
        if (n && bounce && mr_read(mr, h->raddr + off, bounce, n)) {
            err = EIO;
            break;
        }
        if (n)
            iov[cnt++] = (struct iovec){ bounce ? bounce : host + off, n };
        rate_take(&rc->port->tx_rate, n, asked_ns);
        /* counted before they leave: the READ may complete at once */
        atomic_fetch_add(&rc->port->cnt.tx_bytes, n);
        err = wire_writev_all(rc->fd, iov, cnt);
        if (!err)
            fault_tx_bytes(rc->qp->dev, rc->port, n);
        else
            atomic_fetch_sub(&rc->port->cnt.tx_bytes, n);
        off += n;
    }
    free(bounce);
    mr_put(mr);
    return err;
}

/* An atomic: checks as a ConnectX makes them, executes (atomic.c), and
 * answers with the original value.  Statuses at the requester:
 *   QP or MR without REMOTE_ATOMIC, bad rkey, word outside the MR
 *     -> IBV_WC_REM_ACCESS_ERR (mlx5 syndrome 0x13, as for READ/WRITE);
 *   target not 8-byte aligned, as an address or in the memory it maps to
 *     -> IBV_WC_REM_INV_REQ_ERR: the IBA makes a misaligned atomic a class
 *     C error, NAK "invalid request", which is what ConnectX and rxe send;
 *   CUDA failing on a GPU target -> IBV_WC_REM_OP_ERR.
 * Requests on a connection run in order, so an atomic sees the data of
 * every WRITE posted before it on the same QP. */
static int do_atomic(struct sn_rconn *rc, const struct sn_wire_req *h)
{
    int err = rbuf_need(&rc->rb, sizeof(struct sn_wire_atomic));
    if (err)
        return err;
    struct sn_wire_atomic a;
    memcpy(&a, rbuf_take(&rc->rb, sizeof(a)), sizeof(a));
    struct sn_mr *mr = NULL;
    if (h->raddr % SN_ATOMIC_SIZE) {
        fail_request(rc, h->seq, IBV_WC_REM_INV_REQ_ERR, true, IBV_EVENT_QP_REQ_ERR);
        return ECONNABORTED;
    }
    if (check_remote(rc, h, IBV_ACCESS_REMOTE_ATOMIC, &mr)) {
        fail_request(rc, h->seq, IBV_WC_REM_ACCESS_ERR, true, IBV_EVENT_QP_ACCESS_ERR);
        return ECONNABORTED;
    }
    /* the memory itself aligned too: an MR whose iova is not its address
     * (IBV_ACCESS_ZERO_BASED, ibv_reg_mr_iova) can map an aligned raddr to
     * a misaligned word, which a CPU atomic would split or fault on */
    if ((uintptr_t)mr_host_ptr(mr, h->raddr) % SN_ATOMIC_SIZE) {
        mr_put(mr);
        fail_request(rc, h->seq, IBV_WC_REM_INV_REQ_ERR, true, IBV_EVENT_QP_REQ_ERR);
        return ECONNABORTED;
    }
    uint64_t old = 0;
    err = atomic_execute(mr, h->raddr, h->op == SN_OP_ATOMIC_CS, a.swap_add, a.compare, &old);
    mr_put(mr);
    if (err) {
        fail_request(rc, h->seq, IBV_WC_REM_OP_ERR, true, IBV_EVENT_QP_REQ_ERR);
        return ECONNABORTED;
    }
    struct sn_wire_resp r = { .type = SN_RESP_ATOMIC, .seq = h->seq, .len = SN_ATOMIC_SIZE };
    struct iovec iov[2] = { { &r, sizeof(r) }, { &old, sizeof(old) } };
    land_writes(rc);
    rc->ack_pending = false;   /* the response acknowledges everything before */
    /* counted before they leave: the atomic may complete at once */
    atomic_fetch_add(&rc->port->cnt.tx_bytes, SN_ATOMIC_SIZE);
    atomic_fetch_add(&rc->port->cnt.rx_packets, 1);
    atomic_fetch_add(&rc->qp->cnt.rx_packets, 1);
    err = wire_writev_all(rc->fd, iov, 2);
    if (err) {
        atomic_fetch_sub(&rc->port->cnt.tx_bytes, SN_ATOMIC_SIZE);
        atomic_fetch_sub(&rc->port->cnt.rx_packets, 1);
        atomic_fetch_sub(&rc->qp->cnt.rx_packets, 1);
    }
    if (err && !rc->err)
        rc->err = err;
    return err;
}

/* Waits for a request's deliver_ns (the added latency of the requester's
 * port) on the monotonic clock, no longer than SN_MAX_LATENCY_US from now:
 * the stamp comes off the wire, and another host's clock is not ours. In
 * slices, so that a QP destroyed meanwhile does not wait for it: 0, or
 * ECONNABORTED when the QP stopped receiving. */
static int wait_delivery(struct sn_rconn *rc, uint64_t deliver_ns)
{
    const uint64_t slice = 10000000ull; /* 10 ms */
    uint64_t now = sn_now_ns();
    uint64_t until = deliver_ns - now > (uint64_t)SN_MAX_LATENCY_US * 1000ull
                         ? now + (uint64_t)SN_MAX_LATENCY_US * 1000ull
                         : deliver_ns;
    while ((now = sn_now_ns()) < until) {
        sn_sleep_until_ns(until - now > slice ? now + slice : until);
        pthread_mutex_lock(&rc->qp->lock);
        bool alive = qp_receiving(rc->qp);
        pthread_mutex_unlock(&rc->qp->lock);
        if (!alive)
            return ECONNABORTED;
    }
    return 0;
}

static int do_request(struct sn_rconn *rc)
{
    int err = rbuf_need(&rc->rb, sizeof(struct sn_wire_req));
    if (err)
        return err;
    struct sn_wire_req h;
    memcpy(&h, rbuf_take(&rc->rb, sizeof(h)), sizeof(h));
    bool atomic = h.op == SN_OP_ATOMIC_FA || h.op == SN_OP_ATOMIC_CS;
    if (h.op < SN_OP_SEND || h.op > SN_OP_ATOMIC_CS || h.len > SN_MAX_MSG ||
        h.seq != rc->expect_seq || (atomic && h.len != SN_ATOMIC_SIZE))
        return EPROTO;
    rc->expect_seq++;
    rc->src = NULL;
    if (h.flags & SN_REQ_CMA) {
        /* the payload's whereabouts in the requester: only on a connection
         * whose peer was verified, only for WRITE/SEND, and exactly len */
        if (!rc->cma_pid || h.op > SN_OP_WRITE_IMM || !h.len ||
            (err = rbuf_need(&rc->rb, sizeof(struct sn_wire_cma))))
            return err ? err : EPROTO;
        struct sn_wire_cma d;
        memcpy(&d, rbuf_take(&rc->rb, sizeof(d)), sizeof(d));
        if (d.nseg < 1 || d.nseg > SN_MAX_SGE ||
            (err = rbuf_need(&rc->rb, d.nseg * sizeof(struct sn_cma_seg))))
            return err ? err : EPROTO;
        memcpy(rc->src_seg, rbuf_take(&rc->rb, d.nseg * sizeof(struct sn_cma_seg)),
               d.nseg * sizeof(struct sn_cma_seg));
        rc->src = rc->src_seg;
        rc->src_nseg = (int)d.nseg;
        rc->src_off = 0;
        uint64_t total = 0;
        for (uint32_t s = 0; s < d.nseg; s++) {
            if (rc->src[s].len > SN_MAX_MSG)
                return EPROTO;
            total += rc->src[s].len;
        }
        if (total != h.len)
            return EPROTO;
    }
    /* a link that is down passes nothing: the requester times out */
    while (atomic_load(&rc->port->state) != IBV_PORT_ACTIVE) {
        flush_ack(rc);
        usleep(2000);
        fault_poll();
        pthread_mutex_lock(&rc->qp->lock);
        bool alive = qp_receiving(rc->qp);
        pthread_mutex_unlock(&rc->qp->lock);
        if (!alive)
            return ECONNABORTED;
    }
    if (h.deliver_ns && h.deliver_ns > sn_now_ns()) {
        flush_ack(rc);
        if (wait_delivery(rc, h.deliver_ns))
            return ECONNABORTED;
    }
    switch (h.op) {
    case SN_OP_SEND:
    case SN_OP_SEND_IMM:
        err = do_send(rc, &h);
        break;
    case SN_OP_WRITE:
    case SN_OP_WRITE_IMM:
        err = do_write(rc, &h);
        break;
    case SN_OP_ATOMIC_FA:
    case SN_OP_ATOMIC_CS:
        err = do_atomic(rc, &h);
        break;
    default:
        err = do_read(rc, &h);
        break;
    }
    if (err)
        return err;
    sn_stat_add(SN_ST_REQUESTS, 1);
    if (h.op != SN_OP_READ && !atomic) {
        struct sn_qp *qp = rc->qp;
        int mtu = qp->attr.path_mtu;
        uint64_t mtu_bytes = 128u << mtu;
        uint64_t pkts = (h.len + mtu_bytes - 1) / mtu_bytes;
        atomic_fetch_add(&rc->port->cnt.rx_bytes, h.len);
        atomic_fetch_add(&rc->port->cnt.rx_packets, pkts ? pkts : 1);
        atomic_fetch_add(&qp->cnt.rx_bytes, h.len);
        atomic_fetch_add(&qp->cnt.rx_packets, pkts ? pkts : 1);
        if (rc->src) {
            atomic_fetch_add(&rc->port->cnt.fast_bytes, h.len);
            atomic_fetch_add(&qp->cnt.fast_bytes, h.len);
        }
        rc->ack_pending = true;
        rc->ack_seq = h.seq;
        /* a pulled payload never blocks this thread on the stream, where
         * the coalesced ACK would go out: it goes now, or the requester's
         * completions and our receive completions would wait for the
         * stream to run dry */
        if (rc->npend == PEND_WC || rc->src)
            flush_ack(rc);
    }
    return rc->err;
}

static int read_hello(int fd, struct sn_wire_hello *h)
{
    struct timeval tv = { .tv_sec = 5 };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    int err = wire_recv_all(fd, h, sizeof(*h));
    tv.tv_sec = 0;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (!err && (h->magic != SN_WIRE_MAGIC || h->version != SN_WIRE_VERSION || h->rnr_retry > 7))
        err = EPROTO;
    return err;
}

/* Waits for the QP to reach RTR and checks the peer; qp->lock held. */
static bool accept_peer_locked(struct sn_rconn *rc, const struct sn_wire_hello *h)
{
    struct sn_qp *qp = rc->qp;
    while (!qp->stopping && (qp->attr.qp_state == IBV_QPS_RESET || qp->attr.qp_state == IBV_QPS_INIT))
        qp_wait(qp, 50);
    if (!qp_receiving(qp) || !qp->port)
        return false;
    if (h->src_qpn != qp->attr.dest_qp_num ||
        memcmp(h->src_gid, qp->attr.ah_attr.grh.dgid.raw, 16) != 0)
        return false;
    rc->port = qp->port;
    return true;
}

/* After a NAK: let the requester read it before the connection closes. */
static void drain_and_close(int fd)
{
    shutdown(fd, SHUT_WR);
    struct timeval tv = { .tv_sec = 2 };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    char buf[65536];
    uint64_t deadline = sn_now_ns() + 2000000000ull;
    while (sn_now_ns() < deadline && recv(fd, buf, sizeof(buf), 0) > 0)
        ;
    close(fd);
}

static void *responder_main(void *arg)
{
    struct sn_rconn *rc = arg;
    struct sn_wire_hello h;
    int fd = rc->fd;
    sn_nic_thread_init();
    sn_stats_role(SN_ROLE_RESPONDER);
    gpu_defer_writes(true);
    if (read_hello(fd, &h) || !(rc->qp = wire_qp_attach(h.dst_qpn))) {
        close(fd);
        free(rc);
        return NULL;
    }
    struct sn_qp *qp = rc->qp;
    pthread_mutex_lock(&qp->lock);
    rc->next = qp->rconns;
    qp->rconns = rc;
    bool ok = accept_peer_locked(rc, &h);
    pthread_mutex_unlock(&qp->lock);
    int err = ECONNABORTED;
    rc->rnr_retry = h.rnr_retry;
    rc->peer_qpn = h.src_qpn;
    if (ok && (h.hflags & SN_HELLO_CMA)) {
        /* answered before anything else: the requester waits for it (requester.c) */
        rc->cma_pidfd = cma_accept_peer(fd, &h);
        bool pull = rc->cma_pidfd >= 0;
        rc->cma_pid = pull ? h.pid : 0;
        SN_DEBUG("responder: QP 0x%x: peer QP 0x%x pid %u: %s", qp->ibqp.qp_num, h.src_qpn, h.pid,
                 pull ? "same host, payloads by cross-memory attach" : "payloads on the wire");
        send_resp(rc, SN_RESP_HELLO, pull ? 1 : 0, 0, 0);
    }
    if (ok && !(err = rbuf_init(&rc->rb, fd))) {
        rc->rb.before_block = flush_ack;
        rc->rb.arg = rc;
        /* a GPU-driven requester (a kernel's put + quiet loop) sends its
         * next request a round trip after this one's ACK: poll for it, as
         * its completer polls for the ACK (config.c, SOFTNIC_ACK_POLL_US) */
        rc->rb.poll_next = (h.hflags & SN_HELLO_POLL) && sn_ack_poll_ns();
        if (rc->rb.poll_next)
            sn_ack_poll_conn();
        while (!(err = do_request(rc)))
            ;
        /* a peer closing is normal; anything else is a softnic problem worth a line */
        if (err == EIO || err == EFAULT || err == EPROTO || err == ENOMEM || err == ENODEV)
            SN_LOG("responder: QP 0x%x: connection from QP 0x%x dropped: %s", qp->ibqp.qp_num, rc->peer_qpn,
                   strerror(err));
        flush_ack(rc);
        rbuf_free(&rc->rb);
        free(rc->bounce);
    }
    if (rc->cma_pidfd >= 0)
        close(rc->cma_pidfd);
    pthread_mutex_lock(&qp->lock);
    for (struct sn_rconn **pp = &qp->rconns; *pp; pp = &(*pp)->next)
        if (*pp == rc) {
            *pp = rc->next;
            break;
        }
    bool nak_sent = err == ECONNABORTED && ok;
    qp->nresp--;
    pthread_cond_broadcast(&qp->cond);
    pthread_mutex_unlock(&qp->lock);
    /* qp may be freed from here on */
    if (nak_sent)
        drain_and_close(fd);
    else
        close(fd);
    free(rc);
    return NULL;
}

void responder_spawn(int fd)
{
    struct sn_rconn *rc = calloc(1, sizeof(*rc));
    pthread_t th;
    pthread_attr_t at;
    if (!rc) {
        close(fd);
        return;
    }
    rc->fd = fd;
    rc->cma_pidfd = -1;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&th, &at, responder_main, rc)) {
        close(fd);
        free(rc);
    }
    pthread_attr_destroy(&at);
}

void responder_kick_locked(struct sn_qp *qp)
{
    for (struct sn_rconn *rc = qp->rconns; rc; rc = rc->next)
        if (!rc->no_kick)
            shutdown(rc->fd, SHUT_RDWR);
}

void responder_stop_qp(struct sn_qp *qp)
{
    pthread_mutex_lock(&qp->lock);
    qp->stopping = true;
    responder_kick_locked(qp);
    while (qp->nresp > 0) {
        responder_kick_locked(qp);
        qp_wait(qp, 10);
    }
    pthread_mutex_unlock(&qp->lock);
}
