/* tests/gdaki/bench_gdaki_vs_proxy.c: the GPU-initiated path's benchmark -- message rate
 * and latency of GPU-initiated RDMA writes against the CPU-proxy path
 * (isend/irecv through the plugin, as NCCL's proxy drives it), 8 B..4 KiB,
 * on the same softnic port and the same GPU buffers, side by side in one
 * run, with the ratios (> 1: GPU-initiated better).
 *
 * GPU-initiated (gpu_path.cu): one CUDA thread posts put_signal (payload
 * WRITE + inline WRITE of a signal word) on a gdaki pair.  CPU proxy
 * (proxy_path.c): libnccl-net-railnet.so loaded through
 * tools/common/plugin_tables, a send comm connected to a recv comm of this process on the same port (RAILNET_HCA
 * is set to the gdaki pair's =device:port), a
 * receiver thread keeping irecvs posted ahead, the sender posting isends.
 *
 * What ends the timing, the same on both paths: the sender learns that the
 * message -- payload and the receiver's notification -- is in the
 * receiver's memory.  GPU: quiet on the put_signal's ticket returns (the
 * signal WRITE's completion, which the responder sends after placing the
 * in-order writes).  CPU: test() on the isend returns done (the plugin's
 * one RDMA WRITE WITH IMM per message was acknowledged); a rate phase
 * ends only once the receiver thread also completed every irecv (and, for
 * GPU memory, the iflush NCCL issues after a GPU-direct receive).
 *   rate: n messages, at most W in flight (sliding window on both paths).
 *   latency: one message at a time, post to completion, median.
 * Every phase then checks the received bytes: each used destination slot
 * equals its source slot, and the bytes after the message are still zero.
 *
 * Usage: bench_gdaki_vs_proxy [--mem=cuda|host] [--sizes 8,64,512,4096]
 *          [--windows 8,32] [--iters N] [--lat-iters N] [--plugin PATH]
 *          [--ibverbs PATH] [--cuda-dev N] [--dev NAME] [--port N]
 *          [--inline BYTES] [--rounds N] [--timeout S] [--verbose]
 *          [--gpu-only | --cpu-only]
 * --gpu-only / --cpu-only run one half alone (with SOFTNIC_STATS=1,
 * softnic's counters at exit are then that path's own); --cpu-only keeps
 * the GPU buffers of --mem=cuda.
 * --rounds (default 3): each size's phases run N times, GPU and CPU
 * alternating; the table gives medians over the rounds, each ratio the
 * median of the rounds' side-by-side ratios, and the range of those ratios
 * (one machine's isend rate has varied by 40% between runs).
 * GPU messages of at most --inline bytes (default and most GDAKI_INLINE_MAX,
 * 972; past GDAKI_INLINE_BUSY_MAX, 220, only while the QP has nothing in
 * flight: gdaki_q_inline_flags) carry their payload inside the WQE: the kernel reads it from GPU
 * memory as it builds the WQE, where the CPU path's NIC must copy it out of
 * GPU memory (a CPU cannot load cudaMalloc memory).  --inline 0 turns it off.
 * --mem=host runs only the CPU-proxy half (host buffers, no GPU needed).
 * Paths default to $top_builddir/.libs/libnccl-net-railnet.so and
 * $top_builddir/tests/softnic/libibverbs.so.1 (RAILNET_IBVERBS_LIB wins).
 * Exit: 0 after the table, 77 with --mem=cuda and no usable GPU, 1 on an
 * error, 2 on bad usage. */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu_path.h"
#include "nccl_net_v8.h"
#include "path_result.h"
#include "proxy_path.h"
#include "railnet_gdaki.h"

#define MAX_LIST 16
#define MAX_ROUNDS 15
#define LAT_WARM_MIN 10   /* messages of a latency phase's warm-up, at least */

struct bench_opts {
    int cuda;                 /* --mem=cuda (default) or host */
    size_t sizes[MAX_LIST];
    int nsizes;
    int windows[MAX_LIST];
    int nwindows;
    long iters, lat_iters;
    const char *plugin, *ibverbs;
    const char *dev;          /* NULL: the first device */
    int port;                 /* 0: 1 */
    int inline_max;           /* GPU messages of at most this many bytes go inline */
    int rounds;               /* each size's phases, repeated and alternated */
    int cuda_dev;
    double timeout;
    int verbose;
    int gpu_only;             /* --gpu-only: the CPU-proxy half is not run */
    int cpu_only;             /* --cpu-only: the GPU half is not run (its buffers are) */
};

/* The two buffers and how to reach them from the host. */
struct bench_bufs {
    int cuda;
    void *src, *dst;          /* slots * PATH_SLOT bytes, host or CUDA */
    uint8_t *want, *got;      /* host copies: the source pattern, the read-back */
    size_t len;
};

static int parse_list(const char *s, long lo, long hi, long *out, int max)
{
    int n = 0;
    char *end;
    while (*s) {
        long v = strtol(s, &end, 10);
        if (end == s || v < lo || v > hi || n == max)
            return -1;
        out[n++] = v;
        s = end;
        if (*s == ',')
            s++;
        else if (*s)
            return -1;
    }
    return n;
}

static int parse(int argc, char **argv, struct bench_opts *o)
{
    static const struct option lo[] = {
        { "mem", 1, 0, 'm' },      { "sizes", 1, 0, 's' },    { "windows", 1, 0, 'w' },
        { "iters", 1, 0, 'n' },    { "lat-iters", 1, 0, 'l' }, { "plugin", 1, 0, 'p' },
        { "ibverbs", 1, 0, 'i' },  { "cuda-dev", 1, 0, 'd' }, { "timeout", 1, 0, 't' },
        { "verbose", 0, 0, 'v' },  { "dev", 1, 0, 'D' },      { "port", 1, 0, 'P' },
        { "inline", 1, 0, 'I' },   { "rounds", 1, 0, 'r' },   { "help", 0, 0, 'h' },
        { "gpu-only", 0, 0, 'G' }, { "cpu-only", 0, 0, 'C' }, { 0, 0, 0, 0 } };
    long v[MAX_LIST];
    int c, k;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (c) {
        case 'm':
            if (strcmp(optarg, "cuda") && strcmp(optarg, "host"))
                return -1;
            o->cuda = !strcmp(optarg, "cuda");
            break;
        case 's':
            if ((k = parse_list(optarg, 1, PATH_SLOT, v, MAX_LIST)) <= 0)
                return -1;
            for (o->nsizes = 0; o->nsizes < k; o->nsizes++)
                o->sizes[o->nsizes] = (size_t)v[o->nsizes];
            break;
        case 'w':
            if ((k = parse_list(optarg, 1, PATH_MAX_WINDOW, v, MAX_LIST)) <= 0)
                return -1;
            for (o->nwindows = 0; o->nwindows < k; o->nwindows++)
                o->windows[o->nwindows] = (int)v[o->nwindows];
            break;
        case 'n': o->iters = atol(optarg); break;
        case 'l': o->lat_iters = atol(optarg); break;
        case 'p': o->plugin = optarg; break;
        case 'i': o->ibverbs = optarg; break;
        case 'd': o->cuda_dev = atoi(optarg); break;
        case 't': o->timeout = atof(optarg); break;
        case 'v': o->verbose = 1; break;
        case 'D': o->dev = optarg; break;
        case 'P': o->port = atoi(optarg); break;
        case 'I':
            if (parse_list(optarg, 0, GDAKI_INLINE_MAX, v, 1) != 1)
                return -1;
            o->inline_max = (int)v[0];
            break;
        case 'r':
            if (parse_list(optarg, 1, MAX_ROUNDS, v, 1) != 1)
                return -1;
            o->rounds = (int)v[0];
            break;
        case 'G': o->gpu_only = 1; break;
        case 'C': o->cpu_only = 1; break;
        case 'h': return 1;
        default: return -1;
        }
    }
    if ((o->gpu_only && !o->cuda) || (o->gpu_only && o->cpu_only))
        return -1;   /* --mem=host has no GPU half */
    if (optind != argc || o->iters < 1 || o->lat_iters < 1 || o->timeout <= 0 || o->cuda_dev < 0 || o->port < 0)
        return -1;
    return 0;
}

static int bufs_open(struct bench_bufs *b, int cuda, char *err, size_t errlen)
{
    memset(b, 0, sizeof(*b));
    b->cuda = cuda;
    b->len = (size_t)PATH_MAX_WINDOW * PATH_SLOT;
    b->want = malloc(b->len);
    b->got = malloc(b->len);
    if (!b->want || !b->got) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (cuda)
        return gpu_mem_alloc(b->len, &b->src, err, errlen) || gpu_mem_alloc(b->len, &b->dst, err, errlen) ? -1 : 0;
    if (posix_memalign(&b->src, 4096, b->len) || posix_memalign(&b->dst, 4096, b->len)) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

static void bufs_close(struct bench_bufs *b)
{
    if (b->cuda) {
        gpu_mem_free(b->src);
        gpu_mem_free(b->dst);
    } else {
        free(b->src);
        free(b->dst);
    }
    free(b->want);
    free(b->got);
}

/* Source pattern of a size: every byte depends on the size and its offset,
 * so a slot landing in the wrong place, or bytes left from another size,
 * differ. */
static int bufs_fill(struct bench_bufs *b, size_t size, char *err, size_t errlen)
{
    for (size_t i = 0; i < b->len; i++) {
        uint64_t z = (uint64_t)size << 32 | i;
        z = (z ^ (z >> 31)) * 0x9e3779b97f4a7c15ull;
        b->want[i] = (uint8_t)(z >> 56 | 1); /* never 0: an unwritten byte shows */
    }
    if (b->cuda)
        return gpu_mem_to_device(b->src, b->want, b->len, err, errlen);
    memcpy(b->src, b->want, b->len);
    return 0;
}

static int bufs_clear(struct bench_bufs *b, char *err, size_t errlen)
{
    if (b->cuda)
        return gpu_mem_zero(b->dst, b->len, err, errlen);
    memset(b->dst, 0, b->len);
    return 0;
}

/* After a phase of n messages of size bytes over a cycle of window slots:
 * each used slot holds its source bytes, then zeros to the slot's end. */
static int bufs_check(struct bench_bufs *b, size_t size, long n, int window, char *err, size_t errlen)
{
    const uint8_t *got = b->dst;
    if (b->cuda) {
        if (gpu_mem_to_host(b->got, b->dst, b->len, err, errlen))
            return -1;
        got = b->got;
    }
    long used = n < window ? n : window;
    for (long k = 0; k < used; k++) {
        const uint8_t *g = got + k * PATH_SLOT, *w = b->want + k * PATH_SLOT;
        for (size_t i = 0; i < PATH_SLOT; i++) {
            uint8_t expect = i < size ? w[i] : 0;
            if (g[i] != expect) {
                snprintf(err, errlen, "received bytes wrong: slot %ld byte %zu is 0x%02x, expected 0x%02x "
                         "(%zu-byte messages)", k, i, g[i], expect, size);
                return -1;
            }
        }
    }
    return 0;
}

/* Both paths behind one face, so each phase runs the same steps. */
struct path {
    struct proxy_path *cpu;
    struct gpu_path *gpu;
};

static int path_rate(struct path *p, size_t size, long n, int window, double *r, char *err, size_t errlen)
{
    return p->gpu ? gpu_path_rate(p->gpu, size, n, window, r, err, errlen)
                  : proxy_path_rate(p->cpu, size, n, window, r, err, errlen);
}

static int path_lat(struct path *p, size_t size, long n, double *lat, char *err, size_t errlen)
{
    return p->gpu ? gpu_path_lat(p->gpu, size, n, lat, err, errlen)
                  : proxy_path_lat(p->cpu, size, n, lat, err, errlen);
}

/* A rate phase: untimed warm-up, then the timed run, each checked. */
static int measure_rate(struct path *p, struct bench_bufs *b, size_t size, long n, int window, double *rate,
                        char *err, size_t errlen)
{
    double warm;
    long nw = n / 10 > window ? n / 10 : window;
    if (bufs_clear(b, err, errlen) || path_rate(p, size, nw, window, &warm, err, errlen) ||
        bufs_check(b, size, nw, window, err, errlen))
        return -1;
    if (bufs_clear(b, err, errlen) || path_rate(p, size, n, window, rate, err, errlen) ||
        bufs_check(b, size, n, window, err, errlen))
        return -1;
    return 0;
}

static int measure_lat(struct path *p, struct bench_bufs *b, size_t size, long n, double *lat, double *med,
                       double *mean, char *err, size_t errlen)
{
    long nw = n / 10 > LAT_WARM_MIN ? n / 10 : LAT_WARM_MIN;   /* lat holds max(n, LAT_WARM_MIN) */
    if (bufs_clear(b, err, errlen) || path_lat(p, size, nw, lat, err, errlen) ||
        bufs_check(b, size, nw, PATH_MAX_WINDOW, err, errlen))
        return -1;
    if (bufs_clear(b, err, errlen) || path_lat(p, size, n, lat, err, errlen) ||
        bufs_check(b, size, n, PATH_MAX_WINDOW, err, errlen))
        return -1;
    *med = path_median(lat, n, mean);
    return 0;
}

static void fmt_num(char *out, size_t len, double v, int have)
{
    if (have)
        snprintf(out, len, "%.4g", v);
    else
        snprintf(out, len, "-");
}

/* Median of v[0..n) and, when lo/hi are given, its extremes (v is kept). */
static double rounds_median(const double *v, int n, double *lo, double *hi)
{
    double c[MAX_ROUNDS], mean;
    memcpy(c, v, (size_t)n * sizeof(double));
    double m = path_median(c, n, &mean);
    if (lo)
        *lo = c[0], *hi = c[n - 1];
    return m;
}

/* "lo-hi" of the rounds' ratios, or "-". */
static void fmt_range(char *out, size_t len, double lo, double hi, int have)
{
    if (have)
        snprintf(out, len, "%.3g-%.3g", lo, hi);
    else
        snprintf(out, len, "-");
}

int main(int argc, char **argv)
{
    static const char usage[] =
        "usage: bench_gdaki_vs_proxy [--mem=cuda|host] [--sizes 8,64,512,4096] [--windows 8,32]\n"
        "         [--iters N] [--lat-iters N] [--plugin PATH] [--ibverbs PATH] [--cuda-dev N]\n"
        "         [--dev NAME] [--port N] [--inline BYTES] [--rounds N] [--timeout S] [--verbose]\n"
        "         [--gpu-only | --cpu-only]\n"
        "  GPU-initiated writes vs isend through the plugin, same port, side by side.\n"
        "  --inline: GPU messages of at most BYTES (0..972, default 972) carry their payload\n"
        "  inside the WQE, read by the kernel instead of by the NIC (0: never); past 220\n"
        "  bytes only while the QP has no message in flight.\n"
        "  --gpu-only: the GPU-initiated half alone (the CPU-proxy columns print -);\n"
        "  --cpu-only: the CPU-proxy half alone, on the same (GPU) buffers.\n"
        "  --rounds: each size's phases N times (1..15, default 3), GPU and CPU alternating;\n"
        "  the table gives medians over the rounds and the range of the rounds' ratios.\n"
        "  --mem=host: the CPU-proxy half alone, host buffers (no GPU needed).\n"
        "  --dev/--port: the port of both paths (default: the first device, port 1);\n"
        "  RAILNET_HCA is set to it for the plugin.\n";
    struct bench_opts o = { .cuda = 1, .sizes = { 8, 64, 512, 4096 }, .nsizes = 4, .windows = { 8, 32 },
                            .nwindows = 2, .iters = 20000, .lat_iters = 2000, .timeout = 60,
                            .inline_max = GDAKI_INLINE_DEFAULT, .rounds = 3 };
    int pr = parse(argc, argv, &o);
    if (pr != 0) {
        fputs(usage, pr > 0 ? stdout : stderr);
        return pr > 0 ? 0 : 2;
    }
    char err[512], lib[4096], plugin[4096], hca[128];
    const char *top = getenv("top_builddir");
    top = top && *top ? top : ".";
    /* RAILNET_IBVERBS_LIB as the plugin's configuration reads it (through
     * gdaki_pair_opts_default), else --ibverbs, else softnic's; the plugin
     * is handed the same through its variable. */
    struct gdaki_pair_opts po;
    if (gdaki_pair_opts_default(&po, err, sizeof(err)) < 0) {
        fprintf(stderr, "bench_gdaki_vs_proxy: %s\n", err);
        return 1;
    }
    if (o.ibverbs)
        po.ibverbs_lib = o.ibverbs;
    if (!po.ibverbs_lib) {
        snprintf(lib, sizeof(lib), "%s/tests/softnic/libibverbs.so.1", top);
        po.ibverbs_lib = lib;
    }
    setenv("RAILNET_IBVERBS_LIB", po.ibverbs_lib, 1);
    if (!o.plugin) {
        snprintf(plugin, sizeof(plugin), "%s/.libs/libnccl-net-railnet.so", top);
        o.plugin = plugin;
    }

    /* The GPU half runs with CUDA buffers on a usable GPU. */
    int gpu = 0;
    if (o.cuda) {
        if (gpu_path_probe(o.cuda_dev, err, sizeof(err)) < 0) {
            printf("bench_gdaki_vs_proxy: skipped: %s (--mem=host runs the CPU-proxy half alone)\n", err);
            return 77;
        }
        gpu = !o.cpu_only;
        if (o.cpu_only)
            printf("# GPU-initiated half: skipped: --cpu-only\n");
    } else {
        if (gpu_path_probe(o.cuda_dev, err, sizeof(err)) < 0)
            printf("# GPU-initiated half: skipped: %s\n", err);
        else
            printf("# GPU-initiated half: skipped: --mem=host (it needs --mem=cuda)\n");
    }

    /* The gdaki pair names the port; the plugin is pinned to the same one. */
    struct gdaki_pair *pair = NULL;
    struct gdaki_pair_info info;
    po.dev_name = o.dev;
    po.port = o.port;
    po.use_cuda = gpu;
    po.cuda_dev = o.cuda_dev;
    po.sq_depth = 1024;
    if (gdaki_pair_open(&po, &pair, err, sizeof(err)) < 0)
        goto fail;
    gdaki_pair_get_info(pair, &info);
    snprintf(hca, sizeof(hca), "=%s:%d", info.dev_name, info.port);
    setenv("RAILNET_HCA", hca, 1);
    /* The pair stays open with host memory too: the process then holds the
     * same two device contexts, one per path, as in a GPU run. */

    struct bench_bufs b;
    if (bufs_open(&b, o.cuda, err, sizeof(err)) < 0)
        goto fail;
    int dev = o.cuda_dev;
    struct proxy_path_opts ppo = { .plugin = o.plugin, .dev = 0, .ptr_type = o.cuda ? NCCL_PTR_CUDA : NCCL_PTR_HOST,
                                   .src = b.src, .dst = b.dst, .slots = PATH_MAX_WINDOW, .timeout_s = o.timeout,
                                   .verbose = o.verbose, .thread_init = o.cuda ? gpu_path_bind : NULL,
                                   .thread_arg = &dev };
    struct path cpu = { 0 }, gpup = { 0 };
    if (proxy_path_open(&ppo, &cpu.cpu, err, sizeof(err)) < 0) {
        bufs_close(&b);
        goto fail;
    }
    if (gpu && gpu_path_open(pair, b.src, b.dst, PATH_MAX_WINDOW, o.timeout, &gpup.gpu, err, sizeof(err)) < 0) {
        proxy_path_close(cpu.cpu);
        bufs_close(&b);
        goto fail;
    }
    if (gpu)
        (void)gpu_path_set_inline(gpup.gpu, o.inline_max);   /* range checked by parse */

    printf("# GPU-initiated RDMA WRITE (one CUDA thread, put_signal + quiet) vs the CPU-proxy path (isend/irecv "
           "through %s)\n", o.plugin);
    printf("# same port: gdaki pair on %s port %d; plugin device 0 = %s (RAILNET_HCA=%s)\n", info.dev_name,
           info.port, proxy_path_describe(cpu.cpu), hca);
    printf("# %s buffers; rate: %ld messages, at most W in flight; latency: %ld messages one at a time, median\n",
           o.cuda ? "GPU (cudaMalloc)" : "host", o.iters, o.lat_iters);
    if (gpu)
        printf("# GPU messages of at most %d bytes carry their payload inside the WQE (--inline)\n",
               o.inline_max);
    printf("# %d rounds per size, GPU and CPU phases alternating: rates and latencies are medians over the\n"
           "# rounds, each ratio the median of the rounds' ratios (a round's pair ran side by side), and\n"
           "# the last two columns the lowest and highest of a round's ratio\n", o.rounds);
    printf("# ratios > 1: GPU-initiated better (rate GPU/CPU, latency CPU/GPU)\n");
    printf("%6s %3s %12s %12s %8s %11s %11s %8s %13s %13s\n", "bytes", "W", "gpu_Mmsg/s", "cpu_Mmsg/s",
           "gpu/cpu", "gpu_lat_us", "cpu_lat_us", "cpu/gpu", "gpu/cpu_rnds", "cpu/gpu_rnds");
    fflush(stdout);

    /* room for the timed run and for measure_lat's warm-up (at least 10) */
    double *lat = malloc((size_t)(o.lat_iters > LAT_WARM_MIN ? o.lat_iters : LAT_WARM_MIN) * sizeof(double));
    long checked = 0;
    int rc = 1;
    if (!lat) {
        snprintf(err, sizeof(err), "out of memory");
        goto done;
    }
    for (int s = 0; s < o.nsizes; s++) {
        size_t size = o.sizes[s];
        /* [round][window]; latency per round */
        double grate[MAX_ROUNDS][MAX_LIST] = { { 0 } }, crate[MAX_ROUNDS][MAX_LIST] = { { 0 } };
        double glat[MAX_ROUNDS] = { 0 }, clat[MAX_ROUNDS] = { 0 }, mean = 0;
        if (bufs_fill(&b, size, err, sizeof(err)) < 0)
            goto done;
        for (int r = 0; r < o.rounds; r++) {
            for (int w = 0; w < o.nwindows; w++) {
                if (gpu &&
                    measure_rate(&gpup, &b, size, o.iters, o.windows[w], &grate[r][w], err, sizeof(err)) < 0)
                    goto path_fail_gpu;
                if (!o.gpu_only &&
                    measure_rate(&cpu, &b, size, o.iters, o.windows[w], &crate[r][w], err, sizeof(err)) < 0)
                    goto path_fail_cpu;
                checked += (gpu ? 2 : 0) + (o.gpu_only ? 0 : 2);
            }
            if (gpu && measure_lat(&gpup, &b, size, o.lat_iters, lat, &glat[r], &mean, err, sizeof(err)) < 0)
                goto path_fail_gpu;
            if (!o.gpu_only && measure_lat(&cpu, &b, size, o.lat_iters, lat, &clat[r], &mean, err, sizeof(err)) < 0)
                goto path_fail_cpu;
            checked += (gpu ? 2 : 0) + (o.gpu_only ? 0 : 2);
        }
        double lr[MAX_ROUNDS], lr_lo = 0, lr_hi = 0;
        for (int r = 0; r < o.rounds; r++)
            lr[r] = glat[r] > 0 ? clat[r] / glat[r] : 0;
        double lat_ratio = rounds_median(lr, o.rounds, &lr_lo, &lr_hi);
        double gl_med = rounds_median(glat, o.rounds, NULL, NULL), cl_med = rounds_median(clat, o.rounds, NULL, NULL);
        for (int w = 0; w < o.nwindows; w++) {
            double g[MAX_ROUNDS], c[MAX_ROUNDS], q[MAX_ROUNDS], q_lo = 0, q_hi = 0;
            for (int r = 0; r < o.rounds; r++) {
                g[r] = grate[r][w];
                c[r] = crate[r][w];
                q[r] = c[r] > 0 ? g[r] / c[r] : 0;
            }
            double rate_ratio = rounds_median(q, o.rounds, &q_lo, &q_hi);
            char gs[32], rr[32], gl[32], cl[32], lrs[32], rq[40], rl[40];
            fmt_num(gs, sizeof(gs), rounds_median(g, o.rounds, NULL, NULL), gpu);
            int both = gpu && !o.gpu_only;
            char cs[32];
            fmt_num(cs, sizeof(cs), rounds_median(c, o.rounds, NULL, NULL), !o.gpu_only);
            fmt_num(rr, sizeof(rr), rate_ratio, both);
            fmt_num(gl, sizeof(gl), gl_med, gpu && w == 0);
            fmt_num(cl, sizeof(cl), cl_med, !o.gpu_only && w == 0);
            fmt_num(lrs, sizeof(lrs), lat_ratio, both && w == 0);
            fmt_range(rq, sizeof(rq), q_lo, q_hi, both);
            fmt_range(rl, sizeof(rl), lr_lo, lr_hi, both && w == 0);
            printf("%6zu %3d %12s %12s %8s %11s %11s %8s %13s %13s\n", size, o.windows[w], gs, cs, rr, gl, cl,
                   lrs, rq, rl);
        }
        fflush(stdout);
    }
    printf("# received bytes verified after each of %ld phases (warm-ups included)\n", checked);
    rc = 0;
    goto done;
path_fail_gpu:
    /* A posting kernel may still be running (a lost doorbell or completion):
     * freeing CUDA memory would wait for it forever, so no clean-up. */
    fprintf(stderr, "bench_gdaki_vs_proxy: GPU-initiated path: %s\n", err);
    fflush(NULL);
    _exit(1);
path_fail_cpu:
    fprintf(stderr, "bench_gdaki_vs_proxy: CPU-proxy path: %s\n", err);
    goto closing;
done:
    if (rc)
        fprintf(stderr, "bench_gdaki_vs_proxy: %s\n", err);
closing:
    free(lat);
    gpu_path_close(gpup.gpu);
    proxy_path_close(cpu.cpu);
    bufs_close(&b);
    if (pair)
        gdaki_pair_close(pair);
    return rc;
fail:
    fprintf(stderr, "bench_gdaki_vs_proxy: %s\n", err);
    if (pair)
        gdaki_pair_close(pair);
    return 1;
}
