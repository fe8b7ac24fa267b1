/* tests/gpu/nccl_shrink.c: one process of an NCCL job that loses a rank in
 * every round and goes on with the others (tests/gpu/nccl_shrink.sh).
 *
 * The job is --nranks processes ("slots", 4 in the test), each its own NCCL
 * node; slot s is rank s of every full communicator. In round r the slot
 * v = r % nranks does not take part itself: it starts a fresh process of
 * this program (--victim) to be rank v, which runs a checked all_reduce with
 * the others and starts the next one, and SIGKILLs it. The other slots, the
 * survivors:
 *   1. run all_reduces until NCCL reports the error (ncclCommGetAsyncError
 *      of a nonblocking communicator), at most --error-bound s after the
 *      kill (past it they go on as if it had come, and say so);
 *   2. ncclCommRevoke the communicator and wait until it is quiescent;
 *   3. ncclCommShrink(NCCL_SHRINK_ABORT) it, excluding rank v; where NCCL
 *      refuses the shrink on a survivor, or a started shrink does not
 *      complete on one, they all build a communicator of their own from a
 *      new unique id instead (recover());
 *   4. run a checked all_reduce on that communicator;
 *   5. ncclCommAbort the parent (the only call allowed on it after the
 *      revoke), finalize and destroy the new one when it is healthy, else
 *      abort it too.
 * A failed step ends the survivor's round early (reported as fail=STEP),
 * the victim waits for its kill even when its own collectives failed, and
 * every slot meets the others at the end of each round (--round-bound s). 
 * Every slot then joins the next round's communicator (its unique id comes
 * from rank 0 through a file named after --rendezvous). A real process is
 * killed each round while the slots live through the whole job, so the
 * slots' open fds, threads and VmRSS tell whether the failure paths leak:
 * each prints them at the start, after its first round as a survivor (the
 * warm-up: NCCL, the plugin and CUDA set up what they keep for the process)
 * and after the last round.
 *
 * Every step that can block is bounded by --step-bound s: past it a
 * watchdog thread prints the step's name and the pid ("#ns stuck", for the
 * script to take the host stacks) and ends the process (status 3) a little
 * later, so a hang in NCCL or in the plugin's close and deregistration
 * paths is reported, not waited for.
 * Output: "#ns ..." lines of key=value fields for the script; NCCL's own
 * log (NCCL_DEBUG) goes to the same stdout. */
#include <cuda_runtime.h>
#include <nccl.h>
#include "plugin/ib/parse.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#ifndef NCCL_REVOKE_DEFAULT /* headers before 2.28.7; revoke is looked up at run time */
#define NCCL_REVOKE_DEFAULT 0
#endif

#define MAX_RANKS 16

struct opts {
    int slot, nranks, rounds, device;
    size_t bytes;
    const char *rendezvous; /* path prefix of the files the processes share */
    double error_bound, step_bound, round_bound;
    int kill_delay_ms;
    int victim_round; /* --victim: the round this process is rank `slot` of; -1 otherwise */
    int notify_fd;    /* --victim: written once the fault all_reduce is queued */
    int probe;
};

/* The step that may block now and until when; the watchdog's only input. */
struct watchdog {
    pthread_mutex_t mu;
    const char *step;
    int round;
    double started, deadline; /* deadline 0: nothing running */
    int told;                 /* the "stuck" line is out */
};

/* From the "stuck" line to the end of the process: time for the script to
 * take the host stacks of the threads (where the step waits). */
#define STACKS_GRACE_S 30.0

typedef ncclResult_t (*revoke_fn)(ncclComm_t, int);

struct ns {
    struct opts o;
    revoke_fn revoke; /* ncclCommRevoke, NULL before NCCL 2.28.7 */
    cudaStream_t stream;
    float *dbuf, *dfault; /* the checked all_reduce's buffer; the one the kill interrupts */
    float *hbuf;          /* pinned: copies to and from it never block the host */
    size_t count;
    struct watchdog wd;
};

/* What a survivor saw in one round, printed as one line. */
struct report {
    int round, victim;
    const char *ar4, *ar3;  /* "ok", "bad" or "none" (not reached) */
    ncclResult_t error;     /* the fault as NCCL reported it; ncclInProgress: none in time */
    double error_s;         /* kill -> error */
    ncclResult_t revoke_rc, after_revoke; /* ncclCommRevoke's return; the state once quiescent */
    double revoke_s;
    ncclResult_t shrink_rc;
    const char *recovery;   /* "shrink" or "rebuild" */
    ncclComm_t child;       /* ncclCommShrink's, until it is the one to go on with or aborted */
    double recovery_s;      /* the new communicator's creation */
    double recovered_s;     /* kill -> the new communicator's checked all_reduce done */
    double abort_s, destroy_s, round_s;
    const char *fail;       /* the step that ended the round early; "none" */
};

/* One line even when NCCL's threads log to stdout at the same time. */
#define FAIL(ns, round, step, ...)                                                           \
    do {                                                                                    \
        flockfile(stdout);                                                                  \
        printf("#ns fail round=%d slot=%d step=%s why=", (round), (ns)->o.slot, (step));    \
        printf(__VA_ARGS__);                                                                \
        printf("\n");                                                                       \
        funlockfile(stdout);                                                                \
        fflush(stdout);                                                                     \
    } while (0)
#define CUDA_OK(ns, round, call)                                                                  \
    do {                                                                                          \
        cudaError_t e_ = (call);                                                                  \
        if (e_ != cudaSuccess) {                                                                  \
            FAIL(ns, round, #call, "%s (%s:%d)", cudaGetErrorString(e_), __FILE__, __LINE__);     \
            return -1;                                                                            \
        }                                                                                         \
    } while (0)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void sleep_s(double s)
{
    struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static const char *result_name(ncclResult_t r)
{
    static const char *const names[] = { "ncclSuccess", "ncclUnhandledCudaError", "ncclSystemError",
                                         "ncclInternalError", "ncclInvalidArgument", "ncclInvalidUsage",
                                         "ncclRemoteError", "ncclInProgress" };
    return (unsigned)r < sizeof(names) / sizeof(names[0]) ? names[r] : "ncclUnknownResult";
}

/* ---- watchdog ---------------------------------------------------------- */

/* A step past its bound first says so ("#ns stuck", with the pid, for the
 * script to take stacks), then ends the process STACKS_GRACE_S later: only
 * _exit is sure to end a process that NCCL holds in a wait. */
static void *watchdog_main(void *arg)
{
    struct ns *ns = arg;
    for (;;) {
        sleep_s(0.1);
        pthread_mutex_lock(&ns->wd.mu);
        double t = now_s(), late = ns->wd.deadline > 0 ? t - ns->wd.deadline : -1;
        if (late >= 0 && !ns->wd.told) {
            printf("#ns stuck round=%d slot=%d pid=%d step=%s after=%.1f\n", ns->wd.round, ns->o.slot,
                   (int)getpid(), ns->wd.step, t - ns->wd.started);
            fflush(stdout);
            ns->wd.told = 1;
        }
        if (late >= STACKS_GRACE_S) {
            printf("#ns fail round=%d slot=%d step=%s why=still running after %.1f s (bound %.0f s)\n",
                   ns->wd.round, ns->o.slot, ns->wd.step, t - ns->wd.started, ns->o.step_bound);
            fflush(stdout);
            _exit(3);
        }
        pthread_mutex_unlock(&ns->wd.mu);
    }
    return NULL;
}

static void step_begin(struct ns *ns, int round, const char *step)
{
    pthread_mutex_lock(&ns->wd.mu);
    ns->wd.step = step;
    ns->wd.round = round;
    ns->wd.started = now_s();
    ns->wd.told = 0;
    /* a little more than the callers' own bounds: those report first */
    ns->wd.deadline = ns->wd.started + ns->o.step_bound + 5;
    pthread_mutex_unlock(&ns->wd.mu);
}

static void step_end(struct ns *ns)
{
    pthread_mutex_lock(&ns->wd.mu);
    ns->wd.deadline = 0;
    pthread_mutex_unlock(&ns->wd.mu);
}

/* ---- this process's resources ------------------------------------------ */

struct res {
    int fds, threads;
    long rss_kib;
};

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n - 1; /* the directory's own fd */
}

static void read_status(int *threads, long *rss_kib)
{
    char line[256];
    FILE *f = fopen("/proc/self/status", "r");
    *threads = -1;
    *rss_kib = -1;
    if (!f)
        return;
    while (fgets(line, sizeof(line), f)) {
        sscanf(line, "Threads: %d", threads);
        sscanf(line, "VmRSS: %ld", rss_kib);
    }
    fclose(f);
}

/* The lowest of n samples 0.1 s apart: a thread NCCL has told to end (a
 * nonblocking call's, the unique id's bootstrap root) may take a moment to
 * go; a leak stays in every sample. */
static struct res sample_res(int n)
{
    struct res r = { INT_MAX, INT_MAX, 0 };
    for (int i = 0; i < n; i++) {
        int fds = count_fds(), threads;
        long rss;
        read_status(&threads, &rss);
        r.fds = fds < r.fds ? fds : r.fds;
        r.threads = threads < r.threads ? threads : r.threads;
        r.rss_kib = rss;
        if (i + 1 < n)
            sleep_s(0.1);
    }
    return r;
}

/* One sample after each round (the trend), five at the points compared. */
static void print_res(const struct ns *ns, const char *at, int round)
{
    struct res r = sample_res(strcmp(at, "round") == 0 ? 1 : 5);
    printf("#ns res slot=%d at=%s round=%d fds=%d threads=%d rss_kib=%ld\n", ns->o.slot, at, round, r.fds,
           r.threads, r.rss_kib);
    fflush(stdout);
}

/* ---- files shared by the processes ------------------------------------- */

static void rv_path(const struct ns *ns, int round, const char *what, char *buf, size_t len)
{
    snprintf(buf, len, "%s.r%d.%s", ns->o.rendezvous, round, what);
}

/* Written whole under a temporary name, then renamed: a reader sees all or nothing. */
static int rv_write(const struct ns *ns, int round, const char *what, const void *data, size_t len)
{
    char path[PATH_MAX], tmp[PATH_MAX + 16];
    rv_path(ns, round, what, path, sizeof(path));
    snprintf(tmp, sizeof(tmp), "%s.tmp%d", path, (int)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f || fwrite(data, len, 1, f) != 1 || fclose(f) != 0 || rename(tmp, path) != 0) {
        FAIL(ns, round, "rendezvous", "cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

static int rv_try_read(const struct ns *ns, int round, const char *what, void *data, size_t len)
{
    char path[PATH_MAX];
    rv_path(ns, round, what, path, sizeof(path));
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    size_t n = fread(data, len, 1, f);
    fclose(f);
    return n == 1 ? 0 : -1;
}

static int rv_read(const struct ns *ns, int round, const char *what, void *data, size_t len)
{
    double deadline = now_s() + ns->o.step_bound;
    while (rv_try_read(ns, round, what, data, len) != 0) {
        if (now_s() > deadline) {
            FAIL(ns, round, "rendezvous", "no %s from the other processes after %.0f s", what, ns->o.step_bound);
            return -1;
        }
        sleep_s(0.005);
    }
    return 0;
}

/* ---- NCCL -------------------------------------------------------------- */

static ncclConfig_t comm_config(void)
{
    ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
    c.blocking = 0; /* every call returns; the process decides how long to wait */
    return c;
}

/* The communicator's state once it leaves ncclInProgress, or ncclInProgress
 * at the deadline. */
static ncclResult_t settle(ncclComm_t comm, double deadline)
{
    for (;;) {
        ncclResult_t st;
        if (ncclCommGetAsyncError(comm, &st) != ncclSuccess)
            return ncclInvalidUsage;
        if (st != ncclInProgress || now_s() > deadline)
            return st;
        sleep_s(0.0005);
    }
}

/* Until the work queued on the stream is done: ncclSuccess, the
 * communicator's error, or ncclInProgress at the deadline. A nonblocking
 * communicator launches a collective from a thread of its own (the call
 * returns ncclInProgress): the stream is worth querying only once the state
 * is ncclSuccess, before that it may not hold the kernel yet. */
static ncclResult_t wait_coll(ncclComm_t comm, cudaStream_t s, double deadline)
{
    for (;;) {
        ncclResult_t st;
        if (ncclCommGetAsyncError(comm, &st) != ncclSuccess)
            return ncclInvalidUsage;
        if (st != ncclSuccess && st != ncclInProgress)
            return st;
        if (st == ncclSuccess) {
            cudaError_t ce = cudaStreamQuery(s);
            if (ce == cudaSuccess)
                return ncclSuccess;
            if (ce != cudaErrorNotReady)
                return ncclUnhandledCudaError;
        }
        if (now_s() > deadline)
            return ncclInProgress;
        sleep_s(0.0002);
    }
}

/* A communicator of n ranks from the unique id `what` of this round, which
 * the process of rank 0 makes. */
static int comm_join(struct ns *ns, int round, const char *what, int n, int rank, ncclComm_t *comm)
{
    ncclUniqueId id;
    if (rank == 0) {
        ncclResult_t r = ncclGetUniqueId(&id);
        if (r != ncclSuccess) {
            FAIL(ns, round, "ncclGetUniqueId", "%s", result_name(r));
            return -1;
        }
        if (rv_write(ns, round, what, &id, sizeof(id)) != 0)
            return -1;
    } else if (rv_read(ns, round, what, &id, sizeof(id)) != 0) {
        return -1;
    }
    ncclConfig_t cfg = comm_config();
    step_begin(ns, round, "ncclCommInitRankConfig");
    ncclResult_t r = ncclCommInitRankConfig(comm, n, id, rank, &cfg);
    if (r == ncclSuccess || r == ncclInProgress)
        r = settle(*comm, now_s() + ns->o.step_bound);
    step_end(ns);
    if (r != ncclSuccess) {
        FAIL(ns, round, "ncclCommInitRankConfig", "%d ranks, rank %d: %s", n, rank, result_name(r));
        if (*comm)
            ncclCommAbort(*comm);
        *comm = NULL;
        return -1;
    }
    /* a communicator whose init never ran (NCCL's per-thread group state
     * left behind by an earlier failed call) reports ncclSuccess and 0 ranks */
    int count = -1;
    if (ncclCommCount(*comm, &count) != ncclSuccess || count != n) {
        FAIL(ns, round, "ncclCommInitRankConfig", "ready, but %d ranks instead of %d", count, n);
        ncclCommAbort(*comm);
        *comm = NULL;
        return -1;
    }
    return 0;
}

/* What slot s contributes at element i under key k: a small integer, so
 * that float sums are exact. */
static float value_of(int s, int k, size_t i)
{
    return (float)((int)((i * 7 + (size_t)s * 3 + (size_t)k * 5) % 17) - 8);
}

/* An all_reduce over comm, whose members are the slots members[0..n), each
 * element compared on the host with the sum: 0 when all match, 1 (why
 * filled in) when not, -1 when CUDA failed. */
static int allreduce_checked(struct ns *ns, int round, ncclComm_t comm, const int *members, int n, int key,
                             char *why, size_t whylen)
{
    for (size_t i = 0; i < ns->count; i++)
        ns->hbuf[i] = value_of(ns->o.slot, key, i);
    size_t bytes = ns->count * sizeof(float);
    CUDA_OK(ns, round, cudaMemcpyAsync(ns->dbuf, ns->hbuf, bytes, cudaMemcpyHostToDevice, ns->stream));
    ncclResult_t r = ncclAllReduce(ns->dbuf, ns->dbuf, ns->count, ncclFloat32, ncclSum, comm, ns->stream);
    if (r == ncclSuccess || r == ncclInProgress)
        r = wait_coll(comm, ns->stream, now_s() + ns->o.step_bound);
    if (r != ncclSuccess) {
        snprintf(why, whylen, "all_reduce of %d ranks: %s", n, r == ncclInProgress ? "no completion" : result_name(r));
        return 1;
    }
    CUDA_OK(ns, round, cudaMemcpyAsync(ns->hbuf, ns->dbuf, bytes, cudaMemcpyDeviceToHost, ns->stream));
    if (wait_coll(comm, ns->stream, now_s() + ns->o.step_bound) != ncclSuccess) {
        snprintf(why, whylen, "copy of the result back did not complete");
        return 1;
    }
    for (size_t i = 0; i < ns->count; i++) {
        float want = 0;
        for (int m = 0; m < n; m++)
            want += value_of(members[m], key, i);
        if (ns->hbuf[i] != want) {
            snprintf(why, whylen, "all_reduce of %d ranks: element %zu is %g, expected %g", n, i,
                     (double)ns->hbuf[i], (double)want);
            return 1;
        }
    }
    return 0;
}

static ncclResult_t queue_fault_allreduce(struct ns *ns, ncclComm_t comm)
{
    return ncclAllReduce(ns->dfault, ns->dfault, ns->count, ncclFloat32, ncclSum, comm, ns->stream);
}

/* ---- the survivors ----------------------------------------------------- */

/* All_reduces on comm, one after the other, until NCCL reports the error
 * that the kill causes. Returns that error and when it was seen (*t_err),
 * and the kill's time once the killer has published it (*t_fault); or
 * ncclInProgress when no error came within --error-bound s of the kill. */
static ncclResult_t run_until_error(struct ns *ns, int round, ncclComm_t comm, double *t_err, double *t_fault)
{
    double start = now_s();
    *t_fault = 0;
    for (;;) {
        ncclResult_t r = queue_fault_allreduce(ns, comm);
        if (r != ncclSuccess && r != ncclInProgress) {
            *t_err = now_s();
            return r;
        }
        for (;;) {
            if (*t_fault == 0)
                rv_try_read(ns, round, "fault", t_fault, sizeof(*t_fault));
            double deadline = *t_fault ? *t_fault + ns->o.error_bound : start + ns->o.step_bound;
            double slice = now_s() + 0.05;
            r = wait_coll(comm, ns->stream, slice < deadline ? slice : deadline);
            if (r == ncclSuccess)
                break; /* the next all_reduce */
            if (r != ncclInProgress || now_s() >= deadline) {
                *t_err = now_s();
                return r;
            }
        }
    }
}

/* The slots of the survivors' communicator, in rank order. */
static void members_of(const struct ns *ns, int victim, int *members, int *n)
{
    *n = 0;
    for (int s = 0; s < ns->o.nranks; s++)
        if (s != victim)
            members[(*n)++] = s;
}

enum verdicts { ALL_STARTED, ALL_REFUSED, MIXED, MISSING };

/* The survivors' verdicts on ncclCommShrink (-1: started, else the result
 * it refused with), each published and all gathered. */
static enum verdicts gather_verdicts(struct ns *ns, int round, int victim, ncclResult_t mine)
{
    int v = mine == ncclSuccess || mine == ncclInProgress ? -1 : (int)mine;
    char what[32];
    snprintf(what, sizeof(what), "verdict%d", ns->o.slot);
    if (rv_write(ns, round, what, &v, sizeof(v)) != 0)
        return MISSING;
    int started = 0, refused = 0;
    for (int s = 0; s < ns->o.nranks; s++) {
        int theirs;
        snprintf(what, sizeof(what), "verdict%d", s);
        if (s == victim || rv_read(ns, round, what, &theirs, sizeof(theirs)) != 0)
            continue;
        started += theirs == -1;
        refused += theirs != -1;
    }
    int n = ns->o.nranks - 1;
    return started == n ? ALL_STARTED : refused == n ? ALL_REFUSED : started + refused == n ? MIXED : MISSING;
}

/* A communicator of the survivors from a new unique id, ranks in slot order. */
static int rebuild(struct ns *ns, int round, int victim, ncclComm_t *out)
{
    int members[MAX_RANKS], n, rank = 0;
    members_of(ns, victim, members, &n);
    while (members[rank] != ns->o.slot)
        rank++;
    return comm_join(ns, round, "id-rebuild", n, rank, out);
}

/* Every survivor publishes whether its step worked (1) or not (0) under
 * `what`<slot>; 1 when all did, 0 when one did not or said nothing in time. */
static int all_agree(struct ns *ns, int round, int victim, const char *what, int mine)
{
    char name[32];
    snprintf(name, sizeof(name), "%s%d", what, ns->o.slot);
    if (rv_write(ns, round, name, &mine, sizeof(mine)) != 0)
        return 0;
    int ok = mine;
    for (int s = 0; s < ns->o.nranks; s++) {
        int theirs = 0;
        snprintf(name, sizeof(name), "%s%d", what, s);
        if (s == victim || s == ns->o.slot)
            continue;
        if (rv_read(ns, round, name, &theirs, sizeof(theirs)) != 0 || !theirs)
            ok = 0;
    }
    return ok;
}

/* The communicator the survivors go on with: ncclCommShrink of the revoked
 * parent excluding the killed rank. NCCL 2.28.9 refuses a shrink when the
 * parent's ncclCommGetAsyncError reports an error (ncclCommEnsureReady), and
 * the error its proxy thread recorded stays after ncclCommRevoke. The
 * survivors agree twice: whether NCCL took every survivor's shrink, then
 * whether every shrink completed; unless both hold, each aborts what its
 * shrink gave and all build a communicator of their own from a new unique
 * id (what a job does without shrink), so that the rounds go on. A shrink
 * started where another survivor was refused never completes: the parent's
 * abort ends it (NCCL stores the new communicator into rep->child from its
 * own thread, so rep outlives that abort). */
static int recover(struct ns *ns, int round, int victim, ncclComm_t parent, ncclComm_t *out, struct report *rep)
{
    int excl = victim;
    ncclConfig_t cfg = comm_config();
    double t0 = now_s();
    *out = NULL;
    step_begin(ns, round, "ncclCommShrink");
    rep->shrink_rc = ncclCommShrink(parent, &excl, 1, &rep->child, &cfg, NCCL_SHRINK_ABORT);
    step_end(ns);
    enum verdicts all = gather_verdicts(ns, round, victim, rep->shrink_rc);
    int shrunk = 0;
    if (all == ALL_STARTED) {
        step_begin(ns, round, "ncclCommShrink-completion");
        ncclResult_t st = settle(parent, now_s() + ns->o.step_bound);
        ncclComm_t child = __atomic_exchange_n(&rep->child, NULL, __ATOMIC_ACQ_REL);
        if (st == ncclSuccess && child)
            st = settle(child, now_s() + ns->o.step_bound);
        step_end(ns);
        if (st != ncclSuccess)
            printf("#ns why round=%d slot=%d ncclCommShrink started, then %s\n", round, ns->o.slot,
                   child ? result_name(st) : "no communicator");
        shrunk = all_agree(ns, round, victim, "shrunk", st == ncclSuccess && child);
        if (shrunk)
            *out = child;
        else if (child)
            ncclCommAbort(child); /* never used: the others may not have one */
    }
    if (shrunk) {
        rep->recovery = "shrink";
    } else {
        /* also where a survivor's verdict is missing: one late with it may
         * still come to the same rebuild, bounded like every exchange */
        if (rebuild(ns, round, victim, out) != 0) {
            rep->fail = "rebuild";
            return -1;
        }
        rep->recovery = "rebuild";
    }
    rep->recovery_s = now_s() - t0;
    return 0;
}

/* ncclCommRevoke, then until the communicator is quiescent (ncclCommGetAsyncError
 * leaves ncclInProgress: ncclSuccess, or the error NCCL keeps). */
static void revoke_parent(struct ns *ns, int round, ncclComm_t comm, struct report *rep)
{
    double t0 = now_s();
    step_begin(ns, round, "ncclCommRevoke");
    rep->revoke_rc = ns->revoke(comm, NCCL_REVOKE_DEFAULT);
    rep->after_revoke = settle(comm, now_s() + ns->o.step_bound);
    step_end(ns);
    rep->revoke_s = now_s() - t0;
}

/* The parent is released by abort, as every rank must once one aborted it
 * (and the abort ends a shrink that cannot complete, whose communicator
 * then goes the same way; nothing else may be called on a revoked
 * communicator but ncclCommAbort). The survivors' own communicator by
 * finalize and destroy, the clean path, only while it is healthy (its
 * state ncclSuccess and its all_reduce done); any other by abort. */
static void release(struct ns *ns, int round, ncclComm_t parent, ncclComm_t comm, int healthy, struct report *rep)
{
    double t0 = now_s();
    step_begin(ns, round, "ncclCommAbort(parent)");
    if (parent)
        ncclCommAbort(parent);
    ncclComm_t orphan = __atomic_exchange_n(&rep->child, NULL, __ATOMIC_ACQ_REL);
    if (orphan)
        ncclCommAbort(orphan);
    step_end(ns);
    double t1 = now_s();
    rep->abort_s = t1 - t0;
    if (comm) {
        ncclResult_t st = ncclInternalError;
        if (healthy && ncclCommGetAsyncError(comm, &st) == ncclSuccess && st == ncclSuccess) {
            step_begin(ns, round, "ncclCommFinalize+ncclCommDestroy");
            ncclResult_t r = ncclCommFinalize(comm);
            if (r == ncclInProgress)
                r = settle(comm, now_s() + ns->o.step_bound);
            if (r == ncclSuccess) {
                ncclCommDestroy(comm);
            } else {
                printf("#ns why round=%d slot=%d ncclCommFinalize: %s (aborted instead)\n", round, ns->o.slot,
                       result_name(r));
                ncclCommAbort(comm);
            }
        } else {
            step_begin(ns, round, "ncclCommAbort");
            ncclCommAbort(comm);
        }
        step_end(ns);
    }
    rep->destroy_s = now_s() - t1;
}

static void print_report(const struct ns *ns, const struct report *r)
{
    printf("#ns round=%d slot=%d role=survivor victim=%d ar4=%s error=%s error_s=%.3f revoke=%s revoke_s=%.3f "
           "after_revoke=%s shrink=%s recovery=%s recovery_s=%.3f ar3=%s recovered_s=%.3f abort_s=%.3f "
           "destroy_s=%.3f round_s=%.3f fail=%s\n",
           r->round, ns->o.slot, r->victim, r->ar4, r->error == ncclInProgress ? "none" : result_name(r->error),
           r->error_s, result_name(r->revoke_rc), r->revoke_s, result_name(r->after_revoke),
           r->shrink_rc == ncclSuccess || r->shrink_rc == ncclInProgress ? "started" : result_name(r->shrink_rc),
           r->recovery, r->recovery_s, r->ar3, r->recovered_s, r->abort_s, r->destroy_s, r->round_s, r->fail);
    fflush(stdout);
}

/* From the fault to the survivors' error: the killer's time of the kill. */
static int fault_time(struct ns *ns, int round, ncclResult_t err, double *t_fault)
{
    if (*t_fault)
        return 0;
    if (rv_read(ns, round, "fault", t_fault, sizeof(*t_fault)) != 0) {
        FAIL(ns, round, "fault", "%s before any kill", result_name(err));
        return -1;
    }
    return 0;
}

/* One round as a survivor. Whatever fails, the round goes through every
 * exchange with the others it can (so that no other slot waits for this one
 * past its bound), releases what it made and reports: the job goes on with
 * the next round. */
static void survivor_round(struct ns *ns, int round, int victim)
{
    /* static: NCCL may still store a shrink's communicator into rep.child
     * from its own thread while a failed round unwinds */
    static struct report rep;
    rep = (struct report){ .round = round, .victim = victim, .ar4 = "none", .ar3 = "none", .recovery = "none",
                           .error = ncclInProgress, .revoke_rc = ncclInProgress,
                           .after_revoke = ncclInProgress, .shrink_rc = ncclInProgress, .fail = "none" };
    double t0 = now_s(), t_err = 0, t_fault = 0;
    int all[MAX_RANKS], members[MAX_RANKS], n, healthy = 0;
    char why[512] = "";
    for (int s = 0; s < ns->o.nranks; s++)
        all[s] = s;
    members_of(ns, victim, members, &n);
    ncclComm_t parent = NULL, comm = NULL;
    if (comm_join(ns, round, "id", ns->o.nranks, ns->o.slot, &parent) != 0) {
        rep.fail = "join";
        goto out;
    }
    int bad = allreduce_checked(ns, round, parent, all, ns->o.nranks, 2 * round, why, sizeof(why));
    rep.ar4 = bad ? "bad" : "ok";
    if (bad)
        printf("#ns why round=%d slot=%d %s\n", round, ns->o.slot, why);

    /* also after a failed all_reduce: the state it left is the error */
    step_begin(ns, round, "all_reduce-until-the-error");
    rep.error = run_until_error(ns, round, parent, &t_err, &t_fault);
    step_end(ns);
    if (fault_time(ns, round, rep.error, &t_fault) == 0)
        rep.error_s = t_err - t_fault;
    revoke_parent(ns, round, parent, &rep);
    if (recover(ns, round, victim, parent, &comm, &rep) != 0 || !comm) {
        if (!strcmp(rep.fail, "none"))
            rep.fail = "recovery";
        goto out;
    }
    bad = allreduce_checked(ns, round, comm, members, n, 2 * round + 1, why, sizeof(why));
    rep.ar3 = bad ? "bad" : "ok";
    rep.recovered_s = now_s() - t_fault;
    healthy = !bad;
    if (bad)
        printf("#ns why round=%d slot=%d %s\n", round, ns->o.slot, why);
out:
    release(ns, round, parent, comm, healthy, &rep);
    rep.round_s = now_s() - t0;
    print_report(ns, &rep);
}

/* ---- the killed rank --------------------------------------------------- */

/* Starts this program as rank `slot` of the round's communicator, its
 * notice pipe on fd 3. */
static pid_t spawn_victim(struct ns *ns, int round, int notify_fd)
{
    char self[PATH_MAX], a_round[16], a_slot[16], a_n[16], a_bytes[32], a_dev[16], a_bound[32];
    ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (len <= 0)
        return -1;
    self[len] = '\0';
    snprintf(a_round, sizeof(a_round), "%d", round);
    snprintf(a_slot, sizeof(a_slot), "%d", ns->o.slot);
    snprintf(a_n, sizeof(a_n), "%d", ns->o.nranks);
    snprintf(a_bytes, sizeof(a_bytes), "%zu", ns->o.bytes);
    snprintf(a_dev, sizeof(a_dev), "%d", ns->o.device);
    snprintf(a_bound, sizeof(a_bound), "%g", ns->o.step_bound);
    char *argv[] = { self, "--victim", a_round, "--rank", a_slot, "--nranks", a_n, "--bytes", a_bytes,
                     "--device", a_dev, "--step-bound", a_bound, "--rendezvous", (char *)ns->o.rendezvous,
                     "--notify-fd", "3", NULL };
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, notify_fd, 3); /* dup2 clears close-on-exec */
    pid_t pid;
    fflush(NULL);
    int rc = posix_spawn(&pid, self, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    return rc == 0 ? pid : -1;
}

/* Until the victim's notice: 'k' (its fault all_reduce is queued) or 'e'
 * (its collectives failed first) in *note, 0; -1 when it ended or went
 * quiet first. */
static int wait_ready(struct ns *ns, int fd, char *note)
{
    struct pollfd p = { .fd = fd, .events = POLLIN };
    int ms = (int)(ns->o.step_bound * 1000);
    return poll(&p, 1, ms) == 1 && read(fd, note, 1) == 1 ? 0 : -1;
}

/* The victim's end as text: "sigkill" is the expected one. */
static void reap(struct ns *ns, pid_t pid, char *how, size_t len)
{
    double deadline = now_s() + ns->o.step_bound;
    int st;
    for (;;) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid)
            break;
        if (w < 0) {
            snprintf(how, len, "lost:%s", strerror(errno));
            return;
        }
        if (now_s() > deadline) {
            snprintf(how, len, "alive");
            return;
        }
        sleep_s(0.01);
    }
    if (WIFSIGNALED(st))
        snprintf(how, len, WTERMSIG(st) == SIGKILL ? "sigkill" : "signal:%d", WTERMSIG(st));
    else
        snprintf(how, len, "exit:%d", WEXITSTATUS(st));
}

/* The killer's round: start the victim, kill it once its fault all_reduce
 * is queued (or once it says its collectives failed first, or went quiet:
 * the kill still comes, so that the survivors see a dead rank either way),
 * reap it. Always reports; the round goes on. */
static void killer_round(struct ns *ns, int round)
{
    double t0 = now_s(), t_kill = 0;
    int fds[2];
    char how[64] = "not-started", note = 0;
    if (pipe2(fds, O_CLOEXEC) != 0) {
        FAIL(ns, round, "pipe2", "%s", strerror(errno));
        return;
    }
    pid_t pid = spawn_victim(ns, round, fds[1]);
    close(fds[1]);
    if (pid > 0)
        wait_ready(ns, fds[0], &note);
    close(fds[0]);
    if (pid > 0) {
        if (note == 'k')
            sleep_s(ns->o.kill_delay_ms / 1000.0);
        /* published before the kill, so that a survivor that sees the error
         * finds it; also when the victim failed first: the survivors then
         * report their side and the round ends */
        t_kill = now_s();
        rv_write(ns, round, "fault", &t_kill, sizeof(t_kill));
        kill(pid, SIGKILL);
        reap(ns, pid, how, sizeof(how));
    } else {
        /* no victim: the survivors still need a time to measure from */
        t_kill = now_s();
        rv_write(ns, round, "fault", &t_kill, sizeof(t_kill));
    }
    const char *ready = note == 'k' ? "yes" : note == 'e' ? "failed-first" : "no";
    printf("#ns round=%d slot=%d role=killer victim_pid=%d ready=%s killed=%s kill_at_s=%.3f round_s=%.3f\n", round,
           ns->o.slot, (int)pid, ready, how, t_kill ? t_kill - t0 : 0, now_s() - t0);
    fflush(stdout);
    if (note != 'k')
        FAIL(ns, round, "victim", "the victim process (pid %d) %s before its fault all_reduce: %s", (int)pid,
             note == 'e' ? "saw its collectives fail" : "ended or hung", how);
}

/* --victim: rank `slot` for one round, until the killer's SIGKILL. Whatever
 * fails here, the process says so on the notice pipe ('e' instead of 'k')
 * and waits for the kill like on the good path: the killer decides when it
 * ends, so that the survivors always lose a rank the same way. */
static int victim_main(struct ns *ns)
{
    int round = ns->o.victim_round, all[MAX_RANKS];
    char why[512] = "";
    for (int s = 0; s < ns->o.nranks; s++)
        all[s] = s;
    ncclComm_t comm = NULL;
    ncclResult_t r = ncclInternalError;
    int bad = 1;
    if (comm_join(ns, round, "id", ns->o.nranks, ns->o.slot, &comm) == 0) {
        bad = allreduce_checked(ns, round, comm, all, ns->o.nranks, 2 * round, why, sizeof(why));
        if (!bad)
            r = queue_fault_allreduce(ns, comm);
    } else {
        snprintf(why, sizeof(why), "no communicator");
    }
    printf("#ns round=%d slot=%d role=victim pid=%d ar4=%s%s%s\n", round, ns->o.slot, (int)getpid(),
           bad ? "bad" : "ok", bad ? " why=" : "", why);
    fflush(stdout);
    int ok = !bad && (r == ncclSuccess || r == ncclInProgress);
    if (write(ns->o.notify_fd, ok ? "k" : "e", 1) != 1)
        return 1;
    /* all_reduces with the others until the SIGKILL comes; after an error
     * only the wait for it */
    double deadline = now_s() + ns->o.step_bound;
    while (ok && now_s() < deadline) {
        r = wait_coll(comm, ns->stream, deadline);
        if (r == ncclSuccess)
            r = queue_fault_allreduce(ns, comm);
        ok = r == ncclSuccess || r == ncclInProgress;
    }
    while (now_s() < deadline)
        sleep_s(0.05);
    FAIL(ns, round, "victim", "no SIGKILL after %.0f s (%s)", ns->o.step_bound, result_name(r));
    return 1;
}

/* ---- the job ------------------------------------------------------------ */

/* Every slot at the end of the round, before anyone joins the next one: a
 * slot whose round went wrong early (the killer's always ends first) would
 * otherwise wait for the next unique id with its own bound while the others
 * are still inside their bounded steps. */
static int round_barrier(struct ns *ns, int round)
{
    char what[32];
    int one = 1;
    snprintf(what, sizeof(what), "end%d", ns->o.slot);
    if (rv_write(ns, round, what, &one, sizeof(one)) != 0)
        return -1;
    double deadline = now_s() + ns->o.round_bound;
    for (int s = 0; s < ns->o.nranks; s++) {
        snprintf(what, sizeof(what), "end%d", s);
        while (rv_try_read(ns, round, what, &one, sizeof(one)) != 0) {
            if (now_s() > deadline) {
                FAIL(ns, round, "round-end", "slot %d not at the end of the round after %.0f s", s,
                     ns->o.round_bound);
                return -1;
            }
            sleep_s(0.005);
        }
    }
    return 0;
}

static int slot_main(struct ns *ns)
{
    int warm = 0;
    print_res(ns, "start", -1);
    for (int r = 0; r < ns->o.rounds; r++) {
        int victim = r % ns->o.nranks;
        if (victim == ns->o.slot)
            killer_round(ns, r);
        else
            survivor_round(ns, r, victim);
        if (round_barrier(ns, r) != 0)
            return 1;
        print_res(ns, "round", r);
        if (!warm && victim != ns->o.slot) {
            warm = 1;
            print_res(ns, "warm", r);
        }
    }
    print_res(ns, "end", ns->o.rounds - 1);
    printf("#ns done slot=%d rounds=%d\n", ns->o.slot, ns->o.rounds);
    return 0;
}

static int setup_cuda(struct ns *ns)
{
    ns->count = ns->o.bytes / sizeof(float);
    size_t bytes = ns->count * sizeof(float);
    CUDA_OK(ns, -1, cudaSetDevice(ns->o.device));
    CUDA_OK(ns, -1, cudaStreamCreateWithFlags(&ns->stream, cudaStreamNonBlocking));
    CUDA_OK(ns, -1, cudaMalloc((void **)&ns->dbuf, bytes));
    CUDA_OK(ns, -1, cudaMalloc((void **)&ns->dfault, bytes));
    CUDA_OK(ns, -1, cudaMallocHost((void **)&ns->hbuf, bytes));
    /* zeros stay zeros however often the interrupted all_reduce runs */
    CUDA_OK(ns, -1, cudaMemset(ns->dfault, 0, bytes));
    CUDA_OK(ns, -1, cudaDeviceSynchronize());
    return 0;
}

static void usage(const char *argv0)
{
    printf("usage: %s --rank SLOT --nranks N --rendezvous PREFIX [--rounds R] [--bytes B] [--device D]\n"
           "          [--error-bound S] [--step-bound S] [--round-bound S] [--kill-delay-ms MS]\n"
           "       %s --probe   (the NCCL version and whether it has ncclCommRevoke; no GPU needed)\n"
           "Slots 0..N-1 of one job, each its own process; slot r %% N SIGKILLs a fresh process of\n"
           "this program that is its rank in round r, the others shrink the communicator past it.\n",
           argv0, argv0);
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
    static const struct option lo[] = {
        { "rank", required_argument, 0, 'r' },          { "nranks", required_argument, 0, 'n' },
        { "rounds", required_argument, 0, 'R' },        { "bytes", required_argument, 0, 'b' },
        { "device", required_argument, 0, 'd' },        { "rendezvous", required_argument, 0, 'f' },
        { "error-bound", required_argument, 0, 'E' },   { "step-bound", required_argument, 0, 'S' },
        { "kill-delay-ms", required_argument, 0, 'K' }, { "victim", required_argument, 0, 'V' },
        { "notify-fd", required_argument, 0, 'N' },     { "probe", no_argument, 0, 'p' },
        { "round-bound", required_argument, 0, 'B' },
        { "help", no_argument, 0, 'h' },                { 0, 0, 0, 0 },
    };
    int ch, li;
    long long v = 0;
    while (li = -1, (ch = getopt_long(argc, argv, "h", lo, &li)) != -1) {
        int bad = 0;
        switch (ch) {
        case 'r': bad = parse_int(optarg, 0, MAX_RANKS - 1, &v); o->slot = (int)v; break;
        case 'n': bad = parse_int(optarg, 3, MAX_RANKS, &v); o->nranks = (int)v; break;
        case 'R': bad = parse_int(optarg, 1, 100000, &v); o->rounds = (int)v; break;
        case 'b': bad = parse_size(optarg, 4, 1ll << 32, &v); o->bytes = (size_t)v; break;
        case 'd': bad = parse_int(optarg, 0, 1 << 10, &v); o->device = (int)v; break;
        case 'f': o->rendezvous = optarg; break;
        case 'E': bad = parse_real(optarg, 0.1, &o->error_bound); break;
        case 'S': bad = parse_real(optarg, 1, &o->step_bound); break;
        case 'B': bad = parse_real(optarg, 1, &o->round_bound); break;
        case 'K': bad = parse_int(optarg, 0, 60000, &v); o->kill_delay_ms = (int)v; break;
        case 'V': bad = parse_int(optarg, 0, 100000, &v); o->victim_round = (int)v; break;
        case 'N': bad = parse_int(optarg, 0, 1 << 20, &v); o->notify_fd = (int)v; break;
        case 'p': o->probe = 1; break;
        default: usage(argv[0]); return ch == 'h' ? 0 : 2;
        }
        if (bad) {
            fprintf(stderr, "bad value '%s' for --%s\n", optarg, li >= 0 ? lo[li].name : "?");
            return 2;
        }
    }
    if (o->probe)
        return -1;
    if (o->slot < 0 || o->slot >= o->nranks || !o->rendezvous || (o->victim_round >= 0 && o->notify_fd < 0)) {
        fprintf(stderr, "bad arguments (see --help)\n");
        return 2;
    }
    return -1;
}

int main(int argc, char **argv)
{
    static struct ns ns = { .o = { .slot = -1, .nranks = 4, .rounds = 20, .bytes = 4u << 20, .error_bound = 10,
                                   .step_bound = 60, .round_bound = 300, .kill_delay_ms = 50, .victim_round = -1, .notify_fd = -1 },
                            .wd = { .mu = PTHREAD_MUTEX_INITIALIZER } };
    setvbuf(stdout, NULL, _IOLBF, 0); /* NCCL's log shares the file */
    int rc = parse_opts(argc, argv, &ns.o);
    if (rc >= 0)
        return rc;
    /* resolved at run time: the program also loads with an NCCL that lacks it */
    ns.revoke = (revoke_fn)dlsym(RTLD_DEFAULT, "ncclCommRevoke");
    int version = 0;
    ncclGetVersion(&version);
    if (ns.o.probe) {
        printf("#ns probe nccl=%d revoke=%s\n", version, ns.revoke ? "yes" : "no");
        return 0;
    }
    int ngpu = 0;
    if (cudaGetDeviceCount(&ngpu) != cudaSuccess || ngpu <= ns.o.device) {
        printf("#ns skip slot=%d why=no CUDA device %d on this machine\n", ns.o.slot, ns.o.device);
        return 0;
    }
    if (!ns.revoke) {
        printf("#ns skip slot=%d why=NCCL %d has no ncclCommRevoke (2.28.7 and later)\n", ns.o.slot, version);
        return 0;
    }
    pthread_t wd;
    if (setup_cuda(&ns) != 0 || pthread_create(&wd, NULL, watchdog_main, &ns) != 0)
        return 1;
    if (ns.o.victim_round >= 0) {
        /* back here only when the kill never came: NCCL is still busy */
        rc = victim_main(&ns);
        fflush(NULL);
        _exit(rc);
    }
    printf("#ns start slot=%d pid=%d nccl=%d rounds=%d nranks=%d bytes=%zu\n", ns.o.slot, (int)getpid(), version,
           ns.o.rounds, ns.o.nranks, ns.o.bytes);
    rc = slot_main(&ns);
    if (rc != 0) {
        /* NCCL may still hold a thread inside a failed step: no exit handlers */
        fflush(NULL);
        _exit(rc);
    }
    /* exit runs NCCL's and CUDA's teardown: bounded like every step */
    step_begin(&ns, ns.o.rounds, "exit");
    return 0;
}
