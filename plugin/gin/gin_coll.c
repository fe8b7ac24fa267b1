/* plugin/gin/gin_coll.c: GIN listen, the collective connect over all ranks,
 * and closing (gin.h, gin_wire.h).
 *
 * connect is blocking (NCCL 2.28.9 calls it once and expects a collComm),
 * bounded by RAILNET_HANDSHAKE_TIMEOUT. Rank r first connects to every lower
 * rank's listener (HELLO, then waits for the REPLY), then accepts every
 * higher rank; a lower rank only ever waits on ranks below it, so the mesh
 * cannot deadlock. Strangers on the listener (a stale job's rank, garbage, a
 * silent port scan) are refused with a WARN and accept goes on. Then a READY
 * barrier: no rank posts RDMA before every QP towards it is in RTS. A rank
 * also reaches itself, through QPs connected to themselves (NCCL may put to
 * its own rank). A collComm of the GDAKI type runs the same steps with no
 * QPs at all (gin.h); each HELLO and REPLY says which kind its sender is,
 * and a rank of this job of the other kind fails the connect on both sides
 * at once (ncclInvalidUsage), where a stranger is only dropped. */
#include <arpa/inet.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../ib/config.h"
#include "devices.h"
#include "errors.h"
#include "gin.h"
#include "gin_gdaki.h"
#include "gin_wire.h"
#include "ibvwrap.h"
#include "log.h"
#include "mr.h"
#include "oob.h"
#include "stats.h"

/* Connections accepted that have not sent their HELLO yet: every higher
 * rank still expected may be among them (they all connect at once), plus
 * this many strangers (a port scan) before the oldest is dropped. */
#define ACCEPT_STRANGERS 16

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

ncclResult_t gin_listen(int dev, uint64_t comm_id, unsigned ordinal, void *handle, void **listen_comm)
{
    *listen_comm = NULL;
    struct hs_handle h;
    memset(&h, 0, sizeof(h));
    struct oob_addr a;
    if (devices_handle_info(dev, &h.guid, &h.link_layer, &h.nports, &a) != ncclSuccess) {
        WARN("NET/railnet/GIN: listen on device %d: no such device", dev);
        return ncclInvalidArgument;
    }
    struct gin_listen *l = calloc(1, sizeof(*l));
    if (!l)
        return ncclSystemError;
    char err[OOB_ERR_LEN];
    if (oob_listen(&a, &l->fd, err) != OOB_DONE) {
        WARN("NET/railnet/GIN: listen on device %d: %s", dev, err);
        free(l);
        return ncclSystemError;
    }
    l->magic = GIN_LISTEN_MAGIC;
    l->dev = dev;
    l->comm_id = comm_id;
    l->nonce = (hs_nonce_new() & ~0xffull) | (ordinal & 0xffu);
    h.version = HS_VERSION;
    h.family = a.family;
    memcpy(h.addr, a.addr, 16);
    h.tcp_port = a.port;
    h.nonce = l->nonce;
    hs_handle_encode(&h, l->handle);
    memcpy(handle, l->handle, HS_HANDLE_SIZE);
    INFO(NCCL_NET | NCCL_INIT, "NET/railnet/GIN: listening for device %d on port %u", dev, a.port);
    *listen_comm = l;
    return ncclSuccess;
}

ncclResult_t gin_close_listen(void *listen_comm)
{
    struct gin_listen *l = listen_comm;
    if (!l)
        return ncclSuccess;
    if (l->magic != GIN_LISTEN_MAGIC) {
        WARN("NET/railnet/GIN: closeListen: %p is not a live GIN listen comm", listen_comm);
        return ncclInvalidArgument;
    }
    close(l->fd);
    l->magic = 0;
    free(l);
    return ncclSuccess;
}

struct gin_coll *gin_coll_of(void *coll_comm, const char *what)
{
    struct gin_coll *c = coll_comm;
    if (!c || c->magic != GIN_COLL_MAGIC) {
        WARN("NET/railnet/GIN: %s: %p is not a live GIN collComm", what, coll_comm);
        return NULL;
    }
    return c;
}

/* ------------------------------------------------------------- building */

static void coll_free(struct gin_coll *c)
{
    if (!c)
        return;
    gin_mr_free_all(c);
    gin_gdaki_coll_free(c);
    gin_lanes_release(c);
    if (c->peers) {
        for (int p = 0; p < c->nranks; p++) {
            for (int i = 0; i < HS_MAX_PORTS; i++)
                qp_destroy(&c->peers[p].qps[i].conn);
            if (c->peers[p].fd >= 0)
                close(c->peers[p].fd);
        }
    }
    if (c->cq)
        RN_IBV(destroy_cq)(c->cq);
    if (c->scratch_mh)
        mr_deregister(NULL, c->scratch_mh);
    free(c->scratch);
    free(c->peers);
    pthread_mutex_destroy(&c->wins_mu);
    pthread_mutex_destroy(&c->lanes_mu);
    c->magic = 0;
    free(c);
}

/* The collComm of gin_connect: with proxy QPs (gdaki_type 0) their CQ, QPs
 * (not connected yet), scratch page and lane0; without, only what every
 * collComm has (ports, peers' sockets to come, the async watch). */
static ncclResult_t coll_create(int dev, int rank, int nranks, int gdaki_type, struct gin_coll **out)
{
    struct gin_coll *c = calloc(1, sizeof(*c));
    if (!c)
        return ncclSystemError;
    pthread_mutex_init(&c->wins_mu, NULL);
    pthread_mutex_init(&c->lanes_mu, NULL);
    c->dev = dev;
    c->rank = rank;
    c->nranks = nranks;
    c->gdaki_type = gdaki_type;
    c->proxy_qps = !gdaki_type;
    c->peers = calloc((size_t)nranks, sizeof(*c->peers));
    if (c->proxy_qps)
        c->scratch = aligned_alloc(4096, 4096);
    if (!c->peers || (c->proxy_qps && !c->scratch)) {
        WARN("NET/railnet/GIN: connect: out of memory for %d ranks", nranks);
        coll_free(c);
        return ncclSystemError;
    }
    for (int p = 0; p < nranks; p++)
        c->peers[p].fd = -1;
    if (c->proxy_qps && gin_lanes_init(c) != ncclSuccess) {
        coll_free(c);
        return ncclSystemError;
    }
    if (devices_qp_ports(dev, c->ports, &c->nports, c->dev_name, sizeof(c->dev_name)) != ncclSuccess) {
        WARN("NET/railnet/GIN: connect: device %d does not exist", dev);
        coll_free(c);
        return ncclInvalidArgument;
    }
    const struct rn_config *cfg = rn_config();
    c->qpp.timeout = cfg->ib_timeout;
    c->qpp.retry_cnt = cfg->ib_retry_cnt;
    c->qpp.tc = cfg->ib_tc >= 0 ? cfg->ib_tc : 0; /* RAILNET_IB_TC, unset: 0 */
    c->qpp.sl = cfg->ib_sl;
    c->split_min = (uint64_t)cfg->split_min;
    c->signal_every = (uint64_t)cfg->gin_signal_every;
    if (!c->proxy_qps) {
        errors_watch_start(&c->async, c->ports, c->nports); /* the GDAKI contexts' port and device events */
        *out = c;
        return ncclSuccess;
    }
    static int warned_atomics;
    struct ibv_device_attr da;
    memset(&da, 0, sizeof(da));
    int have_attr = RN_IBV(query_device)(c->ports[0].ctx, &da) == 0;
    if (have_attr && da.atomic_cap == IBV_ATOMIC_NONE && !__atomic_exchange_n(&warned_atomics, 1, __ATOMIC_RELAXED))
        WARN("NET/railnet/GIN: device %s reports no RDMA atomics (atomic_cap NONE): puts work, but signals "
             "(iputSignal, 64-bit fetch-and-add) will fail",
             c->dev_name);
    c->qpp.max_send_wr = GIN_SQ_DEPTH;
    c->qpp.max_recv_wr = 1;
    /* Successful completions are fewer than work requests (selective
     * signaling), but an error flushes every work request in flight,
     * signaled or not, each with its own completion: every send queue may
     * be full at once. */
    long long want = (long long)nranks * c->nports * GIN_SQ_DEPTH;
    int cqe = have_attr && da.max_cqe > 0 && want > da.max_cqe ? da.max_cqe : (int)want;
    if (cqe < want)
        INFO(NCCL_NET | NCCL_INIT,
             "NET/railnet/GIN: device %s: CQ of %d entries (its maximum), %lld would hold every flush of %d ranks' "
             "full send queues; after such an error the comm is failed anyway",
             c->dev_name, cqe, want, nranks);
    c->cq = RN_IBV(create_cq)(c->ports[0].ctx, cqe, NULL, NULL, 0);
    if (!c->cq) {
        WARN("NET/railnet/GIN: device %s: ibv_create_cq(%d entries) failed: %s", c->dev_name, cqe, strerror(errno));
        coll_free(c);
        return ncclSystemError;
    }
    errors_watch_start(&c->async, c->ports, c->nports); /* only later async events fail c */
    if (mr_register_dev(dev, c->scratch, 4096, NCCL_PTR_HOST, 0, &c->scratch_mh) != ncclSuccess) {
        coll_free(c);
        return ncclSystemError;
    }
    c->scratch_lkey = mr_lkey(c->scratch_mh, 0);
    char err[256];
    for (int p = 0; p < nranks; p++) {
        c->peers[p].nqps = c->nports;
        /* an alltoall puts to every peer once an operation: turns that all
         * began on QP 0 put each operation's puts on one port (and each
         * peer's receives from all senders on one of its ports); turns
         * from the peer's distance take the QPs in turn over the peers,
         * and over the senders at each receiver */
        c->peers[p].next_qp = c->peers[p].last_qp = (unsigned)((p - rank + nranks) % nranks);
        for (int i = 0; i < c->nports; i++) {
            if (qp_create(&c->peers[p].qps[i].conn, &c->ports[i], c->cq, &c->qpp, err, sizeof(err))) {
                WARN("NET/railnet/GIN: device %s, QP %d towards rank %d: %s", c->dev_name, i, p, err);
                coll_free(c);
                return ncclSystemError;
            }
        }
    }
    *out = c;
    return ncclSuccess;
}

/* What c says of itself in the handshake: whether it has proxy QPs. */
static uint8_t qps_kind(const struct gin_coll *c)
{
    return c->proxy_qps ? GW_QPS_PROXY : GW_QPS_NONE;
}

static void describe(const struct gin_coll *c, int peer, uint64_t src_nonce, uint64_t dst_nonce, uint64_t guid,
                     struct gw_peer *m)
{
    memset(m, 0, sizeof(*m));
    m->nranks = (uint32_t)c->nranks;
    m->src_rank = (uint32_t)c->rank;
    m->dst_rank = (uint32_t)peer;
    m->src_nonce = src_nonce;
    m->dst_nonce = dst_nonce;
    m->guid = guid;
    m->link_layer = c->ports[0].link_layer;
    m->nports = (uint8_t)c->nports;
    m->qps = qps_kind(c);
    m->nqps = (uint8_t)c->peers[peer].nqps;
    for (int i = 0; i < m->nqps; i++)
        qp_describe(&c->peers[peer].qps[i].conn, &m->qp[i]);
}

static ncclResult_t connect_qps(struct gin_coll *c, int peer, const struct hs_qp_info *remote)
{
    char err[256];
    for (int i = 0; i < c->peers[peer].nqps; i++) {
        if (qp_connect(&c->peers[peer].qps[i].conn, &remote[i], &c->qpp, err, sizeof(err))) {
            WARN("NET/railnet/GIN: device %s, QP %d towards rank %d: %s", c->dev_name, i, peer, err);
            return ncclSystemError;
        }
    }
    return ncclSuccess;
}

/* Both sides' checks of what the other announced: the shape of the job and
 * the devices. Returns a gw_reject and says why in why. */
static uint32_t check_peer(const struct gin_coll *c, const struct gw_peer *m, int expect_src,
                           const struct hs_handle *handles, uint64_t my_nonce, char *why, size_t wl)
{
    if (m->nranks != (uint32_t)c->nranks) {
        snprintf(why, wl, "it has %u ranks, this job %d", m->nranks, c->nranks);
        return GW_REJECT_JOB;
    }
    if (m->dst_rank != (uint32_t)c->rank || m->dst_nonce != my_nonce) {
        snprintf(why, wl, "it addresses rank %u with nonce 0x%llx, this is rank %d with nonce 0x%llx (stale or "
                          "foreign handle)",
                 m->dst_rank, (unsigned long long)m->dst_nonce, c->rank, (unsigned long long)my_nonce);
        return GW_REJECT_JOB;
    }
    if ((expect_src >= 0 && m->src_rank != (uint32_t)expect_src) ||
        m->src_nonce != handles[m->src_rank].nonce) {
        snprintf(why, wl, "it claims rank %u with nonce 0x%llx, which is not the handle given for that rank",
                 m->src_rank, (unsigned long long)m->src_nonce);
        return GW_REJECT_JOB;
    }
    if (m->qps != qps_kind(c)) {
        snprintf(why, wl, "rank %u connects with %s, this rank with %s: every rank must offer NCCL the same GIN "
                          "type (RAILNET_GIN, and for the GDAKI type what each rank finds: GPU, NCCL's version, "
                          "DEVX; see each rank's \"offering the\" line)",
                 m->src_rank, gw_qps_str(m->qps), gw_qps_str(qps_kind(c)));
        return GW_REJECT_TYPE;
    }
    if (m->link_layer != c->ports[0].link_layer || m->nqps != c->peers[m->src_rank].nqps) {
        snprintf(why, wl, "its device has link layer %u and %u QPs, ours %u and %d", m->link_layer, m->nqps,
                 c->ports[0].link_layer, c->peers[m->src_rank].nqps);
        return GW_REJECT_DEVICE;
    }
    return GW_OK;
}

static ncclResult_t connect_lower(struct gin_coll *c, int peer, const struct hs_handle *handles, uint64_t my_nonce,
                                  uint64_t guid, uint64_t deadline)
{
    const struct hs_handle *h = &handles[peer];
    struct oob_addr to = { .family = h->family, .port = h->tcp_port };
    memcpy(to.addr, h->addr, 16);
    char oerr[OOB_ERR_LEN];
    int fd = -1;
    int r = oob_connect_start(&to, &fd, oerr);
    while (r == OOB_AGAIN) {
        if (now_ns() > deadline) {
            snprintf(oerr, sizeof(oerr), "TCP connect timed out (RAILNET_HANDSHAKE_TIMEOUT)");
            r = OOB_ERROR;
            break;
        }
        struct pollfd p = { .fd = fd, .events = POLLOUT };
        poll(&p, 1, 100);
        r = oob_connect_poll(fd, oerr);
    }
    if (r != OOB_DONE) {
        WARN("NET/railnet/GIN: rank %d: connecting to rank %d on port %u: %s", c->rank, peer, h->tcp_port, oerr);
        if (fd >= 0)
            close(fd);
        return ncclRemoteError;
    }
    c->peers[peer].fd = fd;
    struct gw_peer m;
    describe(c, peer, my_nonce, h->nonce, guid, &m);
    uint8_t buf[GW_MSG_MAX];
    size_t len = gw_peer_encode(GW_HELLO, &m, buf, sizeof(buf));
    char err[HS_ERR_LEN];
    struct gw_rx rx;
    if (gw_send(fd, buf, len, deadline, err) || gw_recv(fd, &rx, deadline, err)) {
        WARN("NET/railnet/GIN: rank %d: handshake with rank %d: %s", c->rank, peer, err);
        return ncclRemoteError;
    }
    struct gw_peer rep;
    if (gw_peer_parse(rx.buf, rx.off, GW_REPLY, &rep, err)) {
        WARN("NET/railnet/GIN: rank %d: bad REPLY from rank %d: %s", c->rank, peer, err);
        return ncclRemoteError;
    }
    if (rep.status == GW_REJECT_TYPE) {
        WARN("NET/railnet/GIN: rank %d: rank %d refused the connection: it connects with %s, this rank with %s: "
             "every rank must offer NCCL the same GIN type (RAILNET_GIN, and for the GDAKI type what each rank "
             "finds: GPU, NCCL's version, DEVX; see each rank's \"offering the\" line)",
             c->rank, peer, gw_qps_str(rep.qps), gw_qps_str(qps_kind(c)));
        return ncclInvalidUsage;
    }
    if (rep.status) {
        WARN("NET/railnet/GIN: rank %d: rank %d refused the connection: %s", c->rank, peer,
             gw_reject_str(rep.status));
        return ncclRemoteError;
    }
    char why[512];
    uint32_t st = check_peer(c, &rep, peer, handles, my_nonce, why, sizeof(why));
    if (st) {
        WARN("NET/railnet/GIN: rank %d: REPLY from rank %d refused: %s", c->rank, peer, why);
        return st == GW_REJECT_TYPE ? ncclInvalidUsage : ncclRemoteError;
    }
    c->peers[peer].nonce = rep.src_nonce;
    return connect_qps(c, peer, rep.qp);
}

struct pending {
    int fd;
    struct gw_rx rx;
};

static void reject(int fd, const struct gin_coll *c, uint32_t status, uint64_t deadline)
{
    struct gw_peer m;
    memset(&m, 0, sizeof(m));
    m.status = status;
    m.nranks = (uint32_t)c->nranks;
    m.src_rank = (uint32_t)c->rank;
    m.dst_rank = c->rank ? 0 : 1;
    m.link_layer = c->ports[0].link_layer;
    m.nports = (uint8_t)c->nports;
    m.qps = qps_kind(c); /* the connector names both sides' kinds */
    uint8_t buf[GW_MSG_MAX];
    size_t len = gw_peer_encode(GW_REPLY, &m, buf, sizeof(buf));
    char err[HS_ERR_LEN];
    uint64_t soon = now_ns() + 100000000ull;
    (void)gw_send(fd, buf, len, soon < deadline ? soon : deadline, err); /* best effort: it is going away */
    close(fd);
}

/* One complete HELLO on p: the peer is connected, or refused (WARN). */
static ncclResult_t accept_hello(struct gin_coll *c, struct pending *p, const struct hs_handle *handles,
                                 uint64_t my_nonce, uint64_t guid, uint64_t deadline, int *connected)
{
    struct gw_peer m;
    char err[HS_ERR_LEN], why[512];
    *connected = 0;
    if (gw_peer_parse(p->rx.buf, p->rx.off, GW_HELLO, &m, err)) {
        WARN("NET/railnet/GIN: rank %d: refusing a connection: %s", c->rank, err);
        reject(p->fd, c, GW_REJECT_JOB, deadline);
        return ncclSuccess;
    }
    uint32_t st = check_peer(c, &m, -1, handles, my_nonce, why, sizeof(why));
    if (!st && (m.src_rank <= (uint32_t)c->rank || c->peers[m.src_rank].fd >= 0)) {
        snprintf(why, sizeof(why), "it claims rank %u, which %s", m.src_rank,
                 m.src_rank <= (uint32_t)c->rank ? "this rank connects to itself" : "is already connected");
        st = GW_REJECT_JOB;
    }
    if (st) {
        WARN("NET/railnet/GIN: rank %d: refusing a connection: %s", c->rank, why);
        reject(p->fd, c, st, deadline);
        p->fd = -1; /* reject closed it */
        /* a stranger is dropped and accept goes on; a rank of this job (its
         * nonce checked) of the other GIN type ends the connect: it will
         * not come back as another */
        return st == GW_REJECT_TYPE ? ncclInvalidUsage : ncclSuccess;
    }
    int peer = (int)m.src_rank;
    /* the socket is the peer's from here: closed with the collComm, never
     * by accept_higher (a failure below used to close it twice) */
    int fd = p->fd;
    p->fd = -1;
    c->peers[peer].fd = fd;
    c->peers[peer].nonce = m.src_nonce;
    CHECK(connect_qps(c, peer, m.qp));
    struct gw_peer rep;
    describe(c, peer, my_nonce, m.src_nonce, guid, &rep);
    uint8_t buf[GW_MSG_MAX];
    size_t len = gw_peer_encode(GW_REPLY, &rep, buf, sizeof(buf));
    if (gw_send(fd, buf, len, deadline, err)) {
        WARN("NET/railnet/GIN: rank %d: sending REPLY to rank %d: %s", c->rank, peer, err);
        return ncclRemoteError;
    }
    *connected = 1;
    return ncclSuccess;
}

static ncclResult_t accept_higher(struct gin_coll *c, struct gin_listen *l, const struct hs_handle *handles,
                                  uint64_t guid, uint64_t deadline)
{
    int missing = c->nranks - 1 - c->rank;
    int cap = missing + ACCEPT_STRANGERS;
    struct pending *pend = calloc((size_t)cap, sizeof(*pend));
    struct pollfd *pf = calloc((size_t)cap + 1, sizeof(*pf));
    int np = 0;
    ncclResult_t res = ncclSuccess;
    if (!pend || !pf) {
        WARN("NET/railnet/GIN: rank %d: out of memory accepting %d ranks", c->rank, missing);
        res = ncclSystemError;
        missing = 0;
    }
    while (missing > 0) {
        uint64_t now = now_ns();
        if (now > deadline) {
            WARN("NET/railnet/GIN: rank %d: %d higher rank(s) did not connect within RAILNET_HANDSHAKE_TIMEOUT=%d s",
                 c->rank, missing, rn_config()->handshake_timeout);
            res = ncclRemoteError;
            break;
        }
        pf[0] = (struct pollfd){ .fd = l->fd, .events = POLLIN };
        for (int i = 0; i < np; i++)
            pf[i + 1] = (struct pollfd){ .fd = pend[i].fd, .events = POLLIN };
        poll(pf, (nfds_t)np + 1, 100);
        for (int i = 0; i < np; i++) {
            if (!pf[i + 1].revents)
                continue;
            char err[HS_ERR_LEN];
            int r = gw_rx_step(pend[i].fd, &pend[i].rx, err);
            if (r == 0)
                continue;
            int connected = 0;
            if (r < 0) {
                WARN("NET/railnet/GIN: rank %d: dropping a connection before its HELLO: %s", c->rank, err);
                close(pend[i].fd);
            } else {
                res = accept_hello(c, &pend[i], handles, l->nonce, guid, deadline, &connected);
                if (res != ncclSuccess)
                    break;
            }
            missing -= connected;
            pend[i].fd = -1;
        }
        if (res != ncclSuccess)
            break;
        int k = 0;
        for (int i = 0; i < np; i++)
            if (pend[i].fd >= 0)
                pend[k++] = pend[i];
        np = k;
        if (pf[0].revents) {
            int fd;
            char oerr[OOB_ERR_LEN];
            while (oob_accept(l->fd, &fd, oerr) == OOB_DONE) {
                if (np == cap) {
                    WARN("NET/railnet/GIN: rank %d: %d connections sent nothing yet; dropping the oldest", c->rank,
                         np);
                    close(pend[0].fd);
                    memmove(&pend[0], &pend[1], sizeof(pend[0]) * (np - 1));
                    np--;
                }
                pend[np].fd = fd;
                gw_rx_init(&pend[np].rx);
                np++;
            }
        }
    }
    for (int i = 0; i < np; i++)
        if (pend[i].fd >= 0)
            close(pend[i].fd);
    free(pend);
    free(pf);
    return res;
}

static ncclResult_t ready_barrier(struct gin_coll *c, uint64_t deadline)
{
    uint8_t buf[GW_HEADER];
    size_t len = gw_ready_encode(buf, sizeof(buf));
    char err[HS_ERR_LEN];
    for (int p = 0; p < c->nranks; p++) {
        if (p != c->rank && gw_send(c->peers[p].fd, buf, len, deadline, err)) {
            WARN("NET/railnet/GIN: rank %d: sending READY to rank %d: %s", c->rank, p, err);
            return ncclRemoteError;
        }
    }
    for (int p = 0; p < c->nranks; p++) {
        struct gw_rx rx;
        if (p == c->rank)
            continue;
        if (gw_recv(c->peers[p].fd, &rx, deadline, err) || gw_ready_parse(rx.buf, rx.off, err)) {
            WARN("NET/railnet/GIN: rank %d: waiting for READY from rank %d: %s", c->rank, p, err);
            return ncclRemoteError;
        }
    }
    return ncclSuccess;
}

ncclResult_t gin_connect(void *handles[], int nranks, int rank, void *listen_comm, int gdaki_type,
                         void **coll_comm)
{
    *coll_comm = NULL;
    struct gin_listen *l = listen_comm;
    if (!l || l->magic != GIN_LISTEN_MAGIC) {
        WARN("NET/railnet/GIN: connect: %p is not a live GIN listen comm", listen_comm);
        return ncclInvalidArgument;
    }
    if (nranks < 1 || nranks > GIN_MAX_RANKS || rank < 0 || rank >= nranks || !handles) {
        WARN("NET/railnet/GIN: connect: rank %d of %d ranks is out of range (1..%d ranks)", rank, nranks,
             GIN_MAX_RANKS);
        return ncclInvalidArgument;
    }
    if (!handles[rank] || memcmp(handles[rank], l->handle, HS_HANDLE_SIZE)) {
        WARN("NET/railnet/GIN: connect: the handle given for rank %d is not this listener's: wrong rank or rank "
             "count, or handles of another job",
             rank);
        return ncclInvalidArgument;
    }
    struct hs_handle *hs = calloc((size_t)nranks, sizeof(*hs));
    if (!hs)
        return ncclSystemError;
    ncclResult_t res = ncclSuccess;
    char err[HS_ERR_LEN];
    for (int r = 0; r < nranks && res == ncclSuccess; r++) {
        if (!handles[r] || hs_handle_parse(handles[r], HS_HANDLE_SIZE, &hs[r], err) != HS_OK) {
            WARN("NET/railnet/GIN: connect: the handle of rank %d is refused: %s", r, handles[r] ? err : "NULL");
            res = ncclInvalidArgument;
        }
    }
    uint64_t guid = 0;
    uint8_t ll, np;
    struct oob_addr a;
    struct gin_coll *c = NULL;
    if (res == ncclSuccess)
        res = devices_handle_info(l->dev, &guid, &ll, &np, &a);
    if (res == ncclSuccess)
        res = coll_create(l->dev, rank, nranks, gdaki_type, &c);
    if (res == ncclSuccess) {
        c->comm_id = l->comm_id;
        c->ordinal = (unsigned)(hs[0].nonce & 0xffu);
    }
    uint64_t deadline = now_ns() + (uint64_t)rn_config()->handshake_timeout * 1000000000ull;
    if (res == ncclSuccess) {
        struct gw_peer self;
        describe(c, rank, l->nonce, l->nonce, guid, &self);
        c->peers[rank].nonce = l->nonce;
        res = connect_qps(c, rank, self.qp);
    }
    for (int p = 0; p < rank && res == ncclSuccess; p++)
        res = connect_lower(c, p, hs, l->nonce, guid, deadline);
    if (res == ncclSuccess)
        res = accept_higher(c, l, hs, guid, deadline);
    if (res == ncclSuccess)
        res = ready_barrier(c, deadline);
    free(hs);
    if (res != ncclSuccess) {
        coll_free(c);
        return res;
    }
    c->magic = GIN_COLL_MAGIC;
    if (c->proxy_qps)
        INFO(NCCL_NET | NCCL_INIT, "NET/railnet/GIN: rank %d of %d connected on %s: %d QP(s) per peer (one a "
                                   "port), proxy type or RMA table",
             rank, nranks, c->dev_name, c->nports);
    else
        INFO(NCCL_NET | NCCL_INIT, "NET/railnet/GIN: rank %d of %d connected on %s: 0 QPs per peer, GDAKI type "
                                   "(NCCL's device code posts on the QPs each createContext makes; the host has no "
                                   "data path here)",
             rank, nranks, c->dev_name);
    *coll_comm = c;
    return ncclSuccess;
}

ncclResult_t gin_close_coll(void *coll_comm)
{
    if (!coll_comm)
        return ncclSuccess;
    struct gin_coll *c = gin_coll_of(coll_comm, "closeColl");
    if (!c)
        return ncclInvalidArgument;
    int n = gin_outstanding(c);
    if (n)
        INFO(NCCL_NET, "NET/railnet/GIN: rank %d: closing with %d request(s) not completed", c->rank, n);
    if (rn_config()->stats)
        stats_print_gin(c->dev_name, c->rank, c->nranks, c->stats.wrs, c->stats.signaled, c->stats.markers,
                        c->stats.cqes);
    coll_free(c);
    return ncclSuccess;
}
