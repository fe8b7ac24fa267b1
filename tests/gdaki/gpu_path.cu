/* tests/gdaki/gpu_path.cu: the GPU-initiated half of bench_gdaki_vs_proxy
 * and its CUDA memory helpers (contract in gpu_path.h). */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gdaki_device.cuh"
#include "gpu_path.h"
#include "path_result.h"

#define GP_CHECK(call, what)                                                            \
    do {                                                                                \
        cudaError_t e_ = (call);                                                        \
        if (e_ != cudaSuccess) {                                                        \
            snprintf(err, errlen, "%s: %s", what, cudaGetErrorString(e_));              \
            goto out;                                                                   \
        }                                                                               \
    } while (0)

struct gpu_path {
    struct gdaki_pair *pair;
    struct gdaki_qp_dev *q;    /* device descriptor */
    struct gdaki_mr src, dst, sig;
    uint64_t *dsig;            /* the signal word (CUDA memory) */
    uint64_t *dtimes;          /* rate: [0] first post, [1] last quiet (ns) */
    uint64_t *dlat;            /* latency: ns per message, lat_cap entries */
    long lat_cap;
    int *drc;
    int slots;
    int inline_max;            /* gpu_path_set_inline */
    double timeout_s;
    cudaStream_t stream;
};

/* Message i of a phase: slot i % window of both buffers. */
__device__ __forceinline__ struct gdaki_op gp_op_of(const struct gdaki_op *base, long i, int window)
{
    struct gdaki_op m = *base;
    uint64_t off = (uint64_t)(i % window) * PATH_SLOT;
    m.laddr += off;
    m.raddr += off;
    return m;
}

__global__ void gp_rate_kernel(struct gdaki_qp_dev *q, struct gdaki_op op, int window, long n, uint64_t sig_raddr,
                               uint32_t sig_rkey, uint64_t *times, int *rc)
{
    uint64_t ticket[PATH_MAX_WINDOW];
    uint64_t last = 0;
    uint64_t t0 = gdaki_now_ns();
    for (long i = 0; i < n; i++) {
        int k = (int)(i % window);
        /* at most window messages in flight: message i - window must be
         * complete before message i is posted, as on the CPU path */
        if (i >= window && gdaki_quiet_thread(q, ticket[k]) < 0) {
            *rc = -1;
            return;
        }
        struct gdaki_op m = gp_op_of(&op, i, window);
        m.flags = gdaki_q_inline_flags(q, &m);
        last = gdaki_put_signal_thread(q, &m, sig_raddr, sig_rkey, (uint64_t)i + 1, GDAKI_SIGNAL_SET);
        if (last == GDAKI_SLOT_ERROR) {
            *rc = -1;
            return;
        }
        ticket[k] = last;
    }
    if (gdaki_quiet_thread(q, last) < 0) {
        *rc = -1;
        return;
    }
    times[0] = t0;
    times[1] = gdaki_now_ns();
}

__global__ void gp_lat_kernel(struct gdaki_qp_dev *q, struct gdaki_op op, int window, long n, uint64_t sig_raddr,
                              uint32_t sig_rkey, uint64_t *lat_ns, int *rc)
{
    for (long i = 0; i < n; i++) {
        struct gdaki_op m = gp_op_of(&op, i, window);
        m.flags = gdaki_q_inline_flags(q, &m);
        uint64_t t0 = gdaki_now_ns();
        uint64_t t = gdaki_put_signal_thread(q, &m, sig_raddr, sig_rkey, (uint64_t)i + 1, GDAKI_SIGNAL_SET);
        if (gdaki_quiet_thread(q, t) < 0) {
            *rc = -1;
            return;
        }
        lat_ns[i] = gdaki_now_ns() - t0;
    }
}

extern "C" int gpu_path_probe(int dev, char *err, size_t errlen)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        snprintf(err, errlen, "no CUDA GPU on this machine (%s)",
                 e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return -1;
    }
    if (dev < 0 || dev >= n) {
        snprintf(err, errlen, "CUDA device %d asked for; this machine has %d", dev, n);
        return -1;
    }
    if ((e = cudaSetDevice(dev)) != cudaSuccess || (e = cudaFree(0)) != cudaSuccess) {
        snprintf(err, errlen, "cannot initialise CUDA device %d: %s", dev, cudaGetErrorString(e));
        return -1;
    }
    return 0;
}

extern "C" void gpu_path_bind(void *dev)
{
    cudaSetDevice(*(int *)dev);
}

extern "C" int gpu_mem_alloc(size_t len, void **p, char *err, size_t errlen)
{
    int rc = -1;
    *p = NULL;
    GP_CHECK(cudaMalloc(p, len), "cudaMalloc");
    rc = 0;
out:
    return rc;
}

extern "C" void gpu_mem_free(void *p)
{
    if (p)
        cudaFree(p);
}

extern "C" int gpu_mem_to_device(void *dst, const void *src, size_t len, char *err, size_t errlen)
{
    int rc = -1;
    GP_CHECK(cudaMemcpy(dst, src, len, cudaMemcpyHostToDevice), "cudaMemcpy to the GPU");
    /* from pageable memory the copy may still be in flight on return, and
     * the posting kernels run on a stream that does not wait for it */
    GP_CHECK(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    rc = 0;
out:
    return rc;
}

extern "C" int gpu_mem_to_host(void *dst, const void *src, size_t len, char *err, size_t errlen)
{
    int rc = -1;
    GP_CHECK(cudaMemcpy(dst, src, len, cudaMemcpyDeviceToHost), "cudaMemcpy from the GPU");
    rc = 0;
out:
    return rc;
}

extern "C" int gpu_mem_zero(void *p, size_t len, char *err, size_t errlen)
{
    int rc = -1;
    GP_CHECK(cudaMemset(p, 0, len), "cudaMemset");
    /* cudaMemset is asynchronous: done before any path writes there */
    GP_CHECK(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    rc = 0;
out:
    return rc;
}

extern "C" int gpu_path_set_inline(struct gpu_path *g, int inline_max)
{
    if (inline_max < 0 || inline_max > (int)GDAKI_INLINE_MAX)
        return -1;
    g->inline_max = inline_max;
    return 0;
}

extern "C" void gpu_path_close(struct gpu_path *g)
{
    if (!g)
        return;
    gdaki_pair_dereg(g->pair, &g->src);
    gdaki_pair_dereg(g->pair, &g->dst);
    gdaki_pair_dereg(g->pair, &g->sig);
    cudaFree(g->dsig);
    cudaFree(g->dtimes);
    cudaFree(g->dlat);
    cudaFree(g->drc);
    if (g->stream)
        cudaStreamDestroy(g->stream);
    free(g);
}

extern "C" int gpu_path_open(struct gdaki_pair *pair, void *src, void *dst, int slots, double timeout_s,
                             struct gpu_path **outp, char *err, size_t errlen)
{
    int rc = -1;
    size_t len = (size_t)slots * PATH_SLOT;
    struct gpu_path *g = (struct gpu_path *)calloc(1, sizeof(*g));
    *outp = NULL;
    if (!g) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    g->pair = pair;
    g->slots = slots;
    g->timeout_s = timeout_s > 0 ? timeout_s : 60;
    g->q = gdaki_pair_qp_device(pair);
    if (!g->q || slots < 1 || slots > PATH_MAX_WINDOW) {
        snprintf(err, errlen, "%s", !g->q ? "the gdaki pair was opened without CUDA" : "slots out of 1..32");
        goto out;
    }
    GP_CHECK(cudaMalloc((void **)&g->dsig, 8), "cudaMalloc(signal)");
    GP_CHECK(cudaMalloc((void **)&g->dtimes, 2 * sizeof(uint64_t)), "cudaMalloc(times)");
    GP_CHECK(cudaMalloc((void **)&g->drc, sizeof(int)), "cudaMalloc(rc)");
    /* Non-blocking: softnic moves GPU payloads with synchronous driver
     * copies on the legacy default stream, which must not wait for the
     * posting kernel (the kernel waits for them). */
    GP_CHECK(cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking), "cudaStreamCreate");
    if (gdaki_pair_reg(pair, src, len, &g->src, err, errlen) < 0 ||
        gdaki_pair_reg(pair, dst, len, &g->dst, err, errlen) < 0 ||
        gdaki_pair_reg(pair, g->dsig, 8, &g->sig, err, errlen) < 0)
        goto out;
    rc = 0;
out:
    if (rc < 0)
        gpu_path_close(g);
    else
        *outp = g;
    return rc;
}

/* Waits for the phase's kernel at most timeout_s; then checks its result
 * word and the signal word (n after n messages). */
static int gp_finish(struct gpu_path *g, long n, char *err, size_t errlen)
{
    int rc = -1, h_rc = 0;
    uint64_t sig = 0;
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        cudaError_t e = cudaStreamQuery(g->stream);
        if (e == cudaSuccess)
            break;
        if (e != cudaErrorNotReady) {
            snprintf(err, errlen, "posting kernel: %s", cudaGetErrorString(e));
            return -1;
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((double)(now.tv_sec - t0.tv_sec) > g->timeout_s) {
            snprintf(err, errlen, "posting kernel still running after %.0f s: a doorbell or a completion was "
                     "lost; the CUDA context is unusable now", g->timeout_s);
            return -1;
        }
        usleep(100);
    }
    GP_CHECK(cudaMemcpy(&h_rc, g->drc, sizeof(int), cudaMemcpyDeviceToHost), "cudaMemcpy(rc)");
    if (h_rc < 0) {
        struct gdaki_qp_dev d;
        memset(&d, 0, sizeof(d));
        cudaMemcpy(&d, g->q, sizeof(d), cudaMemcpyDeviceToHost);
        snprintf(err, errlen, "a GPU-posted write failed: error CQE opcode 0x%x, syndrome 0x%02x, vendor "
                 "syndrome 0x%02x (QP 0x%x)", (d.err >> 16) & 0xff, d.err & 0xff, (d.err >> 8) & 0xff, d.qpn);
        goto out;
    }
    GP_CHECK(cudaMemcpy(&sig, g->dsig, 8, cudaMemcpyDeviceToHost), "cudaMemcpy(signal)");
    if (sig != (uint64_t)n) {
        snprintf(err, errlen, "the signal word reads %llu after %ld put_signal messages",
                 (unsigned long long)sig, n);
        goto out;
    }
    rc = 0;
out:
    return rc;
}

static int gp_start(struct gpu_path *g, size_t size, long n, struct gdaki_op *op, char *err, size_t errlen)
{
    int rc = -1;
    if (size < 1 || size > PATH_SLOT || n < 1) {
        snprintf(err, errlen, "bad phase: %zu bytes (1..%d), %ld messages", size, PATH_SLOT, n);
        return -1;
    }
    memset(op, 0, sizeof(*op));
    op->laddr = g->src.addr;
    op->lkey = g->src.lkey;
    op->len = (uint32_t)size;
    op->raddr = g->dst.addr;
    op->rkey = g->dst.rkey;
    if (size <= (size_t)g->inline_max)
        op->flags = GDAKI_OP_INLINE;   /* the source slot is CUDA memory: the kernel reads it */
    /* on the kernel's stream: ordered before it (a non-blocking stream does
     * not wait for the legacy default stream) */
    GP_CHECK(cudaMemsetAsync(g->drc, 0, sizeof(int), g->stream), "cudaMemset(rc)");
    GP_CHECK(cudaMemsetAsync(g->dsig, 0, 8, g->stream), "cudaMemset(signal)");
    rc = 0;
out:
    return rc;
}

extern "C" int gpu_path_rate(struct gpu_path *g, size_t size, long n, int window, double *rate_mps, char *err,
                             size_t errlen)
{
    int rc = -1;
    struct gdaki_op op;
    uint64_t t[2] = { 0, 0 };
    if (window < 1 || window > g->slots) {
        snprintf(err, errlen, "window %d out of 1..%d", window, g->slots);
        return -1;
    }
    if (gp_start(g, size, n, &op, err, errlen) < 0)
        return -1;
    gp_rate_kernel<<<1, 1, 0, g->stream>>>(g->q, op, window, n, g->sig.addr, g->sig.rkey, g->dtimes, g->drc);
    GP_CHECK(cudaGetLastError(), "rate kernel launch");
    if (gp_finish(g, n, err, errlen) < 0)
        goto out;
    GP_CHECK(cudaMemcpy(t, g->dtimes, sizeof(t), cudaMemcpyDeviceToHost), "cudaMemcpy(times)");
    *rate_mps = t[1] > t[0] ? (double)n / ((double)(t[1] - t[0]) * 1e-3) : 0;
    rc = 0;
out:
    return rc;
}

extern "C" int gpu_path_lat(struct gpu_path *g, size_t size, long n, double *lat_us, char *err, size_t errlen)
{
    int rc = -1;
    struct gdaki_op op;
    uint64_t *h = NULL;
    if (n > g->lat_cap) {
        cudaFree(g->dlat);
        g->dlat = NULL;
        g->lat_cap = 0;
        GP_CHECK(cudaMalloc((void **)&g->dlat, (size_t)n * sizeof(uint64_t)), "cudaMalloc(latencies)");
        g->lat_cap = n;
    }
    if (gp_start(g, size, n, &op, err, errlen) < 0)
        return -1;
    gp_lat_kernel<<<1, 1, 0, g->stream>>>(g->q, op, g->slots, n, g->sig.addr, g->sig.rkey, g->dlat, g->drc);
    GP_CHECK(cudaGetLastError(), "latency kernel launch");
    if (gp_finish(g, n, err, errlen) < 0)
        goto out;
    h = (uint64_t *)malloc((size_t)n * sizeof(uint64_t));
    if (!h) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    GP_CHECK(cudaMemcpy(h, g->dlat, (size_t)n * sizeof(uint64_t), cudaMemcpyDeviceToHost), "cudaMemcpy(latencies)");
    for (long i = 0; i < n; i++)
        lat_us[i] = (double)h[i] * 1e-3;
    rc = 0;
out:
    free(h);
    return rc;
}
