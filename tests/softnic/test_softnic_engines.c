/* tests/softnic/test_softnic_engines.c: softnic runs its QPs' completion
 * work on a fixed pool of engine threads (engine.c, SOFTNIC_ENGINES), not on
 * a thread per QP. 200 QPs (100 pairs of one process) move RDMA WRITE, READ,
 * SEND and fetch-and-add, every byte checked, while the process's threads
 * stay within the engines, the threads a QP still has of its own (its
 * requester, and a responder per incoming connection) and a constant; QPs
 * destroyed with work in flight leave nothing behind that the next QPs trip
 * on. */
#include "sntest.h"
#include "../proc_self.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define PAIRS 100
#define ENGINES 2
#define SLOT 4096
#define SMALL 64
/* the threads a QP has of its own besides the engines: its requester, and
 * the responder of the connection its peer opened to it */
#define PER_QP_THREADS 2
/* the process's own: the wire's acceptor, the control file and fault
 * pollers, and room for the library's helpers */
#define CONSTANT_THREADS 8

#define ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | \
                IBV_ACCESS_REMOTE_ATOMIC)

struct side {
    char *mem;           /* [src | dst | recv] slots of each pair, then atomic words */
    struct ibv_mr *mr;
};

static size_t side_len(void)
{
    return (size_t)PAIRS * 3 * SLOT + (size_t)PAIRS * 16;
}
static char *src_of(struct side *s, int i) { return s->mem + (size_t)i * 3 * SLOT; }
static char *dst_of(struct side *s, int i) { return src_of(s, i) + SLOT; }
static char *rcv_of(struct side *s, int i) { return src_of(s, i) + 2 * SLOT; }
static uint64_t *word_of(struct side *s, int i)
{
    return (uint64_t *)(s->mem + (size_t)PAIRS * 3 * SLOT + (size_t)i * 16);
}
static uint64_t *res_of(struct side *s, int i) { return word_of(s, i) + 1; }

static void side_open(struct st_dev *d, struct side *s, unsigned seed)
{
    s->mem = st_buf(side_len(), seed);
    s->mr = ibv_reg_mr(d->pd, s->mem, side_len(), ACCESS);
    EXPECT_TRUE(s->mr != NULL);
}

static void post_atomic_fa(struct ibv_qp *qp, uint64_t wr_id, uint64_t *res, uint32_t lkey,
                           uint64_t *raddr, uint32_t rkey, uint64_t add)
{
    struct ibv_sge sge = { .addr = (uintptr_t)res, .length = 8, .lkey = lkey };
    struct ibv_send_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1,
                              .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
                              .send_flags = IBV_SEND_SIGNALED }, *bad;
    wr.wr.atomic.remote_addr = (uintptr_t)raddr;
    wr.wr.atomic.rkey = rkey;
    wr.wr.atomic.compare_add = add;
    EXPECT_EQ_INT(0, ibv_post_send(qp, &wr, &bad));
}

TAP_CASE(test_200_qps_move_data_on_a_bounded_number_of_threads)
{
    char n[16];
    snprintf(n, sizeof(n), "%d", ENGINES);
    setenv("SOFTNIC_ENGINES", n, 1);
    /* 400 NIC threads on a host of few cores, loaded by a parallel check:
     * a budget that tells a slow host from a dead peer */
    setenv("SOFTNIC_RETRY_MIN_MS", "20000", 1);
    setenv("SOFTNIC_RETRY_CAP_MS", "30000", 1);
    struct st_dev d;
    st_dev_open(&d);
    int base = proc_self_threads();
    EXPECT_TRUE(base > 0);
    static struct st_qp a[PAIRS], b[PAIRS];
    struct st_qp_opts o = { .max_send_wr = 16, .max_recv_wr = 4, .max_sge = 1, .access = ACCESS };
    for (int i = 0; i < PAIRS; i++)
        st_qp_pair(&d, &a[i], &b[i], &o);
    struct side sa, sb;
    side_open(&d, &sa, 11);
    side_open(&d, &sb, 22);
    for (int i = 0; i < PAIRS; i++) {
        *word_of(&sb, i) = 1000u * (uint64_t)i;
        *res_of(&sa, i) = 0;
        memset(dst_of(&sa, i), 0, SLOT);
        memset(dst_of(&sb, i), 0, SLOT);
        memset(rcv_of(&sb, i), 0, SLOT);
        st_fill(src_of(&sa, i), SLOT, 100 + (unsigned)i);
        st_fill(src_of(&sb, i), SLOT, 300 + (unsigned)i);
    }
    tap_progress();
    /* all at once: every QP has work on the engines together */
    for (int i = 0; i < PAIRS; i++) {
        st_post_recv(b[i].qp, 1, rcv_of(&sb, i), SLOT, sb.mr->lkey);
        st_post_rdma(a[i].qp, IBV_WR_RDMA_WRITE, 10, src_of(&sa, i), SLOT, sa.mr->lkey,
                     (uintptr_t)dst_of(&sb, i), sb.mr->rkey, 0, IBV_SEND_SIGNALED);
        st_post_rdma(a[i].qp, IBV_WR_RDMA_READ, 11, dst_of(&sa, i), SLOT / 2, sa.mr->lkey,
                     (uintptr_t)src_of(&sb, i), sb.mr->rkey, 0, IBV_SEND_SIGNALED);
        st_post_send(a[i].qp, 12, src_of(&sa, i) + SLOT / 2, SMALL, sa.mr->lkey, IBV_SEND_SIGNALED);
        post_atomic_fa(a[i].qp, 13, res_of(&sa, i), sa.mr->lkey, word_of(&sb, i), sb.mr->rkey,
                       (uint64_t)i + 1);
        /* and back: b's requester sends to a's responder */
        st_post_rdma(b[i].qp, IBV_WR_RDMA_WRITE, 20, src_of(&sb, i) + SLOT / 2, SLOT / 2, sb.mr->lkey,
                     (uintptr_t)(dst_of(&sa, i) + SLOT / 2), sa.mr->rkey, 0, IBV_SEND_SIGNALED);
    }
    for (int i = 0; i < PAIRS; i++) {
        struct ibv_wc wc;
        for (uint64_t id = 10; id <= 13; id++) {
            st_wait_wc(a[i].scq, &wc, 20000);
            EXPECT_WC(wc, IBV_WC_SUCCESS, -1, id);
        }
        st_wait_wc(b[i].rcq, &wc, 20000);
        EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RECV, 1);
        EXPECT_EQ_INT(SMALL, (int)wc.byte_len);
        st_wait_wc(b[i].scq, &wc, 20000);
        EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 20);
        tap_progress();
    }
    int threads = proc_self_threads();
    int bound = base + 2 * PAIRS * PER_QP_THREADS + ENGINES + CONSTANT_THREADS;
    tap_diag("%d QPs: %d threads (%d before them), at most %d allowed", 2 * PAIRS, threads, base, bound);
    EXPECT_TRUE(threads <= bound);
    for (int i = 0; i < PAIRS; i++) {
        EXPECT_TRUE(memcmp(dst_of(&sb, i), src_of(&sa, i), SLOT) == 0);
        EXPECT_TRUE(memcmp(dst_of(&sa, i), src_of(&sb, i), SLOT / 2) == 0);
        EXPECT_TRUE(memcmp(dst_of(&sa, i) + SLOT / 2, src_of(&sb, i) + SLOT / 2, SLOT / 2) == 0);
        EXPECT_TRUE(memcmp(rcv_of(&sb, i), src_of(&sa, i) + SLOT / 2, SMALL) == 0);
        EXPECT_EQ_U64(1000u * (uint64_t)i, *res_of(&sa, i));
        EXPECT_EQ_U64(1000u * (uint64_t)i + (uint64_t)i + 1, *word_of(&sb, i));
    }
    for (int i = 0; i < PAIRS; i++) {
        st_qp_destroy(&a[i]);
        st_qp_destroy(&b[i]);
    }
    ibv_dereg_mr(sa.mr);
    ibv_dereg_mr(sb.mr);
    munmap(sa.mem, side_len());
    munmap(sb.mem, side_len());
    st_dev_close(&d);
}

/* QPs destroyed while their WQEs and responses are in flight are taken off
 * the engines safely; QPs made after them run as before. */
TAP_CASE(test_qps_destroyed_with_work_in_flight_leave_the_engines_working)
{
    setenv("SOFTNIC_ENGINES", "1", 1);
    struct st_dev d;
    st_dev_open(&d);
    size_t len = 256 * 1024;
    char *src = st_buf(len, 5), *dst = st_buf(len, 0);
    struct ibv_mr *smr = ibv_reg_mr(d.pd, src, len, ACCESS), *dmr = ibv_reg_mr(d.pd, dst, len, ACCESS);
    EXPECT_TRUE(smr && dmr);
    struct st_qp_opts o = { .max_send_wr = 64, .max_recv_wr = 4, .max_sge = 1, .access = ACCESS };
    for (int round = 0; round < 20; round++) {
        struct st_qp a[4], b[4];
        for (int i = 0; i < 4; i++) {
            st_qp_pair(&d, &a[i], &b[i], &o);
            for (int k = 0; k < 16; k++)
                st_post_rdma(a[i].qp, k % 2 ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE, (uint64_t)k,
                             k % 2 ? dst : src, (uint32_t)len / 4, k % 2 ? dmr->lkey : smr->lkey,
                             (uintptr_t)(k % 2 ? src : dst), k % 2 ? smr->rkey : dmr->rkey, 0,
                             IBV_SEND_SIGNALED);
        }
        for (int i = 0; i < 4; i++) {
            st_qp_destroy(&a[i]);
            st_qp_destroy(&b[i]);
        }
        tap_progress();
    }
    struct st_qp a, b;
    st_qp_pair(&d, &a, &b, &o);
    memset(dst, 0, len);
    st_post_rdma(a.qp, IBV_WR_RDMA_WRITE, 7, src, (uint32_t)len, smr->lkey, (uintptr_t)dst, dmr->rkey, 0,
                 IBV_SEND_SIGNALED);
    struct ibv_wc wc;
    st_wait_wc(a.scq, &wc, 20000);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 7);
    EXPECT_TRUE(memcmp(src, dst, len) == 0);
    st_qp_destroy(&a);
    st_qp_destroy(&b);
    ibv_dereg_mr(smr);
    ibv_dereg_mr(dmr);
    munmap(src, len);
    munmap(dst, len);
    st_dev_close(&d);
}

int main(int argc, char **argv) { return sntest_main(argc, argv); }
