/* gdaki_cuda.c: the dlopen'ed CUDA driver calls of plugin/gdaki (see
 * gdaki_cuda.h).  Types and flag values come from cuda.h; a build without
 * it compiles the stubs at the end, which say so. */
#include "config.h"

#include "gdaki_cuda.h"

#include <stdio.h>

#ifdef HAVE_CUDA
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>

/* The exported names are the versioned entry points cuda.h maps the plain
 * names to (cuMemAlloc is #defined to cuMemAlloc_v2 ...): resolve those. */
static struct {
    pthread_once_t once;
    char why[160];
    void *h;
    CUresult (*init)(unsigned int);
    CUresult (*device_get)(CUdevice *, int);
    CUresult (*device_count)(int *);
    CUresult (*ctx_retain)(CUcontext *, CUdevice);
    CUresult (*ctx_set_current)(CUcontext);
    CUresult (*host_register)(void *, size_t, unsigned int);
    CUresult (*host_unregister)(void *);
    CUresult (*host_get_dptr)(CUdeviceptr *, void *, unsigned int);
    CUresult (*mem_alloc)(CUdeviceptr *, size_t);
    CUresult (*mem_free)(CUdeviceptr);
    CUresult (*htod)(CUdeviceptr, const void *, size_t);
    CUresult (*dtoh)(void *, CUdeviceptr, size_t);
    CUresult (*error_string)(CUresult, const char **);
} cu = { .once = PTHREAD_ONCE_INIT };

static void cu_load(void)
{
    cu.h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!cu.h) {
        snprintf(cu.why, sizeof(cu.why), "no CUDA driver (libcuda.so.1: %s)", dlerror());
        return;
    }
    struct { void **slot; const char *name; } t[] = {
        { (void **)&cu.init, "cuInit" },
        { (void **)&cu.device_get, "cuDeviceGet" },
        { (void **)&cu.device_count, "cuDeviceGetCount" },
        { (void **)&cu.ctx_retain, "cuDevicePrimaryCtxRetain" },
        { (void **)&cu.ctx_set_current, "cuCtxSetCurrent" },
        { (void **)&cu.host_register, "cuMemHostRegister_v2" },
        { (void **)&cu.host_unregister, "cuMemHostUnregister" },
        { (void **)&cu.host_get_dptr, "cuMemHostGetDevicePointer_v2" },
        { (void **)&cu.mem_alloc, "cuMemAlloc_v2" },
        { (void **)&cu.mem_free, "cuMemFree_v2" },
        { (void **)&cu.htod, "cuMemcpyHtoD_v2" },
        { (void **)&cu.dtoh, "cuMemcpyDtoH_v2" },
        { (void **)&cu.error_string, "cuGetErrorString" },
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        *t[i].slot = dlsym(cu.h, t[i].name);
        if (!*t[i].slot) {
            snprintf(cu.why, sizeof(cu.why), "libcuda.so.1 lacks %s", t[i].name);
            dlclose(cu.h);
            cu.h = NULL;
            return;
        }
    }
    CUresult rc = cu.init(0);
    if (rc != CUDA_SUCCESS) {
        const char *s = NULL;
        cu.error_string(rc, &s);
        snprintf(cu.why, sizeof(cu.why), "cuInit failed: %s (no usable GPU?)", s ? s : "?");
        cu.h = NULL;
    }
}

static int fail(CUresult rc, const char *what, char *err, size_t errlen)
{
    const char *s = NULL;
    if (cu.error_string)
        cu.error_string(rc, &s);
    snprintf(err, errlen, "%s: %s (CUresult %d)", what, s ? s : "?", (int)rc);
    return -1;
}

int gdaki_cuda_bind(int dev, char *err, size_t errlen)
{
    CUdevice d;
    CUcontext ctx;
    CUresult rc = cu.device_get(&d, dev);
    if (rc != CUDA_SUCCESS)
        return fail(rc, "cuDeviceGet", err, errlen);
    /* Retained once per call; the primary context lives as long as the
     * process, which is what the CUDA runtime of the caller shares too. */
    if ((rc = cu.ctx_retain(&ctx, d)) != CUDA_SUCCESS)
        return fail(rc, "cuDevicePrimaryCtxRetain", err, errlen);
    if ((rc = cu.ctx_set_current(ctx)) != CUDA_SUCCESS)
        return fail(rc, "cuCtxSetCurrent", err, errlen);
    return 0;
}

int gdaki_cuda_open(int dev, char *err, size_t errlen)
{
    pthread_once(&cu.once, cu_load);
    if (!cu.h) {
        snprintf(err, errlen, "%s", cu.why);
        return -1;
    }
    int n = 0;
    if (cu.device_count(&n) != CUDA_SUCCESS || dev < 0 || dev >= n) {
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
    CUresult rc = cu.host_register(p, len, flags);
    *owned = rc == CUDA_SUCCESS;
    if (rc == CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED)
        rc = CUDA_SUCCESS;
    if (rc != CUDA_SUCCESS)
        return fail(rc, io ? "cuMemHostRegister(IOMEMORY)" : "cuMemHostRegister", err, errlen);
    CUdeviceptr d = 0;
    if ((rc = cu.host_get_dptr(&d, p, 0)) != CUDA_SUCCESS) {
        if (*owned)
            cu.host_unregister(p);
        return fail(rc, "cuMemHostGetDevicePointer", err, errlen);
    }
    *dptr = (uint64_t)d;
    return 0;
}

void gdaki_cuda_host_unregister(void *p)
{
    if (cu.h)
        cu.host_unregister(p);
}

int gdaki_cuda_alloc(size_t len, uint64_t *dptr, char *err, size_t errlen)
{
    CUdeviceptr d;
    CUresult rc = cu.mem_alloc(&d, len);
    if (rc != CUDA_SUCCESS)
        return fail(rc, "cuMemAlloc", err, errlen);
    *dptr = (uint64_t)d;
    return 0;
}

void gdaki_cuda_free(uint64_t dptr)
{
    if (cu.h && dptr)
        cu.mem_free((CUdeviceptr)dptr);
}

int gdaki_cuda_htod(uint64_t dst, const void *src, size_t len, char *err, size_t errlen)
{
    CUresult rc = cu.htod((CUdeviceptr)dst, src, len);
    return rc == CUDA_SUCCESS ? 0 : fail(rc, "cuMemcpyHtoD", err, errlen);
}

int gdaki_cuda_dtoh(void *dst, uint64_t src, size_t len, char *err, size_t errlen)
{
    CUresult rc = cu.dtoh(dst, (CUdeviceptr)src, len);
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
