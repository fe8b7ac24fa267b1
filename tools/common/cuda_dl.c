/* tools/common/cuda_dl.c: CUDA device memory for the tools (see cuda_dl.h),
 * through the project's one driver table (plugin/ib/cudawrap.h). Built only
 * when configure found cuda.h; the VMM types come from it. */
#include "config.h"

#include "strfmt.h"
#include "cuda_dl.h"
#include "cudawrap.h"

#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cuda_dl {
    const struct cudawrap *cu;   /* the process's one driver table (plugin/ib/cudawrap.h) */
    int vmm;
    struct { CUdeviceptr ptr; size_t len; } maps[8]; /* VMM mappings to undo */
    CUcontext ctx;
};

struct cuda_dl *cuda_dl_open(char *err, size_t errlen)
{
    const struct cudawrap *cu = cudawrap_get(err, errlen);
    if (!cu)
        return NULL;
    struct cuda_dl *c = calloc(1, sizeof(*c));
    if (!c) {
        str_fmt(err, errlen, "out of memory");
        return NULL;
    }
    c->cu = cu;
    return c;
}

void cuda_dl_close(struct cuda_dl *c)
{
    if (!c)
        return;
    /* The primary context is left retained: the process is a short-lived
     * tool and releasing it while a verbs MR still maps its memory would
     * be the worse error. The driver stays loaded (cudawrap.h). */
    free(c);
}

int cuda_dl_device_count(struct cuda_dl *c)
{
    int n = 0;
    return c->cu->device_get_count(&n) == CUDA_SUCCESS ? n : 0;
}

int cuda_dl_pci_bus_id(struct cuda_dl *c, int dev, char *buf, size_t len)
{
    CUdevice d;
    char id[64];
    if (c->cu->device_get(&d, dev) != CUDA_SUCCESS ||
        c->cu->device_get_pci_bus_id(id, (int)sizeof(id), d) != CUDA_SUCCESS)
        return -1;
    /* The driver answers "00000000:3B:00.0"; sysfs says "0000:3b:00.0". */
    unsigned dom, bus, slot, fn;
    if (sscanf(id, "%x:%x:%x.%x", &dom, &bus, &slot, &fn) != 4)
        return -1;
    str_fmt(buf, len, "%04x:%02x:%02x.%x", dom & 0xffff, bus, slot, fn);
    return 0;
}

int cuda_dl_dmabuf_supported(struct cuda_dl *c, int dev)
{
    CUdevice d;
    int v = 0;
    if (c->cu->device_get(&d, dev) != CUDA_SUCCESS ||
        c->cu->device_get_attribute(&v, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, d) != CUDA_SUCCESS)
        return -1;
    return v ? 1 : 0;
}

int cuda_dl_driver_version(struct cuda_dl *c)
{
    int v = 0;
    return c->cu->driver_get_version(&v) == CUDA_SUCCESS ? v : 0;
}

int cuda_dl_use_vmm(struct cuda_dl *c, char *err, size_t errlen)
{
    if (!cudawrap_vmm_supported(c->cu)) {
        str_fmt(err, errlen, "this CUDA driver lacks the VMM API (cuMemCreate/cuMemMap)");
        return -1;
    }
    c->vmm = 1;
    return 0;
}

/* A VMM allocation (cudawrap_vmm_alloc) in a free mapping slot. */
static CUresult alloc_vmm(struct cuda_dl *c, CUdevice d, size_t *len, CUdeviceptr *out, const char **step)
{
    int slot = -1;
    for (int i = 0; i < (int)(sizeof(c->maps) / sizeof(c->maps[0])) && slot < 0; i++)
        if (!c->maps[i].ptr)
            slot = i;
    *step = "a free mapping slot";
    if (slot < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUdeviceptr p = 0;
    CUresult r = cudawrap_vmm_alloc(c->cu, d, len, &p, step);
    if (r != CUDA_SUCCESS)
        return r;
    c->maps[slot].ptr = p;
    c->maps[slot].len = *len;
    *out = p;
    return CUDA_SUCCESS;
}

int cuda_dl_alloc(struct cuda_dl *c, int dev, size_t len, void **ptr, char *err, size_t errlen)
{
    CUdevice d;
    CUresult r = c->cu->device_get(&d, dev);
    if (r == CUDA_SUCCESS && !c->ctx)
        r = c->cu->primary_ctx_retain(&c->ctx, d);
    if (r == CUDA_SUCCESS)
        r = c->cu->ctx_set_current(c->ctx);
    CUdeviceptr p = 0;
    if (r == CUDA_SUCCESS && c->vmm) {
        const char *step = "";
        r = alloc_vmm(c, d, &len, &p, &step);
        if (r != CUDA_SUCCESS) {
            str_fmt(err, errlen, "GPU %d: VMM allocation of %zu bytes: %s failed: %s", dev, len, step,
                    cudawrap_error_string(r));
            return -1;
        }
        *ptr = (void *)(uintptr_t)p;
        return 0;
    }
    if (r == CUDA_SUCCESS)
        r = c->cu->mem_alloc(&p, len);
    if (r != CUDA_SUCCESS) {
        str_fmt(err, errlen, "GPU %d: cuMemAlloc(%zu) failed: %s", dev, len, cudawrap_error_string(r));
        return -1;
    }
    /* GPUDirect RDMA wants synchronous memory operations on the range so
     * that a cuMemcpy after a NIC write sees the written data. */
    unsigned int one = 1;
    c->cu->pointer_set_attribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, p);
    *ptr = (void *)(uintptr_t)p;
    return 0;
}

void cuda_dl_free(struct cuda_dl *c, void *ptr)
{
    if (!ptr)
        return;
    CUdeviceptr p = (CUdeviceptr)(uintptr_t)ptr;
    for (size_t i = 0; i < sizeof(c->maps) / sizeof(c->maps[0]); i++)
        if (c->maps[i].ptr == p) {
            cudawrap_vmm_free(c->cu, p, c->maps[i].len);
            c->maps[i].ptr = 0;
            return;
        }
    c->cu->mem_free(p);
}

int cuda_dl_memset(struct cuda_dl *c, void *ptr, unsigned char val, size_t len)
{
    return c->cu->memset_d8((CUdeviceptr)(uintptr_t)ptr, val, len) == CUDA_SUCCESS ? 0 : -1;
}

int cuda_dl_copy_to_host(struct cuda_dl *c, void *dst, const void *src, size_t len)
{
    return c->cu->memcpy_dtoh(dst, (CUdeviceptr)(uintptr_t)src, len) == CUDA_SUCCESS ? 0 : -1;
}

int cuda_dl_dmabuf_fd(struct cuda_dl *c, void *ptr, size_t len, int *fd, char *err, size_t errlen)
{
    if (!c->cu->mem_get_handle_for_address_range) {
        str_fmt(err, errlen, "CUDA driver lacks cuMemGetHandleForAddressRange (needs CUDA 11.7+)");
        return -1;
    }
    int out = -1;
    CUresult r = c->cu->mem_get_handle_for_address_range(&out, (CUdeviceptr)(uintptr_t)ptr, len,
                                             CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
    if (r != CUDA_SUCCESS) {
        str_fmt(err, errlen, "cuMemGetHandleForAddressRange(DMA_BUF_FD, %zu bytes) failed: %s",
                 len, cudawrap_error_string(r));
        return -1;
    }
    *fd = out;
    return 0;
}
