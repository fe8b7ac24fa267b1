/* plugin/ib/cudawrap.c: the CUDA driver table, loaded once (cudawrap.h). */
#include "cudawrap.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

/* cuGetProcAddress_v2 (CUDA 12.0): symbol, pfn, cudaVersion, flags, status. */
typedef cudawrap_result (*proc_address_fn)(const char *, void **, int, uint64_t, int *);
#define CU_GET_PROC_ADDRESS_LEGACY_STREAM 1 /* cuda.h: CUdriverProcAddress_flags */

static struct cudawrap cw;
static const struct cudawrap *cw_table; /* set once loaded and cuInit'ed */
static char cw_why[256];
static pthread_once_t cw_once = PTHREAD_ONCE_INIT;

/* Every entry point: its field, its base name (what cuGetProcAddress takes),
 * the suffix of the versioned export that is its CUDA 12.0 ABI (what dlsym
 * takes), and whether a driver without it is usable. */
#define E(field, base, suffix, required) { (void **)&cw.field, base, base suffix, required }
static const struct entry {
    void **slot;
    const char *base;
    const char *exported;
    int required;
} entries[] = {
    E(init, "cuInit", "", 1),
    E(driver_get_version, "cuDriverGetVersion", "", 1),
    E(get_error_string, "cuGetErrorString", "", 1),
    E(device_get, "cuDeviceGet", "", 1),
    E(device_get_count, "cuDeviceGetCount", "", 1),
    E(device_get_attribute, "cuDeviceGetAttribute", "", 1),
    E(device_get_pci_bus_id, "cuDeviceGetPCIBusId", "", 1),
    E(primary_ctx_retain, "cuDevicePrimaryCtxRetain", "", 1),
    E(primary_ctx_release, "cuDevicePrimaryCtxRelease", "_v2", 1),
    E(ctx_get_current, "cuCtxGetCurrent", "", 1),
    E(ctx_set_current, "cuCtxSetCurrent", "", 1),
    E(ctx_get_device, "cuCtxGetDevice", "", 1),
    E(ctx_push_current, "cuCtxPushCurrent", "_v2", 1),
    E(ctx_pop_current, "cuCtxPopCurrent", "_v2", 1),
    /* by its versioned name: cuGetProcAddress's 12.0 answer for cuCtxCreate
     * (_v2) fails with CUDA_ERROR_INVALID_VALUE on CUDA 13 drivers */
    E(ctx_create, "cuCtxCreate_v4", "", 0),
    E(mem_alloc, "cuMemAlloc", "_v2", 1),
    E(mem_free, "cuMemFree", "_v2", 1),
    E(mem_get_address_range, "cuMemGetAddressRange", "_v2", 1),
    E(mem_get_info, "cuMemGetInfo", "_v2", 1),
    E(mem_host_register, "cuMemHostRegister", "_v2", 1),
    E(mem_host_unregister, "cuMemHostUnregister", "", 1),
    E(mem_host_get_device_pointer, "cuMemHostGetDevicePointer", "_v2", 1),
    E(memset_d8, "cuMemsetD8", "_v2", 1),
    E(memcpy_htod, "cuMemcpyHtoD", "_v2", 1),
    E(memcpy_dtoh, "cuMemcpyDtoH", "_v2", 1),
    E(memcpy_htod_async, "cuMemcpyHtoDAsync", "_v2", 1),
    E(memcpy_dtoh_async, "cuMemcpyDtoHAsync", "_v2", 1),
    E(pointer_get_attribute, "cuPointerGetAttribute", "", 1),
    E(pointer_set_attribute, "cuPointerSetAttribute", "", 1),
    E(stream_create, "cuStreamCreate", "", 1),
    E(stream_synchronize, "cuStreamSynchronize", "", 1),
    E(stream_query, "cuStreamQuery", "", 1),
    E(mem_get_handle_for_address_range, "cuMemGetHandleForAddressRange", "", 0),
    E(mem_get_allocation_granularity, "cuMemGetAllocationGranularity", "", 0),
    E(mem_create, "cuMemCreate", "", 0),
    E(mem_release, "cuMemRelease", "", 0),
    E(mem_address_reserve, "cuMemAddressReserve", "", 0),
    E(mem_address_free, "cuMemAddressFree", "", 0),
    E(mem_map, "cuMemMap", "", 0),
    E(mem_unmap, "cuMemUnmap", "", 0),
    E(mem_set_access, "cuMemSetAccess", "", 0),
    E(stream_write_value64, "cuStreamWriteValue64", "_v2", 0),
    /* by its versioned name, as cuCtxCreate_v4: the 12.0 ABI has no batch */
    E(memcpy_batch_async, "cuMemcpyBatchAsync_v2", "", 0),
};
#undef E

static void cw_load(void)
{
    /* The handle stays open for the life of the process: the table points into it. */
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(cw_why, sizeof(cw_why), "no CUDA driver (libcuda.so.1: %s)", dlerror());
        return;
    }
    proc_address_fn proc = NULL;
    *(void **)&proc = dlsym(h, "cuGetProcAddress_v2");
    for (size_t i = 0; i < sizeof(entries) / sizeof(entries[0]); i++) {
        const struct entry *e = &entries[i];
        void *fn = NULL;
        int status = 0;
        if (proc &&
            (proc(e->base, &fn, CUDAWRAP_ABI_VERSION, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &status) != 0 || status))
            fn = NULL;
        if (fn)
            cw.via_proc_address = 1;
        else
            fn = dlsym(h, e->exported);
        if (!fn && e->required) {
            snprintf(cw_why, sizeof(cw_why), "libcuda.so.1 lacks %s", e->exported);
            dlclose(h);
            return;
        }
        *e->slot = fn;
    }
    cudawrap_result r = cw.init(0);
    if (r != 0) {
        const char *s = NULL;
        if (cw.get_error_string(r, &s) != 0 || !s)
            s = "unknown CUDA error";
        snprintf(cw_why, sizeof(cw_why), "cuInit failed: %s (CUresult %d; no usable GPU?)", s, (int)r);
        return;
    }
    if (cw.driver_get_version(&cw.driver_version) != 0)
        cw.driver_version = 0;
    __atomic_store_n(&cw_table, &cw, __ATOMIC_RELEASE);
}

const struct cudawrap *cudawrap_get(char *err, size_t errlen)
{
    pthread_once(&cw_once, cw_load);
    const struct cudawrap *t = cudawrap_peek();
    if (!t && err && errlen)
        snprintf(err, errlen, "%s", cw_why);
    return t;
}

const struct cudawrap *cudawrap_peek(void)
{
    return __atomic_load_n(&cw_table, __ATOMIC_ACQUIRE);
}

const char *cudawrap_error_string(cudawrap_result r)
{
    const struct cudawrap *t = cudawrap_peek();
    const char *s = NULL;
    if (t && t->get_error_string(r, &s) == 0 && s)
        return s;
    return "unknown CUDA error";
}
