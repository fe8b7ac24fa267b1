/* tests/minimpi/mpi_check.c: an MPI program that checks minimpi's results,
 * run by test_minimpi.sh with and without minimpirun. A failed check prints
 * "mpi_check: rank R: file:line: ..." and exits 1.
 *   mpi_check [collectives]   every collective of mpi.h, checked
 *   mpi_check exit RANK CODE  RANK exits CODE after two barriers, the
 *                             others wait in a third one
 *   mpi_check kill RANK       the same, but RANK kills itself with SIGKILL
 *   mpi_check hang RANK       RANK sleeps for ever, the others wait in a barrier
 *   mpi_check env VAR...      prints "RANK VAR=value" for each VAR, and the
 *                             job's file as "RANK MINIMPI_SHM=..."
 *   mpi_check errors          bad arguments give MPI_ERR_* (MINIMPI_ERRORS=return)
 * With MPI_CHECK_PIDDIR set each rank first writes its pid into
 * $MPI_CHECK_PIDDIR/rank.RANK. */
#include "mpi.h"

#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank = -1, size = -1;

__attribute__((format(printf, 2, 3), noreturn))
static void fail_at(int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "mpi_check: rank %d: %s:%d: ", rank, __FILE__, line);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}
#define CHECK(cond) do { if (!(cond)) fail_at(__LINE__, "expected %s", #cond); } while (0)
#define CHECK_EQ(expected, actual)                                                        \
    do {                                                                                  \
        long long e_ = (long long)(expected), a_ = (long long)(actual);                   \
        if (e_ != a_)                                                                     \
            fail_at(__LINE__, "%s: expected %lld, got %lld", #actual, e_, a_);            \
    } while (0)
#define MPI_OK(call) CHECK_EQ(MPI_SUCCESS, call)

/* Bytes larger than one slot (64 KiB), so that they go in chunks. */
#define BIG (200 * 1024 + 3)

static unsigned char pattern(int who, size_t i) { return (unsigned char)(who * 131 + i * 7 + (i >> 9)); }

static void check_allgather(void)
{
    /* three ints per rank */
    int mine[3], *all = calloc((size_t)size * 3, sizeof *all);
    for (int i = 0; i < 3; i++)
        mine[i] = rank * 10 + i;
    MPI_OK(MPI_Allgather(mine, 3, MPI_INT, all, 3, MPI_INT, MPI_COMM_WORLD));
    for (int r = 0; r < size; r++)
        for (int i = 0; i < 3; i++)
            CHECK_EQ(r * 10 + i, all[r * 3 + i]);
    free(all);

    /* in place, the send type MPI_DATATYPE_NULL (as nccl-tests' host hashes) */
    uint64_t *hashes = calloc((size_t)size, sizeof *hashes);
    hashes[rank] = 0x1234567890abcdefULL ^ (uint64_t)rank;
    MPI_OK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, hashes, sizeof(uint64_t), MPI_BYTE, MPI_COMM_WORLD));
    for (int r = 0; r < size; r++)
        CHECK(hashes[r] == (0x1234567890abcdefULL ^ (uint64_t)r));
    free(hashes);

    /* more than a slot per rank */
    unsigned char *big = malloc(BIG), *bigall = malloc((size_t)size * BIG);
    for (size_t i = 0; i < BIG; i++)
        big[i] = pattern(rank, i);
    MPI_OK(MPI_Allgather(big, BIG, MPI_BYTE, bigall, BIG, MPI_BYTE, MPI_COMM_WORLD));
    for (int r = 0; r < size; r++)
        for (size_t i = 0; i < BIG; i++)
            if (bigall[(size_t)r * BIG + i] != pattern(r, i))
                fail_at(__LINE__, "allgather: byte %zu of rank %d", i, r);
    free(big);
    free(bigall);
}

/* Element i of rank r: values of both signs; the sum, minimum and maximum
 * over the ranks are known. */
static long long value(int r, size_t i) { return ((long long)r + 1) * (long long)(i % 1000 + 1) * ((i & 1) ? -1 : 1); }
static long long sum_of(size_t i) { return (long long)size * (size + 1) / 2 * (long long)(i % 1000 + 1) * ((i & 1) ? -1 : 1); }
static long long min_of(size_t i) { return (i & 1) ? value(size - 1, i) : value(0, i); }
static long long max_of(size_t i) { return (i & 1) ? value(0, i) : value(size - 1, i); }

#define CHECK_ALLREDUCE(T, TYPE, N)                                                                   \
    do {                                                                                              \
        T *in = malloc((N) * sizeof(T)), *out = malloc((N) * sizeof(T));                              \
        MPI_Op ops[3] = { MPI_SUM, MPI_MIN, MPI_MAX };                                                \
        for (int o = 0; o < 3; o++) {                                                                 \
            for (size_t i = 0; i < (N); i++)                                                          \
                in[i] = (T)value(rank, i), out[i] = (T)-7;                                            \
            if (o == 1) /* in place */                                                                \
                MPI_OK(MPI_Allreduce(MPI_IN_PLACE, in, (int)(N), TYPE, ops[o], MPI_COMM_WORLD));      \
            else                                                                                      \
                MPI_OK(MPI_Allreduce(in, out, (int)(N), TYPE, ops[o], MPI_COMM_WORLD));               \
            T *res = o == 1 ? in : out;                                                               \
            for (size_t i = 0; i < (N); i++) {                                                        \
                long long want = o == 0 ? sum_of(i) : o == 1 ? min_of(i) : max_of(i);                 \
                if (res[i] != (T)want)                                                                \
                    fail_at(__LINE__, "allreduce %s op %d: element %zu: expected %lld, got %lld",     \
                            #TYPE, o, i, want, (long long)res[i]);                                    \
            }                                                                                         \
        }                                                                                             \
        free(in);                                                                                     \
        free(out);                                                                                    \
    } while (0)

static void check_allreduce(void)
{
    CHECK_ALLREDUCE(int, MPI_INT, (size_t)5);
    CHECK_ALLREDUCE(long, MPI_LONG, (size_t)1);
    CHECK_ALLREDUCE(long long, MPI_LONG_LONG, (size_t)3);
    CHECK_ALLREDUCE(int64_t, MPI_INT64_T, (size_t)3);
    CHECK_ALLREDUCE(double, MPI_DOUBLE, (size_t)2);
    /* more than one slot of elements (64 KiB / 8 = 8192 per slot) */
    CHECK_ALLREDUCE(long, MPI_LONG, (size_t)20000);
    CHECK_ALLREDUCE(double, MPI_DOUBLE, (size_t)9000);
    /* as nccl-tests: one value in place */
    long maxmem = 1000 + rank;
    MPI_OK(MPI_Allreduce(MPI_IN_PLACE, &maxmem, 1, MPI_LONG, MPI_MIN, MPI_COMM_WORLD));
    CHECK_EQ(1000, maxmem);
}

static void check_bcast(void)
{
    int root = size - 1;
    /* more than every slot of the job together (8 ranks: 512 KiB) */
    size_t n = 600 * 1024 + 5;
    unsigned char *buf = malloc(n);
    for (size_t i = 0; i < n; i++)
        buf[i] = rank == root ? pattern(root, i) : 0xee;
    MPI_OK(MPI_Bcast(buf, (int)n, MPI_BYTE, root, MPI_COMM_WORLD));
    for (size_t i = 0; i < n; i++)
        if (buf[i] != pattern(root, i))
            fail_at(__LINE__, "bcast from %d: byte %zu", root, i);
    free(buf);
    double d = rank == root ? 2.5 : 0;
    MPI_OK(MPI_Bcast(&d, 1, MPI_DOUBLE, root, MPI_COMM_WORLD));
    CHECK(d == 2.5);
}

static void check_gather(void)
{
    for (int root = 0; root < size; root += size > 2 ? size / 2 : 1) {
        unsigned char *mine = malloc(BIG), *all = rank == root ? malloc((size_t)size * BIG) : NULL;
        for (size_t i = 0; i < BIG; i++)
            mine[i] = pattern(rank + root, i);
        MPI_OK(MPI_Gather(mine, BIG, MPI_BYTE, all, BIG, MPI_BYTE, root, MPI_COMM_WORLD));
        if (rank == root)
            for (int r = 0; r < size; r++)
                for (size_t i = 0; i < BIG; i++)
                    if (all[(size_t)r * BIG + i] != pattern(r + root, i))
                        fail_at(__LINE__, "gather to %d: byte %zu of rank %d", root, i, r);
        free(mine);
        free(all);
    }
    /* doubles, as nccl-tests gathers its timings; the root in place */
    double t[4] = { rank, rank + 0.5, rank * 2.0, -rank }, *all = rank == 0 ? malloc(size * sizeof t) : NULL;
    if (rank == 0) {
        memcpy(all, t, sizeof t);
        MPI_OK(MPI_Gather(MPI_IN_PLACE, 4, MPI_DOUBLE, all, 4, MPI_DOUBLE, 0, MPI_COMM_WORLD));
        for (int r = 0; r < size; r++)
            CHECK(all[r * 4] == r && all[r * 4 + 1] == r + 0.5 && all[r * 4 + 2] == r * 2.0 && all[r * 4 + 3] == -r);
    } else {
        MPI_OK(MPI_Gather(t, 4, MPI_DOUBLE, NULL, 0, MPI_DATATYPE_NULL, 0, MPI_COMM_WORLD));
    }
    free(all);
}

static void check_split(void)
{
    /* two colours (even and odd ranks), keys in reverse order */
    MPI_Comm sub;
    int color = rank % 2, sub_rank, sub_size;
    MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, color, -rank, &sub));
    CHECK(sub != MPI_COMM_NULL && sub != MPI_COMM_WORLD);
    MPI_OK(MPI_Comm_size(sub, &sub_size));
    MPI_OK(MPI_Comm_rank(sub, &sub_rank));
    int members = 0, above = 0;
    for (int r = 0; r < size; r++)
        if (r % 2 == color) {
            members++;
            above += r > rank;
        }
    CHECK_EQ(members, sub_size);
    CHECK_EQ(above, sub_rank);

    /* the world ranks in the sub-communicator's order: descending */
    int *world = calloc((size_t)sub_size, sizeof *world);
    MPI_OK(MPI_Allgather(&rank, 1, MPI_INT, world, 1, MPI_INT, sub));
    for (int i = 0; i < sub_size; i++)
        CHECK_EQ(color + 2 * (sub_size - 1 - i), world[i]);
    free(world);
    long long sum = rank;
    MPI_OK(MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_LONG_LONG, MPI_SUM, sub));
    long long want = 0;
    for (int r = color; r < size; r += 2)
        want += r;
    CHECK_EQ(want, sum);
    /* sub-rank 0 is the highest world rank of the colour */
    int top = rank;
    MPI_OK(MPI_Bcast(&top, 1, MPI_INT, 0, sub));
    CHECK_EQ(color + 2 * (sub_size - 1), top);
    MPI_OK(MPI_Barrier(sub));

    /* the world goes on alongside */
    int n = 1;
    MPI_OK(MPI_Allreduce(MPI_IN_PLACE, &n, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK_EQ(size, n);

    /* a split of the split: one colour, equal keys (parent order), and
     * MPI_UNDEFINED for the parent's last rank */
    MPI_Comm subsub;
    int last = sub_rank == sub_size - 1;
    MPI_OK(MPI_Comm_split(sub, last ? MPI_UNDEFINED : 7, 0, &subsub));
    if (last) {
        CHECK(subsub == MPI_COMM_NULL);
    } else {
        int ss_rank, ss_size;
        MPI_OK(MPI_Comm_rank(subsub, &ss_rank));
        MPI_OK(MPI_Comm_size(subsub, &ss_size));
        CHECK_EQ(sub_rank, ss_rank);
        CHECK_EQ(sub_size - 1, ss_size);
        int x = ss_rank;
        MPI_OK(MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_INT, MPI_MAX, subsub));
        CHECK_EQ(ss_size - 1, x);
        MPI_OK(MPI_Comm_free(&subsub));
        CHECK(subsub == MPI_COMM_NULL);
    }
    MPI_OK(MPI_Comm_free(&sub));
    CHECK(sub == MPI_COMM_NULL);

    /* as nccl-tests: one colour, keys = world rank */
    MPI_Comm same;
    MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &same));
    int r2, s2;
    MPI_OK(MPI_Comm_rank(same, &r2));
    MPI_OK(MPI_Comm_size(same, &s2));
    CHECK_EQ(rank, r2);
    CHECK_EQ(size, s2);
    MPI_OK(MPI_Barrier(same));
    MPI_OK(MPI_Comm_free(&same));
}

static void check_errors(void)
{
    int x = 0;
    CHECK_EQ(MPI_ERR_OP, MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_BYTE, MPI_SUM, MPI_COMM_WORLD));
    CHECK_EQ(MPI_ERR_OP, MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_INT, MPI_OP_NULL, MPI_COMM_WORLD));
    CHECK_EQ(MPI_ERR_TYPE, MPI_Bcast(&x, 1, MPI_DATATYPE_NULL, 0, MPI_COMM_WORLD));
    CHECK_EQ(MPI_ERR_COUNT, MPI_Bcast(&x, -1, MPI_INT, 0, MPI_COMM_WORLD));
    CHECK_EQ(MPI_ERR_ROOT, MPI_Bcast(&x, 1, MPI_INT, size, MPI_COMM_WORLD));
    CHECK_EQ(MPI_ERR_COMM, MPI_Barrier(MPI_COMM_NULL));
    CHECK_EQ(MPI_ERR_COMM, MPI_Barrier(99));
    MPI_Comm w = MPI_COMM_WORLD;
    CHECK_EQ(MPI_ERR_COMM, MPI_Comm_free(&w));
    CHECK_EQ(MPI_ERR_ARG, MPI_Comm_split(MPI_COMM_WORLD, -5, 0, &w));
    CHECK_EQ(MPI_ERR_COUNT, MPI_Allgather(&x, 1, MPI_INT, &x, 2, MPI_BYTE, MPI_COMM_WORLD));
    CHECK_EQ(MPI_ERR_OTHER, MPI_Init(NULL, NULL));
    /* still in step after the refused calls */
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "collectives";
    MPI_OK(MPI_Init(&argc, &argv));
    MPI_OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    MPI_OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    const char *env_size = getenv("MINIMPI_SIZE");
    CHECK_EQ(env_size ? atoi(env_size) : 1, size);
    const char *piddir = getenv("MPI_CHECK_PIDDIR");
    if (piddir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/rank.%d", piddir, rank);
        FILE *f = fopen(path, "w");
        CHECK(f != NULL);
        fprintf(f, "%d\n", (int)getpid());
        fclose(f);
    }

    if (strcmp(mode, "collectives") == 0) {
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
        check_allgather();
        check_allreduce();
        check_bcast();
        check_gather();
        check_split();
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    } else if (strcmp(mode, "exit") == 0 || strcmp(mode, "kill") == 0 || strcmp(mode, "hang") == 0) {
        CHECK(argc > 2);
        int who = atoi(argv[2]);
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
        if (rank == who) {
            if (mode[0] == 'e')
                exit(argc > 3 ? atoi(argv[3]) : 1);
            if (mode[0] == 'k')
                raise(SIGKILL);
            for (;;)
                pause();
        }
        MPI_Barrier(MPI_COMM_WORLD);
        fail_at(__LINE__, "the barrier returned without rank %d", who);
    } else if (strcmp(mode, "env") == 0) {
        for (int i = 2; i < argc; i++) {
            const char *v = getenv(argv[i]);
            printf("%d %s=%s\n", rank, argv[i], v ? v : "(unset)");
        }
        const char *shm = getenv("MINIMPI_SHM");
        printf("%d MINIMPI_SHM=%s\n", rank, shm ? shm : "(unset)");
    } else if (strcmp(mode, "errors") == 0) {
        check_errors();
    } else {
        fail_at(__LINE__, "unknown mode %s", mode);
    }
    MPI_OK(MPI_Finalize());
    printf("mpi_check: rank %d of %d: %s ok\n", rank, size, mode);
    return 0;
}
