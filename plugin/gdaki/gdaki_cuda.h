/* gdaki_cuda.h: the few CUDA driver calls the host side of the GPU-initiated
 * path needs, through the project's one CUDA driver table (plugin/ib/cudawrap.h,
 * libcuda.so.1 loaded with dlopen) so that everything builds
 * and runs (and reports "no CUDA") on hosts without a GPU or a driver.
 *
 * Contract: gdaki_cuda_open() loads the driver once per process, cuInit()s
 * it, and makes the primary context of device dev current on the calling
 * thread; it returns 0, or -1 with the reason in err (no libcuda, no
 * device, a build without cuda.h).  The other calls need a successful open
 * and the primary context current on the thread (gdaki_cuda_bind()).
 * Device pointers are uint64_t (CUdeviceptr). */
#ifndef RAILNET_GDAKI_CUDA_H
#define RAILNET_GDAKI_CUDA_H

#include <stddef.h>
#include <stdint.h>

int gdaki_cuda_open(int dev, char *err, size_t errlen);
/* Make the primary context of dev current on this thread. */
int gdaki_cuda_bind(int dev, char *err, size_t errlen);

/* Register host memory [p, p+len) (page-aligned) for GPU access and give its
 * device address. io: the range is device MMIO (a NIC's UAR page), mapped
 * with CU_MEMHOSTREGISTER_IOMEMORY.  *owned is 0 when the range was already
 * registered (another descriptor shares the page): do not unregister it. */
int gdaki_cuda_host_register(void *p, size_t len, int io, uint64_t *dptr, int *owned,
                             char *err, size_t errlen);
void gdaki_cuda_host_unregister(void *p);

int gdaki_cuda_alloc(size_t len, uint64_t *dptr, char *err, size_t errlen);
void gdaki_cuda_free(uint64_t dptr);
/* GPU memory for a QP's queues on device dev (gdaki_ring_pool.h: 64 KiB
 * units of shared blocks, not an allocation of the VMM granularity each). */
int gdaki_cuda_ring_alloc(int dev, size_t len, uint64_t *dptr, char *err, size_t errlen);
void gdaki_cuda_ring_free(uint64_t dptr);
int gdaki_cuda_htod(uint64_t dst, const void *src, size_t len, char *err, size_t errlen);
int gdaki_cuda_dtoh(void *dst, uint64_t src, size_t len, char *err, size_t errlen);

#endif
