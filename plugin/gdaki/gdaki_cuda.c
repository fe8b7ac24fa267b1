/* gdaki_cuda.c: the CUDA driver calls of plugin/gdaki (see gdaki_cuda.h),
 * through the project's one driver table (plugin/ib/cudawrap.h).  Flag
 * values come from cuda.h; a build without it compiles the stubs at the
 * end, which say so. */
#include "config.h"

#include "gdaki_cuda.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef HAVE_CUDA
#include <cuda.h>

#include "cudawrap.h"
#include "log.h"

/* Loaded by gdaki_cuda_open; the other calls need it (gdaki_cuda.h). */
static const struct cudawrap *drv(void)
{
    return cudawrap_peek();
}

static int fail(CUresult rc, const char *what, char *err, size_t errlen)
{
    snprintf(err, errlen, "%s: %s (CUresult %d)", what, cudawrap_error_string(rc), (int)rc);
    return -1;
}

int gdaki_cuda_bind(int dev, char *err, size_t errlen)
{
    CUdevice d;
    CUcontext ctx;
    CUresult rc = drv()->device_get(&d, dev);
    if (rc != CUDA_SUCCESS)
        return fail(rc, "cuDeviceGet", err, errlen);
    /* Retained once per call; the primary context lives as long as the
     * process, which is what the CUDA runtime of the caller shares too. */
    if ((rc = drv()->primary_ctx_retain(&ctx, d)) != CUDA_SUCCESS)
        return fail(rc, "cuDevicePrimaryCtxRetain", err, errlen);
    if ((rc = drv()->ctx_set_current(ctx)) != CUDA_SUCCESS)
        return fail(rc, "cuCtxSetCurrent", err, errlen);
    return 0;
}

int gdaki_cuda_open(int dev, char *err, size_t errlen)
{
    if (!cudawrap_get(err, errlen))
        return -1;
    int n = 0;
    if (drv()->device_get_count(&n) != CUDA_SUCCESS || dev < 0 || dev >= n) {
        snprintf(err, errlen, "CUDA device %d not present (%d GPUs)", dev, n);
        return -1;
    }
    return gdaki_cuda_bind(dev, err, errlen);
}

int gdaki_cuda_host_register(void *p, size_t len, int io, uint64_t *dptr, int *owned,
                             char *err, size_t errlen)
{
    unsigned flags = CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP;
    if (io)
        flags |= CU_MEMHOSTREGISTER_IOMEMORY;
    CUresult rc = drv()->mem_host_register(p, len, flags);
    *owned = rc == CUDA_SUCCESS;
    if (rc == CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED)
        rc = CUDA_SUCCESS;
    if (rc != CUDA_SUCCESS)
        return fail(rc, io ? "cuMemHostRegister(IOMEMORY)" : "cuMemHostRegister", err, errlen);
    CUdeviceptr d = 0;
    if ((rc = drv()->mem_host_get_device_pointer(&d, p, 0)) != CUDA_SUCCESS) {
        if (*owned)
            drv()->mem_host_unregister(p);
        return fail(rc, "cuMemHostGetDevicePointer", err, errlen);
    }
    *dptr = (uint64_t)d;
    return 0;
}

void gdaki_cuda_host_unregister(void *p)
{
    if (drv())
        drv()->mem_host_unregister(p);
}

/* GPU memory of no context: cuMemCreate + cuMemMap (the VMM API), as NCCL
 * allocates its own buffers, rather than cuMemAlloc, whose memory belongs
 * to the application's context. On a NIC the difference is nil (DMA goes
 * through no context). On softnic, where NIC accesses to GPU memory are
 * CUDA copies, a copy to memory of the application's context runs in that
 * context, and there it can queue behind the application's kernels: under
 * MPS, nccl-tests' GIN alltoall queued two kernels back to back, the
 * second waited for the first, the first spun for a signal whose atomic
 * was such a copy, and the job hung. Copies to memory of no context run in
 * softnic's own. cuMemAlloc remains the fallback where the driver lacks the
 * VMM API or refuses it. */
struct vmm_block {
    CUdeviceptr ptr;
    size_t len;
    struct vmm_block *next;
};
static struct vmm_block *vmm_blocks;
static pthread_mutex_t vmm_lock = PTHREAD_MUTEX_INITIALIZER;

static CUresult alloc_vmm(size_t len, CUdeviceptr *out, const char **step)
{
    const struct cudawrap *cu = drv();
    CUdevice dev;
    *step = "cuCtxGetDevice";
    CUresult rc = cu->ctx_get_device(&dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    struct vmm_block *b = calloc(1, sizeof(*b));
    *step = "malloc";
    if (!b)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUdeviceptr p = 0;
    if ((rc = cudawrap_vmm_alloc(cu, dev, &len, &p, step)) != CUDA_SUCCESS) {
        free(b);
        return rc;
    }
    b->ptr = p;
    b->len = len;
    pthread_mutex_lock(&vmm_lock);
    b->next = vmm_blocks;
    vmm_blocks = b;
    pthread_mutex_unlock(&vmm_lock);
    *out = p;
    return CUDA_SUCCESS;
}

/* The VMM block at p, taken off the list; NULL for cuMemAlloc memory. */
static struct vmm_block *vmm_take(CUdeviceptr p)
{
    pthread_mutex_lock(&vmm_lock);
    struct vmm_block **at = &vmm_blocks;
    while (*at && (*at)->ptr != p)
        at = &(*at)->next;
    struct vmm_block *b = *at;
    if (b)
        *at = b->next;
    pthread_mutex_unlock(&vmm_lock);
    return b;
}

int gdaki_cuda_alloc(size_t len, uint64_t *dptr, char *err, size_t errlen)
{
    const struct cudawrap *cu = drv();
    CUdeviceptr d = 0;
    const char *step = "the VMM API";
    CUresult rc = CUDA_ERROR_NOT_SUPPORTED;
    if (cudawrap_vmm_supported(cu) && cu->ctx_get_device)
        rc = alloc_vmm(len, &d, &step);
    if (rc != CUDA_SUCCESS) {
        static int said;
        if (!__atomic_exchange_n(&said, 1, __ATOMIC_ACQ_REL))
            INFO(NCCL_INIT | NCCL_NET, "NET/railnet/GDAKI: GPU queues and tables by cuMemAlloc: %s: %s", step,
                 rc == CUDA_ERROR_NOT_SUPPORTED ? "not supported" : cudawrap_error_string(rc));
        if ((rc = cu->mem_alloc(&d, len)) != CUDA_SUCCESS)
            return fail(rc, "cuMemAlloc", err, errlen);
    }
    *dptr = (uint64_t)d;
    return 0;
}

void gdaki_cuda_free(uint64_t dptr)
{
    if (!drv() || !dptr)
        return;
    struct vmm_block *b = vmm_take((CUdeviceptr)dptr);
    if (b) {
        cudawrap_vmm_free(drv(), b->ptr, b->len);
        free(b);
    } else {
        drv()->mem_free((CUdeviceptr)dptr);
    }
}

int gdaki_cuda_htod(uint64_t dst, const void *src, size_t len, char *err, size_t errlen)
{
    CUresult rc = drv()->memcpy_htod((CUdeviceptr)dst, src, len);
    return rc == CUDA_SUCCESS ? 0 : fail(rc, "cuMemcpyHtoD", err, errlen);
}

int gdaki_cuda_dtoh(void *dst, uint64_t src, size_t len, char *err, size_t errlen)
{
    CUresult rc = drv()->memcpy_dtoh(dst, (CUdeviceptr)src, len);
    return rc == CUDA_SUCCESS ? 0 : fail(rc, "cuMemcpyDtoH", err, errlen);
}

#else /* !HAVE_CUDA */

static int none(char *err, size_t errlen)
{
    snprintf(err, errlen, "built without CUDA (configure found no cuda.h; --with-cuda=DIR)");
    return -1;
}

int gdaki_cuda_open(int dev, char *err, size_t errlen) { (void)dev; return none(err, errlen); }
int gdaki_cuda_bind(int dev, char *err, size_t errlen) { (void)dev; return none(err, errlen); }
int gdaki_cuda_host_register(void *p, size_t len, int io, uint64_t *dptr, int *owned,
                             char *err, size_t errlen)
{
    (void)p; (void)len; (void)io; (void)dptr;
    *owned = 0;
    return none(err, errlen);
}
void gdaki_cuda_host_unregister(void *p) { (void)p; }
int gdaki_cuda_alloc(size_t len, uint64_t *dptr, char *err, size_t errlen)
{
    (void)len; (void)dptr;
    return none(err, errlen);
}
void gdaki_cuda_free(uint64_t dptr) { (void)dptr; }
int gdaki_cuda_htod(uint64_t dst, const void *src, size_t len, char *err, size_t errlen)
{
    (void)dst; (void)src; (void)len;
    return none(err, errlen);
}
int gdaki_cuda_dtoh(void *dst, uint64_t src, size_t len, char *err, size_t errlen)
{
    (void)dst; (void)src; (void)len;
    return none(err, errlen);
}

#endif
