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
typedef void *cu_stream;                     /* CUstream */
#define CU_STREAM_NON_BLOCKING 0x1
#define CU_POINTER_ATTRIBUTE_CONTEXT 1
#define CU_POINTER_ATTRIBUTE_MEMORY_TYPE 2
#define CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL 9
#define CU_MEMORYTYPE_DEVICE 2

static struct {
    pthread_once_t once;
    bool ok;
    cu_result (*init)(unsigned int);
    cu_result (*ptr_attr)(void *, int, cu_devptr);
    cu_result (*ctx_set)(cu_ctx);
    cu_result (*device_get)(int *, int);
    cu_result (*primary_retain)(cu_ctx *, int);
    cu_result (*htod)(cu_devptr, const void *, size_t, cu_stream);
    cu_result (*dtoh)(void *, cu_devptr, size_t, cu_stream);
    cu_result (*stream_create)(cu_stream *, unsigned int);
    cu_result (*stream_sync)(cu_stream);
} cu = { .once = PTHREAD_ONCE_INIT };

static void gpu_load(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return;
    *(void **)&cu.init = dlsym(h, "cuInit");
    *(void **)&cu.ptr_attr = dlsym(h, "cuPointerGetAttribute");
    *(void **)&cu.ctx_set = dlsym(h, "cuCtxSetCurrent");
    *(void **)&cu.htod = dlsym(h, "cuMemcpyHtoDAsync_v2");
    *(void **)&cu.dtoh = dlsym(h, "cuMemcpyDtoHAsync_v2");
    *(void **)&cu.stream_create = dlsym(h, "cuStreamCreate");
    *(void **)&cu.stream_sync = dlsym(h, "cuStreamSynchronize");
    *(void **)&cu.device_get = dlsym(h, "cuDeviceGet");
    *(void **)&cu.primary_retain = dlsym(h, "cuDevicePrimaryCtxRetain");
    if (!cu.init || !cu.ptr_attr || !cu.ctx_set || !cu.htod || !cu.dtoh || !cu.device_get || !cu.primary_retain ||
        !cu.stream_create || !cu.stream_sync ||
        cu.init(0) != 0) {
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

/* Memory from cuMemCreate + cuMemMap (NCCL's default allocator) belongs to
 * no context: copies then run in the primary context of the pointer's GPU,
 * retained once per GPU for the life of the process. */
static cu_ctx gpu_primary_ctx_of(const void *dptr)
{
    static cu_ctx primary[64];
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    int ordinal = -1, dev;
    if (cu.ptr_attr(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, (cu_devptr)(uintptr_t)dptr) != 0 || ordinal < 0 ||
        ordinal >= 64)
        return NULL;
    pthread_mutex_lock(&mu);
    if (!primary[ordinal] && cu.device_get(&dev, ordinal) == 0 && cu.primary_retain(&primary[ordinal], dev) != 0)
        primary[ordinal] = NULL;
    cu_ctx ctx = primary[ordinal];
    pthread_mutex_unlock(&mu);
    return ctx;
}

/* The NIC thread's copy stream in the pointer's context. A real NIC writes
 * over PCIe with no regard for CUDA streams, so the copies must not wait for
 * kernels either: a plain cuMemcpy runs on the legacy default stream and
 * would wait for an NCCL kernel that is itself waiting for this data. A
 * non-blocking stream per (thread, context) orders nothing but our copies. */
static int gpu_stream_for(const void *dptr, cu_stream *out)
{
    cu_ctx ctx = NULL;
    if (cu.ptr_attr(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT, (cu_devptr)(uintptr_t)dptr) != 0 || !ctx)
        ctx = gpu_primary_ctx_of(dptr);
    if (!ctx) {
        SN_LOG("gpu: %p is GPU memory of no context or GPU that this thread can use", dptr);
        return EFAULT;
    }
    static __thread struct { cu_ctx ctx; cu_stream stream; } cache[4];
    static __thread cu_ctx current;
    if (current != ctx) {
        if (cu.ctx_set(ctx) != 0)
            return EFAULT;
        current = ctx;
    }
    for (int i = 0; i < 4; i++) {
        if (cache[i].ctx == ctx) {
            *out = cache[i].stream;
            return 0;
        }
        if (!cache[i].ctx) {
            if (cu.stream_create(&cache[i].stream, CU_STREAM_NON_BLOCKING) != 0)
                return EIO;
            cache[i].ctx = ctx;
            *out = cache[i].stream;
            return 0;
        }
    }
    return EFAULT; /* more GPUs than one NIC thread serves */
}

int gpu_copy_to_device(void *dst, const void *src, size_t len)
{
    pthread_once(&cu.once, gpu_load);
    if (!cu.ok)
        return ENODEV;
    cu_stream st;
    int err = gpu_stream_for(dst, &st);
    if (err)
        return err;
    cu_result r = cu.htod((cu_devptr)(uintptr_t)dst, src, len, st);
    if (!r)
        r = cu.stream_sync(st);
    if (r) {
        SN_LOG("gpu: copy of %zu bytes into GPU memory at %p failed: CUresult %d", len, dst, r);
        return EIO;
    }
    return 0;
}

int gpu_copy_from_device(void *dst, const void *src, size_t len)
{
    pthread_once(&cu.once, gpu_load);
    if (!cu.ok)
        return ENODEV;
    cu_stream st;
    int err = gpu_stream_for(src, &st);
    if (err)
        return err;
    cu_result r = cu.dtoh(dst, (cu_devptr)(uintptr_t)src, len, st);
    if (!r)
        r = cu.stream_sync(st);
    if (r) {
        SN_LOG("gpu: copy of %zu bytes from GPU memory at %p failed: CUresult %d", len, src, r);
        return EIO;
    }
    return 0;
}
