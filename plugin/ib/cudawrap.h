/* plugin/ib/cudawrap.h: the few CUDA driver calls the plugin's memory
 * registration needs, from libcuda.so.1 loaded with dlopen (never linked),
 * so the plugin loads on hosts without a GPU or without CUDA at build time.
 *
 * cudawrap_load() is idempotent and thread-safe; it fails (returning -1 with
 * the reason in err) when the plugin was built without CUDA headers, there
 * is no driver, or cuInit fails. Other calls return 0 or -1 (after a failed
 * load, always -1). Addresses are CUdeviceptr values carried as uintptr_t. */
#ifndef RAILNET_IB_CUDAWRAP_H
#define RAILNET_IB_CUDAWRAP_H

#include <stddef.h>
#include <stdint.h>

int cudawrap_load(char *err, size_t errlen);
/* 1 when ptr is device memory of a CUDA allocation (cudaMalloc, cuMemCreate+cuMemMap). */
int cudawrap_is_device_ptr(const void *ptr);
/* The allocation (or mapping) holding ptr. */
int cudawrap_range(const void *ptr, uintptr_t *base, size_t *size);
/* A dmabuf fd exporting [base, base+size) (cuMemGetHandleForAddressRange);
 * the caller closes it. */
int cudawrap_dmabuf_fd(uintptr_t base, size_t size, int *fd);
/* CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED of the current context's device. */
int cudawrap_dmabuf_supported(void);

/* A short-lived device buffer for init's test registration, made in the
 * current context or, without one, device 0's primary context (released by
 * cudawrap_probe_free). */
struct cudawrap_probe {
    uintptr_t ptr;
    size_t size;
    int pushed;
    int dev;
};
int cudawrap_probe_alloc(struct cudawrap_probe *p, size_t size, char *err, size_t errlen);
void cudawrap_probe_free(struct cudawrap_probe *p);

#endif
