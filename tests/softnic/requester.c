/* requester.c: the send side of a QP, a task on the engines (engine.c).
 * It walks the send queue in order, sets up the connection to the peer on
 * first need (connect.c), and sends WQEs in batches of up to 64 WQEs / 256
 * KiB (txbatch.c: frames, local key checks, pacing by the port's rate
 * limit).  RDMA READs and atomics (whose operands follow the header) are
 * held back while max_rd_atomic of them await their response.
 *
 * A step never waits: a batch the rate limit paces, or a connection without
 * room, keeps its place (the task runs again at the piece's time, or when
 * the socket has room), and a step sends at most a few batches before the
 * other tasks get the engine.  It runs when the QP has something for it: a
 * post the posting thread did not send itself, a move to RTS, a READ
 * answered (initiator depth), a connection under way; an idle QP's
 * requester does not run. */
#include "connect.h"
#include "softnic.h"
#include "txbatch.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A posting thread transmits at most this much itself (see below): WQEs,
 * and bytes of payload by pointer (inline data, at most max_inline_data a
 * WQE, comes on top: a put_signal's signal travels with its payload). */
#define DIRECT_MAX_WQES 8
#define DIRECT_MAX_BYTES 4096
/* ... and only while the peer has acknowledged all but this much: NCCL's
 * deepest stream (32 in flight) stays with its posting thread (at 8, a
 * depth-16 stream of 64 KiB pulled writes went through the requester's
 * engine: ib_write_bw -t 16 at 5.5 GB/s against 10 at -t 8); the bytes
 * bound what the socket holds */
#define DIRECT_MAX_UNACKED_WQES 32
#define DIRECT_MAX_UNACKED_BYTES (16 * 1024)
/* Batches one step sends before the other tasks get the engine. */
#define STEP_BATCHES 4
/* How often a step looks at a port that is down. */
#define PORT_DOWN_POLL_NS 2000000ull

struct sn_req {
    struct sn_eng_task *task;      /* NULL once requester_stop took it */
    struct sn_tx_batch *b;         /* the batch on its way (open) */
    bool open;
    struct sn_txbuf tx;            /* what out_fd's socket has not taken yet */
    struct sn_conn_setup cs;       /* the connection being set up (connecting) */
    bool connecting;
    bool kick_after;               /* kicked while a posting thread held tx_busy */
};

void requester_kick_locked(struct sn_qp *qp)
{
    if (qp->req && qp->req->task)
        engine_task_kick(qp->req->task);
}

/* True when the WQE at sq_sent is an RDMA READ or atomic and the QP
 * already has max_rd_atomic of them unanswered on the wire: it waits for a
 * response, as a NIC's initiator depth makes it wait.  0 counts as 1, as
 * on a ConnectX (mlx5 programs log2 of the depth: 0 and 1 both give 1).
 * qp->lock held. */
static bool rd_gated_locked(struct sn_qp *qp)
{
    if (qp->sq_sent == qp->sq_tail || !sn_wr_is_read_like(qp->sq[qp->sq_sent % qp->sq_size].opcode))
        return false;
    uint32_t limit = qp->attr.max_rd_atomic ? qp->attr.max_rd_atomic : 1, n = 0;
    for (uint64_t i = qp->sq_head; i < qp->sq_sent && n < limit; i++)
        n += sn_wr_is_read_like(qp->sq[i % qp->sq_size].opcode);
    return n >= limit;
}


/* Takes up to a batch of WQEs from sq_sent into rq->b: qp->lock held, the
 * caller holds tx_busy. */
static void batch_open_locked(struct sn_qp *qp, struct sn_req *rq, bool prepaid)
{
    struct sn_tx_batch *b = rq->b;
    /* Requests leave with none before them unanswered: their timer starts
     * now, and the completer gets one.  Its last step may have found
     * nothing in flight (every ACK in, more WQEs queued but not sent: a
     * busy QP's posts do not arm it) and will see no ACK wake it if the
     * peer is gone: ib_write_bw across a link cut mid-run then waited for
     * its 20 s, in about half the runs, instead of its retry budget. */
    if (qp->sq_head == qp->sq_sent && qp->sq_sent < qp->sq_tail) {
        qp->last_progress_ns = sn_now_ns();
        completer_arm_locked(qp);
    }
    uint64_t bytes = 0;
    b->n = b->built = b->niov = b->at = 0;
    b->bad = -1;
    b->piece = false;
    b->first = qp->sq_sent;
    b->prepaid = prepaid;
    b->cma = qp->cma_ok;
    b->latency_us = qp->port->conf.latency_us;
    b->mtu = qp->attr.path_mtu;
    while (qp->sq_sent < qp->sq_tail && b->n < BATCH_WQES && bytes < BATCH_BYTES &&
           !rd_gated_locked(qp)) {
        struct sn_swqe *w = &qp->sq[qp->sq_sent % qp->sq_size];
        w->seq = qp->next_seq++;
        /* an ACK is asked for where the QP needs one: a completion to
         * write, or a share of the send queue (and of the direct path's
         * unacknowledged window) held by unsignaled WQEs */
        w->ack_req = qp->sq_sig_all || (w->send_flags & IBV_SEND_SIGNALED) || sn_wr_is_read_like(w->opcode) ||
                     ++qp->unreq >= SN_ACKREQ_EVERY;
        if (w->ack_req)
            qp->unreq = 0;
        if (b->n == 0)
            b->since_ns = w->posted_ns;
        b->w[b->n++] = *w;
        qp->sq_sent++;
        if (!sn_wr_is_read_like(w->opcode))
            bytes += w->len;
    }
    sn_stat_add(SN_ST_TX_BATCHES, 1);
    sn_stat_add(SN_ST_TX_WQES, (uint64_t)b->n);
    rq->open = true;
    qp->tx_held = true;
}

/* Ends the open batch: a WQE that failed locally fails the QP, a
 * connection that failed leaves the retry budget running.  qp->lock held. */
static void batch_close_locked(struct sn_qp *qp, struct sn_req *rq, bool conn_failed)
{
    struct sn_tx_batch *b = rq->b;
    txbatch_release(b);
    rq->open = false;
    qp->tx_held = !txbuf_empty(&rq->tx);
    if (b->bad >= 0)
        qp_error_locked(qp, b->first + (uint64_t)b->bad, IBV_WC_LOC_PROT_ERR, 0);
    else if (conn_failed) {
        qp->conn_dead = true;
        pthread_cond_broadcast(&qp->cond);
    }
}

/* Builds and sends the open batch as far as it goes now (force: all of it,
 * what the socket does not take waiting in rq->tx).  Called with qp->lock
 * held and tx_busy set by the caller; the lock is let go meanwhile.
 * PUSH_DONE once the batch is over (or PUSH_ERR: the connection failed);
 * PUSH_PACED (*due), PUSH_FULL or PUSH_MORE when it waits between steps. */
static enum sn_push batch_run_locked(struct sn_qp *qp, struct sn_req *rq, bool force, uint64_t *due)
{
    struct sn_tx_batch *b = rq->b;
    int fd = qp->out_fd, err = 0;
    enum sn_push r = PUSH_DONE;
    pthread_mutex_unlock(&qp->lock);
    for (;;) {
        if (b->at == b->niov) {
            txbatch_release(b);
            if (b->bad >= 0 || b->built == b->n)
                break;
            txbatch_build(qp, b);
            continue;
        }
        r = txbatch_push(qp, b, &rq->tx, fd, force, due, &err);
        if (r == PUSH_DONE)
            continue;
        if (r != PUSH_ERR && txbatch_detach(b) == 0) {
            pthread_mutex_lock(&qp->lock);
            return r;
        }
        r = PUSH_ERR;
        break;
    }
    pthread_mutex_lock(&qp->lock);
    batch_close_locked(qp, rq, r == PUSH_ERR);
    return r;
}

/* Sets the connection up as far as it goes now; qp->lock held (let go
 * meanwhile).  Returns the SN_ENG_* it waits for, 0 when done (or failed:
 * conn_dead). */
static unsigned connect_locked(struct sn_eng_task *t, struct sn_qp *qp, struct sn_req *rq)
{
    if (!rq->connecting) {
        int err = conn_start(&rq->cs, qp);
        if (err) {
            SN_DEBUG("requester: QP 0x%x: cannot connect to QP 0x%x: %s", qp->ibqp.qp_num, qp->attr.dest_qp_num,
                     strerror(err));
            qp->conn_dead = true;
            pthread_cond_broadcast(&qp->cond);
            return 0;
        }
        rq->connecting = true;
        engine_task_fd(t, rq->cs.fd);
    }
    bool cma = false;
    unsigned io = 0;
    pthread_mutex_unlock(&qp->lock);
    int err = conn_advance(&rq->cs, &cma, &io);
    if (!err && (rq->cs.answer.syndrome & SN_ANSWER_PUSH))
        push_attach(qp, rq->cs.fd, &rq->cs.offer);   /* checks the peer: not under the lock */
    pthread_mutex_lock(&qp->lock);
    if (err == EINPROGRESS)
        return io;
    rq->connecting = false;
    if (err) {
        SN_DEBUG("requester: QP 0x%x: connection to QP 0x%x failed: %s", qp->ibqp.qp_num, qp->attr.dest_qp_num,
                 strerror(err));
        engine_task_fd(t, -1);   /* not watched once closed: its number may be another's */
        conn_abort(&rq->cs);
        qp->conn_dead = true;
    } else {
        qp->out_fd = rq->cs.fd;
        qp->cma_ok = cma;
        qp->last_progress_ns = sn_now_ns();   /* the timer starts now */
        completer_kick_locked(qp);
    }
    pthread_cond_broadcast(&qp->cond);
    return 0;
}

/* Lets go of a batch and of bytes a QP in error will never send. */
static void drop_locked(struct sn_qp *qp, struct sn_req *rq)
{
    if (rq->open) {
        txbatch_release(rq->b);
        rq->open = false;
    }
    txbuf_free(&rq->tx);
    qp->tx_held = false;
}

static unsigned requester_step(struct sn_eng_task *t, void *arg)
{
    struct sn_qp *qp = arg;
    struct sn_req *rq = qp->req;
    atomic_fetch_add_explicit(&qp->steps[SN_QP_REQUESTER], 1, memory_order_relaxed);
    unsigned ret = 0;
    int batches = STEP_BATCHES;
    pthread_mutex_lock(&qp->lock);
    if (qp->tx_busy)
        rq->kick_after = true;   /* a posting thread sends; it kicks when done */
    while (!qp->stopping && !qp->tx_busy) {
        enum ibv_qp_state st = qp->attr.qp_state;
        struct sn_port *port = qp->port;
        if (st == IBV_QPS_ERR && (rq->open || qp->tx_held)) {
            drop_locked(qp, rq);
            continue;
        }
        if (rq->open) {
            uint64_t due = 0;
            qp->tx_busy = true;
            enum sn_push r = batch_run_locked(qp, rq, false, &due);
            qp->tx_busy = false;
            if (qp->stopping)
                pthread_cond_broadcast(&qp->cond);   /* qp_engine_stop waits to close the fd */
            if (r == PUSH_PACED) {
                engine_task_at(t, due);
                break;
            }
            if (r == PUSH_FULL) {
                ret = SN_ENG_OUT;
                break;
            }
            if (r == PUSH_MORE) {
                ret = SN_ENG_MORE;
                break;
            }
            continue;
        }
        if (qp->tx_held) {
            /* a direct batch's bytes the socket did not take */
            int err = txbuf_flush(&rq->tx, qp->out_fd);
            if (err == EAGAIN) {
                ret = SN_ENG_OUT;
                break;
            }
            qp->tx_held = false;
            if (err) {
                txbuf_free(&rq->tx);
                qp->conn_dead = true;
                pthread_cond_broadcast(&qp->cond);
            }
            continue;
        }
        if (st != IBV_QPS_RTS || qp->sq_sent == qp->sq_tail || qp->conn_dead || !port ||
            rd_gated_locked(qp))
            break;   /* idle: what changes that kicks it */
        if (atomic_load(&port->state) != IBV_PORT_ACTIVE) {
            /* link down: nothing leaves; the completer's budget runs */
            pthread_mutex_unlock(&qp->lock);
            fault_poll();
            pthread_mutex_lock(&qp->lock);
            engine_task_at(t, sn_now_ns() + PORT_DOWN_POLL_NS);
            break;
        }
        if (qp->out_fd < 0) {
            ret = connect_locked(t, qp, rq);
            if (ret)
                break;
            continue;
        }
        if (batches-- == 0) {
            ret = SN_ENG_MORE;
            break;
        }
        qp->tx_busy = true;
        batch_open_locked(qp, rq, false);
        qp->tx_busy = false;
    }
    pthread_mutex_unlock(&qp->lock);
    return ret;
}

int requester_start(struct sn_qp *qp)
{
    int err = 0;
    pthread_mutex_lock(&qp->lock);
    if (!qp->req) {
        struct sn_req *rq = calloc(1, sizeof(*rq));
        if (rq && !(rq->b = calloc(1, sizeof(*rq->b)))) {
            free(rq);
            rq = NULL;
        }
        if (!rq) {
            err = ENOMEM;
        } else {
            rq->cs.fd = -1;
            qp->req = rq;   /* before the task exists: its step reads it */
            if ((err = engine_task_new(requester_step, qp, SN_ROLE_REQUESTER, &rq->task))) {
                qp->req = NULL;
                free(rq->b);
                free(rq);
            }
        }
    }
    if (!err)
        err = completer_start(qp);
    if (!err)
        requester_kick_locked(qp);
    pthread_mutex_unlock(&qp->lock);
    return err;
}

void requester_stop(struct sn_qp *qp)
{
    pthread_mutex_lock(&qp->lock);
    struct sn_req *rq = qp->req;
    struct sn_eng_task *t = rq ? rq->task : NULL;
    if (rq)
        rq->task = NULL;   /* no more kicks */
    pthread_mutex_unlock(&qp->lock);
    if (!rq)
        return;
    engine_task_del(t);   /* a step under way ends first */
    pthread_mutex_lock(&qp->lock);
    /* a posting thread transmitting (lock let go) still uses the batch and
     * the fd: it ends at qp_engine_stop's shutdown */
    while (qp->tx_busy)
        pthread_cond_wait(&qp->cond, &qp->lock);
    qp->req = NULL;
    if (rq->connecting)
        conn_abort(&rq->cs);
    drop_locked(qp, rq);
    pthread_mutex_unlock(&qp->lock);
    free(rq->b);
    free(rq);
}

/* Where WQE w's payload is: SN_MEM_HOST when all in host memory,
 * SN_MEM_CUDA when some is CUDA memory (copied through a bounce buffer),
 * SN_MEM_UNKNOWN for a bad key, or a key table being changed (mr_mem_try:
 * never waited for with qp->lock held): the requester's task then takes
 * the WQE.  The MR may go before the transmit looks it up again; batch_add
 * then completes the WQE in error, as it would on the requester's task. */
static enum sn_mem payload_memory(struct sn_qp *qp, const struct sn_swqe *w)
{
    enum sn_mem all = SN_MEM_HOST;
    for (int s = 0; s < w->num_sge; s++) {
        const struct ibv_sge *sg = &w->sge[s];
        if (!sg->length)
            continue;
        enum sn_mem m = mr_mem_try(sg->lkey, qp->ibqp.pd, sg->addr, sg->length);
        if (m == SN_MEM_UNKNOWN)
            return SN_MEM_UNKNOWN;
        if (m == SN_MEM_CUDA)
            all = SN_MEM_CUDA;
    }
    return all;
}

/* requester_direct_copies_cuda: whether this thread's posts may copy CUDA
 * payloads themselves. */
static __thread bool direct_copies_cuda;

void requester_direct_copies_cuda(bool on)
{
    direct_copies_cuda = on;
}

/* Whether a direct batch (a few KiB) can be written to out_fd without
 * waiting: a connection whose peer reads nothing (a responder held in an
 * RNR wait, a stopped or slow process) fills, and sendmsg would wait for
 * room where a NIC's post returns at once.  What the peer has not yet
 * acknowledged -- requests it may not have read -- bounds what the
 * connection holds; with at most a few of them, 16 KiB on the wire, the
 * socket buffers (16 KiB to send, 128 KiB to receive by default) have room
 * for a direct batch (at most 4 KiB by pointer and DIRECT_MAX_WQES inline
 * payloads of SN_MAX_INLINE: 12 KiB and headers).  No system call: poll()
 * for POLLOUT would cost one per post, and says only that half the send
 * buffer is free.  qp->lock held. */
static bool wire_has_room_locked(struct sn_qp *qp)
{
    if (qp->sq_sent - qp->sq_head > DIRECT_MAX_UNACKED_WQES)
        return false;
    uint64_t bytes = 0;
    for (uint64_t i = qp->sq_head; i < qp->sq_sent; i++) {
        const struct sn_swqe *w = &qp->sq[i % qp->sq_size];
        bytes += sizeof(struct sn_wire_req);
        if (!sn_wr_is_read_like(w->opcode) && !w->npin)   /* pinned: pulled, not sent */
            bytes += w->len;
    }
    return bytes <= DIRECT_MAX_UNACKED_BYTES;
}

/* The posting thread may transmit itself when the requester has nothing
 * in hand and what the new WQEs put on the wire is small: inline data, a
 * small payload in host memory, or only the descriptor of one the
 * same-host peer pulls (cma.c); a small CUDA payload too when the poster is
 * a NIC thread (requester_direct_copies_cuda).  This spares one thread wake-up per
 * message, which on a VM is most of a message's latency (a NIC reads the
 * WQE as the doorbell rings, too).  On a paced port only a few KiB, and
 * only while the line is free (rate_take_if_idle: no sleeping here).
 * Everything else -- connecting, a busy paced line, added latency, faults,
 * reads and atomics, CUDA memory posted by an application thread, large
 * payloads on the wire, a connection without room -- stays with the
 * requester's task.  qp->lock held. */
bool requester_try_direct_locked(struct sn_qp *qp)
{
    struct sn_port *port = qp->port;
    struct sn_req *rq = qp->req;
    if (!rq || qp->tx_busy || qp->tx_held || qp->stopping || qp->attr.qp_state != IBV_QPS_RTS ||
        qp->out_fd < 0 || qp->conn_dead || !port || port->conf.latency_us ||
        port->conf.down_after_bytes || atomic_load(&port->state) != IBV_PORT_ACTIVE ||
        qp->sq_tail - qp->sq_sent > DIRECT_MAX_WQES)
        return false;
    if (qp->sq_sent == qp->sq_tail)
        return true;
    if (!wire_has_room_locked(qp))   /* before any key lookup: the cheaper refusal */
        return false;
    uint32_t bytes = 0;
    uint64_t charged = 0;   /* what the rate limit counts: payloads, pulled or sent */
    for (uint64_t i = qp->sq_sent; i < qp->sq_tail; i++) {
        const struct sn_swqe *w = &qp->sq[i % qp->sq_size];
        if (sn_wr_is_read_like(w->opcode))
            return false;
        charged += w->len;
        if (w->len && !w->inl) {
            enum sn_mem m = payload_memory(qp, w);
            /* A NIC thread copies a CUDA payload only on an idle QP (one
             * message at a time: the wake-up it saves is that message's
             * latency); with WQEs in flight the requester's copies
             * overlap the NIC thread's doorbell work instead. */
            if (m == SN_MEM_UNKNOWN ||
                (m == SN_MEM_CUDA && (!direct_copies_cuda || qp->sq_sent != qp->sq_head)))
                return false;
            /* a pulled payload leaves as its descriptor; a CUDA one goes on
             * the wire (another process cannot pull GPU memory) */
            if (m == SN_MEM_HOST && qp->cma_ok && w->len >= SN_CMA_MIN_BYTES) {
                bytes += (uint32_t)(sizeof(struct sn_wire_cma) +
                                    (size_t)w->num_sge * sizeof(struct sn_cma_seg));
                continue;
            }
        }
        if (!w->inl)
            bytes += w->len;
        if (bytes > DIRECT_MAX_BYTES)
            return false;
    }
    if (bytes > DIRECT_MAX_BYTES)
        return false;
    /* a paced port: a few KiB on a free line go now, without sleeping
     * (a pulled payload moves at copy speed, so only small ones); a busy
     * line, or more, waits for the requester's pacing */
    if (port->tx_rate.rate && (charged > DIRECT_MAX_BYTES ||
                               !rate_take_if_idle(&port->tx_rate, charged,
                                                  qp->sq[qp->sq_sent % qp->sq_size].posted_ns)))
        return false;
    atomic_fetch_add(&qp->cnt.direct_wqes, qp->sq_tail - qp->sq_sent);
    qp->tx_busy = true;
    /* charged above, or nothing to charge: the push never waits for the
     * rate limit here, also when a rate is set between the check and the
     * push; what the socket does not take now waits in rq->tx */
    batch_open_locked(qp, rq, true);
    uint64_t due;
    (void)batch_run_locked(qp, rq, true, &due);
    qp->tx_busy = false;
    if (qp->stopping)
        pthread_cond_broadcast(&qp->cond);   /* qp_engine_stop waits to close the fd */
    if (rq->kick_after || qp->sq_sent != qp->sq_tail || !txbuf_empty(&rq->tx)) {
        rq->kick_after = false;
        requester_kick_locked(qp);
    }
    return true;
}

