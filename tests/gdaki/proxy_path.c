/* tests/gdaki/proxy_path.c: the CPU-proxy half of bench_gdaki_vs_proxy
 * (contract in proxy_path.h). */
#include "proxy_path.h"

#include "../../tools/common/plugin_tables.h"

#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nccl_net_v8.h"
#include "path_result.h"

struct proxy_path {
    struct proxy_path_opts o;
    struct plugin_tables lib;   /* stays loaded: the plugin's threads may outlive close */
    const ncclNet_v8_t *net;
    void *scomm, *rcomm;
    void *smh, *rmh;
    char desc[256];
};

/* The logger has no context argument: its one setting lives here. */
static int proxy_verbose;

static void proxy_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
                         const char *fmt, ...)
{
    (void)flags;
    if (level != NCCL_LOG_WARN && !(level == NCCL_LOG_INFO && proxy_verbose))
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "NCCL %s %s (%s:%d)\n", level == NCCL_LOG_WARN ? "WARN" : "INFO", msg, file, line);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double timeout_of(const struct proxy_path *p)
{
    return p->o.timeout_s > 0 ? p->o.timeout_s : 60;
}

int proxy_path_open(const struct proxy_path_opts *o, struct proxy_path **out, char *err, size_t errlen)
{
    *out = NULL;
    if (o->slots < 1 || o->slots > PATH_MAX_WINDOW || !o->src || !o->dst ||
        (o->ptr_type != NCCL_PTR_HOST && o->ptr_type != NCCL_PTR_CUDA)) {
        snprintf(err, errlen, "bad options: %d slots (1..%d), buffers %p/%p, pointer type %d", o->slots,
                 PATH_MAX_WINDOW, o->src, o->dst, o->ptr_type);
        return -1;
    }
    struct proxy_path *p = calloc(1, sizeof(*p));
    if (!p) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    p->o = *o;
    proxy_verbose = o->verbose;
    void *listen = NULL;
    char lerr[PATH_MAX + 256];
    p->net = plugin_tables_load(&p->lib, o->plugin, &plugin_table_net_v8, PLUGIN_TABLES_NAME, lerr, sizeof(lerr));
    if (!p->net) {
        snprintf(err, errlen, "cannot use the plugin: %s", lerr);
        goto fail;
    }
    if (p->net->init(proxy_logger) != ncclSuccess) {
        snprintf(err, errlen, "the plugin's init failed (its WARN above says why)");
        goto fail;
    }
    int ndev = 0;
    ncclNetProperties_v8_t props;
    if (p->net->devices(&ndev) != ncclSuccess || o->dev < 0 || o->dev >= ndev ||
        p->net->getProperties(o->dev, &props) != ncclSuccess) {
        snprintf(err, errlen, "the plugin has %d device(s); device %d is not one of them (RAILNET_HCA?)", ndev,
                 o->dev);
        goto fail;
    }
    if (!(props.ptrSupport & o->ptr_type)) {
        snprintf(err, errlen, "plugin device %d (%s) does not take %s pointers (ptrSupport 0x%x; its INFO "
                 "lines with --verbose say why)", o->dev, props.name,
                 o->ptr_type == NCCL_PTR_CUDA ? "CUDA" : "host", props.ptrSupport);
        goto fail;
    }
    snprintf(p->desc, sizeof(p->desc), "%s port %d, %d Mb/s", props.name, props.port, props.speed);

    /* NCCL's order: listen on the receiving rank, the handle travels to the
     * sending rank, which connects while the receiver accepts; both calls
     * return NULL until the handshake is through. */
    char handle[NCCL_NET_HANDLE_MAXSIZE];
    memset(handle, 0, sizeof(handle));
    if (p->net->listen(o->dev, handle, &listen) != ncclSuccess) {
        snprintf(err, errlen, "listen on device %d failed", o->dev);
        goto fail;
    }
    double deadline = now_s() + timeout_of(p);
    while (!p->scomm || !p->rcomm) {
        ncclNetDeviceHandle_v8_t *dh = NULL;
        if (!p->scomm && p->net->connect(o->dev, handle, &p->scomm, &dh) != ncclSuccess) {
            snprintf(err, errlen, "connect on device %d failed", o->dev);
            goto fail;
        }
        if (!p->rcomm && p->net->accept(listen, &p->rcomm, &dh) != ncclSuccess) {
            snprintf(err, errlen, "accept on device %d failed", o->dev);
            goto fail;
        }
        if (now_s() > deadline) {
            snprintf(err, errlen, "connect/accept not done after %.0f s", timeout_of(p));
            goto fail;
        }
        usleep(50);
    }
    p->net->closeListen(listen);
    listen = NULL;
    size_t len = (size_t)o->slots * PATH_SLOT;
    if (p->net->regMr(p->scomm, o->src, len, o->ptr_type, &p->smh) != ncclSuccess ||
        p->net->regMr(p->rcomm, o->dst, len, o->ptr_type, &p->rmh) != ncclSuccess) {
        snprintf(err, errlen, "regMr of %zu bytes of %s memory failed", len,
                 o->ptr_type == NCCL_PTR_CUDA ? "CUDA" : "host");
        goto fail;
    }
    *out = p;
    return 0;
fail:
    if (listen)
        p->net->closeListen(listen);
    proxy_path_close(p);
    return -1;
}

const char *proxy_path_describe(const struct proxy_path *p)
{
    return p->desc;
}

/* One phase's shared state between the sender (calling thread) and the
 * receiver thread. */
struct phase {
    struct proxy_path *p;
    int size;
    long n;
    int window;              /* in flight at most, and the slot cycle */
    double deadline;
    atomic_int ready;        /* the receiver posted its first receives */
    atomic_int stop;         /* one side failed: the other gives up */
    double rx_end;           /* when the last receive was done */
    int rx_rc;
    char rx_err[256];
};

static void *slot_of(void *base, long i, int window)
{
    return (char *)base + (size_t)(i % window) * PATH_SLOT;
}

/* Receiver: up to window irecvs posted ahead, as NCCL's proxy drives a
 * receive: receives are tested in order, each completed CUDA receive gets
 * its iflush at once (if the plugin returns one), and flushes are tested
 * in order behind them, so that several flushes may be in flight while the
 * next receives complete.  A receive is done once its flush is. */
static void *rx_main(void *arg)
{
    struct phase *ph = arg;
    struct proxy_path *p = ph->p;
    const ncclNet_v8_t *net = p->net;
    const int w = ph->window;
    void *ring[PATH_MAX_WINDOW] = { 0 };    /* irecv of [received, posted) */
    void *flush[PATH_MAX_WINDOW] = { 0 };   /* iflush of [done, received), or NULL */
    long posted = 0, received = 0, done = 0;
    int tag = 1;
    if (p->o.thread_init)
        p->o.thread_init(p->o.thread_arg);
    while (done < ph->n) {
        int progress = 0;
        if (posted < ph->n && posted - done < w) {
            void *data = slot_of(p->o.dst, posted, w);
            int size = ph->size;
            void *req = NULL;
            if (net->irecv(p->rcomm, 1, &data, &size, &tag, &p->rmh, &req) != ncclSuccess) {
                snprintf(ph->rx_err, sizeof(ph->rx_err), "irecv %ld returned an error", posted);
                goto fail;
            }
            if (req) {
                ring[posted % w] = req;
                posted++;
                progress = 1;
            }
        }
        if (!atomic_load(&ph->ready) && (posted == ph->n || posted - done == w))
            atomic_store(&ph->ready, 1);
        if (received < posted) {
            int k = (int)(received % w), fin = 0, got = -1;
            if (net->test(ring[k], &fin, &got) != ncclSuccess) {
                snprintf(ph->rx_err, sizeof(ph->rx_err), "test of irecv %ld returned an error", received);
                goto fail;
            }
            if (fin) {
                if (got != ph->size) {
                    snprintf(ph->rx_err, sizeof(ph->rx_err), "irecv %ld completed with %d bytes, %d sent",
                             received, got, ph->size);
                    goto fail;
                }
                ring[k] = NULL;
                flush[k] = NULL;
                if (p->o.ptr_type == NCCL_PTR_CUDA) {
                    void *data = slot_of(p->o.dst, received, w);
                    int size = ph->size;
                    if (net->iflush(p->rcomm, 1, &data, &size, &p->rmh, &flush[k]) != ncclSuccess) {
                        snprintf(ph->rx_err, sizeof(ph->rx_err), "iflush of receive %ld returned an error",
                                 received);
                        goto fail;
                    }
                }
                received++;
                progress = 1;
            }
        }
        if (done < received) {
            int k = (int)(done % w), fin = 1, got = -1;
            if (flush[k] && net->test(flush[k], &fin, &got) != ncclSuccess) {
                snprintf(ph->rx_err, sizeof(ph->rx_err), "test of iflush %ld returned an error", done);
                goto fail;
            }
            if (fin) {
                flush[k] = NULL;
                done++;
                progress = 1;
            }
        }
        if (atomic_load(&ph->stop))
            return NULL;
        if (now_s() > ph->deadline) {
            snprintf(ph->rx_err, sizeof(ph->rx_err), "deadline passed with %ld of %ld receives done", done, ph->n);
            goto fail;
        }
        /* an idle pass gives the CPU away: NCCL's proxy yields too, and on a
         * host with few cores a software NIC's threads need it */
        if (!progress)
            sched_yield();
    }
    ph->rx_end = now_s();
    ph->rx_rc = 0;
    return NULL;
fail:
    ph->rx_rc = -1;
    atomic_store(&ph->stop, 1);
    return NULL;
}

/* Posts message i until the plugin takes it (a send waits for its
 * clear-to-send).  0, 1 (not taken: try again later) or -1. */
static int tx_post(struct phase *ph, long i, void **req, char *err, size_t errlen)
{
    struct proxy_path *p = ph->p;
    *req = NULL;
    if (p->net->isend(p->scomm, slot_of(p->o.src, i, ph->window), ph->size, 1, p->smh, req) != ncclSuccess) {
        snprintf(err, errlen, "isend %ld returned an error", i);
        return -1;
    }
    return *req ? 0 : 1;
}

/* Tests a send: 0 done, 1 not yet, -1 error. */
static int tx_test(struct phase *ph, long i, void *req, char *err, size_t errlen)
{
    int fin = 0, got = -1;
    if (ph->p->net->test(req, &fin, &got) != ncclSuccess) {
        snprintf(err, errlen, "test of isend %ld returned an error", i);
        return -1;
    }
    if (fin && got != ph->size) {
        snprintf(err, errlen, "isend %ld completed with %d bytes, %d sent", i, got, ph->size);
        return -1;
    }
    return fin ? 0 : 1;
}

static int tx_check(struct phase *ph, long done, char *err, size_t errlen)
{
    if (atomic_load(&ph->stop))
        return -1;
    if (now_s() > ph->deadline) {
        snprintf(err, errlen, "deadline passed with %ld of %ld sends done", done, ph->n);
        return -1;
    }
    return 0;
}

/* Runs the receiver thread around body (the sender's part). */
static int run_phase(struct proxy_path *p, size_t size, long n, int window,
                     int (*body)(struct phase *, void *, char *, size_t), void *arg, double *rx_end, char *err,
                     size_t errlen)
{
    *err = 0;
    if (size < 1 || size > PATH_SLOT || n < 1 || window < 1 || window > p->o.slots) {
        snprintf(err, errlen, "bad phase: %zu bytes (1..%d), %ld messages, window %d (1..%d)", size, PATH_SLOT, n,
                 window, p->o.slots);
        return -1;
    }
    struct phase ph;
    memset(&ph, 0, sizeof(ph));
    ph.p = p;
    ph.size = (int)size;
    ph.n = n;
    ph.window = window;
    ph.deadline = now_s() + timeout_of(p);
    atomic_init(&ph.ready, 0);
    atomic_init(&ph.stop, 0);
    pthread_t th;
    if (pthread_create(&th, NULL, rx_main, &ph) != 0) {
        snprintf(err, errlen, "cannot start the receiver thread");
        return -1;
    }
    while (!atomic_load(&ph.ready) && !atomic_load(&ph.stop) && now_s() < ph.deadline)
        sched_yield();
    int rc = atomic_load(&ph.ready) ? body(&ph, arg, err, errlen) : -1;
    if (rc < 0)
        atomic_store(&ph.stop, 1);
    pthread_join(th, NULL);
    if (ph.rx_rc < 0) {
        snprintf(err, errlen, "receiver: %s", ph.rx_err);
        return -1;
    }
    if (rc < 0 && !*err)
        snprintf(err, errlen, "the receiver was not ready before the deadline");
    *rx_end = ph.rx_end;
    return rc;
}

struct rate_arg {
    double t0, t_end;
};

static int rate_body(struct phase *ph, void *arg, char *err, size_t errlen)
{
    struct rate_arg *ra = arg;
    const int w = ph->window;
    void *ring[PATH_MAX_WINDOW] = { 0 };
    long posted = 0, done = 0;
    ra->t0 = now_s();
    while (done < ph->n) {
        int progress = 0;
        if (posted < ph->n && posted - done < w) {
            int r = tx_post(ph, posted, &ring[posted % w], err, errlen);
            if (r < 0)
                return -1;
            if (r == 0)
                posted++, progress = 1;
        }
        if (done < posted) {
            int r = tx_test(ph, done, ring[done % w], err, errlen);
            if (r < 0)
                return -1;
            if (r == 0)
                done++, progress = 1;
        }
        if (tx_check(ph, done, err, errlen))
            return -1;
        if (!progress)
            sched_yield();
    }
    ra->t_end = now_s();
    return 0;
}

int proxy_path_rate(struct proxy_path *p, size_t size, long n, int window, double *rate_mps, char *err,
                    size_t errlen)
{
    struct rate_arg ra = { 0, 0 };
    double rx_end = 0;
    if (run_phase(p, size, n, window, rate_body, &ra, &rx_end, err, errlen) < 0)
        return -1;
    double end = ra.t_end > rx_end ? ra.t_end : rx_end;
    *rate_mps = end > ra.t0 ? (double)n / ((end - ra.t0) * 1e6) : 0;
    return 0;
}

/* One message at a time; the receiver keeps its receives posted ahead, so
 * each send finds its clear-to-send already there, as in NCCL's steady
 * state, and only the message itself is timed. */
static int lat_body(struct phase *ph, void *arg, char *err, size_t errlen)
{
    double *lat_us = arg;
    for (long i = 0; i < ph->n; i++) {
        void *req = NULL;
        double t0 = now_s();
        int r;
        while ((r = tx_post(ph, i, &req, err, errlen)) == 1) {
            if (tx_check(ph, i, err, errlen))
                return -1;
            sched_yield();
        }
        if (r < 0)
            return -1;
        while ((r = tx_test(ph, i, req, err, errlen)) == 1) {
            if (tx_check(ph, i, err, errlen))
                return -1;
            sched_yield();
        }
        if (r < 0)
            return -1;
        lat_us[i] = (now_s() - t0) * 1e6;
    }
    return 0;
}

int proxy_path_lat(struct proxy_path *p, size_t size, long n, double *lat_us, char *err, size_t errlen)
{
    double rx_end = 0;
    return run_phase(p, size, n, p->o.slots, lat_body, lat_us, &rx_end, err, errlen);
}

void proxy_path_close(struct proxy_path *p)
{
    if (!p)
        return;
    if (p->smh)
        p->net->deregMr(p->scomm, p->smh);
    if (p->rmh)
        p->net->deregMr(p->rcomm, p->rmh);
    if (p->scomm)
        p->net->closeSend(p->scomm);
    if (p->rcomm)
        p->net->closeRecv(p->rcomm);
    free(p);
}
