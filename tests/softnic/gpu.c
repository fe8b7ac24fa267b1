/* gpu.c: CUDA memory behind an MR, through the project's one CUDA driver
 * table (plugin/ib/cudawrap.c, compiled into softnic; libcuda.so.1 loaded
 * with dlopen on first need, never linked, so softnic loads on machines
 * without CUDA).  Copies run in the NIC thread that needs them, which first
 * makes the pointer's own context current.
 * Without libcuda every pointer is host memory and copies fail with ENODEV. */
#include "softnic.h"

#include <errno.h>
#include <stddef.h>

#include "../../plugin/ib/cudawrap.h"

/* Facts from the CUDA driver API (cuda.h): */
#define CU_STREAM_NON_BLOCKING 0x1
#define CU_POINTER_ATTRIBUTE_CONTEXT 1
#define CU_POINTER_ATTRIBUTE_MEMORY_TYPE 2
#define CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL 9
#define CU_MEMORYTYPE_DEVICE 2

/* The driver table, loaded on first need; NULL without a usable CUDA. */
static const struct cudawrap *gpu_driver(void)
{
    return cudawrap_get(NULL, 0);
}

bool gpu_is_device_ptr(const void *ptr)
{
    const struct cudawrap *cu = gpu_driver();
    if (!cu)
        return false;
    unsigned int type = 0;
    if (cu->pointer_get_attribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (cudawrap_devptr)(uintptr_t)ptr) != 0)
        return false;
    return type == CU_MEMORYTYPE_DEVICE;
}

/* Memory from cuMemCreate + cuMemMap (NCCL's default allocator) belongs to
 * no context: copies then run in the primary context of the pointer's GPU,
 * retained once per GPU for the life of the process. */
static cudawrap_ctx gpu_primary_ctx_of(const void *dptr)
{
    static cudawrap_ctx primary[64];
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    const struct cudawrap *cu = cudawrap_peek();
    int ordinal = -1, dev;
    if (cu->pointer_get_attribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, (cudawrap_devptr)(uintptr_t)dptr) != 0 ||
        ordinal < 0 || ordinal >= 64)
        return NULL;
    pthread_mutex_lock(&mu);
    if (!primary[ordinal] && cu->device_get(&dev, ordinal) == 0 && cu->primary_ctx_retain(&primary[ordinal], dev) != 0)
        primary[ordinal] = NULL;
    cudawrap_ctx ctx = primary[ordinal];
    pthread_mutex_unlock(&mu);
    return ctx;
}

/* The NIC thread's copy stream in the pointer's context. A real NIC writes
 * over PCIe with no regard for CUDA streams, so the copies must not wait for
 * kernels either: a plain cuMemcpy runs on the legacy default stream and
 * would wait for an NCCL kernel that is itself waiting for this data. A
 * non-blocking stream per (thread, context) orders nothing but our copies. */
static int gpu_stream_for(const void *dptr, cudawrap_stream *out)
{
    const struct cudawrap *cu = cudawrap_peek();
    cudawrap_ctx ctx = NULL;
    if (cu->pointer_get_attribute(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT, (cudawrap_devptr)(uintptr_t)dptr) != 0 || !ctx)
        ctx = gpu_primary_ctx_of(dptr);
    if (!ctx) {
        SN_LOG("gpu: %p is GPU memory of no context or GPU that this thread can use", dptr);
        return EFAULT;
    }
    static __thread struct { cudawrap_ctx ctx; cudawrap_stream stream; } cache[4];
    static __thread cudawrap_ctx current;
    if (current != ctx) {
        if (cu->ctx_set_current(ctx) != 0)
            return EFAULT;
        current = ctx;
    }
    for (int i = 0; i < 4; i++) {
        if (cache[i].ctx == ctx) {
            *out = cache[i].stream;
            return 0;
        }
        if (!cache[i].ctx) {
            if (cu->stream_create(&cache[i].stream, CU_STREAM_NON_BLOCKING) != 0)
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
    const struct cudawrap *cu = gpu_driver();
    if (!cu)
        return ENODEV;
    cudawrap_stream st;
    int err = gpu_stream_for(dst, &st);
    if (err)
        return err;
    cudawrap_result r = cu->memcpy_htod_async((cudawrap_devptr)(uintptr_t)dst, src, len, st);
    if (!r)
        r = cu->stream_synchronize(st);
    if (r) {
        SN_LOG("gpu: copy of %zu bytes into GPU memory at %p failed: CUresult %d", len, dst, r);
        return EIO;
    }
    return 0;
}

int gpu_copy_from_device(void *dst, const void *src, size_t len)
{
    const struct cudawrap *cu = gpu_driver();
    if (!cu)
        return ENODEV;
    cudawrap_stream st;
    int err = gpu_stream_for(src, &st);
    if (err)
        return err;
    cudawrap_result r = cu->memcpy_dtoh_async(dst, (cudawrap_devptr)(uintptr_t)src, len, st);
    if (!r)
        r = cu->stream_synchronize(st);
    if (r) {
        SN_LOG("gpu: copy of %zu bytes from GPU memory at %p failed: CUresult %d", len, src, r);
        return EIO;
    }
    return 0;
}
