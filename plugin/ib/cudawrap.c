/* plugin/ib/cudawrap.c: libcuda through dlopen (cudawrap.h). */
#include "cudawrap.h"

#include <stdio.h>

#ifdef HAVE_CUDA
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>

struct cu {
    CUresult (*init)(unsigned int);
    CUresult (*ctx_get_current)(CUcontext *);
    CUresult (*ctx_get_device)(CUdevice *);
    CUresult (*ctx_push)(CUcontext);
    CUresult (*ctx_pop)(CUcontext *);
    CUresult (*primary_retain)(CUcontext *, CUdevice);
    CUresult (*primary_release)(CUdevice);
    CUresult (*device_get)(CUdevice *, int);
    CUresult (*device_attr)(int *, CUdevice_attribute, CUdevice);
    CUresult (*mem_alloc)(CUdeviceptr *, size_t);
    CUresult (*mem_free)(CUdeviceptr);
    CUresult (*pointer_attr)(void *, CUpointer_attribute, CUdeviceptr);
    CUresult (*address_range)(CUdeviceptr *, size_t *, CUdeviceptr);
    CUresult (*handle_for_range)(void *, CUdeviceptr, size_t, CUmemRangeHandleType, unsigned long long);
};

static struct cu cu;
static int cu_state; /* 0 untried, 1 loaded, -1 failed */
static char cu_err[256];
static pthread_mutex_t cu_mu = PTHREAD_MUTEX_INITIALIZER;

static void load(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(cu_err, sizeof(cu_err), "cannot load libcuda.so.1: %s", dlerror());
        cu_state = -1;
        return;
    }
    struct {
        void **dst;
        const char *name;
        int optional;
    } syms[] = {
        { (void **)&cu.init, "cuInit", 0 },
        { (void **)&cu.ctx_get_current, "cuCtxGetCurrent", 0 },
        { (void **)&cu.ctx_get_device, "cuCtxGetDevice", 0 },
        { (void **)&cu.ctx_push, "cuCtxPushCurrent_v2", 0 },
        { (void **)&cu.ctx_pop, "cuCtxPopCurrent_v2", 0 },
        { (void **)&cu.primary_retain, "cuDevicePrimaryCtxRetain", 0 },
        { (void **)&cu.primary_release, "cuDevicePrimaryCtxRelease_v2", 0 },
        { (void **)&cu.device_get, "cuDeviceGet", 0 },
        { (void **)&cu.device_attr, "cuDeviceGetAttribute", 0 },
        { (void **)&cu.mem_alloc, "cuMemAlloc_v2", 0 },
        { (void **)&cu.mem_free, "cuMemFree_v2", 0 },
        { (void **)&cu.pointer_attr, "cuPointerGetAttribute", 0 },
        { (void **)&cu.address_range, "cuMemGetAddressRange_v2", 0 },
        { (void **)&cu.handle_for_range, "cuMemGetHandleForAddressRange", 1 },
    };
    for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
        *syms[i].dst = dlsym(h, syms[i].name);
        if (!*syms[i].dst && !syms[i].optional) {
            snprintf(cu_err, sizeof(cu_err), "libcuda.so.1 lacks %s", syms[i].name);
            cu_state = -1;
            return;
        }
    }
    CUresult r = cu.init(0);
    if (r != CUDA_SUCCESS) {
        snprintf(cu_err, sizeof(cu_err), "cuInit failed with CUresult %d (no GPU or driver problem)", (int)r);
        cu_state = -1;
        return;
    }
    cu_state = 1;
}

int cudawrap_load(char *err, size_t errlen)
{
    pthread_mutex_lock(&cu_mu);
    if (cu_state == 0)
        load();
    int s = cu_state;
    pthread_mutex_unlock(&cu_mu);
    if (s < 0 && err)
        snprintf(err, errlen, "%s", cu_err);
    return s > 0 ? 0 : -1;
}

static int ready(void)
{
    return __atomic_load_n(&cu_state, __ATOMIC_ACQUIRE) > 0;
}

int cudawrap_is_device_ptr(const void *ptr)
{
    if (!ready())
        return 0;
    unsigned int type = 0;
    if (cu.pointer_attr(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)ptr) != CUDA_SUCCESS)
        return 0;
    return type == CU_MEMORYTYPE_DEVICE;
}

int cudawrap_range(const void *ptr, uintptr_t *base, size_t *size)
{
    CUdeviceptr b = 0;
    size_t s = 0;
    if (!ready() || cu.address_range(&b, &s, (CUdeviceptr)(uintptr_t)ptr) != CUDA_SUCCESS)
        return -1;
    *base = (uintptr_t)b;
    *size = s;
    return 0;
}

int cudawrap_dmabuf_fd(uintptr_t base, size_t size, int *fd)
{
    if (!ready() || !cu.handle_for_range)
        return -1;
    int f = -1;
    if (cu.handle_for_range(&f, (CUdeviceptr)base, size, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0) != CUDA_SUCCESS)
        return -1;
    *fd = f;
    return 0;
}

int cudawrap_dmabuf_supported(void)
{
    CUdevice d;
    int v = 0;
    if (!ready() || !cu.handle_for_range || cu.ctx_get_device(&d) != CUDA_SUCCESS)
        return 0;
    if (cu.device_attr(&v, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, d) != CUDA_SUCCESS)
        return 0;
    return v != 0;
}

int cudawrap_probe_alloc(struct cudawrap_probe *p, size_t size, char *err, size_t errlen)
{
    p->ptr = 0;
    p->size = size;
    p->pushed = 0;
    p->dev = -1;
    if (cudawrap_load(err, errlen))
        return -1;
    CUcontext cur = NULL;
    if (cu.ctx_get_current(&cur) != CUDA_SUCCESS || !cur) {
        /* no context on this thread (a host program): borrow GPU 0's primary one */
        CUdevice d;
        CUcontext pc;
        if (cu.device_get(&d, 0) != CUDA_SUCCESS || cu.primary_retain(&pc, d) != CUDA_SUCCESS ||
            cu.ctx_push(pc) != CUDA_SUCCESS) {
            snprintf(err, errlen, "no CUDA context and GPU 0's primary context is not usable");
            return -1;
        }
        p->pushed = 1;
        p->dev = (int)d;
    }
    CUdeviceptr dp;
    CUresult r = cu.mem_alloc(&dp, size);
    if (r != CUDA_SUCCESS) {
        snprintf(err, errlen, "cuMemAlloc(%zu) failed with CUresult %d", size, (int)r);
        cudawrap_probe_free(p);
        return -1;
    }
    p->ptr = (uintptr_t)dp;
    return 0;
}

void cudawrap_probe_free(struct cudawrap_probe *p)
{
    if (p->ptr)
        cu.mem_free((CUdeviceptr)p->ptr);
    p->ptr = 0;
    if (p->pushed) {
        CUcontext c;
        cu.ctx_pop(&c);
        cu.primary_release((CUdevice)p->dev);
        p->pushed = 0;
    }
}

#else /* built without CUDA headers: every GPU request fails with the reason */

int cudawrap_load(char *err, size_t errlen)
{
    if (err)
        snprintf(err, errlen, "railnet was built without CUDA (configure --with-cuda)");
    return -1;
}
int cudawrap_is_device_ptr(const void *ptr)
{
    (void)ptr;
    return 0;
}
int cudawrap_range(const void *ptr, uintptr_t *base, size_t *size)
{
    (void)ptr, (void)base, (void)size;
    return -1;
}
int cudawrap_dmabuf_fd(uintptr_t base, size_t size, int *fd)
{
    (void)base, (void)size, (void)fd;
    return -1;
}
int cudawrap_dmabuf_supported(void)
{
    return 0;
}
int cudawrap_probe_alloc(struct cudawrap_probe *p, size_t size, char *err, size_t errlen)
{
    p->ptr = 0, p->size = size, p->pushed = 0;
    return cudawrap_load(err, errlen);
}
void cudawrap_probe_free(struct cudawrap_probe *p)
{
    (void)p;
}
#endif
