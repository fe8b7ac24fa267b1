/* tests/softnic/test_softnic_cq.c: completion queues: polling order and
 * batches, resize, argument checks, overrun (IBV_EVENT_CQ_ERR), completion
 * channels with ibv_req_notify_cq / ibv_get_cq_event / ibv_ack_cq_events,
 * solicited-only arming, a CQ two engines fill while it is polled and
 * resized. */
#include "sntest.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#define WAIT_MS 5000

struct fixture {
    struct st_dev d;
    struct st_qp a, b;
    char *buf;
    struct ibv_mr *mr;
};

static void setup(struct fixture *f, const struct st_qp_opts *o)
{
    st_dev_open(&f->d);
    st_qp_pair(&f->d, &f->a, &f->b, o);
    f->buf = st_buf(8192, 1);
    f->mr = ibv_reg_mr(f->d.pd, f->buf, 8192,
                       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    EXPECT_TRUE(f->mr != NULL);
}

static void teardown(struct fixture *f)
{
    EXPECT_EQ_INT(0, ibv_dereg_mr(f->mr));
    st_qp_destroy(&f->a);
    st_qp_destroy(&f->b);
    st_dev_close(&f->d);
}

static void write_n(struct fixture *f, struct ibv_qp *qp, int n, unsigned flags)
{
    for (int i = 0; i < n; i++)
        st_post_rdma(qp, IBV_WR_RDMA_WRITE, (uint64_t)i, f->buf, 64, f->mr->lkey,
                     (uintptr_t)f->buf + 4096, f->mr->rkey, 0, flags);
}

TAP_CASE(test_poll_returns_completions_in_order_in_batches)
{
    struct fixture f;
    setup(&f, NULL);
    write_n(&f, f.a.qp, 10, IBV_SEND_SIGNALED);
    struct ibv_wc wc[4];
    int seen = 0;
    uint64_t end = st_now_ms() + WAIT_MS;
    while (seen < 10 && st_now_ms() < end) {
        int n = ibv_poll_cq(f.a.scq, 4, wc);
        EXPECT_TRUE(n >= 0 && n <= 4);
        for (int i = 0; i < n; i++) {
            EXPECT_WC(wc[i], IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, (uint64_t)seen);
            seen++;
        }
    }
    EXPECT_EQ_INT(10, seen);
    EXPECT_EQ_INT(0, ibv_poll_cq(f.a.scq, 4, wc));
    teardown(&f);
}

TAP_CASE(test_create_cq_checks_its_arguments)
{
    struct st_dev d;
    st_dev_open(&d);
    struct ibv_device_attr a;
    EXPECT_EQ_INT(0, ibv_query_device(d.ctx, &a));
    errno = 0;
    EXPECT_TRUE(ibv_create_cq(d.ctx, 0, NULL, NULL, 0) == NULL);
    EXPECT_EQ_INT(EINVAL, errno);
    EXPECT_TRUE(ibv_create_cq(d.ctx, a.max_cqe + 1, NULL, NULL, 0) == NULL);
    EXPECT_TRUE(ibv_create_cq(d.ctx, 4, NULL, NULL, d.ctx->num_comp_vectors) == NULL);
    int ctx_tag;
    struct ibv_cq *cq = ibv_create_cq(d.ctx, 100, &ctx_tag, NULL, 0);
    EXPECT_TRUE(cq != NULL);
    EXPECT_TRUE(cq->cqe >= 100);
    EXPECT_TRUE(cq->cq_context == &ctx_tag);
    EXPECT_TRUE(cq->context == d.ctx);
    EXPECT_EQ_INT(0, ibv_destroy_cq(cq));
    st_dev_close(&d);
}

TAP_CASE(test_resize_keeps_pending_completions)
{
    struct fixture f;
    setup(&f, NULL);
    write_n(&f, f.a.qp, 6, IBV_SEND_SIGNALED);
    struct ibv_wc wc;
    st_wait_wc(f.a.scq, &wc, WAIT_MS);     /* one polled, five held or coming */
    EXPECT_EQ_U64(0, wc.wr_id);
    EXPECT_EQ_INT(EINVAL, ibv_resize_cq(f.a.scq, 0));
    EXPECT_EQ_INT(0, ibv_resize_cq(f.a.scq, 1000));
    EXPECT_TRUE(f.a.scq->cqe >= 1000);
    for (uint64_t i = 1; i < 6; i++) {
        st_wait_wc(f.a.scq, &wc, WAIT_MS);
        EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, i);
    }
    teardown(&f);
}

TAP_CASE(test_cq_overrun_raises_cq_err)
{
    struct st_dev d;
    st_dev_open(&d);
    struct ibv_cq *small = ibv_create_cq(d.ctx, 4, NULL, NULL, 0);
    struct ibv_cq *rcq = ibv_create_cq(d.ctx, 16, NULL, NULL, 0);
    struct ibv_qp_init_attr ia = { .send_cq = small, .recv_cq = rcq, .qp_type = IBV_QPT_RC,
                                   .cap = { 32, 4, 1, 1, 0 } };
    struct st_qp a = { .scq = small, .rcq = rcq }, b;
    a.qp = ibv_create_qp(d.pd, &ia);
    EXPECT_TRUE(a.qp != NULL);
    st_qp_create(&d, &b, NULL, 16);
    struct st_qp_info ia_, ib_;
    st_qp_info(&d, &a, &ia_);
    st_qp_info(&d, &b, &ib_);
    st_qp_connect(&a, &ib_);
    st_qp_connect(&b, &ia_);
    char *buf = st_buf(4096, 1);
    struct ibv_mr *mr = ibv_reg_mr(d.pd, buf, 4096,
                                   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    for (int i = 0; i < 12; i++)
        st_post_rdma(a.qp, IBV_WR_RDMA_WRITE, (uint64_t)i, buf, 8, mr->lkey, (uintptr_t)buf + 64,
                     mr->rkey, 0, IBV_SEND_SIGNALED);
    struct ibv_async_event ev;
    EXPECT_TRUE(st_wait_async(d.ctx, IBV_EVENT_CQ_ERR, WAIT_MS, &ev));
    EXPECT_TRUE(ev.element.cq == small);
    EXPECT_EQ_INT(0, ibv_destroy_qp(a.qp));
    st_qp_destroy(&b);
    EXPECT_EQ_INT(0, ibv_destroy_cq(small));
    EXPECT_EQ_INT(0, ibv_destroy_cq(rcq));
    EXPECT_EQ_INT(0, ibv_dereg_mr(mr));
    st_dev_close(&d);
}

/* Two responders fill one small receive CQ from their engine threads
 * while this thread polls it in odd batches and another resizes it
 * without pause: every completion arrives once, in its QP's order, with
 * no overrun (each receiver has at most RING_POSTED receives posted, so
 * the CQ never holds more than it can). */
#define RING_POSTED 4
#define RING_MSGS 4000
#define RING_BYTES 8192   /* pulled by the engine, not pushed by the poster */

struct resizer {
    struct ibv_cq *cq;
    _Atomic bool stop;
    int calls, fails;
};

static void *resize_loop(void *arg)
{
    struct resizer *r = arg;
    for (int i = 0; !atomic_load(&r->stop); i++) {
        if (ibv_resize_cq(r->cq, 2 * RING_POSTED + i % 7) != 0)
            r->fails++;
        r->calls++;
    }
    return NULL;
}

TAP_CASE(test_a_shared_cq_keeps_every_completion_while_engines_fill_it_and_it_resizes)
{
    struct st_dev d;
    st_dev_open(&d);
    struct ibv_cq *rcq = ibv_create_cq(d.ctx, 2 * RING_POSTED, NULL, NULL, 0);
    EXPECT_TRUE(rcq != NULL);
    struct st_qp s[2], r[2];
    char *buf = st_buf(4 * RING_BYTES, 1);
    struct ibv_mr *mr = ibv_reg_mr(d.pd, buf, 4 * RING_BYTES,
                                   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    EXPECT_TRUE(mr != NULL);
    for (int k = 0; k < 2; k++) {
        st_qp_create(&d, &s[k], NULL, 64);
        /* the receiver's completions go to the shared CQ */
        struct ibv_qp_init_attr ia = { .send_cq = rcq, .recv_cq = rcq, .qp_type = IBV_QPT_RC,
                                       .cap = { 16, RING_POSTED, 1, 1, 0 } };
        r[k] = (struct st_qp){ .scq = rcq, .rcq = rcq };
        r[k].qp = ibv_create_qp(d.pd, &ia);
        EXPECT_TRUE(r[k].qp != NULL);
        struct st_qp_info si, ri;
        st_qp_info(&d, &s[k], &si);
        st_qp_info(&d, &r[k], &ri);
        st_qp_connect(&s[k], &ri);
        st_qp_connect(&r[k], &si);
        for (int i = 0; i < RING_POSTED; i++)
            st_post_recv(r[k].qp, (uint64_t)k, NULL, 0, 0);
    }
    struct resizer rz = { .cq = rcq };
    pthread_t t;
    EXPECT_EQ_INT(0, pthread_create(&t, NULL, resize_loop, &rz));
    uint32_t sent[2] = { 0 }, got[2] = { 0 }, done[2] = { 0 };
    int bad_order = 0, bad_status = 0, stray = 0;
    uint64_t end = st_now_ms() + 20000;
    while ((got[0] < RING_MSGS || got[1] < RING_MSGS) && st_now_ms() < end) {
        for (int k = 0; k < 2; k++) {
            struct ibv_wc wc;
            while (ibv_poll_cq(s[k].scq, 1, &wc) == 1)
                done[k]++;
            /* no more in flight than receives posted, so none waits (RNR) */
            if (sent[k] < RING_MSGS && sent[k] - got[k] < RING_POSTED && sent[k] - done[k] < 16) {
                char *src = buf + (size_t)(2 * k) * RING_BYTES;
                st_post_rdma(s[k].qp, IBV_WR_RDMA_WRITE_WITH_IMM, sent[k], src, RING_BYTES, mr->lkey,
                             (uintptr_t)(buf + (size_t)(2 * k + 1) * RING_BYTES), mr->rkey, sent[k],
                             IBV_SEND_SIGNALED);
                sent[k]++;
            }
        }
        struct ibv_wc wc[3];
        int n = ibv_poll_cq(rcq, 3, wc);
        EXPECT_TRUE(n >= 0 && n <= 3);
        for (int i = 0; i < n; i++) {
            int k = wc[i].qp_num == r[0].qp->qp_num ? 0 : wc[i].qp_num == r[1].qp->qp_num ? 1 : -1;
            if (k < 0) {
                stray++;
                continue;
            }
            if (wc[i].status != IBV_WC_SUCCESS || wc[i].opcode != IBV_WC_RECV_RDMA_WITH_IMM)
                bad_status++;
            if (ntohl(wc[i].imm_data) != got[k])
                bad_order++;
            got[k]++;
            st_post_recv(r[k].qp, (uint64_t)k, NULL, 0, 0);
        }
    }
    atomic_store(&rz.stop, true);
    pthread_join(t, NULL);
    EXPECT_EQ_INT(RING_MSGS, (int)got[0]);
    EXPECT_EQ_INT(RING_MSGS, (int)got[1]);
    EXPECT_EQ_INT(0, bad_order);
    EXPECT_EQ_INT(0, bad_status);
    EXPECT_EQ_INT(0, stray);
    tap_diag("%d resizes while %d completions went through", rz.calls, 2 * RING_MSGS);
    EXPECT_TRUE(rz.calls > 0);
    EXPECT_EQ_INT(0, rz.fails);   /* never fewer entries than pending */
    struct ibv_async_event ev;
    EXPECT_TRUE(!st_wait_async(d.ctx, IBV_EVENT_CQ_ERR, 10, &ev));
    struct ibv_wc extra;
    EXPECT_EQ_INT(0, ibv_poll_cq(rcq, 1, &extra));
    for (int k = 0; k < 2; k++) {
        st_qp_destroy(&s[k]);
        EXPECT_EQ_INT(0, ibv_destroy_qp(r[k].qp));
    }
    EXPECT_EQ_INT(0, ibv_destroy_cq(rcq));
    EXPECT_EQ_INT(0, ibv_dereg_mr(mr));
    st_dev_close(&d);
}

static bool readable(int fd, int ms)
{
    struct pollfd p = { .fd = fd, .events = POLLIN };
    return poll(&p, 1, ms) == 1;
}

TAP_CASE(test_completion_channel_signals_once_per_arm)
{
    struct st_dev d;
    st_dev_open(&d);
    struct ibv_comp_channel *ch = ibv_create_comp_channel(d.ctx);
    EXPECT_TRUE(ch != NULL);
    int tag;
    struct ibv_cq *cq = ibv_create_cq(d.ctx, 64, &tag, ch, 0);
    EXPECT_TRUE(cq != NULL);
    EXPECT_EQ_INT(EBUSY, ibv_destroy_comp_channel(ch));   /* a CQ uses it */
    struct st_qp a = { .scq = cq }, b;
    a.rcq = ibv_create_cq(d.ctx, 16, NULL, NULL, 0);
    struct ibv_qp_init_attr ia = { .send_cq = cq, .recv_cq = a.rcq, .qp_type = IBV_QPT_RC,
                                   .cap = { 32, 4, 1, 1, 0 } };
    a.qp = ibv_create_qp(d.pd, &ia);
    st_qp_create(&d, &b, NULL, 16);
    struct st_qp_info ia_, ib_;
    st_qp_info(&d, &a, &ia_);
    st_qp_info(&d, &b, &ib_);
    st_qp_connect(&a, &ib_);
    st_qp_connect(&b, &ia_);
    char *buf = st_buf(4096, 1);
    struct ibv_mr *mr = ibv_reg_mr(d.pd, buf, 4096,
                                   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    EXPECT_EQ_INT(0, ibv_req_notify_cq(cq, 0));
    EXPECT_TRUE(!readable(ch->fd, 20));
    st_post_rdma(a.qp, IBV_WR_RDMA_WRITE, 1, buf, 8, mr->lkey, (uintptr_t)buf + 64, mr->rkey, 0,
                 IBV_SEND_SIGNALED);
    EXPECT_TRUE(readable(ch->fd, WAIT_MS));
    struct ibv_cq *ev_cq = NULL;
    void *ev_ctx = NULL;
    EXPECT_EQ_INT(0, ibv_get_cq_event(ch, &ev_cq, &ev_ctx));
    EXPECT_TRUE(ev_cq == cq);
    EXPECT_TRUE(ev_ctx == &tag);
    ibv_ack_cq_events(cq, 1);
    struct ibv_wc wc;
    st_wait_wc(cq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 1);
    /* not re-armed: a completion comes, no event */
    st_post_rdma(a.qp, IBV_WR_RDMA_WRITE, 2, buf, 8, mr->lkey, (uintptr_t)buf + 64, mr->rkey, 0,
                 IBV_SEND_SIGNALED);
    st_wait_wc(cq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 2);
    EXPECT_TRUE(!readable(ch->fd, 50));
    /* re-armed: the next one signals again */
    EXPECT_EQ_INT(0, ibv_req_notify_cq(cq, 0));
    st_post_rdma(a.qp, IBV_WR_RDMA_WRITE, 3, buf, 8, mr->lkey, (uintptr_t)buf + 64, mr->rkey, 0,
                 IBV_SEND_SIGNALED);
    EXPECT_TRUE(readable(ch->fd, WAIT_MS));
    EXPECT_EQ_INT(0, ibv_get_cq_event(ch, &ev_cq, &ev_ctx));
    ibv_ack_cq_events(cq, 1);
    st_wait_wc(cq, &wc, WAIT_MS);
    EXPECT_EQ_INT(0, ibv_destroy_qp(a.qp));
    st_qp_destroy(&b);
    EXPECT_EQ_INT(0, ibv_destroy_cq(cq));
    EXPECT_EQ_INT(0, ibv_destroy_cq(a.rcq));
    EXPECT_EQ_INT(0, ibv_destroy_comp_channel(ch));
    EXPECT_EQ_INT(0, ibv_dereg_mr(mr));
    st_dev_close(&d);
}

TAP_CASE(test_solicited_only_arm_waits_for_a_solicited_receive)
{
    struct st_dev d;
    st_dev_open(&d);
    struct ibv_comp_channel *ch = ibv_create_comp_channel(d.ctx);
    struct ibv_cq *rcq = ibv_create_cq(d.ctx, 64, NULL, ch, 0);
    struct st_qp a, b = { .rcq = rcq };
    b.scq = ibv_create_cq(d.ctx, 16, NULL, NULL, 0);
    struct ibv_qp_init_attr ia = { .send_cq = b.scq, .recv_cq = rcq, .qp_type = IBV_QPT_RC,
                                   .cap = { 4, 32, 1, 1, 0 } };
    b.qp = ibv_create_qp(d.pd, &ia);
    st_qp_create(&d, &a, NULL, 16);
    struct st_qp_info ia_, ib_;
    st_qp_info(&d, &a, &ia_);
    st_qp_info(&d, &b, &ib_);
    st_qp_connect(&a, &ib_);
    st_qp_connect(&b, &ia_);
    char *buf = st_buf(4096, 1);
    struct ibv_mr *mr = ibv_reg_mr(d.pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
    for (int i = 0; i < 4; i++)
        st_post_recv(b.qp, (uint64_t)i, buf + 1024 * i, 1024, mr->lkey);
    EXPECT_EQ_INT(0, ibv_req_notify_cq(rcq, 1));
    st_post_send(a.qp, 10, buf, 16, mr->lkey, 0);
    struct ibv_wc wc;
    st_wait_wc(rcq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RECV, 0);
    EXPECT_TRUE(!readable(ch->fd, 50));           /* unsolicited: no event */
    st_post_send(a.qp, 11, buf, 16, mr->lkey, IBV_SEND_SOLICITED);
    EXPECT_TRUE(readable(ch->fd, WAIT_MS));
    struct ibv_cq *ev_cq;
    void *ev_ctx;
    EXPECT_EQ_INT(0, ibv_get_cq_event(ch, &ev_cq, &ev_ctx));
    EXPECT_TRUE(ev_cq == rcq);
    ibv_ack_cq_events(rcq, 1);
    st_wait_wc(rcq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RECV, 1);
    EXPECT_EQ_INT(0, ibv_destroy_qp(b.qp));
    st_qp_destroy(&a);
    EXPECT_EQ_INT(0, ibv_destroy_cq(rcq));
    EXPECT_EQ_INT(0, ibv_destroy_cq(b.scq));
    EXPECT_EQ_INT(0, ibv_destroy_comp_channel(ch));
    EXPECT_EQ_INT(0, ibv_dereg_mr(mr));
    st_dev_close(&d);
}

TAP_CASE(test_arming_a_cq_without_channel_is_harmless)
{
    struct fixture f;
    setup(&f, NULL);
    /* as on mlx5: arming succeeds, there is just nobody to tell */
    EXPECT_EQ_INT(0, ibv_req_notify_cq(f.a.scq, 0));
    write_n(&f, f.a.qp, 1, IBV_SEND_SIGNALED);
    struct ibv_wc wc;
    st_wait_wc(f.a.scq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 0);
    teardown(&f);
}

TAP_CASE(test_async_fd_polls_readable_only_while_an_event_waits)
{
    struct st_dev d;
    st_dev_open(&d);
    EXPECT_TRUE(!readable(d.ctx->async_fd, 20));
    EXPECT_EQ_INT(0, st_ctl()->port_set_state(d.ctx, 1, 0));
    EXPECT_TRUE(readable(d.ctx->async_fd, WAIT_MS));
    struct ibv_async_event ev;
    EXPECT_EQ_INT(0, ibv_get_async_event(d.ctx, &ev));
    EXPECT_EQ_INT(IBV_EVENT_PORT_ERR, ev.event_type);
    ibv_ack_async_event(&ev);
    EXPECT_TRUE(!readable(d.ctx->async_fd, 20));
    /* a non-blocking async fd says EAGAIN when nothing waits */
    int fl = fcntl(d.ctx->async_fd, F_GETFL);
    EXPECT_EQ_INT(0, fcntl(d.ctx->async_fd, F_SETFL, fl | O_NONBLOCK));
    errno = 0;
    EXPECT_EQ_INT(-1, ibv_get_async_event(d.ctx, &ev));
    EXPECT_EQ_INT(EAGAIN, errno);
    st_dev_close(&d);
}

int main(int argc, char **argv) { return sntest_main(argc, argv); }
