/* tests/softnic/test_softnic_verbs_ex.c: the extended verbs on softnic:
 * ibv_create_qp_ex with send ops and the ibv_wr_* builder, each op
 * byte-checked against its ibv_post_send twin on the same QP (target
 * bytes, fetched bytes, received bytes and both completions); the
 * extended CQ's polled fields against ibv_poll_cq's; wr_abort posting
 * nothing; misuse reported by wr_complete; ibv_rereg_mr changing access
 * and translation under the same rkey. */
#include "sntest.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#define WAIT_MS 10000
#define QP_ACCESS (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)
#define MR_ALL (IBV_ACCESS_LOCAL_WRITE | QP_ACCESS)
#define ALL_OPS (IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | \
                 IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ | \
                 IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)
#define SLOT 4096

static const struct st_qp_opts opts = { .access = QP_ACCESS, .max_send_wr = 64,
                                        .max_inline = 256 };

/* An extended RC QP (send CQ extended too) in q, connected to a plain peer. */
struct ex_pair {
    struct st_qp a, b;
    struct ibv_qp_ex *x;
    struct ibv_cq_ex *scq_ex;
};

static void ex_pair_open(struct st_dev *d, struct ex_pair *p, uint64_t ops)
{
    memset(p, 0, sizeof(*p));
    p->a.o = opts;
    struct ibv_cq_init_attr_ex ca = { .cqe = 256, .wc_flags = IBV_WC_STANDARD_FLAGS };
    p->scq_ex = ibv_create_cq_ex(d->ctx, &ca);
    EXPECT_TRUE(p->scq_ex != NULL);
    p->a.scq = ibv_cq_ex_to_cq(p->scq_ex);
    p->a.rcq = ibv_create_cq(d->ctx, 256, NULL, NULL, 0);
    struct ibv_qp_init_attr_ex ia = {
        .send_cq = p->a.scq, .recv_cq = p->a.rcq, .qp_type = IBV_QPT_RC,
        .cap = { .max_send_wr = 64, .max_recv_wr = 64, .max_send_sge = 4, .max_recv_sge = 4,
                 .max_inline_data = 256 },
        .comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
        .pd = d->pd, .send_ops_flags = ops,
    };
    p->a.qp = ibv_create_qp_ex(d->ctx, &ia);
    if (!p->a.qp)
        tap_fail_at(__FILE__, __LINE__, "ibv_create_qp_ex: %s", strerror(errno));
    p->x = ibv_qp_to_qp_ex(p->a.qp);
    EXPECT_TRUE(p->x != NULL);
    st_qp_create(d, &p->b, &opts, 256);
    struct st_qp_info ia_, ib_;
    st_qp_info(d, &p->a, &ia_);
    st_qp_info(d, &p->b, &ib_);
    st_qp_connect(&p->a, &ib_);
    st_qp_connect(&p->b, &ia_);
}

static void ex_pair_close(struct ex_pair *p)
{
    st_qp_destroy(&p->a);
    st_qp_destroy(&p->b);
}

/* One completion of the extended CQ, through start_poll/end_poll, copied
 * into an ibv_wc so it can be compared with ibv_poll_cq's. */
static void ex_wait(struct ibv_cq_ex *cq, struct ibv_wc *wc)
{
    uint64_t end = st_now_ms() + WAIT_MS;
    struct ibv_poll_cq_attr pa = { .comp_mask = 0 };
    int rc;
    /* between polls the NIC threads get the CPU, as st_wait_wc gives it
     * them: under valgrind, which runs one thread at a time, a poll loop
     * that never sleeps left them no time and no completion came */
    while ((rc = ibv_start_poll(cq, &pa)) == ENOENT) {
        if (st_now_ms() > end)
            tap_fail_at(__FILE__, __LINE__, "no completion on the extended CQ");
        usleep(200);
    }
    EXPECT_EQ_INT(0, rc);
    memset(wc, 0, sizeof(*wc));
    wc->wr_id = cq->wr_id;
    wc->status = cq->status;
    wc->opcode = ibv_wc_read_opcode(cq);
    wc->byte_len = ibv_wc_read_byte_len(cq);
    wc->qp_num = ibv_wc_read_qp_num(cq);
    wc->wc_flags = ibv_wc_read_wc_flags(cq);
    wc->vendor_err = ibv_wc_read_vendor_err(cq);
    if (wc->wc_flags & IBV_WC_WITH_IMM)
        wc->imm_data = ibv_wc_read_imm_data(cq);
    ibv_end_poll(cq);
}

static void expect_same_wc(const struct ibv_wc *twin, const struct ibv_wc *ex, uint64_t twin_id,
                           uint64_t ex_id)
{
    EXPECT_EQ_U64(twin_id, twin->wr_id);
    EXPECT_EQ_U64(ex_id, ex->wr_id);
    EXPECT_EQ_INT(IBV_WC_SUCCESS, twin->status);
    EXPECT_EQ_INT(twin->status, ex->status);
    EXPECT_EQ_INT(twin->opcode, ex->opcode);
    EXPECT_EQ_INT(twin->byte_len, ex->byte_len);
    EXPECT_EQ_INT(twin->qp_num, ex->qp_num);
    EXPECT_EQ_INT(twin->wc_flags, ex->wc_flags);
}

enum ex_op { OP_WRITE, OP_WRITE_IMM, OP_SEND, OP_SEND_IMM, OP_READ, OP_FA, OP_CS,
             OP_WRITE_INLINE, OP_SEND_INLINE_LIST, OP_WRITE_SGE_LIST, OP_COUNT };
static const char *const op_name[OP_COUNT] = {
    "rdma_write", "rdma_write_imm", "send", "send_imm", "rdma_read", "atomic_fetch_add",
    "atomic_cmp_swp", "rdma_write+inline", "send+inline_list", "rdma_write+sge_list",
};

/* Runs op once through ibv_post_send (twin = 0) or the builder (twin = 1):
 * the local side is slot `twin` of lbuf, the remote side slot `twin` of
 * rbuf, so the two runs touch disjoint bytes that start out equal. */
static void run_op(struct ex_pair *p, enum ex_op op, int twin, char *lbuf, struct ibv_mr *lmr,
                   char *rbuf, struct ibv_mr *rmr, uint64_t wr_id)
{
    char *l = lbuf + twin * SLOT;
    uint64_t r = (uint64_t)(uintptr_t)(rbuf + twin * SLOT);
    const uint32_t len = 1000, imm = htobe32(0xabc00 + (uint32_t)op);
    struct ibv_sge sg[2] = { { (uintptr_t)l, len, lmr->lkey },
                             { (uintptr_t)(l + 2048), 300, lmr->lkey } };
    bool atomic = op == OP_FA || op == OP_CS;
    if (atomic)
        sg[0].length = 8;
    if (op == OP_WRITE_IMM || op == OP_SEND || op == OP_SEND_IMM || op == OP_SEND_INLINE_LIST)
        st_post_recv(p->b.qp, wr_id, rbuf + twin * SLOT, SLOT, rmr->lkey);
    if (twin == 0) {
        struct ibv_send_wr wr = { .wr_id = wr_id, .sg_list = sg, .num_sge = 1,
                                  .send_flags = IBV_SEND_SIGNALED }, *bad = NULL;
        wr.wr.rdma.remote_addr = r;
        wr.wr.rdma.rkey = rmr->rkey;
        switch (op) {
        case OP_WRITE: wr.opcode = IBV_WR_RDMA_WRITE; break;
        case OP_WRITE_IMM: wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM; wr.imm_data = imm; break;
        case OP_SEND: wr.opcode = IBV_WR_SEND; break;
        case OP_SEND_IMM: wr.opcode = IBV_WR_SEND_WITH_IMM; wr.imm_data = imm; break;
        case OP_READ: wr.opcode = IBV_WR_RDMA_READ; break;
        case OP_FA:
        case OP_CS:
            wr.opcode = op == OP_FA ? IBV_WR_ATOMIC_FETCH_AND_ADD : IBV_WR_ATOMIC_CMP_AND_SWP;
            wr.wr.atomic.remote_addr = r;
            wr.wr.atomic.rkey = rmr->rkey;
            wr.wr.atomic.compare_add = op == OP_FA ? 0x1234 : *(uint64_t *)(rbuf + twin * SLOT);
            wr.wr.atomic.swap = 0x5555aaaa5555aaaaull;
            break;
        case OP_WRITE_INLINE: wr.opcode = IBV_WR_RDMA_WRITE; wr.send_flags |= IBV_SEND_INLINE;
                              sg[0].length = 200; break;
        case OP_SEND_INLINE_LIST: wr.opcode = IBV_WR_SEND; wr.send_flags |= IBV_SEND_INLINE;
                                  sg[0].length = 100; sg[1].length = 50; wr.num_sge = 2; break;
        case OP_WRITE_SGE_LIST: wr.opcode = IBV_WR_RDMA_WRITE; wr.num_sge = 2; break;
        default: break;
        }
        EXPECT_EQ_INT(0, ibv_post_send(p->a.qp, &wr, &bad));
        return;
    }
    struct ibv_qp_ex *x = p->x;
    ibv_wr_start(x);
    x->wr_id = wr_id;
    x->wr_flags = IBV_SEND_SIGNALED;
    switch (op) {
    case OP_WRITE: ibv_wr_rdma_write(x, rmr->rkey, r); break;
    case OP_WRITE_IMM: ibv_wr_rdma_write_imm(x, rmr->rkey, r, imm); break;
    case OP_SEND: ibv_wr_send(x); break;
    case OP_SEND_IMM: ibv_wr_send_imm(x, imm); break;
    case OP_READ: ibv_wr_rdma_read(x, rmr->rkey, r); break;
    case OP_FA: ibv_wr_atomic_fetch_add(x, rmr->rkey, r, 0x1234); break;
    case OP_CS: ibv_wr_atomic_cmp_swp(x, rmr->rkey, r, *(uint64_t *)(rbuf + twin * SLOT),
                                      0x5555aaaa5555aaaaull); break;
    case OP_WRITE_INLINE: ibv_wr_rdma_write(x, rmr->rkey, r); break;
    case OP_SEND_INLINE_LIST: ibv_wr_send(x); break;
    case OP_WRITE_SGE_LIST: ibv_wr_rdma_write(x, rmr->rkey, r); break;
    default: break;
    }
    if (op == OP_WRITE_INLINE) {
        /* copied at the call: scribbling on the buffer afterwards is harmless */
        char tmp[200];
        memcpy(tmp, l, sizeof(tmp));
        ibv_wr_set_inline_data(x, tmp, sizeof(tmp));
        memset(tmp, 0, sizeof(tmp));
    } else if (op == OP_SEND_INLINE_LIST) {
        struct ibv_data_buf b[2] = { { l, 100 }, { l + 2048, 50 } };
        ibv_wr_set_inline_data_list(x, 2, b);
    } else if (op == OP_WRITE_SGE_LIST) {
        ibv_wr_set_sge_list(x, 2, sg);
    } else {
        ibv_wr_set_sge(x, sg[0].lkey, sg[0].addr, sg[0].length);
    }
    EXPECT_EQ_INT(0, ibv_wr_complete(x));
}

TAP_CASE(test_every_wr_op_matches_its_post_send_twin)
{
    struct st_dev d;
    st_dev_open(&d);
    struct ex_pair p;
    ex_pair_open(&d, &p, ALL_OPS);
    char *lbuf = st_buf(2 * SLOT, 0), *rbuf = st_buf(2 * SLOT, 0);
    struct ibv_mr *lmr = ibv_reg_mr(d.pd, lbuf, 2 * SLOT, MR_ALL);
    struct ibv_mr *rmr = ibv_reg_mr(d.pd, rbuf, 2 * SLOT, MR_ALL);
    EXPECT_TRUE(lmr && rmr);
    for (int op = 0; op < OP_COUNT; op++) {
        tap_diag("op %s", op_name[op]);
        /* both slots of both sides start equal, and local != remote */
        st_fill(lbuf, SLOT, 100 + (unsigned)op);
        memcpy(lbuf + SLOT, lbuf, SLOT);
        st_fill(rbuf, SLOT, 200 + (unsigned)op);
        memcpy(rbuf + SLOT, rbuf, SLOT);
        struct ibv_wc tw, xw, trw, xrw;
        uint64_t id = 1000 + (uint64_t)op * 2;
        run_op(&p, (enum ex_op)op, 0, lbuf, lmr, rbuf, rmr, id);
        st_wait_wc(p.a.scq, &tw, WAIT_MS);
        run_op(&p, (enum ex_op)op, 1, lbuf, lmr, rbuf, rmr, id + 1);
        ex_wait(p.scq_ex, &xw);
        expect_same_wc(&tw, &xw, id, id + 1);
        if (op == OP_WRITE_IMM || op == OP_SEND || op == OP_SEND_IMM ||
            op == OP_SEND_INLINE_LIST) {
            st_wait_wc(p.b.rcq, &trw, WAIT_MS);
            st_wait_wc(p.b.rcq, &xrw, WAIT_MS);
            EXPECT_EQ_INT(IBV_WC_SUCCESS, trw.status);
            EXPECT_EQ_INT(trw.status, xrw.status);
            EXPECT_EQ_INT(trw.opcode, xrw.opcode);
            EXPECT_EQ_INT(trw.byte_len, xrw.byte_len);
            EXPECT_EQ_INT(trw.wc_flags, xrw.wc_flags);
            EXPECT_EQ_INT(trw.imm_data, xrw.imm_data);
        }
        /* the twin slots are byte-identical on both sides, and the op did
         * something (the slot differs from the pattern it started with) */
        if (memcmp(lbuf, lbuf + SLOT, SLOT) || memcmp(rbuf, rbuf + SLOT, SLOT))
            tap_fail_at(__FILE__, __LINE__, "%s: ibv_wr_* and ibv_post_send bytes differ",
                        op_name[op]);
        char *pristine = st_buf(SLOT, 0);
        st_fill(pristine, SLOT, op == OP_READ || op == OP_FA || op == OP_CS
                                    ? 100 + (unsigned)op : 200 + (unsigned)op);
        const char *changed = op == OP_READ || op == OP_FA || op == OP_CS ? lbuf : rbuf;
        EXPECT_TRUE(memcmp(changed, pristine, SLOT) != 0);
        munmap(pristine, SLOT);
    }
    EXPECT_EQ_INT(0, ibv_dereg_mr(lmr));
    EXPECT_EQ_INT(0, ibv_dereg_mr(rmr));
    ex_pair_close(&p);
    st_dev_close(&d);
}

TAP_CASE(test_wr_abort_posts_nothing_and_the_next_batch_runs)
{
    struct st_dev d;
    st_dev_open(&d);
    struct ex_pair p;
    ex_pair_open(&d, &p, ALL_OPS);
    char *l = st_buf(SLOT, 1), *r = st_buf(SLOT, 2), *orig = st_buf(SLOT, 2);
    struct ibv_mr *lmr = ibv_reg_mr(d.pd, l, SLOT, MR_ALL), *rmr = ibv_reg_mr(d.pd, r, SLOT, MR_ALL);
    ibv_wr_start(p.x);
    p.x->wr_id = 7;
    p.x->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_rdma_write(p.x, rmr->rkey, (uintptr_t)r);
    ibv_wr_set_sge(p.x, lmr->lkey, (uintptr_t)l, SLOT);
    ibv_wr_abort(p.x);
    EXPECT_TRUE(st_no_wc(p.a.scq, 300));
    EXPECT_TRUE(memcmp(r, orig, SLOT) == 0);
    /* a second wr_start (a misuse) starts the batch over: no deadlock */
    ibv_wr_start(p.x);
    ibv_wr_rdma_write(p.x, rmr->rkey, (uintptr_t)r);
    ibv_wr_set_sge(p.x, lmr->lkey, (uintptr_t)l, SLOT);
    ibv_wr_start(p.x);
    EXPECT_EQ_INT(0, ibv_wr_complete(p.x));
    EXPECT_TRUE(st_no_wc(p.a.scq, 100));
    EXPECT_TRUE(memcmp(r, orig, SLOT) == 0);
    /* an empty batch completes with nothing posted */
    ibv_wr_start(p.x);
    EXPECT_EQ_INT(0, ibv_wr_complete(p.x));
    EXPECT_TRUE(st_no_wc(p.a.scq, 100));
    /* the QP is usable: a batch of 8 signalled writes completes in order */
    ibv_wr_start(p.x);
    for (int i = 0; i < 8; i++) {
        p.x->wr_id = 100 + (uint64_t)i;
        p.x->wr_flags = IBV_SEND_SIGNALED;
        ibv_wr_rdma_write(p.x, rmr->rkey, (uintptr_t)r + (uint64_t)i * 512);
        ibv_wr_set_sge(p.x, lmr->lkey, (uintptr_t)l + (uint64_t)i * 512, 512);
    }
    EXPECT_EQ_INT(0, ibv_wr_complete(p.x));
    for (int i = 0; i < 8; i++) {
        struct ibv_wc wc;
        ex_wait(p.scq_ex, &wc);
        EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 100 + (uint64_t)i);
    }
    EXPECT_TRUE(memcmp(r, l, SLOT) == 0);
    ibv_dereg_mr(lmr);
    ibv_dereg_mr(rmr);
    munmap(orig, SLOT);
    ex_pair_close(&p);
    st_dev_close(&d);
}

TAP_CASE(test_misuse_is_reported_by_wr_complete_and_posts_nothing)
{
    struct st_dev d;
    st_dev_open(&d);
    struct ex_pair p;
    ex_pair_open(&d, &p, IBV_QP_EX_WITH_RDMA_WRITE);
    char *l = st_buf(SLOT, 1), *r = st_buf(SLOT, 2), *orig = st_buf(SLOT, 2);
    struct ibv_mr *lmr = ibv_reg_mr(d.pd, l, SLOT, MR_ALL), *rmr = ibv_reg_mr(d.pd, r, SLOT, MR_ALL);
    /* a write, then an op the QP was not created for: the whole batch fails */
    ibv_wr_start(p.x);
    p.x->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_rdma_write(p.x, rmr->rkey, (uintptr_t)r);
    ibv_wr_set_sge(p.x, lmr->lkey, (uintptr_t)l, 64);
    ibv_wr_send(p.x);
    ibv_wr_set_sge(p.x, lmr->lkey, (uintptr_t)l, 64);
    EXPECT_EQ_INT(EINVAL, ibv_wr_complete(p.x));
    /* inline data beyond max_inline_data */
    ibv_wr_start(p.x);
    ibv_wr_rdma_write(p.x, rmr->rkey, (uintptr_t)r);
    ibv_wr_set_inline_data(p.x, l, 1024);
    EXPECT_EQ_INT(EINVAL, ibv_wr_complete(p.x));
    /* more WRs than the send queue holds */
    struct ibv_qp_attr qa;
    struct ibv_qp_init_attr qia;
    EXPECT_EQ_INT(0, ibv_query_qp(p.a.qp, &qa, IBV_QP_CAP, &qia));
    ibv_wr_start(p.x);
    for (uint32_t i = 0; i <= qia.cap.max_send_wr; i++) {
        ibv_wr_rdma_write(p.x, rmr->rkey, (uintptr_t)r);
        ibv_wr_set_sge(p.x, lmr->lkey, (uintptr_t)l, 8);
    }
    EXPECT_EQ_INT(ENOMEM, ibv_wr_complete(p.x));
    EXPECT_TRUE(st_no_wc(p.a.scq, 300));
    EXPECT_TRUE(memcmp(r, orig, SLOT) == 0);
    ibv_dereg_mr(lmr);
    ibv_dereg_mr(rmr);
    munmap(orig, SLOT);
    ex_pair_close(&p);
    st_dev_close(&d);
}

TAP_CASE(test_qp_to_qp_ex_and_refused_send_ops)
{
    struct st_dev d;
    st_dev_open(&d);
    struct st_qp q;
    st_qp_create(&d, &q, NULL, 16);
    errno = 0;
    EXPECT_TRUE(ibv_qp_to_qp_ex(q.qp) == NULL);
    struct ibv_qp_init_attr_ex ia = {
        .send_cq = q.scq, .recv_cq = q.rcq, .qp_type = IBV_QPT_RC,
        .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
        .comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
        .pd = d.pd, .send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_BIND_MW,
    };
    errno = 0;
    EXPECT_TRUE(ibv_create_qp_ex(d.ctx, &ia) == NULL);
    EXPECT_EQ_INT(EOPNOTSUPP, errno);
    ia.send_ops_flags = IBV_QP_EX_WITH_SEND;
    struct ibv_qp *qp = ibv_create_qp_ex(d.ctx, &ia);
    EXPECT_TRUE(qp != NULL);
    struct ibv_qp_ex *x = ibv_qp_to_qp_ex(qp);
    EXPECT_TRUE(x != NULL && &x->qp_base == qp);
    EXPECT_EQ_INT(0, ibv_destroy_qp(qp));
    st_qp_destroy(&q);
    st_dev_close(&d);
}

TAP_CASE(test_cq_ex_receive_fields_match_poll_cq)
{
    struct st_dev d;
    st_dev_open(&d);
    struct st_qp a, b;
    st_qp_create(&d, &a, &opts, 64);
    /* b: plain QP whose receive CQ is an extended one */
    b.o = opts;
    struct ibv_cq_init_attr_ex ca = { .cqe = 64, .wc_flags = IBV_WC_STANDARD_FLAGS };
    struct ibv_cq_ex *rx = ibv_create_cq_ex(d.ctx, &ca);
    EXPECT_TRUE(rx != NULL);
    b.rcq = ibv_cq_ex_to_cq(rx);
    b.scq = ibv_create_cq(d.ctx, 64, NULL, NULL, 0);
    struct ibv_qp_init_attr ia = { .send_cq = b.scq, .recv_cq = b.rcq, .qp_type = IBV_QPT_RC,
                                   .cap = { .max_send_wr = 8, .max_recv_wr = 8,
                                            .max_send_sge = 1, .max_recv_sge = 1 } };
    b.qp = ibv_create_qp(d.pd, &ia);
    EXPECT_TRUE(b.qp != NULL);
    struct st_qp_info ai, bi;
    st_qp_info(&d, &a, &ai);
    st_qp_info(&d, &b, &bi);
    st_qp_connect(&a, &bi);
    st_qp_connect(&b, &ai);
    char *s = st_buf(SLOT, 3), *rbuf = st_buf(2 * SLOT, 4);
    struct ibv_mr *smr = ibv_reg_mr(d.pd, s, SLOT, MR_ALL);
    struct ibv_mr *rmr = ibv_reg_mr(d.pd, rbuf, 2 * SLOT, MR_ALL);
    st_post_recv(b.qp, 1, rbuf, SLOT, rmr->lkey);
    st_post_recv(b.qp, 2, rbuf + SLOT, SLOT, rmr->lkey);
    struct ibv_poll_cq_attr pa = { .comp_mask = 0 };
    EXPECT_EQ_INT(ENOENT, ibv_start_poll(rx, &pa));   /* empty: no poll is open */
    for (int i = 0; i < 2; i++)
        st_post_rdma(a.qp, IBV_WR_SEND_WITH_IMM, 10 + (uint64_t)i, s, 777, smr->lkey, 0, 0,
                     htobe32(0x77), IBV_SEND_SIGNALED);
    struct ibv_wc pw, xw;
    st_wait_wc(b.rcq, &pw, WAIT_MS);     /* the first through ibv_poll_cq */
    ex_wait(rx, &xw);                    /* the second through start_poll */
    /* a third and fourth: start_poll takes one, next_poll the other, then ENOENT */
    st_post_recv(b.qp, 3, rbuf, SLOT, rmr->lkey);
    st_post_recv(b.qp, 4, rbuf + SLOT, SLOT, rmr->lkey);
    for (int i = 0; i < 2; i++)
        st_post_rdma(a.qp, IBV_WR_SEND, 20 + (uint64_t)i, s, 10, smr->lkey, 0, 0, 0,
                     IBV_SEND_SIGNALED);
    struct ibv_wc sw;
    st_wait_wc(a.scq, &sw, WAIT_MS);
    st_wait_wc(a.scq, &sw, WAIT_MS);
    st_wait_wc(a.scq, &sw, WAIT_MS);
    st_wait_wc(a.scq, &sw, WAIT_MS);
    EXPECT_EQ_U64(21, sw.wr_id);          /* both sends acknowledged: both placed */
    /* The receiver's completions appear just after the ACK that covers
     * them (responder.c: an ACK never waits on the receiver's CQ), as on a
     * NIC, so each poll may find its entry a moment later; an empty poll
     * takes nothing, and the next one tries again. */
    int r;
    uint64_t end = st_now_ms() + WAIT_MS;
    while ((r = ibv_start_poll(rx, &pa)) == ENOENT && st_now_ms() < end)
        ;
    EXPECT_EQ_INT(0, r);
    EXPECT_EQ_U64(3, rx->wr_id);
    while ((r = ibv_next_poll(rx)) == ENOENT && st_now_ms() < end)
        ;
    EXPECT_EQ_INT(0, r);
    EXPECT_EQ_U64(4, rx->wr_id);
    EXPECT_EQ_INT(IBV_WC_RECV, ibv_wc_read_opcode(rx));
    EXPECT_EQ_INT(10, ibv_wc_read_byte_len(rx));
    EXPECT_EQ_INT(ENOENT, ibv_next_poll(rx));
    ibv_end_poll(rx);
    EXPECT_EQ_U64(1, pw.wr_id);
    EXPECT_EQ_U64(2, xw.wr_id);
    EXPECT_EQ_INT(IBV_WC_SUCCESS, xw.status);
    EXPECT_EQ_INT(pw.opcode, xw.opcode);
    EXPECT_EQ_INT(777, xw.byte_len);
    EXPECT_EQ_INT(pw.byte_len, xw.byte_len);
    EXPECT_EQ_INT(pw.qp_num, xw.qp_num);
    EXPECT_EQ_INT(pw.wc_flags, xw.wc_flags);
    EXPECT_TRUE(xw.wc_flags & IBV_WC_WITH_IMM);
    EXPECT_EQ_INT(pw.imm_data, xw.imm_data);
    EXPECT_TRUE(memcmp(rbuf + SLOT, s, 777) == 0);
    /* a completion timestamp is refused: softnic advertises no clock */
    struct ibv_device_attr_ex da;
    EXPECT_EQ_INT(0, ibv_query_device_ex(d.ctx, NULL, &da));
    EXPECT_EQ_U64(0, da.completion_timestamp_mask);
    struct ibv_cq_init_attr_ex ts = { .cqe = 4, .wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP };
    errno = 0;
    EXPECT_TRUE(ibv_create_cq_ex(d.ctx, &ts) == NULL);
    EXPECT_EQ_INT(EOPNOTSUPP, errno);
    ibv_dereg_mr(smr);
    ibv_dereg_mr(rmr);
    st_qp_destroy(&a);
    st_qp_destroy(&b);
    st_dev_close(&d);
}

/* A remote write into [addr, addr+len) of rkey from a fresh QP pair;
 * returns its completion status. */
static enum ibv_wc_status remote_write(struct st_dev *d, void *src, uint32_t len, uint64_t raddr,
                                       uint32_t rkey)
{
    struct st_qp a, b;
    st_qp_pair(d, &a, &b, &opts);
    struct ibv_mr *smr = ibv_reg_mr(d->pd, src, len, MR_ALL);
    st_post_rdma(a.qp, IBV_WR_RDMA_WRITE, 1, src, len, smr->lkey, raddr, rkey, 0,
                 IBV_SEND_SIGNALED);
    struct ibv_wc wc;
    st_wait_wc(a.scq, &wc, WAIT_MS);
    ibv_dereg_mr(smr);
    st_qp_destroy(&a);
    st_qp_destroy(&b);
    return wc.status;
}

TAP_CASE(test_rereg_mr_changes_access_and_translation_under_the_same_rkey)
{
    struct st_dev d;
    st_dev_open(&d);
    char *src = st_buf(SLOT, 5), *old = st_buf(SLOT, 6), *neu = st_buf(SLOT, 7);
    struct ibv_mr *mr = ibv_reg_mr(d.pd, old, SLOT, IBV_ACCESS_LOCAL_WRITE);
    EXPECT_TRUE(mr != NULL);
    uint32_t rkey = mr->rkey;
    EXPECT_EQ_INT(IBV_WC_REM_ACCESS_ERR, remote_write(&d, src, 64, (uintptr_t)old, rkey));
    EXPECT_EQ_INT(0, ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
                                  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
    EXPECT_EQ_INT(IBV_WC_SUCCESS, remote_write(&d, src, 64, (uintptr_t)old, rkey));
    EXPECT_TRUE(memcmp(old, src, 64) == 0);
    EXPECT_EQ_INT(0, ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, neu, SLOT, 0));
    EXPECT_TRUE(mr->addr == neu && mr->rkey == rkey);
    EXPECT_EQ_INT(IBV_WC_SUCCESS, remote_write(&d, src, SLOT, (uintptr_t)neu, rkey));
    EXPECT_TRUE(memcmp(neu, src, SLOT) == 0);
    EXPECT_EQ_INT(IBV_WC_REM_ACCESS_ERR, remote_write(&d, src, 64, (uintptr_t)old, rkey));
    /* refused: an unknown flag (libibverbs' check), no flag and remote
     * write without local write (the device's, as on a ConnectX) */
    errno = 0;
    EXPECT_EQ_INT(IBV_REREG_MR_ERR_INPUT, ibv_rereg_mr(mr, 1 << 5, NULL, NULL, 0, 0));
    EXPECT_EQ_INT(EINVAL, errno);
    errno = 0;
    EXPECT_EQ_INT(IBV_REREG_MR_ERR_CMD, ibv_rereg_mr(mr, 0, NULL, NULL, 0, 0));
    EXPECT_EQ_INT(EINVAL, errno);
    EXPECT_EQ_INT(IBV_REREG_MR_ERR_CMD, ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL,
                                                     NULL, 0, IBV_ACCESS_REMOTE_WRITE));
    EXPECT_EQ_INT(0, ibv_dereg_mr(mr));
    st_dev_close(&d);
}

int main(int argc, char **argv) { return sntest_main(argc, argv); }
