/* bench/mlx5_engine_bench.c: RDMA WRITEs of 8 B..4 KiB from host memory on
 * softnic loopback pairs (gdaki_pair, host queue memory), posted two ways
 * side by side in one run (the GPU-initiated path without a GPU), each on
 * a pair of its own that carries writes in one direction only, as a GPU's
 * QP does:
 *   mlx5  a CPU thread writes mlx5 WQEs into the send QP's ring and rings
 *         its doorbell, exactly as a kernel does (gdaki_queue.h); softnic's
 *         mlx5 NIC thread decodes them and runs them on its verbs engine,
 *         then writes the mlx5 CQEs the thread polls;
 *   verbs ibv_post_send + ibv_poll_cq on the pair's ordinary QP
 *         (gdaki_pair_cpu_write_loop), every write signaled, as the mlx5
 *         ones are.
 * Per size: message rate with a window of W writes in flight, and the
 * one-at-a-time latency (post, wait for its completion), median over the
 * messages.  Rounds alternate which path goes first; the table shows the
 * median of the rounds and the ratio mlx5 / verbs (rate: >= 1 is the
 * engine path keeping up; latency: <= 1).
 *
 * Usage: mlx5_engine_bench [-r rounds] [-n msgs] [-l lat_msgs] [-w window] [-p mlx5|verbs] [-g post_ns]
 * (-p: run one path only, for profilers: no table then)
 * softnic's libibverbs.so.1 is RAILNET_IBVERBS_LIB (else
 * $top_builddir/tests/softnic/libibverbs.so.1): point it at another build
 * to compare two softnics with the same program. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gdaki_pair.h"
#include "gdaki_queue.h"
#include "parse.h"
#include "railnet_gdaki.h"

#define MAX_ROUNDS 31
#define MAX_SIZE 4096

static const size_t sizes[] = { 8, 64, 512, 4096 };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n ? v[n / 2] : 0;
}

/* WQEs of qp that its posting thread put on the wire itself (softnic's
 * fast path, requester_try_direct_locked): softnic_ctl_qp_direct_wqes of
 * the softnic the pair loaded; 0 when it has none. */
static uint64_t direct_wqes(const char *lib, struct ibv_qp *qp)
{
    void *h = lib ? dlopen(lib, RTLD_LAZY | RTLD_NOLOAD) : NULL;
    int (*fn)(struct ibv_qp *, uint64_t *) = NULL;
    if (h)
        *(void **)&fn = dlsym(h, "softnic_ctl_qp_direct_wqes");
    uint64_t n = 0;
    if (!fn || fn(qp, &n) != 0)
        n = 0;
    if (h)
        dlclose(h);
    return n;
}

struct bufs {
    struct gdaki_mr src, dst;
};

/* -g: the time each mlx5 post takes at least, busy-waited after it (a
 * GPU thread's post costs microseconds: its system-scope fences). */
static double post_gap_us;

static void post_gap(double since)
{
    while (post_gap_us > 0 && now_us() - since < post_gap_us)
        ;
}

/* mlx5 path: n writes, at most window in flight; messages per second. */
static int mlx5_rate(struct gdaki_qp_dev *q, const struct bufs *b, size_t size, int n, int window,
                     double *mps)
{
    struct gdaki_op op = { .laddr = b->src.addr, .lkey = b->src.lkey, .len = (uint32_t)size,
                           .raddr = b->dst.addr, .rkey = b->dst.rkey };
    uint64_t base = gdaki_load_acquire64(&q->resv);
    double t0 = now_us();
    for (int i = 0; i < n; i++) {
        if (i >= window && gdaki_q_wait_done(q, base + (uint64_t)(i - window + 1)) < 0)
            return -1;
        double p0 = now_us();
        if (gdaki_q_post1(q, GDAKI_KIND_WRITE, &op) == GDAKI_SLOT_ERROR)
            return -1;
        post_gap(p0);
    }
    if (gdaki_q_quiet(q) < 0)
        return -1;
    *mps = n / (now_us() - t0);
    return 0;
}

static int mlx5_lat(struct gdaki_qp_dev *q, const struct bufs *b, size_t size, int n, double *us)
{
    struct gdaki_op op = { .laddr = b->src.addr, .lkey = b->src.lkey, .len = (uint32_t)size,
                           .raddr = b->dst.addr, .rkey = b->dst.rkey };
    double *v = malloc(sizeof(*v) * (size_t)n);
    if (!v)
        return -1;
    for (int i = 0; i < n; i++) {
        double t0 = now_us();
        uint64_t tk = gdaki_q_post1(q, GDAKI_KIND_WRITE, &op);
        post_gap(t0);
        if (tk == GDAKI_SLOT_ERROR || gdaki_q_wait_done(q, tk) < 0) {
            free(v);
            return -1;
        }
        v[i] = now_us() - t0;
    }
    *us = median(v, n);
    free(v);
    return 0;
}

static int verbs_rate(struct gdaki_pair *p, const struct bufs *b, size_t size, int n, int window,
                      double *mps, char *err, size_t errlen)
{
    double t0 = now_us();
    if (gdaki_pair_cpu_write_loop(p, &b->src, &b->dst, size, n, window, err, errlen) != 0)
        return -1;
    *mps = n / (now_us() - t0);
    return 0;
}

static int verbs_lat(struct gdaki_pair *p, const struct bufs *b, size_t size, int n, double *us,
                     char *err, size_t errlen)
{
    double *v = malloc(sizeof(*v) * (size_t)n);
    if (!v)
        return -1;
    for (int i = 0; i < n; i++) {
        double t0 = now_us();
        if (gdaki_pair_cpu_write_loop(p, &b->src, &b->dst, size, 1, 1, err, errlen) != 0) {
            free(v);
            return -1;
        }
        v[i] = now_us() - t0;
    }
    *us = median(v, n);
    free(v);
    return 0;
}

int main(int argc, char **argv)
{
    int rounds = 5, n = 20000, nlat = 2000, window = 8, only = -1, c;
    long long v = 0;
    while ((c = getopt(argc, argv, "r:n:l:w:p:g:h")) != -1) {
        /* each number whole and in range (parse.h), or the run is refused */
        int bad = 0;
        switch (c) {
        case 'r': bad = parse_int(optarg, 1, MAX_ROUNDS, &v); rounds = (int)v; break;
        case 'n': bad = parse_int(optarg, 1, 1000000000, &v); n = (int)v; break;
        case 'l': bad = parse_int(optarg, 1, 1000000000, &v); nlat = (int)v; break;
        case 'w': bad = parse_int(optarg, 1, 128, &v); window = (int)v; break;
        case 'g': bad = parse_int(optarg, 0, 1000000, &v); post_gap_us = (double)v / 1000; break;
        case 'p':
            bad = strcmp(optarg, "mlx5") && strcmp(optarg, "verbs");
            only = strcmp(optarg, "verbs") == 0;
            break;
        default:
            fprintf(stderr, "usage: %s [-r rounds] [-n msgs] [-l lat_msgs] [-w window] [-p mlx5|verbs] [-g post_ns]\n", argv[0]);
            return c == 'h' ? 0 : 2;
        }
        if (bad) {
            fprintf(stderr, "%s: -%c '%s': rounds 1..%d, msgs >= 1, window 1..128, path mlx5 or verbs\n",
                    argv[0], c, optarg, MAX_ROUNDS);
            return 2;
        }
    }
    char err[512];
    struct gdaki_pair_opts o;
    gdaki_pair_opts_default(&o, err, sizeof(err));
    o.queue_mem = GDAKI_QUEUE_MEM_HOST;
    o.sq_depth = 256;
    char lib[4096];
    if (!getenv("RAILNET_IBVERBS_LIB")) {
        const char *top = getenv("top_builddir");
        snprintf(lib, sizeof(lib), "%s/tests/softnic/libibverbs.so.1", top ? top : ".");
        o.ibverbs_lib = lib;
    }
    /* One pair per path, each used in one direction only, as a GPU's QP
     * (and bench_gdaki's GPU rows) is: the mlx5 path writes send QP ->
     * recv QP of pair 0, the verbs path recv QP -> send QP of pair 1. */
    struct gdaki_pair *p[2] = { NULL, NULL };
    struct bufs b[2];
    static uint8_t src[2][MAX_SIZE], dst[2][MAX_SIZE];
    for (int k = 0; k < 2; k++) {
        if (gdaki_pair_open(&o, &p[k], err, sizeof(err)) != 0) {
            printf("skipped: gdaki_pair_open: %s\n", err);
            gdaki_pair_close(p[0]);
            return 0;
        }
        memset(src[k], 0x5a, sizeof(src[k]));
        if (gdaki_pair_reg(p[k], src[k], sizeof(src[k]), &b[k].src, err, sizeof(err)) != 0 ||
            gdaki_pair_reg(p[k], dst[k], sizeof(dst[k]), &b[k].dst, err, sizeof(err)) != 0) {
            fprintf(stderr, "gdaki_pair_reg: %s\n", err);
            return 1;
        }
    }
    struct gdaki_pair_info info;
    gdaki_pair_get_info(p[0], &info);
    struct gdaki_qp_dev *q = gdaki_pair_qp_host(p[0]);
    static double rate[2][NSIZES][MAX_ROUNDS], lat[2][NSIZES][MAX_ROUNDS];
    int rc = 0;
    for (int r = 0; r < rounds && !rc; r++) {
        for (size_t s = 0; s < NSIZES && !rc; s++) {
            for (int k = 0; k < 2 && !rc; k++) {
                int path = (k + r) & 1;     /* alternate which goes first */
                if (only >= 0 && path != only)
                    continue;
                if (path == 0)
                    rc = mlx5_rate(q, &b[0], sizes[s], n, window, &rate[0][s][r]) ||
                         mlx5_lat(q, &b[0], sizes[s], nlat, &lat[0][s][r]);
                else
                    rc = verbs_rate(p[1], &b[1], sizes[s], n, window, &rate[1][s][r], err, sizeof(err)) ||
                         verbs_lat(p[1], &b[1], sizes[s], nlat, &lat[1][s][r], err, sizeof(err));
                if (rc)
                    fprintf(stderr, "%s path, %zu B: failed%s%s\n", path ? "verbs" : "mlx5", sizes[s],
                            path ? ": " : "", path ? err : "");
            }
        }
    }
    if (!rc && only < 0) {
        printf("softnic %s (%s), window %d, %d msgs per rate phase, %d one at a time; "
               "median of %d alternating rounds\n",
               info.dev_name, info.ibverbs_path ? info.ibverbs_path : "?", window, n, nlat, rounds);
        printf("%6s %12s %12s %7s %12s %12s %7s\n", "bytes", "mlx5 Mmsg/s", "verbs Mmsg/s", "ratio",
               "mlx5 lat us", "verbs lat us", "ratio");
        double msgs = (double)rounds * NSIZES * (n + nlat);
        for (size_t s = 0; s < NSIZES; s++) {
            double rm = median(rate[0][s], rounds), rv = median(rate[1][s], rounds);
            double lm = median(lat[0][s], rounds), lv = median(lat[1][s], rounds);
            printf("%6zu %12.4f %12.4f %7.2f %12.1f %12.1f %7.2f\n", sizes[s], rm, rv, rm / rv, lm, lv,
                   lm / lv);
        }
        printf("sent by the posting thread itself (softnic fast path): mlx5 %.2f (NIC thread), "
               "verbs %.2f of the WQEs\n", direct_wqes(info.ibverbs_path, p[0]->sqp) / msgs,
               direct_wqes(info.ibverbs_path, p[1]->rqp) / msgs);
    }
    for (int k = 0; k < 2; k++) {
        gdaki_pair_dereg(p[k], &b[k].src);
        gdaki_pair_dereg(p[k], &b[k].dst);
        gdaki_pair_close(p[k]);
    }
    return rc ? 1 : 0;
}
