/* plugin/ib/gpumem.c: GPU memory facts for registration (gpumem.h). */
#include "gpumem.h"

#include <stdio.h>

#ifdef HAVE_CUDA
#include <cuda.h>

#include "cudawrap.h"

int gpumem_load(char *err, size_t errlen)
{
    return cudawrap_get(err, errlen) ? 0 : -1;
}

int gpumem_is_device_ptr(const void *ptr)
{
    const struct cudawrap *cu = cudawrap_peek();
    unsigned int type = 0;
    if (!cu || cu->pointer_get_attribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)ptr) !=
                   CUDA_SUCCESS)
        return 0;
    return type == CU_MEMORYTYPE_DEVICE;
}

int gpumem_device_ordinal(const void *ptr)
{
    const struct cudawrap *cu = cudawrap_peek();
    int ordinal = -1;
    if (!gpumem_is_device_ptr(ptr) ||
        cu->pointer_get_attribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, (CUdeviceptr)(uintptr_t)ptr) !=
            CUDA_SUCCESS)
        return -1;
    return ordinal;
}

int gpumem_range(const void *ptr, uintptr_t *base, size_t *size)
{
    const struct cudawrap *cu = cudawrap_peek();
    CUdeviceptr b = 0;
    size_t s = 0;
    if (!cu || cu->mem_get_address_range(&b, &s, (CUdeviceptr)(uintptr_t)ptr) != CUDA_SUCCESS)
        return -1;
    *base = (uintptr_t)b;
    *size = s;
    return 0;
}

int gpumem_dmabuf_fd(uintptr_t base, size_t size, int *fd)
{
    const struct cudawrap *cu = cudawrap_peek();
    if (!cu || !cu->mem_get_handle_for_address_range)
        return -1;
    int f = -1;
    if (cu->mem_get_handle_for_address_range(&f, (CUdeviceptr)base, size, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0) !=
        CUDA_SUCCESS)
        return -1;
    *fd = f;
    return 0;
}

int gpumem_dmabuf_supported(void)
{
    const struct cudawrap *cu = cudawrap_peek();
    CUdevice d;
    int v = 0;
    if (!cu || !cu->mem_get_handle_for_address_range || cu->ctx_get_device(&d) != CUDA_SUCCESS)
        return 0;
    if (cu->device_get_attribute(&v, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, d) != CUDA_SUCCESS)
        return 0;
    return v != 0;
}

int gpumem_probe_alloc(struct gpumem_probe *p, size_t size, char *err, size_t errlen)
{
    p->ptr = 0;
    p->size = size;
    p->pushed = 0;
    p->dev = -1;
    const struct cudawrap *cu = cudawrap_get(err, errlen);
    if (!cu)
        return -1;
    CUcontext cur = NULL;
    if (cu->ctx_get_current(&cur) != CUDA_SUCCESS || !cur) {
        /* no context on this thread (a host program): borrow GPU 0's primary one */
        CUdevice d;
        CUcontext pc;
        if (cu->device_get(&d, 0) != CUDA_SUCCESS || cu->primary_ctx_retain(&pc, d) != CUDA_SUCCESS ||
            cu->ctx_push_current(pc) != CUDA_SUCCESS) {
            snprintf(err, errlen, "no CUDA context and GPU 0's primary context is not usable");
            return -1;
        }
        p->pushed = 1;
        p->dev = (int)d;
    }
    CUdeviceptr dp;
    CUresult r = cu->mem_alloc(&dp, size);
    if (r != CUDA_SUCCESS) {
        snprintf(err, errlen, "cuMemAlloc(%zu) failed with CUresult %d", size, (int)r);
        gpumem_probe_free(p);
        return -1;
    }
    p->ptr = (uintptr_t)dp;
    return 0;
}

void gpumem_probe_free(struct gpumem_probe *p)
{
    const struct cudawrap *cu = cudawrap_peek();
    if (!cu)
        return;
    if (p->ptr)
        cu->mem_free((CUdeviceptr)p->ptr);
    p->ptr = 0;
    if (p->pushed) {
        CUcontext c;
        cu->ctx_pop_current(&c);
        cu->primary_ctx_release((CUdevice)p->dev);
        p->pushed = 0;
    }
}

#else /* built without CUDA headers: every GPU request fails with the reason */

int gpumem_load(char *err, size_t errlen)
{
    if (err)
        snprintf(err, errlen, "railnet was built without CUDA (configure --with-cuda)");
    return -1;
}
int gpumem_is_device_ptr(const void *ptr)
{
    (void)ptr;
    return 0;
}
int gpumem_device_ordinal(const void *ptr)
{
    (void)ptr;
    return -1;
}
int gpumem_range(const void *ptr, uintptr_t *base, size_t *size)
{
    (void)ptr, (void)base, (void)size;
    return -1;
}
int gpumem_dmabuf_fd(uintptr_t base, size_t size, int *fd)
{
    (void)base, (void)size, (void)fd;
    return -1;
}
int gpumem_dmabuf_supported(void)
{
    return 0;
}
int gpumem_probe_alloc(struct gpumem_probe *p, size_t size, char *err, size_t errlen)
{
    p->ptr = 0, p->size = size, p->pushed = 0;
    return gpumem_load(err, errlen);
}
void gpumem_probe_free(struct gpumem_probe *p)
{
    (void)p;
}
#endif
