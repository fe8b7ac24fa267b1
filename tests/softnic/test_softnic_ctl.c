/* tests/softnic/test_softnic_ctl.c: what tests can read and set through
 * softnic's control API (softnic_ctl.h): per-port and per-QP counters, the
 * per-port rate limit and added latency.  Time only bounds from below here
 * (a limit must never be beaten); how close softnic gets to a rate is a
 * benchmark's business, not a test's. */
#include "sntest.h"

#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>

#define WAIT_MS 10000
#define ALL_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

struct fixture {
    struct st_dev d;
    struct st_qp a, b;
    char *src, *dst;
    size_t len;
    struct ibv_mr *smr, *dmr;
    const struct st_ctl *ctl;
};

static void setup(struct fixture *f, const struct st_qp_opts *o, size_t len)
{
    st_dev_open(&f->d);
    st_qp_pair(&f->d, &f->a, &f->b, o);
    f->len = len;
    f->src = st_buf(len, 1);
    f->dst = st_buf(len, 2);
    f->smr = ibv_reg_mr(f->d.pd, f->src, len, ALL_ACCESS);
    f->dmr = ibv_reg_mr(f->d.pd, f->dst, len, ALL_ACCESS);
    f->ctl = st_ctl();
}

static void teardown(struct fixture *f)
{
    EXPECT_EQ_INT(0, ibv_dereg_mr(f->smr));
    EXPECT_EQ_INT(0, ibv_dereg_mr(f->dmr));
    st_qp_destroy(&f->a);
    st_qp_destroy(&f->b);
    st_dev_close(&f->d);
}

TAP_CASE(test_counters_count_payload_bytes_and_mtu_packets)
{
    struct fixture f;
    setup(&f, NULL, 1 << 20);
    /* path MTU 4096 (st_qp_connect): 10000 bytes are 3 packets */
    for (int i = 0; i < 10; i++)
        st_post_rdma(f.a.qp, IBV_WR_RDMA_WRITE, (uint64_t)i, f.src, 10000, f.smr->lkey,
                     (uintptr_t)f.dst, f.dmr->rkey, 0, IBV_SEND_SIGNALED);
    st_post_recv(f.b.qp, 1, f.dst, 4096, f.dmr->lkey);
    st_post_send(f.a.qp, 10, f.src, 0, f.smr->lkey, IBV_SEND_SIGNALED);   /* 1 packet */
    for (int i = 0; i <= 10; i++) {
        struct ibv_wc wc;
        st_wait_wc(f.a.scq, &wc, WAIT_MS);
        EXPECT_EQ_INT(IBV_WC_SUCCESS, wc.status);
    }
    struct softnic_ctl_counters qa, qb, p1;
    EXPECT_EQ_INT(0, f.ctl->qp_counters(f.a.qp, &qa));
    EXPECT_EQ_INT(0, f.ctl->qp_counters(f.b.qp, &qb));
    EXPECT_EQ_INT(0, f.ctl->port_counters(f.d.ctx, 1, &p1));
    EXPECT_EQ_U64(100000, qa.tx_bytes);
    EXPECT_EQ_U64(31, qa.tx_packets);
    EXPECT_EQ_U64(100000, qb.rx_bytes);
    EXPECT_EQ_U64(31, qb.rx_packets);
    EXPECT_EQ_U64(0, qa.errors);
    EXPECT_EQ_U64(0, qa.retries);
    /* both QPs live on port 1 of this process */
    EXPECT_EQ_U64(100000, p1.tx_bytes);
    EXPECT_EQ_U64(100000, p1.rx_bytes);
    EXPECT_EQ_U64(31, p1.tx_packets);
    struct softnic_ctl_counters p2;
    EXPECT_EQ_INT(0, f.ctl->port_counters(f.d.ctx, 2, &p2));
    EXPECT_EQ_U64(0, p2.tx_bytes);
    EXPECT_EQ_INT(EINVAL, f.ctl->port_counters(f.d.ctx, 3, &p2));
    teardown(&f);
}

/* What a QP's address vector says of its traffic class reaches the port's
 * per-class counters (and ibv_query_qp): as a NIC's per-priority counters
 * see a connection's class. */
TAP_CASE(test_port_counts_request_bytes_by_the_qps_traffic_class)
{
    struct fixture f;
    struct st_qp_opts o = { .traffic_class = 96 };
    setup(&f, &o, 1 << 16);
    uint64_t before0 = 0, before96 = 0;
    EXPECT_EQ_INT(0, f.ctl->port_tc_bytes(f.d.ctx, 1, 0, &before0));
    EXPECT_EQ_INT(0, f.ctl->port_tc_bytes(f.d.ctx, 1, 96, &before96));
    EXPECT_EQ_U64(0, before96);
    st_post_rdma(f.a.qp, IBV_WR_RDMA_WRITE, 1, f.src, 50000, f.smr->lkey, (uintptr_t)f.dst, f.dmr->rkey, 0,
                 IBV_SEND_SIGNALED);
    struct ibv_wc wc;
    st_wait_wc(f.a.scq, &wc, WAIT_MS);
    EXPECT_EQ_INT(IBV_WC_SUCCESS, wc.status);
    uint64_t tc0 = 0, tc96 = 0;
    EXPECT_EQ_INT(0, f.ctl->port_tc_bytes(f.d.ctx, 1, 0, &tc0));
    EXPECT_EQ_INT(0, f.ctl->port_tc_bytes(f.d.ctx, 1, 96, &tc96));
    EXPECT_EQ_U64(50000, tc96);
    EXPECT_EQ_U64(before0, tc0);
    struct ibv_qp_attr qa;
    struct ibv_qp_init_attr qia;
    EXPECT_EQ_INT(0, ibv_query_qp(f.a.qp, &qa, IBV_QP_AV, &qia));
    EXPECT_EQ_INT(96, qa.ah_attr.grh.traffic_class);
    EXPECT_EQ_INT(EINVAL, f.ctl->port_tc_bytes(f.d.ctx, 3, 0, &tc0));
    teardown(&f);
}

TAP_CASE(test_counters_count_errors)
{
    struct fixture f;
    setup(&f, NULL, 4096);
    st_post_rdma(f.a.qp, IBV_WR_RDMA_WRITE, 1, f.src, 64, f.smr->lkey, (uintptr_t)f.dst,
                 f.dmr->rkey + 1, 0, IBV_SEND_SIGNALED);
    struct ibv_wc wc;
    st_wait_wc(f.a.scq, &wc, WAIT_MS);
    EXPECT_EQ_INT(IBV_WC_REM_ACCESS_ERR, wc.status);
    struct softnic_ctl_counters qa, qb;
    EXPECT_EQ_INT(0, f.ctl->qp_counters(f.a.qp, &qa));
    EXPECT_EQ_INT(0, f.ctl->qp_counters(f.b.qp, &qb));
    EXPECT_EQ_U64(1, qa.errors);     /* the error completion */
    EXPECT_EQ_U64(1, qb.errors);     /* the NAK it sent */
    teardown(&f);
}

static uint64_t timed_writes(struct fixture *f, int n, uint32_t len)
{
    uint64_t t0 = st_now_ms();
    for (int i = 0; i < n; i++)
        st_post_rdma(f->a.qp, IBV_WR_RDMA_WRITE, (uint64_t)i, f->src, len, f->smr->lkey,
                     (uintptr_t)f->dst, f->dmr->rkey, 0, i == n - 1 ? IBV_SEND_SIGNALED : 0);
    struct ibv_wc wc;
    st_wait_wc(f->a.scq, &wc, WAIT_MS * 3);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, (uint64_t)(n - 1));
    return st_now_ms() - t0;
}

TAP_CASE(test_port_rate_limit_is_never_beaten)
{
    struct fixture f;
    setup(&f, NULL, 1 << 20);
    /* 16 MiB at 40 MB/s: at least ~420 ms whatever the machine */
    EXPECT_EQ_INT(0, f.ctl->port_set_rate(f.d.ctx, 1, 40000000));
    uint64_t ms = timed_writes(&f, 16, 1 << 20);
    tap_diag("16 MiB at 40 MB/s took %" PRIu64 " ms (ideal 419)", ms);
    EXPECT_TRUE(ms >= 400);
    EXPECT_MEMEQ(f.src, f.dst, 1 << 20);
    /* the limit applies to READ responses leaving the responder too */
    uint64_t t0 = st_now_ms();
    st_post_rdma(f.a.qp, IBV_WR_RDMA_READ, 99, f.dst, 1 << 20, f.dmr->lkey, (uintptr_t)f.src,
                 f.smr->rkey, 0, IBV_SEND_SIGNALED);
    st_post_rdma(f.a.qp, IBV_WR_RDMA_READ, 100, f.dst, 1 << 20, f.dmr->lkey, (uintptr_t)f.src,
                 f.smr->rkey, 0, IBV_SEND_SIGNALED);
    struct ibv_wc wc;
    st_wait_wc(f.a.scq, &wc, WAIT_MS);
    st_wait_wc(f.a.scq, &wc, WAIT_MS);
    EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, 100);
    EXPECT_TRUE(st_now_ms() - t0 >= 45);    /* 2 MiB at 40 MB/s = 52 ms */
    EXPECT_EQ_INT(0, f.ctl->port_set_rate(f.d.ctx, 1, 0));
    EXPECT_EQ_INT(EINVAL, f.ctl->port_set_rate(f.d.ctx, 5, 1));
    teardown(&f);
}

TAP_CASE(test_rate_from_the_environment_limits_one_port)
{
    setenv("SOFTNIC_PORT_OPTS", "softnic0:2:rate=20M", 1);
    struct st_qp_opts o = { .port = 2 };
    struct fixture f;
    setup(&f, &o, 1 << 20);
    /* 4 MiB at 20 MB/s: at least ~200 ms */
    uint64_t ms = timed_writes(&f, 4, 1 << 20);
    tap_diag("4 MiB at 20 MB/s took %" PRIu64 " ms (ideal 210)", ms);
    EXPECT_TRUE(ms >= 190);
    teardown(&f);
}

TAP_CASE(test_added_latency_delays_every_message)
{
    struct fixture f;
    setup(&f, NULL, 4096);
    EXPECT_EQ_INT(0, f.ctl->port_set_latency(f.d.ctx, 1, 30000));
    uint64_t t0 = st_now_ms();
    for (int i = 0; i < 3; i++) {
        st_post_rdma(f.a.qp, IBV_WR_RDMA_WRITE, (uint64_t)i, f.src, 8, f.smr->lkey,
                     (uintptr_t)f.dst, f.dmr->rkey, 0, IBV_SEND_SIGNALED);
        struct ibv_wc wc;
        st_wait_wc(f.a.scq, &wc, WAIT_MS);
        EXPECT_WC(wc, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, (uint64_t)i);
    }
    uint64_t ms = st_now_ms() - t0;
    tap_diag("3 round trips with 30 ms one-way latency took %" PRIu64 " ms", ms);
    EXPECT_TRUE(ms >= 90);
    teardown(&f);
}

int main(int argc, char **argv) { return sntest_main(argc, argv); }

/* softnic_ctl_device_fatal: one IBV_EVENT_DEVICE_FATAL on every context of
 * the device, no port events, both ports down (until set up again). */
TAP_CASE(test_device_fatal_posts_one_event_and_takes_the_ports_down)
{
    struct st_dev d, d2;
    st_dev_open(&d);
    st_dev_open(&d2);
    int (*fatal)(struct ibv_context *);
    *(void **)&fatal = dlsym(RTLD_DEFAULT, "softnic_ctl_device_fatal");
    EXPECT_TRUE(fatal != NULL);
    EXPECT_EQ_INT(EINVAL, fatal(NULL));
    EXPECT_EQ_INT(0, fatal(d.ctx));
    struct ibv_context *both[2] = { d.ctx, d2.ctx };
    for (int i = 0; i < 2; i++) {
        struct ibv_async_event ev;
        EXPECT_EQ_INT(0, ibv_get_async_event(both[i], &ev));
        EXPECT_EQ_INT(IBV_EVENT_DEVICE_FATAL, ev.event_type);
        ibv_ack_async_event(&ev);
        struct pollfd p = { .fd = both[i]->async_fd, .events = POLLIN };
        EXPECT_EQ_INT(0, poll(&p, 1, 0));   /* nothing else: no port events */
    }
    for (uint8_t port = 1; port <= 2; port++) {
        struct ibv_port_attr a;
        EXPECT_EQ_INT(0, ibv_query_port(d.ctx, port, &a));
        EXPECT_EQ_INT(IBV_PORT_DOWN, a.state);
        EXPECT_EQ_INT(0, st_ctl()->port_set_state(d.ctx, port, 1));
        EXPECT_EQ_INT(0, ibv_query_port(d.ctx, port, &a));
        EXPECT_EQ_INT(IBV_PORT_ACTIVE, a.state);
    }
    st_dev_close(&d2);
    st_dev_close(&d);
}

TAP_CASE(test_objects_count_live_qps_cqs_and_mrs)
{
    const struct st_ctl *ctl = st_ctl();
    struct softnic_ctl_objects before, during, after;
    EXPECT_EQ_INT(0, ctl->objects(&before));
    struct fixture f;
    setup(&f, NULL, 4096);
    EXPECT_EQ_INT(0, ctl->objects(&during));
    /* a QP pair with a send and a receive CQ each, two MRs */
    EXPECT_EQ_U64((uint64_t)(before.qps + 2), (uint64_t)during.qps);
    EXPECT_EQ_U64((uint64_t)(before.cqs + 4), (uint64_t)during.cqs);
    EXPECT_EQ_U64((uint64_t)(before.mrs + 2), (uint64_t)during.mrs);
    teardown(&f);
    EXPECT_EQ_INT(0, ctl->objects(&after));
    EXPECT_EQ_U64((uint64_t)before.qps, (uint64_t)after.qps);
    EXPECT_EQ_U64((uint64_t)before.cqs, (uint64_t)after.cqs);
    EXPECT_EQ_U64((uint64_t)before.mrs, (uint64_t)after.mrs);
    EXPECT_EQ_INT(EINVAL, ctl->objects(NULL));
}
