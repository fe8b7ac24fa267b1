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
 * which is what a killed peer or a dead link looks like.
 * It is a task on the engines (engine.c), not a thread: a step when its
 * connection has responses to read, and a timer at the end of the retry
 * budget while WQEs await an answer.  A QP with nothing outstanding has no
 * timer, and its completer does not run at all. */
#include "softnic.h"
#include "rbuf.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* A QP's completer: its state between steps. */
struct sn_comp {
    struct sn_eng_task *task;      /* NULL once completer_stop took it */
    int fd;                        /* the connection it reads (a dup of out_fd), -1: none yet */
    uint32_t conn_id;              /* that connection's name (its hello's) */
    struct sn_rbuf rb;
    bool have_rb, eof;
    /* a READ or ATOMIC response whose data is being placed */
    bool in_data;
    struct sn_wire_resp r;
    struct sn_swqe w;              /* its WQE, as it was when the response came */
    int sge;                       /* the SGE being filled, and how much of it is */
    uint32_t sge_done, left;
    int st;                        /* an ibv_wc_status: a bad lkey drops the rest */
    /* an ACK held back by the port's ack_delay_us (a coalescing NIC) */
    bool delayed;
    uint32_t delayed_seq;
    uint64_t delayed_until;
};

/* Responses one step reads at most before the QP lets the next one have
 * the engine (it runs again at once if more wait), and READ data bytes. */
#define STEP_RESPONSES 64
#define STEP_BYTES (1024 * 1024)

static bool seq_le(uint32_t a, uint32_t b)
{
    return (int32_t)(a - b) <= 0;
}

/* Completes WQEs on the wire with seq <= upto (< upto when !incl), up to
 * the first READ or atomic when writes_only; how many. */
static unsigned complete_through_locked(struct sn_qp *qp, uint32_t upto, bool incl, bool writes_only)
{
    unsigned n = 0;
    while (qp->sq_head < qp->sq_sent) {
        struct sn_swqe *w = &qp->sq[qp->sq_head % qp->sq_size];
        if (!seq_le(w->seq, upto) || (!incl && w->seq == upto) || (writes_only && sn_wr_is_read_like(w->opcode)))
            break;
        qp_complete_send_locked(qp, IBV_WC_SUCCESS);
        n++;
    }
    return n;
}

/* A response came: the WQEs it answers (seq <= upto, < upto when !incl)
 * completed. */
static void complete_upto_locked(struct sn_qp *qp, uint32_t upto, bool incl)
{
    complete_through_locked(qp, upto, incl, false);
    qp->last_progress_ns = sn_now_ns();
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

void completer_note_locked(struct sn_qp *qp, uint64_t note)
{
    if (!qp->out_conn_id || (uint32_t)(note >> 32) != qp->out_conn_id || qp->sq_head == qp->sq_sent)
        return;
    if (complete_through_locked(qp, (uint32_t)note, true, true))
        qp->last_progress_ns = sn_now_ns();   /* progress only when some completed */
}

/* What the note in our slot says the responder executed succeeded (not
 * while a READ's or atomic's data is being placed): at every step, for
 * the note stands for the ACKs of a requester whose polls complete from
 * it (ack_note.c: a READ's response completes the READ here, and the note
 * the writes after it), and the connection may end without the last ACK
 * ever leaving the peer's process (responder.c, flush_ack).  A QP a GPU
 * drives completes on the wire's ACKs while its connection lasts, as its
 * GPU's CQEs have been tested with.  qp->lock held. */
static void complete_noted_locked(struct sn_qp *qp, const struct sn_comp *c)
{
    uint64_t note;
    if (!c->in_data && (c->eof || !qp->poll_acks) && qp->sq_head != qp->sq_sent && push_acked_locked(qp, &note))
        completer_note_locked(qp, note);
}

/* Retry budget check (qp->lock held).  The budget measures the peer, not
 * this thread: one that was not scheduled for a while (a loaded host)
 * reads the responses that came meanwhile before it judges, else a peer
 * that answered in time would look dead (seen: IBV_WC_RETRY_EXC_ERR with
 * the ACKs in the socket, at load ~40 on 2 cores). */
static bool check_timeout_locked(struct sn_qp *qp, const struct sn_rbuf *rb, bool have_rb, bool eof)
{
    if (qp->attr.qp_state == IBV_QPS_ERR)
        return false;
    /* on the wire and unanswered, or waiting to leave an RTS QP (a link
     * that is down or a peer that cannot be reached keeps them there) */
    bool stuck = qp->out_fd < 0 || qp->conn_dead ||
                 (qp->port && atomic_load(&qp->port->state) != IBV_PORT_ACTIVE);
    bool pending = qp->sq_head != qp->sq_sent ||
                   (qp->sq_sent != qp->sq_tail && qp->attr.qp_state == IBV_QPS_RTS && stuck);
    if (!pending)
        return false;
    uint64_t now = sn_now_ns();
    if (now - qp->last_progress_ns > qp_retry_budget_ns(qp)) {
        if (response_waiting(rb, have_rb, qp->out_fd, eof)) {
            SN_DEBUG("completer: QP 0x%x: %llu ms without progress but a response waits: reading it first",
                     qp->ibqp.qp_num, (unsigned long long)((now - qp->last_progress_ns) / 1000000ull));
            return true;
        }
        SN_DEBUG("completer: QP 0x%x: retry budget (%llu ms) ran out: %llu WQE(s) unanswered, %llu not sent%s%s",
                 qp->ibqp.qp_num, (unsigned long long)(qp_retry_budget_ns(qp) / 1000000ull),
                 (unsigned long long)(qp->sq_sent - qp->sq_head), (unsigned long long)(qp->sq_tail - qp->sq_sent),
                 stuck ? ", held back (link down, peer unreachable or connection gone)" : "",
                 qp->out_fd >= 0 && !eof ? "" : ", no connection");
        atomic_fetch_add(&qp->cnt.retries, 1);
        qp_error_locked(qp, qp->sq_head, IBV_WC_RETRY_EXC_ERR, 0);
        return false;
    }
    return true;
}

/* A READ or ATOMIC response: the WQEs before it succeeded; its data goes
 * into its WQE's local SGEs (read_data). */
static int handle_read(struct sn_qp *qp, struct sn_comp *c, const struct sn_wire_resp *r)
{
    pthread_mutex_lock(&qp->lock);
    complete_upto_locked(qp, r->seq, false);
    bool ok = qp->sq_head < qp->sq_sent;
    if (ok) {
        c->w = qp->sq[qp->sq_head % qp->sq_size];
        /* a READ response answers a READ, an ATOMIC one an atomic (8 bytes) */
        bool want_atomic = r->type == SN_RESP_ATOMIC;
        ok = c->w.seq == r->seq && c->w.len == r->len &&
             (want_atomic ? sn_wr_is_atomic(c->w.opcode) : c->w.opcode == IBV_WR_RDMA_READ);
    }
    if (!ok) {
        qp_error_locked(qp, qp->sq_head, IBV_WC_BAD_RESP_ERR, 0);
        pthread_mutex_unlock(&qp->lock);
        return EPROTO;
    }
    pthread_mutex_unlock(&qp->lock);
    c->r = *r;
    c->in_data = true;
    c->sge = 0;
    c->sge_done = 0;
    c->left = r->len;
    c->st = IBV_WC_SUCCESS;
    return 0;
}

/* Places what has come of the response's data, at most *budget bytes:
 * 0 once it is all there (the WQE completes), EAGAIN while more is to come
 * or the budget ran out, or an errno. */
static int read_data(struct sn_qp *qp, struct sn_comp *c, size_t *budget)
{
    struct sn_swqe *w = &c->w;
    struct sn_port *port = qp->port;
    while (c->left && c->sge < w->num_sge) {
        if (!*budget)
            return EAGAIN;
        const struct ibv_sge *sg = &w->sge[c->sge];
        uint32_t seg = sg->length < c->sge_done + c->left ? sg->length - c->sge_done : c->left;
        if (seg > *budget)
            seg = (uint32_t)*budget;
        size_t n = 0;
        int err;
        struct sn_mr *mr = NULL;
        if (c->st == IBV_WC_SUCCESS &&
            mr_get(sg->lkey, false, qp->ibqp.pd, IBV_ACCESS_LOCAL_WRITE, sg->addr + c->sge_done, seg, &mr))
            c->st = IBV_WC_LOC_PROT_ERR;
        if (c->st == IBV_WC_SUCCESS) {
            err = rbuf_place(&c->rb, mr, sg->addr + c->sge_done, seg, port, sn_now_ns(), &n);
            mr_put(mr);
        } else {
            err = rbuf_discard(&c->rb, seg, &n);
        }
        c->left -= (uint32_t)n;
        c->sge_done += (uint32_t)n;
        *budget -= n;
        if (c->sge_done == sg->length) {
            c->sge++;
            c->sge_done = 0;
        }
        if (err)
            return err;
    }
    if (c->left) {
        /* more data than SGEs: the WQE's length said otherwise */
        size_t n = 0;
        int err = rbuf_discard(&c->rb, c->left, &n);
        c->left -= (uint32_t)n;
        if (err)
            return err;
    }
    c->in_data = false;
    atomic_fetch_add(&port->cnt.rx_bytes, c->r.len);
    atomic_fetch_add(&qp->cnt.rx_bytes, c->r.len);
    pthread_mutex_lock(&qp->lock);
    if (qp->sq_head < qp->sq_sent && qp->sq[qp->sq_head % qp->sq_size].seq == c->r.seq) {
        if (c->st == IBV_WC_SUCCESS)
            complete_upto_locked(qp, c->r.seq, true);
        else
            qp_error_locked(qp, qp->sq_head, (enum ibv_wc_status)c->st, 0);
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

static int handle_resp(struct sn_qp *qp, struct sn_comp *c, const struct sn_wire_resp *r)
{
    switch (r->type) {
    case SN_RESP_ACK:
        /* A NIC that coalesces or delays ACKs: the requester's completions
         * come late while its writes have long landed at the responder.
         * The ACK is acted on once its delay is over (completer_step);
         * responses behind it wait for it. */
        if (qp->port && qp->port->conf.ack_delay_us) {
            c->delayed = true;
            c->delayed_seq = r->seq;
            c->delayed_until = sn_now_ns() + (uint64_t)qp->port->conf.ack_delay_us * 1000ull;
            return 0;
        }
        pthread_mutex_lock(&qp->lock);
        complete_upto_locked(qp, r->seq, true);
        pthread_mutex_unlock(&qp->lock);
        return 0;
    case SN_RESP_READ:
    case SN_RESP_ATOMIC:
        return handle_read(qp, c, r);
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

/* Reads the responses that have come, at most a step's worth: 0 when the
 * connection has no more now, EAGAIN when the step's share ran out (or an
 * ACK is held back: *hold_until), or the connection's errno. */
static int read_responses(struct sn_qp *qp, struct sn_comp *c, int *nresp, uint64_t *hold_until)
{
    size_t budget = STEP_BYTES;
    for (;;) {
        int err;
        if (c->delayed) {
            uint64_t now = sn_now_ns();
            if (now < c->delayed_until) {
                *hold_until = c->delayed_until;
                return EAGAIN;
            }
            c->delayed = false;
            pthread_mutex_lock(&qp->lock);
            complete_upto_locked(qp, c->delayed_seq, true);
            pthread_mutex_unlock(&qp->lock);
        }
        if (c->in_data) {
            if ((err = read_data(qp, c, &budget)))
                return err == EAGAIN && budget ? 0 : err;
            continue;
        }
        if (*nresp >= STEP_RESPONSES || !budget)
            return EAGAIN;
        err = rbuf_need(&c->rb, sizeof(struct sn_wire_resp));
        if (err == EAGAIN)
            return 0;
        if (err)
            return err;
        struct sn_wire_resp r;
        memcpy(&r, rbuf_take(&c->rb, sizeof(r)), sizeof(r));
        (*nresp)++;
        if ((err = handle_resp(qp, c, &r)))
            return err;
    }
}

/* One step of the completer: the retry budget's check, then the responses
 * that are there (a step's worth), then the budget's timer while WQEs
 * await an answer. */
static unsigned completer_step(struct sn_eng_task *t, void *arg)
{
    struct sn_qp *qp = arg;
    struct sn_comp *c = qp->comp;
    atomic_fetch_add_explicit(&qp->steps[SN_QP_COMPLETER], 1, memory_order_relaxed);
    pthread_mutex_lock(&qp->lock);
    if (qp->stopping) {
        pthread_mutex_unlock(&qp->lock);
        return 0;
    }
    if (c->fd < 0 && qp->out_fd >= 0 && !c->eof) {
        /* its own descriptor of the connection: the requester's task
         * watches out_fd for room to write, this one for responses */
        c->fd = fcntl(qp->out_fd, F_DUPFD_CLOEXEC, 0);
        c->conn_id = qp->out_conn_id;
        if (c->fd < 0 || rbuf_init(&c->rb, c->fd)) {
            qp->conn_dead = c->eof = true;
        } else {
            c->have_rb = true;
            c->rb.ask_once = true;
            engine_task_fd(t, c->fd);
        }
    }
    complete_noted_locked(qp, c);
    bool pending = check_timeout_locked(qp, &c->rb, c->have_rb, c->eof);
    unsigned ret = 0;
    int nresp = 0;
    uint64_t hold = 0;
    /* keep reading after a failed write: a NAK may still be queued */
    if (c->have_rb && !c->eof && qp->attr.qp_state != IBV_QPS_ERR) {
        pthread_mutex_unlock(&qp->lock);
        rbuf_step(&c->rb);
        int err = read_responses(qp, c, &nresp, &hold);
        pthread_mutex_lock(&qp->lock);
        if (err == EAGAIN) {
            ret |= hold ? 0 : SN_ENG_MORE;
        } else if (err) {
            c->eof = true;
            qp->conn_dead = true;
            pthread_cond_broadcast(&qp->cond);
        }
        if (!c->eof)
            ret |= hold ? 0 : SN_ENG_IN;
        complete_noted_locked(qp, c);
        pending = check_timeout_locked(qp, &c->rb, c->have_rb, c->eof);
    }
    if (hold)
        engine_task_at(t, hold);
    else if (pending)
        /* the budget's end; progress meanwhile moves it, and the step
         * that runs then sets the next */
        engine_task_at(t, qp->last_progress_ns + qp_retry_budget_ns(qp) + 1000000ull);
    /* an ACK, or a post, within the poll time: the next ACK is due soon (a
     * put + quiet loop posts a few us after each CQE, when the engine would
     * be asleep already): its engine polls for it */
    if (qp->poll_acks && (ret & SN_ENG_IN) && sn_now_ns() - qp->last_progress_ns < sn_ack_poll_ns())
        ret |= SN_ENG_POLL_COMP;
    pthread_mutex_unlock(&qp->lock);
    return ret;
}

int completer_start(struct sn_qp *qp)
{
    if (qp->comp)
        return 0;
    struct sn_comp *c = calloc(1, sizeof(*c));
    if (!c)
        return ENOMEM;
    c->fd = -1;
    qp->comp = c;   /* before the task exists: its step reads it */
    int err = engine_task_new(completer_step, qp, SN_ROLE_COMPLETER, &c->task);
    if (err) {
        qp->comp = NULL;
        free(c);
    }
    return err;
}

void completer_arm_locked(struct sn_qp *qp)
{
    if (qp->comp && qp->comp->task)
        engine_task_at(qp->comp->task, qp->last_progress_ns + qp_retry_budget_ns(qp) + 1000000ull);
}

void completer_kick_locked(struct sn_qp *qp)
{
    if (qp->comp && qp->comp->task)
        engine_task_kick(qp->comp->task);
}

void completer_stop(struct sn_qp *qp)
{
    pthread_mutex_lock(&qp->lock);
    struct sn_comp *c = qp->comp;
    struct sn_eng_task *t = c ? c->task : NULL;
    if (c)
        c->task = NULL;   /* no more kicks */
    pthread_mutex_unlock(&qp->lock);
    if (!c)
        return;
    engine_task_del(t);   /* a step under way ends first */
    if (c->have_rb)
        rbuf_free(&c->rb);
    if (c->fd >= 0)
        close(c->fd);
    pthread_mutex_lock(&qp->lock);
    qp->comp = NULL;
    pthread_mutex_unlock(&qp->lock);
    free(c);
}
