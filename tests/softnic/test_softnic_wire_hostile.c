/* tests/softnic/test_softnic_wire_hostile.c: what arrives on softnic's wire
 * is a peer's to choose. A raw TCP connection to a QP's listener, with the
 * hello of the QP's configured peer, sends requests softnic's requester
 * would never make:
 *  - a delivery time far in the future (deliver_ns is the sender's
 *    monotonic clock plus its port's latency; another host's clock is not
 *    ours): the responder waits at most SN_MAX_LATENCY_US, then serves the
 *    request (the ACK comes), where it used to sleep until that time;
 *  - the same, then the QP destroyed while the responder waits: the
 *    destroy returns at once instead of waiting for the sleep.
 * And the latency a port takes is bounded where it is set (control API). */
#include "sntest.h"
#include "softnic.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Connects to b's listener as a (b's configured peer) and sends the hello. */
static int raw_peer(struct st_dev *d, struct st_qp *a, struct st_qp *b)
{
    union ibv_gid gid;
    EXPECT_EQ_INT(0, ibv_query_gid(d->ctx, 1, 0, &gid));
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)(b->qp->qp_num >> 8)) };
    memcpy(&sa.sin_addr, &gid.raw[12], 4); /* the RoCE v2 IPv4 GID's address */
    EXPECT_TRUE(fd >= 0);
    EXPECT_EQ_INT(0, connect(fd, (struct sockaddr *)&sa, sizeof(sa)));
    struct sn_wire_hello h = { .magic = SN_WIRE_MAGIC, .version = SN_WIRE_VERSION, .rnr_retry = 7,
                               .dst_qpn = b->qp->qp_num, .src_qpn = a->qp->qp_num };
    memcpy(h.src_gid, gid.raw, 16);
    EXPECT_EQ_INT((int)sizeof(h), (int)send(fd, &h, sizeof(h), 0));
    return fd;
}

/* A connected QP pair (a, b) on the first device, and a raw connection to
 * b's listener speaking as a: its socket. */
static int pair_with_raw_peer(struct st_dev *d, struct st_qp *a, struct st_qp *b)
{
    st_dev_open(d);
    struct st_qp_opts o = { .max_send_wr = 4, .max_recv_wr = 4, .max_sge = 1 };
    st_qp_pair(d, a, b, &o);
    return raw_peer(d, a, b);
}

/* A zero-length WRITE, seq 0, to be delivered at deliver_ns. */
static void send_write(int fd, uint64_t deliver_ns)
{
    struct sn_wire_req r = { .op = SN_OP_WRITE, .seq = 0, .len = 0, .deliver_ns = deliver_ns };
    EXPECT_EQ_INT((int)sizeof(r), (int)send(fd, &r, sizeof(r), 0));
}

TAP_CASE(test_a_delivery_time_far_ahead_waits_no_longer_than_the_latency_cap)
{
    struct st_dev d;
    struct st_qp a, b;
    int fd = pair_with_raw_peer(&d, &a, &b);
    uint64_t t0 = st_now_ms();
    send_write(fd, UINT64_MAX);
    struct timeval tv = { .tv_sec = 5 };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    struct sn_wire_resp r;
    memset(&r, 0, sizeof(r));
    ssize_t n = recv(fd, &r, sizeof(r), MSG_WAITALL);
    uint64_t waited = st_now_ms() - t0;
    tap_diag("ACK after %llu ms (cap %u ms)", (unsigned long long)waited, SN_MAX_LATENCY_US / 1000);
    EXPECT_EQ_INT((int)sizeof(r), (int)n);
    EXPECT_EQ_INT(SN_RESP_ACK, r.type);
    EXPECT_EQ_INT(0, (int)r.seq);
    EXPECT_TRUE(waited >= SN_MAX_LATENCY_US / 1000 / 2); /* it did wait: the stamp was in the future */
    close(fd);
    st_qp_destroy(&a);
    st_qp_destroy(&b);
    st_dev_close(&d);
}

TAP_CASE(test_a_qp_destroyed_while_its_responder_waits_is_destroyed_at_once)
{
    struct st_dev d;
    struct st_qp a, b;
    int fd = pair_with_raw_peer(&d, &a, &b);
    send_write(fd, UINT64_MAX);
    usleep(100000); /* the responder has read it and waits */
    uint64_t t0 = st_now_ms();
    st_qp_destroy(&b);
    uint64_t took = st_now_ms() - t0;
    tap_diag("ibv_destroy_qp took %llu ms", (unsigned long long)took);
    EXPECT_TRUE(took < SN_MAX_LATENCY_US / 1000 / 2);
    close(fd);
    st_qp_destroy(&a);
    st_dev_close(&d);
}

TAP_CASE(test_a_port_takes_no_latency_beyond_the_cap)
{
    struct st_dev d;
    st_dev_open(&d);
    const struct st_ctl *c = st_ctl();
    EXPECT_TRUE(c->port_set_latency != NULL);
    if (c->port_set_latency) {
        EXPECT_EQ_INT(EINVAL, c->port_set_latency(d.ctx, 1, SN_MAX_LATENCY_US + 1));
        EXPECT_EQ_INT(0, c->port_set_latency(d.ctx, 1, SN_MAX_LATENCY_US));
        EXPECT_EQ_INT(0, c->port_set_latency(d.ctx, 1, 0));
    }
    st_dev_close(&d);
}

int main(int argc, char **argv) { return sntest_main(argc, argv); }
