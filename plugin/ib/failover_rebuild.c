/* plugin/ib/failover_rebuild.c: taking a failed port back (failover.h,
 * "Recovery"): new QPs, their numbers over the socket, a probe each. */
#include "failover_int.h"

#include <stdio.h>
#include <string.h>

#include "errors.h"
#include "ibvwrap.h"
#include "log.h"
#include "p2p.h"

/* ------------------------------------------------------------------ recovery */

/* Replaces QP i by a new one on the same port, in INIT; bumps its
 * generation so that the old one's completions are ignored. */
static int qp_renew(struct comm *c, int i)
{
    const struct qp_port *port = c->qps[i].port;
    qp_destroy(&c->qps[i]);
    c->qp_gen[i]++;
    char err[256];
    if (qp_create(&c->qps[i], port, c->cq, &c->qpp, err, sizeof(err))) {
        WARN("NET/railnet: device %s: rebuilding a QP on port %u: %s", c->dev_name, port->port_num, err);
        c->qps[i].port = port;
        return -1;
    }
    if (c->kind == COMM_RECV) {
        struct recv_comm *rc = (struct recv_comm *)c;
        rc->cts_unpolled[i] = 0;
        rc->cts_unsignaled[i] = 0;
        rc->recv_consumed[i] = 0;
    }
    return 0;
}

void fo_rebuild_start(struct fo_comm *f)
{
    struct comm *c = f->c;
    f->rb_want = 0;
    uint32_t mask = 0;
    for (int p = 0; p < c->nports; p++)
        if (!(f->port_down & (1u << p)))
            mask |= f->dead & fo_port_qps(c, p);
    if (!mask)
        return;
    uint8_t m[16 + COMM_MAX_QPS * FO_QP_INFO];
    size_t len = 16;
    for (int i = 0; i < c->nqps; i++) {
        if (!(mask & (1u << i)))
            continue;
        if (qp_renew(c, i))
            return; /* stays dead; tried again on the next PORT_ACTIVE */
        fo_put_qp_info(m + len, &c->qps[i]);
        len += FO_QP_INFO;
    }
    f->rb_id++;
    f->rb_mask = mask;
    put32(m, f->rb_id);
    put32(m + 4, mask);
    put64(m + 8, 0);
    fo_send(f, FO_REBUILD_REQ, m, len);
    f->rb_stage = RB_WAIT_REP;
}

static int connect_new(struct comm *c, uint32_t mask, const uint8_t *infos)
{
    char err[256];
    const uint8_t *p = infos;
    for (int i = 0; i < c->nqps; i++) {
        if (!(mask & (1u << i)))
            continue;
        struct hs_qp_info ri;
        if (!fo_get_qp_info(p, &ri)) {
            WARN("NET/railnet: device %s: the peer's rebuilt QP %d is described with out-of-range fields",
                 c->dev_name, i);
            comm_fail(c, ncclRemoteError);
            return -1;
        }
        p += FO_QP_INFO;
        if (qp_connect(&c->qps[i], &ri, &c->qpp, err, sizeof(err))) {
            WARN("NET/railnet: device %s port %u: reconnecting a rebuilt QP: %s", c->dev_name,
                 c->qps[i].port->port_num, err);
            return -1;
        }
    }
    return 0;
}

/* recv side: the sender's new QPs; ours replace the dead ones */
void fo_rebuild_answer(struct fo_comm *f, uint32_t id, uint32_t mask, const uint8_t *infos)
{
    struct comm *c = f->c;
    /* The CQ holds one generation of each QP's work (comm.c sizes it so):
     * replacing a QP flushes its COMM_RECV_POSTED receives into the CQ
     * (qp_destroy moves it to ERR), and they must leave before the next
     * replacement flushes its successor's. A sender whose port failed
     * again before we answered sends another REBUILD_REQ; several, read
     * at once by a receiver that was not scheduled, each flushed a
     * generation: the CQ overran (port 2 flapping every 50 ms,
     * failover.sh) and the receive completions it dropped were chunks
     * the sender had seen land: a hang. */
    p2p_poll(c);
    if (c->error)
        return;
    uint8_t m[16 + COMM_MAX_QPS * FO_QP_INFO];
    uint32_t ok_ports = 0;
    for (int p = 0; p < c->nports; p++)
        if (!(f->port_down & (1u << p)))
            ok_ports |= fo_port_qps(c, p);
    if (mask & ~(f->dead & ok_ports)) {
        put32(m, id);
        put32(m + 4, 0);
        fo_send(f, FO_REBUILD_NAK, m, 8);
        return;
    }
    size_t len = 24;
    for (int i = 0; i < c->nqps; i++) {
        if (!(mask & (1u << i)))
            continue;
        if (qp_renew(c, i))
            goto nak;
    }
    if (connect_new(c, mask, infos))
        goto nak;
    for (int i = 0; i < c->nqps; i++) {
        if (!(mask & (1u << i)))
            continue;
        c->qp_dead &= ~(1u << i); /* receives count from now on */
        int e = comm_post_recvs(c, i, COMM_RECV_POSTED);
        if (e) {
            WARN("NET/railnet: device %s QP 0x%x: posting %d receives on a rebuilt QP failed: %s", c->dev_name,
                 c->qps[i].qp->qp_num, COMM_RECV_POSTED, strerror(e));
            comm_fail(c, ncclSystemError);
            return;
        }
        fo_put_qp_info(m + len, &c->qps[i]);
        len += FO_QP_INFO;
    }
    put32(m, id);
    put32(m + 4, mask);
    put64(m + 8, (uint64_t)(uintptr_t)f->probe);
    put32(m + 16, f->probe_mr->rkey);
    put32(m + 20, 0);
    fo_send(f, FO_REBUILD_REP, m, len);
    f->rb_stage = RB_WAIT_OK;
    f->rb_id = id;
    f->rb_mask = mask;
    return;
nak:
    c->qp_dead |= mask;
    for (int i = 0; i < c->nqps; i++)
        if (mask & (1u << i))
            fo_qp_to_err(&c->qps[i]);
    put32(m, id);
    put32(m + 4, 0);
    fo_send(f, FO_REBUILD_NAK, m, 8);
}

/* send side: the receiver's new QPs: connect ours and probe each */
void fo_rebuild_connect(struct fo_comm *f, const uint8_t *m, size_t len)
{
    struct comm *c = f->c;
    uint32_t mask = get32(m + 4);
    if (mask != f->rb_mask || len != 24 + (size_t)__builtin_popcount(mask) * FO_QP_INFO) {
        WARN("NET/railnet: device %s: the peer answered a rebuild of QPs 0x%x with QPs 0x%x (%zu bytes)",
             c->dev_name, f->rb_mask, mask, len);
        comm_fail(c, ncclRemoteError);
        return;
    }
    f->probe_raddr = get64(m + 8);
    f->probe_rkey = get32(m + 16);
    if (connect_new(c, mask, m + 24)) {
        f->rb_stage = RB_NONE;
        for (int i = 0; i < c->nqps; i++)
            if (mask & (1u << i))
                fo_qp_to_err(&c->qps[i]);
        uint8_t d[4];
        put32(d, f->dead);
        fo_send(f, FO_DOWN, d, sizeof(d));
        return;
    }
    f->probe_left = mask;
    f->rb_stage = RB_PROBING;
    for (int i = 0; i < c->nqps; i++) {
        if (!(mask & (1u << i)))
            continue;
        struct qp_conn *q = &c->qps[i];
        *f->probe = ((uint64_t)f->rb_id << 32) | (uint64_t)i;
        struct ibv_sge sge = { .addr = (uint64_t)(uintptr_t)f->probe, .length = sizeof(*f->probe),
                               .lkey = f->probe_mr->lkey };
        struct ibv_send_wr wr, *bad;
        memset(&wr, 0, sizeof(wr));
        wr.wr_id = WR_ID_GEN(WR_PROBE, c->qp_gen[i], i, 0, 0);
        wr.opcode = IBV_WR_RDMA_WRITE;
        wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
        if (q->max_inline < sizeof(*f->probe))
            wr.send_flags = IBV_SEND_SIGNALED;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.wr.rdma.remote_addr = f->probe_raddr;
        wr.wr.rdma.rkey = f->probe_rkey;
        if (ibv_post_send(q->qp, &wr, &bad)) {
            f->probe_left &= ~(1u << i);
            failover_probe_done(c, i, -1);
            return;
        }
    }
}

void failover_probe_done(struct comm *c, int qpi, int status)
{
    struct fo_comm *f = c->fo;
    if (!f || f->rb_stage != RB_PROBING || !(f->rb_mask & (1u << qpi)))
        return;
    if (status != IBV_WC_SUCCESS) {
        /* the port is not usable after all: dead until its next PORT_ACTIVE */
        INFO(NCCL_NET, "NET/railnet: device %s: send comm #%d with %s: the probe on rebuilt QP %d failed (%s); "
                       "port %u stays out of use until it comes back again",
             c->dev_name, f->id, f->peer, qpi,
             status < 0 ? "not posted" : errors_wc_status_name((enum ibv_wc_status)status),
             c->qps[qpi].port->port_num);
        f->rb_stage = RB_NONE;
        for (int i = 0; i < c->nqps; i++)
            if (f->rb_mask & (1u << i))
                fo_qp_to_err(&c->qps[i]);
        uint8_t d[4];
        put32(d, f->dead);
        fo_send(f, FO_DOWN, d, sizeof(d));
        return;
    }
    f->probe_left &= ~(1u << qpi);
    if (f->probe_left)
        return;
    uint32_t mask = f->rb_mask;
    f->dead &= ~mask;
    c->qp_dead &= ~mask;
    c->qp_live |= mask;
    for (int i = 0; i < c->nqps; i++)
        if (mask & (1u << i))
            f->cover[i] = 0;
    f->rb_stage = RB_NONE;
    uint8_t m[8];
    put32(m, f->rb_id);
    put32(m + 4, mask);
    fo_send(f, FO_PROBE_OK, m, sizeof(m));
    INFO(NCCL_NET, "NET/railnet: device %s: send comm #%d with %s: %d QP(s) rebuilt and probed; traffic over "
                   "all %d ports again",
         c->dev_name, f->id, f->peer, __builtin_popcount(mask), c->nports);
    fo_stats_moment(f, "at a port recovery");
}

void fo_probe_ok(struct fo_comm *f, uint32_t id, uint32_t mask)
{
    struct comm *c = f->c;
    if (f->rb_stage != RB_WAIT_OK || id != f->rb_id || mask != f->rb_mask)
        return; /* a rebuild that a later failure cancelled */
    f->dead &= ~mask;
    c->qp_live |= mask;
    f->rb_stage = RB_NONE;
    INFO(NCCL_NET, "NET/railnet: device %s: recv comm #%d with %s: %d QP(s) rebuilt; traffic over all %d ports "
                   "again",
         c->dev_name, f->id, f->peer, __builtin_popcount(mask), c->nports);
}

