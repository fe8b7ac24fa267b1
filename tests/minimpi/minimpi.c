/* tests/minimpi/minimpi.c: libmpi.so, the MPI of mpi.h (read its contract)
 * over the file that minimpirun shares between the ranks of a job
 * (minimpi_shm.h). Every collective is a sequence of rounds on the
 * communicator's channel: each rank writes at most one slot of data, a
 * barrier, each rank reads what it needs, a barrier (after which the slots
 * may be written again). */
#include "mpi.h"
#include "minimpi_shm.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define WAIT_TIMEOUT_DEFAULT 600.0
#define SPINS 100        /* polls before the first yield */
#define YIELDS 1000      /* polls with sched_yield before sleeping */
#define NAP_NS 100000    /* then a sleep of 0.1 ms between polls */

struct comm {
    bool used;
    int rank, size;
    uint32_t chan;
};

static struct {
    int state; /* 0: before MPI_Init, 1: initialised, 2: finalized */
    int rank, size;
    struct minimpi_shm *shm;
    size_t bytes;
    char *data;
    pid_t launcher; /* 0 for a singleton */
    bool errors_return;
    double wait_timeout;
    int broken; /* a wait gave up: the ranks are out of step */
    struct comm comms[MINIMPI_MAX_COMMS];
} g;

static bool errors_return(void)
{
    const char *e = getenv("MINIMPI_ERRORS");
    return e && strcmp(e, "return") == 0;
}

/* Marks the job aborted, unless something did already. */
static void abort_job(void)
{
    if (!g.shm)
        return;
    uint64_t none = 0;
    __atomic_compare_exchange_n(&g.shm->abort, &none,
                                minimpi_abort_word(MINIMPI_ABORT_GAVE_UP, g.rank, 1), false,
                                __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

/* A call failed: says why; with errors fatal (the default) aborts the job
 * and ends the process, otherwise returns code. */
__attribute__((format(printf, 3, 4)))
static int error(int code, const char *fn, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (g.state == 0)
        fprintf(stderr, "minimpi: %s: %s\n", fn, msg);
    else
        fprintf(stderr, "minimpi: rank %d: %s: %s\n", g.rank, fn, msg);
    if (g.state == 0 ? errors_return() : g.errors_return)
        return code;
    abort_job();
    fflush(stdout);
    _exit(1);
}

static void pause_cpu(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const char *abort_text(uint64_t w, char *buf, size_t len)
{
    int rank = minimpi_abort_rank(w), st = minimpi_abort_status(w);
    switch (minimpi_abort_reason(w)) {
    case MINIMPI_ABORT_EXIT:
        snprintf(buf, len, "rank %d exited with status %d", rank, st);
        break;
    case MINIMPI_ABORT_SIGNALED:
        snprintf(buf, len, "rank %d was killed by signal %d (%s)", rank, st, strsignal(st));
        break;
    case MINIMPI_ABORT_TIMEOUT:
        snprintf(buf, len, "minimpirun's --timeout passed");
        break;
    case MINIMPI_ABORT_INTERRUPTED:
        snprintf(buf, len, "minimpirun got signal %d (%s)", st, strsignal(st));
        break;
    case MINIMPI_ABORT_GAVE_UP:
        snprintf(buf, len, "rank %d gave up", rank);
        break;
    default:
        snprintf(buf, len, "reason %d", minimpi_abort_reason(w));
    }
    return buf;
}

/* A wait failed: the channels are out of step for good, so the job ends. */
__attribute__((format(printf, 2, 3)))
static int wait_failed(const char *fn, const char *fmt, ...)
{
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    g.broken = MPI_ERR_OTHER;
    abort_job();
    return error(MPI_ERR_OTHER, fn, "giving up: %s", msg);
}

/* Waits until *gen is no longer seen: spins briefly, then yields, then
 * naps, and gives up when the job is aborted, the launcher is gone or the
 * wait timeout passes. */
static int wait_gen(const uint32_t *gen, uint32_t seen, const char *fn)
{
    double start = 0;
    for (unsigned long i = 0;; i++) {
        if (__atomic_load_n(gen, __ATOMIC_ACQUIRE) != seen)
            return MPI_SUCCESS;
        if (i < SPINS) {
            pause_cpu();
            continue;
        }
        uint64_t w = __atomic_load_n(&g.shm->abort, __ATOMIC_ACQUIRE);
        if (w) {
            char why[128];
            return wait_failed(fn, "the job was aborted (%s)", abort_text(w, why, sizeof why));
        }
        double t = now_s();
        if (i == SPINS)
            start = t;
        else if (g.wait_timeout > 0 && t - start > g.wait_timeout)
            return wait_failed(fn, "the other ranks did not arrive within %g s (MINIMPI_WAIT_TIMEOUT)",
                               g.wait_timeout);
        if (g.launcher && i % 1024 == 0 && kill(g.launcher, 0) != 0 && errno == ESRCH)
            return wait_failed(fn, "minimpirun (pid %d) is gone", (int)g.launcher);
        if (i < SPINS + YIELDS)
            sched_yield();
        else
            nanosleep(&(struct timespec){ .tv_sec = 0, .tv_nsec = NAP_NS }, NULL);
    }
}

/* Sense-reversing barrier of the channel: the last rank to arrive resets
 * the count and starts the next generation. */
static int barrier(const struct comm *c, const char *fn)
{
    struct minimpi_channel *ch = &g.shm->chan[c->chan];
    uint32_t gen = __atomic_load_n(&ch->gen, __ATOMIC_ACQUIRE);
    if (__atomic_add_fetch(&ch->arrived, 1, __ATOMIC_ACQ_REL) == (uint32_t)c->size) {
        __atomic_store_n(&ch->arrived, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&ch->gen, gen + 1, __ATOMIC_RELEASE);
        return MPI_SUCCESS;
    }
    return wait_gen(&ch->gen, gen, fn);
}

static char *slot(const struct comm *c, int rank)
{
    return g.data + ((size_t)c->chan * (size_t)g.size + (size_t)rank) * MINIMPI_SLOT_BYTES;
}

static size_t min_size(size_t a, size_t b) { return a < b ? a : b; }

/* The checks every call but MPI_Init makes; collectives also refuse to
 * run once a wait failed. */
static int enter(const char *fn, MPI_Comm comm, struct comm **c, bool collective)
{
    if (g.state != 1)
        return error(MPI_ERR_OTHER, fn, "%s", g.state == 0 ? "MPI_Init was not called" : "called after MPI_Finalize");
    if (comm <= MPI_COMM_NULL || comm >= MINIMPI_MAX_COMMS || !g.comms[comm].used)
        return error(MPI_ERR_COMM, fn, "%s communicator (%d)", comm == MPI_COMM_NULL ? "the null" : "an unknown", comm);
    if (collective && g.broken)
        return error(g.broken, fn, "an earlier call gave up; the ranks are out of step");
    *c = &g.comms[comm];
    return MPI_SUCCESS;
}

static int type_size(MPI_Datatype t)
{
    switch (t) {
    case MPI_BYTE: return 1;
    case MPI_INT: return (int)sizeof(int);
    case MPI_LONG: return (int)sizeof(long);
    case MPI_LONG_LONG: return (int)sizeof(long long);
    case MPI_INT64_T: return (int)sizeof(int64_t);
    case MPI_DOUBLE: return (int)sizeof(double);
    default: return -1;
    }
}

/* count elements of type t, in bytes, into *bytes; or the error. */
static int payload(const char *fn, const char *what, int count, MPI_Datatype t, size_t *bytes)
{
    int sz = type_size(t);
    if (sz < 0)
        return error(MPI_ERR_TYPE, fn, "unknown datatype %d for the %s", t, what);
    if (count < 0)
        return error(MPI_ERR_COUNT, fn, "negative count %d for the %s", count, what);
    *bytes = (size_t)count * (size_t)sz;
    return MPI_SUCCESS;
}

/* Every rank's `bytes` from `mine` (NULL: they are in place, at
 * all + rank * bytes) into all + r * bytes, at every rank (root < 0) or at
 * the root only. */
static int gather_bytes(const struct comm *c, const char *mine, char *all, size_t bytes, int root,
                        const char *fn)
{
    for (size_t off = 0; off < bytes; off += MINIMPI_SLOT_BYTES) {
        size_t len = min_size(MINIMPI_SLOT_BYTES, bytes - off);
        memcpy(slot(c, c->rank), mine ? mine + off : all + (size_t)c->rank * bytes + off, len);
        int rc = barrier(c, fn);
        if (rc != MPI_SUCCESS)
            return rc;
        if (root < 0 || root == c->rank)
            for (int r = 0; r < c->size; r++)
                if (r != c->rank || mine)
                    memcpy(all + (size_t)r * bytes + off, slot(c, r), len);
        rc = barrier(c, fn);
        if (rc != MPI_SUCCESS)
            return rc;
    }
    return MPI_SUCCESS;
}

int MPI_Init(int *argc, char ***argv)
{
    static const char fn[] = "MPI_Init";
    (void)argc;
    (void)argv;
    if (g.state != 0)
        return error(MPI_ERR_OTHER, fn, "MPI_Init was called before");
    g.errors_return = errors_return();
    g.wait_timeout = WAIT_TIMEOUT_DEFAULT;
    const char *wt = getenv("MINIMPI_WAIT_TIMEOUT");
    if (wt && *wt) {
        char *end;
        double v = strtod(wt, &end);
        if (*end || !(v >= 0))
            return error(MPI_ERR_ARG, fn, "MINIMPI_WAIT_TIMEOUT=%s is not a number of seconds", wt);
        g.wait_timeout = v;
    }

    const char *path = getenv("MINIMPI_SHM");
    if (!path) {
        /* a singleton: the same channels, in memory of its own */
        g.rank = 0;
        g.size = 1;
        g.bytes = minimpi_file_bytes(1);
        void *p = mmap(NULL, g.bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return error(MPI_ERR_OTHER, fn, "mmap of %zu bytes: %s", g.bytes, strerror(errno));
        g.shm = p;
        g.shm->magic = MINIMPI_MAGIC;
        g.shm->size = 1;
        g.shm->next_chan = 1;
    } else {
        const char *rs = getenv("MINIMPI_RANK"), *ss = getenv("MINIMPI_SIZE");
        char *e1 = NULL, *e2 = NULL;
        long rank = rs ? strtol(rs, &e1, 10) : -1, size = ss ? strtol(ss, &e2, 10) : -1;
        if (!rs || !ss || *e1 || *e2 || size < 1 || size > MINIMPI_MAX_RANKS || rank < 0 || rank >= size)
            return error(MPI_ERR_OTHER, fn,
                         "MINIMPI_SHM is set but MINIMPI_RANK=%s MINIMPI_SIZE=%s are not a rank of a job "
                         "(start the program with minimpirun, or without these variables)",
                         rs ? rs : "(unset)", ss ? ss : "(unset)");
        int fd = open(path, O_RDWR | O_CLOEXEC);
        if (fd < 0)
            return error(MPI_ERR_OTHER, fn, "cannot open the job's file %s (MINIMPI_SHM): %s", path, strerror(errno));
        struct stat st;
        size_t want = minimpi_file_bytes((uint32_t)size);
        if (fstat(fd, &st) != 0 || (size_t)st.st_size < want) {
            close(fd);
            return error(MPI_ERR_OTHER, fn, "the job's file %s is not one of %ld ranks", path, size);
        }
        void *p = mmap(NULL, want, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        int err = errno;
        close(fd);
        if (p == MAP_FAILED)
            return error(MPI_ERR_OTHER, fn, "mmap of %s: %s", path, strerror(err));
        struct minimpi_shm *shm = p;
        if (shm->magic != MINIMPI_MAGIC || shm->size != (uint32_t)size) {
            munmap(p, want);
            return error(MPI_ERR_OTHER, fn, "%s is not the file of a minimpi job of %ld ranks", path, size);
        }
        g.shm = shm;
        g.bytes = want;
        g.rank = (int)rank;
        g.size = (int)size;
        g.launcher = shm->launcher_pid;
    }
    g.data = (char *)g.shm + minimpi_data_offset();
    g.comms[MPI_COMM_WORLD] = (struct comm){ .used = true, .rank = g.rank, .size = g.size, .chan = 0 };
    g.state = 1;
    return MPI_SUCCESS;
}

int MPI_Finalize(void)
{
    struct comm *c;
    int rc = enter("MPI_Finalize", MPI_COMM_WORLD, &c, true);
    if (rc == MPI_SUCCESS)
        rc = barrier(c, "MPI_Finalize");
    if (rc != MPI_SUCCESS)
        return rc;
    munmap(g.shm, g.bytes);
    g.shm = NULL;
    g.data = NULL;
    memset(g.comms, 0, sizeof g.comms);
    g.state = 2;
    return MPI_SUCCESS;
}

int MPI_Comm_size(MPI_Comm comm, int *size)
{
    struct comm *c;
    int rc = enter("MPI_Comm_size", comm, &c, false);
    if (rc != MPI_SUCCESS)
        return rc;
    if (!size)
        return error(MPI_ERR_ARG, "MPI_Comm_size", "size is NULL");
    *size = c->size;
    return MPI_SUCCESS;
}

int MPI_Comm_rank(MPI_Comm comm, int *rank)
{
    struct comm *c;
    int rc = enter("MPI_Comm_rank", comm, &c, false);
    if (rc != MPI_SUCCESS)
        return rc;
    if (!rank)
        return error(MPI_ERR_ARG, "MPI_Comm_rank", "rank is NULL");
    *rank = c->rank;
    return MPI_SUCCESS;
}

int MPI_Barrier(MPI_Comm comm)
{
    struct comm *c;
    int rc = enter("MPI_Barrier", comm, &c, true);
    return rc != MPI_SUCCESS ? rc : barrier(c, "MPI_Barrier");
}

int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm)
{
    static const char fn[] = "MPI_Bcast";
    struct comm *c;
    size_t bytes;
    int rc = enter(fn, comm, &c, true);
    if (rc == MPI_SUCCESS)
        rc = payload(fn, "buffer", count, datatype, &bytes);
    if (rc != MPI_SUCCESS)
        return rc;
    if (root < 0 || root >= c->size)
        return error(MPI_ERR_ROOT, fn, "root %d is not a rank of the %d", root, c->size);
    if (!buffer && bytes)
        return error(MPI_ERR_BUFFER, fn, "buffer is NULL");
    /* the slots of all ranks make one area for the root's data */
    size_t chunk = (size_t)c->size * MINIMPI_SLOT_BYTES;
    char *area = slot(c, 0);
    for (size_t off = 0; off < bytes; off += chunk) {
        size_t len = min_size(chunk, bytes - off);
        if (c->rank == root)
            memcpy(area, (char *)buffer + off, len);
        if ((rc = barrier(c, fn)) != MPI_SUCCESS)
            return rc;
        if (c->rank != root)
            memcpy((char *)buffer + off, area, len);
        if ((rc = barrier(c, fn)) != MPI_SUCCESS)
            return rc;
    }
    return MPI_SUCCESS;
}

int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
               void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    static const char fn[] = "MPI_Gather";
    struct comm *c;
    size_t sbytes = 0, rbytes = 0;
    int rc = enter(fn, comm, &c, true);
    if (rc != MPI_SUCCESS)
        return rc;
    if (root < 0 || root >= c->size)
        return error(MPI_ERR_ROOT, fn, "root %d is not a rank of the %d", root, c->size);
    bool in_place = sendbuf == MPI_IN_PLACE;
    if (in_place && c->rank != root)
        return error(MPI_ERR_ARG, fn, "MPI_IN_PLACE is the root's only");
    if (!in_place && (rc = payload(fn, "send buffer", sendcount, sendtype, &sbytes)) != MPI_SUCCESS)
        return rc;
    if (c->rank == root) {
        if ((rc = payload(fn, "receive buffer", recvcount, recvtype, &rbytes)) != MPI_SUCCESS)
            return rc;
        if (!in_place && sbytes != rbytes)
            return error(MPI_ERR_COUNT, fn, "the root sends %zu bytes but receives %zu from each rank", sbytes, rbytes);
        if (!recvbuf && rbytes)
            return error(MPI_ERR_BUFFER, fn, "recvbuf is NULL");
    } else {
        rbytes = sbytes;
    }
    if (!in_place && !sendbuf && sbytes)
        return error(MPI_ERR_BUFFER, fn, "sendbuf is NULL");
    return gather_bytes(c, in_place ? NULL : sendbuf, recvbuf, rbytes, root, fn);
}

int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                  void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    static const char fn[] = "MPI_Allgather";
    struct comm *c;
    size_t sbytes = 0, rbytes = 0;
    int rc = enter(fn, comm, &c, true);
    if (rc == MPI_SUCCESS)
        rc = payload(fn, "receive buffer", recvcount, recvtype, &rbytes);
    if (rc != MPI_SUCCESS)
        return rc;
    bool in_place = sendbuf == MPI_IN_PLACE;
    if (!in_place) {
        if ((rc = payload(fn, "send buffer", sendcount, sendtype, &sbytes)) != MPI_SUCCESS)
            return rc;
        if (sbytes != rbytes)
            return error(MPI_ERR_COUNT, fn, "sends %zu bytes but receives %zu from each rank", sbytes, rbytes);
        if (!sendbuf && sbytes)
            return error(MPI_ERR_BUFFER, fn, "sendbuf is NULL");
    }
    if (!recvbuf && rbytes)
        return error(MPI_ERR_BUFFER, fn, "recvbuf is NULL");
    return gather_bytes(c, in_place ? NULL : sendbuf, recvbuf, rbytes, -1, fn);
}

/* out[i] = the op of element i of the n ranks' slots (base, base + one
 * slot, ...), combined in rank order so that every rank gets the same. */
#define REDUCE(T, ADD)                                                            \
    do {                                                                          \
        for (size_t i = 0; i < count; i++) {                                      \
            T acc, v;                                                             \
            memcpy(&acc, base + i * sizeof(T), sizeof(T));                        \
            for (int r = 1; r < nranks; r++) {                                    \
                memcpy(&v, base + (size_t)r * MINIMPI_SLOT_BYTES + i * sizeof(T), \
                       sizeof(T));                                                \
                if (op == MPI_SUM)                                                \
                    acc = ADD(acc, v);                                            \
                else if (op == MPI_MIN ? v < acc : v > acc)                       \
                    acc = v;                                                      \
            }                                                                     \
            memcpy(out + i * sizeof(T), &acc, sizeof(T));                         \
        }                                                                         \
    } while (0)
/* integer sums wrap around (in unsigned arithmetic, so without overflow) */
#define ADD_INT(a, b) ((int)((unsigned)(a) + (unsigned)(b)))
#define ADD_LONG(a, b) ((long)((unsigned long)(a) + (unsigned long)(b)))
#define ADD_LLONG(a, b) ((long long)((unsigned long long)(a) + (unsigned long long)(b)))
#define ADD_INT64(a, b) ((int64_t)((uint64_t)(a) + (uint64_t)(b)))
#define ADD_FP(a, b) ((a) + (b))

static void reduce(MPI_Datatype type, MPI_Op op, char *out, const char *base, int nranks, size_t count)
{
    switch (type) {
    case MPI_INT: REDUCE(int, ADD_INT); break;
    case MPI_LONG: REDUCE(long, ADD_LONG); break;
    case MPI_LONG_LONG: REDUCE(long long, ADD_LLONG); break;
    case MPI_INT64_T: REDUCE(int64_t, ADD_INT64); break;
    case MPI_DOUBLE: REDUCE(double, ADD_FP); break;
    default: break;
    }
}

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                  MPI_Op op, MPI_Comm comm)
{
    static const char fn[] = "MPI_Allreduce";
    struct comm *c;
    size_t bytes;
    int rc = enter(fn, comm, &c, true);
    if (rc == MPI_SUCCESS)
        rc = payload(fn, "buffer", count, datatype, &bytes);
    if (rc != MPI_SUCCESS)
        return rc;
    if (op != MPI_SUM && op != MPI_MIN && op != MPI_MAX)
        return error(MPI_ERR_OP, fn, "unknown operation %d", op);
    if (datatype == MPI_BYTE)
        return error(MPI_ERR_OP, fn, "no reduction is defined on MPI_BYTE");
    if ((!recvbuf || !sendbuf) && bytes)
        return error(MPI_ERR_BUFFER, fn, "%s is NULL", recvbuf ? "sendbuf" : "recvbuf");
    const char *src = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
    size_t esz = (size_t)type_size(datatype), per = MINIMPI_SLOT_BYTES / esz;
    for (size_t i = 0; i < (size_t)count; i += per) {
        size_t n = min_size(per, (size_t)count - i);
        memcpy(slot(c, c->rank), src + i * esz, n * esz);
        if ((rc = barrier(c, fn)) != MPI_SUCCESS)
            return rc;
        reduce(datatype, op, (char *)recvbuf + i * esz, slot(c, 0), c->size, n);
        if ((rc = barrier(c, fn)) != MPI_SUCCESS)
            return rc;
    }
    return MPI_SUCCESS;
}

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm)
{
    static const char fn[] = "MPI_Comm_split";
    static int pairs[MINIMPI_MAX_RANKS][2]; /* every rank's (color, key) */
    struct comm *c;
    int rc = enter(fn, comm, &c, true);
    if (rc != MPI_SUCCESS)
        return rc;
    if (!newcomm)
        return error(MPI_ERR_ARG, fn, "newcomm is NULL");
    if (color < 0 && color != MPI_UNDEFINED)
        return error(MPI_ERR_ARG, fn, "color %d is negative (and not MPI_UNDEFINED)", color);

    /* round 1: every rank's (color, key) to every rank */
    memcpy(slot(c, c->rank), (int[2]){ color, key }, sizeof pairs[0]);
    if ((rc = barrier(c, fn)) != MPI_SUCCESS)
        return rc;
    for (int r = 0; r < c->size; r++)
        memcpy(pairs[r], slot(c, r), sizeof pairs[r]);
    /* the group of a colour is the number of smaller colours; the parent's
     * rank 0 takes one channel per colour for all groups */
    struct minimpi_channel *ch = &g.shm->chan[c->chan];
    if (c->rank == 0) {
        uint32_t groups = 0;
        for (int r = 0; r < c->size; r++) {
            int first = pairs[r][0] != MPI_UNDEFINED;
            for (int q = 0; q < r && first; q++)
                first = pairs[q][0] != pairs[r][0];
            groups += (uint32_t)first;
        }
        uint32_t base = __atomic_fetch_add(&g.shm->next_chan, groups, __ATOMIC_RELAXED);
        int64_t aux = (uint64_t)base + groups <= MINIMPI_CHANNELS ? (int64_t)base : -1;
        __atomic_store_n(&ch->aux, aux, __ATOMIC_RELAXED);
    }
    /* round 2: the first channel to every rank (rank 0 writes it again
     * only after the first barrier of a later split on this communicator,
     * which every rank reaches after reading it here) */
    if ((rc = barrier(c, fn)) != MPI_SUCCESS)
        return rc;
    int64_t base = __atomic_load_n(&ch->aux, __ATOMIC_RELAXED);

    if (color == MPI_UNDEFINED) {
        *newcomm = MPI_COMM_NULL;
        return MPI_SUCCESS;
    }
    if (base < 0)
        return error(MPI_ERR_INTERN, fn, "out of communicators (a job has %d)", MINIMPI_MAX_COMMS);
    int group = 0, rank = 0, size = 0;
    for (int r = 0; r < c->size; r++) {
        int col = pairs[r][0];
        if (col == MPI_UNDEFINED)
            continue;
        if (col < color) {
            int first = 1;
            for (int q = 0; q < r && first; q++)
                first = pairs[q][0] != col;
            group += first;
        }
        if (col == color) {
            size++;
            if (pairs[r][1] < key || (pairs[r][1] == key && r < c->rank))
                rank++;
        }
    }
    int h = MPI_COMM_WORLD + 1;
    while (h < MINIMPI_MAX_COMMS && g.comms[h].used)
        h++;
    if (h == MINIMPI_MAX_COMMS)
        return error(MPI_ERR_INTERN, fn, "out of communicators (a process has %d)", MINIMPI_MAX_COMMS);
    g.comms[h] = (struct comm){ .used = true, .rank = rank, .size = size, .chan = (uint32_t)(base + group) };
    *newcomm = h;
    return MPI_SUCCESS;
}

int MPI_Comm_free(MPI_Comm *comm)
{
    static const char fn[] = "MPI_Comm_free";
    struct comm *c;
    if (!comm)
        return error(MPI_ERR_ARG, fn, "comm is NULL");
    int rc = enter(fn, *comm, &c, false);
    if (rc != MPI_SUCCESS)
        return rc;
    if (*comm == MPI_COMM_WORLD)
        return error(MPI_ERR_COMM, fn, "MPI_COMM_WORLD cannot be freed");
    c->used = false;
    *comm = MPI_COMM_NULL;
    return MPI_SUCCESS;
}
