/* plugin/ib/flush.c: GDR flush through an RDMA READ on a loopback QP. */
#include "flush.h"

#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "ibvwrap.h"
#include "log.h"
#include "mr.h"

struct flush_ctx {
    struct qp_conn qp;
    uint64_t *buf; /* landing zone of the READs: nobody looks at it */
    struct ibv_mr *mr;
};

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
    struct qp_params p = c->qpp;
    p.max_send_wr = COMM_SLOTS * COMM_MAX_RECVS;
    p.max_recv_wr = 1;
    if (qp_create(&f->qp, &c->ports[0], c->cq, &p, err, sizeof(err))) {
        WARN("NET/railnet: device %s: flush QP: %s", c->dev_name, err);
        goto fail_sys;
    }
    struct hs_qp_info self;
    qp_describe(&f->qp, &self);
    if (qp_connect(&f->qp, &self, &p, err, sizeof(err))) {
        WARN("NET/railnet: device %s: connecting the flush QP to itself: %s", c->dev_name, err);
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
    if (f->mr)
        RN_IBV(dereg_mr)(f->mr);
    free(f->buf);
    free(f);
    rc->flush = NULL;
}

static int needs_flush(void *mh)
{
    int mode = rn_config()->gdr_flush;
    if (!mh || mode == 0)
        return 0;
    return mode == 2 || mr_is_cuda(mh);
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
        if (sizes[i] > 0 && needs_flush(mhandles[i]))
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
    struct ibv_send_wr wr[COMM_MAX_RECVS], *bad;
    struct ibv_sge sge[COMM_MAX_RECVS];
    int k = 0;
    for (int i = 0; i <= last; i++) {
        if (sizes[i] <= 0 || !needs_flush(mhandles[i]))
            continue;
        sge[k] = (struct ibv_sge){ .addr = (uint64_t)(uintptr_t)&f->buf[i], .length = 1, .lkey = f->mr->lkey };
        memset(&wr[k], 0, sizeof(wr[k]));
        wr[k].wr_id = WR_ID(WR_FLUSH, 0, r->index);
        wr[k].opcode = IBV_WR_RDMA_READ;
        wr[k].sg_list = &sge[k];
        wr[k].num_sge = 1;
        wr[k].wr.rdma.remote_addr = (uint64_t)(uintptr_t)data[i];
        wr[k].wr.rdma.rkey = mr_rkey(mhandles[i], c->ports[0].port_idx);
        if (k > 0)
            wr[k - 1].next = &wr[k];
        k++;
    }
    wr[k - 1].send_flags = IBV_SEND_SIGNALED; /* RC completes in order: the last covers all */
    r->pending = 1;
    r->n = 0;
    int err = ibv_post_send(f->qp.qp, wr, &bad);
    if (err) {
        WARN("NET/railnet: device %s port %u QP 0x%x: posting the flush READ failed: %s", c->dev_name,
             c->ports[0].port_num, f->qp.qp->qp_num, strerror(err));
        comm_req_put(r);
        comm_fail(c, ncclSystemError);
        return ncclSystemError;
    }
    *request = r;
    return ncclSuccess;
}
