/* tools/common/cuda_dl.h: CUDA device memory for the tools, through the CUDA
 * driver table of plugin/ib/cudawrap.h (libcuda.so.1 loaded with dlopen, once
 * per process), so the tools build and run on hosts without a GPU.
 *
 * Contract: cuda_dl_open() loads the driver and calls cuInit; it returns NULL
 * with the reason in err when there is no driver, no GPU, or the tools were
 * built without CUDA headers (cuda_dl_none.c). Allocations are made in the
 * device's primary context with SYNC_MEMOPS set, as GPUDirect RDMA requires.
 * Every function returns 0 or -1 with err filled. */
#ifndef RAILNET_TOOLS_CUDA_DL_H
#define RAILNET_TOOLS_CUDA_DL_H

#include <stddef.h>

struct cuda_dl;

struct cuda_dl *cuda_dl_open(char *err, size_t errlen);
void cuda_dl_close(struct cuda_dl *c);

int cuda_dl_device_count(struct cuda_dl *c);
/* "0000:3b:00.0" (lower case, like sysfs). */
int cuda_dl_pci_bus_id(struct cuda_dl *c, int dev, char *buf, size_t len);
/* 1 supported, 0 not, -1 unknown (driver too old to answer). */
int cuda_dl_dmabuf_supported(struct cuda_dl *c, int dev);
int cuda_dl_driver_version(struct cuda_dl *c);

/* From now on cuda_dl_alloc maps cuMemCreate memory (the CUDA VMM API that
 * NCCL allocates with by default) instead of calling cuMemAlloc: physical
 * memory with gpuDirectRDMACapable set, mapped read-write for the device.
 * Returns -1 when the driver lacks the VMM entry points. */
int cuda_dl_use_vmm(struct cuda_dl *c, char *err, size_t errlen);
/* len is rounded up to the allocation granularity under VMM; cuda_dl_free
 * unmaps what cuda_dl_alloc mapped. */
int cuda_dl_alloc(struct cuda_dl *c, int dev, size_t len, void **ptr, char *err, size_t errlen);
void cuda_dl_free(struct cuda_dl *c, void *ptr);
int cuda_dl_memset(struct cuda_dl *c, void *ptr, unsigned char val, size_t len);
int cuda_dl_copy_to_host(struct cuda_dl *c, void *dst, const void *src, size_t len);
/* A dmabuf fd for [ptr, ptr+len) (cuMemGetHandleForAddressRange); the caller
 * closes it. */
int cuda_dl_dmabuf_fd(struct cuda_dl *c, void *ptr, size_t len, int *fd, char *err,
                      size_t errlen);

#endif
