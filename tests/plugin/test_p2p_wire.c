/* tests/plugin/test_p2p_wire.c: what one message costs on the wire, and
 * that the cheaper encodings keep sizes and bytes right, through the
 * plugin's exported table (loaded by path as NCCL loads it) on one softnic
 * port with one QP (RAILNET_HCA==softnic0:1, RAILNET_QPS_PER_CONN=1), with
 * softnic's port counters read in the same process:
 *  - sizes on both sides of the immediate's limit for a whole message
 *    (2097150 bytes go in it, 2097151 and up in the sizes area) and of
 *    "the whole posted receive" (which the immediate names without a size
 *    write) arrive with their size and their bytes;
 *  - a message that fills its receive, or one smaller than its receive up
 *    to that limit (NCCL's partial steps), costs its payload and the
 *    64-byte clear-to-send on the port, nothing more; a smaller one above
 *    the limit costs 4 bytes more (the size write);
 *  - a message split over two QPs carries its size in pieces of its
 *    chunks' immediates: partial sizes below 64 MiB - 1 and a message
 *    filling its receive arrive exactly with no size write, other partial
 *    ones with one; RAILNET_STATS counts those writes;
 *  - thousands of messages one at a time (clear-to-send writes mostly
 *    unsignaled, receives posted again in batches) keep flowing, and the
 *    receiver's NIC never runs out of receives (no RNR wait);
 *  - on both ports of the merged device (one QP each), where the PCIe link
 *    bounds the device a connection's unsplit messages and clear-to-send
 *    writes stay on one QP and two connections take the two ports; where
 *    the ports bound it they take both ports in turn; a split message
 *    uses both either way.
 * Waits are bounded (a hang fails a case) but never decide a result. */
#include "../tap.h"
#include "nccl_net_v8.h"
#include "built_plugin.h"

#include <dlfcn.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MSG_MAX (1 << 20)
#define WHOLE_LIMIT 2097150 /* the largest size a whole message's immediate carries (plugin/ib/comm.h) */
#define BIG_MAX (4 << 20)    /* receives beyond that limit */
#define PIECES_LIMIT (1 << 26) /* a message split over two QPs carries sizes below this - 1 */
#define CTS_BYTES 64    /* one clear-to-send entry (HS_CTS_ENTRY_SIZE) */

struct ctl_counters {
    uint64_t tx_bytes, tx_packets, rx_bytes, rx_packets, errors, retries, rnr_naks;
};

static const ncclNet_v8_t *net;
static void *ctx; /* our own context on softnic0: its port counters */
static int (*port_counters)(void *, uint8_t, struct ctl_counters *);

/* The plugin's log since the last reset (built_log_append keeps whole
 * lines): RAILNET_STATS' lines at a pair's close. */
static char logbuf[1 << 14];

static void logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line, const char *fmt, ...)
{
    (void)level, (void)flags, (void)file, (void)line;
    va_list ap;
    va_start(ap, fmt);
    built_log_append(logbuf, sizeof(logbuf), fmt, ap);
    va_end(ap);
}

/* RAILNET_STATS' count of size writes in the send comm's line of the log
 * (-1 without one). */
static long size_writes(void)
{
    const char *p = strstr(logbuf, "messages with a size write of their own");
    if (!p)
        return -1;
    while (p > logbuf && p[-1] != ':')
        p--;
    return strtol(p, NULL, 10);
}

static int load_with(const char *hca, const char *merge)
{
    setenv("RAILNET_HCA", hca, 1);
    setenv("RAILNET_MERGE_PORTS", merge, 1);
    setenv("RAILNET_QPS_PER_CONN", "1", 1);
    setenv("RAILNET_STATS", "1", 1);
    void *v;
    if (!(net = built_plugin_load(logger, &v)))
        return -1;
    *(void **)&port_counters = dlsym(v, "softnic_ctl_port_counters");
    if (!port_counters || !(ctx = built_open_first_device(v)))
        return -1;
    return 0;
}

static int load(void)
{
    return load_with("=softnic0:1", "0");
}

static struct ctl_counters port_n(uint8_t port)
{
    struct ctl_counters c;
    memset(&c, 0, sizeof(c));
    port_counters(ctx, port, &c);
    return c;
}

static struct ctl_counters port1(void)
{
    return port_n(1);
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
    /* an idle pass yields, as NCCL's proxy does: softnic's NIC threads
     * share the CPU (under valgrind one thread runs at a time) */
    while (!sr && built_now_s() < end) {
        if ((r = net->isend(p->sc, p->sbuf, size, tag, p->smh, &sr)) != ncclSuccess)
            return r;
        if (!sr)
            sched_yield();
    }
    while ((!sdone || !rdone) && built_now_s() < end) {
        if (!sdone && (r = net->test(sr, &sdone, &ssize)) != ncclSuccess)
            return r;
        if (!rdone && (r = net->test(rr, &rdone, &rgot)) != ncclSuccess)
            return r;
        if (!sdone || !rdone)
            sched_yield();
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
    EXPECT_EQ_INT(0, built_pair_open(net, &p, BIG_MAX));
    const int posted[] = { 1, 16383, 65536, 65537, WHOLE_LIMIT, WHOLE_LIMIT + 1, WHOLE_LIMIT + 2, BIG_MAX };
    uint64_t id = 1;
    for (size_t i = 0; i < sizeof(posted) / sizeof(posted[0]); i++) {
        const int P = posted[i];
        const int sent[] = { 0, 1, 16382, 16383, 65535, WHOLE_LIMIT - 1, WHOLE_LIMIT, WHOLE_LIMIT + 1,
                             WHOLE_LIMIT + 2, P - 1, P };
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
    EXPECT_EQ_INT(0, built_pair_open(net, &p, BIG_MAX));
    uint64_t id = 1;
    /* each send waited for its clear-to-send and completed: every write of
     * the message was on the wire before the counters were read again */
    EXPECT_EQ_U64(65536 + CTS_BYTES, tx_per_message(&p, 65536, 65536, 20, &id));
    EXPECT_EQ_U64(MSG_MAX + CTS_BYTES, tx_per_message(&p, MSG_MAX, MSG_MAX, 5, &id));
    /* smaller than its receive (an LL step, a Simple transfer's last) */
    EXPECT_EQ_U64(65535 + CTS_BYTES, tx_per_message(&p, 65536, 65535, 20, &id));
    EXPECT_EQ_U64(40000 + CTS_BYTES, tx_per_message(&p, MSG_MAX, 40000, 20, &id));
    EXPECT_EQ_U64(WHOLE_LIMIT + CTS_BYTES, tx_per_message(&p, BIG_MAX, WHOLE_LIMIT, 3, &id));
    EXPECT_EQ_U64(BIG_MAX + CTS_BYTES, tx_per_message(&p, BIG_MAX, BIG_MAX, 3, &id));
    /* smaller than its receive and above the limit: the size write too */
    EXPECT_EQ_U64(WHOLE_LIMIT + 1 + CTS_BYTES + 4, tx_per_message(&p, BIG_MAX, WHOLE_LIMIT + 1, 3, &id));
    logbuf[0] = '\0';
    built_pair_close(net, &p);
    EXPECT_EQ_INT(4, (int)size_writes()); /* RAILNET_STATS: those 3 and their warm-up */
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

/* tx bytes of ports 1 and 2 while n messages of size bytes go over p into
 * receives of posted bytes */
static void tx_on_ports(struct built_pair *p, int posted, int size, int n, uint64_t *id, uint64_t tx[2])
{
    uint64_t b1 = port_n(1).tx_bytes, b2 = port_n(2).tx_bytes;
    for (int i = 0; i < n; i++)
        EXPECT_EQ_INT(0, xfer(p, posted, size, (*id)++));
    tx[0] = port_n(1).tx_bytes - b1;
    tx[1] = port_n(2).tx_bytes - b2;
}

/* Two connections on both ports of the merged device (one QP each),
 * n 64 KiB messages each (unsplit), then 1 MiB ones (split): tx bytes per
 * port of a's and b's small messages and of a's large ones. */
static void two_connections(uint64_t ta[2], uint64_t tb[2], uint64_t tl[2])
{
    struct built_pair a, b;
    EXPECT_EQ_INT(0, built_pair_open(net, &a, MSG_MAX));
    EXPECT_EQ_INT(0, built_pair_open(net, &b, MSG_MAX));
    uint64_t id = 1;
    tx_on_ports(&a, 65536, 65536, 40, &id, ta);
    tx_on_ports(&b, 65536, 65536, 40, &id, tb);
    tx_on_ports(&a, MSG_MAX, MSG_MAX, 4, &id, tl);
    printf("# 64 KiB x 40: connection a port 1/2 %llu/%llu bytes, b %llu/%llu\n", (unsigned long long)ta[0],
           (unsigned long long)ta[1], (unsigned long long)tb[0], (unsigned long long)tb[1]);
    built_pair_close(net, &b);
    built_pair_close(net, &a);
}

/* Loads the plugin on softnic0's merged device behind a PCIe link that
 * carries less than its two ports together (sysfs in dir: softnic's
 * 2 x 200 Gb/s on 16.0 GT/s x16). Nonzero when it cannot. */
static int load_host_bound(char *dir)
{
    EXPECT_TRUE(mkdtemp(dir) != NULL);
    setenv("SOFTNIC_SYSFS", dir, 1);
    setenv("SOFTNIC_LINK_RATE", "25G", 1);
    unsetenv("SOFTNIC_RATE"); /* a rate limit would make the ports the bound */
    unsetenv("SOFTNIC_PORT_OPTS");
    if (load_with("softnic0", "1")) {
        rmdir(dir);
        return -1;
    }
    return 0;
}

/* Where the NIC's PCIe link carries less than its ports together, a
 * second port adds little once there are connections for both ports:
 * each connection keeps its unsplit messages and clear-to-send writes on
 * one QP (on softnic a QP's threads sleep when idle, and round robin per
 * message left each half idle), and the connections share out the ports;
 * a split message still uses both. */
TAP_CASE(test_host_bound_device_keeps_a_connection_on_its_home_qp)
{
    char dir[] = "/tmp/rn_p2p_sysfs_XXXXXX";
    if (load_host_bound(dir))
        TAP_SKIP("the plugin or softnic is not available");
    uint64_t ta[2], tb[2], tl[2];
    two_connections(ta, tb, tl);
    const uint64_t payload = 40ull * 65536;
    int ha = ta[0] >= payload ? 0 : 1, hb = tb[0] >= payload ? 0 : 1;
    /* payload and clear-to-send all on the home port, nothing on the other */
    EXPECT_TRUE(ta[ha] >= payload && ta[!ha] == 0);
    EXPECT_TRUE(tb[hb] >= payload && tb[!hb] == 0);
    EXPECT_TRUE(ha != hb);
    EXPECT_TRUE(tl[0] >= 2 * (uint64_t)MSG_MAX && tl[1] >= 2 * (uint64_t)MSG_MAX);
    EXPECT_EQ_INT(0, tap_rm_tree(dir));
}

/* On the same device a lone connection (NCCL 2.30 makes one p2p connection
 * per peer) needs more than one port: its whole messages take both ports
 * in turn, keep to one while a second connection is open, and take both
 * again once it has closed. */
TAP_CASE(test_host_bound_device_spreads_a_lone_connection_over_the_ports)
{
    char dir[] = "/tmp/rn_p2p_sysfs_XXXXXX";
    if (load_host_bound(dir))
        TAP_SKIP("the plugin or softnic is not available");
    const uint64_t half = 20ull * 65536;
    uint64_t id = 1, alone[2], beside[2], again[2], other[2];
    struct built_pair a, b;
    EXPECT_EQ_INT(0, built_pair_open(net, &a, MSG_MAX));
    tx_on_ports(&a, 65536, 65536, 40, &id, alone);
    EXPECT_EQ_INT(0, built_pair_open(net, &b, MSG_MAX));
    tx_on_ports(&a, 65536, 65536, 40, &id, beside);
    tx_on_ports(&b, 65536, 65536, 40, &id, other);
    built_pair_close(net, &b);
    tx_on_ports(&a, 65536, 65536, 40, &id, again);
    built_pair_close(net, &a);
    printf("# 64 KiB x 40 on port 1/2: alone %llu/%llu, beside another %llu/%llu, alone again %llu/%llu\n",
           (unsigned long long)alone[0], (unsigned long long)alone[1], (unsigned long long)beside[0],
           (unsigned long long)beside[1], (unsigned long long)again[0], (unsigned long long)again[1]);
    EXPECT_TRUE(alone[0] >= half && alone[1] >= half);
    int h = beside[0] >= 2 * half ? 0 : 1;
    EXPECT_TRUE(beside[h] >= 2 * half && beside[!h] == 0);
    EXPECT_TRUE(other[!h] >= 2 * half && other[h] == 0);
    EXPECT_TRUE(again[0] >= half && again[1] >= half);
    EXPECT_EQ_INT(0, tap_rm_tree(dir));
}

/* Where the ports bound the device (no PCIe link known here), a
 * connection's whole messages take both ports in turn: it needs both
 * ports' bandwidth. */
TAP_CASE(test_port_bound_device_spreads_a_connections_messages_over_the_ports)
{
    unsetenv("SOFTNIC_SYSFS"); /* no PCIe link to read */
    if (load_with("softnic0", "1"))
        TAP_SKIP("the plugin or softnic is not available");
    uint64_t ta[2], tb[2], tl[2];
    two_connections(ta, tb, tl);
    const uint64_t half = 20ull * 65536;
    EXPECT_TRUE(ta[0] >= half && ta[1] >= half);
    EXPECT_TRUE(tb[0] >= half && tb[1] >= half);
    EXPECT_TRUE(tl[0] >= 2 * (uint64_t)MSG_MAX && tl[1] >= 2 * (uint64_t)MSG_MAX);
}

/* NCCL 2.28 drives a peer's two p2p connections in step, one message each
 * a step: on a port-bound device their whole messages, and their
 * receivers' clear-to-sends, take different ports in every step (turns
 * that all began on port 1 left one port idle in each step). */
TAP_CASE(test_connections_in_step_put_their_messages_and_clear_to_sends_on_different_ports)
{
    unsetenv("SOFTNIC_SYSFS");
    unsetenv("SOFTNIC_RATE");
    unsetenv("RAILNET_SPLIT_MIN");
    if (load_with("softnic0", "1"))
        TAP_SKIP("the plugin or softnic is not available");
    struct built_pair a, b;
    EXPECT_EQ_INT(0, built_pair_open(net, &a, MSG_MAX));
    EXPECT_EQ_INT(0, built_pair_open(net, &b, MSG_MAX));
    uint64_t id = 1;
    for (int step = 0; step < 4; step++) {
        uint64_t ta[2], tb[2];
        tx_on_ports(&a, 65536, 65536, 1, &id, ta);
        tx_on_ports(&b, 65536, 65536, 1, &id, tb);
        int pa = ta[0] >= 65536 ? 0 : 1, pb = tb[0] >= 65536 ? 0 : 1;
        printf("# step %d: a's 64 KiB on port %d (%llu/%llu), b's on port %d (%llu/%llu)\n", step, pa + 1,
               (unsigned long long)ta[0], (unsigned long long)ta[1], pb + 1, (unsigned long long)tb[0],
               (unsigned long long)tb[1]);
        EXPECT_TRUE(ta[pa] >= 65536 && ta[!pa] < 4096);
        EXPECT_TRUE(tb[pb] >= 65536 && tb[!pb] < 4096);
        EXPECT_TRUE(pa != pb);
        /* one message and one clear-to-send on each port */
        EXPECT_EQ_U64(65536ull + CTS_BYTES, ta[0] + tb[0]);
        EXPECT_EQ_U64(65536ull + CTS_BYTES, ta[1] + tb[1]);
    }
    built_pair_close(net, &b);
    built_pair_close(net, &a);
}

/* With the default RAILNET_SPLIT_MIN, NCCL's 128 KiB p2p chunk goes in two
 * halves, one on each port of the merged device, as NCCL's IB transport
 * writes it; a 64 KiB message goes whole on one port. */
TAP_CASE(test_default_split_sends_nccls_p2p_chunk_in_halves_over_the_ports)
{
    unsetenv("SOFTNIC_SYSFS");
    unsetenv("SOFTNIC_RATE");
    unsetenv("RAILNET_SPLIT_MIN");
    if (load_with("softnic0", "1"))
        TAP_SKIP("the plugin or softnic is not available");
    struct built_pair p;
    EXPECT_EQ_INT(0, built_pair_open(net, &p, MSG_MAX));
    uint64_t id = 1, chunk[2], whole[2];
    tx_on_ports(&p, 131072, 131072, 3, &id, chunk);
    tx_on_ports(&p, 65536, 65536, 1, &id, whole);
    built_pair_close(net, &p);
    printf("# 128 KiB x 3 on port 1/2: %llu/%llu bytes; 64 KiB x 1: %llu/%llu\n", (unsigned long long)chunk[0],
           (unsigned long long)chunk[1], (unsigned long long)whole[0], (unsigned long long)whole[1]);
    /* whole messages in turn would put two on one port, one on the other;
     * beyond the halves a port carries at most clear-to-sends and ACKs */
    for (int i = 0; i < 2; i++)
        EXPECT_TRUE(chunk[i] >= 3 * 65536ull && chunk[i] < 3 * 65536ull + 4096);
    EXPECT_TRUE((whole[0] >= 65536 && whole[1] < 4096) || (whole[1] >= 65536 && whole[0] < 4096));
}

/* Messages above RAILNET_SPLIT_MIN (64 KiB) on both ports of the merged
 * device, one QP each, so split in two chunks: their sizes (partial ones
 * included) arrive exactly, and what they cost on the two ports together. */
TAP_CASE(test_a_split_message_carries_its_size_in_its_chunks)
{
    unsetenv("SOFTNIC_SYSFS");
    unsetenv("SOFTNIC_RATE");
    if (load_with("softnic0", "1"))
        TAP_SKIP("the plugin or softnic is not available");
    const int big = PIECES_LIMIT + 8192;
    struct built_pair p;
    EXPECT_EQ_INT(0, built_pair_open(net, &p, (size_t)big));
    uint64_t id = 1;
    const int posted[] = { 131073, 139264, MSG_MAX };
    for (size_t i = 0; i < sizeof(posted) / sizeof(posted[0]); i++) {
        const int P = posted[i];
        const int sent[] = { 0, 8191, 131072, 131073, 135168, 135169, P - 4097, P - 1, P };
        for (size_t k = 0; k < sizeof(sent) / sizeof(sent[0]); k++) {
            if (sent[k] > P)
                continue;
            int r = xfer(&p, P, sent[k], id++);
            if (r)
                printf("# split: posted %d, sent %d: %d\n", P, sent[k], r);
            EXPECT_EQ_INT(0, r);
        }
    }
    /* both chunks, the CTS, nothing else; at 64 MiB the pieces run out */
    uint64_t tx[2];
    tx_on_ports(&p, MSG_MAX, MSG_MAX - 1, 10, &id, tx);
    EXPECT_EQ_U64(10ull * (MSG_MAX - 1 + CTS_BYTES), tx[0] + tx[1]);
    const int around[] = { PIECES_LIMIT - 2, PIECES_LIMIT - 1, PIECES_LIMIT, big - 1, big };
    const uint64_t extra[] = { 0, 4, 4, 4, 0 }; /* all-ones pieces: the posted size */
    for (size_t k = 0; k < sizeof(around) / sizeof(around[0]); k++) {
        tx_on_ports(&p, big, around[k], 1, &id, tx);
        EXPECT_EQ_U64((uint64_t)around[k] + CTS_BYTES + extra[k], tx[0] + tx[1]);
    }
    logbuf[0] = '\0';
    built_pair_close(net, &p);
    EXPECT_EQ_INT(3, (int)size_writes()); /* 64 MiB and up */
}

int main(int argc, char **argv) { return tap_run(argc, argv); }
