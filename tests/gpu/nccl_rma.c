/* tests/gpu/nccl_rma.c: one rank of an NCCL job that moves data with NCCL
 * 2.30's host-initiated one-sided API (ncclPutSignal, ncclSignal,
 * ncclWaitSignal) on symmetric windows (tests/gpu/nccl_rma.sh). Started by
 * tests/gpu/lib-nccl.sh's nccl_job, every rank its own NCCL node, so NCCL's
 * RMA proxy carries each operation through the RMA plugin's iputSignal.
 *
 * Each rank registers one window (ncclMemAlloc + ncclCommWindowRegister,
 * NCCL_WIN_COLL_SYMMETRIC): --puts source slots, then --puts destination
 * slots, each --max-bytes long. For every size from --min-bytes to
 * --max-bytes (x4 per step) a rank fills its source slots with bytes that
 * name the rank, the size and the slot, puts slot j into destination slot j
 * of the next rank (ring), --puts operations back to back on the stream, each
 * with a signal, then one ncclWaitSignal for --puts signals from the previous
 * rank, and compares every received byte. Then a signal-only round
 * (ncclSignal to the next, ncclWaitSignal from the previous), and an
 * all_reduce as a barrier before the next size overwrites the slots.
 * One TAP line per size and one for the signal rounds.
 *
 * The binary is built against whichever nccl.h configure found (2.28 has no
 * host RMA API): the three calls are looked up at run time and the job
 * skips, saying so, where the NCCL that runs lacks them or, as 2.29 does,
 * has them but loads no RMA table from a plugin. */
#include <cuda_runtime.h>
#include <nccl.h>
#include "plugin/ib/parse.h"
#include "tests/gpu/nccl_rank.h"

#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef NCCL_WIN_COLL_SYMMETRIC
#define NCCL_WIN_COLL_SYMMETRIC 0x01
#endif

/* NCCL 2.30's declarations (nccl.h), for builds against older headers. */
struct rma_wait_desc {
    int op_count, peer, signal_index, context;
};
typedef ncclResult_t (*put_signal_fn)(const void *, size_t, ncclDataType_t, int, ncclWindow_t, size_t, int, int,
                                      unsigned, ncclComm_t, cudaStream_t);
typedef ncclResult_t (*signal_fn)(int, int, int, unsigned, ncclComm_t, cudaStream_t);
typedef ncclResult_t (*wait_signal_fn)(int, struct rma_wait_desc *, ncclComm_t, cudaStream_t);

struct opts {
    int rank, nranks, gpu, puts, timeout_s, signal_rounds;
    const char *id_file;
    size_t min_bytes, max_bytes;
};

static int g_rank;
static int g_tap;

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "rank %d: ", g_rank);                              \
            fprintf(stderr, __VA_ARGS__);                                      \
            fprintf(stderr, " (%s:%d)\n", __FILE__, __LINE__);                 \
            return -1;                                                         \
        }                                                                      \
    } while (0)
#define CUDA_OK(call)                                                          \
    do {                                                                       \
        cudaError_t e_ = (call);                                               \
        CHECK(e_ == cudaSuccess, "%s failed: %s", #call, cudaGetErrorString(e_)); \
    } while (0)
#define NCCL_OK(call)                                                          \
    do {                                                                       \
        ncclResult_t r_ = (call);                                              \
        CHECK(r_ == ncclSuccess, "%s failed: %s", #call, ncclGetErrorString(r_)); \
    } while (0)

/* The byte at offset i of slot j of `rank`'s source for a size: every
 * (rank, size, slot) gives another sequence, so a misplaced or stale slot
 * shows. */
static uint8_t pattern(int rank, size_t size, int slot, size_t i)
{
    uint64_t x = (uint64_t)rank * 0x9E3779B97F4A7C15ull ^ size * 0xC2B2AE3D27D4EB4Full ^ (uint64_t)slot << 40 ^ i;
    x ^= x >> 29;
    x *= 0xBF58476D1CE4E5B9ull;
    return (uint8_t)(x >> 32);
}

/* The stream's work done, or NCCL's asynchronous error, or the timeout:
 * never a hang on a lost peer. */
static int wait_stream(const struct opts *o, ncclComm_t comm, cudaStream_t s, const char *what)
{
    ncclResult_t r = nccl_rank_wait_stream(comm, s, o->timeout_s);
    CHECK(r != ncclInProgress, "%s: not done after %d s", what, o->timeout_s);
    CHECK(r == ncclSuccess, "%s: %s", what, ncclGetErrorString(r));
    return 0;
}

static void tap(int ok, const char *name, const char *why)
{
    printf("%sok %d - %s%s%s\n", ok ? "" : "not ", ++g_tap, name, ok ? "" : " # ", ok ? "" : why);
    fflush(stdout);
}

struct rma {
    put_signal_fn put_signal;
    signal_fn signal;
    wait_signal_fn wait_signal;
};

/* One size: --puts puts of `size` to the next rank, each signalled, one
 * wait for as many from the previous rank, every byte compared. */
static int round_puts(const struct opts *o, const struct rma *api, ncclComm_t comm, cudaStream_t s,
                      uint8_t *win_buf, ncclWindow_t win, size_t size, uint8_t *host, int *bad)
{
    int next = (o->rank + 1) % o->nranks, prev = (o->rank + o->nranks - 1) % o->nranks;
    size_t slot = o->max_bytes;
    for (int j = 0; j < o->puts; j++) {
        for (size_t i = 0; i < size; i++)
            host[i] = pattern(o->rank, size, j, i);
        CUDA_OK(cudaMemcpyAsync(win_buf + j * slot, host, size, cudaMemcpyHostToDevice, s));
        CUDA_OK(cudaMemsetAsync(win_buf + (o->puts + j) * slot, 0, size, s));
        CUDA_OK(cudaStreamSynchronize(s)); /* host is refilled next pass */
    }
    /* nobody puts into a destination before its owner has cleared it */
    NCCL_OK(ncclAllReduce(win_buf + 2 * o->puts * slot, win_buf + 2 * o->puts * slot, 1, ncclInt32, ncclSum, comm, s));
    for (int j = 0; j < o->puts; j++)
        NCCL_OK(api->put_signal(win_buf + j * slot, size, ncclInt8, next, win, (o->puts + j) * slot, 0, 0, 0, comm,
                                s));
    struct rma_wait_desc d = { .op_count = o->puts, .peer = prev };
    NCCL_OK(api->wait_signal(1, &d, comm, s));
    if (wait_stream(o, comm, s, "puts and their signals") != 0)
        return -1;
    *bad = 0;
    for (int j = 0; j < o->puts; j++) {
        CUDA_OK(cudaMemcpy(host, win_buf + (o->puts + j) * slot, size, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < size; i++)
            if (host[i] != pattern(prev, size, j, i)) {
                if (*bad < 3)
                    fprintf(stderr, "rank %d: size %zu slot %d byte %zu: 0x%02x, rank %d put 0x%02x\n", o->rank,
                            size, j, i, host[i], prev, pattern(prev, size, j, i));
                ++*bad;
            }
    }
    return 0;
}

/* The job's cases: one a size (x4 from --min-bytes to --max-bytes) and the
 * signal rounds. */
static int case_count(const struct opts *o)
{
    int n = 1;
    for (size_t b = o->min_bytes; b <= o->max_bytes; b *= 4)
        n++;
    return n;
}

static int run(const struct opts *o, const struct rma *api, ncclComm_t comm, cudaStream_t s)
{
    size_t win_bytes = 2 * (size_t)o->puts * o->max_bytes + 256; /* + the barrier's word */
    void *buf = NULL;
    ncclWindow_t win;
    NCCL_OK(ncclMemAlloc(&buf, win_bytes));
    NCCL_OK(ncclCommWindowRegister(comm, buf, win_bytes, &win, NCCL_WIN_COLL_SYMMETRIC));
    uint8_t *host = malloc(o->max_bytes);
    CHECK(host, "out of memory");
    printf("1..%d\n", case_count(o));
    int failed = 0;
    for (size_t b = o->min_bytes; b <= o->max_bytes; b *= 4) {
        char name[128], why[160];
        int bad = -1;
        snprintf(name, sizeof(name), "rma_put_signal_%dx%zuB_to_next_rank_data_checked", o->puts, b);
        if (round_puts(o, api, comm, s, buf, win, b, host, &bad) != 0) {
            tap(0, name, "the puts did not complete (see stderr)");
            failed = 1;
            break;
        }
        snprintf(why, sizeof(why), "%d wrong bytes", bad);
        tap(bad == 0, name, why);
        failed |= bad != 0;
    }
    if (!failed) {
        /* signals alone: each round one ncclSignal to the next rank and a
         * wait for the previous rank's; a lost or doubled signal stalls or
         * lets a later wait pass early, which the last all_reduce (every
         * rank counted every round) catches as a wrong count */
        int rounds_ok = 1;
        for (int k = 0; k < o->signal_rounds && rounds_ok; k++) {
            NCCL_OK(api->signal((o->rank + 1) % o->nranks, 0, 0, 0, comm, s));
            struct rma_wait_desc d = { .op_count = 1, .peer = (o->rank + o->nranks - 1) % o->nranks };
            NCCL_OK(api->wait_signal(1, &d, comm, s));
            rounds_ok = wait_stream(o, comm, s, "signal round") == 0;
        }
        int *word = (int *)((uint8_t *)buf + 2 * (size_t)o->puts * o->max_bytes), sum = 0;
        int mine = rounds_ok ? o->signal_rounds : -1;
        CUDA_OK(cudaMemcpy(word, &mine, sizeof(mine), cudaMemcpyHostToDevice));
        NCCL_OK(ncclAllReduce(word, word, 1, ncclInt32, ncclSum, comm, s));
        int synced = wait_stream(o, comm, s, "the count's all_reduce") == 0;
        if (synced)
            CUDA_OK(cudaMemcpy(&sum, word, sizeof(sum), cudaMemcpyDeviceToHost));
        char name[96], why[96];
        snprintf(name, sizeof(name), "rma_signal_%d_rounds_around_the_ring", o->signal_rounds);
        snprintf(why, sizeof(why), "the ranks counted %d rounds, %d expected", sum, o->signal_rounds * o->nranks);
        tap(synced && sum == o->signal_rounds * o->nranks, name, why);
        failed |= !synced || sum != o->signal_rounds * o->nranks;
    }
    free(host);
    if (failed)
        return -1;
    NCCL_OK(ncclCommWindowDeregister(comm, win));
    NCCL_OK(ncclMemFree(buf));
    return 0;
}

int main(int argc, char **argv)
{
    struct opts o = { .rank = -1, .nranks = 2, .gpu = -1, .puts = 3, .timeout_s = 120, .signal_rounds = 16,
                      .min_bytes = 8, .max_bytes = 64u << 20 };
    static const struct option lo[] = {
        { "rank", required_argument, 0, 'r' },      { "nranks", required_argument, 0, 'n' },
        { "gpu", required_argument, 0, 'g' },       { "id-file", required_argument, 0, 'f' },
        { "min-bytes", required_argument, 0, 'b' }, { "max-bytes", required_argument, 0, 'e' },
        { "puts", required_argument, 0, 'p' },      { "signal-rounds", required_argument, 0, 's' },
        { "timeout", required_argument, 0, 't' },   { "probe", no_argument, 0, 'P' },
        { "help", no_argument, 0, 'h' },            { 0, 0, 0, 0 },
    };
    int ch, li, probe = 0;
    long long v = 0;
    while (li = -1, (ch = getopt_long(argc, argv, "h", lo, &li)) != -1) {
        int bad = 0;
        switch (ch) {
        case 'r': bad = parse_int(optarg, 0, 1 << 20, &v); o.rank = (int)v; break;
        case 'n': bad = parse_int(optarg, 2, 1 << 20, &v); o.nranks = (int)v; break;
        case 'g': bad = parse_int(optarg, 0, 1 << 10, &v); o.gpu = (int)v; break;
        case 'f': o.id_file = optarg; break;
        case 'b': bad = parse_size(optarg, 1, 1ll << 32, &v); o.min_bytes = (size_t)v; break;
        case 'e': bad = parse_size(optarg, 1, 1ll << 32, &v); o.max_bytes = (size_t)v; break;
        case 'p': bad = parse_int(optarg, 1, 64, &v); o.puts = (int)v; break;
        case 's': bad = parse_int(optarg, 1, 1 << 20, &v); o.signal_rounds = (int)v; break;
        case 't': bad = parse_int(optarg, 1, 1 << 20, &v); o.timeout_s = (int)v; break;
        case 'P': probe = 1; break;
        default:
            printf("usage: %s --rank R --nranks N --id-file F [--gpu G] [--min-bytes B] [--max-bytes B]\n"
                   "          [--puts P (puts per size, 3)] [--signal-rounds K (16)] [--timeout S (120)]\n"
                   "       %s --probe [--min-bytes B] [--max-bytes B]   (whether the NCCL that loads has the\n"
                   "            API, and a job's case count; no job)\n",
                   argv[0],
                   argv[0]);
            return ch == 'h' ? 0 : 2;
        }
        if (bad) {
            fprintf(stderr, "bad value '%s' for --%s (sizes: bytes with an optional K/M/G suffix)\n", optarg,
                    li >= 0 ? lo[li].name : "?");
            return 2;
        }
    }
    if (!probe && (o.rank < 0 || o.rank >= o.nranks || !o.id_file || o.max_bytes < o.min_bytes)) {
        fprintf(stderr, "bad arguments (see --help)\n");
        return 2;
    }
    g_rank = o.rank;
    struct rma api = {
        .put_signal = (put_signal_fn)dlsym(RTLD_DEFAULT, "ncclPutSignal"),
        .signal = (signal_fn)dlsym(RTLD_DEFAULT, "ncclSignal"),
        .wait_signal = (wait_signal_fn)dlsym(RTLD_DEFAULT, "ncclWaitSignal"),
    };
    int nv = 0;
    ncclGetVersion(&nv);
    if (!api.put_signal || !api.signal || !api.wait_signal) {
        printf("1..0 # SKIP NCCL %d has no host-initiated RMA API (ncclPutSignal: NCCL 2.30 and later)\n", nv);
        return 0;
    }
    if (nv < 23000) { /* 2.29 has the calls, but its RMA proxy is NCCL's own IB: no plugin table */
        printf("1..0 # SKIP NCCL %d carries host-initiated RMA to network peers only through its own IB "
               "transport (RMA plugin tables: NCCL 2.30 and later)\n", nv);
        return 0;
    }
    if (probe) {
        printf("NCCL %d has the host-initiated RMA API\n%d cases a job\n", nv, case_count(&o));
        return 0;
    }
    int ngpu = 0;
    if (cudaGetDeviceCount(&ngpu) != cudaSuccess || ngpu == 0) {
        printf("1..0 # SKIP no CUDA GPU on this machine\n");
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
    int rc = run(&o, &api, comm, s);
    if (rc == 0) {
        ncclCommFinalize(comm);
        ncclCommDestroy(comm);
    } else {
        ncclCommAbort(comm);
    }
    return rc == 0 ? 0 : 1;
}
