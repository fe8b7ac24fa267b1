/* tests/gpu/nccl_rank.h: what every rank program of the GPU tests does the
 * same way (tests/gpu/nccl_collectives.c, nccl_rma.c, gin_driver.c), each
 * rank a process started by a script (tests/gpu/lib-nccl.sh, minimpirun). */
#ifndef RAILNET_TESTS_GPU_NCCL_RANK_H
#define RAILNET_TESTS_GPU_NCCL_RANK_H

#include <cuda_runtime.h>
#include <nccl.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Seconds on the monotonic clock. */
double nccl_rank_now_s(void);

/* The job's unique id through id_file: rank 0 makes it and writes the file
 * whole (a temporary, then rename), the others wait for it up to
 * timeout_s. 0, or -1 with the reason on stderr. */
int nccl_rank_unique_id(int rank, const char *id_file, int timeout_s, ncclUniqueId *id);

/* Waits for the stream while watching the communicator for asynchronous
 * errors, so that a dead peer is an error and not a hang: ncclSuccess once
 * the stream is done, NCCL's error (ncclUnhandledCudaError for a stream
 * error), or ncclInProgress after timeout_s (the caller reports it). */
ncclResult_t nccl_rank_wait_stream(ncclComm_t comm, cudaStream_t s, int timeout_s);

#ifdef __cplusplus
}
#endif

#endif
