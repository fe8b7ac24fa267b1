/* tests/softnic/test_softnic_push_flush_order.c: a QP in error completes
 * every receive posted to it in posting order, also when a same-host
 * peer's pushed completion waits behind one the engine still makes (push.c
 * defers the flush then).  The pushed completion is written into this
 * process's own push region as the peer would (push_forge.h), while the
 * engine's receive is held by a large write it is still pulling. */
#include "sntest.h"
#include "push_forge.h"

#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define WAIT_MS 10000
#define BUF 4096u
/* the write the engine pulls in steps of a MiB (tens of milliseconds
 * here, far longer than the few calls the case makes meanwhile) */
#define BIG_LEN (256u << 20)

/* A receive posted after the QP went to ERR is flushed after the engine's
 * receive (flushed by the ERR) and the pushed one behind it (its data
 * landed: a success), never ahead of them. */
TAP_CASE(test_a_receive_posted_in_err_completes_after_the_pushed_ones_before_it)
{
    struct st_dev d;
    st_dev_open(&d);
    struct st_qp a, b;
    struct st_qp_opts o = { .max_inline = 64 };
    st_qp_pair(&d, &a, &b, &o);
    char *src = mmap(NULL, BIG_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *dst = mmap(NULL, BIG_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT_TRUE(src != MAP_FAILED && dst != MAP_FAILED);
    char *rbuf = st_buf(BUF, 3);
    memset(rbuf, 0, BUF);
    struct ibv_mr *smr = ibv_reg_mr(d.pd, src, BIG_LEN, IBV_ACCESS_LOCAL_WRITE);
    struct ibv_mr *dmr = ibv_reg_mr(d.pd, dst, BIG_LEN, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    struct ibv_mr *rmr = ibv_reg_mr(d.pd, rbuf, BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    EXPECT_TRUE(smr && dmr && rmr);
    /* a first message connects them; the push offers come with it */
    struct ibv_wc wc;
    st_post_recv(b.qp, 1, rbuf, 64, rmr->lkey);
    st_post_send(a.qp, 2, src, 64, smr->lkey, IBV_SEND_SIGNALED);
    st_wait_wc(a.scq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_SEND, 2);
    st_wait_wc(b.rcq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RECV, 1);
    st_post_recv(b.qp, 7, rbuf + 100, 100, rmr->lkey);
    st_post_recv(b.qp, 8, rbuf + 300, 100, rmr->lkey);
    size_t rlen;
    struct push_region *r = push_forge_map(&rlen);
    struct push_qp *s, *s8;
    uint32_t k7, k8;
    if (!r || !push_forge_find_shown(r, (uintptr_t)rbuf + 100, rmr->lkey, &s, &k7) ||
        !push_forge_find_shown(r, (uintptr_t)rbuf + 300, rmr->lkey, &s8, &k8))
        TAP_SKIP("this process shows no receive in a push region (SOFTNIC_PUSH=0, SOFTNIC_PUSH_SEND=0 or "
                 "SOFTNIC_PUSH_IMM=0, or no pidfd_open: under valgrind)");
    EXPECT_TRUE(s8 == s);
    uint64_t n7 = push_forge_index(s, k7), n8 = push_forge_index(s, k8);
    EXPECT_EQ_U64(n7 + 1, n8);

    /* the engine takes receive 7 for the large write and holds it */
    st_post_rdma(a.qp, IBV_WR_RDMA_WRITE_WITH_IMM, 3, src, BIG_LEN, smr->lkey, (uintptr_t)dst, dmr->rkey, 0,
                 IBV_SEND_SIGNALED);
    uint64_t until = st_now_ms() + WAIT_MS;
    while ((atomic_load(&s->rq_taken) & TAG_COUNT) <= n7 && st_now_ms() < until)
        usleep(1000);
    uint64_t t = atomic_load(&s->rq_taken);
    EXPECT_EQ_U64(n8, t & TAG_COUNT);

    /* a peer's pushed write with immediate takes receive 8, as a pusher
     * does: the index, then the record */
    EXPECT_TRUE(atomic_compare_exchange_strong(&s->rq_taken, &t, t + 1));
    push_forge_record(s, k8, REC_OP_WRITE_IMM, rmr->rkey, (uintptr_t)rbuf + 300);

    struct ibv_qp_attr at = { .qp_state = IBV_QPS_ERR };
    EXPECT_EQ_INT(0, ibv_modify_qp(b.qp, &at, IBV_QP_STATE));
    st_post_recv(b.qp, 9, rbuf + 500, 100, rmr->lkey);

    /* 7 flushed by the ERR, unless its write ended first (a success
     * then, and no flush waited: the order holds whatever the code) */
    st_wait_wc(b.rcq, &wc, WAIT_MS);
    EXPECT_EQ_U64(7, wc.wr_id);
    tap_diag("receive 7: %s", ibv_wc_status_str(wc.status));
    st_wait_wc(b.rcq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, 8);
    char want[8];
    memset(want, 0x5a, 8);
    EXPECT_MEMEQ(want, rbuf + 300, 8);
    st_wait_wc(b.rcq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_WR_FLUSH_ERR, -1, 9);
    EXPECT_TRUE(st_no_wc(b.rcq, 0));

    st_qp_destroy(&a);
    st_qp_destroy(&b);
    ibv_dereg_mr(smr);
    ibv_dereg_mr(dmr);
    ibv_dereg_mr(rmr);
    st_dev_close(&d);
    munmap(r, rlen);
    munmap(src, BIG_LEN);
    munmap(dst, BIG_LEN);
}

int main(int argc, char **argv) { return sntest_main(argc, argv); }
