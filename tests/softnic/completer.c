/* completer.c: the response side of a QP's outgoing connection.  Reads
 * ACK / READ / NAK / RNR_WAIT responses in order and turns them into send
 * completions:
 *   ACK(seq)        every WQE up to seq succeeded (coalesced ACKs);
 *   READ(seq, len)  earlier WQEs succeeded, the READ's data follows and is
 *                   placed into its local SGEs (lkeys checked again now);
 *   ATOMIC(seq, 8)  the same for an atomic: its original value, placed
 *                   into its one SGE;
 *   NAK(seq, st)    earlier WQEs succeeded, WQE seq fails with st, QP->ERR;
 *   RNR_WAIT        the responder waits for a receive WQE (keeps us alive).
 * It also owns the transport timeout: while WQEs are on the wire and
 * unanswered, or held back by a down link or an unreachable peer, and
 * nothing has moved for the QP's retry budget (4.096us * 2^timeout *
 * (retry_cnt + 1), between SOFTNIC_RETRY_MIN_MS and SOFTNIC_RETRY_CAP_MS),
 * the oldest WQE completes with IBV_WC_RETRY_EXC_ERR and the rest flush --
 * which is what a killed peer or a dead link looks like. */
#include "softnic.h"
#include "rbuf.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static bool seq_le(uint32_t a, uint32_t b)
{
    return (int32_t)(a - b) <= 0;
}

/* Completes WQEs on the wire with seq <= upto (< upto when !incl). */
static void complete_upto_locked(struct sn_qp *qp, uint32_t upto, bool incl)
{
    while (qp->sq_head < qp->sq_sent) {
        struct sn_swqe *w = &qp->sq[qp->sq_head % qp->sq_size];
        if (!seq_le(w->seq, upto) || (!incl && w->seq == upto))
            break;
        qp_complete_send_locked(qp, IBV_WC_SUCCESS);
    }
    qp->last_progress_ns = sn_now_ns();
}

static void timed_wait(struct sn_qp *qp, long ms)
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

/* Whether a response has come that this thread has not read yet: in its
 * buffer, or waiting on the connection (or the connection's end, which
 * reading turns into conn_dead). */
static bool response_waiting(const struct sn_rbuf *rb, bool have_rb, int fd, bool eof)
{
    if (fd < 0 || eof)
        return false;
    if (have_rb && rb->pos < rb->len)
        return true;
    struct pollfd p = { .fd = fd, .events = POLLIN };
    return poll(&p, 1, 0) == 1;
}

/* Retry budget check (qp->lock held).  The budget measures the peer, not
 * this thread: one that was not scheduled for a while (a loaded host)
 * reads the responses that came meanwhile before it judges, else a peer
 * that answered in time would look dead (seen: IBV_WC_RETRY_EXC_ERR with
 * the ACKs in the socket, at load ~40 on 2 cores). */
static void check_timeout_locked(struct sn_qp *qp, const struct sn_rbuf *rb, bool have_rb, bool eof)
{
    if (qp->attr.qp_state == IBV_QPS_ERR)
        return;
    /* on the wire and unanswered, or waiting to leave an RTS QP (a link
     * that is down or a peer that cannot be reached keeps them there) */
    bool stuck = qp->out_fd < 0 || qp->conn_dead ||
                 (qp->port && atomic_load(&qp->port->state) != IBV_PORT_ACTIVE);
    bool pending = qp->sq_head != qp->sq_sent ||
                   (qp->sq_sent != qp->sq_tail && qp->attr.qp_state == IBV_QPS_RTS && stuck);
    if (!pending)
        return;
    uint64_t now = sn_now_ns();
    if (now - qp->last_progress_ns > qp_retry_budget_ns(qp)) {
        if (response_waiting(rb, have_rb, qp->out_fd, eof)) {
            SN_DEBUG("completer: QP 0x%x: %llu ms without progress but a response waits: reading it first",
                     qp->ibqp.qp_num, (unsigned long long)((now - qp->last_progress_ns) / 1000000ull));
            return;
        }
        SN_DEBUG("completer: QP 0x%x: retry budget (%llu ms) ran out: %llu WQE(s) unanswered, %llu not sent%s%s",
                 qp->ibqp.qp_num, (unsigned long long)(qp_retry_budget_ns(qp) / 1000000ull),
                 (unsigned long long)(qp->sq_sent - qp->sq_head), (unsigned long long)(qp->sq_tail - qp->sq_sent),
                 stuck ? ", held back (link down, peer unreachable or connection gone)" : "",
                 qp->out_fd >= 0 && !eof ? "" : ", no connection");
        atomic_fetch_add(&qp->cnt.retries, 1);
        qp_error_locked(qp, qp->sq_head, IBV_WC_RETRY_EXC_ERR, 0);
    }
}

static int handle_read(struct sn_qp *qp, struct sn_rbuf *rb, const struct sn_wire_resp *r)
{
    pthread_mutex_lock(&qp->lock);
    complete_upto_locked(qp, r->seq, false);
    struct sn_swqe w;
    bool ok = qp->sq_head < qp->sq_sent;
    if (ok) {
        w = qp->sq[qp->sq_head % qp->sq_size];
        /* a READ response answers a READ, an ATOMIC one an atomic (8 bytes) */
        bool want_atomic = r->type == SN_RESP_ATOMIC;
        ok = w.seq == r->seq && w.len == r->len &&
             (want_atomic ? sn_wr_is_atomic(w.opcode) : w.opcode == IBV_WR_RDMA_READ);
    }
    struct sn_port *port = qp->port;
    if (!ok) {
        qp_error_locked(qp, qp->sq_head, IBV_WC_BAD_RESP_ERR, 0);
        pthread_mutex_unlock(&qp->lock);
        return EPROTO;
    }
    pthread_mutex_unlock(&qp->lock);
    uint32_t left = r->len;
    int st = IBV_WC_SUCCESS;
    for (int s = 0; s < w.num_sge && left; s++) {
        uint32_t n = w.sge[s].length < left ? w.sge[s].length : left;
        struct sn_mr *mr;
        if (st == IBV_WC_SUCCESS &&
            mr_get(w.sge[s].lkey, false, qp->ibqp.pd, IBV_ACCESS_LOCAL_WRITE, w.sge[s].addr, n, &mr))
            st = IBV_WC_LOC_PROT_ERR;
        int err;
        if (st == IBV_WC_SUCCESS) {
            err = rbuf_place(rb, mr, w.sge[s].addr, n, port);
            mr_put(mr);
        } else {
            err = rbuf_discard(rb, n);
        }
        if (err)
            return err;
        left -= n;
    }
    atomic_fetch_add(&port->cnt.rx_bytes, r->len);
    atomic_fetch_add(&qp->cnt.rx_bytes, r->len);
    pthread_mutex_lock(&qp->lock);
    if (qp->sq_head < qp->sq_sent && qp->sq[qp->sq_head % qp->sq_size].seq == r->seq) {
        if (st == IBV_WC_SUCCESS)
            complete_upto_locked(qp, r->seq, true);
        else
            qp_error_locked(qp, qp->sq_head, (enum ibv_wc_status)st, 0);
    }
    pthread_mutex_unlock(&qp->lock);
    return 0;
}

static enum ibv_wc_status nak_status(uint8_t syndrome)
{
    switch (syndrome) {
    case IBV_WC_REM_ACCESS_ERR:
    case IBV_WC_REM_INV_REQ_ERR:
    case IBV_WC_REM_OP_ERR:
    case IBV_WC_RNR_RETRY_EXC_ERR:
        return (enum ibv_wc_status)syndrome;
    default:
        return IBV_WC_BAD_RESP_ERR;
    }
}

static int handle_resp(struct sn_qp *qp, struct sn_rbuf *rb, const struct sn_wire_resp *r)
{
    switch (r->type) {
    case SN_RESP_ACK:
        /* A NIC that coalesces or delays ACKs: the requester's completions
         * come late while its writes have long landed at the responder. */
        if (qp->port && qp->port->conf.ack_delay_us)
            usleep(qp->port->conf.ack_delay_us);
        pthread_mutex_lock(&qp->lock);
        complete_upto_locked(qp, r->seq, true);
        pthread_mutex_unlock(&qp->lock);
        return 0;
    case SN_RESP_READ:
    case SN_RESP_ATOMIC:
        return handle_read(qp, rb, r);
    case SN_RESP_NAK:
        pthread_mutex_lock(&qp->lock);
        complete_upto_locked(qp, r->seq, false);
        if (qp->sq_head < qp->sq_sent)
            qp_error_locked(qp, qp->sq_head, nak_status(r->syndrome), 0);
        pthread_mutex_unlock(&qp->lock);
        return EPROTO;   /* the connection is over */
    case SN_RESP_RNR_WAIT:
        atomic_fetch_add(&qp->cnt.rnr_naks, 1);
        pthread_mutex_lock(&qp->lock);
        qp->last_progress_ns = sn_now_ns();
        pthread_mutex_unlock(&qp->lock);
        return 0;
    default:
        pthread_mutex_lock(&qp->lock);
        qp_error_locked(qp, qp->sq_head, IBV_WC_BAD_RESP_ERR, 0);
        pthread_mutex_unlock(&qp->lock);
        return EPROTO;
    }
}

void *completer_main(void *arg)
{
    struct sn_qp *qp = arg;
    struct sn_rbuf rb;
    bool have_rb = false, eof = false;
    sn_nic_thread_init();
    sn_stats_role(SN_ROLE_COMPLETER);
    pthread_mutex_lock(&qp->lock);
    while (!qp->stopping) {
        check_timeout_locked(qp, &rb, have_rb, eof);
        /* keep reading after a failed write: a NAK may still be queued */
        if (qp->out_fd < 0 || eof || qp->attr.qp_state == IBV_QPS_ERR) {
            timed_wait(qp, 20);
            continue;
        }
        int fd = qp->out_fd;
        /* an ACK, or a post, within the poll time: the next ACK is due
         * soon (a put + quiet loop posts a few us after each CQE, when
         * this thread would be asleep already); idle longer, it sleeps */
        bool awaiting = qp->poll_acks && sn_now_ns() - qp->last_progress_ns < sn_ack_poll_ns();
        pthread_mutex_unlock(&qp->lock);
        if (!have_rb) {
            if (rbuf_init(&rb, fd)) {
                pthread_mutex_lock(&qp->lock);
                qp->conn_dead = eof = true;
                continue;
            }
            have_rb = true;
        }
        int err = 0;
        if (rb.pos == rb.len) {
            struct pollfd p = { .fd = fd, .events = POLLIN };
            bool ready = (awaiting && sn_ack_poll_readable(fd, SN_POLL_COMPLETER)) || sn_spin_readable(fd);
            int n = ready ? 1 : poll(&p, 1, 20);
            if (n <= 0) {
                pthread_mutex_lock(&qp->lock);
                continue;
            }
        }
        err = rbuf_need(&rb, sizeof(struct sn_wire_resp));
        if (!err) {
            struct sn_wire_resp r;
            memcpy(&r, rbuf_take(&rb, sizeof(r)), sizeof(r));
            err = handle_resp(qp, &rb, &r);
        }
        pthread_mutex_lock(&qp->lock);
        if (err) {
            eof = true;
            qp->conn_dead = true;
            pthread_cond_broadcast(&qp->cond);
        }
    }
    pthread_mutex_unlock(&qp->lock);
    if (have_rb)
        rbuf_free(&rb);
    return NULL;
}
