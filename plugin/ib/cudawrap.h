/* plugin/ib/cudawrap.h: the project's one seam to the CUDA driver
 * (libcuda.so.1), shared by the plugin, plugin/gdaki, the tools and softnic
 * (each compiles this source into its own library or program; the plugin
 * keeps it hidden).
 *
 * libcuda is loaded with dlopen, never linked, so everything loads on hosts
 * without a GPU or a driver. The table is filled once per process (per
 * library that carries this file): through cuGetProcAddress_v2 where the
 * driver has it (CUDA >= 12.0), asking for each entry point's ABI as of
 * CUDA 12.0 (CUDAWRAP_ABI_VERSION) with the legacy default stream, which
 * is the _v2 variants named below; else, and for any entry it does not
 * return, by dlsym of those versioned names. Then cuInit(0).
 *
 * No CUDA header is needed: the types below are the driver ABI's (facts of
 * cuda.h: CUresult is an int-sized enum, 0 = CUDA_SUCCESS; CUdeviceptr is
 * unsigned long long on 64-bit hosts; CUdevice an int; contexts and streams
 * pointers to the same opaque structs cuda.h names), so a caller that
 * includes cuda.h passes its own types unchanged.
 *
 * Contract: cudawrap_get() is thread-safe and loads at most once; it
 * returns the table, or NULL with the one answer to "why is CUDA not usable
 * here" in err (no driver, a driver lacking a required entry point, or
 * cuInit failing: no GPU). Entries marked optional may be NULL. */
#ifndef RAILNET_IB_CUDAWRAP_H
#define RAILNET_IB_CUDAWRAP_H

#include <stddef.h>

#define CUDAWRAP_ABI_VERSION 12000

typedef int cudawrap_result;                  /* CUresult */
typedef unsigned long long cudawrap_devptr;   /* CUdeviceptr */
typedef int cudawrap_device;                  /* CUdevice */
typedef struct CUctx_st *cudawrap_ctx;        /* CUcontext */
typedef struct CUstream_st *cudawrap_stream;  /* CUstream */
struct CUmemAllocationProp_st;                /* CUmemAllocationProp */
struct CUmemAccessDesc_st;                    /* CUmemAccessDesc */

/* CUmemcpyAttributes (cuda.h, CUDA 12.8): how cuMemcpyBatchAsync may read
 * the sources of the copies it applies to. */
struct cudawrap_memcpy_attr {
    int src_access_order;                     /* CUmemcpySrcAccessOrder */
    struct { int type, id; } src_loc_hint, dst_loc_hint; /* CUmemLocation */
    unsigned int flags;                       /* CUmemcpyFlags */
};
#define CUDAWRAP_MEMCPY_SRC_ACCESS_ORDER_STREAM 1 /* sources read in stream order */

struct cudawrap {
    int driver_version;      /* cuDriverGetVersion: 1000 * major + 10 * minor */
    int via_proc_address;    /* 1: entries came from cuGetProcAddress_v2 */
    cudawrap_result (*init)(unsigned int flags);
    cudawrap_result (*driver_get_version)(int *v);
    cudawrap_result (*get_error_string)(cudawrap_result r, const char **s);
    /* devices and contexts */
    cudawrap_result (*device_get)(cudawrap_device *d, int ordinal);
    cudawrap_result (*device_get_count)(int *n);
    cudawrap_result (*device_get_attribute)(int *v, int attr, cudawrap_device d);
    cudawrap_result (*device_get_pci_bus_id)(char *buf, int len, cudawrap_device d);
    cudawrap_result (*primary_ctx_retain)(cudawrap_ctx *c, cudawrap_device d);
    cudawrap_result (*primary_ctx_release)(cudawrap_device d);
    cudawrap_result (*ctx_get_current)(cudawrap_ctx *c);
    cudawrap_result (*ctx_set_current)(cudawrap_ctx c);
    cudawrap_result (*ctx_get_device)(cudawrap_device *d);
    cudawrap_result (*ctx_push_current)(cudawrap_ctx c);
    cudawrap_result (*ctx_pop_current)(cudawrap_ctx *c);
    /* optional: cuCtxCreate_v4 (CUDA 12.5): params is a CUctxCreateParams */
    cudawrap_result (*ctx_create)(cudawrap_ctx *c, void *params, unsigned int flags, cudawrap_device d);
    /* memory */
    cudawrap_result (*mem_alloc)(cudawrap_devptr *p, size_t len);
    cudawrap_result (*mem_free)(cudawrap_devptr p);
    cudawrap_result (*mem_get_address_range)(cudawrap_devptr *base, size_t *len, cudawrap_devptr p);
    cudawrap_result (*mem_get_info)(size_t *free_bytes, size_t *total_bytes); /* of the current context's device */
    cudawrap_result (*mem_host_register)(void *p, size_t len, unsigned int flags);
    cudawrap_result (*mem_host_unregister)(void *p);
    cudawrap_result (*mem_host_get_device_pointer)(cudawrap_devptr *d, void *p, unsigned int flags);
    cudawrap_result (*memset_d8)(cudawrap_devptr p, unsigned char v, size_t len);
    cudawrap_result (*memcpy_htod)(cudawrap_devptr dst, const void *src, size_t len);
    cudawrap_result (*memcpy_dtoh)(void *dst, cudawrap_devptr src, size_t len);
    cudawrap_result (*memcpy_htod_async)(cudawrap_devptr dst, const void *src, size_t len, cudawrap_stream s);
    cudawrap_result (*memcpy_dtoh_async)(void *dst, cudawrap_devptr src, size_t len, cudawrap_stream s);
    cudawrap_result (*pointer_get_attribute)(void *v, int attr, cudawrap_devptr p);
    cudawrap_result (*pointer_set_attribute)(const void *v, int attr, cudawrap_devptr p);
    cudawrap_result (*stream_create)(cudawrap_stream *s, unsigned int flags);
    cudawrap_result (*stream_synchronize)(cudawrap_stream s);
    cudawrap_result (*stream_query)(cudawrap_stream s);
    /* optional: CUDA 11.7 */
    cudawrap_result (*mem_get_handle_for_address_range)(void *handle, cudawrap_devptr p, size_t len, int type,
                                                        unsigned long long flags);
    /* optional: the VMM API (CUDA 10.2) */
    cudawrap_result (*mem_get_allocation_granularity)(size_t *g, const struct CUmemAllocationProp_st *prop,
                                                      int option);
    cudawrap_result (*mem_create)(unsigned long long *h, size_t len, const struct CUmemAllocationProp_st *prop,
                                  unsigned long long flags);
    cudawrap_result (*mem_release)(unsigned long long h);
    cudawrap_result (*mem_address_reserve)(cudawrap_devptr *p, size_t len, size_t align, cudawrap_devptr addr,
                                           unsigned long long flags);
    cudawrap_result (*mem_address_free)(cudawrap_devptr p, size_t len);
    cudawrap_result (*mem_map)(cudawrap_devptr p, size_t len, size_t offset, unsigned long long h,
                               unsigned long long flags);
    cudawrap_result (*mem_unmap)(cudawrap_devptr p, size_t len);
    cudawrap_result (*mem_set_access)(cudawrap_devptr p, size_t len, const struct CUmemAccessDesc_st *desc,
                                      size_t count);
    /* optional: cuStreamWriteValue64 (8 bytes written by the GPU's front end, in stream order) */
    cudawrap_result (*stream_write_value64)(cudawrap_stream s, cudawrap_devptr addr, unsigned long long v,
                                            unsigned int flags);
    /* optional: CUDA 13's cuMemcpyBatchAsync (exported as _v2; CUDA 12.8's
     * had one more argument), several copies in one call on stream s */
    cudawrap_result (*memcpy_batch_async)(cudawrap_devptr *dsts, cudawrap_devptr *srcs, size_t *sizes,
                                          size_t count, struct cudawrap_memcpy_attr *attrs, size_t *attr_idxs,
                                          size_t num_attrs, cudawrap_stream s);
};

/* Loads the table on the first call; NULL with the reason in err (may be
 * NULL) when CUDA is not usable here. */
/* GPU memory of no context (cudawrap_vmm.c): cuMemCreate (pinned, on
 * device dev, gpuDirectRDMACapable) + cuMemAddressReserve + cuMemMap +
 * cuMemSetAccess, *len rounded up to the recommended granularity. Returns
 * the CUresult and, on failure, the step that failed (*step); the handle is
 * released at once, the mapping keeps the memory until cudawrap_vmm_free
 * (cuMemUnmap + cuMemAddressFree of that *len). The caller makes a context
 * of dev current. */
int cudawrap_vmm_supported(const struct cudawrap *cu);
cudawrap_result cudawrap_vmm_alloc(const struct cudawrap *cu, cudawrap_device dev, size_t *len, cudawrap_devptr *out,
                                   const char **step);
void cudawrap_vmm_free(const struct cudawrap *cu, cudawrap_devptr p, size_t len);
const struct cudawrap *cudawrap_get(char *err, size_t errlen);

/* Side copies (cudawrap_side.c): GPU memory read and written from a context
 * of the caller's own on the memory's GPU (cuCtxCreate, made once per GPU
 * for the life of the process), on a non-blocking stream, through a pinned
 * bounce buffer. Why: a copy issued in the application's context may wait
 * for the application's kernels, and a copy meant to end a kernel that
 * spins would then never land; the bus sees the side context as another
 * agent, as it sees a NIC. Only for memory of no context (the VMM API) or
 * host memory: cuMemAlloc memory stays bound to its own context.
 * cudawrap_side_copy copies len
 * bytes between host memory h and GPU memory d (to_device: h -> d), waiting
 * at most timeout_ms: 0; -1 with err; CUDAWRAP_SIDE_LATE when the copy did
 * not land in time (it may still land: the buffer stays reserved and later
 * copies on that GPU fail). Thread-safe; the caller's current context is
 * left as it was. cudawrap_side_ctx gives the side context itself (made on
 * the first call for that GPU), NULL with err when the driver makes none. */
#define CUDAWRAP_SIDE_LATE (-2)
cudawrap_ctx cudawrap_side_ctx(const struct cudawrap *cu, int ordinal, char *err, size_t errlen);
int cudawrap_side_copy(const struct cudawrap *cu, int ordinal, cudawrap_devptr d, void *h, size_t len, int to_device,
                       int timeout_ms, char *err, size_t errlen);
/* The table when an earlier cudawrap_get loaded it, else NULL; never loads. */
const struct cudawrap *cudawrap_peek(void);
/* cuGetErrorString of r, or "unknown CUDA error". */
const char *cudawrap_error_string(cudawrap_result r);

#endif
