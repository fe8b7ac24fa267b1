/* tests/plugin/test_p2p_wire.c: what one message costs on the wire, and
 * that the cheaper encodings keep sizes and bytes right, through the
 * plugin's exported table (loaded by path as NCCL loads it) on one softnic
 * port with one QP (RAILNET_HCA==softnic0:1, RAILNET_QPS_PER_CONN=1), with
 * softnic's port counters read in the same process:
 *  - sizes on both sides of the immediate's limit (16382 bytes go in it,
 *    16383 and up in the sizes area) and of "the whole posted receive"
 *    (which the immediate names without a size write) arrive with their
 *    size and their bytes;
 *  - a message that fills its receive costs its payload and the 64-byte
 *    clear-to-send on the port, nothing more; a smaller one above the
 *    limit costs 4 bytes more (the size write);
 *  - thousands of messages one at a time (clear-to-send writes mostly
 *    unsignaled, receives posted again in batches) keep flowing, and the
 *    receiver's NIC never runs out of receives (no RNR wait).
 * Waits are bounded (a hang fails a case) but never decide a result. */
#include "../tap.h"
#include "nccl_net_v8.h"
#include "built_plugin.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MSG_MAX (1 << 20)
#define IMM_LIMIT 16382 /* the largest size the immediate carries (plugin/ib/comm.h) */
#define CTS_BYTES 64    /* one clear-to-send entry (HS_CTS_ENTRY_SIZE) */

struct ctl_counters {
    uint64_t tx_bytes, tx_packets, rx_bytes, rx_packets, errors, retries, rnr_naks;
};

static const ncclNet_v8_t *net;
static void *ctx; /* our own context on softnic0: its port counters */
static int (*port_counters)(void *, uint8_t, struct ctl_counters *);

static void logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line, const char *fmt, ...)
{
    (void)level, (void)flags, (void)file, (void)line, (void)fmt;
}

static int load(void)
{
    setenv("RAILNET_HCA", "=softnic0:1", 1);
    setenv("RAILNET_MERGE_PORTS", "0", 1);
    setenv("RAILNET_QPS_PER_CONN", "1", 1);
    void *v;
    if (!(net = built_plugin_load(logger, &v)))
        return -1;
    *(void **)&port_counters = dlsym(v, "softnic_ctl_port_counters");
    if (!port_counters || !(ctx = built_open_first_device(v)))
        return -1;
    return 0;
}

static struct ctl_counters port1(void)
{
    struct ctl_counters c;
    memset(&c, 0, sizeof(c));
    port_counters(ctx, 1, &c);
    return c;
}

/* One message of size bytes into a receive of posted bytes, checked: 0, a
 * plugin error, -1 for a wrong size or byte, -2 for no progress in 30 s. */
static int xfer(struct built_pair *p, int posted, int size, uint64_t id)
{
    for (int i = 0; i < size; i++)
        p->sbuf[i] = (char)(id * 131 + (uint64_t)i * 7 + (uint64_t)(i >> 12));
    memset(p->rbuf, 0xee, (size_t)posted);
    void *rr = NULL, *sr = NULL, *rdata = p->rbuf;
    int tag = (int)(id & 0xffff), sdone = 0, rdone = 0, ssize = -1, rgot = -1;
    double end = built_now_s() + 30;
    ncclResult_t r;
    while (!rr && built_now_s() < end)
        if ((r = net->irecv(p->rc, 1, &rdata, &posted, &tag, &p->rmh, &rr)) != ncclSuccess)
            return r;
    while (!sr && built_now_s() < end)
        if ((r = net->isend(p->sc, p->sbuf, size, tag, p->smh, &sr)) != ncclSuccess)
            return r;
    while ((!sdone || !rdone) && built_now_s() < end) {
        if (!sdone && (r = net->test(sr, &sdone, &ssize)) != ncclSuccess)
            return r;
        if (!rdone && (r = net->test(rr, &rdone, &rgot)) != ncclSuccess)
            return r;
    }
    if (!sdone || !rdone)
        return -2;
    if (ssize != size || rgot != size || memcmp(p->sbuf, p->rbuf, (size_t)size) != 0 ||
        (size < posted && (unsigned char)p->rbuf[size] != 0xee)) {
        printf("# message %llu: posted %d, sent %d, send says %d, receive says %d, bytes %s\n",
               (unsigned long long)id, posted, size, ssize, rgot,
               memcmp(p->sbuf, p->rbuf, (size_t)size) ? "differ" : "equal (or one past the end written)");
        return -1;
    }
    tap_progress();
    return 0;
}

TAP_CASE(test_sizes_around_the_immediate_limit_and_the_posted_size_arrive_exactly)
{
    if (load())
        TAP_SKIP("the plugin or softnic is not available");
    struct built_pair p;
    EXPECT_EQ_INT(0, built_pair_open(net, &p, MSG_MAX));
    const int posted[] = { 1, IMM_LIMIT, IMM_LIMIT + 1, IMM_LIMIT + 2, 65536, 65537, MSG_MAX };
    uint64_t id = 1;
    for (size_t i = 0; i < sizeof(posted) / sizeof(posted[0]); i++) {
        const int P = posted[i];
        const int sent[] = { 0, 1, IMM_LIMIT - 1, IMM_LIMIT, IMM_LIMIT + 1, IMM_LIMIT + 2, P - 1, P };
        for (size_t k = 0; k < sizeof(sent) / sizeof(sent[0]); k++) {
            if (sent[k] < 0 || sent[k] > P)
                continue;
            int r = xfer(&p, P, sent[k], id++);
            if (r)
                printf("# posted %d, sent %d: %d\n", P, sent[k], r);
            EXPECT_EQ_INT(0, r);
        }
    }
    built_pair_close(net, &p);
}

/* tx bytes on port 1 for n messages of size bytes into receives of posted */
static uint64_t tx_per_message(struct built_pair *p, int posted, int size, int n, uint64_t *id)
{
    EXPECT_EQ_INT(0, xfer(p, posted, size, (*id)++)); /* warm */
    uint64_t before = port1().tx_bytes;
    for (int i = 0; i < n; i++)
        EXPECT_EQ_INT(0, xfer(p, posted, size, (*id)++));
    return (port1().tx_bytes - before) / (uint64_t)n;
}

TAP_CASE(test_a_message_filling_its_receive_costs_payload_and_cts_only)
{
    if (load())
        TAP_SKIP("the plugin or softnic is not available");
    struct built_pair p;
    EXPECT_EQ_INT(0, built_pair_open(net, &p, MSG_MAX));
    uint64_t id = 1;
    /* each send waited for its clear-to-send and completed: every write of
     * the message was on the wire before the counters were read again */
    EXPECT_EQ_U64(65536 + CTS_BYTES, tx_per_message(&p, 65536, 65536, 20, &id));
    EXPECT_EQ_U64(MSG_MAX + CTS_BYTES, tx_per_message(&p, MSG_MAX, MSG_MAX, 5, &id));
    EXPECT_EQ_U64(IMM_LIMIT + CTS_BYTES, tx_per_message(&p, MSG_MAX, IMM_LIMIT, 20, &id));
    /* smaller than its receive and above the limit: the size write too */
    EXPECT_EQ_U64(65535 + CTS_BYTES + 4, tx_per_message(&p, 65536, 65535, 20, &id));
    built_pair_close(net, &p);
}

TAP_CASE(test_thousands_of_messages_one_at_a_time_never_starve_the_receive_queue)
{
    if (load())
        TAP_SKIP("the plugin or softnic is not available");
    struct built_pair p;
    EXPECT_EQ_INT(0, built_pair_open(net, &p, MSG_MAX));
    struct ctl_counters before = port1();
    uint64_t id = 1;
    /* many times the CTS ring (32 slots), the send queue (40 entries) and
     * the receive queue (256 + a batch) */
    for (int i = 0; i < 3000; i++)
        EXPECT_EQ_INT(0, xfer(&p, 4096, (i % 3) ? 8 : 4096, id++));
    struct ctl_counters after = port1();
    EXPECT_EQ_U64(before.rnr_naks, after.rnr_naks);
    EXPECT_EQ_U64(before.errors, after.errors);
    built_pair_close(net, &p);
}

int main(int argc, char **argv) { return tap_run(argc, argv); }
