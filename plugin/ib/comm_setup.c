/* plugin/ib/comm_setup.c: listen / connect / accept (comm_setup.h).
 *
 * Both sides run one engine (hs_run) over their own list of steps. A step
 * first waits on the socket (TCP connected, message sent, message received),
 * then does its part of the exchange; the last step hands the comm over:
 *
 *   connect                          accept
 *   0 start: parse handle, connect   0 HELLO in: make recv comm, QPs to RTR/RTS
 *   1 TCP up: make send comm, HELLO  1 REPLY out
 *   2 HELLO out                      2 READY in: done
 *   3 REPLY in: QPs to RTR/RTS
 *   4 READY out: done
 */
#include "comm_setup.h"

#include <arpa/inet.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm.h"
#include "comm_setup_cm.h"
#include "config.h"
#include "devices.h"
#include "errors.h"
#include "handshake.h"
#include "log.h"
#include "oob.h"

/* ------------------------------------------------------------- the engine */

struct setup_hs;

enum step_wait { WAIT_NONE = 0, WAIT_TCP, WAIT_SENT, WAIT_MSG };

struct step {
    int wait;                                   /* enum step_wait: before `then` runs */
    const char *what;                           /* names the step in the timeout WARN */
    ncclResult_t (*then)(struct setup_hs *s);   /* the step's part; WARNs itself on failure */
    void (*bad_input)(struct setup_hs *s, const char *err); /* WAIT_MSG: the bytes did not frame */
};

struct side {
    const char *name;   /* "connect" or "accept", first word of every WARN */
    const char *peer;   /* who is slow when the handshake times out */
    const struct step *steps;
    int nsteps;
};

/* One handshake in progress, on either side. */
struct setup_hs {
    const struct side *side;    /* NULL: unused slot */
    int dev;
    int stage;                  /* index into side->steps */
    int fd;
    uint64_t started_ns;
    struct oob_tx tx;
    struct oob_rx rx;
    struct comm *c;             /* the comm being built, once a step made it */
    const void *handle;         /* connect: NCCL's handle buffer (also the key of the state) */
    struct hs_handle h;         /* connect: the handle, parsed */
    struct comm_opts opts;      /* connect: what the comm's QPs get (the first call's) */
    struct listen_comm *l;      /* accept: the listener */
};

static void hs_begin(struct setup_hs *s, const struct side *side, int dev, int fd)
{
    memset(s, 0, sizeof(*s));
    s->side = side;
    s->dev = dev;
    s->fd = fd;
    s->started_ns = comm_now_ns();
    if (side->steps[0].wait == WAIT_MSG)
        oob_rx_init(&s->rx);
}

static void hs_reset(struct setup_hs *s)
{
    if (s->fd >= 0)
        close(s->fd);
    if (s->c && s->c->kind == COMM_SEND)
        comm_send_free((struct send_comm *)s->c);
    else if (s->c)
        comm_recv_free((struct recv_comm *)s->c);
    memset(s, 0, sizeof(*s));
    s->fd = -1;
}

static int hs_expired(const struct setup_hs *s)
{
    return comm_now_ns() - s->started_ns > (uint64_t)rn_config()->handshake_timeout * 1000000000ull;
}

/* Moves a handshake as far as its socket allows. Returns ncclSuccess with
 * *done set when the comm is connected (it now owns the socket),
 * ncclSuccess alone while it waits, or the error of the step that failed
 * (one WARN said why); the caller then resets the state. */
static ncclResult_t hs_run(struct setup_hs *s, struct comm **done)
{
    const struct side *side = s->side;
    char err[OOB_ERR_LEN];
    *done = NULL;
    if (hs_expired(s)) {
        WARN("NET/railnet: %s on device %d: the %s did not finish the handshake within "
             "RAILNET_HANDSHAKE_TIMEOUT=%d s (stage %d, %s); dropping it",
             side->name, s->dev, side->peer, rn_config()->handshake_timeout, s->stage, side->steps[s->stage].what);
        return ncclRemoteError;
    }
    for (; s->stage < side->nsteps; s->stage++) {
        const struct step *st = &side->steps[s->stage];
        int r = OOB_DONE;
        if (st->wait == WAIT_TCP)
            r = oob_connect_poll(s->fd, err);
        else if (st->wait == WAIT_SENT)
            r = oob_tx_progress(s->fd, &s->tx, err);
        else if (st->wait == WAIT_MSG)
            r = oob_rx_progress(s->fd, &s->rx, err);
        if (r == OOB_AGAIN)
            return ncclSuccess;
        if (r == OOB_ERROR) {
            if (st->bad_input)
                st->bad_input(s, err);
            WARN("NET/railnet: %s on device %d: %s", side->name, s->dev, err);
            return ncclRemoteError;
        }
        ncclResult_t res = st->then ? st->then(s) : ncclSuccess;
        if (res != ncclSuccess)
            return res;
        if (s->stage + 1 < side->nsteps && side->steps[s->stage + 1].wait == WAIT_MSG)
            oob_rx_init(&s->rx);
    }
    struct comm *c = s->c;
    c->fd = s->fd;
    c->ready = 1;
    s->fd = -1;
    s->c = NULL;
    *done = c;
    return ncclSuccess;
}

/* ------------------------------------------------ steps both sides share */

/* Queues an encoded message (len 0: the encoder refused it). */
static ncclResult_t hs_send(struct setup_hs *s, const uint8_t *buf, size_t len, const char *what)
{
    if (!len) {
        WARN("NET/railnet: %s on device %d: cannot encode %s", s->side->name, s->dev, what);
        return ncclInternalError;
    }
    oob_tx_init(&s->tx, buf, len);
    return ncclSuccess;
}

/* The message received is a `want`; else err says what came instead. */
static int hs_got(const struct setup_hs *s, uint16_t want, const char *name, char err[HS_ERR_LEN])
{
    if (s->rx.type == want)
        return 1;
    snprintf(err, HS_ERR_LEN, "message type %u where %s was expected", s->rx.type, name);
    return 0;
}

/* Both ends InfiniBand, or both Ethernet. */
static int hs_same_link_layer(const struct setup_hs *s, uint8_t theirs, uint8_t ours)
{
    if (theirs == ours)
        return 1;
    WARN("NET/railnet: %s on device %d: the peer's link layer is %s, this device's %s", s->side->name, s->dev,
         theirs == 1 ? "InfiniBand" : "Ethernet", ours == 1 ? "InfiniBand" : "Ethernet");
    return 0;
}

/* The comm a step made: its async-event counters start now (errors.c). */
static void hs_adopt(struct setup_hs *s, struct comm *c)
{
    s->c = c;
    errors_snapshot(c);
}

/* A peer's rkeys, one per port; a single-port peer's key serves both. */
static void hs_take_rkeys(uint32_t dst[HS_MAX_PORTS], const uint32_t src[HS_MAX_PORTS], uint8_t nports)
{
    for (int p = 0; p < HS_MAX_PORTS; p++)
        dst[p] = src[p < nports ? p : 0];
}

static void hs_give_rkeys(uint32_t dst[HS_MAX_PORTS], uint32_t rkey)
{
    for (int p = 0; p < HS_MAX_PORTS; p++)
        dst[p] = rkey;
}

/* ------------------------------------------------------------------ accept */

/* Handshakes a listener carries at once. Each TCP connection gets its own
 * state, so a peer that connects and stays silent (or a stranger's port
 * scan) does not hold up the peers behind it; when all are busy a new
 * connection takes the place of the oldest silent one (accept_slot). */
#define ACC_PENDING 8

struct listen_comm {
    int cm;                     /* 0: TCP bootstrap (comm_setup_cm.c's listener has 1 here) */
    int dev;
    int fd;
    uint64_t guid;
    uint64_t nonce;
    struct comm_opts opts;      /* what the accepted comms' QPs get */
    struct setup_hs acc[ACC_PENDING];
};

/* Best effort: the peer learns why instead of seeing a bare EOF. */
static void accept_reject(struct setup_hs *s, uint32_t reason)
{
    struct hs_reply r;
    memset(&r, 0, sizeof(r));
    r.status = reason;
    uint8_t buf[HS_MSG_MAX];
    size_t len = hs_reply_encode(&r, HS_VERSION, buf, sizeof(buf));
    if (len && s->fd >= 0)
        (void)!write(s->fd, buf, len);
}

/* A HELLO that does not even frame: tell a railnet of another version why. */
static void accept_bad_header(struct setup_hs *s, const char *err)
{
    if (strstr(err, "version") || strstr(err, "magic"))
        accept_reject(s, HS_REJECT_PROTOCOL);
}

static ncclResult_t accept_hello(struct setup_hs *s)
{
    struct listen_comm *l = s->l;
    char err[HS_ERR_LEN];
    struct hs_hello m;
    if (!hs_got(s, HS_HELLO, "HELLO", err) || hs_hello_parse(s->rx.buf, s->rx.off, &m, err) != HS_OK) {
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
    uint8_t ll, np;
    uint64_t guid;
    struct oob_addr a;
    devices_handle_info(l->dev, &guid, &ll, &np, &a);
    if (!hs_same_link_layer(s, m.link_layer, ll)) {
        accept_reject(s, HS_REJECT_LINK_LAYER);
        return ncclInvalidUsage;
    }
    struct recv_comm *rc;
    if (comm_recv_create(l->dev, m.nqps, &l->opts, &rc) != ncclSuccess) {
        accept_reject(s, HS_REJECT_RESOURCES);
        return ncclSystemError;
    }
    hs_adopt(s, &rc->c);
    struct comm *c = &rc->c;
    rc->remote_ring_addr = m.cts_addr;
    hs_take_rkeys(rc->remote_ring_rkey, m.cts_rkey, m.nports);
    if (comm_connect_qps(c, m.qp, m.nqps) != ncclSuccess) {
        accept_reject(s, HS_REJECT_RESOURCES);
        return ncclSystemError;
    }
    for (int i = 0; i < c->nqps; i++) {
        int e = comm_post_recvs(c, i, COMM_RECV_POSTED);
        if (e) {
            WARN("NET/railnet: device %s QP 0x%x: posting %d receives failed: %s", c->dev_name,
                 c->qps[i].qp->qp_num, COMM_RECV_POSTED, strerror(e));
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
    hs_give_rkeys(r.sizes_rkey, rc->sizes_mr->rkey);
    comm_describe_qps(c, r.qp);
    uint8_t buf[HS_MSG_MAX];
    return hs_send(s, buf, hs_reply_encode(&r, HS_VERSION, buf, sizeof(buf)), "REPLY");
}

static ncclResult_t accept_ready(struct setup_hs *s)
{
    char herr[HS_ERR_LEN];
    if (!hs_got(s, HS_READY, "READY", herr) || hs_ready_parse(s->rx.buf, s->rx.off, herr) != HS_OK) {
        WARN("NET/railnet: accept on device %d: bad READY from the peer: %s", s->dev, herr);
        return ncclRemoteError;
    }
    return ncclSuccess;
}

static const struct step accept_steps[] = {
    { WAIT_MSG, "waiting for HELLO", accept_hello, accept_bad_header },
    { WAIT_SENT, "sending REPLY", NULL, NULL },
    { WAIT_MSG, "waiting for READY", accept_ready, NULL },
};
static const struct side accept_side = { "accept", "connecting peer", accept_steps, 3 };

/* NULL opts: the defaults */
static struct comm_opts opts_or_default(const struct comm_opts *opts)
{
    struct comm_opts o = { .tc = COMM_TC_DEFAULT };
    return opts ? *opts : o;
}

ncclResult_t comm_listen(int dev, const struct comm_opts *opts, void *handle, void **listen_comm)
{
    *listen_comm = NULL;
    if (rn_config()->cm == RN_CM_RDMACM)
        return cmsetup_listen(dev, opts, handle, listen_comm);
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
    l->opts = opts_or_default(opts);
    l->guid = h.guid;
    l->nonce = hs_nonce_new();
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
    INFO(NCCL_NET | NCCL_INIT, "NET/railnet: listening for device %d on %s port %u (TCP bootstrap, RAILNET_CM=tcp)",
         dev, ip, a.port);
    *listen_comm = l;
    return ncclSuccess;
}

/* A state for a new connection: a free one, else the oldest handshake whose
 * peer has not sent a whole HELLO yet, a silent one first (an expected
 * peer sends its HELLO right after connecting and accept reads it at once,
 * so silence, or a HELLO begun and left unfinished, is what a stale or
 * hostile connection looks like: eight strangers that each sent one byte
 * must not keep the expected peers out until they time out). NULL when
 * every state is a peer past its HELLO. */
static struct setup_hs *accept_slot(struct listen_comm *l)
{
    struct setup_hs *silent = NULL, *partial = NULL;
    for (int i = 0; i < ACC_PENDING; i++) {
        struct setup_hs *s = &l->acc[i];
        if (!s->side)
            return s;
        if (s->stage != 0)
            continue;
        struct setup_hs **o = s->rx.off == 0 ? &silent : &partial;
        if (!*o || s->started_ns < (*o)->started_ns)
            *o = s;
    }
    struct setup_hs *oldest = silent ? silent : partial;
    if (oldest) {
        WARN("NET/railnet: accept on device %d: %d handshakes in progress; dropping the oldest connection "
             "without a whole HELLO (%zu bytes of it in %.1f s) to take a new one",
             l->dev, ACC_PENDING, (size_t)oldest->rx.off, (double)(comm_now_ns() - oldest->started_ns) / 1e9);
        hs_reset(oldest);
    }
    return oldest;
}

/* hs_run for one accept; a failed handshake frees its state. ncclRemoteError
 * or ncclInvalidUsage: the peer broke the protocol (the caller drops it and
 * goes on listening); another error is local. */
static ncclResult_t accept_step(struct setup_hs *s, struct recv_comm **done)
{
    struct comm *c;
    ncclResult_t res = hs_run(s, &c);
    *done = (struct recv_comm *)c;
    if (res != ncclSuccess || c)
        hs_reset(s);
    if (c)
        INFO(NCCL_NET, "NET/railnet: accepted a connection on %s with %d QPs (TCP bootstrap)", c->dev_name, c->nqps);
    return res;
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
    if (l->cm)
        return cmsetup_accept(listen_comm, recv_comm);
    for (;;) {
        int fd = -1;
        int r = oob_accept(l->fd, &fd, err);
        if (r == OOB_AGAIN)
            break;
        if (r == OOB_ERROR) {
            WARN("NET/railnet: accept on device %d: %s", l->dev, err);
            return ncclSystemError;
        }
        struct setup_hs *s = accept_slot(l);
        if (!s) {
            WARN("NET/railnet: accept on device %d: %d handshakes in progress, all past their HELLO; refusing "
                 "a new connection", l->dev, ACC_PENDING);
            close(fd);
            continue;
        }
        hs_begin(s, &accept_side, l->dev, fd);
        s->l = l;
        /* read what the peer sent already: a talking peer is not evicted by
         * connections behind it */
        struct recv_comm *rc;
        ncclResult_t res = accept_step(s, &rc);
        if (res != ncclSuccess && res != ncclRemoteError && res != ncclInvalidUsage)
            return res;
        if (rc) {
            *recv_comm = rc;
            return ncclSuccess;
        }
    }
    for (int i = 0; i < ACC_PENDING; i++) {
        struct setup_hs *s = &l->acc[i];
        if (!s->side)
            continue;
        struct recv_comm *rc;
        ncclResult_t res = accept_step(s, &rc);
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
    if (l->cm)
        return cmsetup_close_listen(listen_comm);
    for (int i = 0; i < ACC_PENDING; i++)
        hs_reset(&l->acc[i]);
    if (l->fd >= 0)
        close(l->fd);
    free(l);
    return ncclSuccess;
}

/* ----------------------------------------------------------------- connect */

static ncclResult_t connect_start(struct setup_hs *s)
{
    char herr[HS_ERR_LEN];
    if (hs_handle_parse(s->handle, HS_HANDLE_SIZE, &s->h, herr) != HS_OK) {
        WARN("NET/railnet: connect on device %d: invalid handle: %s", s->dev, herr);
        return ncclInvalidArgument;
    }
    uint64_t guid;
    uint8_t ll, np;
    struct oob_addr a;
    if (devices_handle_info(s->dev, &guid, &ll, &np, &a) != ncclSuccess) {
        WARN("NET/railnet: connect on device %d: no such device", s->dev);
        return ncclInvalidArgument;
    }
    if (!hs_same_link_layer(s, s->h.link_layer, ll))
        return ncclInvalidUsage;
    struct oob_addr to = { .family = s->h.family, .port = s->h.tcp_port };
    memcpy(to.addr, s->h.addr, 16);
    char err[OOB_ERR_LEN];
    if (oob_connect_start(&to, &s->fd, err) != OOB_DONE) {
        WARN("NET/railnet: connect on device %d: %s", s->dev, err);
        return ncclRemoteError;
    }
    return ncclSuccess;
}

static ncclResult_t connect_hello(struct setup_hs *s)
{
    struct send_comm *sc;
    if (comm_send_create(s->dev, &s->opts, &sc) != ncclSuccess)
        return ncclSystemError;
    hs_adopt(s, &sc->c);
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
    hs_give_rkeys(m.cts_rkey, sc->ring_mr->rkey);
    comm_describe_qps(c, m.qp);
    uint8_t buf[HS_MSG_MAX];
    return hs_send(s, buf, hs_hello_encode(&m, HS_VERSION, buf, sizeof(buf)), "HELLO");
}

static ncclResult_t connect_reply(struct setup_hs *s)
{
    char herr[HS_ERR_LEN];
    struct hs_reply rep;
    if (!hs_got(s, HS_REPLY, "REPLY", herr) || hs_reply_parse(s->rx.buf, s->rx.off, &rep, herr) != HS_OK) {
        WARN("NET/railnet: connect on device %d: bad reply from the listener: %s", s->dev, herr);
        return ncclRemoteError;
    }
    if (rep.status != HS_REJECT_NONE) {
        WARN("NET/railnet: connect on device %d: the listener rejected the connection: %s", s->dev,
             hs_reject_str(rep.status));
        return rep.status == HS_REJECT_WRONG_DEVICE || rep.status == HS_REJECT_LINK_LAYER ? ncclInvalidUsage
                                                                                        : ncclRemoteError;
    }
    struct send_comm *sc = (struct send_comm *)s->c;
    if (rep.nqps != sc->c.nqps) {
        WARN("NET/railnet: connect on device %d: the listener made %u QPs, we asked for %d", s->dev, rep.nqps,
             sc->c.nqps);
        return ncclRemoteError;
    }
    sc->remote_sizes_addr = rep.sizes_addr;
    hs_take_rkeys(sc->remote_sizes_rkey, rep.sizes_rkey, rep.nports);
    ncclResult_t res = comm_connect_qps(&sc->c, rep.qp, rep.nqps);
    if (res != ncclSuccess)
        return res;
    uint8_t buf[HS_MSG_MAX];
    return hs_send(s, buf, hs_ready_encode(HS_VERSION, buf, sizeof(buf)), "READY");
}

static const struct step connect_steps[] = {
    { WAIT_NONE, "starting", connect_start, NULL },
    { WAIT_TCP, "TCP connect", connect_hello, NULL },
    { WAIT_SENT, "sending HELLO", NULL, NULL },
    { WAIT_MSG, "waiting for REPLY", connect_reply, NULL },
    { WAIT_SENT, "sending READY", NULL, NULL },
};
static const struct side connect_side = { "connect", "listener", connect_steps, 5 };

/* NCCL calls connect again with the same handle buffer until it returns a
 * comm; the state of each connect in progress is found by that address
 * (never stored in the handle bytes, which come from the peer). */
struct connect_state {
    struct setup_hs hs;
    struct connect_state *next;
};

static pthread_mutex_t connect_mu = PTHREAD_MUTEX_INITIALIZER;
static struct connect_state *connect_pending;

static struct connect_state *connect_find(const void *key, int dev, const struct comm_opts *opts)
{
    pthread_mutex_lock(&connect_mu);
    struct connect_state *s = connect_pending;
    while (s && !(s->hs.handle == key && s->hs.dev == dev))
        s = s->next;
    if (!s && (s = calloc(1, sizeof(*s)))) {
        hs_begin(&s->hs, &connect_side, dev, -1);
        s->hs.handle = key;
        s->hs.opts = opts_or_default(opts);
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
    hs_reset(&s->hs);
    free(s);
}

ncclResult_t comm_connect(int dev, const struct comm_opts *opts, void *handle, void **send_comm)
{
    *send_comm = NULL;
    /* the listener chose how to connect: its handle says so */
    struct hs_handle h;
    char herr[HS_ERR_LEN];
    if (hs_handle_parse(handle, HS_HANDLE_SIZE, &h, herr) == HS_OK && h.cm)
        return cmsetup_connect(dev, opts, handle, &h, send_comm);
    struct connect_state *s = connect_find(handle, dev, opts);
    if (!s)
        return ncclSystemError;
    struct comm *c;
    ncclResult_t res = hs_run(&s->hs, &c);
    if (res != ncclSuccess || c)
        connect_drop(s);
    if (c) {
        INFO(NCCL_NET, "NET/railnet: connected on %s with %d QPs over %d port(s) (TCP bootstrap)", c->dev_name,
             c->nqps, c->nports);
        *send_comm = c;
    }
    return res;
}
