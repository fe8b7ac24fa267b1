/* plugin/ib/flush.c: GDR flush through an RDMA READ on a loopback QP. */
#include "flush.h"

#include <stdlib.h>
#include <string.h>

#include "failover.h"
#include "ibvwrap.h"
#include "log.h"
#include "mr.h"

#define FLUSH_REQS (2 * COMM_SLOTS)
#define FLUSH_RETIRED 4

/* What re-posting a flush needs after its loopback QP's port failed. */
struct flush_saved {
    int n;
    uint8_t gen;                           /* of the QP it is posted on */
    uint8_t idx[COMM_MAX_RECVS];           /* landing word in buf */
    uint64_t addr[COMM_MAX_RECVS];
    uint32_t rkey[COMM_MAX_RECVS][HS_MAX_PORTS];
};

struct flush_ctx {
    struct qp_conn qp;
    const struct qp_port *port;
    uint8_t gen;                  /* of qp: completions of retired QPs carry an older one */
    struct qp_conn retired[FLUSH_RETIRED]; /* failed loopback QPs, kept until close: their
                                             * work may still complete (in error) */
    int nretired;
    struct flush_saved saved[FLUSH_REQS];
    uint64_t *buf; /* landing zone of the READs: nobody looks at it */
    struct ibv_mr *mr;
};

/* The loopback QP, on a port the connection still uses (after a failover,
 * not the failed one), connected to itself. */
static int flush_qp_make(struct comm *c, struct flush_ctx *f, char *err, size_t errlen)
{
    struct qp_params p = c->qpp;
    p.max_send_wr = COMM_SLOTS * COMM_MAX_RECVS;
    p.max_recv_wr = 1;
    int live = failover_pick_qp(c->qp_live, c->nqps, 0);
    f->port = live >= 0 ? c->qps[live].port : &c->ports[0];
    if (qp_create(&f->qp, f->port, c->cq, &p, err, errlen))
        return -1;
    struct hs_qp_info self;
    qp_describe(&f->qp, &self);
    if (qp_connect(&f->qp, &self, &p, err, errlen)) {
        qp_destroy(&f->qp);
        return -1;
    }
    return 0;
}

static ncclResult_t flush_setup(struct recv_comm *rc)
{
    struct comm *c = &rc->c;
    struct flush_ctx *f = calloc(1, sizeof(*f));
    if (!f)
        return ncclSystemError;
    char err[256];
    f->buf = calloc(COMM_MAX_RECVS, sizeof(uint64_t));
    if (!f->buf)
        goto fail_sys;
    f->mr = RN_IBV(reg_mr)(c->ports[0].pd, f->buf, COMM_MAX_RECVS * sizeof(uint64_t), IBV_ACCESS_LOCAL_WRITE);
    if (!f->mr) {
        WARN("NET/railnet: device %s: registering the flush buffer failed", c->dev_name);
        goto fail_sys;
    }
    if (flush_qp_make(c, f, err, sizeof(err))) {
        WARN("NET/railnet: device %s: flush QP: %s", c->dev_name, err);
        goto fail_sys;
    }
    rc->flush = f;
    return ncclSuccess;
fail_sys:
    qp_destroy(&f->qp);
    if (f->mr)
        RN_IBV(dereg_mr)(f->mr);
    free(f->buf);
    free(f);
    return ncclSystemError;
}

void flush_destroy(struct recv_comm *rc)
{
    struct flush_ctx *f = rc->flush;
    if (!f)
        return;
    qp_destroy(&f->qp);
    for (int i = 0; i < f->nretired; i++)
        qp_destroy(&f->retired[i]);
    if (f->mr)
        RN_IBV(dereg_mr)(f->mr);
    free(f->buf);
    free(f);
    rc->flush = NULL;
}

/* Posts the READs of flush request r on the current loopback QP; only the
 * last is signaled (RC completes in order: it covers all). */
static ncclResult_t flush_post(struct recv_comm *rc, struct request *r)
{
    struct comm *c = &rc->c;
    struct flush_ctx *f = rc->flush;
    struct flush_saved *sv = &f->saved[r->index % FLUSH_REQS];
    struct ibv_send_wr wr[COMM_MAX_RECVS], *bad;
    struct ibv_sge sge[COMM_MAX_RECVS];
    for (int k = 0; k < sv->n; k++) {
        sge[k] = (struct ibv_sge){ .addr = (uint64_t)(uintptr_t)&f->buf[sv->idx[k]], .length = 1,
                                   .lkey = f->mr->lkey };
        memset(&wr[k], 0, sizeof(wr[k]));
        /* the unsignaled ones complete only in error: not counted */
        wr[k].wr_id = WR_ID_GEN(k == sv->n - 1 ? WR_FLUSH : WR_FLUSH_PART, f->gen, 0, 0, r->index);
        wr[k].opcode = IBV_WR_RDMA_READ;
        wr[k].sg_list = &sge[k];
        wr[k].num_sge = 1;
        wr[k].wr.rdma.remote_addr = sv->addr[k];
        wr[k].wr.rdma.rkey = sv->rkey[k][f->port->port_idx];
        if (k > 0)
            wr[k - 1].next = &wr[k];
    }
    wr[sv->n - 1].send_flags = IBV_SEND_SIGNALED;
    sv->gen = f->gen;
    int err = ibv_post_send(f->qp.qp, wr, &bad);
    if (err) {
        WARN("NET/railnet: device %s port %u QP 0x%x: posting the flush READ failed: %s", c->dev_name,
             f->port->port_num, f->qp.qp->qp_num, strerror(err));
        comm_fail(c, ncclSystemError);
        return ncclSystemError;
    }
    return ncclSuccess;
}

int flush_counts(const struct recv_comm *rc, const struct ibv_wc *w)
{
    const struct flush_ctx *f = rc->flush;
    int ri = WR_REQ(w->wr_id);
    return !f || ri >= FLUSH_REQS || WR_GEN(w->wr_id) == f->saved[ri].gen;
}

int flush_failed(struct recv_comm *rc, const struct ibv_wc *w)
{
    struct comm *c = &rc->c;
    struct flush_ctx *f = rc->flush;
    int ri = WR_REQ(w->wr_id);
    if (!c->fo || !f || ri >= FLUSH_REQS || c->reqs[ri].type != REQ_FLUSH || c->reqs[ri].done)
        return 0;
    int transport = w->status == IBV_WC_RETRY_EXC_ERR || w->status == IBV_WC_WR_FLUSH_ERR;
    if (!transport)
        return 0;
    if (WR_GEN(w->wr_id) != f->saved[ri].gen)
        return 1; /* from a QP retired since: the request was posted again */
    if (WR_GEN(w->wr_id) == f->gen) {
        /* the loopback QP's port failed: retire it, make one on a live port */
        if (f->nretired == FLUSH_RETIRED) {
            qp_destroy(&f->retired[0]);
            memmove(&f->retired[0], &f->retired[1], sizeof(f->retired[0]) * (FLUSH_RETIRED - 1));
            f->nretired--;
        }
        f->retired[f->nretired++] = f->qp;
        memset(&f->qp, 0, sizeof(f->qp));
        f->gen++;
        char err[256];
        if (flush_qp_make(c, f, err, sizeof(err))) {
            WARN("NET/railnet: device %s: a new flush QP after a port failure: %s", c->dev_name, err);
            return 0;
        }
        INFO(NCCL_NET, "NET/railnet: device %s: GDR flush moved to port %u", c->dev_name, f->port->port_num);
    }
    if (WR_KIND(w->wr_id) == WR_FLUSH_PART)
        return 1; /* the request's signaled READ brings it back */
    return flush_post(rc, &c->reqs[ri]) == ncclSuccess;
}

ncclResult_t flush_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles, void **request)
{
    struct recv_comm *rc = recv_comm;
    struct comm *c = &rc->c;
    *request = NULL;
    if (c->error)
        return c->error;
    int last = -1;
    for (int i = 0; i < n && i < COMM_MAX_RECVS; i++)
        if (sizes[i] > 0 && mr_needs_gdr_flush(mhandles[i]))
            last = i;
    if (last < 0)
        return ncclSuccess;
    if (!rc->flush && flush_setup(rc) != ncclSuccess) {
        comm_fail(c, ncclSystemError);
        return ncclSystemError;
    }
    struct request *r = comm_req_get(c, REQ_FLUSH);
    if (!r)
        return ncclSuccess;
    struct flush_ctx *f = rc->flush;
    struct flush_saved *sv = &f->saved[r->index % FLUSH_REQS];
    sv->n = 0;
    for (int i = 0; i <= last; i++) {
        if (sizes[i] <= 0 || !mr_needs_gdr_flush(mhandles[i]))
            continue;
        sv->idx[sv->n] = (uint8_t)i;
        sv->addr[sv->n] = (uint64_t)(uintptr_t)data[i];
        for (int p = 0; p < c->nports && p < HS_MAX_PORTS; p++)
            sv->rkey[sv->n][p] = mr_rkey(mhandles[i], p);
        sv->n++;
    }
    r->pending = 1;
    r->n = 0;
    if (flush_post(rc, r) != ncclSuccess) {
        comm_req_put(r);
        return ncclSystemError;
    }
    *request = r;
    return ncclSuccess;
}
