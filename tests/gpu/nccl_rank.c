/* tests/gpu/nccl_rank.c: a GPU test rank's common steps (nccl_rank.h). */
#include "nccl_rank.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

double nccl_rank_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int nccl_rank_unique_id(int rank, const char *id_file, int timeout_s, ncclUniqueId *id)
{
    if (rank == 0) {
        ncclResult_t r = ncclGetUniqueId(id);
        if (r != ncclSuccess) {
            fprintf(stderr, "rank 0: ncclGetUniqueId: %s\n", ncclGetErrorString(r));
            return -1;
        }
        char tmp[4096];
        snprintf(tmp, sizeof(tmp), "%s.tmp", id_file);
        FILE *f = fopen(tmp, "wb");
        if (!f || fwrite(id, sizeof(*id), 1, f) != 1 || fclose(f) != 0) {
            fprintf(stderr, "rank 0: cannot write %s: %s\n", tmp, strerror(errno));
            return -1;
        }
        if (rename(tmp, id_file) != 0) {
            fprintf(stderr, "rank 0: cannot rename %s: %s\n", tmp, strerror(errno));
            return -1;
        }
        return 0;
    }
    for (double t0 = nccl_rank_now_s();; usleep(10000)) {
        FILE *f = fopen(id_file, "rb");
        if (f) {
            size_t n = fread(id, sizeof(*id), 1, f);
            fclose(f);
            if (n == 1)
                return 0;
        }
        if (nccl_rank_now_s() - t0 > timeout_s) {
            fprintf(stderr, "rank %d: no unique id in %s after %d s\n", rank, id_file, timeout_s);
            return -1;
        }
    }
}

ncclResult_t nccl_rank_wait_stream(ncclComm_t comm, cudaStream_t s, int timeout_s)
{
    for (double t0 = nccl_rank_now_s();; usleep(1000)) {
        cudaError_t ce = cudaStreamQuery(s);
        if (ce == cudaSuccess)
            return ncclSuccess;
        if (ce != cudaErrorNotReady)
            return ncclUnhandledCudaError;
        ncclResult_t ae = ncclSuccess;
        if (ncclCommGetAsyncError(comm, &ae) != ncclSuccess || (ae != ncclSuccess && ae != ncclInProgress))
            return ae != ncclSuccess ? ae : ncclSystemError;
        if (nccl_rank_now_s() - t0 > timeout_s)
            return ncclInProgress;
    }
}
