/* plugin/ib/comm.c: the comm objects of a connection: their QPs, CQ,
 * connection-state memory and request pool (docs/design.md, "A
 * connection"). comm_setup.c builds them during the handshake; the data path (p2p.c, flush.c) drives them. */
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

#include "area.h"
#include "config.h"
#include "devices.h"
#include "ibvwrap.h"
#include "log.h"

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
    r->sq_need = 0;
    memset(r->phandle, 0, sizeof(r->phandle));
    memset(r->prof_ev, 0, sizeof(r->prof_ev));
    r->prof_started = 0;
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

int comm_device(const void *comm)
{
    const struct comm *c = comm;
    return c ? c->dev : -1;
}

/* --------------------------------------------------------------- comm setup */

int comm_traffic_class(const struct comm_opts *opts)
{
    int env = rn_config()->ib_tc;
    if (env >= 0)
        return env;
    return opts && opts->tc >= 0 && opts->tc <= 255 ? opts->tc : 0;
}

static void comm_params(struct qp_params *p, const struct comm_opts *opts)
{
    const struct rn_config *cfg = rn_config();
    p->timeout = cfg->ib_timeout;
    p->retry_cnt = cfg->ib_retry_cnt;
    p->tc = comm_traffic_class(opts);
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
    /* QPs first, then what they give the peer access to (the failover
     * probe and chunk-state areas): a peer's probe that reached a QP after
     * its target was deregistered would fail its comm with
     * IBV_WC_REM_ACCESS_ERR (seen when a rank closed right after its last
     * receive while the peer was taking a port back) */
    for (int i = 0; i < COMM_MAX_QPS; i++)
        qp_destroy(&c->qps[i]);
    if (c->fo_release)
        c->fo_release(c);
    if (c->cq)
        RN_IBV(destroy_cq)(c->cq);
    c->cq = NULL;
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    if (c->cm_release)
        c->cm_release(c);
    if (c->counted)
        devices_comm_close(c->dev, c->kind == COMM_SEND);
    c->counted = 0;
}

int comm_homed(const struct comm *c)
{
    return c->keep_home && devices_comms(c->dev, c->kind == COMM_SEND) >= (unsigned)c->nports;
}

/* Fills ports, makes the CQ and nqps QPs (QP i on port i % nports). */
static ncclResult_t comm_init(struct comm *c, int kind, int dev, int nqps, const struct comm_opts *opts)
{
    c->kind = kind;
    c->dev = dev;
    c->fd = -1;
    if (devices_qp_ports(dev, c->ports, &c->nports, c->dev_name, sizeof(c->dev_name)) != ncclSuccess)
        return ncclInternalError;
    c->nqps = nqps;
    const struct rn_device *d = devices_get(dev);
    c->max_chunk = d && d->max_chunk ? d->max_chunk : HS_CHUNK_MAX;
    c->stats.enabled = rn_config()->stats;
    req_pool_init(c);
    comm_params(&c->qpp, opts);
    int send = kind == COMM_SEND;
    c->qpp.max_send_wr = send ? COMM_SEND_WR_BUDGET + COMM_SEND_WR_RESERVE : COMM_SLOTS + 8;
    c->qpp.max_recv_wr = send ? 1 : COMM_RECV_POSTED;
    /* one generation of each QP's work; a recv comm also holds the flushed
     * receives of the QPs of one port that a failover rebuild replaces
     * (fo_rebuild_answer drains the CQ first, so at most one such batch) */
    int port_qps = c->nports > 0 ? (nqps + c->nports - 1) / c->nports : nqps;
    int cqe = send ? nqps * (2 * COMM_SLOTS + 8) + 64
                   : nqps * (COMM_RECV_POSTED + COMM_SLOTS + 8) + COMM_SLOTS * COMM_MAX_RECVS + 64 +
                         port_qps * COMM_RECV_POSTED;
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
    return ncclSuccess;
}

/* Connection state the peer reads or writes (CTS ring, sizes area) or the
 * NIC reads (staging): page-aligned, zeroed (area.h), registered on port
 * 0's PD. */
struct area {
    void **buf;
    struct ibv_mr **mr;
    size_t len;
    int remote;     /* the peer writes into it */
};

#define RING_BYTES (COMM_SLOTS * COMM_MAX_RECVS * sizeof(struct cts_entry))
#define SIZES_BYTES (COMM_SLOTS * COMM_MAX_RECVS * sizeof(uint32_t))

static ncclResult_t area_make(struct comm *c, const struct area *a)
{
    int fd;
    void *p = area_alloc(a->len, a->remote, &fd);
    if (!p)
        return ncclSystemError;
    *a->buf = p;
    int access = IBV_ACCESS_LOCAL_WRITE | (a->remote ? IBV_ACCESS_REMOTE_WRITE : 0);
    *a->mr = RN_IBV(reg_mr)(c->ports[0].pd, p, a->len, access);
    int err = errno;
    if (fd >= 0)
        close(fd);   /* registered: the mapping holds the memory */
    if (!*a->mr) {
        WARN("NET/railnet: device %s: ibv_reg_mr of %zu bytes for connection state failed: %s", c->dev_name,
             a->len, strerror(err));
        return ncclSystemError;
    }
    return ncclSuccess;
}

static void area_free(void *buf, struct ibv_mr *mr, size_t len)
{
    if (mr)
        RN_IBV(dereg_mr)(mr);
    area_release(buf, len);
}

/* comm_init, then the connection-state areas of that side. */
static ncclResult_t comm_build(struct comm *c, int kind, int dev, int nqps, const struct comm_opts *opts,
                               const struct area areas[2])
{
    ncclResult_t res = comm_init(c, kind, dev, nqps, opts);
    c->keep_home = devices_host_bound(dev);
    c->home = devices_next_home(dev, kind == COMM_SEND);
    /* turns start at the home QP too: NCCL drives a peer's connections
     * (2.28's two p2p channels) in step, and turns that all began on QP 0
     * put each step's whole messages on one port while the other idled */
    c->rr = c->home;
    devices_comm_open(dev, kind == COMM_SEND);
    c->counted = 1;
    for (int i = 0; i < 2 && res == ncclSuccess; i++)
        res = area_make(c, &areas[i]);
    return res;
}

void comm_send_free(struct send_comm *sc)
{
    if (!sc)
        return;
    comm_release(&sc->c);
    area_free(sc->ring, sc->ring_mr, RING_BYTES);
    area_free(sc->size_stage, sc->stage_mr, SIZES_BYTES);
    free(sc);
}

void comm_recv_free(struct recv_comm *rc)
{
    if (!rc)
        return;
    comm_release(&rc->c);
    area_free(rc->stage, rc->stage_mr, RING_BYTES);
    area_free(rc->sizes, rc->sizes_mr, SIZES_BYTES);
    free(rc);
}

ncclResult_t comm_send_create(int dev, const struct comm_opts *opts, struct send_comm **out)
{
    *out = NULL;
    struct send_comm *sc = calloc(1, sizeof(*sc));
    if (!sc)
        return ncclSystemError;
    sc->c.fd = -1;
    int nports = devices_nports(dev);
    const struct area areas[2] = {
        { (void **)&sc->ring, &sc->ring_mr, RING_BYTES, 1 },
        { (void **)&sc->size_stage, &sc->stage_mr, SIZES_BYTES, 0 },
    };
    ncclResult_t res = comm_build(&sc->c, COMM_SEND, dev, comm_default_nqps(nports > 0 ? nports : 1), opts, areas);
    if (res != ncclSuccess) {
        comm_send_free(sc);
        return res;
    }
    sc->split_min = (uint64_t)rn_config()->split_min;
    *out = sc;
    return ncclSuccess;
}

ncclResult_t comm_recv_create(int dev, int nqps, const struct comm_opts *opts, struct recv_comm **out)
{
    *out = NULL;
    struct recv_comm *rc = calloc(1, sizeof(*rc));
    if (!rc)
        return ncclSystemError;
    rc->c.fd = -1;
    const struct area areas[2] = {
        { (void **)&rc->stage, &rc->stage_mr, RING_BYTES, 0 },
        { (void **)&rc->sizes, &rc->sizes_mr, SIZES_BYTES, 1 },
    };
    ncclResult_t res = comm_build(&rc->c, COMM_RECV, dev, nqps, opts, areas);
    if (res != ncclSuccess) {
        comm_recv_free(rc);
        return res;
    }
    *out = rc;
    return ncclSuccess;
}

void comm_describe_qps(const struct comm *c, struct hs_qp_info *out)
{
    for (int i = 0; i < c->nqps; i++)
        qp_describe(&c->qps[i], &out[i]);
}

ncclResult_t comm_connect_qps(struct comm *c, const struct hs_qp_info *remote, int nqps)
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

int comm_post_recvs(struct comm *c, int qpi, int count)
{
    /* Writes with immediate consume a receive WQE; they carry no payload here. */
    struct ibv_recv_wr wr[COMM_RECV_BATCH], *bad;
    memset(wr, 0, sizeof(wr));
    for (int i = 0; i < COMM_RECV_BATCH; i++) {
        wr[i].wr_id = WR_ID_GEN(WR_RECV, c->qp_gen[qpi], qpi, 0, 0);
        wr[i].next = i + 1 < COMM_RECV_BATCH ? &wr[i + 1] : NULL;
    }
    while (count > 0) {
        int n = count < COMM_RECV_BATCH ? count : COMM_RECV_BATCH;
        struct ibv_recv_wr *head = &wr[COMM_RECV_BATCH - n];
        int rc = ibv_post_recv(c->qps[qpi].qp, head, &bad);
        if (rc)
            return rc;
        count -= n;
    }
    return 0;
}

/* -------------------------------------------------------------------- close */

static void comm_stats(const struct comm *c)
{
    stats_print(&c->stats, c->kind == COMM_SEND, c->dev_name, c->qps, c->nqps, c->ports, c->nports);
}

ncclResult_t comm_close_send(void *send_comm)
{
    struct send_comm *sc = send_comm;
    if (!sc)
        return ncclSuccess;
    comm_stats(&sc->c);
    comm_send_free(sc);
    return ncclSuccess;
}

ncclResult_t comm_close_recv(void *recv_comm)
{
    struct recv_comm *rc = recv_comm;
    if (!rc)
        return ncclSuccess;
    comm_stats(&rc->c);
    comm_recv_free(rc);
    return ncclSuccess;
}
