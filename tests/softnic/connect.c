/* connect.c: a QP's outgoing connection, set up on the engines without
 * waiting: a non-blocking TCP connect to the listener that owns the remote
 * QPN (wire.c), the hello (our QPN, its QPN, our GID, our rnr_retry, and
 * the same-host fast path's offer), and, when the hello offered the fast
 * path, the responder's answer: it comes once the peer QP is ready to
 * receive, before anything else on the connection, so the first request
 * already knows how to carry its payload (cma.c), followed by its offer to
 * let us place small writes ourselves when the hello asked (push.c).  A peer that never
 * answers costs nothing but the retry budget, which the completer keeps. */
#include "connect.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

/* A random nonzero name for a connection (push.c's notes carry it). */
static uint32_t conn_name(void)
{
    static _Atomic uint32_t fallback;
    uint32_t id = 0;
    if (getrandom(&id, sizeof(id), GRND_NONBLOCK) != (ssize_t)sizeof(id))
        id = (uint32_t)sn_now_ns() ^ (atomic_fetch_add(&fallback, 1) * 2654435761u);
    return id ? id : 1;
}

int conn_start(struct sn_conn_setup *cs, struct sn_qp *qp)
{
    memset(cs, 0, sizeof(*cs));
    cs->fd = -1;
    struct sn_wire_hello *h = &cs->hello;
    h->magic = SN_WIRE_MAGIC;
    h->version = SN_WIRE_VERSION;
    h->rnr_retry = qp->attr.rnr_retry;
    h->dst_qpn = qp->attr.dest_qp_num;
    h->src_qpn = qp->ibqp.qp_num;
    memcpy(h->src_gid, qp->port->gid.raw, 16);
    cma_hello_fill(h);
    if ((h->hflags & SN_HELLO_CMA) && softnic_global()->conf.push)
        h->hflags |= SN_HELLO_PUSH;
    if (qp->poll_acks)
        h->hflags |= SN_HELLO_POLL;
    h->conn_id = qp->out_conn_id = conn_name();
    ack_note_hello_locked(qp, h);
    union ibv_gid dgid = qp->attr.ah_attr.grh.dgid;
    int err = wire_connect_start(qp->port, &dgid, qp->attr.dest_qp_num, &cs->fd);
    if (err)
        cs->fd = -1;
    else
        h->fd = (uint32_t)cs->fd;
    cs->state = CONN_TCP;
    return err;
}

void conn_abort(struct sn_conn_setup *cs)
{
    if (cs->fd >= 0)
        close(cs->fd);
    cs->fd = -1;
}

/* Reads what has come of a fixed-size message: 0 once *got == len,
 * EINPROGRESS (*io: wait to read), or why the connection failed. */
static int recv_all(int fd, void *buf, size_t len, size_t *got, unsigned *io)
{
    while (*got < len) {
        ssize_t n = recv(fd, (char *)buf + *got, len - *got, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            *io = SN_ENG_IN;
            return EINPROGRESS;
        }
        if (n <= 0)
            return n == 0 ? ECONNRESET : errno;
        *got += (size_t)n;
    }
    return 0;
}

int conn_advance(struct sn_conn_setup *cs, bool *cma, unsigned *io)
{
    *cma = false;
    if (cs->state == CONN_TCP) {
        int err = wire_connect_result(cs->fd);
        if (err == EINPROGRESS) {
            *io = SN_ENG_OUT;
            return EINPROGRESS;
        }
        if (err)
            return err;
        cs->state = CONN_HELLO;
    }
    if (cs->state == CONN_HELLO) {
        while (cs->hello_sent < sizeof(cs->hello)) {
            ssize_t n = send(cs->fd, (char *)&cs->hello + cs->hello_sent, sizeof(cs->hello) - cs->hello_sent,
                             MSG_NOSIGNAL | MSG_DONTWAIT);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                *io = SN_ENG_OUT;
                return EINPROGRESS;
            }
            if (n < 0)
                return errno;
            cs->hello_sent += (size_t)n;
        }
        if (!(cs->hello.hflags & SN_HELLO_CMA))
            return 0;
        cs->state = CONN_ANSWER;
    }
    if (cs->state == CONN_ANSWER) {
        int err = recv_all(cs->fd, &cs->answer, sizeof(cs->answer), &cs->answer_got, io);
        if (err)
            return err;
        if (cs->answer.type != SN_RESP_HELLO || (cs->answer.syndrome & ~(SN_ANSWER_CMA | SN_ANSWER_PUSH)) ||
            ((cs->answer.syndrome & SN_ANSWER_PUSH) &&
             (!(cs->hello.hflags & SN_HELLO_PUSH) || !(cs->answer.syndrome & SN_ANSWER_CMA))))
            return EPROTO;
        *cma = cs->answer.syndrome & SN_ANSWER_CMA;
        if (!(cs->answer.syndrome & SN_ANSWER_PUSH))
            return 0;
        cs->state = CONN_OFFER;
    }
    *cma = true;
    return recv_all(cs->fd, &cs->offer, sizeof(cs->offer), &cs->offer_got, io);
}
