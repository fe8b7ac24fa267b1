/* tests/plugin/test_cq_overrun.c: a comm whose CQ overruns (the NIC drops
 * completions and raises IBV_EVENT_CQ_ERR on the CQ) fails with one WARN
 * naming the device, the comm kind and the overrun, instead of leaving its
 * requests to wait forever for completions that were lost.
 *
 * A connected pair on softnic through the plugin's exported table (loaded
 * through tools/common/plugin_tables, as NCCL loads it). The overrun is made
 * with the verbs API only, as on a real NIC: the comm's CQ is shrunk with
 * ibv_resize_cq to one entry, then MESSAGES striped messages put more
 * completions into it than it holds while that comm is not progressed
 * (softnic drops the rest and raises IBV_EVENT_CQ_ERR once, tests/softnic
 * test_softnic_cq checks that). The CQ is the plugin's own: the test reads
 * it from the comm (plugin/ib/comm.h, struct comm first in both comm kinds).
 * The other comm of the pair is not touched by the event: its requests
 * complete. Waits are bounded (30 s): one that runs out fails the case, as
 * a plugin that ignores the event does (its requests never complete). */
#include "../tap.h"
#include "nccl_net_v8.h"
#include "plugin/ib/comm.h"
#include "built_plugin.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MSG (1 << 20) /* striped over the connection's QPs: a completion per QP */
#define MESSAGES 4
#define WAIT_S 30
#define ROUNDS 20

static const ncclNet_v8_t *net;
static char logbuf[1 << 15];
static char dev_name[256];
static int (*resize_cq)(struct ibv_cq *, int);

static int load(void)
{
    void *v;
    built_capture_warns(logbuf, sizeof(logbuf));
    if (!(net = built_plugin_load(built_warn_logger, &v)))
        return -1;
    *(void **)&resize_cq = dlsym(v, "ibv_resize_cq");
    ncclNetProperties_v8_t props;
    if (!resize_cq || net->getProperties(0, &props) != ncclSuccess)
        return -1;
    /* the WARN names the NIC; a merged device's properties name its ports'
     * fused device ("softnic0+softnic0") */
    snprintf(dev_name, sizeof(dev_name), "device %.*s", (int)strcspn(props.name, "+"), props.name);
    logbuf[0] = '\0';
    return 0;
}

/* The plugin's CQ of a comm (send or receive) the table handed out. */
static struct ibv_cq *cq_of(void *comm) { return ((struct comm *)comm)->cq; }

/* Posts MESSAGES receives, then MESSAGES sends that match them. The
 * victim's own irecv or isend may already see the overrun (it progresses
 * its comm while it waits for a slot or a clear-to-send: the first
 * messages' completions may have overrun the CQ by then, on a loaded
 * host): that error is returned, and posting stops. */
static ncclResult_t post_messages(struct built_pair *p, void **rr, void **sr, int victim_is_send)
{
    double end = built_now_s() + WAIT_S;
    ncclResult_t r;
    for (int i = 0; i < MESSAGES; i++) {
        void *data = p->rbuf + (size_t)i * MSG;
        int size = MSG, tag = i + 1;
        rr[i] = NULL;
        while (!rr[i] && built_now_s() < end)
            if ((r = net->irecv(p->rc, 1, &data, &size, &tag, &p->rmh, &rr[i])) != ncclSuccess) {
                EXPECT_TRUE(!victim_is_send);
                return r;
            }
        EXPECT_TRUE(rr[i] != NULL);
    }
    for (int i = 0; i < MESSAGES; i++) {
        sr[i] = NULL;
        while (!sr[i] && built_now_s() < end)
            if ((r = net->isend(p->sc, p->sbuf + (size_t)i * MSG, MSG, i + 1, p->smh, &sr[i])) != ncclSuccess) {
                EXPECT_TRUE(victim_is_send);
                return r;
            }
        EXPECT_TRUE(sr[i] != NULL);
    }
    return ncclSuccess;
}

/* Tests every request until all are done; each test must succeed. */
static void complete_all(void **req)
{
    int done[MESSAGES] = { 0 }, left = MESSAGES;
    double end = built_now_s() + WAIT_S;
    while (left && built_now_s() < end)
        for (int i = 0; i < MESSAGES; i++) {
            if (done[i])
                continue;
            EXPECT_EQ_INT(ncclSuccess, net->test(req[i], &done[i], NULL));
            left -= done[i];
        }
    EXPECT_EQ_INT(0, left);
}

/* Tests the requests until one returns an error (the comm's), or every one
 * is done, or WAIT_S pass; returns that error (ncclSuccess for the others),
 * the request that returned it in *failed and the requests not done in
 * *pending. */
static ncclResult_t test_until_error(void **req, void **failed, int *pending)
{
    int done[MESSAGES] = { 0 }, left = MESSAGES;
    double end = built_now_s() + WAIT_S;
    *failed = NULL;
    *pending = left;
    while ((*pending = left) && built_now_s() < end)
        for (int i = 0; i < MESSAGES; i++) {
            if (done[i])
                continue;
            ncclResult_t r = net->test(req[i], &done[i], NULL);
            if (r != ncclSuccess) {
                *failed = req[i];
                return r;
            }
            left -= done[i];
        }
    if (left)
        printf("# %d of %d requests still pending after %d s with no error\n", left, MESSAGES, WAIT_S);
    return ncclSuccess;
}

/* Shrinks the CQ of `victim` (the pair's send or receive comm) to one
 * entry, runs MESSAGES messages with only the other comm progressed, then
 * expects the victim's requests to fail with the CQ_ERR WARN. A round in
 * which every completion found room (the victim polls in isend while a CTS
 * is late: a loaded host) is run again, at most ROUNDS. */
static void overrun_case(int victim_is_send)
{
    if (load()) {
        TAP_SKIP("the plugin or softnic is not available");
        return;
    }
    struct built_pair p;
    EXPECT_EQ_INT(0, built_pair_open(net, &p, (size_t)MESSAGES * MSG));
    memset(p.sbuf, 0x5a, (size_t)MESSAGES * MSG); /* bytes the NIC reads are defined (valgrind) */
    void *victim = victim_is_send ? p.sc : p.rc;
    EXPECT_EQ_INT(0, resize_cq(cq_of(victim), 1));
    void *rr[MESSAGES], *sr[MESSAGES], *failed = NULL;
    ncclResult_t r = ncclSuccess;
    int in_post = 0;
    for (int round = 0, pending = 0; round < ROUNDS && r == ncclSuccess && !pending; round++) {
        if ((r = post_messages(&p, rr, sr, victim_is_send)) != ncclSuccess) {
            in_post = 1; /* the victim's own post call reported the overrun */
            break;
        }
        /* the other side finishes by itself: its completions do not need
         * the victim's polls (data landed / writes acknowledged) */
        complete_all(victim_is_send ? rr : sr);
        r = test_until_error(victim_is_send ? sr : rr, &failed, &pending);
        if (r == ncclSuccess && !pending)
            printf("# round %d: no completion was dropped (the victim polled between them); again\n", round);
        tap_progress();
    }
    if (r != ncclSystemError)
        printf("# log:\n%s", logbuf);
    EXPECT_EQ_INT(ncclSystemError, r);
    EXPECT_TRUE(failed != NULL || in_post);
    /* sticky (the victim's next request is refused), and said once */
    void *more = NULL, *data = p.rbuf;
    int size = MSG, tag = 99;
    EXPECT_EQ_INT(ncclSystemError, victim_is_send ? net->isend(p.sc, p.sbuf, MSG, tag, p.smh, &more)
                                                  : net->irecv(p.rc, 1, &data, &size, &tag, &p.rmh, &more));
    EXPECT_TRUE(more == NULL);
    printf("# %s", logbuf);
    EXPECT_EQ_INT(1, built_count(logbuf, "IBV_EVENT_CQ_ERR"));
    EXPECT_EQ_INT(1, built_count(logbuf, dev_name));
    EXPECT_EQ_INT(1, built_count(logbuf, "\n")); /* one WARN in all */
    EXPECT_EQ_INT(1, built_count(logbuf, victim_is_send ? "on the send comm's CQ of 1 entries" : "on the receive comm's CQ of 1 entries"));
    EXPECT_EQ_INT(1, built_count(logbuf, "the CQ overran and completions were lost"));
    built_pair_close(net, &p);
}

TAP_CASE(test_receive_cq_overrun_fails_the_recv_comm_with_one_warn) { overrun_case(0); }

TAP_CASE(test_send_cq_overrun_fails_the_send_comm_with_one_warn) { overrun_case(1); }

int main(int argc, char **argv) { return tap_run(argc, argv); }
