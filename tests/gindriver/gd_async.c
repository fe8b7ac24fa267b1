/* tests/gindriver/gd_async.c: a GIN collComm and its device's async events
 * (gd_tests.h: port-down, port-flap, qp-fatal), on softnic. Ports are
 * taken down and up through softnic's control API (softnic_ctl.h), found
 * with dlsym in the libibverbs the plugin loaded: an event reaches every
 * open context of the device, the plugin's included. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../softnic/softnic_ctl.h"
#include "gd.h"
#include "gd_tests.h"
#include "gin.h"

#define ASYNC_DEADLINE_S 120.0
/* How long after the event the collComm must have failed: the runs set a
 * QP retry budget of 60 s (SOFTNIC_RETRY_MIN_MS/CAP_MS=60000), so an error
 * from failed completions comes too late; the async check runs every 20 ms
 * of progress. Generous for a loaded host under ASan. */
#define ASYNC_FAIL_WITHIN_S 20.0
#define DOWN_PORT 2
#define INFLIGHT 64
#define PUT_SIZE 65536

set_state_fn gd_find_set_state(void)
{
    void *v = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_NOLOAD);
    set_state_fn f = NULL;
    if (v)
        *(void **)&f = dlsym(v, "softnic_ctl_port_set_state");
    if (!f)
        printf("softnic_ctl_port_set_state not found: run on softnic (LD_LIBRARY_PATH=.../tests/softnic)\n");
    return f;
}

struct ibv_context *gd_own_dev_open(struct gd_own_dev *d)
{
    memset(d, 0, sizeof(*d));
    void *v = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_NOLOAD);
    struct ibv_device **(*get_list)(int *) = NULL;
    struct ibv_context *(*open_dev)(struct ibv_device *) = NULL;
    if (v) {
        *(void **)&get_list = dlsym(v, "ibv_get_device_list");
        *(void **)&d->free_list = dlsym(v, "ibv_free_device_list");
        *(void **)&open_dev = dlsym(v, "ibv_open_device");
        *(void **)&d->close_dev = dlsym(v, "ibv_close_device");
    }
    if (!get_list || !d->free_list || !open_dev || !d->close_dev)
        return NULL;
    int n = 0;
    d->list = get_list(&n);
    d->ctx = d->list && n >= 1 ? open_dev(d->list[0]) : NULL;
    return d->ctx;
}

void gd_own_dev_close(struct gd_own_dev *d)
{
    if (d->ctx)
        d->close_dev(d->ctx);
    if (d->list)
        d->free_list(d->list);
    memset(d, 0, sizeof(*d));
}

/* softnic_ctl_port_counters on a context of its own: a port's counters
 * are the device's, whichever context asks. */
int gd_port_tx(unsigned long long tx[2])
{
    void *v = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_NOLOAD);
    int (*counters)(struct ibv_context *, uint8_t, struct softnic_ctl_counters *) = NULL;
    if (v)
        *(void **)&counters = dlsym(v, "softnic_ctl_port_counters");
    struct gd_own_dev d;
    struct ibv_context *own = counters ? gd_own_dev_open(&d) : NULL;
    struct softnic_ctl_counters c1, c2;
    int bad = !own || counters(own, 1, &c1) || counters(own, 2, &c2);
    if (counters)
        gd_own_dev_close(&d);
    tx[0] = bad ? 0 : c1.tx_bytes;
    tx[1] = bad ? 0 : c2.tx_bytes;
    return bad;
}

/* Takes port DOWN_PORT of the first device down and up through a context
 * of its own (the plugin's is not reachable before connect: softnic's port
 * events reach every context of the device). Returns 0 on success. */
static int flap_on_own_ctx(set_state_fn set_state)
{
    struct gd_own_dev d;
    struct ibv_context *own = gd_own_dev_open(&d);
    int bad = !own || set_state(own, DOWN_PORT, 0) || set_state(own, DOWN_PORT, 1);
    gd_own_dev_close(&d);
    return bad;
}

static int setup(struct gd_rank *r, size_t len, uint8_t **buf, void **mh)
{
    if (gd_connect_said(r))
        return 1;
    ncclResult_t e = ncclSuccess;
    void *gh = NULL;
    if (posix_memalign((void **)buf, 4096, len))
        return 1;
    memset(*buf, 0, len);
    e = r->gin->regMrSym(r->coll, *buf, len, NCCL_PTR_HOST, 0, mh, &gh);
    if (e != ncclSuccess || !*mh) {
        printf("rank %d: regMrSym failed (%d)\n", r->rank, e);
        return 1;
    }
    return gd_barrier(r);
}

/* Keeps INFLIGHT puts to peer in flight (test, then a new put in a freed
 * slot) until a call returns an error, until `until` when given (0: keep
 * going while they succeed), or the deadline. Returns the error. */
static ncclResult_t stream(struct gd_rank *r, void *mh, int peer, void **reqs, double until, double deadline)
{
    ncclResult_t e = ncclSuccess;
    while (e == ncclSuccess && gd_now() < deadline && (!until || gd_now() < until)) {
        for (int q = 0; q < INFLIGHT && e == ncclSuccess; q++) {
            if (!reqs[q]) {
                uint64_t off = (uint64_t)(q % 16) * PUT_SIZE;
                e = r->gin->iput(r->coll, off, mh, PUT_SIZE, off, mh, (uint32_t)peer, &reqs[q]);
                continue;
            }
            int done = 0;
            e = r->gin->test(r->coll, reqs[q], &done);
            if (done)
                reqs[q] = NULL;
        }
        if (e == ncclSuccess)
            e = r->gin->ginProgress(r->coll);
    }
    return e;
}

/* After the collComm failed with want: every later call returns it. */
static int later_calls_fail(struct gd_rank *r, void *mh, void **reqs, ncclResult_t want)
{
    int bad = 0;
    void *req = NULL;
    ncclResult_t e = r->gin->iput(r->coll, 0, mh, 64, 0, mh, 1, &req);
    if (e != want || req) {
        printf("rank %d: iput after the failure returned %d (request %p), expected %d\n", r->rank, e, req, want);
        bad = 1;
    }
    e = r->gin->iputSignal(r->coll, 0, mh, 64, 0, mh, 1, 4096, mh, 1, NCCL_NET_SIGNAL_OP_INC, &req);
    if (e != want || req) {
        printf("rank %d: iputSignal after the failure returned %d, expected %d\n", r->rank, e, want);
        bad = 1;
    }
    if ((e = r->gin->ginProgress(r->coll)) != want) {
        printf("rank %d: ginProgress after the failure returned %d, expected %d\n", r->rank, e, want);
        bad = 1;
    }
    int tested = 0;
    for (int q = 0; q < INFLIGHT; q++) {
        int done = 0;
        if (!reqs || !reqs[q])
            continue;
        e = r->gin->test(r->coll, reqs[q], &done);
        if (!done) {
            tested++;
            if (e != want) {
                printf("rank %d: test of a pending put after the failure returned %d, expected %d\n", r->rank, e,
                       want);
                bad = 1;
                break;
            }
        }
    }
    if (!bad)
        printf("rank %d: later iput, iputSignal, ginProgress and test (%d pending) return %d\n", r->rank, tested,
               want);
    return bad;
}

/* ------------------------------------------------------------- port-down */

/* device-fatal runs port-down's case with the whole device failing
 * (softnic_ctl_device_fatal) instead of port 2 going down. */
static int device_fatal_mode;

/* Fails the device or takes port DOWN_PORT down; 0 on success. */
static int fail_now(set_state_fn set_state, struct ibv_context *ctx)
{
    if (!device_fatal_mode)
        return set_state(ctx, DOWN_PORT, 0);
    int (*fatal)(struct ibv_context *) = NULL;
    void *v = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (v)
        *(void **)&fatal = dlsym(v, "softnic_ctl_device_fatal");
    return fatal ? fatal(ctx) : -1;
}

/* Rank 0 streams puts to rank 1 over both ports' QPs, takes port 2 down in
 * the middle and goes on: a call must return ncclSystemError well inside
 * the QP retry budget, and every later call too. Rank 1 only waits. */
static int t_port_down(struct gd_rank *r, void *arg)
{
    (void)arg;
    uint8_t *buf;
    void *mh;
    set_state_fn set_state = gd_find_set_state();
    if (!set_state || setup(r, 16 * PUT_SIZE, &buf, &mh))
        return 1;
    int bad = 0;
    if (r->rank == 0) {
        struct gin_coll *c = r->coll;
        void *reqs[INFLIGHT] = { 0 };
        double deadline = gd_now() + ASYNC_DEADLINE_S;
        ncclResult_t e = stream(r, mh, 1, reqs, gd_now() + 0.3, deadline);
        if (e != ncclSuccess) {
            printf("rank 0: puts failed (%d) before the port went down\n", e);
            return 1;
        }
        int open = 0;
        for (int q = 0; q < INFLIGHT; q++)
            open += reqs[q] != NULL;
        double t0 = gd_now();
        const char *what = device_fatal_mode ? "the device failed" : "port 2 went down";
        if (fail_now(set_state, c->ports[0].ctx)) {
            printf("rank 0: cannot make it so that %s\n", what);
            return 1;
        }
        e = stream(r, mh, 1, reqs, 0, t0 + ASYNC_FAIL_WITHIN_S);
        double took = gd_now() - t0;
        if (e == ncclSuccess) {
            printf("rank 0: no error %.0f s after %s with %d put(s) in flight\n", took, what, open);
            bad = 1;
        } else if (e != ncclSystemError) {
            printf("rank 0: %s: reported as error %d, expected ncclSystemError (%d)\n", what, e, ncclSystemError);
            bad = 1;
        } else {
            printf("rank 0: %s with %d put(s) in flight: collComm failed (ncclSystemError) after %.2f s (bound "
                   "%.0f s)\n",
                   what, open, took, ASYNC_FAIL_WITHIN_S);
            bad = later_calls_fail(r, mh, reqs, e);
        }
    }
    if (gd_barrier(r))
        return 1;
    return bad;
}

/* ------------------------------------------------------------- port-flap */

/* Rank 0 takes port 2 down and up again before connect: the collComm
 * created afterwards works (puts over both ports complete, the async check
 * ran). Then the same flap after creation, with nothing in flight, fails
 * it: the events reach the collComm's context, only their time differs. */
static int t_port_flap(struct gd_rank *r, void *arg)
{
    (void)arg;
    uint8_t *buf;
    void *mh;
    set_state_fn set_state = gd_find_set_state();
    if (!set_state)
        return 1;
    if (r->rank == 0) {
        if (flap_on_own_ctx(set_state)) {
            printf("rank 0: cannot flap port %d before connect\n", DOWN_PORT);
            return 1;
        }
        printf("rank 0: port %d went down and up before connect\n", DOWN_PORT);
    }
    if (setup(r, 16 * PUT_SIZE, &buf, &mh))
        return 1;
    int bad = 0;
    if (r->rank == 0) {
        void *reqs[INFLIGHT] = { 0 };
        double deadline = gd_now() + ASYNC_DEADLINE_S;
        /* half a second of puts: the 20 ms async check ran many times */
        ncclResult_t e = stream(r, mh, 1, reqs, gd_now() + 0.5, deadline);
        for (int q = 0; q < INFLIGHT && e == ncclSuccess; q++)
            if (reqs[q] && (e = gd_wait(r, reqs[q], deadline)) == ncclSuccess)
                reqs[q] = NULL;
        if (e != ncclSuccess) {
            printf("rank 0: puts on a collComm created after a port flap failed (%d)\n", e);
            return 1;
        }
        printf("rank 0: a collComm created after the flap moved puts over both ports\n");
        struct gin_coll *c = r->coll;
        if (set_state(c->ports[0].ctx, DOWN_PORT, 0) || set_state(c->ports[0].ctx, DOWN_PORT, 1))
            return 1;
        double t0 = gd_now();
        while ((e = r->gin->ginProgress(r->coll)) == ncclSuccess && gd_now() - t0 < ASYNC_FAIL_WITHIN_S)
            usleep(1000);
        if (e != ncclSystemError) {
            printf("rank 0: the same flap after creation: ginProgress returned %d, expected ncclSystemError\n", e);
            bad = 1;
        } else {
            printf("rank 0: the same flap after creation failed the idle collComm (ncclSystemError)\n");
            bad = later_calls_fail(r, mh, NULL, e);
        }
    }
    if (gd_barrier(r))
        return 1;
    return bad;
}

/* -------------------------------------------------------------- qp-fatal */

/* Rank 1 deregisters a window; rank 0 puts into it. Rank 0 gets the
 * failed completion; rank 1's QP towards rank 0, the responder, goes to
 * error with IBV_EVENT_QP_ACCESS_ERR: rank 1's collComm, with nothing of its
 * own in flight, must fail at its next progress. */
static int t_qp_fatal(struct gd_rank *r, void *arg)
{
    (void)arg;
    uint8_t *buf;
    void *mh, *mbad = NULL, *gh = NULL;
    if (setup(r, 16 * PUT_SIZE, &buf, &mh))
        return 1;
    uint8_t *badbuf = NULL;
    if (posix_memalign((void **)&badbuf, 4096, 4096) ||
        r->gin->regMrSym(r->coll, badbuf, 4096, NCCL_PTR_HOST, 0, &mbad, &gh) != ncclSuccess)
        return 1;
    if (r->rank == 1 && r->gin->deregMrSym(r->coll, mbad) != ncclSuccess)
        return 1;
    if (gd_barrier(r))
        return 1;
    int bad = 0;
    if (r->rank == 0) {
        void *req = NULL;
        ncclResult_t e = r->gin->iput(r->coll, 0, mh, 4096, 0, mbad, 1, &req);
        if (e == ncclSuccess)
            e = gd_wait(r, req, gd_now() + ASYNC_DEADLINE_S);
        printf("rank 0: the put into rank 1's deregistered window returned %d\n", e);
        bad = e == ncclSuccess || e == ncclInternalError;
    }
    if (gd_barrier(r))
        return 1;
    if (r->rank == 1) {
        double t0 = gd_now();
        ncclResult_t e;
        while ((e = r->gin->ginProgress(r->coll)) == ncclSuccess && gd_now() - t0 < ASYNC_FAIL_WITHIN_S)
            usleep(1000);
        if (e != ncclSystemError) {
            printf("rank 1: ginProgress returned %d after its QP to rank 0 got a fatal event, expected "
                   "ncclSystemError\n",
                   e);
            bad = 1;
        } else {
            printf("rank 1: its QP's fatal event failed the collComm (ncclSystemError)\n");
            bad = later_calls_fail(r, mh, NULL, e);
        }
    }
    if (gd_barrier(r))
        return 1;
    if (r->rank == 0)
        r->gin->deregMrSym(r->coll, mbad);
    return bad;
}

int gd_async_run(const char *plugin, const char *name, struct gd_opts *o)
{
    if (!strcmp(name, "port-down"))
        return gd_run(plugin, 2, ASYNC_DEADLINE_S * 2, -1, o->seed, t_port_down, o);
    if (!strcmp(name, "device-fatal")) {
        device_fatal_mode = 1;
        return gd_run(plugin, 2, ASYNC_DEADLINE_S * 2, -1, o->seed, t_port_down, o);
    }
    if (!strcmp(name, "port-flap"))
        return gd_run(plugin, 2, ASYNC_DEADLINE_S * 2, -1, o->seed, t_port_flap, o);
    if (!strcmp(name, "qp-fatal"))
        return gd_run(plugin, 2, ASYNC_DEADLINE_S * 2, -1, o->seed, t_qp_fatal, o);
    return -1;
}
