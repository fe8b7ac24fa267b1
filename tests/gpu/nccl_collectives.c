/* tests/gpu/nccl_collectives.c: one rank of an NCCL job against the system
 * libnccl.so.2, used by the GPU end-to-end tests and the NCCL benchmark.
 *
 * Ranks are separate processes started by a script (tests/gpu/nccl_e2e.sh);
 * rank 0 writes the NCCL unique id to --id-file, the others wait for it.
 * Modes:
 *   check (default)  every collective x {fp32, bf16} x sizes 4 B..--max-bytes,
 *                    results compared element by element with a reference
 *                    computed on the host; one TAP line per (collective, type).
 *                    --colls a,b and --types fp32|bf16|fp32,bf16 pick a subset.
 *   bench            bus bandwidth per size of all_reduce, all_to_all and
 *                    send_recv (--colls picks), one line per size;
 *                    with --target-bytes T each size runs T / size
 *                    iterations, at least --iters and at most 1000 (the
 *                    same rule on every rank, so their calls match), so a
 *                    64 KiB step is timed over ~1000 calls, not 50;
 *                    the median and slowest single call close the line.
 *   kill             rank 1 exits abruptly during an all_reduce loop; rank 0
 *                    must see an NCCL error (not hang) within --timeout s.
 *   loop             all_reduce of --max-bytes again and again for --iters
 *                    seconds (rank 0's clock, agreed through a 1-int
 *                    all_reduce each round), every result checked; one TAP
 *                    line (a port failover test changes ports meanwhile).
 * Values are small integers, exact in bf16, so sums compare exactly. */
#include <cuda_runtime.h>
#include <nccl.h>
#include "plugin/ib/parse.h"
#include "tests/gpu/nccl_rank.h"

#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct opts {
    int rank, nranks, gpu;
    const char *id_file;
    const char *mode;
    size_t min_bytes, max_bytes;
    int timeout_s;
    int iters;
    size_t target_bytes; /* bench: iterations per size from bytes moved */
    unsigned colls, types; /* check mode: bit c of enum coll, bit 0 fp32 / 1 bf16 */
};

#define CUDA_OK(call)                                                          \
    do {                                                                       \
        cudaError_t e_ = (call);                                               \
        if (e_ != cudaSuccess) {                                               \
            fprintf(stderr, "rank %d: %s failed: %s (%s:%d)\n", g_rank, #call, \
                    cudaGetErrorString(e_), __FILE__, __LINE__);               \
            return -1;                                                         \
        }                                                                      \
    } while (0)
#define NCCL_OK(call)                                                          \
    do {                                                                       \
        ncclResult_t r_ = (call);                                              \
        if (r_ != ncclSuccess) {                                               \
            fprintf(stderr, "rank %d: %s failed: %s (%s:%d)\n", g_rank, #call, \
                    ncclGetErrorString(r_), __FILE__, __LINE__);               \
            return -1;                                                         \
        }                                                                      \
    } while (0)

static int g_rank;

static int value_of(int r, size_t i)
{
    return (int)((i * 7 + (size_t)r * 3) % 17) - 8;
}

static uint16_t f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16); /* exact for the small integers used here */
}

static float bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static size_t type_size(ncclDataType_t t) { return t == ncclBfloat16 ? 2 : 4; }

static void host_fill(void *buf, ncclDataType_t t, size_t count, int (*fn)(size_t, void *), void *arg)
{
    for (size_t i = 0; i < count; i++) {
        float v = (float)fn(i, arg);
        if (t == ncclBfloat16)
            ((uint16_t *)buf)[i] = f32_to_bf16(v);
        else
            ((float *)buf)[i] = v;
    }
}

static float host_get(const void *buf, ncclDataType_t t, size_t i)
{
    return t == ncclBfloat16 ? bf16_to_f32(((const uint16_t *)buf)[i]) : ((const float *)buf)[i];
}

/* Expected-value generators, one per collective. */
struct gen {
    int rank, nranks;
    size_t chunk;
};
static int gen_own(size_t i, void *a) { struct gen *g = a; return value_of(g->rank, i); }
static int gen_sum(size_t i, void *a)
{
    struct gen *g = a;
    int s = 0;
    for (int r = 0; r < g->nranks; r++)
        s += value_of(r, i);
    return s;
}
static int gen_gather(size_t i, void *a) { struct gen *g = a; return value_of((int)(i / g->chunk), i % g->chunk); }
static int gen_rs(size_t i, void *a)
{
    struct gen *g = a;
    int s = 0;
    for (int r = 0; r < g->nranks; r++)
        s += value_of(r, (size_t)g->rank * g->chunk + i);
    return s;
}
static int gen_root0(size_t i, void *a) { (void)a; return value_of(0, i); }
static int gen_a2a(size_t i, void *a)
{
    struct gen *g = a;
    int p = (int)(i / g->chunk);
    return value_of(p, (size_t)g->rank * g->chunk + i % g->chunk);
}

enum coll { ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, BROADCAST, ALL_TO_ALL, SEND_RECV, NCOLL };
static const char *coll_name[NCOLL] = { "all_reduce", "all_gather", "reduce_scatter",
                                        "broadcast", "all_to_all", "send_recv" };

/* Comma-separated names out of names[0..n) to a bit mask; 0 on an unknown name. */
static unsigned parse_list(const char *arg, const char *const *names, int n)
{
    unsigned mask = 0;
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", arg);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int i = 0;
        while (i < n && strcmp(t, names[i]) != 0)
            i++;
        if (i == n) {
            fprintf(stderr, "unknown name '%s'\n", t);
            return 0;
        }
        mask |= 1u << i;
    }
    return mask;
}
static const char *const type_name[2] = { "fp32", "bf16" };

static int run_coll(const struct opts *o, ncclComm_t comm, cudaStream_t s, enum coll c,
                    ncclDataType_t t, size_t bytes, void *dsend, void *drecv, void *hsend,
                    void *hrecv, void *hexp, char *why, size_t whylen)
{
    int n = o->nranks, r = o->rank;
    size_t es = type_size(t);
    size_t count = bytes / es;
    if (count < (size_t)n)
        count = (size_t)n;
    count -= count % (size_t)n; /* chunked collectives need count divisible by n */
    size_t chunk = count / (size_t)n;
    struct gen g = { r, n, chunk };
    size_t send_count = count, recv_count = count;
    int (*exp_fn)(size_t, void *) = gen_sum;
    int (*send_fn)(size_t, void *) = gen_own;
    switch (c) {
    case ALL_REDUCE: exp_fn = gen_sum; break;
    case ALL_GATHER: send_count = chunk; exp_fn = gen_gather; break;
    case REDUCE_SCATTER: recv_count = chunk; exp_fn = gen_rs; break;
    case BROADCAST: exp_fn = gen_root0; break;
    case ALL_TO_ALL: exp_fn = gen_a2a; break;
    case SEND_RECV: exp_fn = gen_root0; break;
    default: break;
    }
    host_fill(hsend, t, send_count, send_fn, &g);
    CUDA_OK(cudaMemcpy(dsend, hsend, send_count * es, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(drecv, 0x7f, recv_count * es));
    switch (c) {
    case ALL_REDUCE: NCCL_OK(ncclAllReduce(dsend, drecv, count, t, ncclSum, comm, s)); break;
    case ALL_GATHER: NCCL_OK(ncclAllGather(dsend, drecv, chunk, t, comm, s)); break;
    case REDUCE_SCATTER: NCCL_OK(ncclReduceScatter(dsend, drecv, chunk, t, ncclSum, comm, s)); break;
    case BROADCAST: NCCL_OK(ncclBroadcast(dsend, drecv, count, t, 0, comm, s)); break;
    case ALL_TO_ALL:
        NCCL_OK(ncclGroupStart());
        for (int p = 0; p < n; p++) {
            NCCL_OK(ncclSend((char *)dsend + (size_t)p * chunk * es, chunk, t, p, comm, s));
            NCCL_OK(ncclRecv((char *)drecv + (size_t)p * chunk * es, chunk, t, p, comm, s));
        }
        NCCL_OK(ncclGroupEnd());
        break;
    case SEND_RECV:
        /* rank 0 sends to every other rank; each receiver checks rank 0's data */
        NCCL_OK(ncclGroupStart());
        if (r == 0) {
            for (int p = 1; p < n; p++)
                NCCL_OK(ncclSend(dsend, count, t, p, comm, s));
        } else {
            NCCL_OK(ncclRecv(drecv, count, t, 0, comm, s));
        }
        NCCL_OK(ncclGroupEnd());
        break;
    default: break;
    }
    ncclResult_t w = nccl_rank_wait_stream(comm, s, o->timeout_s);
    if (w != ncclSuccess) {
        snprintf(why, whylen, "%s %zu B: %s", coll_name[c], bytes,
                 w == ncclInProgress ? "timed out" : ncclGetErrorString(w));
        return 1;
    }
    if (c == SEND_RECV && r == 0)
        return 0;
    CUDA_OK(cudaMemcpy(hrecv, drecv, recv_count * es, cudaMemcpyDeviceToHost));
    host_fill(hexp, t, recv_count, exp_fn, &g);
    for (size_t i = 0; i < recv_count; i++) {
        float e = host_get(hexp, t, i), a = host_get(hrecv, t, i);
        if (e != a) {
            snprintf(why, whylen, "%s %s %zu B: element %zu: expected %g, got %g", coll_name[c],
                     t == ncclBfloat16 ? "bf16" : "fp32", bytes, i, e, a);
            return 1;
        }
    }
    return 0;
}

static int mode_check(const struct opts *o, ncclComm_t comm, cudaStream_t s)
{
    size_t cap = o->max_bytes + 64;
    void *dsend, *drecv;
    CUDA_OK(cudaMalloc(&dsend, cap));
    CUDA_OK(cudaMalloc(&drecv, cap));
    void *hsend = malloc(cap), *hrecv = malloc(cap), *hexp = malloc(cap);
    if (!hsend || !hrecv || !hexp)
        return -1;
    ncclDataType_t types[2] = { ncclFloat32, ncclBfloat16 };
    int failed = 0, num = 0;
    if (o->rank == 0)
        printf("1..%d\n", __builtin_popcount(o->colls) * __builtin_popcount(o->types));
    for (int c = 0; c < NCOLL; c++) {
        for (int ti = 0; ti < 2; ti++) {
            if (!(o->colls & 1u << c) || !(o->types & 1u << ti))
                continue;
            char why[512] = "";
            int bad = 0;
            for (size_t b = o->min_bytes; b <= o->max_bytes && !bad; b *= 4) {
                int rc = run_coll(o, comm, s, (enum coll)c, types[ti], b, dsend, drecv, hsend,
                                  hrecv, hexp, why, sizeof(why));
                if (rc < 0)
                    return -1;
                bad = rc;
            }
            num++;
            /* every rank verifies; each prints its own verdict, rank 0 owns the TAP stream */
            if (bad)
                fprintf(stderr, "rank %d: %s\n", o->rank, why);
            if (o->rank == 0)
                printf("%sok %d - nccl_%s_%s_%zuB_to_%zuB%s%s\n", bad ? "not " : "", num,
                       coll_name[c], type_name[ti], o->min_bytes, o->max_bytes,
                       bad ? " # " : "", bad ? why : "");
            else if (bad)
                printf("rank %d failed: %s\n", o->rank, why);
            fflush(stdout);
            failed += bad;
            if (bad && strstr(why, "timed out"))
                return 1;
        }
    }
    free(hsend);
    free(hrecv);
    free(hexp);
    cudaFree(dsend);
    cudaFree(drecv);
    return failed ? 1 : 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One timed step of collective c over b bytes: all_reduce in place,
 * all_to_all (b / nranks bytes to and from each rank, as nccl-tests'
 * alltoall_perf moves them), or send_recv around the ring (send to
 * rank + 1, receive from rank - 1). */
static int bench_step(const struct opts *o, ncclComm_t comm, cudaStream_t s, enum coll c, void *d, void *r,
                      size_t b)
{
    size_t count = b / 4;
    if (c == ALL_REDUCE) {
        NCCL_OK(ncclAllReduce(d, d, count, ncclFloat32, ncclSum, comm, s));
        return 0;
    }
    if (c == ALL_TO_ALL) {
        size_t part = count / (size_t)o->nranks;
        NCCL_OK(ncclGroupStart());
        for (int p = 0; p < o->nranks; p++) {
            NCCL_OK(ncclSend((const float *)d + (size_t)p * part, part, ncclFloat32, p, comm, s));
            NCCL_OK(ncclRecv((float *)r + (size_t)p * part, part, ncclFloat32, p, comm, s));
        }
        NCCL_OK(ncclGroupEnd());
        return 0;
    }
    NCCL_OK(ncclGroupStart());
    NCCL_OK(ncclSend(d, count, ncclFloat32, (o->rank + 1) % o->nranks, comm, s));
    NCCL_OK(ncclRecv(r, count, ncclFloat32, (o->rank + o->nranks - 1) % o->nranks, comm, s));
    NCCL_OK(ncclGroupEnd());
    return 0;
}

/* --colls picks among all_reduce, all_to_all and send_recv (the others
 * are check mode's); bus bandwidth as nccl-tests counts it: all_reduce
 * moves 2 (n - 1) / n of the bytes per rank, all_to_all (n - 1) / n,
 * send_recv the bytes. */
static int mode_bench(const struct opts *o, ncclComm_t comm, cudaStream_t s)
{
    void *d, *r;
    CUDA_OK(cudaMalloc(&d, o->max_bytes));
    CUDA_OK(cudaMalloc(&r, o->max_bytes));
    CUDA_OK(cudaMemset(d, 0, o->max_bytes));
    if (o->rank == 0)
        printf("# %12s %10s %12s %12s %-10s %10s %10s\n", "bytes", "iters", "time_us", "busbw_GBps", "collective",
               "median_us", "max_us");
    static const enum coll timed[] = { ALL_REDUCE, ALL_TO_ALL, SEND_RECV };
    for (size_t k = 0; k < sizeof(timed) / sizeof(timed[0]); k++) {
        enum coll c = timed[k];
        if (!(o->colls & (1u << c)))
            continue;
        for (size_t b = o->min_bytes; b <= o->max_bytes; b *= 2) {
            int iters = o->iters, cap = o->iters > 1000 ? o->iters : 1000;
            if (o->target_bytes / b > (size_t)iters)
                iters = o->target_bytes / b > (size_t)cap ? cap : (int)(o->target_bytes / b);
            int warm = iters / 10 > 2 ? iters / 10 : 2;
            for (int w = 0; w < warm; w++)
                if (bench_step(o, comm, s, c, d, r, b))
                    return 1;
            if (nccl_rank_wait_stream(comm, s, o->timeout_s) != ncclSuccess)
                return 1;
            /* an event between steps: the slowest step beside the median
             * tells one stall from an even slowdown, without a sync that
             * would change what is timed */
            cudaEvent_t *ev = calloc((size_t)iters + 1, sizeof(*ev));
            if (!ev)
                return 1;
            for (int i = 0; i <= iters; i++)
                CUDA_OK(cudaEventCreate(&ev[i]));
            double t0 = nccl_rank_now_s();
            CUDA_OK(cudaEventRecord(ev[0], s));
            for (int i = 0; i < iters; i++) {
                if (bench_step(o, comm, s, c, d, r, b))
                    return 1;
                CUDA_OK(cudaEventRecord(ev[i + 1], s));
            }
            if (nccl_rank_wait_stream(comm, s, o->timeout_s) != ncclSuccess)
                return 1;
            double us = (nccl_rank_now_s() - t0) * 1e6 / iters;
            double algbw = (double)b / (us * 1e-6) / 1e9;
            double busbw = c == ALL_REDUCE   ? algbw * 2.0 * (o->nranks - 1) / o->nranks
                           : c == ALL_TO_ALL ? algbw * (o->nranks - 1) / o->nranks
                                             : algbw;
            double *step = calloc((size_t)iters, sizeof(*step)), med = 0, max = 0;
            if (!step)
                return 1;
            for (int i = 0; i < iters; i++) {
                float ms = 0;
                CUDA_OK(cudaEventElapsedTime(&ms, ev[i], ev[i + 1]));
                step[i] = ms * 1e3;
                max = step[i] > max ? step[i] : max;
            }
            qsort(step, (size_t)iters, sizeof(*step), cmp_double);
            med = step[iters / 2];
            for (int i = 0; i <= iters; i++)
                cudaEventDestroy(ev[i]);
            free(ev);
            free(step);
            if (o->rank == 0)
                printf("  %12zu %10d %12.1f %12.3f %-10s %10.1f %10.1f\n", b, iters, us, busbw, coll_name[c], med, max);
            fflush(stdout);
        }
    }
    cudaFree(d);
    cudaFree(r);
    return 0;
}

static int mode_kill(const struct opts *o, ncclComm_t comm, cudaStream_t s)
{
    size_t count = o->max_bytes / 4;
    void *d;
    CUDA_OK(cudaMalloc(&d, o->max_bytes));
    printf("1..1\n");
    for (int i = 0;; i++) {
        if (o->rank == 1 && i == 3) {
            fprintf(stderr, "rank 1: exiting abruptly during all_reduce %d\n", i);
            fflush(NULL);
            _exit(9);
        }
        NCCL_OK(ncclAllReduce(d, d, count, ncclFloat32, ncclSum, comm, s));
        double t0 = nccl_rank_now_s();
        ncclResult_t w = nccl_rank_wait_stream(comm, s, o->timeout_s);
        if (w == ncclSuccess)
            continue;
        if (w == ncclInProgress) {
            printf("not ok 1 - nccl_peer_killed_gives_error # no error after %d s: hang\n", o->timeout_s);
            fflush(stdout);
            _exit(1); /* the communicator is stuck; do not try to clean up */
        }
        printf("ok 1 - nccl_peer_killed_gives_error # %s after %.1f s\n", ncclGetErrorString(w),
               nccl_rank_now_s() - t0);
        fflush(stdout);
        ncclCommAbort(comm);
        _exit(0);
    }
}

static int mode_loop(const struct opts *o, ncclComm_t comm, cudaStream_t s)
{
    size_t count = o->max_bytes / 4;
    float *h = malloc(count * sizeof(float)), *d;
    int *hflag = malloc(sizeof(int)), *dflag;
    if (!h || !hflag)
        return -1;
    CUDA_OK(cudaMalloc((void **)&d, count * sizeof(float)));
    CUDA_OK(cudaMalloc((void **)&dflag, sizeof(int)));
    printf("1..1\n");
    double t0 = nccl_rank_now_s();
    long rounds = 0, wrong = 0;
    for (;; rounds++) {
        float v = (float)((o->rank + 1) * (int)(rounds % 7 + 1));
        for (size_t i = 0; i < count; i++)
            h[i] = v + (float)(i % 3);
        CUDA_OK(cudaMemcpyAsync(d, h, count * sizeof(float), cudaMemcpyHostToDevice, s));
        NCCL_OK(ncclAllReduce(d, d, count, ncclFloat32, ncclSum, comm, s));
        *hflag = o->rank == 0 && nccl_rank_now_s() - t0 > o->iters;
        CUDA_OK(cudaMemcpyAsync(dflag, hflag, sizeof(int), cudaMemcpyHostToDevice, s));
        NCCL_OK(ncclAllReduce(dflag, dflag, 1, ncclInt32, ncclMax, comm, s));
        CUDA_OK(cudaMemcpyAsync(h, d, count * sizeof(float), cudaMemcpyDeviceToHost, s));
        CUDA_OK(cudaMemcpyAsync(hflag, dflag, sizeof(int), cudaMemcpyDeviceToHost, s));
        ncclResult_t w = nccl_rank_wait_stream(comm, s, o->timeout_s);
        if (w != ncclSuccess) {
            printf("not ok 1 - nccl_all_reduce_loop # round %ld: %s\n", rounds,
                   w == ncclInProgress ? "no completion: hang" : ncclGetErrorString(w));
            fflush(stdout);
            return 1;
        }
        float sum = (float)((rounds % 7 + 1) * o->nranks * (o->nranks + 1) / 2);
        for (size_t i = 0; i < count; i++) {
            if (h[i] != sum + (float)(o->nranks * (int)(i % 3))) {
                if (!wrong)
                    fprintf(stderr, "rank %d: round %ld element %zu: %g, expected %g\n", o->rank, rounds, i,
                            (double)h[i], (double)(sum + (float)(o->nranks * (int)(i % 3))));
                wrong++;
            }
        }
        if (rounds == 0) {
            /* NCCL connects lazily, in the first collective: scripts that
             * inject faults into the loop start counting from this line */
            printf("# loop: first round done after %.1f s\n", nccl_rank_now_s() - t0);
            fflush(stdout);
        }
        if (*hflag)
            break;
    }
    printf("%s 1 - nccl_all_reduce_loop # %ld rounds of %zu bytes in %.1f s, %ld wrong elements\n",
           wrong ? "not ok" : "ok", rounds + 1, o->max_bytes, nccl_rank_now_s() - t0, wrong);
    fflush(stdout);
    cudaFree(d);
    cudaFree(dflag);
    free(h);
    free(hflag);
    return wrong ? 1 : 0;
}

int main(int argc, char **argv)
{
    struct opts o = { .rank = -1, .nranks = 2, .gpu = -1, .mode = "check", .min_bytes = 4,
                      .max_bytes = 256u << 20, .timeout_s = 120, .iters = 20,
                      .colls = (1u << NCOLL) - 1, .types = 3 };
    static const struct option lo[] = {
        { "rank", required_argument, 0, 'r' }, { "nranks", required_argument, 0, 'n' },
        { "gpu", required_argument, 0, 'g' },  { "id-file", required_argument, 0, 'f' },
        { "mode", required_argument, 0, 'm' }, { "min-bytes", required_argument, 0, 'b' },
        { "max-bytes", required_argument, 0, 'e' }, { "timeout", required_argument, 0, 't' },
        { "iters", required_argument, 0, 'i' }, { "colls", required_argument, 0, 'c' },
        { "types", required_argument, 0, 'y' }, { "target-bytes", required_argument, 0, 'T' },
        { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 },
    };
    int ch, li;
    long long v = 0;
    while (li = -1, (ch = getopt_long(argc, argv, "h", lo, &li)) != -1) {
        /* numbers whole or refused: "512M" once read as 512 bytes */
        int bad = 0;
        switch (ch) {
        case 'r': bad = parse_int(optarg, 0, 1 << 20, &v); o.rank = (int)v; break;
        case 'n': bad = parse_int(optarg, 2, 1 << 20, &v); o.nranks = (int)v; break;
        case 'g': bad = parse_int(optarg, 0, 1 << 10, &v); o.gpu = (int)v; break;
        case 'f': o.id_file = optarg; break;
        case 'm': o.mode = optarg; break;
        case 'b': bad = parse_size(optarg, 4, 1ll << 40, &v); o.min_bytes = (size_t)v; break;
        case 'e': bad = parse_size(optarg, 4, 1ll << 40, &v); o.max_bytes = (size_t)v; break;
        case 't': bad = parse_int(optarg, 1, 1 << 20, &v); o.timeout_s = (int)v; break;
        case 'i': bad = parse_int(optarg, 1, 1 << 30, &v); o.iters = (int)v; break;
        case 'T': bad = parse_size(optarg, 0, 1ll << 50, &v); o.target_bytes = (size_t)v; break;
        case 'c': o.colls = parse_list(optarg, coll_name, NCOLL); break;
        case 'y': o.types = parse_list(optarg, type_name, 2); break;
        default:
            printf("usage: %s --rank R --nranks N --id-file F [--gpu G] [--mode check|bench|kill|loop]\n"
                   "          [--min-bytes B] [--max-bytes B] [--timeout S] [--iters N]\n"
                   "          [--target-bytes B (bench: iterations per size = B / size, --iters..1000)]\n"
                   "          [--colls all_reduce,all_gather,reduce_scatter,broadcast,all_to_all,send_recv]\n"
                   "          [--types fp32,bf16]\n", argv[0]);
            return ch == 'h' ? 0 : 2;
        }
        if (bad) {
            fprintf(stderr, "bad value '%s' for --%s (sizes: bytes with an optional K/M/G suffix)\n", optarg,
                    li >= 0 ? lo[li].name : "?");
            return 2;
        }
    }
    if (o.rank < 0 || o.nranks < 2 || o.rank >= o.nranks || !o.id_file || o.min_bytes < 4 ||
        o.max_bytes < o.min_bytes || o.iters < 1 || !o.colls || !o.types) {
        fprintf(stderr, "bad arguments (see --help)\n");
        return 2;
    }
    g_rank = o.rank;
    int ngpu = 0;
    if (cudaGetDeviceCount(&ngpu) != cudaSuccess || ngpu == 0) {
        printf("1..1\nok 1 - nccl_%s # SKIP no CUDA GPU on this machine\n", o.mode);
        return 0;
    }
    CUDA_OK(cudaSetDevice(o.gpu >= 0 ? o.gpu : o.rank % ngpu));
    ncclUniqueId id;
    if (nccl_rank_unique_id(o.rank, o.id_file, o.timeout_s, &id) != 0)
        return 1;
    ncclComm_t comm;
    NCCL_OK(ncclCommInitRank(&comm, o.nranks, id, o.rank));
    cudaStream_t s;
    CUDA_OK(cudaStreamCreate(&s));
    int rc;
    if (strcmp(o.mode, "bench") == 0)
        rc = mode_bench(&o, comm, s);
    else if (strcmp(o.mode, "kill") == 0)
        rc = mode_kill(&o, comm, s);
    else if (strcmp(o.mode, "loop") == 0)
        rc = mode_loop(&o, comm, s);
    else
        rc = mode_check(&o, comm, s);
    if (rc == 0) {
        ncclCommFinalize(comm);
        ncclCommDestroy(comm);
    } else {
        ncclCommAbort(comm);
    }
    return rc == 0 ? 0 : 1;
}
