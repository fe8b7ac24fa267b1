/* tests/plugin/test_errors_watch.c: plugin/ib/errors.c's errors_watch, the
 * per-comm view of a device's async events that p2p comms (and through them
 * failover.c) and the GIN collComm share. The device's counters are drained
 * by whichever comm polls first, under the device's lock; every comm keeps
 * its own seen-values, so an event one comm's poll drained must still reach
 * every other comm of the device (a lost PORT_ERR would leave failover or a
 * GIN collComm waiting out the QP retry budget).
 *
 * errors.c and ibvwrap.c are linked in directly (the comm-failing parts of
 * errors.c are stubbed: no comm is used here), on softnic's libibverbs;
 * ports go down and up through softnic's control API. */
#include "../tap.h"
#include "../build_paths.h"
#include "plugin/ib/comm.h"
#include "plugin/ib/errors.h"
#include "plugin/ib/ibvwrap.h"
#include "plugin/ib/log.h"
#include "plugin/ib/oob.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define WAIT_S 10.0

/* errors.c's comm parts, unused by these cases */
void comm_fail(struct comm *c, ncclResult_t err) { (void)c, (void)err; }
int oob_peer_alive(int fd) { (void)fd; return 1; }

static int (*set_state)(struct ibv_context *, uint8_t, int);

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* softnic's first device, opened through the plugin's verbs table, as a
 * merged two-port device's ports. */
static struct ibv_context *open_ctx(struct qp_port ports[HS_MAX_PORTS])
{
    char err[256];
    if (ibvwrap_global_load(test_softnic_verbs(), err, sizeof(err)))
        TAP_SKIP("softnic's libibverbs did not load");
    void *v = dlopen(test_softnic_verbs(), RTLD_NOW | RTLD_NOLOAD);
    *(void **)&set_state = v ? dlsym(v, "softnic_ctl_port_set_state") : NULL;
    int n = 0;
    struct ibv_device **list = RN_IBV(get_device_list)(&n);
    if (!set_state || !list || n < 1)
        TAP_SKIP("no softnic device or control API");
    struct ibv_context *ctx = RN_IBV(open_device)(list[0]);
    EXPECT_TRUE(ctx != NULL);
    memset(ports, 0, sizeof(struct qp_port) * HS_MAX_PORTS);
    for (int p = 0; p < HS_MAX_PORTS; p++) {
        ports[p].ctx = ctx;
        ports[p].port_num = (uint8_t)(p + 1);
        ports[p].port_idx = (uint8_t)p;
    }
    return ctx;
}

/* Polls w until its news has bit `bit` in down (want_down) or up, at most
 * WAIT_S (softnic queues the event at once; a real NIC would not). */
static struct errors_news poll_until(struct errors_watch *w, uint32_t bit, int want_down)
{
    struct errors_news n;
    double end = now_s() + WAIT_S;
    do {
        errors_watch_poll(w, NULL, NULL, NULL, &n);
        if ((want_down ? n.down : n.up) & bit)
            return n;
        usleep(1000);
    } while (now_s() < end);
    tap_fail_at(__FILE__, __LINE__, "no %s event for port bit 0x%x within %.0f s", want_down ? "down" : "up", bit,
                WAIT_S);
}

/* Comm A's poll drains port 2's down: comm B, polled afterwards, must see
 * it too (once), and the same for the up that follows with B polling first. */
TAP_CASE(an_event_drained_by_one_watch_reaches_every_watch_of_the_device)
{
    struct qp_port ports[HS_MAX_PORTS];
    struct ibv_context *ctx = open_ctx(ports);
    struct errors_watch a, b;
    errors_watch_start(&a, ports, 2);
    errors_watch_start(&b, ports, 2);
    EXPECT_EQ_INT(0, set_state(ctx, 2, 0));
    struct errors_news n = poll_until(&a, 1u << 1, 1);
    EXPECT_EQ_INT(1u << 1, n.down);
    EXPECT_EQ_INT(0, n.up);
    errors_watch_poll(&b, NULL, NULL, NULL, &n); /* nothing left on the fd: the counters tell */
    EXPECT_EQ_INT(1u << 1, n.down);
    errors_watch_poll(&b, NULL, NULL, NULL, &n); /* seen once */
    EXPECT_EQ_INT(0, n.down);
    EXPECT_EQ_INT(0, set_state(ctx, 2, 1));
    n = poll_until(&b, 1u << 1, 0);
    EXPECT_EQ_INT(0, n.down);
    errors_watch_poll(&a, NULL, NULL, NULL, &n);
    EXPECT_EQ_INT(1u << 1, n.up);
    EXPECT_EQ_INT(0, n.down);
}

/* A watch started after a flap does not see it (events queued before the
 * start are drained by it); one started before sees both, down and up. */
TAP_CASE(events_before_the_start_do_not_count)
{
    struct qp_port ports[HS_MAX_PORTS];
    struct ibv_context *ctx = open_ctx(ports);
    struct errors_watch old;
    errors_watch_start(&old, ports, 2);
    EXPECT_EQ_INT(0, set_state(ctx, 1, 0));
    EXPECT_EQ_INT(0, set_state(ctx, 1, 1));
    /* softnic posts both to every context before set_state returns */
    struct errors_watch late;
    errors_watch_start(&late, ports, 2);
    struct errors_news n;
    errors_watch_poll(&late, NULL, NULL, NULL, &n);
    EXPECT_EQ_INT(0, n.down);
    EXPECT_EQ_INT(0, n.up);
    errors_watch_poll(&old, NULL, NULL, NULL, &n);
    EXPECT_EQ_INT(1u << 0, n.down);
    EXPECT_EQ_INT(1u << 0, n.up);
}

/* Bit p of the news is the watch's port p, not the verbs port number: a
 * one-port comm on port 2 (an unmerged device "softnic0:2") gets bit 0, one
 * on port 1 nothing. */
TAP_CASE(news_bits_are_the_watch_s_port_indexes)
{
    struct qp_port ports[HS_MAX_PORTS];
    struct ibv_context *ctx = open_ctx(ports);
    struct errors_watch p1, p2;
    errors_watch_start(&p1, &ports[0], 1);
    errors_watch_start(&p2, &ports[1], 1);
    EXPECT_EQ_INT(0, set_state(ctx, 2, 0));
    struct errors_news n = poll_until(&p2, 1u << 0, 1);
    EXPECT_EQ_INT(1u << 0, n.down);
    errors_watch_poll(&p1, NULL, NULL, NULL, &n);
    EXPECT_EQ_INT(0, n.down);
    EXPECT_EQ_INT(0, set_state(ctx, 2, 1));
}

/* IBV_EVENT_DEVICE_FATAL is news of its own (the comms' WARNs name it) and
 * every port of the watch is down with it; a watch started afterwards does
 * not see it.  Last: the device stays failed until its ports are set up. */
TAP_CASE(a_device_fatal_event_is_named_and_takes_every_port_down)
{
    struct qp_port ports[HS_MAX_PORTS];
    struct ibv_context *ctx = open_ctx(ports);
    int (*fatal)(struct ibv_context *);
    void *v = dlopen(test_softnic_verbs(), RTLD_NOW | RTLD_NOLOAD);
    *(void **)&fatal = v ? dlsym(v, "softnic_ctl_device_fatal") : NULL;
    if (!fatal)
        TAP_SKIP("softnic_ctl_device_fatal not found");
    struct errors_watch w;
    errors_watch_start(&w, ports, 2);
    EXPECT_EQ_INT(0, fatal(ctx));
    struct errors_news n;
    double end = now_s() + WAIT_S;
    do {
        errors_watch_poll(&w, NULL, NULL, NULL, &n);
        if (n.device_fatal)
            break;
        usleep(1000);
    } while (now_s() < end);
    EXPECT_EQ_INT(1, n.device_fatal);
    EXPECT_EQ_INT(3u, n.down);
    errors_watch_poll(&w, NULL, NULL, NULL, &n);
    EXPECT_EQ_INT(0, n.device_fatal);
    struct errors_watch late;
    errors_watch_start(&late, ports, 2);
    errors_watch_poll(&late, NULL, NULL, NULL, &n);
    EXPECT_EQ_INT(0, n.device_fatal);
    EXPECT_EQ_INT(0, n.down);
    EXPECT_EQ_INT(0, set_state(ctx, 1, 1));
    EXPECT_EQ_INT(0, set_state(ctx, 2, 1));
}

int main(int argc, char **argv) { return tap_run(argc, argv); }
