// tests/minimpi/mpi_cxx.cc: mpi.h from C++, written as nccl-tests use it
// (src/common.cu, src/util.cu): value-initialised MPI_Datatype() and
// MPI_Op() in conditional expressions, MPI_IN_PLACE, a split by colour.
// Prints "mpi_cxx: rank R of N ok" and exits 0 when every result is right.
#include "mpi.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <type_traits>
#include <vector>

#define CHECK(cond)                                                          \
    do {                                                                     \
        if (!(cond)) {                                                       \
            std::fprintf(stderr, "mpi_cxx: %s:%d: expected %s\n", __FILE__,  \
                         __LINE__, #cond);                                   \
            return 1;                                                        \
        }                                                                    \
    } while (0)

template <typename T> static int average(T *v, int how)
{
    MPI_Datatype ty = std::is_same<T, long long>::value ? MPI_LONG_LONG
                      : std::is_same<T, double>::value  ? MPI_DOUBLE
                                                        : MPI_Datatype();
    MPI_Op op = how == 1 ? MPI_SUM : how == 2 ? MPI_MIN : how == 3 ? MPI_MAX : MPI_Op();
    return MPI_Allreduce(MPI_IN_PLACE, (void *)v, 1, ty, op, MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
    int proc = 0, total = 1, nproc = 0, nsize = 0;
    CHECK(MPI_Datatype() == MPI_DATATYPE_NULL && MPI_Op() == MPI_OP_NULL);
    CHECK(MPI_Init(&argc, &argv) == MPI_SUCCESS);
    MPI_Comm_size(MPI_COMM_WORLD, &total);
    MPI_Comm_rank(MPI_COMM_WORLD, &proc);

    std::vector<uint64_t> hashes(total);
    hashes[proc] = 42;
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, hashes.data(), sizeof(uint64_t), MPI_BYTE, MPI_COMM_WORLD);
    for (int p = 0; p < total; p++)
        CHECK(hashes[p] == 42);

    MPI_Comm comm;
    CHECK(MPI_Comm_split(MPI_COMM_WORLD, 0, proc, &comm) == MPI_SUCCESS);
    MPI_Comm_size(comm, &nsize);
    MPI_Comm_rank(comm, &nproc);
    CHECK(nsize == total && nproc == proc);

    char id[128];
    std::memset(id, nproc == 0 ? 'u' : 0, sizeof id);
    MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, comm);
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(id[0] == 'u' && id[127] == 'u');

    long long busbw = proc + 1;
    CHECK(average(&busbw, 1) == MPI_SUCCESS);
    CHECK(busbw == (long long)total * (total + 1) / 2);
    double t = proc;
    CHECK(average(&t, 3) == MPI_SUCCESS);
    CHECK(t == total - 1);
    int64_t mem = proc * 3;
    MPI_Allreduce(MPI_IN_PLACE, &mem, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
    CHECK(mem == (int64_t)(total - 1) * 3);

    const int line = 64;
    char mine[line];
    std::snprintf(mine, sizeof mine, "rank %d", proc);
    std::vector<char> lines(proc == 0 ? total * line : 0);
    MPI_Gather(mine, line, MPI_BYTE, proc == 0 ? lines.data() : nullptr, line, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (proc == 0)
        for (int p = 0; p < total; p++) {
            char want[line];
            std::snprintf(want, sizeof want, "rank %d", p);
            CHECK(std::strcmp(&lines[p * line], want) == 0);
        }

    CHECK(MPI_Comm_free(&comm) == MPI_SUCCESS);
    CHECK(MPI_Finalize() == MPI_SUCCESS);
    std::printf("mpi_cxx: rank %d of %d ok\n", proc, total);
    return 0;
}
