/* gpu.c: CUDA memory behind an MR, through the CUDA driver API loaded with
 * dlopen("libcuda.so.1") on first need (never linked, so softnic loads on
 * machines without CUDA).  Copies run in the NIC thread that needs them,
 * which first makes the pointer's own context current.
 * Without libcuda every pointer is host memory and copies fail with ENODEV. */
#include "softnic.h"

#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>

/* Facts from the CUDA driver API (cuda.h): */
typedef int cu_result;                       /* CUresult, 0 = CUDA_SUCCESS */
typedef unsigned long long cu_devptr;        /* CUdeviceptr */
typedef void *cu_ctx;                        /* CUcontext */
#define CU_POINTER_ATTRIBUTE_CONTEXT 1
#define CU_POINTER_ATTRIBUTE_MEMORY_TYPE 2
#define CU_MEMORYTYPE_DEVICE 2

static struct {
    pthread_once_t once;
    bool ok;
    cu_result (*init)(unsigned int);
    cu_result (*ptr_attr)(void *, int, cu_devptr);
    cu_result (*ctx_set)(cu_ctx);
    cu_result (*htod)(cu_devptr, const void *, size_t);
    cu_result (*dtoh)(void *, cu_devptr, size_t);
} cu = { .once = PTHREAD_ONCE_INIT };

static void gpu_load(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return;
    *(void **)&cu.init = dlsym(h, "cuInit");
    *(void **)&cu.ptr_attr = dlsym(h, "cuPointerGetAttribute");
    *(void **)&cu.ctx_set = dlsym(h, "cuCtxSetCurrent");
    *(void **)&cu.htod = dlsym(h, "cuMemcpyHtoD_v2");
    *(void **)&cu.dtoh = dlsym(h, "cuMemcpyDtoH_v2");
    if (!cu.init || !cu.ptr_attr || !cu.ctx_set || !cu.htod || !cu.dtoh || cu.init(0) != 0) {
        dlclose(h);
        return;
    }
    cu.ok = true;   /* the handle stays open for the life of the process */
}

bool gpu_is_device_ptr(const void *ptr)
{
    pthread_once(&cu.once, gpu_load);
    if (!cu.ok)
        return false;
    unsigned int type = 0;
    if (cu.ptr_attr(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (cu_devptr)(uintptr_t)ptr) != 0)
        return false;
    return type == CU_MEMORYTYPE_DEVICE;
}

static int gpu_use_ctx_of(const void *dptr)
{
    cu_ctx ctx = NULL;
    if (cu.ptr_attr(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT, (cu_devptr)(uintptr_t)dptr) != 0 || !ctx)
        return EFAULT;
    static __thread cu_ctx current;
    if (current != ctx) {
        if (cu.ctx_set(ctx) != 0)
            return EFAULT;
        current = ctx;
    }
    return 0;
}

int gpu_copy_to_device(void *dst, const void *src, size_t len)
{
    pthread_once(&cu.once, gpu_load);
    if (!cu.ok)
        return ENODEV;
    int err = gpu_use_ctx_of(dst);
    if (err)
        return err;
    return cu.htod((cu_devptr)(uintptr_t)dst, src, len) == 0 ? 0 : EIO;
}

int gpu_copy_from_device(void *dst, const void *src, size_t len)
{
    pthread_once(&cu.once, gpu_load);
    if (!cu.ok)
        return ENODEV;
    int err = gpu_use_ctx_of(src);
    if (err)
        return err;
    return cu.dtoh(dst, (cu_devptr)(uintptr_t)src, len) == 0 ? 0 : EIO;
}
