/* tests/plugin/test_failover.c: a connection of a merged dual-port softnic
 * device through the plugin's exported table (loaded by path through
 * tools/common/plugin_tables, as NCCL loads it), with softnic's control API
 * taking ports down and up in the same process:
 *  - any number of down/up cycles of port 2: no request fails, no byte is
 *    wrong, while down port 2 moves nothing, once back it carries bytes
 *    again (softnic's port counters), one WARN per failure, one INFO per
 *    comm per recovery;
 *  - port 2 failing and coming back 5 times while only the sender runs:
 *    the receiver then reads 5 rebuild requests at once, and a message
 *    acknowledged to the sender right after still completes (the flushed
 *    receives of each replaced QP leave the CQ before the next);
 *  - a receiver that closes while the sender probes a rebuilt QP: the
 *    sender's comm goes on (port 2 stays out of use);
 *  - both ports down: a clear error ("no port left"), no hang;
 *  - RAILNET_FAILOVER=0: port 2 down fails the connection (the old error);
 *  - churn: connect / transfer / close cycles, every 4th closed with
 *    requests in flight in NCCL's abort order (deregMr, closeSend,
 *    closeRecv, closeListen), plus register/deregister cycles of fresh
 *    buffers: after warm-up, fds, threads, softnic's live QPs/CQs/MRs come
 *    back to the baseline exactly and RSS within RSS_TOLERANCE_KB.
 *    RAILNET_CHURN_CYCLES sets the count (default 2000: about 6 s here).
 * Waits are bounded (a hang fails a case) but never decide a result; every
 * message checked and every churn cycle is progress for the TAP timeout
 * (tap_progress), so a case slowed by a loaded host is not taken for a hang. */
#include "../tap.h"
#include "../proc_self.h"
#include "nccl_net_v8.h"
#include "built_plugin.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RSS_TOLERANCE_KB 8192 /* allocator arenas settle; a leak of one comm per cycle is far above */
#define MSG_MAX (1 << 20)

struct ctl_counters {
    uint64_t tx_bytes, tx_packets, rx_bytes, rx_packets, errors, retries, rnr_naks;
};
struct ctl_objects {
    int64_t qps, cqs, mrs;
};

static const ncclNet_v8_t *net;
static char logbuf[1 << 16];
static void *ctx; /* our own context on softnic0: the port controls */
static int (*set_state)(void *, uint8_t, int);
static int (*set_latency)(void *, uint8_t, uint32_t);
static int (*port_counters)(void *, uint8_t, struct ctl_counters *);
static int (*objects)(struct ctl_objects *);
static int (*device_fatal)(void *);

static void logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line, const char *fmt, ...)
{
    (void)flags, (void)file, (void)line;
    if (level != NCCL_LOG_WARN && level != NCCL_LOG_INFO && !(level == NCCL_LOG_TRACE && getenv("FO_TRACE")))
        return;
    size_t at = strlen(logbuf);
    if (at > sizeof(logbuf) - 512) { /* keep the newest lines */
        memmove(logbuf, logbuf + sizeof(logbuf) / 2, at - sizeof(logbuf) / 2 + 1);
        at = strlen(logbuf);
    }
    at += (size_t)snprintf(logbuf + at, sizeof(logbuf) - at, "%s ", level == NCCL_LOG_WARN ? "WARN" : level == NCCL_LOG_INFO ? "INFO" : "TRACE");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(logbuf + at, sizeof(logbuf) - at - 1, fmt, ap);
    va_end(ap);
    strcat(logbuf, "\n");
}

static int load(void)
{
    /* faults here are port events, which need no retry budget: a budget
     * beyond any starvation keeps a starved NIC thread on a loaded host from
     * looking like a dead port 1 (a case that wants a short one sets it) */
    setenv("SOFTNIC_RETRY_MIN_MS", "10000", 0);
    setenv("SOFTNIC_RETRY_CAP_MS", "10000", 0);
    void *v;
    if (!(net = built_plugin_load(logger, &v)))
        return -1;
    *(void **)&set_state = dlsym(v, "softnic_ctl_port_set_state");
    *(void **)&set_latency = dlsym(v, "softnic_ctl_port_set_latency");
    *(void **)&port_counters = dlsym(v, "softnic_ctl_port_counters");
    *(void **)&objects = dlsym(v, "softnic_ctl_objects");
    *(void **)&device_fatal = dlsym(v, "softnic_ctl_device_fatal");
    if (!set_state || !set_latency || !port_counters || !objects || !(ctx = built_open_first_device(v)))
        return -1;
    ncclNetProperties_v8_t props;
    if (net->getProperties(0, &props) != ncclSuccess)
        return -1;
    logbuf[0] = '\0';
    return 0;
}

struct pair {
    struct built_pair b;   /* the comms and their registered buffers */
    int no_ahead;
    void *ahead;           /* receive of message ahead_id, posted early */
    uint64_t ahead_id;
};

static int pair_open(struct pair *p)
{
    memset(p, 0, sizeof(*p));
    return built_pair_open(net, &p->b, MSG_MAX);
}

static void pair_close(struct pair *p) { built_pair_close(net, &p->b); }

static int flush_recv(struct pair *p, int size);
static void fill(char *b, int size, int pattern);

/* One message of size bytes, checked. 0: done and right; otherwise the
 * plugin's error (or -1 for wrong bytes/size, -2 for no progress in 30 s). */
static int xfer(struct pair *p, int size, uint64_t id)
{
    for (int i = 0; i < size; i++)
        p->b.sbuf[i] = (char)(id * 131 + (uint64_t)i * 7 + (uint64_t)(i >> 12));
    memset(p->b.rbuf, 0xee, (size_t)size + 1 > MSG_MAX ? MSG_MAX : (size_t)size + 1);
    void *rr = NULL, *sr = NULL;
    int tag = (int)(id & 0xffff), rsize = MSG_MAX;
    void *rdata = p->b.rbuf;
    double end = built_now_s() + 30;
    ncclResult_t r;
    if (p->ahead && p->ahead_id == id)
        rr = p->ahead;
    p->ahead = NULL;
    while (!rr && built_now_s() < end)
        if ((r = net->irecv(p->b.rc, 1, &rdata, &rsize, &tag, &p->b.rmh, &rr)) != ncclSuccess)
            return r;
    int sdone = 0, rdone = 0, ssize = -1, rgot = -1;
    while (!sr && built_now_s() < end) {
        if ((r = net->isend(p->b.sc, p->b.sbuf, size, tag, p->b.smh, &sr)) != ncclSuccess)
            return r;
        /* NCCL's proxy tests its receives meanwhile: the receiver moves its
         * CTS writes off a failed port only when its comm is progressed */
        if (!sr && !rdone && (r = net->test(rr, &rdone, &rgot)) != ncclSuccess)
            return r;
    }
    while ((!sdone || !rdone) && built_now_s() < end) {
        if (!sdone && (r = net->test(sr, &sdone, &ssize)) != ncclSuccess)
            return r;
        if (!rdone && (r = net->test(rr, &rdone, &rgot)) != ncclSuccess)
            return r;
        /* as NCCL's proxy does, the next receive is posted and tested while
         * the send finishes: the receiver answers a failover sync only when
         * its comm is progressed */
        if (rdone && !sdone && !p->no_ahead) {
            int ntag = (int)((id + 1) & 0xffff);
            if (!p->ahead && (r = net->irecv(p->b.rc, 1, &rdata, &rsize, &ntag, &p->b.rmh, &p->ahead)) != ncclSuccess)
                return r;
            p->ahead_id = id + 1;
            int d = 0;
            if (p->ahead && (r = net->test(p->ahead, &d, NULL)) != ncclSuccess)
                return r;
        }
    }
    if (!sdone || !rdone)
        return -2;
    if ((r = (ncclResult_t)flush_recv(p, size)) != 0)
        return r;
    if (ssize != size || rgot != size || memcmp(p->b.sbuf, p->b.rbuf, (size_t)size) != 0) {
        printf("# message %llu: sent %d, send says %d, receive says %d, bytes %s\n", (unsigned long long)id, size,
               ssize, rgot, memcmp(p->b.sbuf, p->b.rbuf, (size_t)size) ? "differ" : "equal");
        return -1;
    }
    tap_progress();
    return 0;
}

/* 4 KiB messages from id first on until one fails, for at most 30 s: the
 * first failure's result (0 when every message went through). */
static int xfer_until_failure(struct pair *p, uint64_t first)
{
    int r = 0;
    double end = built_now_s() + 30;
    for (uint64_t id = first; r == 0 && built_now_s() < end; id++)
        r = xfer(p, 4096, id);
    return r;
}

/* RAILNET_GDR_FLUSH=2 cases: every receive is flushed (loopback READ) */
static int do_flush;

static int flush_recv(struct pair *p, int size)
{
    if (!do_flush || size <= 0)
        return 0;
    void *fr = NULL, *d = p->b.rbuf;
    ncclResult_t r = net->iflush(p->b.rc, 1, &d, &size, &p->b.rmh, &fr);
    if (r != ncclSuccess)
        return r;
    if (!fr)
        return -1; /* RAILNET_GDR_FLUSH=2 flushes host buffers too */
    int done = 0;
    double end = built_now_s() + 30;
    while (!done && built_now_s() < end)
        if ((r = net->test(fr, &done, NULL)) != ncclSuccess)
            return r;
    return done ? 0 : -2;
}

static uint64_t port_tx(uint8_t port)
{
    struct ctl_counters c;
    memset(&c, 0, sizeof(c));
    port_counters(ctx, port, &c);
    return c.tx_bytes;
}

/* Messages until the log has `want` lines containing needle (or 30 s).
 * Returns the first failing xfer result, 0 when the lines came. */
static int traffic_until(struct pair *p, uint64_t *id, const char *needle, int want)
{
    double end = built_now_s() + 30;
    while (built_count(logbuf, needle) < want) {
        if (built_now_s() > end)
            return -2;
        int r = xfer(p, (int)(*id % 3 == 0 ? MSG_MAX : (*id * 4099) % 70000), *id);
        (*id)++;
        if (r) {
            printf("# message %llu: %d; log tail:\n", (unsigned long long)*id - 1, r);
            size_t L = strlen(logbuf);
            printf("%s", logbuf + (L > 3000 ? L - 3000 : 0));
            return r;
        }
    }
    return 0;
}

TAP_CASE(test_port2_down_up_cycles_lose_nothing_and_both_ports_carry_again)
{
    if (load()) {
        TAP_SKIP("the plugin or softnic is not available");
        return;
    }
    struct pair p;
    EXPECT_EQ_INT(0, pair_open(&p));
    uint64_t id = 1;
    for (int i = 0; i < 20; i++, id++)
        EXPECT_EQ_INT(0, xfer(&p, MSG_MAX, id));
    for (int cycle = 1; cycle <= 3; cycle++) {
        EXPECT_EQ_INT(0, set_state(ctx, 2, 0));
        EXPECT_EQ_INT(0, traffic_until(&p, &id, "port 2 failed", cycle));
        /* the sender's sync settles what was in flight; then port 2 is idle */
        EXPECT_EQ_INT(0, traffic_until(&p, &id, "failover sync", cycle));
        uint64_t p1 = port_tx(1), p2 = port_tx(2);
        for (int i = 0; i < 10; i++, id++)
            EXPECT_EQ_INT(0, xfer(&p, MSG_MAX, id));
        EXPECT_EQ_U64(p2, port_tx(2));
        EXPECT_TRUE(port_tx(1) >= p1 + 10ull * MSG_MAX);
        EXPECT_EQ_INT(0, set_state(ctx, 2, 1));
        /* one INFO from each end of the connection */
        EXPECT_EQ_INT(0, traffic_until(&p, &id, "traffic over all 2 ports again", 2 * cycle));
        p1 = port_tx(1), p2 = port_tx(2);
        for (int i = 0; i < 10; i++, id++)
            EXPECT_EQ_INT(0, xfer(&p, MSG_MAX, id));
        /* split messages: each port carries about half again */
        EXPECT_TRUE(port_tx(2) >= p2 + 4ull * MSG_MAX);
        EXPECT_TRUE(port_tx(1) >= p1 + 4ull * MSG_MAX);
        EXPECT_EQ_INT(cycle, built_count(logbuf, "port 2 failed;"));
    }
    if (built_count(logbuf, "WARN") != 3)
        printf("# log:\n%s", logbuf);
    EXPECT_EQ_INT(3, built_count(logbuf, "WARN")); /* nothing but the three port failures */
    pair_close(&p);
}

TAP_CASE(test_send_completes_when_the_receiver_is_not_progressed_after_the_failure)
{
    /* port 2 acts on ACKs 5 s late: the receive completes at once, the
     * send's chunk on port 2 stays unacknowledged; port 2 then fails and
     * only the send is tested. The sender must settle it alone (it reads
     * the receiver's chunk state) and not write it again (it landed). (5 s:
     * on a loaded host the port must fail before the ACK comes, and below
     * the retry budget of load().) */
    setenv("SOFTNIC_PORT_OPTS", "softnic0:2:ack_delay_us=5000000", 1);
    if (load()) {
        TAP_SKIP("the plugin or softnic is not available");
        return;
    }
    struct pair p;
    EXPECT_EQ_INT(0, pair_open(&p));
    for (int i = 0; i < MSG_MAX; i++)
        p.b.sbuf[i] = (char)(i * 13 + 5);
    void *rr = NULL, *sr = NULL;
    int tag = 9, rsize = MSG_MAX, rdone = 0, sdone = 0, got = -1;
    void *rdata = p.b.rbuf;
    double end = built_now_s() + 30;
    while (!rr && built_now_s() < end)
        EXPECT_EQ_INT(ncclSuccess, net->irecv(p.b.rc, 1, &rdata, &rsize, &tag, &p.b.rmh, &rr));
    while (!sr && built_now_s() < end) {
        EXPECT_EQ_INT(ncclSuccess, net->isend(p.b.sc, p.b.sbuf, MSG_MAX, tag, p.b.smh, &sr));
        if (!rdone && rr)
            EXPECT_EQ_INT(ncclSuccess, net->test(rr, &rdone, &got));
    }
    while (!rdone && built_now_s() < end)
        EXPECT_EQ_INT(ncclSuccess, net->test(rr, &rdone, &got));
    EXPECT_EQ_INT(MSG_MAX, got);
    EXPECT_TRUE(memcmp(p.b.sbuf, p.b.rbuf, MSG_MAX) == 0);
    EXPECT_EQ_INT(0, set_state(ctx, 2, 0));
    while (!sdone && built_now_s() < end)
        EXPECT_EQ_INT(ncclSuccess, net->test(sr, &sdone, NULL));
    EXPECT_EQ_INT(1, sdone);
    if (!strstr(logbuf, "(read): 0 chunk(s) written again, 1 had landed"))
        printf("# log:\n%s", logbuf);
    EXPECT_TRUE(strstr(logbuf, "(read): 0 chunk(s) written again, 1 had landed") != NULL);
    /* and the connection goes on over port 1 */
    uint64_t id = 1;
    for (int i = 0; i < 5; i++, id++)
        EXPECT_EQ_INT(0, xfer(&p, MSG_MAX, id));
    set_state(ctx, 2, 1);
    pair_close(&p);
}

/* Progresses the send comm (an isend with no CTS to match polls it) for
 * about ms milliseconds: long enough for it to see a port event (errors.c
 * looks every 20 ms). A wait, not a result: a slow host makes fewer
 * rebuild requests, never a wrong verdict. */
static void progress_sender(struct pair *p, int ms)
{
    double end = built_now_s() + ms / 1000.0;
    int tag = 0x7777;
    while (built_now_s() < end) {
        void *sr = NULL;
        EXPECT_EQ_INT(ncclSuccess, net->isend(p->b.sc, p->b.sbuf, 0, tag, p->b.smh, &sr));
        EXPECT_TRUE(sr == NULL);
    }
}

TAP_CASE(test_rebuild_requests_read_at_once_do_not_overrun_the_receivers_cq)
{
    /* Port 2 fails and comes back 5 times while only the sender is
     * progressed: it abandons each rebuild when the port fails again and
     * asks again once it is back, so the receiver then reads 5
     * REBUILD_REQs at once. Each replaces its QP 2, flushing the 272
     * receives of the one before into the CQ: left there, they overran it
     * (sized for one generation per QP), and a receive completion that
     * came next was dropped: the message below, which the sender sees
     * acknowledged, never completed (failover.sh's port 2 flapping every
     * 50 ms hung so). */
    if (load()) {
        TAP_SKIP("the plugin or softnic is not available");
        return;
    }
    struct pair p;
    EXPECT_EQ_INT(0, pair_open(&p));
    p.no_ahead = 1;
    EXPECT_EQ_INT(0, xfer(&p, MSG_MAX, 1));
    /* message 2 lands before the failures; its receive is tested after them */
    fill(p.b.sbuf, MSG_MAX, 2);
    void *rr = NULL, *sr = NULL;
    int tag = 2, rsize = MSG_MAX, rdone = 0, sdone = 0, got = -1;
    void *rdata = p.b.rbuf;
    double end = built_now_s() + 30;
    while (!rr && built_now_s() < end)
        EXPECT_EQ_INT(ncclSuccess, net->irecv(p.b.rc, 1, &rdata, &rsize, &tag, &p.b.rmh, &rr));
    while (!sr && built_now_s() < end)
        EXPECT_EQ_INT(ncclSuccess, net->isend(p.b.sc, p.b.sbuf, MSG_MAX, tag, p.b.smh, &sr));
    while (sr && !sdone && built_now_s() < end)
        EXPECT_EQ_INT(ncclSuccess, net->test(sr, &sdone, NULL));
    EXPECT_EQ_INT(1, sdone);
    for (int i = 0; i < 5; i++) {
        EXPECT_EQ_INT(0, set_state(ctx, 2, 0));
        progress_sender(&p, 60);
        EXPECT_EQ_INT(0, set_state(ctx, 2, 1));
        progress_sender(&p, 60);
    }
    /* one progress of the receiver: the port events and the 5 requests */
    while (rr && !rdone && built_now_s() < end)
        EXPECT_EQ_INT(ncclSuccess, net->test(rr, &rdone, &got));
    EXPECT_EQ_INT(MSG_MAX, got);
    /* message 3: posted without a progress of the receiver (its CTS goes
     * over port 1), sent and acknowledged while only the sender runs */
    fill(p.b.sbuf, MSG_MAX, 3);
    tag = 3, rr = NULL, sr = NULL, rdone = sdone = 0, got = -1;
    EXPECT_EQ_INT(ncclSuccess, net->irecv(p.b.rc, 1, &rdata, &rsize, &tag, &p.b.rmh, &rr));
    EXPECT_TRUE(rr != NULL);
    while (!sr && built_now_s() < end)
        EXPECT_EQ_INT(ncclSuccess, net->isend(p.b.sc, p.b.sbuf, MSG_MAX, tag, p.b.smh, &sr));
    while (sr && !sdone && built_now_s() < end)
        EXPECT_EQ_INT(ncclSuccess, net->test(sr, &sdone, NULL));
    EXPECT_EQ_INT(1, sdone);
    end = built_now_s() + 30;
    while (rr && !rdone && built_now_s() < end)
        EXPECT_EQ_INT(ncclSuccess, net->test(rr, &rdone, &got));
    EXPECT_EQ_INT(1, rdone);
    EXPECT_EQ_INT(MSG_MAX, got);
    EXPECT_TRUE(memcmp(p.b.sbuf, p.b.rbuf, MSG_MAX) == 0);
    if (!rdone)
        printf("# log:\n%s", logbuf);
    pair_close(&p);
}

static void fill(char *b, int size, int pattern)
{
    for (int i = 0; i < size; i++)
        b[i] = (char)(pattern * 37 + i * 11 + (i >> 9));
}

TAP_CASE(test_a_chunk_held_on_the_failed_port_never_lands_after_its_copy)
{
    /* Port 2 delivers 1.5 s late: message A's chunk on port 2 waits in the
     * receiver's NIC when port 2 goes down, and the sender writes it again
     * over port 1. Only the
     * sender is progressed (a receiving proxy thread busy elsewhere). If the
     * send completes, its buffer is reused at once, as NCCL may. Whatever
     * the held copy does when its delivery time comes, the receive must end
     * with A's bytes: the copy on the dead QP may not land after the one
     * written again (the sender waits for the receiver to stop its end of
     * the dead QP; a QP in ERR places nothing). */
    if (load()) {
        TAP_SKIP("the plugin or softnic is not available");
        return;
    }
    struct pair p;
    EXPECT_EQ_INT(0, pair_open(&p));
    p.no_ahead = 1;
    /* two receives: the next CTS goes on QP 0 (port 1), not on the slow port */
    EXPECT_EQ_INT(0, xfer(&p, MSG_MAX, 1));
    EXPECT_EQ_INT(0, xfer(&p, MSG_MAX, 2));
    const uint32_t late_us = 1500000;
    EXPECT_EQ_INT(0, set_latency(ctx, 2, late_us));
    fill(p.b.sbuf, MSG_MAX, 1);
    char *want = malloc(MSG_MAX);
    EXPECT_TRUE(want != NULL);
    memcpy(want, p.b.sbuf, MSG_MAX);
    void *rr = NULL, *sr = NULL, *rdata = p.b.rbuf;
    int tag = 3, rsize = MSG_MAX, rdone = 0, sdone = 0, got = -1;
    double end = built_now_s() + 30;
    while (!rr && built_now_s() < end)
        EXPECT_EQ_INT(ncclSuccess, net->irecv(p.b.rc, 1, &rdata, &rsize, &tag, &p.b.rmh, &rr));
    uint64_t tx2 = port_tx(2);
    while (!sr && built_now_s() < end)
        EXPECT_EQ_INT(ncclSuccess, net->isend(p.b.sc, p.b.sbuf, MSG_MAX, tag, p.b.smh, &sr));
    double sent = built_now_s();
    /* the chunk on port 2 has left the sender (it is about half the
     * message); then the port goes down under it */
    while (port_tx(2) < tx2 + MSG_MAX / 4 && built_now_s() < end)
        usleep(1000);
    usleep(100000); /* its header reaches the receiver's NIC thread */
    EXPECT_EQ_INT(0, set_state(ctx, 2, 0));
    /* the sender alone: until it completes or waits for the receiver */
    while (!sdone && !strstr(logbuf, "asking the receiver") && built_now_s() < end)
        EXPECT_EQ_INT(ncclSuccess, net->test(sr, &sdone, NULL));
    EXPECT_TRUE(built_count(logbuf, "port 2 failed") >= 1);
    if (sdone)
        fill(p.b.sbuf, MSG_MAX, 5); /* the completed send's buffer, reused */
    /* past the moment the held copy is delivered */
    while (built_now_s() < sent + late_us / 1e6 + 1.0)
        usleep(20000);
    while ((!sdone || !rdone) && built_now_s() < end) {
        if (!sdone)
            EXPECT_EQ_INT(ncclSuccess, net->test(sr, &sdone, NULL));
        if (!rdone)
            EXPECT_EQ_INT(ncclSuccess, net->test(rr, &rdone, &got));
    }
    EXPECT_TRUE(sdone && rdone);
    EXPECT_EQ_INT(MSG_MAX, got);
    if (memcmp(want, p.b.rbuf, MSG_MAX) != 0) {
        int at = 0;
        while (at < MSG_MAX && want[at] == p.b.rbuf[at])
            at++;
        printf("# message A's bytes are wrong from byte %d; log:\n%s", at, logbuf);
    }
    EXPECT_TRUE(memcmp(want, p.b.rbuf, MSG_MAX) == 0);
    free(want);
    set_latency(ctx, 2, 0);
    pair_close(&p);
    set_state(ctx, 2, 1);
}

TAP_CASE(test_a_probe_to_a_receiver_that_closed_leaves_port_2_out_and_the_sender_alive)
{
    /* Port 2 comes back while it delivers 1 s late: the sender's probe of
     * its rebuilt QP waits in the receiver's NIC while the receiver, its
     * last receive done, closes its comm (a rank that finished its work).
     * In CI such a probe reached the QP after the receiver had deregistered
     * the probe's target and the sender's comm failed with
     * IBV_WC_REM_ACCESS_ERR: a comm now destroys its QPs before the areas
     * they expose, and a failed probe, whatever its status, only leaves
     * port 2 out of use (INFO), never fails the comm. (That close window
     * is too narrow to hit on purpose; here the probe ends by the retry
     * budget, the order of a real NIC's answer to a QP that is gone.) */
    setenv("FO_TRACE", "1", 1);
    /* a shorter budget: the probe towards a closed QP ends in 2 s */
    setenv("SOFTNIC_RETRY_MIN_MS", "2000", 1);
    setenv("SOFTNIC_RETRY_CAP_MS", "2000", 1);
    if (load()) {
        TAP_SKIP("the plugin or softnic is not available");
        return;
    }
    struct pair p;
    EXPECT_EQ_INT(0, pair_open(&p));
    p.no_ahead = 1;
    uint64_t id = 1;
    for (int i = 0; i < 3; i++, id++)
        EXPECT_EQ_INT(0, xfer(&p, MSG_MAX, id));
    EXPECT_EQ_INT(0, set_state(ctx, 2, 0));
    EXPECT_EQ_INT(0, traffic_until(&p, &id, "port 2 failed", 1));
    EXPECT_EQ_INT(0, traffic_until(&p, &id, "failover sync", 1));
    EXPECT_EQ_INT(0, set_latency(ctx, 2, 1000000));
    EXPECT_EQ_INT(0, set_state(ctx, 2, 1));
    /* the sender has the receiver's new QPs (FO_REBUILD_REP) and probes */
    EXPECT_EQ_INT(0, traffic_until(&p, &id, ": failover message 6 (", 1));
    EXPECT_EQ_INT(0, built_count(logbuf, "rebuilt and probed"));
    net->deregMr(p.b.rc, p.b.rmh);
    EXPECT_EQ_INT(ncclSuccess, net->closeRecv(p.b.rc));
    /* past the probe's end (its budget, or a refusal), the sender's next
     * call (no receive is posted: no request) polls its completion: the
     * comm must not fail for it (the peer's absence is only declared after
     * a grace period that starts now) */
    usleep(3500000);
    void *sr = NULL;
    ncclResult_t r = net->isend(p.b.sc, p.b.sbuf, 4096, 77, p.b.smh, &sr);
    EXPECT_TRUE(sr == NULL);
    if (r != ncclSuccess || !strstr(logbuf, "probe on rebuilt QP"))
        printf("# isend returned %d; log tail:\n%s", (int)r, logbuf + (strlen(logbuf) > 3000 ? strlen(logbuf) - 3000 : 0));
    EXPECT_EQ_INT(ncclSuccess, r);
    EXPECT_TRUE(strstr(logbuf, "probe on rebuilt QP") != NULL);
    printf("# %s", strstr(logbuf, "probe on rebuilt QP") ? strstr(logbuf, "probe on rebuilt QP") : "\n");
    EXPECT_EQ_INT(0, built_count(logbuf, "work request failed"));
    set_latency(ctx, 2, 0);
    net->deregMr(p.b.sc, p.b.smh);
    net->closeSend(p.b.sc);
    net->closeListen(p.b.lc);
    free(p.b.sbuf);
    free(p.b.rbuf);
    unsetenv("FO_TRACE");
}

TAP_CASE(test_gdr_flush_moves_off_a_failed_port_1)
{
    /* the flush's loopback QP starts on port 1; with port 1 down the next
     * flush gets one on port 2, and transfers and flushes go on */
    setenv("RAILNET_GDR_FLUSH", "2", 1);
    do_flush = 1;
    if (load()) {
        TAP_SKIP("the plugin or softnic is not available");
        return;
    }
    struct pair p;
    EXPECT_EQ_INT(0, pair_open(&p));
    uint64_t id = 1;
    for (int i = 0; i < 5; i++, id++)
        EXPECT_EQ_INT(0, xfer(&p, 65536, id));
    EXPECT_EQ_INT(0, set_state(ctx, 1, 0));
    EXPECT_EQ_INT(0, traffic_until(&p, &id, "port 1 failed", 1));
    for (int i = 0; i < 20; i++, id++)
        EXPECT_EQ_INT(0, xfer(&p, 65536, id));
    EXPECT_TRUE(strstr(logbuf, "GDR flush moved to port 2") != NULL);
    EXPECT_EQ_INT(0, set_state(ctx, 1, 1));
    EXPECT_EQ_INT(0, traffic_until(&p, &id, "traffic over all 2 ports again", 2));
    for (int i = 0; i < 5; i++, id++)
        EXPECT_EQ_INT(0, xfer(&p, 65536, id));
    pair_close(&p);
}

TAP_CASE(test_both_ports_down_is_a_clear_error)
{
    if (load()) {
        TAP_SKIP("the plugin or softnic is not available");
        return;
    }
    struct pair p;
    EXPECT_EQ_INT(0, pair_open(&p));
    EXPECT_EQ_INT(0, xfer(&p, 4096, 1));
    EXPECT_EQ_INT(0, set_state(ctx, 1, 0));
    EXPECT_EQ_INT(0, set_state(ctx, 2, 0));
    int r = xfer_until_failure(&p, 2);
    EXPECT_TRUE(r > 0); /* an ncclResult_t error, not a hang (-2) nor wrong bytes (-1) */
    EXPECT_TRUE(built_count(logbuf, "no port left") >= 1);
    set_state(ctx, 1, 1);
    set_state(ctx, 2, 1);
    pair_close(&p);
}

TAP_CASE(test_failover_off_port_down_fails_the_connection)
{
    setenv("RAILNET_FAILOVER", "0", 1);
    if (load()) {
        TAP_SKIP("the plugin or softnic is not available");
        return;
    }
    struct pair p;
    EXPECT_EQ_INT(0, pair_open(&p));
    EXPECT_EQ_INT(0, xfer(&p, 4096, 1));
    EXPECT_EQ_INT(0, set_state(ctx, 2, 0));
    int r = xfer_until_failure(&p, 2);
    EXPECT_TRUE(r > 0);
    EXPECT_TRUE(built_count(logbuf, "IBV_EVENT_PORT_ERR (port went down); failing") >= 1);
    EXPECT_EQ_INT(0, built_count(logbuf, "go on over port"));
    set_state(ctx, 2, 1);
    pair_close(&p);
}

/* A failed device (IBV_EVENT_DEVICE_FATAL) leaves no port to fail over to:
 * with failover on, the connection fails with one WARN naming the event,
 * and nothing is replayed over "the other" port. */
TAP_CASE(test_device_fatal_fails_the_connection_even_with_failover)
{
    if (load()) {
        TAP_SKIP("the plugin or softnic is not available");
        return;
    }
    EXPECT_TRUE(device_fatal != NULL);
    struct pair p;
    EXPECT_EQ_INT(0, pair_open(&p));
    EXPECT_EQ_INT(0, xfer(&p, 4096, 1));
    EXPECT_EQ_INT(0, device_fatal(ctx));
    int r = xfer_until_failure(&p, 2);
    EXPECT_TRUE(r > 0);
    EXPECT_TRUE(built_count(logbuf, "IBV_EVENT_DEVICE_FATAL (the device failed") >= 1);
    EXPECT_EQ_INT(0, built_count(logbuf, "IBV_EVENT_PORT_ERR"));
    EXPECT_EQ_INT(0, built_count(logbuf, "go on over port"));
    pair_close(&p);
}

static long rss_kb(void)
{
    long pages = 0, res = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f && fscanf(f, "%ld %ld", &pages, &res) != 2)
        res = 0;
    if (f)
        fclose(f);
    return res * (sysconf(_SC_PAGESIZE) / 1024);
}

/* fds and threads once softnic's connections of closed QPs are gone: a
 * responder that sent a NAK keeps its socket and thread up to 2 s so the
 * requester can read it (responder.c). Waits until both counts held still
 * for 2.5 s (at most 20 s): a leak keeps them up and fails the checks. */
static void settle(int *fds, int *th)
{
    int f = proc_self_fds(), t = proc_self_threads();
    double still = built_now_s(), end = built_now_s() + 20;
    while (built_now_s() - still < 2.5 && built_now_s() < end) {
        usleep(50000);
        int f2 = proc_self_fds(), t2 = proc_self_threads();
        if (f2 != f || t2 != t) {
            f = f2, t = t2;
            still = built_now_s();
        }
    }
    *fds = f, *th = t;
}

/* One cycle: connect, register, transfer, close; or (inflight) close with a
 * send and a receive in flight; plus a register/deregister of a fresh
 * buffer. */
static int churn_cycle(int i, int inflight)
{
    struct pair p;
    int bad = pair_open(&p);
    p.no_ahead = 1; /* the in-flight closes are every 4th cycle's job */
    if (bad) {
        printf("# cycle %d: connect or registration failed:\n%s", i, logbuf + (strlen(logbuf) > 2000 ? strlen(logbuf) - 2000 : 0));
        return -1;
    }
    if (inflight) {
        void *rr = NULL, *sr = NULL;
        int tag = 5, rsize = MSG_MAX;
        void *rdata = p.b.rbuf;
        for (int k = 0; k < 1000 && !rr; k++)
            net->irecv(p.b.rc, 1, &rdata, &rsize, &tag, &p.b.rmh, &rr);
        for (int k = 0; k < 1000 && !sr; k++)
            net->isend(p.b.sc, p.b.sbuf, MSG_MAX, tag, p.b.smh, &sr);
    } else if (xfer(&p, 65536 + i, (uint64_t)i)) {
        printf("# cycle %d: transfer failed:\n%s", i, logbuf + (strlen(logbuf) > 2000 ? strlen(logbuf) - 2000 : 0));
        return -1;
    }
    void *buf = malloc(3 * 4096 + (size_t)(i % 7) * 1000), *mh = NULL;
    if (net->regMr(p.b.sc, buf, 3 * 4096, NCCL_PTR_HOST, &mh) != ncclSuccess)
        return -1;
    net->deregMr(p.b.sc, mh);
    free(buf);
    pair_close(&p); /* deregMr, closeSend, closeRecv, closeListen */
    tap_progress();
    return 0;
}

TAP_CASE(test_churn_connect_transfer_close_leaks_nothing)
{
    if (load()) {
        TAP_SKIP("the plugin or softnic is not available");
        return;
    }
    const char *e = getenv("RAILNET_CHURN_CYCLES");
    int cycles = e ? atoi(e) : 2000, warm = 20;
    for (int i = 0; i < warm; i++)
        EXPECT_EQ_INT(0, churn_cycle(i, i % 4 == 3));
    struct ctl_objects o0, o1;
    int fd0, th0;
    settle(&fd0, &th0);
    objects(&o0);
    long rss0 = rss_kb();
    double t0 = built_now_s();
    for (int i = warm; i < warm + cycles; i++) {
        if (churn_cycle(i, i % 4 == 3)) {
            printf("# cycle %d failed\n", i);
            EXPECT_TRUE(0);
            break;
        }
    }
    int fd1, th1;
    settle(&fd1, &th1);
    objects(&o1);
    long rss1 = rss_kb();
    printf("# %d cycles in %.1f s: fds %d -> %d, threads %d -> %d, QPs %lld -> %lld, CQs %lld -> %lld, MRs %lld -> "
           "%lld, RSS %ld -> %ld KiB (tolerance %d KiB)\n",
           cycles, built_now_s() - t0, fd0, fd1, th0, th1, (long long)o0.qps, (long long)o1.qps, (long long)o0.cqs,
           (long long)o1.cqs, (long long)o0.mrs, (long long)o1.mrs, rss0, rss1, RSS_TOLERANCE_KB);
    EXPECT_EQ_INT(fd0, fd1);
    EXPECT_EQ_INT(th0, th1);
    EXPECT_EQ_U64((uint64_t)o0.qps, (uint64_t)o1.qps);
    EXPECT_EQ_U64((uint64_t)o0.cqs, (uint64_t)o1.cqs);
    EXPECT_EQ_U64((uint64_t)o0.mrs, (uint64_t)o1.mrs);
    /* under ASan its quarantine keeps freed memory: sanitizers.sh sets
     * TEST_FAILOVER_NO_RSS and checks everything else */
    if (getenv("TEST_FAILOVER_NO_RSS"))
        printf("# RSS not checked (TEST_FAILOVER_NO_RSS)\n");
    else
        EXPECT_TRUE(rss1 <= rss0 + RSS_TOLERANCE_KB);
}

int main(int argc, char **argv) { return tap_run(argc, argv); }
