/* plugin/ib/comm.c: listen / connect / accept state machines and the comm
 * objects they build (DESIGN.md §2 steps 1-2). */
#include "comm.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "devices.h"
#include "errors.h"
#include "failover.h"
#include "flush.h"
#include "ibvwrap.h"
#include "log.h"
#include "p2p.h"

#define PEER_CHECK_PERIOD_NS 50000000ull
#define PEER_GONE_GRACE_NS 2000000000ull

uint64_t comm_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------------ requests */

static void req_pool_init(struct comm *c)
{
    int n = (int)(sizeof(c->reqs) / sizeof(c->reqs[0]));
    c->nfree = 0;
    for (int i = n - 1; i >= 0; i--) {
        c->reqs[i].comm = c;
        c->reqs[i].index = i;
        c->reqs[i].type = REQ_FREE;
        c->free_list[c->nfree++] = &c->reqs[i];
    }
}

struct request *comm_req_get(struct comm *c, int type)
{
    if (c->nfree == 0)
        return NULL;
    struct request *r = c->free_list[--c->nfree];
    r->type = type;
    r->done = 0;
    r->pending = 0;
    r->n = 0;
    r->subs_done = 0;
    c->inflight++;
    return r;
}

void comm_req_put(struct request *r)
{
    struct comm *c = r->comm;
    if (r->type == REQ_FREE)
        return;
    r->type = REQ_FREE;
    c->inflight--;
    c->free_list[c->nfree++] = r;
}

void comm_fail(struct comm *c, ncclResult_t err)
{
    if (!c->error)
        c->error = err;
}

ncclResult_t comm_check_peer(struct comm *c, int have_pending)
{
    if (c->error || !have_pending || c->fd < 0)
        return c->error;
    uint64_t now = comm_now_ns();
    if (now - c->last_peer_check_ns >= PEER_CHECK_PERIOD_NS) {
        c->last_peer_check_ns = now;
        if (!c->peer_gone_ns && !oob_peer_alive(c->fd))
            c->peer_gone_ns = now;
        errors_check_async(c);
    }
    /* completions may trail the peer's exit by a little: wait before failing */
    if (!c->error && c->peer_gone_ns && now - c->peer_gone_ns > PEER_GONE_GRACE_NS) {
        WARN("NET/railnet: device %s port %u QP 0x%x: the peer closed its connection (process exited or "
             "aborted) with %d request(s) pending on this %s comm",
             c->dev_name, c->qps[0].port->port_num, c->qps[0].qp ? c->qps[0].qp->qp_num : 0, c->inflight,
             c->kind == COMM_SEND ? "send" : "receive");
        comm_fail(c, ncclRemoteError);
    }
    return c->error;
}

int comm_device(const void *comm)
{
    const struct comm *c = comm;
    return c ? c->dev : -1;
}

/* --------------------------------------------------------------- comm setup */

static void comm_params(struct qp_params *p)
{
    const struct rn_config *cfg = rn_config();
    p->timeout = cfg->ib_timeout;
    p->retry_cnt = cfg->ib_retry_cnt;
    p->tc = cfg->ib_tc;
    p->sl = cfg->ib_sl;
}

/* QPs per connection: RAILNET_QPS_PER_CONN, at least one per port and a
 * multiple of the port count so that both ports carry the same share. */
static int comm_default_nqps(int nports)
{
    int n = rn_config()->qps_per_conn;
    if (n < nports)
        n = nports;
    n = (n + nports - 1) / nports * nports;
    return n > COMM_MAX_QPS ? COMM_MAX_QPS / nports * nports : n;
}

static void comm_release(struct comm *c)
{
    failover_detach(c);
    for (int i = 0; i < COMM_MAX_QPS; i++)
        qp_destroy(&c->qps[i]);
    if (c->cq)
        RN_IBV(destroy_cq)(c->cq);
    c->cq = NULL;
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
}

/* Fills ports, makes the CQ and nqps QPs (QP i on port i % nports). */
static ncclResult_t comm_init(struct comm *c, int kind, int dev, int nqps)
{
    c->kind = kind;
    c->dev = dev;
    c->fd = -1;
    if (devices_qp_ports(dev, c->ports, &c->nports, c->dev_name, sizeof(c->dev_name)) != ncclSuccess)
        return ncclInternalError;
    c->nqps = nqps;
    c->stats.enabled = rn_config()->stats;
    req_pool_init(c);
    comm_params(&c->qpp);
    int send = kind == COMM_SEND;
    c->qpp.max_send_wr = send ? 2 * COMM_SLOTS + 8 : COMM_SLOTS + 8;
    c->qpp.max_recv_wr = send ? 1 : COMM_RECV_DEPTH;
    int cqe = send ? nqps * (2 * COMM_SLOTS + 8) + 64
                   : nqps * (COMM_RECV_DEPTH + COMM_SLOTS + 8) + COMM_SLOTS * COMM_MAX_RECVS + 64;
    c->cq = RN_IBV(create_cq)(c->ports[0].ctx, cqe, NULL, NULL, 0);
    if (!c->cq) {
        WARN("NET/railnet: device %s: ibv_create_cq(%d entries) failed: %s", c->dev_name, cqe, strerror(errno));
        return ncclSystemError;
    }
    char err[256];
    for (int i = 0; i < nqps; i++) {
        if (qp_create(&c->qps[i], &c->ports[i % c->nports], c->cq, &c->qpp, err, sizeof(err))) {
            WARN("NET/railnet: device %s: %s", c->dev_name, err);
            return ncclSystemError;
        }
    }
    errors_snapshot(c);
    return ncclSuccess;
}

static struct ibv_mr *reg_local(struct comm *c, void *buf, size_t len, int remote)
{
    int access = IBV_ACCESS_LOCAL_WRITE | (remote ? IBV_ACCESS_REMOTE_WRITE : 0);
    struct ibv_mr *mr = RN_IBV(reg_mr)(c->ports[0].pd, buf, len, access);
    if (!mr)
        WARN("NET/railnet: device %s: ibv_reg_mr of %zu bytes for connection state failed: %s", c->dev_name, len,
             strerror(errno));
    return mr;
}

static void send_comm_free(struct send_comm *sc)
{
    if (!sc)
        return;
    comm_release(&sc->c);
    if (sc->ring_mr)
        RN_IBV(dereg_mr)(sc->ring_mr);
    if (sc->stage_mr)
        RN_IBV(dereg_mr)(sc->stage_mr);
    free(sc->ring);
    free(sc->size_stage);
    free(sc);
}

static void recv_comm_free(struct recv_comm *rc)
{
    if (!rc)
        return;
    flush_destroy(rc);
    comm_release(&rc->c);
    if (rc->stage_mr)
        RN_IBV(dereg_mr)(rc->stage_mr);
    if (rc->sizes_mr)
        RN_IBV(dereg_mr)(rc->sizes_mr);
    free(rc->stage);
    free(rc->sizes);
    free(rc);
}

static void *page_alloc(size_t len)
{
    void *p = NULL;
    if (posix_memalign(&p, 4096, len) != 0)
        return NULL;
    memset(p, 0, len);
    return p;
}

static ncclResult_t send_comm_create(int dev, struct send_comm **out)
{
    struct send_comm *sc = calloc(1, sizeof(*sc));
    if (!sc)
        return ncclSystemError;
    sc->c.fd = -1;
    int nports = devices_nports(dev);
    ncclResult_t res = comm_init(&sc->c, COMM_SEND, dev, comm_default_nqps(nports > 0 ? nports : 1));
    if (res != ncclSuccess)
        goto fail;
    size_t ring_len = COMM_SLOTS * COMM_MAX_RECVS * sizeof(struct cts_entry);
    size_t stage_len = COMM_SLOTS * COMM_MAX_RECVS * sizeof(uint32_t);
    sc->ring = page_alloc(ring_len);
    sc->size_stage = page_alloc(stage_len);
    res = ncclSystemError;
    if (!sc->ring || !sc->size_stage)
        goto fail;
    if (!(sc->ring_mr = reg_local(&sc->c, sc->ring, ring_len, 1)))
        goto fail;
    if (!(sc->stage_mr = reg_local(&sc->c, sc->size_stage, stage_len, 0)))
        goto fail;
    sc->split_min = (uint64_t)rn_config()->split_min;
    *out = sc;
    return ncclSuccess;
fail:
    send_comm_free(sc);
    return res;
}

static ncclResult_t recv_comm_create(int dev, int nqps, struct recv_comm **out)
{
    struct recv_comm *rc = calloc(1, sizeof(*rc));
    if (!rc)
        return ncclSystemError;
    rc->c.fd = -1;
    ncclResult_t res = comm_init(&rc->c, COMM_RECV, dev, nqps);
    if (res != ncclSuccess)
        goto fail;
    size_t stage_len = COMM_SLOTS * COMM_MAX_RECVS * sizeof(struct cts_entry);
    size_t sizes_len = COMM_SLOTS * COMM_MAX_RECVS * sizeof(uint32_t);
    rc->stage = page_alloc(stage_len);
    rc->sizes = page_alloc(sizes_len);
    res = ncclSystemError;
    if (!rc->stage || !rc->sizes)
        goto fail;
    if (!(rc->stage_mr = reg_local(&rc->c, rc->stage, stage_len, 0)))
        goto fail;
    if (!(rc->sizes_mr = reg_local(&rc->c, rc->sizes, sizes_len, 1)))
        goto fail;
    *out = rc;
    return ncclSuccess;
fail:
    recv_comm_free(rc);
    return res;
}

static ncclResult_t connect_qps(struct comm *c, const struct hs_qp_info *remote, int nqps)
{
    char err[256];
    for (int i = 0; i < nqps; i++) {
        if (qp_connect(&c->qps[i], &remote[i], &c->qpp, err, sizeof(err))) {
            WARN("NET/railnet: device %s port %u: %s", c->dev_name, c->qps[i].port->port_num, err);
            return ncclSystemError;
        }
    }
    return ncclSuccess;
}

/* ------------------------------------------------------------------- listen */

static int handshake_expired(uint64_t started_ns)
{
    return comm_now_ns() - started_ns > (uint64_t)rn_config()->handshake_timeout * 1000000000ull;
}

struct accept_state {
    int stage;
    int fd;
    uint64_t started_ns;    /* when the TCP connection was accepted */
    struct oob_rx rx;
    struct oob_tx tx;
    struct recv_comm *rc;
};

/* Handshakes a listener carries at once. Each TCP connection gets its own
 * state, so a peer that connects and stays silent (or a stranger's port
 * scan) does not hold up the peers behind it; when all are busy a new
 * connection takes the place of the oldest silent one (accept_slot). */
#define ACC_PENDING 8

struct listen_comm {
    int dev;
    int fd;
    uint64_t guid;
    uint64_t nonce;
    struct accept_state acc[ACC_PENDING];
};

enum { ACC_ACCEPT = 0, ACC_HELLO, ACC_REPLY, ACC_READY };

static uint64_t random_nonce(void)
{
    uint64_t v = 0;
    if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != (ssize_t)sizeof(v))
        v = comm_now_ns() ^ ((uint64_t)getpid() << 32);
    return v ? v : 1;
}

ncclResult_t comm_listen(int dev, void *handle, void **listen_comm)
{
    *listen_comm = NULL;
    struct hs_handle h;
    memset(&h, 0, sizeof(h));
    struct oob_addr a;
    if (devices_handle_info(dev, &h.guid, &h.link_layer, &h.nports, &a) != ncclSuccess) {
        WARN("NET/railnet: listen on device %d: no such device", dev);
        return ncclInvalidArgument;
    }
    struct listen_comm *l = calloc(1, sizeof(*l));
    if (!l)
        return ncclSystemError;
    char err[OOB_ERR_LEN];
    if (oob_listen(&a, &l->fd, err) != OOB_DONE) {
        WARN("NET/railnet: listen on device %d: %s", dev, err);
        free(l);
        return ncclSystemError;
    }
    l->dev = dev;
    l->guid = h.guid;
    l->nonce = random_nonce();
    for (int i = 0; i < ACC_PENDING; i++)
        l->acc[i].fd = -1;
    h.version = HS_VERSION;
    h.family = a.family;
    memcpy(h.addr, a.addr, 16);
    h.tcp_port = a.port;
    h.nonce = l->nonce;
    hs_handle_encode(&h, handle);
    char ip[INET6_ADDRSTRLEN] = "?";
    inet_ntop(a.family == 4 ? AF_INET : AF_INET6, a.addr, ip, sizeof(ip));
    INFO(NCCL_NET | NCCL_INIT, "NET/railnet: listening for device %d on %s port %u", dev, ip, a.port);
    *listen_comm = l;
    return ncclSuccess;
}

static void accept_reset(struct accept_state *s)
{
    if (s->fd >= 0)
        close(s->fd);
    recv_comm_free(s->rc);
    memset(s, 0, sizeof(*s));
    s->fd = -1;
}

/* Best effort: the peer learns why instead of seeing a bare EOF. */
static void accept_reject(struct accept_state *s, uint32_t reason)
{
    struct hs_reply r;
    memset(&r, 0, sizeof(r));
    r.status = reason;
    uint8_t buf[HS_MSG_MAX];
    size_t len = hs_reply_encode(&r, HS_VERSION, buf, sizeof(buf));
    if (len && s->fd >= 0)
        (void)!write(s->fd, buf, len);
}

static ncclResult_t accept_hello(struct listen_comm *l, struct accept_state *s)
{
    char err[HS_ERR_LEN];
    struct hs_hello m;
    if (s->rx.type != HS_HELLO || hs_hello_parse(s->rx.buf, s->rx.off, &m, err) != HS_OK) {
        if (s->rx.type != HS_HELLO)
            snprintf(err, sizeof(err), "message type %u where HELLO was expected", s->rx.type);
        WARN("NET/railnet: accept on device %d: rejecting a connection: %s", l->dev, err);
        accept_reject(s, HS_REJECT_PROTOCOL);
        return ncclRemoteError;
    }
    if (m.target_guid != l->guid || m.nonce != l->nonce) {
        WARN("NET/railnet: accept on device %d (guid 0x%llx): the connecting peer used a handle issued for %s "
             "(guid 0x%llx); handles must not be mixed between devices or listen calls",
             l->dev, (unsigned long long)l->guid, m.target_guid != l->guid ? "another device" : "another listener",
             (unsigned long long)m.target_guid);
        accept_reject(s, HS_REJECT_WRONG_DEVICE);
        return ncclInvalidUsage;
    }
    uint8_t ll;
    uint8_t np;
    uint64_t guid;
    struct oob_addr a;
    devices_handle_info(l->dev, &guid, &ll, &np, &a);
    if (m.link_layer != ll) {
        WARN("NET/railnet: accept on device %d: peer link layer %s, ours %s", l->dev,
             m.link_layer == 1 ? "InfiniBand" : "Ethernet", ll == 1 ? "InfiniBand" : "Ethernet");
        accept_reject(s, HS_REJECT_LINK_LAYER);
        return ncclInvalidUsage;
    }
    struct recv_comm *rc = NULL;
    if (recv_comm_create(l->dev, m.nqps, &rc) != ncclSuccess) {
        accept_reject(s, HS_REJECT_RESOURCES);
        return ncclSystemError;
    }
    s->rc = rc;
    struct comm *c = &rc->c;
    rc->remote_ring_addr = m.cts_addr;
    for (int p = 0; p < HS_MAX_PORTS; p++)
        rc->remote_ring_rkey[p] = m.cts_rkey[p < m.nports ? p : 0];
    if (connect_qps(c, m.qp, m.nqps) != ncclSuccess) {
        accept_reject(s, HS_REJECT_RESOURCES);
        return ncclSystemError;
    }
    for (int i = 0; i < c->nqps; i++) {
        int e = p2p_post_recvs(c, i, COMM_RECV_DEPTH);
        if (e) {
            WARN("NET/railnet: device %s QP 0x%x: posting %d receives failed: %s", c->dev_name,
                 c->qps[i].qp->qp_num, COMM_RECV_DEPTH, strerror(e));
            accept_reject(s, HS_REJECT_RESOURCES);
            return ncclSystemError;
        }
    }
    struct hs_reply r;
    memset(&r, 0, sizeof(r));
    r.guid = l->guid;
    r.nqps = (uint8_t)c->nqps;
    r.nports = (uint8_t)c->nports;
    r.sizes_addr = (uint64_t)(uintptr_t)rc->sizes;
    for (int p = 0; p < HS_MAX_PORTS; p++)
        r.sizes_rkey[p] = rc->sizes_mr->rkey;
    for (int i = 0; i < c->nqps; i++)
        qp_describe(&c->qps[i], &r.qp[i]);
    uint8_t buf[HS_MSG_MAX];
    size_t len = hs_reply_encode(&r, HS_VERSION, buf, sizeof(buf));
    if (!len) {
        WARN("NET/railnet: accept on device %d: cannot encode the reply", l->dev);
        return ncclInternalError;
    }
    oob_tx_init(&s->tx, buf, len);
    return ncclSuccess;
}

/* Moves one handshake as far as its socket allows. Returns ncclSuccess with
 * *done set when the peer is connected, ncclSuccess alone while it waits,
 * ncclRemoteError or ncclInvalidUsage when the peer broke the protocol (the
 * state is reset: the caller drops the peer and goes on listening), another
 * code for a local failure. */
static ncclResult_t accept_step(struct listen_comm *l, struct accept_state *s, struct recv_comm **done)
{
    char err[OOB_ERR_LEN];
    int r;
    ncclResult_t res = ncclSuccess;
    *done = NULL;
    if (handshake_expired(s->started_ns)) {
        WARN("NET/railnet: accept on device %d: the connecting peer did not finish the handshake within "
             "RAILNET_HANDSHAKE_TIMEOUT=%d s; dropping it",
             l->dev, rn_config()->handshake_timeout);
        accept_reset(s);
        return ncclRemoteError;
    }
    switch (s->stage) {
    case ACC_HELLO:
        r = oob_rx_progress(s->fd, &s->rx, err);
        if (r == OOB_AGAIN)
            return ncclSuccess;
        if (r == OOB_ERROR) {
            if (strstr(err, "version") || strstr(err, "magic"))
                accept_reject(s, HS_REJECT_PROTOCOL);
            goto oob_fail;
        }
        if ((res = accept_hello(l, s)) != ncclSuccess)
            goto fail;
        s->stage = ACC_REPLY;
        /* fall through */
    case ACC_REPLY:
        r = oob_tx_progress(s->fd, &s->tx, err);
        if (r == OOB_AGAIN)
            return ncclSuccess;
        if (r == OOB_ERROR)
            goto oob_fail;
        oob_rx_init(&s->rx);
        s->stage = ACC_READY;
        /* fall through */
    case ACC_READY: {
        r = oob_rx_progress(s->fd, &s->rx, err);
        if (r == OOB_AGAIN)
            return ncclSuccess;
        if (r == OOB_ERROR)
            goto oob_fail;
        char herr[HS_ERR_LEN];
        if (hs_ready_parse(s->rx.buf, s->rx.off, herr) != HS_OK) {
            WARN("NET/railnet: accept on device %d: bad READY from the peer: %s", l->dev, herr);
            res = ncclRemoteError;
            goto fail;
        }
        struct recv_comm *rc = s->rc;
        rc->c.fd = s->fd;
        s->fd = -1;
        s->rc = NULL;
        accept_reset(s);
        if (failover_attach(&rc->c) != ncclSuccess) {
            recv_comm_free(rc);
            return ncclSystemError;
        }
        rc->c.ready = 1;
        INFO(NCCL_NET, "NET/railnet: accepted a connection on %s with %d QPs", rc->c.dev_name, rc->c.nqps);
        *done = rc;
        return ncclSuccess;
    }
    default:
        break;
    }
    return ncclInternalError;
oob_fail:
    WARN("NET/railnet: accept on device %d: %s", l->dev, err);
    res = ncclRemoteError;
fail:
    accept_reset(s);
    return res;
}

/* A state for a new connection: a free one, else the oldest handshake whose
 * peer has sent nothing yet (an expected peer sends its HELLO right after
 * connecting, so silence is what a stale or hostile connection looks like).
 * NULL when every state is a peer that is talking. */
static struct accept_state *accept_slot(struct listen_comm *l)
{
    struct accept_state *oldest = NULL;
    for (int i = 0; i < ACC_PENDING; i++) {
        struct accept_state *s = &l->acc[i];
        if (s->stage == ACC_ACCEPT)
            return s;
        if (s->stage == ACC_HELLO && s->rx.off == 0 && (!oldest || s->started_ns < oldest->started_ns))
            oldest = s;
    }
    if (oldest) {
        WARN("NET/railnet: accept on device %d: %d handshakes in progress; dropping the oldest connection, "
             "silent for %.1f s, to take a new one",
             l->dev, ACC_PENDING, (double)(comm_now_ns() - oldest->started_ns) / 1e9);
        accept_reset(oldest);
    }
    return oldest;
}

/* Takes every new TCP connection into a handshake state, then moves every
 * handshake in progress; returns the first peer that is through. A peer
 * that breaks the protocol is dropped with a WARN (it learns why when it
 * can) and the listener goes on waiting for the peers NCCL expects: a
 * stranger on the port must not fail the job, nor keep others out. */
ncclResult_t comm_accept(void *listen_comm, void **recv_comm)
{
    struct listen_comm *l = listen_comm;
    char err[OOB_ERR_LEN];
    *recv_comm = NULL;
    for (;;) {
        int fd = -1;
        int r = oob_accept(l->fd, &fd, err);
        if (r == OOB_AGAIN)
            break;
        if (r == OOB_ERROR) {
            WARN("NET/railnet: accept on device %d: %s", l->dev, err);
            return ncclSystemError;
        }
        struct accept_state *s = accept_slot(l);
        if (!s) {
            WARN("NET/railnet: accept on device %d: %d handshakes in progress, all talking; refusing a new "
                 "connection", l->dev, ACC_PENDING);
            close(fd);
            continue;
        }
        s->fd = fd;
        s->started_ns = comm_now_ns();
        oob_rx_init(&s->rx);
        s->stage = ACC_HELLO;
        /* read what the peer sent already: a talking peer is not evicted by
         * connections behind it */
        struct recv_comm *rc;
        ncclResult_t res = accept_step(l, s, &rc);
        if (res != ncclSuccess && res != ncclRemoteError && res != ncclInvalidUsage)
            return res;
        if (rc) {
            *recv_comm = rc;
            return ncclSuccess;
        }
    }
    for (int i = 0; i < ACC_PENDING; i++) {
        struct accept_state *s = &l->acc[i];
        if (s->stage == ACC_ACCEPT)
            continue;
        struct recv_comm *rc;
        ncclResult_t res = accept_step(l, s, &rc);
        if (res == ncclRemoteError || res == ncclInvalidUsage)
            continue; /* that peer is dropped; the others go on */
        if (res != ncclSuccess)
            return res;
        if (rc) {
            *recv_comm = rc;
            return ncclSuccess;
        }
    }
    return ncclSuccess;
}

ncclResult_t comm_close_listen(void *listen_comm)
{
    struct listen_comm *l = listen_comm;
    if (!l)
        return ncclSuccess;
    for (int i = 0; i < ACC_PENDING; i++)
        accept_reset(&l->acc[i]);
    if (l->fd >= 0)
        close(l->fd);
    free(l);
    return ncclSuccess;
}

/* ------------------------------------------------------------------ connect */

/* NCCL calls connect again with the same handle buffer until it returns a
 * comm; the state of each connect in progress is found by that address
 * (never stored in the handle bytes, which come from the peer). */
struct connect_state {
    const void *key;
    int dev;
    int stage;
    uint64_t started_ns;
    int fd;
    struct hs_handle h;
    struct oob_tx tx;
    struct oob_rx rx;
    struct send_comm *sc;
    struct connect_state *next;
};

enum { CON_CONNECT = 0, CON_WAIT_TCP, CON_HELLO, CON_REPLY, CON_READY };

static pthread_mutex_t connect_mu = PTHREAD_MUTEX_INITIALIZER;
static struct connect_state *connect_pending;

static struct connect_state *connect_find(const void *key, int dev, int create)
{
    pthread_mutex_lock(&connect_mu);
    struct connect_state *s = connect_pending;
    while (s && !(s->key == key && s->dev == dev))
        s = s->next;
    if (!s && create && (s = calloc(1, sizeof(*s)))) {
        s->key = key;
        s->dev = dev;
        s->fd = -1;
        s->started_ns = comm_now_ns();
        s->next = connect_pending;
        connect_pending = s;
    }
    pthread_mutex_unlock(&connect_mu);
    return s;
}

static void connect_drop(struct connect_state *s)
{
    pthread_mutex_lock(&connect_mu);
    for (struct connect_state **p = &connect_pending; *p; p = &(*p)->next) {
        if (*p == s) {
            *p = s->next;
            break;
        }
    }
    pthread_mutex_unlock(&connect_mu);
    if (s->fd >= 0)
        close(s->fd);
    send_comm_free(s->sc);
    free(s);
}

static ncclResult_t connect_hello(struct connect_state *s)
{
    if (send_comm_create(s->dev, &s->sc) != ncclSuccess)
        return ncclSystemError;
    struct send_comm *sc = s->sc;
    struct comm *c = &sc->c;
    struct hs_hello m;
    memset(&m, 0, sizeof(m));
    m.target_guid = s->h.guid;
    m.nonce = s->h.nonce;
    uint8_t np;
    struct oob_addr a;
    devices_handle_info(s->dev, &m.src_guid, &m.link_layer, &np, &a);
    m.nqps = (uint8_t)c->nqps;
    m.nports = (uint8_t)c->nports;
    m.cts_slots = HS_CTS_SLOTS;
    m.cts_entry_size = HS_CTS_ENTRY_SIZE;
    m.max_recvs = HS_MAX_RECVS;
    m.cts_addr = (uint64_t)(uintptr_t)sc->ring;
    for (int p = 0; p < HS_MAX_PORTS; p++)
        m.cts_rkey[p] = sc->ring_mr->rkey;
    for (int i = 0; i < c->nqps; i++)
        qp_describe(&c->qps[i], &m.qp[i]);
    uint8_t buf[HS_MSG_MAX];
    size_t len = hs_hello_encode(&m, HS_VERSION, buf, sizeof(buf));
    if (!len) {
        WARN("NET/railnet: connect on device %s: cannot encode HELLO", c->dev_name);
        return ncclInternalError;
    }
    oob_tx_init(&s->tx, buf, len);
    return ncclSuccess;
}

ncclResult_t comm_connect(int dev, void *handle, void **send_comm)
{
    *send_comm = NULL;
    struct connect_state *s = connect_find(handle, dev, 1);
    if (!s)
        return ncclSystemError;
    char err[OOB_ERR_LEN];
    char herr[HS_ERR_LEN];
    ncclResult_t res = ncclRemoteError;
    int r;
    if (handshake_expired(s->started_ns)) {
        WARN("NET/railnet: connect on device %d: the listener did not finish the handshake within "
             "RAILNET_HANDSHAKE_TIMEOUT=%d s (stage %d)",
             dev, rn_config()->handshake_timeout, s->stage);
        goto fail;
    }
    switch (s->stage) {
    case CON_CONNECT: {
        if (hs_handle_parse(handle, HS_HANDLE_SIZE, &s->h, herr) != HS_OK) {
            WARN("NET/railnet: connect on device %d: invalid handle: %s", dev, herr);
            res = ncclInvalidArgument;
            goto fail;
        }
        uint64_t guid;
        uint8_t ll, np;
        struct oob_addr a;
        if (devices_handle_info(dev, &guid, &ll, &np, &a) != ncclSuccess) {
            WARN("NET/railnet: connect on device %d: no such device", dev);
            res = ncclInvalidArgument;
            goto fail;
        }
        if (s->h.link_layer != ll) {
            WARN("NET/railnet: connect on device %d: the handle comes from a %s device, this one is %s", dev,
                 s->h.link_layer == 1 ? "InfiniBand" : "Ethernet", ll == 1 ? "InfiniBand" : "Ethernet");
            res = ncclInvalidUsage;
            goto fail;
        }
        struct oob_addr to = { .family = s->h.family, .port = s->h.tcp_port };
        memcpy(to.addr, s->h.addr, 16);
        if (oob_connect_start(&to, &s->fd, err) != OOB_DONE)
            goto oob_fail;
        s->stage = CON_WAIT_TCP;
    }
        /* fall through */
    case CON_WAIT_TCP:
        r = oob_connect_poll(s->fd, err);
        if (r == OOB_AGAIN)
            return ncclSuccess;
        if (r == OOB_ERROR)
            goto oob_fail;
        if ((res = connect_hello(s)) != ncclSuccess)
            goto fail;
        s->stage = CON_HELLO;
        /* fall through */
    case CON_HELLO:
        r = oob_tx_progress(s->fd, &s->tx, err);
        if (r == OOB_AGAIN)
            return ncclSuccess;
        if (r == OOB_ERROR)
            goto oob_fail;
        oob_rx_init(&s->rx);
        s->stage = CON_REPLY;
        /* fall through */
    case CON_REPLY: {
        r = oob_rx_progress(s->fd, &s->rx, err);
        if (r == OOB_AGAIN)
            return ncclSuccess;
        if (r == OOB_ERROR)
            goto oob_fail;
        struct hs_reply rep;
        if (s->rx.type != HS_REPLY || hs_reply_parse(s->rx.buf, s->rx.off, &rep, herr) != HS_OK) {
            if (s->rx.type != HS_REPLY)
                snprintf(herr, sizeof(herr), "message type %u where REPLY was expected", s->rx.type);
            WARN("NET/railnet: connect on device %d: bad reply from the listener: %s", dev, herr);
            goto fail;
        }
        if (rep.status != HS_REJECT_NONE) {
            WARN("NET/railnet: connect on device %d: the listener rejected the connection: %s", dev,
                 hs_reject_str(rep.status));
            res = rep.status == HS_REJECT_WRONG_DEVICE || rep.status == HS_REJECT_LINK_LAYER ? ncclInvalidUsage
                                                                                            : ncclRemoteError;
            goto fail;
        }
        struct comm *c = &s->sc->c;
        if (rep.nqps != c->nqps) {
            WARN("NET/railnet: connect on device %d: the listener made %u QPs, we asked for %d", dev, rep.nqps,
                 c->nqps);
            goto fail;
        }
        s->sc->remote_sizes_addr = rep.sizes_addr;
        for (int p = 0; p < HS_MAX_PORTS; p++)
            s->sc->remote_sizes_rkey[p] = rep.sizes_rkey[p < rep.nports ? p : 0];
        if ((res = connect_qps(c, rep.qp, rep.nqps)) != ncclSuccess)
            goto fail;
        uint8_t buf[HS_MSG_MAX];
        oob_tx_init(&s->tx, buf, hs_ready_encode(HS_VERSION, buf, sizeof(buf)));
        s->stage = CON_READY;
    }
        /* fall through */
    case CON_READY: {
        r = oob_tx_progress(s->fd, &s->tx, err);
        if (r == OOB_AGAIN)
            return ncclSuccess;
        if (r == OOB_ERROR)
            goto oob_fail;
        struct send_comm *sc = s->sc;
        sc->c.fd = s->fd;
        s->fd = -1;
        s->sc = NULL;
        connect_drop(s);
        if (failover_attach(&sc->c) != ncclSuccess) {
            send_comm_free(sc);
            return ncclSystemError;
        }
        sc->c.ready = 1;
        INFO(NCCL_NET, "NET/railnet: connected on %s with %d QPs over %d port(s)", sc->c.dev_name, sc->c.nqps,
             sc->c.nports);
        *send_comm = sc;
        return ncclSuccess;
    }
    default:
        break;
    }
    res = ncclInternalError;
    goto fail;
oob_fail:
    WARN("NET/railnet: connect on device %d: %s", dev, err);
    res = ncclRemoteError;
fail:
    connect_drop(s);
    return res;
}

/* -------------------------------------------------------------------- close */

ncclResult_t comm_close_send(void *send_comm)
{
    struct send_comm *sc = send_comm;
    if (!sc)
        return ncclSuccess;
    stats_print(&sc->c);
    send_comm_free(sc);
    return ncclSuccess;
}

ncclResult_t comm_close_recv(void *recv_comm)
{
    struct recv_comm *rc = recv_comm;
    if (!rc)
        return ncclSuccess;
    stats_print(&rc->c);
    recv_comm_free(rc);
    return ncclSuccess;
}
