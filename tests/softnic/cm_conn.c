/* cm_conn.c: connections: the side channel that carries the IB CM's
 * messages between two processes, the engine thread that reads it, and
 * rdma_listen / connect / accept / reject / establish / disconnect /
 * init_qp_attr.
 *
 * Exchange (one TCP connection per connection, active -> passive):
 *   active: REQ {QPN, PSN, GID, MTU, resources, retries, private data <= 56}
 *   passive: CONNECT_REQUEST event; rdma_accept moves its QP to RTR and RTS
 *            and sends REP {the same, private data <= 196}, or rdma_reject
 *            sends REJ {reason 28, private data <= 148}
 *   active: on REP moves its QP to RTR and RTS, sends RTU, ESTABLISHED (or,
 *           without a QP, CONNECT_RESPONSE until rdma_establish); on REJ,
 *           REJECTED with the reason as status and the peer's private data
 *   passive: on RTU, ESTABLISHED
 *   rdma_disconnect: QP to ERR, DREQ; the peer answers DREP; both get
 *           DISCONNECTED, then TIMEWAIT_EXIT.
 * A refused side channel is a REJ with reason 8 (no listener: the kernel's
 * invalid service ID), after a short grace (cm.h says why); one that cannot be opened, or no answer within
 * CM_RESPONSE_TIMEOUT_MS, is UNREACHABLE with -ETIMEDOUT; a side channel
 * that closes before ESTABLISHED is a REJ with reason 28 (the kernel sends
 * that when the peer id is destroyed), after it a DREQ.
 *
 * Messages are fixed-size, host byte order (both ends are this library),
 * and each is checked before use: magic, version, type, private data length,
 * QPN/PSN ranges, an MTU enum, and a GID that must be the sender's address. */
#include "cm.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

_Static_assert(sizeof(struct cm_msg) <= sizeof(((struct cm_id *)0)->rx), "rx buffer");

static size_t pdata_max(uint8_t type)
{
    switch (type) {
    case MSG_REQ: return CM_REQ_PDATA;
    case MSG_REP: return CM_REP_PDATA;
    case MSG_REJ: return CM_REJ_PDATA;
    case MSG_RTU: return CM_RTU_PDATA;
    case MSG_DREQ: return CM_DREQ_PDATA;
    default: return CM_RTU_PDATA;   /* DREP: 224 */
    }
}

/* -------------------------------------------------------------- engine */
void cm_engine_wake(void)
{
    char b = 1;
    if (cm.wake[1] >= 0 && write(cm.wake[1], &b, 1) != 1) {
        /* a full pipe wakes the engine already */
    }
}

static int msg_send(struct cm_id *c, uint8_t type, const struct cm_peer *p, uint8_t reason,
                    const void *pdata, size_t len)
{
    struct cm_msg m;
    memset(&m, 0, sizeof(m));
    m.magic = CM_MAGIC;
    m.version = CM_VERSION;
    m.type = type;
    m.pdata_len = (uint8_t)len;
    if (p) {
        m.qpn = p->qpn;
        m.psn = p->psn;
        memcpy(m.gid, p->gid.raw, 16);
        m.mtu = p->mtu;
        m.responder_resources = p->responder_resources;
        m.initiator_depth = p->initiator_depth;
        m.retry_count = p->retry_count;
        m.rnr_retry_count = p->rnr_retry_count;
        m.srq = p->srq;
    }
    m.reason = reason;
    if (len)
        memcpy(m.pdata, pdata, len);
    if (c->sock < 0)
        return ENOTCONN;
    /* a few hundred bytes into an idle socket: a short write means the
     * peer stopped reading, which the protocol treats as gone */
    ssize_t n = send(c->sock, &m, sizeof(m), MSG_NOSIGNAL);
    if (n != (ssize_t)sizeof(m))
        return n < 0 ? errno : EPIPE;
    return 0;
}

void cm_conn_close_locked(struct cm_id *c)
{
    if (c->sock >= 0) {
        /* a listener stops listening now: the CM thread's poll holds the
         * socket open until it returns, and a connect meanwhile would be
         * queued on it, never answered (UNREACHABLE after the response
         * timeout, where a port nobody listens on REJECTs at once) */
        if (c->state == CM_LISTEN)
            shutdown(c->sock, SHUT_RDWR);
        close(c->sock);
        c->sock = -1;
    }
    if (c->port_hold >= 0) {
        close(c->port_hold);
        c->port_hold = -1;
    }
    c->sock_connecting = false;
    c->deadline_ns = 0;
    c->retry_ns = 0;
    c->rx_len = 0;
    if (c->listener) {
        cm_id_put_locked(c->listener);
        c->listener = NULL;
    }
}

static void fail_locked(struct cm_id *c, enum rdma_cm_event_type type, int status,
                        const void *pdata, size_t len, size_t pad)
{
    cm_conn_close_locked(c);
    c->state = CM_ERROR;
    cm_post_locked(c, type, status, NULL, pdata, len, pad, NULL);
}

static void disconnected_locked(struct cm_id *c)
{
    cm_conn_close_locked(c);
    c->state = CM_DISCONNECTED;
    c->timewait_ns = cm_now_ns() + CM_TIMEWAIT_MS * 1000000ull;
    cm_post_locked(c, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, NULL, 0, 0, NULL);
}

int cm_qp_attr(struct cm_id *c, struct ibv_qp_attr *a, int *mask)
{
    enum ibv_qp_state st = a->qp_state;
    memset(a, 0, sizeof(*a));
    a->qp_state = st;
    int access = IBV_ACCESS_REMOTE_WRITE;
    if (c->local.responder_resources)
        access |= IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    switch (st) {
    case IBV_QPS_INIT:
        if (!c->id.verbs)
            return EINVAL;
        a->pkey_index = 0;
        a->port_num = c->id.port_num;
        a->qp_access_flags = access;
        *mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
        return 0;
    case IBV_QPS_RTR:
        if (c->state != CM_REQ_RCVD && c->state != CM_REP_RCVD && c->state != CM_REP_SENT &&
            c->state != CM_CONNECTED)
            return EINVAL;
        a->path_mtu = c->remote.mtu < c->local.mtu ? c->remote.mtu : c->local.mtu;
        a->dest_qp_num = c->remote.qpn;
        a->rq_psn = c->remote.psn;
        a->max_dest_rd_atomic = c->local.responder_resources;
        a->min_rnr_timer = 12;
        a->ah_attr.is_global = 1;
        a->ah_attr.grh.dgid = c->remote.gid;
        a->ah_attr.grh.sgid_index = 0;
        a->ah_attr.grh.hop_limit = 64;
        a->ah_attr.grh.traffic_class = c->tos;
        a->ah_attr.port_num = c->id.port_num;
        a->qp_access_flags = access;
        *mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER | IBV_QP_ACCESS_FLAGS;
        return 0;
    case IBV_QPS_RTS:
        if (c->state != CM_REQ_RCVD && c->state != CM_REP_RCVD && c->state != CM_REP_SENT &&
            c->state != CM_CONNECTED)
            return EINVAL;
        a->sq_psn = c->psn;
        /* the kernel's RoCE default (packet life time 16, plus one), or
         * RDMA_OPTION_ID_ACK_TIMEOUT */
        a->timeout = c->ack_timeout_set ? c->ack_timeout : 17;
        a->retry_cnt = c->local.retry_count;
        a->rnr_retry = c->remote.rnr_retry_count;
        a->max_rd_atomic = c->local.initiator_depth;
        *mask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
        return 0;
    default:
        return EINVAL;
    }
}

static int qp_to_rts(struct cm_id *c)
{
    if (!c->id.qp)
        return 0;
    struct ibv_qp_attr a;
    int mask, err;
    a.qp_state = IBV_QPS_RTR;
    if ((err = cm_qp_attr(c, &a, &mask)) || (err = ibv_modify_qp(c->id.qp, &a, mask)))
        return err;
    a.qp_state = IBV_QPS_RTS;
    if ((err = cm_qp_attr(c, &a, &mask)) || (err = ibv_modify_qp(c->id.qp, &a, mask)))
        return err;
    return 0;
}

static void qp_to_err(struct cm_id *c)
{
    if (!c->id.qp)
        return;
    struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
    ibv_modify_qp(c->id.qp, &a, IBV_QP_STATE);
}

/* A received message that passed the generic checks, for c's state. */
static bool peer_ok(struct cm_id *c, const struct cm_msg *m)
{
    union ibv_gid want;
    cm_gid_of_ip(c->id.route.addr.dst_sin.sin_addr, &want);
    return m->qpn < (1u << 24) && m->psn < (1u << 24) && m->mtu >= IBV_MTU_256 &&
           m->mtu <= IBV_MTU_4096 && m->retry_count <= 7 && m->rnr_retry_count <= 7 &&
           !memcmp(m->gid, want.raw, 16);
}

static void peer_take(struct cm_peer *p, const struct cm_msg *m)
{
    p->qpn = m->qpn;
    p->psn = m->psn;
    memcpy(p->gid.raw, m->gid, 16);
    p->mtu = m->mtu;
    p->responder_resources = m->responder_resources > 16 ? 16 : m->responder_resources;
    p->initiator_depth = m->initiator_depth > 16 ? 16 : m->initiator_depth;
    p->retry_count = m->retry_count;
    p->rnr_retry_count = m->rnr_retry_count;
    p->srq = m->srq;
}

/* The child of a listener got its REQ. */
static void on_req_locked(struct cm_id *c, const struct cm_msg *m)
{
    struct cm_id *l = c->listener;
    struct sockaddr_in local, peer;
    socklen_t sl = sizeof(local), pl = sizeof(peer);
    if (getsockname(c->sock, (struct sockaddr *)&local, &sl) ||
        getpeername(c->sock, (struct sockaddr *)&peer, &pl)) {
        /* the peer reset after its REQ: its socket and the listener's
         * reference go with the id (they used to stay: an fd a REQ) */
        cm_conn_close_locked(c);
        c->destroyed = true;
        return;
    }
    c->id.route.addr.src_sin = local;
    c->id.route.addr.dst_sin = peer;
    if (!peer_ok(c, m) || l->destroyed ||
        cm_addr_to_port_locked(local.sin_addr, &c->id.verbs, &c->id.port_num) ||
        cm_route_fill(c)) {
        /* nobody here takes it: the kernel's answer to an unknown service */
        msg_send(c, MSG_REJ, NULL, CM_REJ_INVALID_SERVICE_ID, NULL, 0);
        cm_conn_close_locked(c);
        c->destroyed = true;   /* never seen by the application */
        return;
    }
    peer_take(&c->remote, m);
    c->state = CM_REQ_RCVD;
    c->listener = NULL;
    bool queued = cm_post_locked(c, RDMA_CM_EVENT_CONNECT_REQUEST, 0, &c->remote, m->pdata,
                                 m->pdata_len, CM_REQ_PDATA, l);
    cm_id_put_locked(l);
    if (!queued)
        cm_conn_req_unclaimed_locked(c);
}

void cm_conn_req_unclaimed_locked(struct cm_id *c)
{
    if (c->destroyed)
        return;   /* torn down already: its creation reference is gone */
    /* the kernel's CM answers so when the id holding a received REQ is
     * destroyed; the active side hears REJECTED now, not UNREACHABLE after
     * its response timeout */
    if (c->state == CM_REQ_RCVD)
        msg_send(c, MSG_REJ, NULL, CM_REJ_CONSUMER_DEFINED, NULL, 0);
    /* not CM_REQ_WAIT: the engine drops that state's creation reference
     * itself, and this one goes here */
    c->state = CM_ERROR;
    cm_id_destroy_locked(c);
}

static void on_rep_locked(struct cm_id *c, const struct cm_msg *m)
{
    if (!peer_ok(c, m)) {
        msg_send(c, MSG_REJ, NULL, CM_REJ_CONSUMER_DEFINED, NULL, 0);
        fail_locked(c, RDMA_CM_EVENT_CONNECT_ERROR, -EPROTO, NULL, 0, 0);
        return;
    }
    peer_take(&c->remote, m);
    c->deadline_ns = 0;
    if (!c->id.qp) {
        c->state = CM_REP_RCVD;
        cm_post_locked(c, RDMA_CM_EVENT_CONNECT_RESPONSE, 0, &c->remote, m->pdata,
                       m->pdata_len, CM_REP_PDATA, NULL);
        return;
    }
    c->state = CM_REP_RCVD;
    int err = qp_to_rts(c);
    if (err || msg_send(c, MSG_RTU, NULL, 0, NULL, 0)) {
        msg_send(c, MSG_REJ, NULL, CM_REJ_CONSUMER_DEFINED, NULL, 0);
        fail_locked(c, RDMA_CM_EVENT_CONNECT_ERROR, -(err ? err : EPIPE), NULL, 0, 0);
        return;
    }
    c->state = CM_CONNECTED;
    cm_post_locked(c, RDMA_CM_EVENT_ESTABLISHED, 0, &c->remote, m->pdata, m->pdata_len,
                   CM_REP_PDATA, NULL);
}

static void on_msg_locked(struct cm_id *c, const struct cm_msg *m)
{
    if (m && (m->magic != CM_MAGIC || m->version != CM_VERSION || m->pdata_len > pdata_max(m->type))) {
        /* not our peer, or a broken one: as if it went away */
        m = NULL;
    }
    uint8_t type = m ? m->type : 0;
    switch (c->state) {
    case CM_REQ_WAIT:
        if (type == MSG_REQ)
            on_req_locked(c, m);
        else {
            cm_conn_close_locked(c);
            c->destroyed = true;
        }
        return;
    case CM_CONNECTING:
        if (type == MSG_REP)
            on_rep_locked(c, m);
        else if (type == MSG_REJ)
            fail_locked(c, RDMA_CM_EVENT_REJECTED, m->reason ? m->reason : CM_REJ_CONSUMER_DEFINED,
                        m->pdata, m->pdata_len, CM_REJ_PDATA);
        else
            fail_locked(c, RDMA_CM_EVENT_REJECTED, CM_REJ_CONSUMER_DEFINED, NULL, 0, CM_REJ_PDATA);
        return;
    case CM_REQ_RCVD:
    case CM_REP_SENT:
    case CM_REP_RCVD:
        if (type == MSG_RTU && c->state == CM_REP_SENT) {
            c->deadline_ns = 0;
            c->state = CM_CONNECTED;
            cm_post_locked(c, RDMA_CM_EVENT_ESTABLISHED, 0, &c->remote, m->pdata, m->pdata_len,
                           CM_RTU_PDATA, NULL);
        } else if (type == MSG_REJ) {
            fail_locked(c, RDMA_CM_EVENT_REJECTED, m->reason ? m->reason : CM_REJ_CONSUMER_DEFINED,
                        m->pdata, m->pdata_len, CM_REJ_PDATA);
        } else {
            fail_locked(c, RDMA_CM_EVENT_REJECTED, CM_REJ_CONSUMER_DEFINED, NULL, 0, CM_REJ_PDATA);
        }
        return;
    case CM_CONNECTED:
        if (type == MSG_DREQ)
            msg_send(c, MSG_DREP, NULL, 0, NULL, 0);
        disconnected_locked(c);   /* DREQ, or the peer is gone */
        return;
    case CM_DISCONNECTING:
        disconnected_locked(c);   /* DREP, or the peer is gone */
        return;
    default:
        cm_conn_close_locked(c);
        return;
    }
}

static void on_readable_locked(struct cm_id *c)
{
    for (;;) {
        ssize_t n = recv(c->sock, c->rx + c->rx_len, sizeof(struct cm_msg) - c->rx_len,
                         MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        if (n <= 0) {   /* EOF or reset */
            on_msg_locked(c, NULL);
            return;
        }
        c->rx_len += (size_t)n;
        if (c->rx_len == sizeof(struct cm_msg)) {
            struct cm_msg m;
            memcpy(&m, c->rx, sizeof(m));
            c->rx_len = 0;
            on_msg_locked(c, &m);
            if (c->sock < 0 || c->destroyed)
                return;
        }
    }
}

/* Opens the side channel from the bound source address to the destination
 * (cm.lock held); the engine sees the outcome. */
static void side_channel_open_locked(struct cm_id *c);

static void refused_locked(struct cm_id *c)
{
    uint64_t now = cm_now_ns();
    if (now < c->refused_until_ns) {
        close(c->sock);
        c->sock = -1;
        c->retry_ns = now + CM_REFUSED_RETRY_MS * 1000000ull;
        return;
    }
    fail_locked(c, RDMA_CM_EVENT_REJECTED, CM_REJ_INVALID_SERVICE_ID, NULL, 0, CM_REJ_PDATA);
}

/* The active id's source port stays its own while its side channel is
 * refused and tried again: a refused connect lets the port go (it was
 * bound as port 0), and another process's socket could take it before the
 * next try binds it again (which then failed: UNREACHABLE at once, seen
 * with tests running side by side).  A socket bound to it for the id's
 * life holds it; the tries share it (SO_REUSEADDR, none listens). */
static void port_hold_locked(struct cm_id *c)
{
    if (c->port_hold >= 0)
        return;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    if (fd >= 0 && (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
                    bind(fd, &c->id.route.addr.src_addr, sizeof(struct sockaddr_in)))) {
        close(fd);   /* not held: the tries bind it as before */
        fd = -1;
    }
    c->port_hold = fd;
}

static void side_channel_open_locked(struct cm_id *c)
{
    if (c->sock < 0) {   /* again, after a refusal: the same source port */
        c->sock = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int one = 1;
        if (c->sock >= 0)
            setsockopt(c->sock, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (c->sock < 0 || bind(c->sock, &c->id.route.addr.src_addr, sizeof(struct sockaddr_in))) {
            fail_locked(c, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT, NULL, 0, 0);
            return;
        }
    }
    fcntl(c->sock, F_SETFL, fcntl(c->sock, F_GETFL) | O_NONBLOCK);
    int one = 1;
    setsockopt(c->sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(c->sock, &c->id.route.addr.dst_addr, sizeof(struct sockaddr_in)) == 0 ||
        errno == EINPROGRESS)
        c->sock_connecting = true;   /* the engine sends the REQ */
    else if (errno == ECONNREFUSED || errno == ECONNRESET)   /* as on_connected_locked */
        refused_locked(c);
    else
        fail_locked(c, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT, NULL, 0, 0);
}

/* A TCP connect from a port to that same port of the same address, with
 * nobody listening, meets itself (simultaneous open) and succeeds: the
 * source port an unbound id's side channel gets may be the very port it
 * connects to (the kernel hands out a port a listener just gave up). No
 * peer is there: as a refusal. */
static bool self_connected(int sock)
{
    struct sockaddr_in a, b;
    socklen_t al = sizeof(a), bl = sizeof(b);
    return !getsockname(sock, (struct sockaddr *)&a, &al) && !getpeername(sock, (struct sockaddr *)&b, &bl) &&
           a.sin_family == AF_INET && b.sin_family == AF_INET && a.sin_port == b.sin_port &&
           a.sin_addr.s_addr == b.sin_addr.s_addr;
}

static void on_connected_locked(struct cm_id *c)
{
    int err = 0;
    socklen_t el = sizeof(err);
    getsockopt(c->sock, SOL_SOCKET, SO_ERROR, &err, &el);
    if (err == EINPROGRESS || err == EALREADY)
        return;
    c->sock_connecting = false;
    /* A reset before the REQ went out is a refusal too: a listener closed
     * while the handshake was under way answers so (seen on a loaded host
     * right after the listener's id was destroyed). */
    if (err == ECONNREFUSED || err == ECONNRESET || (!err && self_connected(c->sock))) {
        refused_locked(c);
        return;
    }
    if (err || msg_send(c, MSG_REQ, &c->local, 0, c->pdata, c->pdata_len)) {
        fail_locked(c, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT, NULL, 0, 0);
        return;
    }
}

static void on_accept_locked(struct cm_id *l)
{
    for (;;) {
        int fd = accept4(l->sock, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        if (!l->chan) {   /* nobody reads the listener's events any more */
            close(fd);
            continue;
        }
        struct cm_channel *ch = l->chan->sync ? cm_channel_new(true) : l->chan;
        struct cm_id *c = ch ? cm_id_new_locked(ch, l->id.context, l->id.ps, l->id.qp_type) : NULL;
        if (!c) {
            close(fd);
            if (ch && ch != l->chan)
                cm_channel_free(ch);
            continue;
        }
        c->sock = fd;
        c->state = CM_REQ_WAIT;
        c->listener = l;
        l->refs++;
        c->tos = l->tos;
        c->ack_timeout = l->ack_timeout;
        c->ack_timeout_set = l->ack_timeout_set;
        c->deadline_ns = cm_now_ns() + CM_RESPONSE_TIMEOUT_MS * 1000000ull;
    }
}

static void on_timer_locked(struct cm_id *c, uint64_t now)
{
    if (c->deadline_ns && now >= c->deadline_ns) {
        c->deadline_ns = 0;
        if (c->state == CM_REQ_WAIT) {
            cm_conn_close_locked(c);
            c->destroyed = true;
        } else if (c->state == CM_CONNECTING || c->state == CM_REP_SENT) {
            msg_send(c, MSG_REJ, NULL, 1 /* timeout */, NULL, 0);
            fail_locked(c, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT, NULL, 0, 0);
        } else if (c->state == CM_DISCONNECTING) {
            /* no DREP: as the kernel's CM after its DREQ retries, the
             * connection is over all the same */
            disconnected_locked(c);
        }
    }
    if (c->retry_ns && now >= c->retry_ns) {
        c->retry_ns = 0;
        if (c->state == CM_CONNECTING)
            side_channel_open_locked(c);
    }
    if (c->timewait_ns && now >= c->timewait_ns) {
        c->timewait_ns = 0;
        cm_post_locked(c, RDMA_CM_EVENT_TIMEWAIT_EXIT, 0, NULL, NULL, 0, 0, NULL);
    }
}

static bool grow(void **p, size_t n, size_t each)
{
    void *q = realloc(*p, n * each);
    if (q)
        *p = q;
    return q != NULL;
}

static void *engine_main(void *arg)
{
    (void)arg;
    size_t cap = 0;
    struct pollfd *pfd = NULL;
    struct cm_id **who = NULL, **snap = NULL;
    pthread_mutex_lock(&cm.lock);
    for (;;) {
        /* every id gets a reference while the lock is dropped for poll() */
        size_t nids = 0, n = 0, ns = 0;
        for (struct cm_id *c = cm.ids; c; c = c->next)
            nids++;
        if (nids + 1 > cap) {
            size_t want = (nids + 1) * 2;
            if (!grow((void **)&pfd, want, sizeof(*pfd)) || !grow((void **)&who, want, sizeof(*who)) ||
                !grow((void **)&snap, want, sizeof(*snap))) {
                pthread_mutex_unlock(&cm.lock);
                sleep(1);   /* out of memory: try again later */
                pthread_mutex_lock(&cm.lock);
                continue;
            }
            cap = want;
        }
        pfd[n] = (struct pollfd){ .fd = cm.wake[0], .events = POLLIN };
        who[n++] = NULL;
        uint64_t now = cm_now_ns(), next = 0;
        for (struct cm_id *c = cm.ids; c; c = c->next) {
            snap[ns++] = c;
            c->refs++;
            for (int k = 0; k < 3; k++) {
                uint64_t t = k == 0 ? c->deadline_ns : k == 1 ? c->timewait_ns : c->retry_ns;
                if (t && (!next || t < next))
                    next = t;
            }
            if (c->sock < 0 || c->destroyed)
                continue;
            if (c->state == CM_IDLE || c->state == CM_BOUND || c->state == CM_ADDR_RESOLVED ||
                c->state == CM_ROUTE_RESOLVED)
                continue;   /* a reserved port: nothing to read yet */
            pfd[n] = (struct pollfd){ .fd = c->sock, .events = c->sock_connecting ? POLLOUT : POLLIN };
            who[n++] = c;
        }
        pthread_mutex_unlock(&cm.lock);
        int timeout = -1;
        if (next)
            timeout = next <= now ? 0 : (int)((next - now) / 1000000ull) + 1;
        int rc = poll(pfd, n, timeout);
        pthread_mutex_lock(&cm.lock);
        if (rc > 0 && (pfd[0].revents & POLLIN)) {
            char buf[64];
            while (read(cm.wake[0], buf, sizeof(buf)) > 0) {
            }
        }
        for (size_t i = 1; rc > 0 && i < n; i++) {
            struct cm_id *c = who[i];
            if (!pfd[i].revents || c->destroyed || c->sock != pfd[i].fd)
                continue;
            if (c->state == CM_LISTEN)
                on_accept_locked(c);
            else if (c->sock_connecting)
                on_connected_locked(c);
            else
                on_readable_locked(c);
        }
        now = cm_now_ns();
        for (size_t i = 0; i < ns; i++) {
            struct cm_id *c = snap[i];
            if (!c->destroyed)
                on_timer_locked(c, now);
            /* a child that died before the application saw it: its
             * creation reference is the engine's to drop */
            if (c->destroyed && c->state == CM_REQ_WAIT) {
                c->state = CM_ERROR;
                cm_id_put_locked(c);
            }
        }
        for (size_t i = 0; i < ns; i++)
            cm_id_put_locked(snap[i]);
    }
    return NULL;
}

int cm_engine_start_locked(void)
{
    if (cm.engine_started)
        return 0;
    if (pipe2(cm.wake, O_CLOEXEC | O_NONBLOCK))
        return errno;
    /* random PSNs, different per process */
    srandom((unsigned)(cm_now_ns() ^ (uint64_t)getpid() << 16));
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);   /* signals go to the application */
    int err = pthread_create(&cm.engine, NULL, engine_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err) {
        close(cm.wake[0]);
        close(cm.wake[1]);
        cm.wake[0] = cm.wake[1] = -1;
        return err;
    }
    pthread_detach(cm.engine);
    cm.engine_started = true;
    return 0;
}

/* ---------------------------------------------------------- the verbs */
int rdma_listen(struct rdma_cm_id *id, int backlog)
{
    if (!id) {
        errno = EINVAL;
        return -1;
    }
    struct cm_id *c = cm_of(id);
    int err = 0;
    pthread_mutex_lock(&cm.lock);
    if (c->id.qp_type != IBV_QPT_RC)
        err = ENOSYS;   /* no UD service here */
    if (!err && c->state == CM_IDLE) {
        struct sockaddr_in any = { .sin_family = AF_INET };
        err = cm_bind_locked(c, &any);
    }
    if (!err && c->state != CM_BOUND)
        err = EINVAL;
    if (!err && listen(c->sock, backlog > 0 ? backlog : 128))
        err = errno;
    if (!err) {
        fcntl(c->sock, F_SETFL, fcntl(c->sock, F_GETFL) | O_NONBLOCK);
        c->state = CM_LISTEN;
    }
    pthread_mutex_unlock(&cm.lock);
    if (err) {
        errno = err;
        return -1;
    }
    cm_engine_wake();
    return 0;
}

static void param_defaults(struct cm_id *c, const struct rdma_conn_param *p)
{
    struct ibv_device_attr da;
    uint8_t rd = 16, init = 16;
    if (c->id.verbs && !ibv_query_device(c->id.verbs, &da)) {
        rd = (uint8_t)(da.max_qp_rd_atom > 16 ? 16 : da.max_qp_rd_atom);
        init = (uint8_t)(da.max_qp_init_rd_atom > 16 ? 16 : da.max_qp_init_rd_atom);
    }
    if (p) {
        c->local.responder_resources = p->responder_resources < rd ? p->responder_resources : rd;
        c->local.initiator_depth = p->initiator_depth < init ? p->initiator_depth : init;
        c->local.retry_count = p->retry_count > 7 ? 7 : p->retry_count;
        c->local.rnr_retry_count = p->rnr_retry_count > 7 ? 7 : p->rnr_retry_count;
        c->local.srq = p->srq;
    } else {
        c->local.responder_resources = rd;
        c->local.initiator_depth = init;
        c->local.retry_count = 7;
        c->local.rnr_retry_count = 7;
    }
    c->local.qpn = c->id.qp ? c->id.qp->qp_num : (p ? p->qp_num : 0);
    c->local.psn = c->psn;
    if (c->id.qp && c->id.qp->srq)
        c->local.srq = 1;
}

int rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)
{
    if (!id) {
        errno = EINVAL;
        return -1;
    }
    struct cm_id *c = cm_of(id);
    int err = 0;
    pthread_mutex_lock(&cm.lock);
    if (c->id.qp_type != IBV_QPT_RC)
        err = ENOSYS;
    else if (c->state != CM_ROUTE_RESOLVED || c->sock < 0)
        err = EINVAL;
    else if (conn_param && conn_param->private_data_len > CM_REQ_PDATA)
        err = EINVAL;
    else if (!c->id.qp && !conn_param)
        err = EINVAL;
    if (!err) {
        param_defaults(c, conn_param);
        c->pdata_len = conn_param ? conn_param->private_data_len : 0;
        if (c->pdata_len)
            memcpy(c->pdata, conn_param->private_data, c->pdata_len);
        c->state = CM_CONNECTING;
        c->deadline_ns = cm_now_ns() + CM_RESPONSE_TIMEOUT_MS * 1000000ull;
        c->refused_until_ns = cm_now_ns() + CM_REFUSED_GRACE_MS * 1000000ull;
        port_hold_locked(c);
        side_channel_open_locked(c);
    }
    bool sync = c->chan && c->chan->sync;
    pthread_mutex_unlock(&cm.lock);
    if (err) {
        errno = err;
        return -1;
    }
    cm_engine_wake();
    if (!sync)
        return 0;
    return cm_sync_wait(c, c->id.qp ? RDMA_CM_EVENT_ESTABLISHED : RDMA_CM_EVENT_CONNECT_RESPONSE)
               ? -1 : 0;
}

int rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)
{
    if (!id) {
        errno = EINVAL;
        return -1;
    }
    struct cm_id *c = cm_of(id);
    int err = 0;
    pthread_mutex_lock(&cm.lock);
    if (c->state != CM_REQ_RCVD)
        err = EINVAL;
    else if (conn_param && conn_param->private_data_len > CM_REP_PDATA)
        err = EINVAL;
    else if (!c->id.qp && !conn_param)
        err = EINVAL;
    if (!err) {
        if (conn_param) {
            param_defaults(c, conn_param);
        } else {
            /* the kernel's defaults: what the peer asked for, within the device */
            param_defaults(c, NULL);
            if (c->remote.initiator_depth < c->local.responder_resources)
                c->local.responder_resources = c->remote.initiator_depth;
            if (c->remote.responder_resources < c->local.initiator_depth)
                c->local.initiator_depth = c->remote.responder_resources;
        }
        c->local.retry_count = c->remote.retry_count;   /* the REQ's, for this QP */
        err = qp_to_rts(c);
        if (!err)
            err = msg_send(c, MSG_REP, &c->local, 0, conn_param ? conn_param->private_data : NULL,
                           conn_param ? conn_param->private_data_len : 0);
        if (!err) {
            c->state = CM_REP_SENT;
            c->deadline_ns = cm_now_ns() + CM_RESPONSE_TIMEOUT_MS * 1000000ull;
        }
    }
    bool sync = c->chan && c->chan->sync;
    pthread_mutex_unlock(&cm.lock);
    if (err) {
        errno = err;
        return -1;
    }
    cm_engine_wake();
    if (sync) {
        /* the CONNECT_REQUEST rdma_get_request left on the id goes now */
        if (c->id.event)
            rdma_ack_cm_event(c->id.event);
        return cm_sync_wait(c, RDMA_CM_EVENT_ESTABLISHED) ? -1 : 0;
    }
    return 0;
}

static int reject(struct rdma_cm_id *id, const void *pdata, uint8_t len, uint8_t reason)
{
    if (!id) {
        errno = EINVAL;
        return -1;
    }
    struct cm_id *c = cm_of(id);
    int err = 0;
    pthread_mutex_lock(&cm.lock);
    if (len > CM_REJ_PDATA)
        err = EINVAL;
    else if (c->state != CM_REQ_RCVD && c->state != CM_REP_RCVD)
        err = EINVAL;
    else {
        err = msg_send(c, MSG_REJ, NULL, reason, pdata, len);
        cm_conn_close_locked(c);
        c->state = CM_ERROR;
    }
    pthread_mutex_unlock(&cm.lock);
    if (err) {
        errno = err;
        return -1;
    }
    return 0;
}

int rdma_reject(struct rdma_cm_id *id, const void *private_data, uint8_t private_data_len)
{
    return reject(id, private_data, private_data_len, CM_REJ_CONSUMER_DEFINED);
}

int rdma_reject_ece(struct rdma_cm_id *id, const void *private_data, uint8_t private_data_len)
{
    /* the kernel's reason for an ECE mismatch (IB_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED) */
    return reject(id, private_data, private_data_len, 35);
}

int rdma_establish(struct rdma_cm_id *id)
{
    if (!id) {
        errno = EINVAL;
        return -1;
    }
    struct cm_id *c = cm_of(id);
    int err = 0;
    pthread_mutex_lock(&cm.lock);
    if (c->state != CM_REP_RCVD)
        err = EINVAL;
    else if (!(err = msg_send(c, MSG_RTU, NULL, 0, NULL, 0)))
        c->state = CM_CONNECTED;
    pthread_mutex_unlock(&cm.lock);
    if (err) {
        errno = err;
        return -1;
    }
    return 0;
}

int rdma_disconnect(struct rdma_cm_id *id)
{
    if (!id) {
        errno = EINVAL;
        return -1;
    }
    struct cm_id *c = cm_of(id);
    int err = 0;
    pthread_mutex_lock(&cm.lock);
    switch (c->state) {
    case CM_CONNECTED:
    case CM_REP_SENT:
    case CM_REP_RCVD:
        qp_to_err(c);
        if (msg_send(c, MSG_DREQ, NULL, 0, NULL, 0)) {
            disconnected_locked(c);   /* the peer is gone already */
        } else {
            c->state = CM_DISCONNECTING;
            c->deadline_ns = cm_now_ns() + CM_RESPONSE_TIMEOUT_MS * 1000000ull;
        }
        break;
    case CM_DISCONNECTING:
    case CM_DISCONNECTED:
        qp_to_err(c);   /* the peer disconnected first: DREP went already */
        break;
    default:
        err = EINVAL;
    }
    pthread_mutex_unlock(&cm.lock);
    if (err) {
        errno = err;
        return -1;
    }
    cm_engine_wake();
    return 0;
}

int rdma_init_qp_attr(struct rdma_cm_id *id, struct ibv_qp_attr *qp_attr, int *qp_attr_mask)
{
    if (!id || !qp_attr || !qp_attr_mask) {
        errno = EINVAL;
        return -1;
    }
    pthread_mutex_lock(&cm.lock);
    int err = cm_qp_attr(cm_of(id), qp_attr, qp_attr_mask);
    pthread_mutex_unlock(&cm.lock);
    if (err) {
        errno = err;
        return -1;
    }
    return 0;
}

int rdma_notify(struct rdma_cm_id *id, enum ibv_event_type event)
{
    (void)event;
    if (!id) {
        errno = EINVAL;
        return -1;
    }
    return 0;   /* RTU is what establishes; a first receive needs no nudge */
}

int rdma_set_local_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
    if (!id || !ece) {
        errno = EINVAL;
        return -1;
    }
    return 0;   /* no enhanced connection options to negotiate: none offered */
}

int rdma_get_remote_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
    if (!id || !ece) {
        errno = EINVAL;
        return -1;
    }
    memset(ece, 0, sizeof(*ece));
    return 0;
}
