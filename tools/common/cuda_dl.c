/* tools/common/cuda_dl.c: CUDA driver API through dlopen (see cuda_dl.h).
 * Built only when configure found cuda.h; the types come from it, the code
 * from libcuda.so.1 at run time. */
#include "config.h"

#include "strfmt.h"
#include "cuda_dl.h"

#include <cuda.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cuda_dl {
    void *handle;
    CUresult (*init)(unsigned int);
    CUresult (*driver_get_version)(int *);
    CUresult (*device_get_count)(int *);
    CUresult (*device_get)(CUdevice *, int);
    CUresult (*device_get_attribute)(int *, CUdevice_attribute, CUdevice);
    CUresult (*device_get_pci_bus_id)(char *, int, CUdevice);
    CUresult (*primary_ctx_retain)(CUcontext *, CUdevice);
    CUresult (*ctx_set_current)(CUcontext);
    CUresult (*mem_alloc)(CUdeviceptr *, size_t);
    CUresult (*mem_free)(CUdeviceptr);
    CUresult (*memset_d8)(CUdeviceptr, unsigned char, size_t);
    CUresult (*memcpy_dtoh)(void *, CUdeviceptr, size_t);
    CUresult (*pointer_set_attribute)(const void *, CUpointer_attribute, CUdeviceptr);
    CUresult (*get_error_string)(CUresult, const char **);
    CUresult (*mem_get_handle_for_range)(void *, CUdeviceptr, size_t, CUmemRangeHandleType,
                                         unsigned long long);
    /* VMM (cuda_dl_use_vmm) */
    CUresult (*granularity)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags);
    CUresult (*mem_create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                           unsigned long long);
    CUresult (*mem_release)(CUmemGenericAllocationHandle);
    CUresult (*addr_reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
    CUresult (*addr_free)(CUdeviceptr, size_t);
    CUresult (*mem_map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
    CUresult (*mem_unmap)(CUdeviceptr, size_t);
    CUresult (*set_access)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
    int vmm;
    struct { CUdeviceptr ptr; size_t len; } maps[8]; /* VMM mappings to undo */
    CUcontext ctx;
};

static const char *cu_err(struct cuda_dl *c, CUresult r)
{
    const char *s = NULL;
    if (c->get_error_string && c->get_error_string(r, &s) == CUDA_SUCCESS && s)
        return s;
    return "unknown CUDA error";
}

struct cuda_dl *cuda_dl_open(char *err, size_t errlen)
{
    struct cuda_dl *c = calloc(1, sizeof(*c));
    if (!c) {
        str_fmt(err, errlen, "out of memory");
        return NULL;
    }
    c->handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!c->handle) {
        str_fmt(err, errlen, "no CUDA driver (%s)", dlerror());
        free(c);
        return NULL;
    }
    struct { void **slot; const char *name; int required; } syms[] = {
        { (void **)&c->init, "cuInit", 1 },
        { (void **)&c->driver_get_version, "cuDriverGetVersion", 1 },
        { (void **)&c->device_get_count, "cuDeviceGetCount", 1 },
        { (void **)&c->device_get, "cuDeviceGet", 1 },
        { (void **)&c->device_get_attribute, "cuDeviceGetAttribute", 1 },
        { (void **)&c->device_get_pci_bus_id, "cuDeviceGetPCIBusId", 1 },
        { (void **)&c->primary_ctx_retain, "cuDevicePrimaryCtxRetain", 1 },
        { (void **)&c->ctx_set_current, "cuCtxSetCurrent", 1 },
        { (void **)&c->mem_alloc, "cuMemAlloc_v2", 1 },
        { (void **)&c->mem_free, "cuMemFree_v2", 1 },
        { (void **)&c->memset_d8, "cuMemsetD8_v2", 1 },
        { (void **)&c->memcpy_dtoh, "cuMemcpyDtoH_v2", 1 },
        { (void **)&c->pointer_set_attribute, "cuPointerSetAttribute", 1 },
        { (void **)&c->get_error_string, "cuGetErrorString", 0 },
        { (void **)&c->mem_get_handle_for_range, "cuMemGetHandleForAddressRange", 0 },
        { (void **)&c->granularity, "cuMemGetAllocationGranularity", 0 },
        { (void **)&c->mem_create, "cuMemCreate", 0 },
        { (void **)&c->mem_release, "cuMemRelease", 0 },
        { (void **)&c->addr_reserve, "cuMemAddressReserve", 0 },
        { (void **)&c->addr_free, "cuMemAddressFree", 0 },
        { (void **)&c->mem_map, "cuMemMap", 0 },
        { (void **)&c->mem_unmap, "cuMemUnmap", 0 },
        { (void **)&c->set_access, "cuMemSetAccess", 0 },
    };
    for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
        *syms[i].slot = dlsym(c->handle, syms[i].name);
        if (!*syms[i].slot && syms[i].required) {
            str_fmt(err, errlen, "libcuda.so.1 lacks %s", syms[i].name);
            cuda_dl_close(c);
            return NULL;
        }
    }
    CUresult r = c->init(0);
    if (r != CUDA_SUCCESS) {
        str_fmt(err, errlen, "cuInit failed: %s (%d)", cu_err(c, r), (int)r);
        cuda_dl_close(c);
        return NULL;
    }
    return c;
}

void cuda_dl_close(struct cuda_dl *c)
{
    if (!c)
        return;
    /* The primary context is left retained: the process is a short-lived
     * tool and releasing it while a verbs MR still maps its memory would
     * be the worse error. */
    if (c->handle)
        dlclose(c->handle);
    free(c);
}

int cuda_dl_device_count(struct cuda_dl *c)
{
    int n = 0;
    return c->device_get_count(&n) == CUDA_SUCCESS ? n : 0;
}

int cuda_dl_pci_bus_id(struct cuda_dl *c, int dev, char *buf, size_t len)
{
    CUdevice d;
    char id[64];
    if (c->device_get(&d, dev) != CUDA_SUCCESS ||
        c->device_get_pci_bus_id(id, (int)sizeof(id), d) != CUDA_SUCCESS)
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
    if (c->device_get(&d, dev) != CUDA_SUCCESS ||
        c->device_get_attribute(&v, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, d) != CUDA_SUCCESS)
        return -1;
    return v ? 1 : 0;
}

int cuda_dl_driver_version(struct cuda_dl *c)
{
    int v = 0;
    return c->driver_get_version(&v) == CUDA_SUCCESS ? v : 0;
}

int cuda_dl_use_vmm(struct cuda_dl *c, char *err, size_t errlen)
{
    if (!c->granularity || !c->mem_create || !c->mem_release || !c->addr_reserve || !c->addr_free ||
        !c->mem_map || !c->mem_unmap || !c->set_access) {
        str_fmt(err, errlen, "this CUDA driver lacks the VMM API (cuMemCreate/cuMemMap)");
        return -1;
    }
    c->vmm = 1;
    return 0;
}

/* cuMemCreate + cuMemAddressReserve + cuMemMap + cuMemSetAccess; the handle
 * is released at once: the mapping keeps the memory until cuMemUnmap. */
static CUresult alloc_vmm(struct cuda_dl *c, CUdevice d, size_t *len, CUdeviceptr *out, const char **step)
{
    int slot = -1;
    for (int i = 0; i < (int)(sizeof(c->maps) / sizeof(c->maps[0])) && slot < 0; i++)
        if (!c->maps[i].ptr)
            slot = i;
    *step = "a free mapping slot";
    if (slot < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof(prop));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = d;
    prop.allocFlags.gpuDirectRDMACapable = 1;
    size_t gran = 0;
    *step = "cuMemGetAllocationGranularity";
    CUresult r = c->granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
    if (r != CUDA_SUCCESS)
        return r;
    if (gran)
        *len = (*len + gran - 1) / gran * gran;
    CUmemGenericAllocationHandle h;
    *step = "cuMemCreate";
    if ((r = c->mem_create(&h, *len, &prop, 0)) != CUDA_SUCCESS)
        return r;
    CUdeviceptr p = 0;
    *step = "cuMemAddressReserve";
    if ((r = c->addr_reserve(&p, *len, gran, 0, 0)) != CUDA_SUCCESS) {
        c->mem_release(h);
        return r;
    }
    *step = "cuMemMap";
    r = c->mem_map(p, *len, 0, h, 0);
    c->mem_release(h);
    if (r != CUDA_SUCCESS) {
        c->addr_free(p, *len);
        return r;
    }
    CUmemAccessDesc acc;
    memset(&acc, 0, sizeof(acc));
    acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    acc.location.id = d;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    *step = "cuMemSetAccess";
    if ((r = c->set_access(p, *len, &acc, 1)) != CUDA_SUCCESS) {
        c->mem_unmap(p, *len);
        c->addr_free(p, *len);
        return r;
    }
    c->maps[slot].ptr = p;
    c->maps[slot].len = *len;
    *out = p;
    return CUDA_SUCCESS;
}

int cuda_dl_alloc(struct cuda_dl *c, int dev, size_t len, void **ptr, char *err, size_t errlen)
{
    CUdevice d;
    CUresult r = c->device_get(&d, dev);
    if (r == CUDA_SUCCESS && !c->ctx)
        r = c->primary_ctx_retain(&c->ctx, d);
    if (r == CUDA_SUCCESS)
        r = c->ctx_set_current(c->ctx);
    CUdeviceptr p = 0;
    if (r == CUDA_SUCCESS && c->vmm) {
        const char *step = "";
        r = alloc_vmm(c, d, &len, &p, &step);
        if (r != CUDA_SUCCESS) {
            str_fmt(err, errlen, "GPU %d: VMM allocation of %zu bytes: %s failed: %s", dev, len, step,
                    cu_err(c, r));
            return -1;
        }
        *ptr = (void *)(uintptr_t)p;
        return 0;
    }
    if (r == CUDA_SUCCESS)
        r = c->mem_alloc(&p, len);
    if (r != CUDA_SUCCESS) {
        str_fmt(err, errlen, "GPU %d: cuMemAlloc(%zu) failed: %s", dev, len, cu_err(c, r));
        return -1;
    }
    /* GPUDirect RDMA wants synchronous memory operations on the range so
     * that a cuMemcpy after a NIC write sees the written data. */
    unsigned int one = 1;
    c->pointer_set_attribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, p);
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
            c->mem_unmap(p, c->maps[i].len);
            c->addr_free(p, c->maps[i].len);
            c->maps[i].ptr = 0;
            return;
        }
    c->mem_free(p);
}

int cuda_dl_memset(struct cuda_dl *c, void *ptr, unsigned char val, size_t len)
{
    return c->memset_d8((CUdeviceptr)(uintptr_t)ptr, val, len) == CUDA_SUCCESS ? 0 : -1;
}

int cuda_dl_copy_to_host(struct cuda_dl *c, void *dst, const void *src, size_t len)
{
    return c->memcpy_dtoh(dst, (CUdeviceptr)(uintptr_t)src, len) == CUDA_SUCCESS ? 0 : -1;
}

int cuda_dl_dmabuf_fd(struct cuda_dl *c, void *ptr, size_t len, int *fd, char *err, size_t errlen)
{
    if (!c->mem_get_handle_for_range) {
        str_fmt(err, errlen, "CUDA driver lacks cuMemGetHandleForAddressRange (needs CUDA 11.7+)");
        return -1;
    }
    int out = -1;
    CUresult r = c->mem_get_handle_for_range(&out, (CUdeviceptr)(uintptr_t)ptr, len,
                                             CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
    if (r != CUDA_SUCCESS) {
        str_fmt(err, errlen, "cuMemGetHandleForAddressRange(DMA_BUF_FD, %zu bytes) failed: %s",
                 len, cu_err(c, r));
        return -1;
    }
    *fd = out;
    return 0;
}
