/* gdaki_cuda.c: the CUDA driver calls of plugin/gdaki (see gdaki_cuda.h),
 * through the project's one driver table (plugin/ib/cudawrap.h).  Flag
 * values come from cuda.h; a build without it compiles the stubs at the
 * end, which say so. */
#include "config.h"

#include "gdaki_cuda.h"

#include <stdio.h>

#ifdef HAVE_CUDA
#include <cuda.h>

#include "cudawrap.h"

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

int gdaki_cuda_alloc(size_t len, uint64_t *dptr, char *err, size_t errlen)
{
    CUdeviceptr d;
    CUresult rc = drv()->mem_alloc(&d, len);
    if (rc != CUDA_SUCCESS)
        return fail(rc, "cuMemAlloc", err, errlen);
    *dptr = (uint64_t)d;
    return 0;
}

void gdaki_cuda_free(uint64_t dptr)
{
    if (drv() && dptr)
        drv()->mem_free((CUdeviceptr)dptr);
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
