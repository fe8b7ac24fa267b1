/* plugin/ib/gpumem.h: what memory registration asks of the CUDA driver
 * (through the one driver table, cudawrap.h).
 *
 * Layer: low. In a build without CUDA headers every GPU request fails with
 * that reason. Until gpumem_load() succeeded (at init's probe) every pointer
 * is host memory. Calls return 0 or -1. Addresses are CUdeviceptr values
 * carried as uintptr_t. */
#ifndef RAILNET_IB_GPUMEM_H
#define RAILNET_IB_GPUMEM_H

#include <stddef.h>
#include <stdint.h>

int gpumem_load(char *err, size_t errlen);
/* 1 when ptr is device memory of a CUDA allocation (cudaMalloc, cuMemCreate+cuMemMap). */
int gpumem_is_device_ptr(const void *ptr);
/* The ordinal of the GPU whose memory ptr is, -1 when it is none's. */
int gpumem_device_ordinal(const void *ptr);
/* The allocation (or mapping) holding ptr. */
int gpumem_range(const void *ptr, uintptr_t *base, size_t *size);
/* A dmabuf fd exporting [base, base+size) (cuMemGetHandleForAddressRange);
 * the caller closes it. */
int gpumem_dmabuf_fd(uintptr_t base, size_t size, int *fd);
/* CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED of the current context's device. */
int gpumem_dmabuf_supported(void);

/* A short-lived device buffer for init's test registration, made in the
 * current context or, without one, device 0's primary context (released by
 * gpumem_probe_free). */
struct gpumem_probe {
    uintptr_t ptr;
    size_t size;
    int pushed;
    int dev;
};
int gpumem_probe_alloc(struct gpumem_probe *p, size_t size, char *err, size_t errlen);
void gpumem_probe_free(struct gpumem_probe *p);

#endif
