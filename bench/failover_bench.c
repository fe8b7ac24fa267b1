/* bench/failover_bench.c: what a port failure and its recovery cost a
 * connection of the merged dual-port softnic device (bench/failover.sh runs
 * it with a rate limit per port). One process drives a send and a receive
 * comm through the plugin's exported table with 8 messages of --size bytes
 * in flight, and takes port 2 down and up through softnic's control API:
 *   failover  time from port 2 down to the first completion of a message
 *             posted after it (that message went over port 1 alone);
 *   recovery  time from port 2 up to the first data on port 2 again
 *             (softnic's port counter grows by more than a probe);
 *   outage bandwidth, as a fraction of one port's rate (--rate, bytes/s),
 *             next to the bandwidth of both ports before the failure.
 * --cycles down/up cycles, medians printed. Usage: failover_bench --help. */
#include "nccl_net_v8.h"
#include "plugin/ib/parse.h"
#include "tools/common/plugin_tables.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define W 8

struct ctl_counters {
    uint64_t tx_bytes, tx_packets, rx_bytes, rx_packets, errors, retries, rnr_naks;
};

static const ncclNet_v8_t *net;
static void *ctx;
static int (*set_state)(void *, uint8_t, int);
static int (*port_counters)(void *, uint8_t, struct ctl_counters *);

static void logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line, const char *fmt, ...)
{
    (void)level, (void)flags, (void)file, (void)line, (void)fmt;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static uint64_t port_tx(uint8_t p)
{
    struct ctl_counters c;
    memset(&c, 0, sizeof(c));
    port_counters(ctx, p, &c);
    return c.tx_bytes;
}

static int load(const char *top)
{
    char path[4096], verbs[4096];
    snprintf(path, sizeof(path), "%s/.libs/libnccl-net-railnet.so", top);
    snprintf(verbs, sizeof(verbs), "%s/tests/softnic/libibverbs.so.1", top);
    setenv("RAILNET_IBVERBS_LIB", verbs, 1);
    static struct plugin_tables lib;
    char err[PATH_MAX + 256];
    int n = 0;
    net = plugin_tables_load(&lib, path, &plugin_table_net_v8, PLUGIN_TABLES_NAME, err, sizeof(err));
    if (!net)
        fprintf(stderr, "failover_bench: %s\n", err);
    if (!net || net->init(logger) != ncclSuccess ||
        net->devices(&n) != ncclSuccess || n < 1)
        return -1;
    void *v = dlopen(verbs, RTLD_NOW | RTLD_NOLOAD);
    void **(*get_list)(int *) = v ? (void **(*)(int *))dlsym(v, "ibv_get_device_list") : NULL;
    void *(*open_dev)(void *) = v ? (void *(*)(void *))dlsym(v, "ibv_open_device") : NULL;
    if (!get_list || !open_dev)
        return -1;
    *(void **)&set_state = dlsym(v, "softnic_ctl_port_set_state");
    *(void **)&port_counters = dlsym(v, "softnic_ctl_port_counters");
    void **list = get_list(&n);
    return set_state && port_counters && list && n > 0 && (ctx = open_dev(list[0])) ? 0 : -1;
}

struct flow {
    void *sc, *rc, *smh, *rmh;
    char *sbuf, *rbuf[W];
    int size;
    void *sr[W], *rr[W];
    double posted[W];
    int head, count;
    uint64_t done_bytes;
};

/* Posts what fits, tests the oldest; returns its post time when it
 * completed (else 0), -1 on an error. */
static double step(struct flow *f)
{
    while (f->count < W) {
        int k = (f->head + f->count) % W, tag = 1, sz = f->size;
        void *rd = f->rbuf[k];
        if (!f->rr[k] && net->irecv(f->rc, 1, &rd, &sz, &tag, &f->rmh, &f->rr[k]) != ncclSuccess)
            return -1;
        if (!f->rr[k])
            break;
        if (net->isend(f->sc, f->sbuf, f->size, tag, f->smh, &f->sr[k]) != ncclSuccess)
            return -1;
        if (!f->sr[k])
            break;
        f->posted[k] = now_s();
        f->count++;
    }
    if (!f->count)
        return 0;
    int k = f->head, sd = 0, rd = 0;
    if (f->sr[k] && net->test(f->sr[k], &sd, NULL) != ncclSuccess)
        return -1;
    if (sd)
        f->sr[k] = NULL;
    if (f->rr[k] && net->test(f->rr[k], &rd, NULL) != ncclSuccess)
        return -1;
    if (rd)
        f->rr[k] = NULL;
    /* later receives are tested too: NCCL's proxy does, and the receiver
     * answers a failover only when progressed */
    for (int j = 1; j < f->count; j++) {
        int q = (k + j) % W, d = 0;
        if (f->rr[q] && net->test(f->rr[q], &d, NULL) != ncclSuccess)
            return -1;
        if (d)
            f->rr[q] = NULL;
    }
    if (f->sr[k] || f->rr[k])
        return 0;
    f->head = (f->head + 1) % W;
    f->count--;
    f->done_bytes += (uint64_t)f->size;
    return f->posted[k];
}

static int run_for(struct flow *f, double seconds)
{
    double end = now_s() + seconds;
    while (now_s() < end)
        if (step(f) < 0)
            return -1;
    return 0;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    const char *top = getenv("top_builddir") ? getenv("top_builddir") : ".";
    int size = 1 << 20, cycles = 3;
    double rate = 0, phase = 1.5;
    for (int i = 1; i < argc; i++) {
        const char *opt = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long long x = 0;
        int bad = 0;   /* numbers whole or refused (plugin/ib/parse.h) */
        if (!strcmp(opt, "--size") && v)
            bad = parse_size(v, 1, 64 << 20, &x), size = (int)x, i++;
        else if (!strcmp(opt, "--cycles") && v)
            bad = parse_int(v, 1, 50, &x), cycles = (int)x, i++;
        else if (!strcmp(opt, "--rate") && v)
            bad = parse_real(v, 0, &rate), i++;
        else if (!strcmp(opt, "--phase") && v)
            bad = parse_real(v, 1e-9, &phase), i++;
        else {
            printf("usage: %s [--size BYTES] [--cycles N] [--rate BYTES_PER_S of one port] [--phase S]\n"
                   "  top_builddir in the environment names the build tree (plugin, softnic)\n",
                   argv[0]);
            return strcmp(argv[i], "--help") ? 2 : 0;
        }
        if (bad) {
            fprintf(stderr, "failover_bench: bad value '%s' for %s (--size: 1 B..64 MiB, K/M suffix; "
                    "--cycles: 1..50; --rate: bytes/s; --phase: seconds over 0)\n", v, opt);
            return 2;
        }
    }
    if (size < 1 || size > (64 << 20) || cycles < 1 || cycles > 50 || phase <= 0) {
        fprintf(stderr, "failover_bench: bad arguments (see --help)\n");
        return 2;
    }
    if (load(top)) {
        printf("skipped: cannot load the plugin or softnic from %s\n", top);
        return 0;
    }
    struct flow f;
    memset(&f, 0, sizeof(f));
    f.size = size;
    uint8_t handle[NCCL_NET_HANDLE_MAXSIZE];
    void *lc = NULL;
    if (net->listen(0, handle, &lc) != ncclSuccess)
        return 1;
    for (double end = now_s() + 30; (!f.sc || !f.rc) && now_s() < end;) {
        if (!f.sc)
            net->connect(0, handle, &f.sc, NULL);
        if (!f.rc)
            net->accept(lc, &f.rc, NULL);
    }
    f.sbuf = calloc(1, (size_t)size);
    char *rb = calloc(W, (size_t)size);
    for (int k = 0; k < W; k++)
        f.rbuf[k] = rb + (size_t)k * (size_t)size;
    if (!f.sc || !f.rc || !f.sbuf || !rb ||
        net->regMr(f.sc, f.sbuf, (size_t)size, NCCL_PTR_HOST, &f.smh) != ncclSuccess ||
        net->regMr(f.rc, rb, (size_t)W * (size_t)size, NCCL_PTR_HOST, &f.rmh) != ncclSuccess) {
        fprintf(stderr, "failover_bench: connection set-up failed\n");
        return 1;
    }
    double t_fail[50], t_rec[50], bw_both[50], bw_out[50];
    if (run_for(&f, 0.5))
        return 1;
    for (int c = 0; c < cycles; c++) {
        uint64_t b0 = f.done_bytes;
        double t0 = now_s();
        if (run_for(&f, phase))
            return 1;
        bw_both[c] = (double)(f.done_bytes - b0) / (now_s() - t0);
        double down = now_s();
        set_state(ctx, 2, 0);
        double first = 0;
        while (!first) {
            double posted = step(&f);
            if (posted < 0)
                return 1;
            if (posted > down)
                first = now_s();
            if (now_s() - down > 60) {
                fprintf(stderr, "failover_bench: no traffic 60 s after port 2 went down\n");
                return 1;
            }
        }
        t_fail[c] = first - down;
        b0 = f.done_bytes;
        t0 = now_s();
        if (run_for(&f, phase))
            return 1;
        bw_out[c] = (double)(f.done_bytes - b0) / (now_s() - t0);
        uint64_t p2 = port_tx(2);
        double up = now_s();
        set_state(ctx, 2, 1);
        while (port_tx(2) < p2 + 65536) {
            if (step(&f) < 0)
                return 1;
            if (now_s() - up > 60) {
                fprintf(stderr, "failover_bench: port 2 carried nothing 60 s after it came back\n");
                return 1;
            }
        }
        t_rec[c] = now_s() - up;
        printf("  cycle %d: failover %.1f ms, recovery %.1f ms, both ports %.3f GB/s, outage %.3f GB/s\n", c + 1,
               t_fail[c] * 1e3, t_rec[c] * 1e3, bw_both[c] / 1e9, bw_out[c] / 1e9);
        fflush(stdout);
    }
    qsort(t_fail, (size_t)cycles, sizeof(double), cmp);
    qsort(t_rec, (size_t)cycles, sizeof(double), cmp);
    qsort(bw_both, (size_t)cycles, sizeof(double), cmp);
    qsort(bw_out, (size_t)cycles, sizeof(double), cmp);
    int m = cycles / 2;
    printf("medians of %d cycles, %d-byte messages, %d in flight:\n", cycles, size, W);
    printf("  port 2 down -> traffic over port 1:       %8.1f ms\n", t_fail[m] * 1e3);
    printf("  port 2 up   -> data on both ports again:  %8.1f ms\n", t_rec[m] * 1e3);
    printf("  bandwidth, both ports / outage:           %8.3f / %.3f GB/s (ratio %.2f)\n", bw_both[m] / 1e9,
           bw_out[m] / 1e9, bw_out[m] / bw_both[m]);
    if (rate > 0)
        printf("  outage bandwidth / one port's rate:       %8.2f (rate %.3f GB/s)\n", bw_out[m] / rate, rate / 1e9);
    net->deregMr(f.sc, f.smh);
    net->deregMr(f.rc, f.rmh);
    net->closeSend(f.sc);
    net->closeRecv(f.rc);
    net->closeListen(lc);
    return 0;
}
