/* gpu.c: CUDA memory behind an MR, through the project's one CUDA driver
 * table (plugin/ib/cudawrap.c, compiled into softnic; libcuda.so.1 loaded
 * with dlopen on first need, never linked, so softnic loads on machines
 * without CUDA).  Copies run in the NIC thread that needs them, in a
 * context of softnic's own on the pointer's GPU for memory of no context
 * (gpu_nic_ctx says why), else in the memory's context.
 *
 * Copies go through a pinned staging buffer of the thread's own. A copy
 * from or to pageable memory is staged by the driver through buffers it
 * shares among the context's threads, in order with the application's own
 * pageable copies: an application thread whose cudaMemcpy waits for a
 * kernel that waits for this NIC's data then stalls the NIC's copy too, and
 * nothing moves (seen on the H100: a GIN alltoall kernel waiting for a put,
 * the responder's 64 KiB copy stuck in cuStreamSynchronize, the requester's
 * retry budget running out). A NIC's DMA waits on nobody; a copy between
 * pinned memory and the GPU does not either.
 * Without libcuda every pointer is host memory and copies fail with ENODEV. */
#include "softnic.h"

#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "../../plugin/ib/cudawrap.h"

/* Facts from the CUDA driver API (cuda.h): */
#define CU_STREAM_NON_BLOCKING 0x1
#define CU_POINTER_ATTRIBUTE_CONTEXT 1
#define CU_POINTER_ATTRIBUTE_MEMORY_TYPE 2
#define CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL 9
#define CU_MEMORYTYPE_DEVICE 2
#define CU_MEMHOSTREGISTER_PORTABLE 0x1

/* Bytes staged per copy step. */
#define GPU_STAGE_BYTES (1u << 20)

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

/* softnic's own context on GPU `ordinal`, created once per GPU for the life
 * of the process (the GPU's primary context when the driver cannot create
 * one; NULL when neither exists).
 *
 * Why not the application's context: in a context that holds many streams
 * (the application's, NCCL's, and one per NIC thread of ours), work on one
 * stream can wait for kernels of other streams to end, and a copy that
 * waits for a kernel spinning until that very copy lands never ends: the
 * requester's retry budget runs out (seen on H100 and H200 as
 * IBV_WC_RETRY_EXC_ERR on both ports with GDR, at whichever size it
 * struck). A NIC is another agent on the bus: its copies get a context no
 * kernel of the application runs in. tests/gdaki/gpu_test_nic_copy: with
 * 32 kernels spinning for a flag beside 96 idle streams, a copy from the
 * application's context never landed; from ours it landed in 11-16 ms on
 * an H200 (with no idle streams both did). The price: while the
 * application's kernels run, each copy from our context waits for the GPU
 * to switch contexts, 0.6-1.6 ms measured.
 *
 * That holds for memory of no context: cuMemCreate + cuMemMap, NCCL's own
 * buffers. cuMemAlloc memory belongs to its context, and a copy into it
 * from ours waited as long as the kernels did (1.7 s): gpu_copy_ctx keeps
 * such memory in its own context, where the stall above remains possible. */
static cudawrap_ctx gpu_nic_ctx(int ordinal)
{
    static cudawrap_ctx primary[64];
    static bool tried[64];
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    const struct cudawrap *cu = cudawrap_peek();
    char why[200];
    cudawrap_ctx ctx = cudawrap_side_ctx(cu, ordinal, why, sizeof(why));
    if (ctx || ordinal < 0 || ordinal >= 64)
        return ctx;
    pthread_mutex_lock(&mu);
    if (!tried[ordinal]) {
        tried[ordinal] = true;
        /* the application's primary context: copies may then wait for its kernels */
        SN_LOG("gpu: no context of softnic's own on GPU %d (%s): copies run in the GPU's primary context", ordinal,
               why);
        cudawrap_device dev;
        if (cu->device_get(&dev, ordinal) != 0 || cu->primary_ctx_retain(&primary[ordinal], dev) != 0)
            primary[ordinal] = NULL;
    }
    ctx = primary[ordinal];
    pthread_mutex_unlock(&mu);
    return ctx;
}

/* The context copies to and from GPU memory at dptr run in: the memory's
 * own (cuMemAlloc), else softnic's on its GPU (gpu_nic_ctx); NULL when
 * there is none. */
static cudawrap_ctx gpu_copy_ctx(const void *dptr)
{
    const struct cudawrap *cu = cudawrap_peek();
    int ordinal = -1;
    cudawrap_ctx ctx = NULL;
    cudawrap_devptr p = (cudawrap_devptr)(uintptr_t)dptr;
    if ((cu->pointer_get_attribute(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT, p) != 0 || !ctx) &&
        cu->pointer_get_attribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p) == 0)
        ctx = gpu_nic_ctx(ordinal);
    return ctx;
}

void gpu_prepare(const void *dptr)
{
    if (cudawrap_peek())
        (void)gpu_copy_ctx(dptr);
}

/* The context current to this thread as far as softnic set it. */
static __thread cudawrap_ctx current;

static int ctx_enter(const struct cudawrap *cu, cudawrap_ctx ctx)
{
    if (current != ctx) {
        if (cu->ctx_set_current(ctx) != 0)
            return EFAULT;
        current = ctx;
    }
    return 0;
}

/* The NIC thread's copy stream for GPU memory at dptr: a non-blocking
 * stream, per thread and context (gpu_copy_ctx, in *ctx_out), made current
 * to the thread.  A copy issued on it later enters *ctx_out again first:
 * landing copies of another stream may have entered theirs meanwhile. */
static int gpu_stream_for(const void *dptr, cudawrap_stream *out, cudawrap_ctx *ctx_out)
{
    const struct cudawrap *cu = cudawrap_peek();
    cudawrap_ctx ctx = gpu_copy_ctx(dptr);
    if (!ctx) {
        SN_LOG("gpu: %p is GPU memory of no GPU that this thread can use", dptr);
        return EFAULT;
    }
    static __thread struct { cudawrap_ctx ctx; cudawrap_stream stream; } cache[4];
    if (ctx_enter(cu, ctx))
        return EFAULT;
    *ctx_out = ctx;
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

/* The calling thread's pinned staging buffer (NULL when the driver would
 * not pin one: copies are then direct, from pageable memory). A thread that
 * exits (responder threads come and go with their connections) gives its
 * buffer back to a pool for the next thread, still pinned: unpinning waits
 * for the device to go idle, which a kernel spinning on this NIC's data
 * never does. */
#define GPU_STAGE_POOL 64
static pthread_key_t stage_key;
static pthread_once_t stage_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t stage_mu = PTHREAD_MUTEX_INITIALIZER;
static void *stage_pool[GPU_STAGE_POOL];
static int stage_npool;

static void stage_release(void *p)
{
    pthread_mutex_lock(&stage_mu);
    if (stage_npool < GPU_STAGE_POOL)
        stage_pool[stage_npool++] = p;
    pthread_mutex_unlock(&stage_mu);
    /* a full pool keeps the buffer pinned and leaks it: bounded by the
     * number of threads that ever copied at once beyond the pool */
}

static void stage_key_make(void)
{
    if (pthread_key_create(&stage_key, stage_release) != 0)
        stage_key = (pthread_key_t)-1;
}

static void *gpu_stage(const struct cudawrap *cu)
{
    static __thread int tried;
    pthread_once(&stage_once, stage_key_make);
    if (stage_key == (pthread_key_t)-1)
        return NULL;
    void *p = pthread_getspecific(stage_key);
    if (p || tried)
        return p;
    tried = 1;
    pthread_mutex_lock(&stage_mu);
    p = stage_npool ? stage_pool[--stage_npool] : NULL;
    pthread_mutex_unlock(&stage_mu);
    if (!p) {
        if (posix_memalign(&p, 4096, GPU_STAGE_BYTES) != 0)
            return NULL;
        if (cu->mem_host_register(p, GPU_STAGE_BYTES, CU_MEMHOSTREGISTER_PORTABLE) != 0) {
            SN_LOG("gpu: no pinned staging buffer for this thread: copies use pageable memory");
            free(p);
            return NULL;
        }
    }
    if (pthread_setspecific(stage_key, p) != 0) {
        stage_release(p);
        return NULL;
    }
    return p;
}

/* SOFTNIC_STATS (stats.c): one driver call, begun at t0 (sn_now_ns), that
 * issued `copies` copies into (to_dev) or out of GPU memory, `bytes` in all. */
static void count_copy_call(uint64_t t0, bool to_dev, uint64_t copies, uint64_t bytes)
{
    sn_stat_add(SN_ST_COPY_NS, sn_now_ns() - t0);
    sn_stat_add(SN_ST_COPY_CALLS, 1);
    sn_stat_add(to_dev ? SN_ST_HTOD : SN_ST_DTOH, copies);
    sn_stat_add(to_dev ? SN_ST_HTOD_BYTES : SN_ST_DTOH_BYTES, bytes);
}

/* The driver's async copy and stream sync, counted for SOFTNIC_STATS
 * (stats.c): how many, how many bytes, and how long each call took. */
static cudawrap_result gpu_issue(const struct cudawrap *cu, bool to_dev, cudawrap_devptr dev, void *host,
                                 size_t len, cudawrap_stream st)
{
    bool on = sn_stats_on();
    uint64_t t0 = on ? sn_now_ns() : 0;
    cudawrap_result r = to_dev ? cu->memcpy_htod_async(dev, host, len, st)
                               : cu->memcpy_dtoh_async(host, dev, len, st);
    if (on)
        count_copy_call(t0, to_dev, 1, len);
    return r;
}

static cudawrap_result gpu_sync(const struct cudawrap *cu, cudawrap_stream st)
{
    bool on = sn_stats_on();
    uint64_t t0 = on ? sn_now_ns() : 0;
    cudawrap_result r = cu->stream_synchronize(st);
    if (on) {
        sn_stat_add(SN_ST_SYNC_NS, sn_now_ns() - t0);
        sn_stat_add(SN_ST_SYNC, 1);
    }
    return r;
}

/* Writes of this thread still in flight (gpu_defer_writes): whether there
 * are any, the one stream they were issued on, and the bytes of the
 * staging buffer they hold. */
static __thread bool defer_on, pending, failed;
static __thread cudawrap_stream pend_st;
static __thread cudawrap_ctx pend_ctx;   /* pend_st's context: queued reads are issued in it */
static __thread size_t stage_held;
/* Whether any thread ever held a deferred copy (stage_hold): until one
 * has, the engines' looks at their state cost no TLS lookup (a function
 * call in a shared library) several times per request. */
static _Atomic bool deferred_ever;

/* Deferred reads not yet given to the driver (the requester's CUDA
 * payloads, gpu_read_deferred): they go to pend_st in one
 * cuMemcpyBatchAsync when they land (gpu_flush) or when another copy of
 * the thread must run behind them.  A driver call costs about 3 us on an
 * H100 whatever the size; two 4 KiB reads in one batch and one sync took
 * 8.7 us against 10.2 us as two calls (bench_cuda_copy).  Only reads: the
 * copies of one batch land in any order, which is no matter for payloads
 * read into separate stretches of the stage before they are sent, but
 * writes must land in the order a peer's WRITEs came. */
#define QUEUE_MAX 64
static __thread struct {
    cudawrap_devptr dst[QUEUE_MAX], src[QUEUE_MAX];   /* stage, GPU memory */
    size_t len[QUEUE_MAX];
    int n;
} queue;
static _Atomic bool batch_broken;   /* the driver refused a batch: one call per copy from then on */
static _Atomic bool value_broken;   /* the driver refused a cuStreamWriteValue64: copies from then on */
static _Atomic uint64_t value_writes;   /* those it took (gpu_value_writes) */

int gpu_value_writes(uint64_t *n)
{
    const struct cudawrap *cu = gpu_driver();
    *n = atomic_load_explicit(&value_writes, memory_order_relaxed);
    return cu && cu->stream_write_value64 && !atomic_load_explicit(&value_broken, memory_order_relaxed)
               ? 0
               : ENOTSUP;
}

/* An 8-byte write behind a deferred write on the same stream (a
 * put_signal's signal behind its payload) goes to the GPU's front end as
 * cuStreamWriteValue64 instead of a copy.  It is in stream order, behind a
 * memory barrier (flags 0), so it lands after the payload as a copy would.
 * Beside a spinning kernel a 4 KiB payload and its 8-byte signal landed in
 * 10.05 us against 11.08 us as two copies (bench_cuda_copy); alone, with a
 * sync of its own, it took ~1 us longer than a copy, so a first write
 * stays a copy.  false: the caller copies. */
static bool write_value(const struct cudawrap *cu, cudawrap_devptr dev, const void *host, size_t len,
                        cudawrap_stream st)
{
    if (len != 8 || (dev & 7) || !pending || !cu->stream_write_value64 ||
        atomic_load_explicit(&value_broken, memory_order_relaxed))
        return false;
    uint64_t v;
    memcpy(&v, host, sizeof(v));
    bool on = sn_stats_on();
    uint64_t t0 = on ? sn_now_ns() : 0;
    cudawrap_result r = cu->stream_write_value64(st, dev, v, 0);
    if (r != 0) {
        if (!atomic_exchange(&value_broken, true))
            SN_LOG("gpu: cuStreamWriteValue64 refused an 8-byte write (%s): copies from now on",
                   cudawrap_error_string(r));
        return false;
    }
    atomic_fetch_add_explicit(&value_writes, 1, memory_order_relaxed);
    if (on)
        count_copy_call(t0, true, 1, len);
    return true;
}

/* Gives the queued reads to the driver, on pend_st. */
static int queue_issue(const struct cudawrap *cu)
{
    int n = queue.n;
    if (!n)
        return 0;
    queue.n = 0;
    /* the stream's own context: the thread may have entered another one
     * since (a copy of memory of another GPU or of no context) */
    if (ctx_enter(cu, pend_ctx)) {
        SN_LOG("gpu: cannot enter the context of %d queued reads", n);
        failed = true;
        return EIO;
    }
    cudawrap_result r = -1;
    if (n > 1 && cu->memcpy_batch_async && !atomic_load_explicit(&batch_broken, memory_order_relaxed)) {
        struct cudawrap_memcpy_attr attr = { .src_access_order = CUDAWRAP_MEMCPY_SRC_ACCESS_ORDER_STREAM };
        size_t idx = 0;
        bool on = sn_stats_on();
        uint64_t t0 = on ? sn_now_ns() : 0;
        r = cu->memcpy_batch_async(queue.dst, queue.src, queue.len, (size_t)n, &attr, &idx, 1, pend_st);
        if (r == 0) {
            if (on) {
                uint64_t bytes = 0;
                for (int i = 0; i < n; i++)
                    bytes += queue.len[i];
                count_copy_call(t0, false, (uint64_t)n, bytes);
            }
            return 0;
        }
    }
    /* one call each (nothing of a refused batch was queued) */
    for (int i = 0; i < n; i++) {
        if (gpu_issue(cu, false, queue.src[i], (void *)(uintptr_t)queue.dst[i], queue.len[i], pend_st) != 0) {
            SN_LOG("gpu: copy of %zu bytes from GPU memory at 0x%llx failed", queue.len[i], queue.src[i]);
            failed = true;
            return EIO;
        }
    }
    if (r != -1 && !atomic_exchange(&batch_broken, true))
        /* the same copies went one by one: the driver refuses batches */
        SN_LOG("gpu: cuMemcpyBatchAsync refused %d copies (%s), which went one by one: one call per copy "
               "from now on", n, cudawrap_error_string(r));
    return 0;
}

void gpu_defer_writes(bool on)
{
    defer_on = on;
}

bool gpu_writes_pending(void)
{
    return atomic_load_explicit(&deferred_ever, memory_order_relaxed) && pending;
}

int gpu_flush(void)
{
    if (!atomic_load_explicit(&deferred_ever, memory_order_relaxed))
        return 0;
    if (queue.n)
        (void)queue_issue(cudawrap_peek());   /* a failure sets failed */
    int err = failed ? EIO : 0;
    failed = false;
    if (pending && gpu_sync(cudawrap_peek(), pend_st) != 0) {
        SN_LOG("gpu: a deferred copy from or into GPU memory failed");
        err = EIO;
    }
    pending = false;
    stage_held = 0;
    return err;
}

/* A copy of len bytes at the stage's free end was issued on st: its bytes
 * stay held until the thread's next gpu_flush. */
static void stage_hold(size_t len, cudawrap_stream st, cudawrap_ctx ctx)
{
    if (!atomic_load_explicit(&deferred_ever, memory_order_relaxed))
        atomic_store(&deferred_ever, true);
    stage_held += (len + 63) & ~(size_t)63;
    if (stage_held > GPU_STAGE_BYTES)
        stage_held = GPU_STAGE_BYTES;
    pending = true;
    pend_st = st;
    pend_ctx = ctx;
}

/* len bytes between GPU memory at dev and host memory at host, in the
 * direction to_dev says, through the thread's staging buffer. */
static int gpu_copy(void *dev, void *host, size_t len, bool to_dev)
{
    const struct cudawrap *cu = gpu_driver();
    if (!cu)
        return ENODEV;
    cudawrap_stream st;
    cudawrap_ctx ctx;
    int err = gpu_stream_for(dev, &st, &ctx);
    if (err)
        return err;
    char *stage = gpu_stage(cu);
    /* Copies in flight hold the front of the stage.  This copy goes behind
     * them when it is on their stream (it runs after them, and its sync
     * lands them too) and fits; else they land first. */
    if (pending && !(pend_st == st && GPU_STAGE_BYTES - stage_held >= len) && (err = gpu_flush()))
        return err;
    cudawrap_devptr d0 = (cudawrap_devptr)(uintptr_t)dev;
    if (to_dev && defer_on && stage && len <= GPU_STAGE_BYTES - stage_held) {
        /* A deferred write: issued now, in order behind the copies before
         * it (never batched: a batch's copies land in any order, and a
         * kernel polling a flag the last write sets must find the payload
         * before it there), landed by gpu_flush. */
        if ((queue.n && queue_issue(cu)) || ctx_enter(cu, ctx))
            return EIO;
        if (write_value(cu, d0, host, len, st))
            return 0;   /* held nothing of the stage; pending already */
        char *h = stage + stage_held;
        memcpy(h, host, len);
        if (gpu_issue(cu, true, d0, h, len, st) != 0) {
            SN_LOG("gpu: copy of %zu bytes into GPU memory at %p failed", len, dev);
            return EIO;
        }
        stage_hold(len, st, ctx);
        return 0;
    }
    /* this copy runs behind the queued reads */
    if ((queue.n && queue_issue(cu)) || ctx_enter(cu, ctx))
        return EIO;
    if (stage)
        stage += stage_held;
    size_t room = GPU_STAGE_BYTES - stage_held;
    cudawrap_result r = 0;
    for (size_t off = 0; off < len && !r;) {
        size_t n = stage && len - off > room ? room : len - off;
        char *h = stage ? stage : (char *)host + off;
        cudawrap_devptr d = (cudawrap_devptr)(uintptr_t)dev + off;
        if (to_dev) {
            if (stage)
                memcpy(stage, (char *)host + off, n);
            r = gpu_issue(cu, true, d, h, n, st);
        } else {
            r = gpu_issue(cu, false, d, h, n, st);
        }
        if (!r)
            r = gpu_sync(cu, st);
        if (!r && stage && !to_dev)
            memcpy((char *)host + off, stage, n);
        off += n;
    }
    /* the sync above also landed the deferred writes ahead of this copy */
    pending = false;
    stage_held = 0;
    if (r) {
        SN_LOG("gpu: copy of %zu bytes %s GPU memory at %p failed: CUresult %d", len, to_dev ? "into" : "from", dev, r);
        return EIO;
    }
    return 0;
}

int gpu_copy_to_device(void *dst, const void *src, size_t len)
{
    return gpu_copy(dst, (void *)(uintptr_t)src, len, true);
}

int gpu_copy_from_device(void *dst, const void *src, size_t len)
{
    return gpu_copy((void *)(uintptr_t)src, dst, len, false);
}

int gpu_read_deferred(const void *src, size_t len, const void **out)
{
    const struct cudawrap *cu = gpu_driver();
    if (!cu)
        return ENODEV;
    /* the stream first: it makes the memory's context current, which
     * pinning the stage needs */
    cudawrap_stream st;
    cudawrap_ctx ctx;
    void *dev = (void *)(uintptr_t)src;
    int err = gpu_stream_for(dev, &st, &ctx);
    if (err)
        return err;
    char *stage = gpu_stage(cu);
    if (!stage || len > GPU_STAGE_BYTES - stage_held)
        return ENOSPC;
    /* Copies on another stream (memory of another GPU) land first, in
     * place: the stage keeps their bytes, which the caller still reads. */
    if (pending && pend_st != st) {
        if (queue.n && queue_issue(cu))
            return EIO;
        pending = false;
        if (gpu_sync(cu, pend_st) != 0) {
            /* the copies before this one are lost too: gpu_flush says so */
            SN_LOG("gpu: a deferred copy from or into GPU memory failed");
            failed = true;
            return EIO;
        }
    }
    if (queue.n == QUEUE_MAX && queue_issue(cu))
        return EIO;
    char *h = stage + stage_held;
    stage_hold(len, st, ctx);
    queue.dst[queue.n] = (cudawrap_devptr)(uintptr_t)h;
    queue.src[queue.n] = (cudawrap_devptr)(uintptr_t)src;
    queue.len[queue.n++] = len;
    *out = h;
    return 0;
}
