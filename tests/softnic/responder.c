/* responder.c: the receive side of a QP.  Each incoming connection (a peer
 * requester, rconn.c) executes its requests in order, running the checks in
 * the order the IB spec lists them, each with the status the requester
 * gets:
 *   request: opcode and sequence (else the connection is dropped);
 *   WRITE/READ: rkey valid, same PD, MR and QP access, bounds
 *          -> NAK IBV_WC_REM_ACCESS_ERR (this QP goes to ERR too, with
 *          IBV_EVENT_QP_ACCESS_ERR);
 *   atomics: the same, and alignment (start_atomic says which status);
 *   SEND/WRITE_IMM: a receive WQE (waits, sending RNR_WAIT, for the RNR
 *          budget -> NAK IBV_WC_RNR_RETRY_EXC_ERR), receive SGEs valid
 *          (-> local IBV_WC_LOC_PROT_ERR, NAK IBV_WC_REM_OP_ERR) and large
 *          enough (-> local IBV_WC_LOC_LEN_ERR, NAK IBV_WC_REM_INV_REQ_ERR).
 * A requester of this host and network namespace may name a WRITE/SEND
 * payload instead of sending it (SN_REQ_CMA): the placement pulls it from
 * the requester's memory at the point where it would have read the stream,
 * so order and every check above are the same (cma.c).
 * Requests on one connection execute in order, so a WRITE_WITH_IMM
 * completion means every earlier WRITE of that QP is in memory.  ACKs are
 * coalesced: one cumulative ACK whenever the connection runs dry, and only
 * when a request it covers asked for one (SN_REQ_ACKREQ: a signaled WQE,
 * or every SN_ACKREQ_EVERY-th) or completes a receive; the ACK of requests
 * that did not ask waits for one that does, or for SOFTNIC_ACK_COALESCE_US
 * (config.c; 0, the default: every ACK goes when the connection runs dry), as an
 * RC NIC coalesces the ACKs of unsignaled writes (a stream of CTS-like
 * small writes costs one ACK in SN_ACKREQ_EVERY, not one each).
 *
 * It runs on the engines (engine.c), one step at a time, and never waits:
 * a request is a small state machine (enum rc_phase) that stops where it
 * has to wait -- for bytes to come, for the link or its delivery time (a
 * timer), for a receive WQE (a post kicks it, a timer makes the RNR
 * budget), for room to send a READ's data -- and goes on from there in a
 * later step.  A step executes at most a share of requests and bytes, so
 * one busy connection does not starve the others. */
#include "rconn.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#define READ_PACE_BYTES (256 * 1024)
/* what one step does at most before the next task gets the engine */
#define STEP_REQUESTS 64
#define STEP_BYTES (1024 * 1024)
/* responses the socket has not taken beyond which no new request starts */
#define TX_HIGH (64 * 1024)
/* a pull from a same-host requester, at most, between looks at the QP */
#define CMA_CHUNK (1024 * 1024)
#define CMA_BOUNCE CMA_CHUNK
/* how often a step looks at a port that is down, at an SRQ with no
 * receive WQE (its posts kick no one), and at a QP's receive queue */
#define PORT_DOWN_POLL_NS 2000000ull
#define SRQ_POLL_NS 1000000ull
#define RQ_POLL_NS 5000000ull
/* one RNR NAK per retry, as the requester's keep-alive */
#define RNR_NOTE_NS 20000000ull

/* A step's share of work. */
struct budget {
    int requests;
    size_t bytes;
};

bool responder_qp_receiving(struct sn_qp *qp)
{
    enum ibv_qp_state s = qp->attr.qp_state;
    return !qp->stopping && (s == IBV_QPS_RTR || s == IBV_QPS_RTS || s == IBV_QPS_SQD);
}

void responder_rx_live_locked(struct sn_qp *qp)
{
    atomic_store(&qp->rx_live, responder_qp_receiving(qp));
}

/* n placements are over: the last wakes an ibv_modify_qp(ERR) waiting for
 * them (qp->placing says why no lock). */
static void placing_done(struct sn_qp *qp, int n)
{
    if (n > 0 && atomic_fetch_sub(&qp->placing, n) == n && atomic_load(&qp->placing_waiters) > 0) {
        pthread_mutex_lock(&qp->lock);
        pthread_cond_broadcast(&qp->cond);
        pthread_mutex_unlock(&qp->lock);
    }
}

/* responder_qp_receiving without the QP's lock (qp->rx_live keeps it) */
static bool receiving(struct sn_qp *qp)
{
    return atomic_load(&qp->rx_live);
}

/* Lands the writes into CUDA memory this connection left in flight (gpu.c's
 * gpu_defer_writes: one CUDA sync per step instead of one per write)
 * before anything says they are there: an ACK or other response, a receive
 * completion, the end of the step.  Their placements stay counted in
 * qp->placing until then, so ibv_modify_qp(ERR) still returns only once
 * nothing more lands. */
static int land_writes(struct sn_rconn *rc)
{
    int err = gpu_flush();
    if (rc->deferred || rc->nheld) {
        struct sn_qp *qp = rc->qp;
        for (int i = 0; i < rc->nheld; i++)
            mr_put(rc->held[i]);
        rc->nheld = 0;
        placing_done(qp, rc->deferred);
        rc->deferred = 0;
    }
    if (err && !rc->err)
        rc->err = err;
    return err;
}

int responder_send_resp(struct sn_rconn *rc, uint8_t type, uint8_t syndrome, uint32_t seq,
                        uint32_t len)
{
    land_writes(rc);
    struct sn_wire_resp r = { .type = type, .syndrome = syndrome, .seq = seq, .len = len };
    struct iovec v = { &r, sizeof(r) };
    int err = txbuf_writev(&rc->tx, rc->fd, &v, 1);
    if (err && !rc->err)
        rc->err = err;
    return err;
}

/* A held completion appears; a receive a same-host peer's pushes share
 * (push.c) moves their order on as well, under qp->lock (held by the
 * caller for an indexed one). */
static void pend_wc_appear(struct sn_qp *qp, const struct pend_wc *p)
{
    cq_push((struct sn_cq *)qp->ibqp.recv_cq, &p->wc, p->solicited);
    if (p->idx != SN_RWQE_NO_IDX)
        push_rx_done_locked(qp, p->idx);
}

/* The held completions appear, in order. */
static void pend_wcs_appear(struct sn_rconn *rc)
{
    struct sn_qp *qp = rc->qp;
    for (int i = 0; i < rc->npend; i++) {
        const struct pend_wc *p = &rc->pend[i];
        bool indexed = p->idx != SN_RWQE_NO_IDX;
        if (indexed)
            pthread_mutex_lock(&qp->lock);
        pend_wc_appear(qp, p);
        if (indexed)
            pthread_mutex_unlock(&qp->lock);
    }
    rc->npend = 0;
}

/* The completions whose ACK is on the wire appear (not while it is to be
 * sent or still waits in tx: the sender's acknowledgement must not depend
 * on us). */
static void push_pending_wcs(struct sn_rconn *rc)
{
    if (!rc->npend || rc->ack_pending || !txbuf_empty(&rc->tx))
        return;
    land_writes(rc);
    pend_wcs_appear(rc);
}

static void send_ack(struct sn_rconn *rc)
{
    if (rc->ack_pending) {
        rc->ack_pending = false;
        rc->ack_lazy = false;
        atomic_fetch_add(&rc->qp->cnt.acks, 1);
        sn_stat_add(SN_ST_ACKS, 1);
        responder_send_resp(rc, SN_RESP_ACK, 0, rc->ack_seq, 0);
    }
}

/* The completions the coalesced ACK covers appear and the ACK goes out.
 * Once the application sees a completion, its sender must learn that the
 * request was done even if the receiver exits or destroys its QP at once
 * (test_softnic_faults has receivers that do either): the ACK in the
 * kernel's socket guarantees it, and so does a note of it in the
 * requester's slot (a same-host requester's hello names one:
 * push_note_write), which its completer reads.  With the note the
 * completions come first, as a NIC writes a receive CQE while it sends
 * the ACK: the receiver's next clear-to-send leaves a loopback sendmsg
 * earlier (the plugin's 64 KiB messages at depth 8 on 16 CPUs, 5 rounds:
 * 4.89 GB/s with completions first, 4.66 after the send; the same at
 * depth 16).  A requester whose polls complete from the note (its slot
 * says so: ack_note.c) gets no ACK on the wire at all, as a ConnectX's ACK
 * wakes no thread of the sender's host.  Without a note slot, or with
 * responses waiting before the ACK, the ACK goes first. */
static void flush_ack(struct sn_rconn *rc)
{
    struct sn_qp *qp = rc->qp;
    /* not for a QP a GPU drives (the mlx5 layer's): its completions keep
     * the order they have been tested with */
    if (rc->ack_pending && rc->note_peer && txbuf_empty(&rc->tx) && !qp->poll_acks) {
        land_writes(rc);
        bool noted = push_note_write(rc->note_peer, rc->note_slot, rc->hello.conn_id, rc->ack_seq);
        if (noted && rc->npend) {
            pthread_mutex_lock(&qp->lock);
            for (int i = 0; i < rc->npend; i++)
                pend_wc_appear(qp, &rc->pend[i]);
            rc->npend = 0;
            pthread_mutex_unlock(&qp->lock);
        }
        if (noted && push_note_polled(rc->note_peer, rc->note_slot)) {
            rc->ack_pending = false;
            rc->ack_lazy = false;
            atomic_fetch_add(&qp->cnt.acks_noted, 1);
            sn_stat_add(SN_ST_ACKS_NOTED, 1);
        }
    }
    send_ack(rc);
    (void)txbuf_flush(&rc->tx, rc->fd);
    push_pending_wcs(rc);
}

/* The connection ran dry: the coalesced ACK goes out, unless no request
 * it covers asked for one and its delay has not run out (the step's end
 * arms the timer for it, responder_run).  A held ACK holds no receive
 * completion: a request that completes a receive asks for its ACK. */
static void flush_ack_dry(struct sn_rconn *rc)
{
    if (rc->ack_pending && rc->ack_lazy && sn_now_ns() < rc->ack_due) {
        (void)txbuf_flush(&rc->tx, rc->fd);
        return;
    }
    flush_ack(rc);
}

/* Fails the request with a NAK; with qp_err the QP goes to ERR too.  The
 * connection ends (ECONNABORTED: the peer reads the NAK first). */
static int fail_request(struct sn_rconn *rc, uint32_t seq, enum ibv_wc_status nak, bool qp_err,
                        enum ibv_event_type ev)
{
    /* counted before the requester can learn of it */
    atomic_fetch_add(&rc->port->cnt.errors, 1);
    atomic_fetch_add(&rc->qp->cnt.errors, 1);
    send_ack(rc);
    responder_send_resp(rc, SN_RESP_NAK, (uint8_t)nak, seq, 0);
    (void)txbuf_flush(&rc->tx, rc->fd);
    push_pending_wcs(rc);
    if (qp_err) {
        /* completions still held for an ACK the socket has not taken appear
         * before the flush of the receives behind them, in the RQ's order:
         * the connection's end (detach) would make them appear anyway,
         * after that flush */
        land_writes(rc);
        pend_wcs_appear(rc);
        pthread_mutex_lock(&rc->qp->lock);
        rc->no_kick = true;
        bool was_err = rc->qp->attr.qp_state == IBV_QPS_ERR;
        qp_error_locked(rc->qp, UINT64_MAX, IBV_WC_WR_FLUSH_ERR, 0);
        pthread_mutex_unlock(&rc->qp->lock);
        if (!was_err)
            async_post_qp(&rc->qp->ibqp, ev);
    }
    return ECONNABORTED;
}

static void recv_wc(struct sn_rconn *rc, uint64_t wr_id, enum ibv_wc_status st,
                    enum ibv_wc_opcode op, uint32_t len)
{
    const struct sn_wire_req *h = &rc->h;
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
    /* a request starts only with room for its completion (responder_run) */
    rc->pend[rc->npend].wc = wc;
    rc->pend[rc->npend].solicited = (h->flags & SN_REQ_SOLICITED) != 0;
    rc->pend[rc->npend].idx = rc->r.idx;
    rc->npend++;
}

static enum ibv_wc_opcode recv_opcode(const struct sn_wire_req *h)
{
    return h->op == SN_OP_WRITE_IMM ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV;
}

static int check_remote(struct sn_rconn *rc, int access, struct sn_mr **mr)
{
    const struct sn_wire_req *h = &rc->h;
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

/* ------------------------------------------------------------ placement */
static void place_setup(struct sn_rconn *rc)
{
    rc->seg = 0;
    rc->seg_done = 0;
    rc->placing = false;
    rc->ph = PH_PLACE;
}

static void place_drop_mrs(struct sn_rconn *rc)
{
    for (int s = 0; s < rc->nseg; s++)
        mr_put(rc->mr[s]);
    rc->nseg = 0;
}

/* Moves up to len bytes of the request's payload into mr at addr: off the
 * wire (what has come), or pulled from the requester's memory (cma.c). */
static int place_chunk(struct sn_rconn *rc, struct sn_mr *mr, uint64_t addr, size_t len, size_t *done)
{
    *done = 0;
    if (!rc->src)
        return rbuf_place(&rc->rb, mr, addr, len, rc->port, rc->place_since, done);
    if (len > CMA_CHUNK)
        len = CMA_CHUNK;
    if (!rc->cma_alive) {
        if (!cma_peer_alive(rc->cma_pidfd))
            return ECONNRESET;   /* it has exited: its pid is not its own any more */
        rc->cma_alive = true;    /* until this step ends (responder_run) */
    }
    if (!mr->gpu) {
        int err = cma_pull(rc->cma_pid, rc->src, rc->src_nseg, rc->src_off, mr_host_ptr(mr, addr), len);
        if (err)
            return err;
    } else {
        /* CUDA memory: pulled into host memory first, then copied by the driver */
        if (!rc->bounce && !(rc->bounce = malloc(CMA_BOUNCE)))
            return ENOMEM;
        int err = cma_pull(rc->cma_pid, rc->src, rc->src_nseg, rc->src_off, rc->bounce, len);
        if (err)
            return err;
        if (rc->port->conf.vf && !(mr->access & IBV_ACCESS_RELAXED_ORDERING))
            rate_take(&rc->port->vf_rate, len, rc->place_since);
        if ((err = mr_write(mr, addr, rc->bounce, len)))
            return err;
    }
    rc->src_off += len;
    *done = len;
    return 0;
}

/* The placement is over (done or failed): its count in qp->placing goes,
 * or waits with its MRs for the CUDA writes to land (land_writes). */
static void place_end(struct sn_rconn *rc)
{
    struct sn_qp *qp = rc->qp;
    if (rc->placing) {
        rc->placing = false;
        if (gpu_writes_pending() && rc->deferred < LAND_MAX) {
            for (int s = 0; s < rc->nseg; s++)
                if (rc->mr[s]) {
                    atomic_fetch_add(&rc->mr[s]->refs, 1);
                    rc->held[rc->nheld++] = rc->mr[s];
                }
            rc->deferred++;
        } else {
            if (gpu_writes_pending())
                land_writes(rc);
            /* Only ibv_modify_qp(ERR) waits for the count to reach 0: a
             * broadcast for every write placed woke whatever else sleeps
             * on qp->cond */
            placing_done(qp, 1);
        }
    }
    place_drop_mrs(rc);
}

/* Places what has come of the payload, within the step's budget: 0 once
 * it is all in memory, EAGAIN while more is to come (or the budget ran
 * out), ECONNABORTED when the QP stopped receiving (a QP in ERR drops it,
 * as a NIC drops packets for a QP in ERR: ibv_modify_qp(ERR) waits for a
 * placement under way, so once it returns nothing more lands in this QP's
 * MRs -- a failover that writes a chunk again elsewhere relies on it), or
 * the connection's errno. */
static int place_some(struct sn_rconn *rc, struct budget *bud)
{
    struct sn_qp *qp = rc->qp;
    while (rc->seg < rc->nseg) {
        uint64_t want = rc->seg_len[rc->seg] - rc->seg_done;
        if (!want) {
            rc->seg++;
            rc->seg_done = 0;
            continue;
        }
        if (!bud->bytes)
            return EAGAIN;
        /* between pulls the QP is looked at again; the wire's stream ends
         * at the shutdown an error makes (responder_kick_locked).  Counted
         * first, then looked at (qp->placing says why); place_end uncounts
         * a placement that found the QP dead */
        if (!rc->placing || rc->src) {
            if (!rc->placing) {
                atomic_fetch_add(&qp->placing, 1);
                rc->placing = true;
                rc->place_since = sn_now_ns();
            }
            if (!receiving(qp))
                return ECONNABORTED;
        }
        size_t n = want < bud->bytes ? (size_t)want : bud->bytes, done = 0;
        int err = place_chunk(rc, rc->mr[rc->seg], rc->seg_addr[rc->seg] + rc->seg_done, n, &done);
        rc->seg_done += done;
        bud->bytes -= done < bud->bytes ? done : bud->bytes;
        if (err)
            return err;
    }
    return 0;
}

/* ----------------------------------------------------------- receives */
/* Gets a receive WQE for a SEND or WRITE_IMM: 0 with rc->r, EAGAIN while
 * the QP has none (RNR: the step waits for a post or the next look), or the
 * connection's end (the NAK sent when the budget ran out). */
static int take_recv(struct sn_rconn *rc)
{
    struct sn_qp *qp = rc->qp;
    if (qp_take_recv(qp, &rc->r)) {
        rc->have_r = true;
        return 0;
    }
    uint64_t now = sn_now_ns();
    if (!rc->rnr_start) {
        flush_ack(rc);
        rc->rnr_start = now;
        rc->rnr_note = 0;
    }
    uint64_t budget = qp_rnr_budget_ns(rc->rnr_retry, qp->attr.min_rnr_timer);
    if (now - rc->rnr_start > budget)
        return fail_request(rc, rc->h.seq, IBV_WC_RNR_RETRY_EXC_ERR, false, 0);
    if (!rc->rnr_note || now - rc->rnr_note > RNR_NOTE_NS) {
        atomic_fetch_add(&qp->cnt.rnr_naks, 1);
        int err = responder_send_resp(rc, SN_RESP_RNR_WAIT, 0, rc->h.seq, 0);
        if (err)
            return err;
        rc->rnr_note = now;
    }
    pthread_mutex_lock(&qp->lock);
    bool alive = responder_qp_receiving(qp);
    if (alive && !rc->rnr_waiting) {
        rc->rnr_waiting = true;
        qp->recv_waiters++;
    }
    pthread_mutex_unlock(&qp->lock);
    if (!alive)
        return ECONNABORTED;
    /* a post kicks the step (responder_wake_locked), but not to an SRQ:
     * its posts know no QP; and a post may have come before the count */
    if (qp_take_recv(qp, &rc->r)) {
        rc->have_r = true;
        return 0;
    }
    uint64_t next = rc->rnr_note + RNR_NOTE_NS;
    uint64_t look = now + (qp->ibqp.srq ? SRQ_POLL_NS : RQ_POLL_NS);
    uint64_t end = rc->rnr_start + budget + 1;
    uint64_t at = next < look ? next : look;
    engine_task_at(rc->task, end > rc->rnr_start && end < at ? end : at);
    return EAGAIN;
}

static void rnr_done(struct sn_rconn *rc)
{
    rc->rnr_start = 0;
    if (rc->rnr_waiting) {
        pthread_mutex_lock(&rc->qp->lock);
        rc->qp->recv_waiters--;
        rc->rnr_waiting = false;
        pthread_mutex_unlock(&rc->qp->lock);
    }
}

/* ------------------------------------------------------------ requests */
/* A SEND with its receive WQE: the receive SGEs are checked and become
 * the placement's segments. */
static int start_send(struct sn_rconn *rc)
{
    struct sn_qp *qp = rc->qp;
    const struct sn_wire_req *h = &rc->h;
    uint64_t room = 0;
    int bad = 0;
    rc->nseg = 0;
    for (int s = 0; s < rc->r.num_sge && !bad; s++) {
        const struct ibv_sge *sg = &rc->r.sge[s];
        if (!sg->length)
            continue;
        struct sn_mr *mr = NULL;
        if (mr_get(sg->lkey, false, qp->ibqp.pd, IBV_ACCESS_LOCAL_WRITE, sg->addr, sg->length, &mr))
            bad = 1;
        else {
            uint64_t left = h->len > room ? h->len - room : 0;
            rc->mr[rc->nseg] = mr;
            rc->seg_addr[rc->nseg] = sg->addr;
            rc->seg_len[rc->nseg] = sg->length < left ? sg->length : left;
            rc->nseg++;
        }
        room += sg->length;
    }
    if (!bad && room < h->len)
        bad = 2;
    if (bad) {
        place_drop_mrs(rc);
        rc->have_r = false;
        recv_wc(rc, rc->r.wr_id, bad == 1 ? IBV_WC_LOC_PROT_ERR : IBV_WC_LOC_LEN_ERR, IBV_WC_RECV, 0);
        return fail_request(rc, h->seq, bad == 1 ? IBV_WC_REM_OP_ERR : IBV_WC_REM_INV_REQ_ERR, true,
                            IBV_EVENT_QP_REQ_ERR);
    }
    place_setup(rc);
    return 0;
}

/* The write's region (mr, checked, its reference held: none for a
 * zero-length write) becomes the placement's one segment. */
static void write_segments(struct sn_rconn *rc, struct sn_mr *mr)
{
    rc->nseg = 0;
    if (rc->h.len) {
        rc->mr[0] = mr;
        rc->seg_addr[0] = rc->h.raddr;
        rc->seg_len[0] = rc->h.len;
        rc->nseg = 1;
    }
    place_setup(rc);
}

/* A WRITE (with its receive WQE for WRITE_IMM): its region is checked
 * again now (no MR reference is held while waiting for a receive: a
 * deregistration must not wait for the peer's receive). */
static int start_write(struct sn_rconn *rc)
{
    struct sn_mr *mr;
    if (check_remote(rc, IBV_ACCESS_REMOTE_WRITE, &mr)) {
        if (rc->have_r) {
            rc->have_r = false;
            recv_wc(rc, rc->r.wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV_RDMA_WITH_IMM, 0);
        }
        return fail_request(rc, rc->h.seq, IBV_WC_REM_ACCESS_ERR, true, IBV_EVENT_QP_ACCESS_ERR);
    }
    write_segments(rc, mr);
    return 0;
}

static int start_read(struct sn_rconn *rc)
{
    struct sn_mr *mr;
    if (check_remote(rc, IBV_ACCESS_REMOTE_READ, &mr))
        return fail_request(rc, rc->h.seq, IBV_WC_REM_ACCESS_ERR, true, IBV_EVENT_QP_ACCESS_ERR);
    rc->rd_mr = mr;
    rc->rd_off = 0;
    rc->rd_hdr_sent = false;
    rc->rd_charged = false;
    rc->rd_due = 0;
    rc->rd_asked = sn_now_ns();   /* the response's bytes wait from here */
    /* GPU memory goes through a bounce of one paced piece, read piece by
     * piece as a NIC reads it: a 2 GiB READ must not allocate 2 GiB */
    if (rc->h.len && mr->gpu &&
        !(rc->rd_bounce = malloc(rc->h.len < READ_PACE_BYTES ? rc->h.len : READ_PACE_BYTES)))
        return EIO;
    land_writes(rc);
    rc->ack_pending = false;   /* the response acknowledges everything before */
    rc->ph = PH_READ;
    return 0;
}

static void read_end(struct sn_rconn *rc)
{
    free(rc->rd_bounce);
    rc->rd_bounce = NULL;
    mr_put(rc->rd_mr);
    rc->rd_mr = NULL;
}

/* Sends the READ's response: the header first, then the data in paced
 * pieces (the requester's completer is reading, not timing out, once the
 * header is there), each when the rate limit lets it and the connection
 * has room.  0 when all went, EAGAIN while it waits (*io, or a timer), or
 * an errno. */
static int read_some(struct sn_rconn *rc, struct budget *bud, unsigned *io)
{
    const struct sn_wire_req *h = &rc->h;
    struct sn_wire_resp r = { .type = SN_RESP_READ, .seq = h->seq, .len = h->len };
    while (!rc->rd_hdr_sent || rc->rd_off < h->len) {
        int err = txbuf_flush(&rc->tx, rc->fd);
        if (err == EAGAIN) {
            *io = SN_ENG_OUT;
            return EAGAIN;
        }
        if (err)
            return err;
        if (!bud->bytes)
            return EAGAIN;
        uint64_t n = h->len - rc->rd_off < READ_PACE_BYTES ? h->len - rc->rd_off : READ_PACE_BYTES;
        uint64_t now = sn_now_ns();
        if (!rc->rd_charged && n && rc->port->tx_rate.rate) {
            pthread_mutex_lock(&rc->port->tx_rate.lock);
            uint64_t wait = rate_charge_locked(&rc->port->tx_rate, now, n, rc->rd_asked);
            pthread_mutex_unlock(&rc->port->tx_rate.lock);
            rc->rd_due = wait ? now + wait : 0;
        }
        rc->rd_charged = true;
        if (rc->rd_due > now) {
            engine_task_at(rc->task, rc->rd_due);
            return EAGAIN;
        }
        struct iovec iov[2];
        int cnt = 0;
        if (!rc->rd_hdr_sent)
            iov[cnt++] = (struct iovec){ &r, sizeof(r) };
        if (n && rc->rd_bounce && mr_read(rc->rd_mr, h->raddr + rc->rd_off, rc->rd_bounce, n))
            return EIO;
        if (n)
            iov[cnt++] = (struct iovec){ rc->rd_bounce ? rc->rd_bounce : mr_host_ptr(rc->rd_mr, h->raddr + rc->rd_off),
                                         n };
        /* counted before they leave: the READ may complete at once */
        atomic_fetch_add(&rc->port->cnt.tx_bytes, n);
        if ((err = txbuf_writev(&rc->tx, rc->fd, iov, cnt))) {
            atomic_fetch_sub(&rc->port->cnt.tx_bytes, n);
            return err;
        }
        fault_tx_bytes(rc->qp->dev, rc->port, n);
        rc->rd_hdr_sent = true;
        rc->rd_charged = false;
        rc->rd_off += n;
        bud->bytes -= n < bud->bytes ? n : bud->bytes;
    }
    return 0;
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
static int do_atomic(struct sn_rconn *rc)
{
    const struct sn_wire_req *h = &rc->h;
    struct sn_mr *mr = NULL;
    if (h->raddr % SN_ATOMIC_SIZE)
        return fail_request(rc, h->seq, IBV_WC_REM_INV_REQ_ERR, true, IBV_EVENT_QP_REQ_ERR);
    if (check_remote(rc, IBV_ACCESS_REMOTE_ATOMIC, &mr))
        return fail_request(rc, h->seq, IBV_WC_REM_ACCESS_ERR, true, IBV_EVENT_QP_ACCESS_ERR);
    /* the memory itself aligned too: an MR whose iova is not its address
     * (IBV_ACCESS_ZERO_BASED, ibv_reg_mr_iova) can map an aligned raddr to
     * a misaligned word, which a CPU atomic would split or fault on */
    if ((uintptr_t)mr_host_ptr(mr, h->raddr) % SN_ATOMIC_SIZE) {
        mr_put(mr);
        return fail_request(rc, h->seq, IBV_WC_REM_INV_REQ_ERR, true, IBV_EVENT_QP_REQ_ERR);
    }
    uint64_t old = 0;
    int err = atomic_execute(mr, h->raddr, h->op == SN_OP_ATOMIC_CS, rc->atom.swap_add, rc->atom.compare, &old);
    mr_put(mr);
    if (err)
        return fail_request(rc, h->seq, IBV_WC_REM_OP_ERR, true, IBV_EVENT_QP_REQ_ERR);
    struct sn_wire_resp r = { .type = SN_RESP_ATOMIC, .seq = h->seq, .len = SN_ATOMIC_SIZE };
    struct iovec iov[2] = { { &r, sizeof(r) }, { &old, sizeof(old) } };
    land_writes(rc);
    rc->ack_pending = false;   /* the response acknowledges everything before */
    /* counted before they leave: the atomic may complete at once */
    atomic_fetch_add(&rc->port->cnt.tx_bytes, SN_ATOMIC_SIZE);
    atomic_fetch_add(&rc->port->cnt.rx_packets, 1);
    atomic_fetch_add(&rc->qp->cnt.rx_packets, 1);
    err = txbuf_writev(&rc->tx, rc->fd, iov, 2);
    if (err) {
        atomic_fetch_sub(&rc->port->cnt.tx_bytes, SN_ATOMIC_SIZE);
        atomic_fetch_sub(&rc->port->cnt.rx_packets, 1);
        atomic_fetch_sub(&rc->qp->cnt.rx_packets, 1);
        if (!rc->err)
            rc->err = err;
    }
    return err;
}

/* Takes the next request's header (and what follows it: an atomic's
 * operands, a pulled payload's descriptor) once all of it has come:
 * 0, EAGAIN, or the connection's end (EPROTO for a frame no softnic
 * sends). */
static int read_header(struct sn_rconn *rc)
{
    const size_t hs = sizeof(struct sn_wire_req);
    int err = rbuf_need(&rc->rb, hs);
    if (err)
        return err;
    struct sn_wire_req h;
    memcpy(&h, rc->rb.buf + rc->rb.pos, hs);
    bool atomic = h.op == SN_OP_ATOMIC_FA || h.op == SN_OP_ATOMIC_CS;
    if (h.op < SN_OP_SEND || h.op > SN_OP_ATOMIC_CS || h.len > SN_MAX_MSG ||
        h.seq != rc->expect_seq || (atomic && h.len != SN_ATOMIC_SIZE))
        return EPROTO;
    size_t extra = 0;
    struct sn_wire_cma d = { 0 };
    if (atomic) {
        extra = sizeof(struct sn_wire_atomic);
    } else if (h.flags & SN_REQ_CMA) {
        /* the payload's whereabouts in the requester: only on a connection
         * whose peer was verified, only for WRITE/SEND, and exactly len */
        if (!rc->cma_pid || h.op > SN_OP_WRITE_IMM || !h.len)
            return EPROTO;
        if ((err = rbuf_need(&rc->rb, hs + sizeof(d))))
            return err;
        memcpy(&d, rc->rb.buf + rc->rb.pos + hs, sizeof(d));
        if (d.nseg < 1 || d.nseg > SN_MAX_SGE)
            return EPROTO;
        extra = sizeof(d) + d.nseg * sizeof(struct sn_cma_seg);
    }
    if ((err = rbuf_need(&rc->rb, hs + extra)))
        return err;
    rbuf_take(&rc->rb, hs);
    rc->h = h;
    rc->src = NULL;
    if (atomic)
        memcpy(&rc->atom, rbuf_take(&rc->rb, sizeof(rc->atom)), sizeof(rc->atom));
    else if (h.flags & SN_REQ_CMA) {
        rbuf_take(&rc->rb, sizeof(d));
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
    rc->expect_seq++;
    /* the stamp comes off the wire, and another host's clock is not ours:
     * no longer than SN_MAX_LATENCY_US from now */
    uint64_t now = sn_now_ns();
    rc->deliver_until = 0;
    if (h.deliver_ns && h.deliver_ns > now)
        rc->deliver_until = h.deliver_ns - now > (uint64_t)SN_MAX_LATENCY_US * 1000ull
                                ? now + (uint64_t)SN_MAX_LATENCY_US * 1000ull
                                : h.deliver_ns;
    rc->ph = PH_WAIT;
    return 0;
}

/* The request's wait for the link (a link that is down passes nothing:
 * the requester times out) and for its delivery time, then its start. */
static int start_request(struct sn_rconn *rc)
{
    if (atomic_load(&rc->port->state) != IBV_PORT_ACTIVE) {
        flush_ack(rc);
        fault_poll();
        if (!receiving(rc->qp))
            return ECONNABORTED;
        engine_task_at(rc->task, sn_now_ns() + PORT_DOWN_POLL_NS);
        return EAGAIN;
    }
    if (rc->deliver_until) {
        if (sn_now_ns() < rc->deliver_until) {
            flush_ack(rc);
            if (!receiving(rc->qp))
                return ECONNABORTED;
            engine_task_at(rc->task, rc->deliver_until);
            return EAGAIN;
        }
        rc->deliver_until = 0;
    }
    switch (rc->h.op) {
    case SN_OP_WRITE_IMM: {
        /* its region first (a refused write takes no receive WQE, which
         * an SRQ's other QPs may need), then a receive WQE: at hand, the
         * placement starts with the region checked once; else no MR
         * reference while waiting for one (a deregistration must not wait
         * for the peer's receive), so start_write checks it again */
        struct sn_mr *mr;
        if (check_remote(rc, IBV_ACCESS_REMOTE_WRITE, &mr))
            return fail_request(rc, rc->h.seq, IBV_WC_REM_ACCESS_ERR, true, IBV_EVENT_QP_ACCESS_ERR);
        if (qp_take_recv(rc->qp, &rc->r)) {
            rc->have_r = true;
            write_segments(rc, mr);
            return 0;
        }
        mr_put(mr);
        rc->ph = PH_RECV;
        return 0;
    }
    case SN_OP_SEND:
    case SN_OP_SEND_IMM:
        rc->ph = PH_RECV;
        return 0;
    case SN_OP_WRITE:
        return start_write(rc);
    case SN_OP_ATOMIC_FA:
    case SN_OP_ATOMIC_CS: {
        int err = do_atomic(rc);
        rc->ph = PH_HEADER;
        if (!err)
            sn_stat_add(SN_ST_REQUESTS, 1);
        return err;
    }
    default:
        return start_read(rc);
    }
}

/* A WRITE or SEND placed: its receive completion (SEND, WRITE_IMM), its
 * counts, and its ACK, coalesced. */
static void request_done(struct sn_rconn *rc)
{
    const struct sn_wire_req *h = &rc->h;
    struct sn_qp *qp = rc->qp;
    bool asked = (h->flags & SN_REQ_ACKREQ) || rc->have_r;
    if (rc->have_r) {
        rc->have_r = false;
        recv_wc(rc, rc->r.wr_id, IBV_WC_SUCCESS, recv_opcode(h), h->len);
    }
    sn_stat_add(SN_ST_REQUESTS, 1);
    uint64_t pkts = sn_mtu_packets(h->len, qp->attr.path_mtu);
    atomic_fetch_add(&rc->port->cnt.rx_bytes, h->len);
    atomic_fetch_add(&rc->port->cnt.rx_packets, pkts);
    atomic_fetch_add(&qp->cnt.rx_bytes, h->len);
    atomic_fetch_add(&qp->cnt.rx_packets, pkts);
    if (rc->src) {
        atomic_fetch_add(&rc->port->cnt.fast_bytes, h->len);
        atomic_fetch_add(&qp->cnt.fast_bytes, h->len);
    }
    /* SOFTNIC_ACK_COALESCE_US=0: every request is acknowledged as it was
     * before requests carried an ACK request */
    if (asked || !softnic_global()->conf.ack_coalesce_us)
        rc->ack_lazy = false;
    else if (!rc->ack_pending) {
        rc->ack_lazy = true;
        rc->ack_due = sn_now_ns() + (uint64_t)softnic_global()->conf.ack_coalesce_us * 1000ull;
    }
    rc->ack_pending = true;
    rc->ack_seq = h->seq;
    /* a pulled payload never waits on the stream, where the coalesced ACK
     * would go out: it goes now, or the requester's completions and our
     * receive completions would wait for the stream to run dry */
    if (rc->npend == PEND_WC || (rc->src && !rc->ack_lazy))
        flush_ack(rc);
    rc->ph = PH_HEADER;
}

unsigned responder_run(struct sn_rconn *rc)
{
    struct budget bud = { STEP_REQUESTS, STEP_BYTES };
    unsigned io = 0;
    rc->cma_alive = false;   /* the requester's pidfd is polled again before a pull */
    /* what the socket did not take last time goes first */
    int err = txbuf_flush(&rc->tx, rc->fd);
    if (err && err != EAGAIN)
        goto end;
    push_pending_wcs(rc);
    for (;;) {
        switch (rc->ph) {
        case PH_HEADER:
            if (rc->npend && txbuf_empty(&rc->tx))
                push_pending_wcs(rc);
            if (txbuf_held(&rc->tx) > TX_HIGH || rc->npend == PEND_WC) {
                /* the peer reads our responses slower than it sends:
                 * nothing more starts until they have gone */
                flush_ack(rc);
                if (txbuf_held(&rc->tx) > TX_HIGH || rc->npend == PEND_WC)
                    goto wait;
            }
            if (bud.requests-- <= 0 || !bud.bytes)
                goto more;
            err = read_header(rc);
            if (err == EAGAIN) {
                /* the connection ran dry: the coalesced ACK goes out */
                flush_ack_dry(rc);
                io = SN_ENG_IN;
                goto wait;
            }
            break;
        case PH_WAIT:
            err = start_request(rc);
            break;
        case PH_RECV:
            err = take_recv(rc);
            if (err == EAGAIN)
                goto wait;
            rnr_done(rc);
            if (!err)
                err = rc->h.op == SN_OP_WRITE_IMM ? start_write(rc) : start_send(rc);
            break;
        case PH_PLACE:
            err = place_some(rc, &bud);
            if (err == EAGAIN) {
                if (!bud.bytes)
                    goto more;
                /* the payload's rest has not come: the ACK of what came
                 * before goes out meanwhile */
                flush_ack_dry(rc);
                io = SN_ENG_IN;
                goto wait;
            }
            place_end(rc);
            if (err == ECONNABORTED && rc->have_r) {
                /* the QP went to ERR: the receive WQE taken for it flushes */
                rc->have_r = false;
                recv_wc(rc, rc->r.wr_id, IBV_WC_WR_FLUSH_ERR, recv_opcode(&rc->h), 0);
                push_pending_wcs(rc);
            }
            if (!err)
                request_done(rc);
            break;
        case PH_READ:
            err = read_some(rc, &bud, &io);
            if (err == EAGAIN) {
                if (!io && !bud.bytes)
                    goto more;
                goto wait;
            }
            read_end(rc);
            if (!err) {
                sn_stat_add(SN_ST_REQUESTS, 1);
                rc->ph = PH_HEADER;
            }
            break;
        }
        if (err == EAGAIN)
            goto wait;
        if (err || (err = rc->err))
            goto end;
    }
more:
    io = SN_ENG_MORE;
wait:
    /* this step's writes into CUDA memory land before it ends: the next
     * step may run on another engine, and gpu.c defers per thread */
    land_writes(rc);
    if (rc->ack_pending && rc->ack_lazy)
        engine_task_at(rc->task, rc->ack_due);   /* the held ACK's delay */
    if (!txbuf_empty(&rc->tx))
        io |= SN_ENG_OUT;
    return io | (rc->poll_next && (io & SN_ENG_IN) ? SN_ENG_POLL_RESP : 0);
end:
    rc->err = err;
    return RC_END;
}

void responder_end(struct sn_rconn *rc)
{
    if (rc->ph == PH_PLACE)
        place_end(rc);
    place_drop_mrs(rc);
    if (rc->ph == PH_READ)
        read_end(rc);
    rnr_done(rc);
    /* a receive WQE taken for a request that will not come whole is gone
     * with it (the QP in ERR flushed it already, see PH_PLACE) */
    bool dropped = rc->have_r && rc->r.idx != SN_RWQE_NO_IDX;
    rc->have_r = false;
    rc->ph = PH_HEADER;
    flush_ack(rc);
    /* the completions of requests done appear, whether or not their ACK
     * could still go: the peer's retry budget tells it otherwise */
    land_writes(rc);
    pend_wcs_appear(rc);
    if (dropped) {   /* the receives after it do not wait for its completion */
        pthread_mutex_lock(&rc->qp->lock);
        push_rx_done_locked(rc->qp, rc->r.idx);
        pthread_mutex_unlock(&rc->qp->lock);
    }
}
