/* tests/gpu/gin_driver.c: one rank of an NCCL job that runs the device-API
 * GIN cases of tests/gpu/gin_device.h, started by tests/gpu/gin_e2e.sh and
 * bench/gpu_gin_railnet_vs_nccl.sh through tests/gpu/lib-nccl.sh (one
 * process per rank; rank 0 writes the NCCL unique id to --id-file).
 *
 * --mode check (default): every case, each rank printing its own TAP stream
 *   (the script counts a case as passed only when every rank's line is ok).
 *   After a case that could not finish (error, timeout) the rest are
 *   reported not run and the process exits 1 without waiting on the GPU.
 * --mode bench: rank 0 prints "#bench alltoall BYTES US BUSBW_GBPS" for
 *   --min-bytes..--max-bytes (x2 steps, bytes per rank) and
 *   "#bench pingpong ITERS US_PER_ROUND_TRIP".
 * --mode kill (2 ranks; tests/gpu/gin_kill.sh): a peer killed mid-kernel
 *   must be an NCCL error on the survivor, not a hang. Both ranks launch
 *   gin_kill_launch's kernel (KILL_ROUNDS put+signal ping-pong rounds);
 *   once its kernel has answered them, rank 1 prints "#kill self ..." and
 *   SIGKILLs itself while the kernel runs. Rank 0's kernel goes on putting
 *   to rank 1 and waits for an answer (bounded on the GPU by twice
 *   --timeout); its host polls ncclCommGetAsyncError (where NCCL 2.28.9
 *   puts GIN errors: the proxy type's progress thread result, and the
 *   plugin's queryLastError for the GDAKI type) and prints one line,
 *     #kill error=<ncclResult name> after=<s> puts=N seen=N kernel=<state> at=<epoch s>
 *   with `after` counted from the moment its kernel issued its last round's
 *   put (rank 1 answers that round and dies), or "#kill error=none ..."
 *   when --timeout seconds pass without an error. Then it stops its
 *   kernel, calls ncclCommAbort and prints "#kill abort=<s>". Rank 0's
 *   exit status: 0 an error came in time and the abort returned; 3 no error
 *   within --timeout (a hang); 4 its kernel did not stop (no abort tried);
 *   5 an error before the kill, or the rounds were never played; 1 setup. */
#include <cuda_runtime.h>
#include <nccl.h>

#include "plugin/ib/parse.h"
#include "tests/gpu/nccl_rank.h"

#include <errno.h>
#include <execinfo.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gin_device.h"

struct opts {
    int rank, nranks, gpu, timeout_s, iters, pp_iters;
    unsigned long long cases; /* bit i-1: run case i (check mode) */
    const char *id_file, *mode;
    size_t min_bytes, max_bytes;
};

/* A crash in NCCL, a plugin or softnic inside this process: say where, in
 * the rank's log, then die of the same signal. */
static void on_fatal(int sig)
{
    static const char head[] = "# gin_device: fatal signal; backtrace:\n";
    void *frames[64];
    int n = backtrace(frames, 64);
    if (write(2, head, sizeof(head) - 1) < 0) { /* nothing better to do */ }
    backtrace_symbols_fd(frames, n, 2);
    signal(sig, SIG_DFL);
    raise(sig);
}

enum kind { PUT, INC, ADD, COUNTER, FLUSH, BARRIER, A2A, PUTVALUE };
struct gin_case {
    enum kind kind;
    size_t bytes;
    int n; /* puts, or barrier rounds */
};
static const struct gin_case cases[] = {
    { PUT, 1, 1 },           { PUT, 4100, 1 },          { PUT, (1u << 20) + 12, 1 },
    { INC, 4096, 16 },       { INC, 1u << 20, 4 },      { ADD, 4096, 16 },
    { ADD, 1u << 20, 4 },    { COUNTER, 8192, 8 },      { FLUSH, 256u << 10, 8 },
    { BARRIER, 0, 64 },      { A2A, 16, 0 },            { A2A, 1000, 0 },
    { A2A, 64u << 10, 0 },   { A2A, 1u << 20, 0 },      { A2A, 8u << 20, 0 },
    { PUTVALUE, 8, 16 },
};
#define NCASES (int)(sizeof(cases) / sizeof(cases[0]))
#define CHECK_WIN_PER_RANK (9u << 20) /* covers the largest case's slots per rank */

static void case_name(const struct gin_case *c, char *buf, size_t len)
{
    switch (c->kind) {
    case PUT: snprintf(buf, len, "gin_put_%zuB", c->bytes); break;
    case INC: snprintf(buf, len, "gin_put_signal_inc_%dx%zuB", c->n, c->bytes); break;
    case ADD: snprintf(buf, len, "gin_put_signal_add_%dx%zuB", c->n, c->bytes); break;
    case COUNTER: snprintf(buf, len, "gin_counter_%dx%zuB", c->n, c->bytes); break;
    case FLUSH: snprintf(buf, len, "gin_flush_%dx%zuB", c->n, c->bytes); break;
    case BARRIER: snprintf(buf, len, "gin_barrier_%d_rounds", c->n); break;
    case A2A: snprintf(buf, len, "gin_alltoall_%zuB_per_peer", c->bytes); break;
    case PUTVALUE: snprintf(buf, len, "gin_put_value_%d_rounds", c->n); break;
    }
}

static int run_case(struct gin_env *env, const struct gin_case *c, char *why, size_t len)
{
    switch (c->kind) {
    case PUT: return gin_case_put(env, c->bytes, why, len);
    case INC: return gin_case_put_signal_inc(env, c->bytes, c->n, why, len);
    case ADD: return gin_case_put_signal_add(env, c->bytes, c->n, why, len);
    case COUNTER: return gin_case_counter(env, c->bytes, c->n, why, len);
    case FLUSH: return gin_case_flush(env, c->bytes, c->n, why, len);
    case BARRIER: return gin_case_barrier(env, c->n, why, len);
    case A2A: return gin_case_alltoall(env, c->bytes, why, len);
    case PUTVALUE: return gin_case_put_value(env, c->n, why, len);
    }
    return -1;
}

/* Returns the number of failed cases; *broken when the job cannot go on. */
static int mode_check(const struct opts *o, struct gin_env *env, int *broken)
{
    char name[96], why[1024];
    int failed = 0;
    for (int i = 0; i < NCASES; i++) {
        if (!(o->cases >> i & 1))
            continue;
        case_name(&cases[i], name, sizeof(name));
        if (*broken) {
            printf("not ok %d - %s # not run: an earlier case did not finish\n", i + 1, name);
            failed++;
            continue;
        }
        why[0] = 0;
        double t0 = nccl_rank_now_s();
        int rc = run_case(env, &cases[i], why, sizeof(why));
        if (rc == 0) {
            printf("ok %d - %s # %.2f s\n", i + 1, name, nccl_rank_now_s() - t0);
        } else {
            printf("not ok %d - %s # %s\n", i + 1, name, why);
            failed++;
            if (rc < 0)
                *broken = 1;
        }
        fflush(stdout);
    }
    return failed;
}

static int mode_bench(const struct opts *o, struct gin_env *env, int *broken)
{
    char why[1024];
    for (size_t b = o->min_bytes; b <= o->max_bytes; b *= 2) {
        double s = 0;
        if (gin_bench_alltoall(env, b, o->iters, &s, why, sizeof(why)) != 0) {
            fprintf(stderr, "rank %d: alltoall %zu bytes: %s\n", o->rank, b, why);
            *broken = 1;
            return 1;
        }
        if (o->rank == 0)
            printf("#bench alltoall %zu %.2f %.6f\n", b, s * 1e6,
                   (double)b * (o->nranks - 1) / o->nranks / s / 1e9);
        fflush(stdout);
    }
    double s = 0;
    if (gin_bench_pingpong(env, o->pp_iters, &s, why, sizeof(why)) != 0) {
        fprintf(stderr, "rank %d: ping-pong: %s\n", o->rank, why);
        *broken = 1;
        return 1;
    }
    if (o->rank == 0)
        printf("#bench pingpong %d %.2f\n", o->pp_iters, s * 1e6);
    return 0;
}

/* Kill mode: ping-pong rounds before rank 1 dies, then rank 0's puts to
 * it, one every 100 ms (6.4 s of them: an error the plugin finds, say by a
 * retry budget running out, still meets a put to fail, the one way NCCL
 * 2.28.9's proxy type hears of it). */
#define KILL_ROUNDS 8
#define KILL_PUTS 64
#define KILL_STOP_S 10 /* for the kernel to end once told to */

static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static const char *result_name(ncclResult_t r)
{
    static char other[32];
    switch (r) {
    case ncclSuccess: return "ncclSuccess";
    case ncclUnhandledCudaError: return "ncclUnhandledCudaError";
    case ncclSystemError: return "ncclSystemError";
    case ncclInternalError: return "ncclInternalError";
    case ncclInvalidArgument: return "ncclInvalidArgument";
    case ncclInvalidUsage: return "ncclInvalidUsage";
    case ncclRemoteError: return "ncclRemoteError";
    case ncclInProgress: return "ncclInProgress";
    default: snprintf(other, sizeof(other), "ncclResult%d", (int)r); return other;
    }
}

static const char *kill_kernel_state(const struct gin_kill_status *st, int done)
{
    if (done < 0)
        return "failed";
    if (st->ended == GIN_KILL_DEADLINE)
        return "ended-at-deadline";
    if (st->ended == GIN_KILL_STOPPED)
        return "stopped";
    return done ? "ended" : "running";
}

/* Rank 1: play the rounds, then die of SIGKILL while the kernel runs. */
static void kill_rank1(const struct opts *o, struct gin_env *env)
{
    char why[512];
    struct gin_kill_status st;
    double t0 = nccl_rank_now_s();
    for (;;) {
        gin_kill_read(env, &st);
        if (st.puts >= KILL_ROUNDS)
            break;
        int done = gin_kill_done(env, why, sizeof(why));
        if (done != 0 || nccl_rank_now_s() - t0 > o->timeout_s) {
            printf("# rank 1: %u of %d rounds answered, kernel %s%s%s: not killing myself\n", st.puts, KILL_ROUNDS,
                   kill_kernel_state(&st, done), done < 0 ? ": " : "", done < 0 ? why : "");
            gin_kill_stop(env);
            fflush(NULL);
            _exit(1);
        }
        usleep(1000);
    }
    printf("#kill self rounds=%u at=%.6f\n", st.puts, wall_s());
    fflush(NULL);
    raise(SIGKILL);
    _exit(1); /* not reached */
}

/* Rank 0: wait for NCCL's error (see the top of this file). */
static void kill_rank0(const struct opts *o, ncclComm_t comm, struct gin_env *env)
{
    char why[512] = "";
    struct gin_kill_status st;
    double t0 = nccl_rank_now_s(), tref = 0;
    int done = 0;
    ncclResult_t ae;
    for (;;) {
        double now = nccl_rank_now_s();
        gin_kill_read(env, &st);
        if (done == 0)
            done = gin_kill_done(env, why, sizeof(why));
        if (tref == 0 && st.puts >= KILL_ROUNDS) {
            tref = now;
            printf("# rank 0: the puts of %d rounds issued, %u answers seen; rank 1 kills itself on the last\n",
                   KILL_ROUNDS, st.seen);
        }
        ae = ncclSuccess;
        ncclResult_t qr = ncclCommGetAsyncError(comm, &ae);
        if (qr != ncclSuccess)
            ae = qr;
        if (ae != ncclSuccess && ae != ncclInProgress)
            break;
        if (tref == 0 && (done != 0 || now - t0 > o->timeout_s)) {
            printf("#kill setup failed: %u of the rounds' puts issued, %u answers seen, kernel %s%s%s\n",
                   st.puts, st.seen, kill_kernel_state(&st, done), done < 0 ? ": " : "", done < 0 ? why : "");
            gin_kill_stop(env);
            fflush(NULL);
            _exit(5);
        }
        if (tref != 0 && now - tref > o->timeout_s) {
            printf("#kill error=none after=%.3f puts=%u seen=%u kernel=%s at=%.6f\n", now - tref, st.puts, st.seen,
                   kill_kernel_state(&st, done), wall_s());
            printf("# rank 0: no NCCL error %d s after rank 1 was killed: a hang\n", o->timeout_s);
            gin_kill_stop(env);
            fflush(NULL);
            _exit(3);
        }
        usleep(1000);
    }
    double now = nccl_rank_now_s();
    gin_kill_read(env, &st);
    if (tref == 0) {
        printf("#kill early error=%s before the kill (%u of %d rounds' puts issued): %s\n", result_name(ae),
               st.puts, KILL_ROUNDS, ncclGetLastError(comm));
        gin_kill_stop(env);
        fflush(NULL);
        _exit(5);
    }
    printf("#kill error=%s after=%.3f puts=%u seen=%u kernel=%s at=%.6f\n", result_name(ae), now - tref, st.puts,
           st.seen, kill_kernel_state(&st, done), wall_s());
    printf("# rank 0: %s (NCCL's last error: %s)%s%s\n", ncclGetErrorString(ae), ncclGetLastError(comm),
           done < 0 ? "; kill kernel: " : "", done < 0 ? why : "");
    fflush(stdout);
    /* the kernel first (an abort that frees what it uses would wait on it) */
    gin_kill_stop(env);
    double ts = nccl_rank_now_s();
    while (done == 0 && nccl_rank_now_s() - ts < KILL_STOP_S) {
        usleep(1000);
        done = gin_kill_done(env, why, sizeof(why));
    }
    if (done == 0) {
        printf("#kill stuck: the kernel still runs %d s after it was told to stop; no abort tried\n", KILL_STOP_S);
        fflush(NULL);
        _exit(4);
    }
    double ta = nccl_rank_now_s();
    ncclResult_t ar = ncclCommAbort(comm);
    printf("#kill abort=%.3f result=%s\n", nccl_rank_now_s() - ta, result_name(ar));
    fflush(NULL);
    _exit(0);
}

static int parse_cases(const char *arg, unsigned long long *mask)
{
    *mask = 0;
    for (const char *p = arg; *p;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 1 || v > NCASES || (*end && *end != ','))
            return -1;
        *mask |= 1ull << (v - 1);
        p = *end ? end + 1 : end;
    }
    return *mask ? 0 : -1;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: gin_device --rank R --nranks N --id-file F [--gpu G] [--mode check|bench|kill]\n"
               "          [--timeout S] [--min-bytes B] [--max-bytes B] [--iters N] [--pp-iters N]\n"
               "          [--cases I,J,...]  (check mode: only these case numbers, 1..%d)\n"
               "One rank of an NCCL job running device-API GIN cases (put, put+signal INC/ADD,\n"
               "counters, flush, GIN barrier, alltoall) on symmetric windows; prints TAP\n"
               "(check) or '#bench' lines (bench, rank 0). Started by tests/gpu/gin_e2e.sh.\n"
               "kill (2 ranks): rank 1 SIGKILLs itself mid-kernel; rank 0 prints '#kill error=...'\n"
               "  once NCCL reports an error, within --timeout s (tests/gpu/gin_kill.sh).\n", NCASES);
}

int main(int argc, char **argv)
{
    struct opts o = { .rank = -1, .nranks = 0, .gpu = -1, .timeout_s = 120, .iters = 20,
                      .pp_iters = 1000, .cases = (1ull << NCASES) - 1, .mode = "check", .min_bytes = 64u << 10,
                      .max_bytes = 64u << 20 };
    static const struct option lo[] = {
        { "rank", required_argument, 0, 'r' },      { "nranks", required_argument, 0, 'n' },
        { "gpu", required_argument, 0, 'g' },       { "id-file", required_argument, 0, 'f' },
        { "mode", required_argument, 0, 'm' },      { "timeout", required_argument, 0, 't' },
        { "min-bytes", required_argument, 0, 'b' }, { "max-bytes", required_argument, 0, 'e' },
        { "iters", required_argument, 0, 'i' },     { "pp-iters", required_argument, 0, 'p' },
        { "cases", required_argument, 0, 'c' },
        { "help", no_argument, 0, 'h' },            { 0, 0, 0, 0 }
    };
    int c, li;
    long long v = 0;
    while (li = -1, (c = getopt_long(argc, argv, "h", lo, &li)) != -1) {
        int bad = 0; /* numbers whole or refused (parse.h) */
        switch (c) {
        case 'r': bad = parse_int(optarg, 0, 1 << 20, &v); o.rank = (int)v; break;
        case 'n': bad = parse_int(optarg, 2, 1 << 20, &v); o.nranks = (int)v; break;
        case 'g': bad = parse_int(optarg, 0, 1 << 10, &v); o.gpu = (int)v; break;
        case 'f': o.id_file = optarg; break;
        case 'm': o.mode = optarg; break;
        case 't': bad = parse_int(optarg, 1, 1 << 20, &v); o.timeout_s = (int)v; break;
        case 'b': bad = parse_size(optarg, 1, 1ll << 40, &v); o.min_bytes = (size_t)v; break;
        case 'e': bad = parse_size(optarg, 1, 1ll << 40, &v); o.max_bytes = (size_t)v; break;
        case 'i': bad = parse_int(optarg, 1, 1 << 30, &v); o.iters = (int)v; break;
        case 'p': bad = parse_int(optarg, 1, 1 << 30, &v); o.pp_iters = (int)v; break;
        case 'c':
            if (parse_cases(optarg, &o.cases) != 0) {
                fprintf(stderr, "--cases: numbers from 1 to %d, comma-separated\n", NCASES);
                return 2;
            }
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
        if (bad) {
            fprintf(stderr, "bad value '%s' for --%s (sizes: bytes with an optional K/M/G suffix)\n", optarg,
                    li >= 0 ? lo[li].name : "?");
            return 2;
        }
    }
    int bench = strcmp(o.mode, "bench") == 0, killmode = strcmp(o.mode, "kill") == 0;
    if (o.rank < 0 || o.nranks < 2 || o.nranks > 8 || o.rank >= o.nranks || !o.id_file ||
        (!bench && !killmode && strcmp(o.mode, "check") != 0) || (killmode && o.nranks != 2) ||
        o.timeout_s < 1 || o.iters < 1 || o.pp_iters < 1 || o.min_bytes < (size_t)o.nranks || o.max_bytes < o.min_bytes) {
        fprintf(stderr, "bad arguments (see --help)\n");
        return 2;
    }
    /* line-buffered: NCCL's INFO lines (stdout too) survive a crash */
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGSEGV, on_fatal);
    signal(SIGBUS, on_fatal);
    signal(SIGABRT, on_fatal);
    int ngpu = 0;
    if (cudaGetDeviceCount(&ngpu) != cudaSuccess || ngpu == 0) {
        printf("1..0 # SKIP no CUDA GPU on this machine\n");
        return 0;
    }
    if (cudaSetDevice(o.gpu >= 0 ? o.gpu : o.rank % ngpu) != cudaSuccess) {
        fprintf(stderr, "rank %d: cudaSetDevice failed\n", o.rank);
        return 1;
    }
    int version = 0;
    ncclGetVersion(&version);
    printf("# rank %d: NCCL runtime %d, built against headers %d\n", o.rank, version, NCCL_VERSION_CODE);
    if (!bench && !killmode && o.cases == (1ull << NCASES) - 1)
        printf("1..%d\n", NCASES);
    fflush(stdout);
    ncclUniqueId id;
    ncclComm_t comm;
    ncclResult_t r = ncclSuccess;
    if (nccl_rank_unique_id(o.rank, o.id_file, o.timeout_s, &id) != 0 || (r = ncclCommInitRank(&comm, o.nranks, id, o.rank)) != ncclSuccess) {
        fprintf(stderr, "rank %d: no communicator%s%s\n", o.rank, r ? ": " : "", r ? ncclGetErrorString(r) : "");
        return 1;
    }
    size_t win = bench      ? o.max_bytes + (1u << 20)
                 : killmode ? (size_t)1 << 20
                            : (size_t)o.nranks * CHECK_WIN_PER_RANK;
    struct gin_env *env = NULL;
    char why[1024];
    int broken = 0, failed;
    if (gin_env_open(comm, win, o.timeout_s, &env, why, sizeof(why)) != 0) {
        /* one line the scripts read (what NCCL refused), then every case fails */
        printf("# gin_env_open failed: %s\n", why);
        fprintf(stderr, "rank %d: gin_env_open: %s\n", o.rank, why);
        if (!bench && !killmode)
            for (int i = 0; i < NCASES; i++) {
                char name[96];
                if (!(o.cases >> i & 1))
                    continue;
                case_name(&cases[i], name, sizeof(name));
                printf("not ok %d - %s # no device communicator with GIN\n", i + 1, name);
            }
        fflush(stdout);
        _exit(1);
    }
    if (killmode) {
        if (gin_kill_launch(env, KILL_ROUNDS, KILL_PUTS, 2 * o.timeout_s, why, sizeof(why)) != 0) {
            printf("#kill setup failed: no kill kernel: %s\n", why);
            fflush(NULL);
            _exit(o.rank == 0 ? 5 : 1);
        }
        if (o.rank == 1)
            kill_rank1(&o, env);
        kill_rank0(&o, comm, env); /* neither returns */
    }
    failed = bench ? mode_bench(&o, env, &broken) : mode_check(&o, env, &broken);
    fflush(stdout);
    if (broken) {
        /* a kernel may still spin on the GPU: leave without waiting for it */
        fflush(stderr);
        _exit(1);
    }
    gin_env_close(env);
    ncclCommFinalize(comm);
    ncclCommDestroy(comm);
    return failed ? 1 : 0;
}
