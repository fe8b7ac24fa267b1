/* tests/softnic/test_softnic_qp_state.c: the RC QP state machine of
 * ibv_modify_qp: every legal transition, the attribute masks each one
 * requires and allows (the IB spec's table, as the kernel enforces it for
 * mlx5), EINVAL for anything else, and what each state does to the queues. */
#include "sntest.h"

#include <errno.h>

#define M_INIT (IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)
#define M_RTR (IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | \
               IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)
#define M_RTS (IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | \
               IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC)

struct fixture {
    struct st_dev d;
    struct st_qp q;
    union ibv_gid gid;
};

static void setup(struct fixture *f)
{
    st_dev_open(&f->d);
    st_qp_create(&f->d, &f->q, NULL, 64);
    EXPECT_EQ_INT(0, ibv_query_gid(f->d.ctx, 1, 0, &f->gid));
}

static void teardown(struct fixture *f)
{
    st_qp_destroy(&f->q);
    st_dev_close(&f->d);
}

/* Attributes good for every step; the mask decides what is used. */
static struct ibv_qp_attr attrs(struct fixture *f, enum ibv_qp_state st)
{
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof(a));
    a.qp_state = st;
    a.port_num = 1;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
    a.path_mtu = IBV_MTU_1024;
    a.dest_qp_num = f->q.qp->qp_num;
    a.rq_psn = 0x123;
    a.sq_psn = 0x456;
    a.max_dest_rd_atomic = 2;
    a.max_rd_atomic = 2;
    a.min_rnr_timer = 12;
    a.timeout = 14;
    a.retry_cnt = 6;
    a.rnr_retry = 5;
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = f->gid;
    a.ah_attr.grh.hop_limit = 1;
    a.ah_attr.port_num = 1;
    return a;
}

static enum ibv_qp_state qp_state(struct ibv_qp *qp)
{
    struct ibv_qp_attr a;
    struct ibv_qp_init_attr ia;
    EXPECT_EQ_INT(0, ibv_query_qp(qp, &a, IBV_QP_STATE, &ia));
    return a.qp_state;
}

static void move(struct fixture *f, enum ibv_qp_state st, int mask)
{
    struct ibv_qp_attr a = attrs(f, st);
    int rc = ibv_modify_qp(f->q.qp, &a, mask);
    if (rc)
        tap_fail_at(__FILE__, __LINE__, "modify to %d with mask 0x%x: %s", st, mask, strerror(rc));
    EXPECT_EQ_INT(st, qp_state(f->q.qp));
    EXPECT_EQ_INT(st, f->q.qp->state);
}

static void refuse(struct fixture *f, enum ibv_qp_state st, int mask)
{
    enum ibv_qp_state before = qp_state(f->q.qp);
    struct ibv_qp_attr a = attrs(f, st);
    int rc = ibv_modify_qp(f->q.qp, &a, mask);
    if (rc != EINVAL)
        tap_fail_at(__FILE__, __LINE__, "modify %d -> %d with mask 0x%x: expected EINVAL, got %d",
                    before, st, mask, rc);
    EXPECT_EQ_INT(before, qp_state(f->q.qp));
}

static void to_rts(struct fixture *f)
{
    move(f, IBV_QPS_INIT, M_INIT);
    move(f, IBV_QPS_RTR, M_RTR);
    move(f, IBV_QPS_RTS, M_RTS);
}

TAP_CASE(test_qp_walks_reset_init_rtr_rts_and_query_reports_attributes)
{
    struct fixture f;
    setup(&f);
    EXPECT_EQ_INT(IBV_QPS_RESET, qp_state(f.q.qp));
    to_rts(&f);
    struct ibv_qp_attr a;
    struct ibv_qp_init_attr ia;
    EXPECT_EQ_INT(0, ibv_query_qp(f.q.qp, &a, IBV_QP_STATE | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                                   IBV_QP_TIMEOUT | IBV_QP_CAP, &ia));
    EXPECT_EQ_INT(IBV_QPS_RTS, a.qp_state);
    EXPECT_EQ_INT(IBV_MTU_1024, a.path_mtu);
    EXPECT_EQ_INT(f.q.qp->qp_num, a.dest_qp_num);
    EXPECT_EQ_INT(0x123, a.rq_psn);
    EXPECT_EQ_INT(0x456, a.sq_psn);
    EXPECT_EQ_INT(14, a.timeout);
    EXPECT_EQ_INT(6, a.retry_cnt);
    EXPECT_EQ_INT(5, a.rnr_retry);
    EXPECT_EQ_INT(12, a.min_rnr_timer);
    EXPECT_EQ_INT(1, a.port_num);
    EXPECT_EQ_INT(IBV_ACCESS_REMOTE_WRITE, a.qp_access_flags);
    EXPECT_MEMEQ(f.gid.raw, a.ah_attr.grh.dgid.raw, 16);
    EXPECT_EQ_INT(64, ia.cap.max_send_wr);
    EXPECT_TRUE(ia.send_cq == f.q.scq && ia.recv_cq == f.q.rcq);
    EXPECT_EQ_INT(IBV_QPT_RC, ia.qp_type);
    teardown(&f);
}

TAP_CASE(test_reset_to_init_requires_pkey_port_and_access)
{
    struct fixture f;
    setup(&f);
    refuse(&f, IBV_QPS_INIT, M_INIT & ~IBV_QP_PKEY_INDEX);
    refuse(&f, IBV_QPS_INIT, M_INIT & ~IBV_QP_PORT);
    refuse(&f, IBV_QPS_INIT, M_INIT & ~IBV_QP_ACCESS_FLAGS);
    refuse(&f, IBV_QPS_INIT, M_INIT | IBV_QP_TIMEOUT);       /* not allowed here */
    refuse(&f, IBV_QPS_INIT, M_INIT | IBV_QP_DEST_QPN);
    move(&f, IBV_QPS_INIT, M_INIT);
    teardown(&f);
}

TAP_CASE(test_init_to_rtr_requires_path_and_receive_attributes)
{
    struct fixture f;
    setup(&f);
    move(&f, IBV_QPS_INIT, M_INIT);
    static const int required[] = { IBV_QP_AV, IBV_QP_PATH_MTU, IBV_QP_DEST_QPN, IBV_QP_RQ_PSN,
                                    IBV_QP_MAX_DEST_RD_ATOMIC, IBV_QP_MIN_RNR_TIMER };
    for (size_t i = 0; i < sizeof(required) / sizeof(required[0]); i++)
        refuse(&f, IBV_QPS_RTR, M_RTR & ~required[i]);
    refuse(&f, IBV_QPS_RTR, M_RTR | IBV_QP_SQ_PSN);
    refuse(&f, IBV_QPS_RTR, M_RTR | IBV_QP_TIMEOUT);
    move(&f, IBV_QPS_RTR, M_RTR | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX);   /* optional */
    teardown(&f);
}

TAP_CASE(test_rtr_to_rts_requires_send_attributes)
{
    struct fixture f;
    setup(&f);
    move(&f, IBV_QPS_INIT, M_INIT);
    move(&f, IBV_QPS_RTR, M_RTR);
    static const int required[] = { IBV_QP_TIMEOUT, IBV_QP_RETRY_CNT, IBV_QP_RNR_RETRY,
                                    IBV_QP_SQ_PSN, IBV_QP_MAX_QP_RD_ATOMIC };
    for (size_t i = 0; i < sizeof(required) / sizeof(required[0]); i++)
        refuse(&f, IBV_QPS_RTS, M_RTS & ~required[i]);
    refuse(&f, IBV_QPS_RTS, M_RTS | IBV_QP_DEST_QPN);
    refuse(&f, IBV_QPS_RTS, M_RTS | IBV_QP_PATH_MTU);
    move(&f, IBV_QPS_RTS, M_RTS | IBV_QP_MIN_RNR_TIMER | IBV_QP_ACCESS_FLAGS);   /* optional */
    teardown(&f);
}

TAP_CASE(test_same_state_modifies_take_only_optional_attributes)
{
    struct fixture f;
    setup(&f);
    move(&f, IBV_QPS_RESET, IBV_QP_STATE);
    move(&f, IBV_QPS_INIT, M_INIT);
    move(&f, IBV_QPS_INIT, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS);
    move(&f, IBV_QPS_INIT, IBV_QP_ACCESS_FLAGS);              /* no IBV_QP_STATE: stays */
    refuse(&f, IBV_QPS_INIT, IBV_QP_STATE | IBV_QP_TIMEOUT);
    move(&f, IBV_QPS_RTR, M_RTR);
    refuse(&f, IBV_QPS_RTR, IBV_QP_STATE);                     /* RTR -> RTR is not a transition */
    move(&f, IBV_QPS_RTS, M_RTS);
    move(&f, IBV_QPS_RTS, IBV_QP_STATE | IBV_QP_MIN_RNR_TIMER);
    refuse(&f, IBV_QPS_RTS, IBV_QP_STATE | IBV_QP_TIMEOUT);   /* only at RTR -> RTS */
    refuse(&f, IBV_QPS_RTS, IBV_QP_STATE | IBV_QP_DEST_QPN);
    teardown(&f);
}

TAP_CASE(test_skipping_or_going_back_is_einval)
{
    struct fixture f;
    setup(&f);
    refuse(&f, IBV_QPS_RTR, M_RTR);
    refuse(&f, IBV_QPS_RTS, M_RTS);
    refuse(&f, IBV_QPS_ERR, IBV_QP_STATE);       /* RESET -> ERR is not in the table */
    move(&f, IBV_QPS_INIT, M_INIT);
    refuse(&f, IBV_QPS_RTS, M_RTS);
    move(&f, IBV_QPS_RTR, M_RTR);
    refuse(&f, IBV_QPS_INIT, M_INIT);
    move(&f, IBV_QPS_RTS, M_RTS);
    refuse(&f, IBV_QPS_RTR, M_RTR);
    refuse(&f, IBV_QPS_INIT, M_INIT);
    refuse(&f, IBV_QPS_SQE, IBV_QP_STATE);
    refuse(&f, (enum ibv_qp_state)42, IBV_QP_STATE);
    move(&f, IBV_QPS_ERR, IBV_QP_STATE);
    refuse(&f, IBV_QPS_RTS, M_RTS);
    refuse(&f, IBV_QPS_INIT, M_INIT);
    refuse(&f, IBV_QPS_ERR, IBV_QP_STATE | IBV_QP_TIMEOUT);
    move(&f, IBV_QPS_ERR, IBV_QP_STATE);
    teardown(&f);
}

TAP_CASE(test_every_state_goes_to_err_and_to_reset_and_is_reusable)
{
    struct fixture f;
    setup(&f);
    /* INIT, RTR, RTS: each to ERR, then RESET, then up again */
    for (int depth = 1; depth <= 3; depth++) {
        move(&f, IBV_QPS_INIT, M_INIT);
        if (depth >= 2)
            move(&f, IBV_QPS_RTR, M_RTR);
        if (depth >= 3)
            move(&f, IBV_QPS_RTS, M_RTS);
        move(&f, IBV_QPS_ERR, IBV_QP_STATE);
        move(&f, IBV_QPS_RESET, IBV_QP_STATE);
    }
    /* INIT, RTR, RTS: each straight to RESET */
    for (int depth = 1; depth <= 3; depth++) {
        move(&f, IBV_QPS_INIT, M_INIT);
        if (depth >= 2)
            move(&f, IBV_QPS_RTR, M_RTR);
        if (depth >= 3)
            move(&f, IBV_QPS_RTS, M_RTS);
        refuse(&f, IBV_QPS_RESET, IBV_QP_STATE | IBV_QP_PORT);   /* nothing else allowed */
        move(&f, IBV_QPS_RESET, IBV_QP_STATE);
    }
    /* RTS -> SQD -> RTS */
    to_rts(&f);
    move(&f, IBV_QPS_SQD, IBV_QP_STATE);
    move(&f, IBV_QPS_RTS, IBV_QP_STATE);
    teardown(&f);
}

TAP_CASE(test_out_of_range_values_are_einval)
{
    struct fixture f;
    setup(&f);
    struct ibv_qp_attr a = attrs(&f, IBV_QPS_INIT);
    a.port_num = 3;
    EXPECT_EQ_INT(EINVAL, ibv_modify_qp(f.q.qp, &a, M_INIT));
    a = attrs(&f, IBV_QPS_INIT);
    a.pkey_index = 1;
    EXPECT_EQ_INT(EINVAL, ibv_modify_qp(f.q.qp, &a, M_INIT));
    move(&f, IBV_QPS_INIT, M_INIT);
    a = attrs(&f, IBV_QPS_RTR);
    a.ah_attr.is_global = 0;                  /* RoCE needs a GRH */
    EXPECT_EQ_INT(EINVAL, ibv_modify_qp(f.q.qp, &a, M_RTR));
    a = attrs(&f, IBV_QPS_RTR);
    a.ah_attr.grh.sgid_index = 1;             /* one GID per port */
    EXPECT_EQ_INT(EINVAL, ibv_modify_qp(f.q.qp, &a, M_RTR));
    a = attrs(&f, IBV_QPS_RTR);
    a.path_mtu = (enum ibv_mtu)6;
    EXPECT_EQ_INT(EINVAL, ibv_modify_qp(f.q.qp, &a, M_RTR));
    a = attrs(&f, IBV_QPS_RTR);
    a.dest_qp_num = 1u << 24;
    EXPECT_EQ_INT(EINVAL, ibv_modify_qp(f.q.qp, &a, M_RTR));
    a = attrs(&f, IBV_QPS_RTR);
    a.min_rnr_timer = 32;
    EXPECT_EQ_INT(EINVAL, ibv_modify_qp(f.q.qp, &a, M_RTR));
    EXPECT_EQ_INT(IBV_QPS_INIT, qp_state(f.q.qp));
    move(&f, IBV_QPS_RTR, M_RTR);
    a = attrs(&f, IBV_QPS_RTS);
    a.retry_cnt = 8;
    EXPECT_EQ_INT(EINVAL, ibv_modify_qp(f.q.qp, &a, M_RTS));
    a = attrs(&f, IBV_QPS_RTS);
    a.rnr_retry = 8;
    EXPECT_EQ_INT(EINVAL, ibv_modify_qp(f.q.qp, &a, M_RTS));
    a = attrs(&f, IBV_QPS_RTS);
    a.timeout = 32;
    EXPECT_EQ_INT(EINVAL, ibv_modify_qp(f.q.qp, &a, M_RTS));
    a = attrs(&f, IBV_QPS_RTS);
    a.sq_psn = 1u << 24;
    EXPECT_EQ_INT(EINVAL, ibv_modify_qp(f.q.qp, &a, M_RTS));
    EXPECT_EQ_INT(IBV_QPS_RTR, qp_state(f.q.qp));
    teardown(&f);
}

TAP_CASE(test_cur_state_must_match)
{
    struct fixture f;
    setup(&f);
    to_rts(&f);
    struct ibv_qp_attr a = attrs(&f, IBV_QPS_RTS);
    a.cur_qp_state = IBV_QPS_RTR;
    EXPECT_EQ_INT(EINVAL, ibv_modify_qp(f.q.qp, &a, IBV_QP_STATE | IBV_QP_CUR_STATE));
    a.cur_qp_state = IBV_QPS_RTS;
    EXPECT_EQ_INT(0, ibv_modify_qp(f.q.qp, &a, IBV_QP_STATE | IBV_QP_CUR_STATE));
    teardown(&f);
}

TAP_CASE(test_post_send_before_rts_is_refused_with_bad_wr)
{
    struct fixture f;
    setup(&f);
    char buf[8];
    struct ibv_mr *mr = ibv_reg_mr(f.d.pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
    struct ibv_sge sge = { (uintptr_t)buf, sizeof(buf), mr->lkey };
    struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND },
                       *bad = NULL;
    EXPECT_EQ_INT(EINVAL, ibv_post_send(f.q.qp, &wr, &bad));
    EXPECT_TRUE(bad == &wr);
    struct ibv_recv_wr rwr = { .wr_id = 2, .sg_list = &sge, .num_sge = 1 }, *rbad = NULL;
    EXPECT_EQ_INT(EINVAL, ibv_post_recv(f.q.qp, &rwr, &rbad));   /* RESET */
    move(&f, IBV_QPS_INIT, M_INIT);
    EXPECT_EQ_INT(0, ibv_post_recv(f.q.qp, &rwr, &rbad));        /* INIT takes receives */
    bad = NULL;
    EXPECT_EQ_INT(EINVAL, ibv_post_send(f.q.qp, &wr, &bad));
    move(&f, IBV_QPS_RTR, M_RTR);
    EXPECT_EQ_INT(EINVAL, ibv_post_send(f.q.qp, &wr, &bad));
    EXPECT_TRUE(st_no_wc(f.q.scq, 20));
    EXPECT_EQ_INT(0, ibv_dereg_mr(mr));
    teardown(&f);
}

TAP_CASE(test_err_flushes_posted_receives_and_reset_drops_them_silently)
{
    struct fixture f;
    setup(&f);
    char buf[64];
    struct ibv_mr *mr = ibv_reg_mr(f.d.pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
    move(&f, IBV_QPS_INIT, M_INIT);
    for (int i = 0; i < 3; i++)
        st_post_recv(f.q.qp, 100 + (uint64_t)i, buf, sizeof(buf), mr->lkey);
    move(&f, IBV_QPS_RTR, M_RTR);
    move(&f, IBV_QPS_ERR, IBV_QP_STATE);
    for (int i = 0; i < 3; i++) {
        struct ibv_wc wc;
        st_wait_wc(f.q.rcq, &wc, 1000);
        EXPECT_WC(wc, IBV_WC_WR_FLUSH_ERR, -1, 100 + (uint64_t)i);
        EXPECT_EQ_INT(f.q.qp->qp_num, wc.qp_num);
    }
    /* a receive posted in ERR flushes at once */
    st_post_recv(f.q.qp, 200, buf, sizeof(buf), mr->lkey);
    struct ibv_wc wc;
    st_wait_wc(f.q.rcq, &wc, 1000);
    EXPECT_WC(wc, IBV_WC_WR_FLUSH_ERR, -1, 200);
    /* RESET empties the queues without completions */
    move(&f, IBV_QPS_RESET, IBV_QP_STATE);
    move(&f, IBV_QPS_INIT, M_INIT);
    st_post_recv(f.q.qp, 300, buf, sizeof(buf), mr->lkey);
    move(&f, IBV_QPS_RESET, IBV_QP_STATE);
    EXPECT_TRUE(st_no_wc(f.q.rcq, 50));
    EXPECT_EQ_INT(0, ibv_dereg_mr(mr));
    teardown(&f);
}

TAP_CASE(test_create_qp_checks_caps_and_reports_them)
{
    struct st_dev d;
    st_dev_open(&d);
    struct ibv_device_attr da;
    EXPECT_EQ_INT(0, ibv_query_device(d.ctx, &da));
    struct ibv_cq *cq = ibv_create_cq(d.ctx, 16, NULL, NULL, 0);
    struct ibv_qp_init_attr ia = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
                                   .cap = { .max_send_wr = (uint32_t)da.max_qp_wr + 1,
                                            .max_recv_wr = 4, .max_send_sge = 1,
                                            .max_recv_sge = 1 } };
    errno = 0;
    EXPECT_TRUE(ibv_create_qp(d.pd, &ia) == NULL);
    EXPECT_EQ_INT(EINVAL, errno);
    ia.cap.max_send_wr = 4;
    ia.cap.max_send_sge = (uint32_t)da.max_sge + 1;
    EXPECT_TRUE(ibv_create_qp(d.pd, &ia) == NULL);
    ia.cap.max_send_sge = 2;
    ia.cap.max_inline_data = 1u << 20;
    EXPECT_TRUE(ibv_create_qp(d.pd, &ia) == NULL);
    ia.cap.max_inline_data = 64;
    ia.send_cq = NULL;
    EXPECT_TRUE(ibv_create_qp(d.pd, &ia) == NULL);
    ia.send_cq = cq;
    struct ibv_qp *qp = ibv_create_qp(d.pd, &ia);
    EXPECT_TRUE(qp != NULL);
    EXPECT_TRUE(ia.cap.max_send_wr >= 4 && ia.cap.max_inline_data >= 64);
    EXPECT_TRUE(qp->qp_num != 0 && qp->qp_num < (1u << 24));
    EXPECT_EQ_INT(IBV_QPS_RESET, qp->state);
    /* the extended create gives the same kind of QP */
    struct ibv_qp_init_attr_ex iax = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
                                       .cap = ia.cap, .comp_mask = IBV_QP_INIT_ATTR_PD,
                                       .pd = d.pd };
    struct ibv_qp *qp2 = ibv_create_qp_ex(d.ctx, &iax);
    EXPECT_TRUE(qp2 != NULL);
    EXPECT_TRUE(qp2->qp_num != qp->qp_num);
    EXPECT_EQ_INT(0, ibv_destroy_qp(qp2));
    EXPECT_EQ_INT(0, ibv_destroy_qp(qp));
    EXPECT_EQ_INT(0, ibv_destroy_cq(cq));
    st_dev_close(&d);
}

int main(int argc, char **argv) { return sntest_main(argc, argv); }
