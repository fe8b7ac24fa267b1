/* tests/softnic/test_softnic_push.c: the same-host push (push.c): a small
 * RDMA WRITE to a same-host peer is placed by the posting thread, with no
 * NIC thread of the responder and no ACK, and only when every check a
 * responder makes passes; anything else takes the wire and gets the
 * wire's answer.  The requester QP's pushed-WQE counter says which path
 * carried a write.  With SOFTNIC_PUSH=0 (test_softnic_push_off.sh) every
 * case must hold the same with the counter at 0. */
#include "sntest.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define WAIT_MS 10000

static bool push_on(void)
{
    const char *v = getenv("SOFTNIC_PUSH"), *f = getenv("SOFTNIC_FASTPATH");
    return (!v || strcmp(v, "0") != 0) && (!f || strcmp(f, "0") != 0);
}

static uint64_t pushed(struct ibv_qp *qp)
{
    uint64_t n = 0;
    EXPECT_EQ_INT(0, st_ctl()->qp_pushed_wqes(qp, &n));
    return n;
}

static uint64_t responder_steps(struct ibv_qp *qp)
{
    struct softnic_ctl_qp_steps s;
    EXPECT_EQ_INT(0, st_ctl()->qp_steps(qp, &s));
    return s.responder;
}

struct fixture {
    struct st_dev d;
    struct st_qp a, b;
    char *src, *dst;
    struct ibv_mr *smr, *dmr;
};

#define BUF (1u << 20)

/* The source and target buffers of a fixture whose QPs are up. */
static void fixture_bufs(struct fixture *f)
{
    f->src = st_buf(BUF, 1);
    f->dst = st_buf(BUF, 2);
    f->smr = ibv_reg_mr(f->d.pd, f->src, BUF, IBV_ACCESS_LOCAL_WRITE);
    f->dmr = ibv_reg_mr(f->d.pd, f->dst, BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    EXPECT_TRUE(f->smr && f->dmr);
}

static void setup_with(struct fixture *f, const struct st_qp_opts *o)
{
    st_dev_open(&f->d);
    st_qp_pair(&f->d, &f->a, &f->b, o);
    fixture_bufs(f);
}

static void setup(struct fixture *f)
{
    struct st_qp_opts o = { .max_inline = 64, .timeout = 10, .retry_cnt = 1 };
    setup_with(f, &o);
}

static void teardown(struct fixture *f)
{
    st_qp_destroy(&f->a);
    st_qp_destroy(&f->b);
    if (f->smr)
        ibv_dereg_mr(f->smr);
    if (f->dmr)
        ibv_dereg_mr(f->dmr);
    st_dev_close(&f->d);
}

/* Writes len bytes from src + off to dst + off (rkey, flags), waits for
 * its completion and returns its status. */
static enum ibv_wc_status write_one(struct fixture *f, uint64_t id, uint32_t off, uint32_t len, uint32_t rkey,
                                    unsigned flags)
{
    st_post_rdma(f->a.qp, IBV_WR_RDMA_WRITE, id, f->src + off, len, f->smr->lkey, (uintptr_t)f->dst + off, rkey,
                 0, IBV_SEND_SIGNALED | flags);
    struct ibv_wc wc;
    st_wait_wc(f->a.scq, &wc, WAIT_MS);
    EXPECT_EQ_U64(id, wc.wr_id);
    return wc.status;
}

/* The first write opens the connection and gets the offer; from the next
 * on, small writes are placed: the data is there when the completion is,
 * the responder's NIC thread ran no step and the receiving QP counts the
 * bytes as received. */
TAP_CASE(test_small_writes_are_placed_without_the_responder)
{
    struct fixture f;
    setup(&f);
    EXPECT_EQ_INT(IBV_WC_SUCCESS, write_one(&f, 1, 0, 64, f.dmr->rkey, 0));
    uint64_t p0 = pushed(f.a.qp), s0 = responder_steps(f.b.qp);
    struct softnic_ctl_counters c0, c1;
    EXPECT_EQ_INT(0, st_ctl()->qp_counters(f.b.qp, &c0));
    uint32_t sizes[] = { 1, 8, 64, 100, 1000, 4095 };
    for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        st_fill(f.src, sizes[i], 20u + i);
        bool inl = sizes[i] <= 64;
        EXPECT_EQ_INT(IBV_WC_SUCCESS, write_one(&f, 10 + i, 0, sizes[i], f.dmr->rkey, inl ? IBV_SEND_INLINE : 0));
        EXPECT_MEMEQ(f.src, f.dst, sizes[i]);
    }
    uint64_t n = sizeof(sizes) / sizeof(sizes[0]);
    EXPECT_EQ_U64(push_on() ? n : 0, pushed(f.a.qp) - p0);
    if (push_on())
        EXPECT_EQ_U64(s0, responder_steps(f.b.qp));
    EXPECT_EQ_INT(0, st_ctl()->qp_counters(f.b.qp, &c1));
    EXPECT_EQ_U64(1 + 8 + 64 + 100 + 1000 + 4095, c1.rx_bytes - c0.rx_bytes);
    /* above SN_PUSH_MAX_BYTES the responder pulls: not pushed */
    st_fill(f.src, 4096, 40);
    EXPECT_EQ_INT(IBV_WC_SUCCESS, write_one(&f, 30, 0, 4096, f.dmr->rkey, 0));
    EXPECT_MEMEQ(f.src, f.dst, 4096);
    EXPECT_EQ_U64(push_on() ? n : 0, pushed(f.a.qp) - p0);
    teardown(&f);
}

/* RC's order: a small write posted behind a large one that is still in
 * flight is not placed ahead of it -- the same bytes end as the later
 * write left them.  Unsignaled small writes on an idle queue complete
 * silently and a later signaled one reports. */
TAP_CASE(test_a_small_write_never_overtakes_an_earlier_one)
{
    struct fixture f;
    setup(&f);
    EXPECT_EQ_INT(IBV_WC_SUCCESS, write_one(&f, 1, 0, 64, f.dmr->rkey, 0));
    for (int round = 0; round < 20; round++) {
        st_fill(f.src, BUF, 50u + (unsigned)round);
        /* the large write carries src[0..64) too; the small one then
         * writes other bytes over dst[0..64) */
        struct ibv_sge s1 = { (uintptr_t)f.src, BUF, f.smr->lkey };
        char *small = f.src + BUF - 64;   /* bytes the large write put at BUF-64 */
        struct ibv_sge s2 = { (uintptr_t)small, 64, f.smr->lkey };
        struct ibv_send_wr w2 = { .wr_id = 3, .sg_list = &s2, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
                                  .send_flags = IBV_SEND_SIGNALED };
        w2.wr.rdma.remote_addr = (uintptr_t)f.dst;
        w2.wr.rdma.rkey = f.dmr->rkey;
        struct ibv_send_wr w1 = { .wr_id = 2, .sg_list = &s1, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE };
        w1.wr.rdma.remote_addr = (uintptr_t)f.dst;
        w1.wr.rdma.rkey = f.dmr->rkey;
        struct ibv_send_wr *bad;
        EXPECT_EQ_INT(0, ibv_post_send(f.a.qp, &w1, &bad));
        EXPECT_EQ_INT(0, ibv_post_send(f.a.qp, &w2, &bad));
        struct ibv_wc wc;
        st_wait_wc(f.a.scq, &wc, WAIT_MS);
        EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 3);
        EXPECT_MEMEQ(small, f.dst, 64);
        EXPECT_MEMEQ(f.src + 64, f.dst + 64, BUF - 64);
    }
    teardown(&f);
}

/* What a responder refuses, the push refuses too: the write goes on the
 * wire and completes with the remote access error there, never placed. */
TAP_CASE(test_a_write_the_responder_would_refuse_is_not_placed)
{
    struct fixture f;
    setup(&f);
    EXPECT_EQ_INT(IBV_WC_SUCCESS, write_one(&f, 1, 0, 64, f.dmr->rkey, 0));
    uint64_t p0 = pushed(f.a.qp);
    char before[128];
    memcpy(before, f.dst + BUF - 64, 64);
    /* out of the region's bounds */
    st_post_rdma(f.a.qp, IBV_WR_RDMA_WRITE, 2, f.src, 128, f.smr->lkey, (uintptr_t)f.dst + BUF - 64,
                 f.dmr->rkey, 0, IBV_SEND_SIGNALED);
    struct ibv_wc wc;
    st_wait_wc(f.a.scq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_REM_ACCESS_ERR, -1, 2);
    EXPECT_MEMEQ(before, f.dst + BUF - 64, 64);
    EXPECT_EQ_U64(p0, pushed(f.a.qp));
    teardown(&f);

    /* a key without remote write, a key of another PD, a stale key */
    int cases = 3;
    for (int k = 0; k < cases; k++) {
        setup(&f);
        EXPECT_EQ_INT(IBV_WC_SUCCESS, write_one(&f, 1, 0, 64, f.dmr->rkey, 0));
        p0 = pushed(f.a.qp);
        uint32_t rkey = 0;
        struct ibv_pd *pd2 = NULL;
        struct ibv_mr *mr2 = NULL;
        char *other = st_buf(4096, 7);
        if (k == 0) {
            mr2 = ibv_reg_mr(f.d.pd, other, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
            rkey = mr2->rkey;
        } else if (k == 1) {
            pd2 = ibv_alloc_pd(f.d.ctx);
            mr2 = ibv_reg_mr(pd2, other, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
            rkey = mr2->rkey;
        } else {
            mr2 = ibv_reg_mr(f.d.pd, other, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
            rkey = mr2->rkey;
            EXPECT_EQ_INT(0, ibv_dereg_mr(mr2));
            mr2 = NULL;
        }
        char *copy = malloc(4096);
        memcpy(copy, other, 4096);
        st_post_rdma(f.a.qp, IBV_WR_RDMA_WRITE, 2, f.src, 64, f.smr->lkey, (uintptr_t)other, rkey, 0,
                     IBV_SEND_SIGNALED);
        st_wait_wc(f.a.scq, &wc, WAIT_MS);
        tap_diag("refused key case %d: status %d", k, (int)wc.status);
        EXPECT_WC(wc, IBV_WC_REM_ACCESS_ERR, -1, 2);
        if (k != 2)
            EXPECT_MEMEQ(copy, other, 4096);
        EXPECT_EQ_U64(p0, pushed(f.a.qp));
        free(copy);
        if (mr2)
            ibv_dereg_mr(mr2);
        teardown(&f);
        if (pd2)
            ibv_dealloc_pd(pd2);
    }
}

/* The receiving QP's own state and its port count: a QP moved to ERR, or
 * whose remote write access was taken away, or whose port is down, gets
 * nothing placed; the writer sees the wire's error. */
TAP_CASE(test_a_receiving_qp_that_cannot_take_writes_gets_none_placed)
{
    for (int k = 0; k < 3; k++) {
        struct fixture f;
        struct st_qp_opts o = { .max_inline = 64, .timeout = 10, .retry_cnt = 1 };
        if (k < 2) {
            setup_with(&f, &o);
        } else {
            /* the writer on port 1, the receiver on port 2: only the
             * receiver's port goes down */
            st_dev_open(&f.d);
            struct st_qp_opts o2 = o;
            o2.port = 2;
            st_qp_create(&f.d, &f.a, &o, 256);
            st_qp_create(&f.d, &f.b, &o2, 256);
            struct st_qp_info ia, ib;
            st_qp_info(&f.d, &f.a, &ia);
            st_qp_info(&f.d, &f.b, &ib);
            st_qp_connect(&f.a, &ib);
            st_qp_connect(&f.b, &ia);
            fixture_bufs(&f);
        }
        EXPECT_EQ_INT(IBV_WC_SUCCESS, write_one(&f, 1, 0, 64, f.dmr->rkey, 0));
        EXPECT_EQ_INT(IBV_WC_SUCCESS, write_one(&f, 2, 0, 64, f.dmr->rkey, 0));
        uint64_t p0 = pushed(f.a.qp);
        EXPECT_TRUE(!push_on() || p0 >= 1);   /* placed while all was well */
        if (k == 0) {
            struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
            EXPECT_EQ_INT(0, ibv_modify_qp(f.b.qp, &a, IBV_QP_STATE));
        } else if (k == 1) {
            struct ibv_qp_attr a = { .qp_access_flags = IBV_ACCESS_REMOTE_READ };
            EXPECT_EQ_INT(0, ibv_modify_qp(f.b.qp, &a, IBV_QP_ACCESS_FLAGS));
        } else {
            EXPECT_EQ_INT(0, st_ctl()->port_set_state(f.d.ctx, 2, 0));
        }
        char keep[64];
        memcpy(keep, f.dst + 128, 64);
        st_fill(f.src + 128, 64, 60);
        enum ibv_wc_status st = write_one(&f, 3, 128, 64, f.dmr->rkey, 0);
        tap_diag("case %d: status %d", k, (int)st);
        EXPECT_TRUE(st != IBV_WC_SUCCESS);
        EXPECT_MEMEQ(keep, f.dst + 128, 64);
        EXPECT_EQ_U64(p0, pushed(f.a.qp));
        if (k == 2)
            EXPECT_EQ_INT(0, st_ctl()->port_set_state(f.d.ctx, 2, 1));
        teardown(&f);
    }
}

/* Only plain RDMA WRITEs are placed: with an immediate, sends and reads go
 * on the wire, and their receive completions are the responder's. */
TAP_CASE(test_writes_with_immediate_and_sends_take_the_wire)
{
    struct fixture f;
    setup(&f);
    EXPECT_EQ_INT(IBV_WC_SUCCESS, write_one(&f, 1, 0, 64, f.dmr->rkey, 0));
    uint64_t p0 = pushed(f.a.qp);
    st_post_recv(f.b.qp, 7, f.dst + 4096, 4096, f.dmr->lkey);
    st_post_recv(f.b.qp, 8, f.dst + 8192, 4096, f.dmr->lkey);
    st_fill(f.src, 256, 70);
    st_post_rdma(f.a.qp, IBV_WR_RDMA_WRITE_WITH_IMM, 2, f.src, 64, f.smr->lkey, (uintptr_t)f.dst, f.dmr->rkey,
                 0x1234, IBV_SEND_SIGNALED);
    st_post_send(f.a.qp, 3, f.src + 64, 64, f.smr->lkey, IBV_SEND_SIGNALED);
    struct ibv_wc wc;
    st_wait_wc(f.a.scq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 2);
    st_wait_wc(f.a.scq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_SEND, 3);
    st_wait_wc(f.b.rcq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, 7);
    EXPECT_EQ_U64(htonl(0x1234), wc.imm_data);   /* st_post_rdma sends it in network order */
    st_wait_wc(f.b.rcq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RECV, 8);
    EXPECT_MEMEQ(f.src, f.dst, 64);
    EXPECT_MEMEQ(f.src + 64, f.dst + 8192, 64);
    EXPECT_EQ_U64(p0, pushed(f.a.qp));
    teardown(&f);
}

/* The peer process deregisters its region while we keep writing into it:
 * once its ibv_dereg_mr returned, none of our writes lands there (it
 * watches the bytes), and ours fail instead of reporting success. */
static void peer_deregs(int fd)
{
    struct st_dev d;
    st_dev_open(&d);
    struct st_qp q;
    struct st_qp_opts o = { .timeout = 10, .retry_cnt = 1 };
    st_qp_create(&d, &q, &o, 16);
    char *buf = st_buf(4096, 0);
    memset(buf, 0, 4096);
    struct ibv_mr *mr = ibv_reg_mr(d.pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    struct st_qp_info mine, theirs;
    st_qp_info(&d, &q, &mine);
    mine.addr = (uintptr_t)buf;
    mine.rkey = mr->rkey;
    st_xfer_send(fd, &mine, sizeof(mine));
    st_xfer_recv(fd, &theirs, sizeof(theirs));
    st_qp_connect(&q, &theirs);
    char go;
    st_xfer_recv(fd, &go, 1);   /* the writer's pushes are under way */
    usleep(20000);
    if (ibv_dereg_mr(mr))
        _exit(3);
    memset(buf, 0x5a, 4096);
    for (int i = 0; i < 200; i++) {   /* 200 ms of watching */
        for (int j = 0; j < 4096; j++)
            if (buf[j] != 0x5a)
                _exit(2);
        usleep(1000);
    }
    char done = 'd';
    st_xfer_send(fd, &done, 1);
    st_xfer_recv(fd, &go, 1);
    _exit(0);
}

TAP_CASE(test_no_push_lands_after_the_peer_deregistered)
{
    int fd;
    int pid = st_fork_peer(peer_deregs, &fd);
    struct st_dev d;
    st_dev_open(&d);
    struct st_qp q;
    struct st_qp_opts o = { .timeout = 10, .retry_cnt = 1 };
    st_qp_create(&d, &q, &o, 64);
    char *src = st_buf(4096, 3);
    memset(src, 0x11, 4096);
    struct ibv_mr *mr = ibv_reg_mr(d.pd, src, 4096, IBV_ACCESS_LOCAL_WRITE);
    struct st_qp_info mine, theirs;
    st_qp_info(&d, &q, &mine);
    st_xfer_recv(fd, &theirs, sizeof(theirs));
    st_xfer_send(fd, &mine, sizeof(mine));
    st_qp_connect(&q, &theirs);
    char go = 'g';
    int ok = 0, failed = 0;
    uint64_t end = st_now_ms() + WAIT_MS;
    for (uint64_t i = 0; !failed && st_now_ms() < end; i++) {
        st_post_rdma(q.qp, IBV_WR_RDMA_WRITE, i, src, 256, mr->lkey, theirs.addr + (i % 16) * 256, theirs.rkey, 0,
                     IBV_SEND_SIGNALED);
        struct ibv_wc wc;
        st_wait_wc(q.scq, &wc, WAIT_MS);
        EXPECT_EQ_U64(i, wc.wr_id);
        if (wc.status == IBV_WC_SUCCESS)
            ok++;
        else
            failed = 1;
        if (ok == 50)
            st_xfer_send(fd, &go, 1);
    }
    tap_diag("%d writes landed (%llu placed by the push), then one failed", ok,
             (unsigned long long)pushed(q.qp));
    EXPECT_TRUE(ok >= 50 && failed);
    if (push_on())
        EXPECT_TRUE(pushed(q.qp) >= 40);
    char done;
    st_xfer_recv(fd, &done, 1);   /* the peer watched its bytes stay */
    st_xfer_send(fd, &go, 1);
    int status;
    EXPECT_EQ_INT(pid, waitpid(pid, &status, 0));
    EXPECT_TRUE(WIFEXITED(status));
    EXPECT_EQ_INT(0, WEXITSTATUS(status));
    close(fd);
    st_qp_destroy(&q);
    ibv_dereg_mr(mr);
    st_dev_close(&d);
}

/* A QP a GPU drives (softnic's mlx5 layer posts what the GPU rang and
 * makes the GPU's CQEs from its completions after the post) is never
 * pushed: its writes take the wire and complete there. */
TAP_CASE(test_a_gpu_driven_qp_places_nothing)
{
    int (*poll_acks)(struct ibv_qp *) = (int (*)(struct ibv_qp *))dlsym(RTLD_DEFAULT, "softnic_priv_qp_poll_acks");
    EXPECT_TRUE(poll_acks != NULL);
    struct fixture f;
    setup(&f);
    EXPECT_EQ_INT(0, poll_acks(f.a.qp));
    uint64_t p0 = pushed(f.a.qp);
    for (int i = 0; i < 10; i++) {
        st_fill(f.src, 256, 80u + (unsigned)i);
        EXPECT_EQ_INT(IBV_WC_SUCCESS, write_one(&f, 10 + (uint64_t)i, 0, 256, f.dmr->rkey, 0));
        EXPECT_MEMEQ(f.src, f.dst, 256);
    }
    EXPECT_EQ_U64(p0, pushed(f.a.qp));
    /* its peer, an ordinary QP, pushes back */
    EXPECT_EQ_INT(IBV_WC_SUCCESS, write_one(&f, 30, 0, 64, f.dmr->rkey, 0));
    uint64_t q0 = pushed(f.b.qp);
    struct ibv_mr *bmr = ibv_reg_mr(f.d.pd, f.src, BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    struct ibv_wc wc;
    for (uint64_t id = 40; id < 42; id++) {   /* the first opens the connection */
        st_post_rdma(f.b.qp, IBV_WR_RDMA_WRITE, id, f.dst, 64, f.dmr->lkey, (uintptr_t)f.src + 4096, bmr->rkey, 0,
                     IBV_SEND_SIGNALED);
        st_wait_wc(f.b.scq, &wc, WAIT_MS);
        EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, id);
    }
    EXPECT_MEMEQ(f.dst, f.src + 4096, 64);
    EXPECT_TRUE(!push_on() || pushed(f.b.qp) > q0);
    ibv_dereg_mr(bmr);
    teardown(&f);
}

/* A paced port keeps its pacing: nothing is placed around the limit. */
TAP_CASE(test_a_paced_port_places_nothing)
{
    struct fixture f;
    setup(&f);
    EXPECT_EQ_INT(IBV_WC_SUCCESS, write_one(&f, 1, 0, 64, f.dmr->rkey, 0));
    EXPECT_EQ_INT(0, st_ctl()->port_set_rate(f.d.ctx, 1, 1000000000ull));
    uint64_t p0 = pushed(f.a.qp);
    for (int i = 0; i < 10; i++)
        EXPECT_EQ_INT(IBV_WC_SUCCESS, write_one(&f, 10 + (uint64_t)i, 0, 256, f.dmr->rkey, 0));
    EXPECT_MEMEQ(f.src, f.dst, 256);
    EXPECT_EQ_U64(p0, pushed(f.a.qp));
    teardown(&f);
}

int main(int argc, char **argv) { return sntest_main(argc, argv); }
