/* tests/gdaki/gpu_path.h: the GPU-initiated half of bench_gdaki_vs_proxy --
 * one CUDA thread posts RDMA writes itself through the plugin/gdaki device
 * API (gdaki_device.cuh) on a gdaki pair -- and the CUDA memory helpers the
 * benchmark's buffers need.  gpu_path.cu (nvcc) implements it;
 * gpu_path_none.c stands in for builds without nvcc: gpu_path_probe says
 * so and the rest fail.
 *
 * Contract:
 * - gpu_path_probe makes CUDA device dev current on the calling thread and
 *   creates its context: 0, or -1 with the reason (no GPU, no driver, a
 *   build without nvcc).  Everything below needs it done first.
 * - gpu_path_open registers src and dst (slots * PATH_SLOT bytes of CUDA
 *   memory each) and an 8-byte signal word (CUDA memory) on pair, which
 *   must have been opened with use_cuda.  Message i goes from slot
 *   i % window of src to slot i % window of dst (path_result.h); window
 *   is the rate phase's (1..slots), or slots in a latency phase.
 * - Every message is one put_signal_thread: the payload WRITE, then an
 *   inline WRITE that SETs the signal word to i + 1 (one doorbell for
 *   both).  The receiver's notification thus travels with each message,
 *   as the immediate does on the CPU-proxy path; SET works on every RC
 *   device (softnic has no atomics).
 * - gpu_path_rate: n messages, at most window in flight (before message i
 *   the thread quiets on the ticket of message i - window), timed on the
 *   GPU clock (%globaltimer) from the first post to the quiet of the last
 *   message.  gpu_path_lat: n messages one at a time; lat_us[i] is the
 *   time from the post of message i to its quiet returning.  quiet returns
 *   once the signal WRITE's completion is in the CQ: the responder
 *   acknowledged it, and an RC QP places its writes in order, so payload
 *   and signal are in the receiver's memory.  After each phase the signal
 *   word must read n, or the phase fails.
 * - Functions return 0, or -1 with the reason in err (an error completion
 *   names its syndrome; a kernel still running after timeout_s seconds
 *   leaves the CUDA context unusable: exit). */
#ifndef RAILNET_TESTS_GDAKI_GPU_PATH_H
#define RAILNET_TESTS_GDAKI_GPU_PATH_H

#include <stddef.h>

#include "railnet_gdaki.h"

#ifdef __cplusplus
extern "C" {
#endif

int gpu_path_probe(int dev, char *err, size_t errlen);
/* Makes device *(int *)dev current on the calling thread (a thread_init
 * for the proxy half's receiver thread). */
void gpu_path_bind(void *dev);

/* cudaMalloc / cudaFree / copies / cudaMemset; 0 or -1 with err. */
int gpu_mem_alloc(size_t len, void **p, char *err, size_t errlen);
void gpu_mem_free(void *p);
int gpu_mem_to_device(void *dst, const void *src, size_t len, char *err, size_t errlen);
int gpu_mem_to_host(void *dst, const void *src, size_t len, char *err, size_t errlen);
int gpu_mem_zero(void *p, size_t len, char *err, size_t errlen);

struct gpu_path;

int gpu_path_open(struct gdaki_pair *pair, void *src, void *dst, int slots, double timeout_s,
                  struct gpu_path **out, char *err, size_t errlen);
int gpu_path_rate(struct gpu_path *g, size_t size, long n, int window, double *rate_mps, char *err,
                  size_t errlen);
int gpu_path_lat(struct gpu_path *g, size_t size, long n, double *lat_us, char *err, size_t errlen);
/* Messages of at most inline_max bytes (0..GDAKI_INLINE_MAX, default 0)
 * carry their payload inside the WQE (GDAKI_OP_INLINE: the kernel reads
 * the source slot, the NIC does not), past GDAKI_INLINE_BUSY_MAX only on an
 * idle QP (gdaki_q_inline_flags).  0, or -1 for a size out of range. */
int gpu_path_set_inline(struct gpu_path *g, int inline_max);
void gpu_path_close(struct gpu_path *g);

#ifdef __cplusplus
}
#endif

#endif
