/* rconn.c: the life of an incoming connection (a peer QP's requester), a
 * task on the engines from the accept (wire.c) to the close:
 *   hello: magic/version, destination QP exists, QP in RTR/RTS/SQD (a QP
 *          still in RESET or INIT is waited for), the peer is the QP's
 *          configured remote (QPN and GID) -- otherwise the connection is
 *          dropped, as hardware drops such packets, and the requester ends
 *          with IBV_WC_RETRY_EXC_ERR;  a hello offering the same-host fast
 *          path is answered first (cma.c), with the offer to place small
 *          writes itself when it asked (push.c);
 *   run:   the requests, in order (responder.c);
 *   drain: after a NAK, the peer gets up to 2 s to read it before the
 *          close (what it still sends is read and dropped).
 * An attached connection counts in qp->nresp; responder_stop_qp waits for
 * the QP's connections to let go of it, which each does at its next step
 * (the QP going down kicks them). */
#include "rconn.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define HELLO_TIMEOUT_NS 5000000000ull
#define DRAIN_NS 2000000000ull
/* how often a connection looks at a QP not yet in RTR (its move kicks it) */
#define ACCEPT_POLL_NS 50000000ull

/* Reads what has come of the hello: 0 when it is whole, EAGAIN, or why the
 * connection ends. */
static int read_hello(struct sn_rconn *rc)
{
    while (rc->hello_got < sizeof(rc->hello)) {
        ssize_t n = recv(rc->fd, (char *)&rc->hello + rc->hello_got, sizeof(rc->hello) - rc->hello_got,
                         MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return EAGAIN;
        if (n <= 0)
            return n == 0 ? ECONNRESET : errno;
        rc->hello_got += (size_t)n;
    }
    const struct sn_wire_hello *h = &rc->hello;
    if (h->magic != SN_WIRE_MAGIC || h->version != SN_WIRE_VERSION || h->rnr_retry > 7)
        return EPROTO;
    return 0;
}

/* The QP is ready (RTR or later) and the peer is its remote: 1; 0 while
 * it is in RESET or INIT; -1 when the connection is refused.  qp->lock
 * held. */
static int accept_peer_locked(struct sn_rconn *rc)
{
    struct sn_qp *qp = rc->qp;
    const struct sn_wire_hello *h = &rc->hello;
    if (!qp->stopping && (qp->attr.qp_state == IBV_QPS_RESET || qp->attr.qp_state == IBV_QPS_INIT))
        return 0;
    if (!responder_qp_receiving(qp) || !qp->port)
        return -1;
    if (h->src_qpn != qp->attr.dest_qp_num || memcmp(h->src_gid, qp->attr.ah_attr.grh.dgid.raw, 16) != 0)
        return -1;
    rc->port = qp->port;
    return 1;
}

/* The connection lets go of its QP: the QP may be freed from here on. */
static void detach(struct sn_rconn *rc)
{
    struct sn_qp *qp = rc->qp;
    if (!qp)
        return;
    if (rc->have_rb)
        responder_end(rc);
    /* its last note is left: the peer's mapping goes before the QP's
     * destruction returns (a mapping holds the peer's /proc/<pid>/mem) */
    push_note_peer_put(rc->note_peer);
    rc->note_peer = NULL;
    pthread_mutex_lock(&qp->lock);
    for (struct sn_rconn **pp = &qp->rconns; *pp; pp = &(*pp)->next)
        if (*pp == rc) {
            *pp = rc->next;
            break;
        }
    qp->nresp--;
    pthread_cond_broadcast(&qp->cond);
    pthread_mutex_unlock(&qp->lock);
    rc->qp = NULL;
}

static unsigned close_conn(struct sn_eng_task *t, struct sn_rconn *rc)
{
    engine_task_fd(t, -1);
    /* an ACK still in our buffer goes ahead of the FIN if the socket takes it */
    (void)txbuf_flush(&rc->tx, rc->fd);
    close(rc->fd);
    if (rc->have_rb)
        rbuf_free(&rc->rb);
    txbuf_free(&rc->tx);
    free(rc->bounce);
    if (rc->cma_pidfd >= 0)
        close(rc->cma_pidfd);
    free(rc);
    return SN_ENG_DONE;
}

static unsigned drain(struct sn_eng_task *t, struct sn_rconn *rc);

/* The connection ends: with a NAK sent (ECONNABORTED), the peer gets to
 * read it first (drain); otherwise it closes now. */
static unsigned end_conn(struct sn_eng_task *t, struct sn_rconn *rc, int err, bool nak_sent)
{
    /* a peer closing is normal; anything else is a softnic problem worth a line */
    if (rc->qp && (err == EIO || err == EFAULT || err == EPROTO || err == ENOMEM || err == ENODEV))
        SN_LOG("responder: QP 0x%x: connection from QP 0x%x dropped: %s", rc->qp->ibqp.qp_num, rc->peer_qpn,
               strerror(err));
    detach(rc);
    if (!nak_sent)
        return close_conn(t, rc);
    rc->state = RC_DRAIN;
    rc->deadline = sn_now_ns() + DRAIN_NS;
    return drain(t, rc);
}

/* After a NAK: it leaves (what the socket did not take yet first), and
 * what the peer still sends is dropped, until the peer closes or the
 * drain's time is over. */
static unsigned drain(struct sn_eng_task *t, struct sn_rconn *rc)
{
    char buf[16384];
    for (;;) {
        if (sn_now_ns() >= rc->deadline)
            return close_conn(t, rc);
        ssize_t n = recv(rc->fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n > 0 || (n < 0 && errno == EINTR))
            continue;
        if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
            return close_conn(t, rc);
        break;
    }
    unsigned io = SN_ENG_IN;
    if (!rc->shut) {
        int err = txbuf_flush(&rc->tx, rc->fd);
        if (err && err != EAGAIN)
            return close_conn(t, rc);
        if (err == EAGAIN) {
            io |= SN_ENG_OUT;
        } else {
            shutdown(rc->fd, SHUT_WR);
            rc->shut = true;
        }
    }
    engine_task_at(t, rc->deadline);
    return io;
}

/* The hello's QP is ready and the peer is its remote: the fast path's
 * answer, then requests. */
static int start_run(struct sn_rconn *rc)
{
    const struct sn_wire_hello *h = &rc->hello;
    struct sn_qp *qp = rc->qp;
    rc->rnr_retry = h->rnr_retry;
    rc->peer_qpn = h->src_qpn;
    int err = rbuf_init(&rc->rb, rc->fd);
    if (err)
        return err;
    rc->have_rb = true;
    if (h->hflags & SN_HELLO_CMA) {
        /* answered before anything else: the requester waits for it (connect.c) */
        rc->cma_pidfd = cma_accept_peer(rc->fd, h);
        bool pull = rc->cma_pidfd >= 0;
        rc->cma_pid = pull ? h->pid : 0;
        SN_DEBUG("responder: QP 0x%x: peer QP 0x%x pid %u: %s", qp->ibqp.qp_num, h->src_qpn, h->pid,
                 pull ? "same host, payloads by cross-memory attach" : "payloads on the wire");
        struct sn_wire_push_offer offer;
        bool push = false;
        if (pull && (h->hflags & SN_HELLO_PUSH)) {
            pthread_mutex_lock(&qp->lock);
            push = push_offer_locked(qp, rc->fd, &offer);
            pthread_mutex_unlock(&qp->lock);
        }
        uint8_t syn = (uint8_t)((pull ? SN_ANSWER_CMA : 0) | (push ? SN_ANSWER_PUSH : 0));
        if ((err = responder_send_resp(rc, SN_RESP_HELLO, syn, 0, 0)))
            return err;
        if (push) {
            struct iovec v = { &offer, sizeof(offer) };
            if ((err = txbuf_writev(&rc->tx, rc->fd, &v, 1)))
                return err;
        }
    }
    /* a requester proven to be of this host names its slot for our notes
     * of what we executed (responder.c, flush_ack; ack_note.c) */
    if (rc->cma_pidfd >= 0 && (h->hflags & SN_HELLO_NOTE)) {
        int pidfd = fcntl(rc->cma_pidfd, F_DUPFD_CLOEXEC, 0);
        if (pidfd >= 0) {
            rc->note_peer = push_note_peer(h->pid, h->note_region_fd, pidfd, h->note_slot);
            rc->note_slot = h->note_slot;
        }
    }
    /* a GPU-driven requester (a kernel's put + quiet loop) sends its next
     * request a round trip after this one's ACK: the engine polls for it,
     * as its completer polls for the ACK (config.c, SOFTNIC_ACK_POLL_US) */
    rc->poll_next = (h->hflags & SN_HELLO_POLL) && sn_ack_poll_ns();
    if (rc->poll_next)
        sn_ack_poll_conn();
    rc->state = RC_RUN;
    return 0;
}

static unsigned rconn_step(struct sn_eng_task *t, void *arg)
{
    struct sn_rconn *rc = arg;
    if (rc->qp)
        atomic_fetch_add_explicit(&rc->qp->steps[SN_QP_RESPONDER], 1, memory_order_relaxed);
    switch (rc->state) {
    case RC_HELLO: {
        int err = read_hello(rc);
        if (err == EAGAIN) {
            if (sn_now_ns() >= rc->deadline)
                return close_conn(t, rc);
            engine_task_at(t, rc->deadline);
            return SN_ENG_IN;
        }
        if (err || !(rc->qp = wire_qp_attach(rc->hello.dst_qpn)))
            return close_conn(t, rc);
        struct sn_qp *qp = rc->qp;
        pthread_mutex_lock(&qp->lock);
        rc->next = qp->rconns;
        qp->rconns = rc;
        pthread_mutex_unlock(&qp->lock);
        rc->state = RC_ACCEPT;
    }
        /* fall through */
    case RC_ACCEPT: {
        struct sn_qp *qp = rc->qp;
        pthread_mutex_lock(&qp->lock);
        int ok = accept_peer_locked(rc);
        pthread_mutex_unlock(&qp->lock);
        if (ok == 0) {
            engine_task_at(t, sn_now_ns() + ACCEPT_POLL_NS);
            return 0;
        }
        if (ok < 0)
            SN_DEBUG("responder: QP 0x%x: connection from QP 0x%x refused (QP in state %d%s)", qp->ibqp.qp_num,
                     rc->hello.src_qpn, (int)qp->attr.qp_state,
                     qp->stopping ? ", being destroyed" : responder_qp_receiving(qp) ? ", another peer" : "");
        int err = ok < 0 ? ECONNABORTED : start_run(rc);
        if (err)
            return end_conn(t, rc, err, false);
        engine_task_setup(t, false);   /* set up: its requests are data's path */
    }
        /* fall through */
    case RC_RUN: {
        /* writes into CUDA memory land once per step (responder_run),
         * not once per write */
        gpu_defer_writes(true);
        unsigned r = responder_run(rc);
        gpu_defer_writes(false);
        if (r & RC_END)
            return end_conn(t, rc, rc->err, rc->err == ECONNABORTED);
        return r;
    }
    case RC_DRAIN:
        return drain(t, rc);
    }
    return 0;
}

void responder_spawn(int fd)
{
    struct sn_rconn *rc = calloc(1, sizeof(*rc));
    if (!rc) {
        close(fd);
        return;
    }
    rc->fd = fd;
    rc->cma_pidfd = -1;
    rc->state = RC_HELLO;
    rc->deadline = sn_now_ns() + HELLO_TIMEOUT_NS;
    if (engine_task_new(rconn_step, rc, SN_ROLE_RESPONDER, &rc->task)) {
        close(fd);
        free(rc);
        return;
    }
    engine_task_fd(rc->task, fd);
    engine_task_setup(rc->task, true);
    engine_task_kick(rc->task);
}

void responder_kick_locked(struct sn_qp *qp)
{
    for (struct sn_rconn *rc = qp->rconns; rc; rc = rc->next)
        if (!rc->no_kick) {
            /* the step wakes and ends the connection; its sending side
             * stays open until then: a response the step is writing still
             * leaves, and the FIN follows it at the close */
            shutdown(rc->fd, SHUT_RD);
            engine_task_kick(rc->task);
        }
}

void responder_wake_locked(struct sn_qp *qp, bool recv_posted)
{
    for (struct sn_rconn *rc = qp->rconns; rc; rc = rc->next)
        if (!recv_posted || rc->rnr_waiting)
            engine_task_kick(rc->task);
}

void responder_stop_qp(struct sn_qp *qp)
{
    pthread_mutex_lock(&qp->lock);
    qp->stopping = true;
    responder_rx_live_locked(qp);
    responder_kick_locked(qp);
    while (qp->nresp > 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 10000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&qp->cond, &qp->lock, &ts);
        responder_kick_locked(qp);
    }
    pthread_mutex_unlock(&qp->lock);
}
