/* gdaki_bw.cu: the kernel-posted write loop behind railnet-write-bw
 * --gpu-initiated and the GPU benchmark (contract in railnet_gdaki.h). */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gdaki_device.cuh"
#include "gdaki_pair.h"

#define BW_CHECK(call, what)                                                             \
    do {                                                                                 \
        cudaError_t e_ = (call);                                                         \
        if (e_ != cudaSuccess) {                                                         \
            snprintf(err, errlen, "%s: %s", what, cudaGetErrorString(e_));               \
            goto out;                                                                    \
        }                                                                                \
    } while (0)

/* Each thread posts per_thread messages of op (every thread the same
 * buffers), waiting for completion every window messages.  Threads of a
 * full warp post together; *rc gets -1 if any quiet failed.  phase_ns[0]
 * gets the time thread 0 spent posting (its quiets excluded). */
__global__ void gdaki_bw_kernel(struct gdaki_qp_dev *q, struct gdaki_op op, long per_thread,
                                int window, int warp_wide, int signal, uint64_t sig_raddr,
                                uint32_t sig_rkey, int *rc, unsigned long long *phase_ns)
{
    unsigned long long posting = 0;
    const enum gdaki_signal_op sop =
        (q->flags & GDAKI_QP_FLAG_NO_ATOMICS) ? GDAKI_SIGNAL_SET : GDAKI_SIGNAL_ADD;
    uint64_t ticket = 0;
    for (long i = 0; i < per_thread; i++) {
        uint64_t t0 = gdaki_now_ns();
        if (warp_wide)
            ticket = signal ? gdaki_put_signal_warp(q, &op, 1, sig_raddr, sig_rkey, 1, sop)
                            : gdaki_put_warp(q, &op, 1);
        else {
            struct gdaki_op m = op;
            m.flags = gdaki_q_inline_flags(q, &op);
            ticket = signal ? gdaki_put_signal_thread(q, &m, sig_raddr, sig_rkey, 1, sop)
                            : gdaki_put_thread(q, &m);
        }
        if (ticket == GDAKI_SLOT_ERROR) {
            atomicExch(rc, -1);
            return;
        }
        posting += gdaki_now_ns() - t0;
        if ((i + 1) % window == 0) {
            int r = warp_wide ? gdaki_quiet_warp(q, ticket) : gdaki_quiet_thread(q, ticket);
            if (r < 0) {
                atomicExch(rc, -1);
                return;
            }
        }
    }
    int r = warp_wide ? gdaki_quiet_warp(q, ticket) : gdaki_quiet_thread(q, ticket);
    if (r < 0)
        atomicExch(rc, -1);
    if (threadIdx.x == 0 && blockIdx.x == 0)
        phase_ns[0] = posting;
}

/* One thread: n rounds of put + quiet (the latency of a GPU-initiated
 * write).  phase_ns[0] sums the time in the put (reserve, WQE, doorbell),
 * phase_ns[1] the time in the quiet (the NIC's turnaround as the kernel
 * sees it), so a slow round says which side it was slow on; round_ns[i] is
 * round i's whole time, for the median. */
__global__ void gdaki_lat_kernel(struct gdaki_qp_dev *q, struct gdaki_op op, int n, int *rc,
                                 unsigned long long *phase_ns, unsigned long long *round_ns)
{
    unsigned long long post = 0, wait = 0;
    for (int i = 0; i < n; i++) {
        struct gdaki_op m = op;
        m.flags = gdaki_q_inline_flags(q, &op);
        uint64_t a = gdaki_now_ns();
        uint64_t t = gdaki_put_thread(q, &m);
        uint64_t b = gdaki_now_ns();
        if (gdaki_quiet_thread(q, t) < 0) {
            *rc = -1;
            return;
        }
        uint64_t c = gdaki_now_ns();
        post += b - a;
        wait += c - b;
        round_ns[i] = c - a;
    }
    phase_ns[0] = post;
    phase_ns[1] = wait;
}

/* Explain a failed run from the QP's error word. */
static void describe_failure(struct gdaki_pair *pair, char *err, size_t errlen)
{
    struct gdaki_qp_dev d;
    if (cudaMemcpy(&d, gdaki_pair_qp_device(pair), sizeof(d), cudaMemcpyDeviceToHost) != cudaSuccess) {
        snprintf(err, errlen, "a GPU-posted write failed (QP state unreadable)");
        return;
    }
    snprintf(err, errlen, "GPU-posted write failed: error CQE opcode 0x%x, syndrome 0x%02x, "
             "vendor syndrome 0x%02x (QP %u now in error)", (d.err >> 16) & 0xff, d.err & 0xff,
             (d.err >> 8) & 0xff, d.qpn);
}

/* Waits for ev (the end of a posting kernel) at most timeout_s seconds.  A
 * kernel still running then lost a doorbell or a completion: say where the
 * queue stands rather than hang the tool. */
static int wait_event(cudaEvent_t ev, int timeout_s, struct gdaki_pair *pair, char *err, size_t errlen)
{
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        cudaError_t e = cudaEventQuery(ev);
        if (e == cudaSuccess)
            return 0;
        if (e != cudaErrorNotReady) {
            snprintf(err, errlen, "posting kernel: %s", cudaGetErrorString(e));
            return -1;
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - t0.tv_sec >= timeout_s) {
            /* The kernel runs on a non-blocking stream: this copy does not wait for it. */
            struct gdaki_qp_dev d;
            memset(&d, 0, sizeof(d));
            cudaMemcpy(&d, gdaki_pair_qp_device(pair), sizeof(d), cudaMemcpyDeviceToHost);
            snprintf(err, errlen, "posting kernel still running after %d s (resv %llu, ready %llu, done "
                     "%llu, err 0x%08x): a doorbell or completion was lost; the CUDA context is "
                     "unusable now, exit the process", timeout_s, (unsigned long long)d.resv,
                     (unsigned long long)d.ready, (unsigned long long)d.done, d.err);
            return -1;
        }
        usleep(200);
    }
}

static int cmp_ull(const void *a, const void *b)
{
    unsigned long long x = *(const unsigned long long *)a, y = *(const unsigned long long *)b;
    return x < y ? -1 : x > y;
}

/* The median of n > 0 round times in ns, in us (sorts v). */
static double median_us(unsigned long long *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_ull);
    double m = n % 2 ? (double)v[n / 2] : ((double)v[n / 2 - 1] + (double)v[n / 2]) / 2;
    return m / 1e3;
}

/* Sweep parameters with their defaults applied. */
struct bw_params {
    int threads, blocks, window, warp_wide, lat_iters;
    long iters, nthreads;
};

static void bw_params_of(const struct gdaki_bw_opts *o, struct bw_params *p)
{
    p->threads = o->threads > 0 ? o->threads : 1;
    p->blocks = o->blocks > 0 ? o->blocks : 1;
    p->window = o->window > 0 ? o->window : 64;
    p->iters = o->iters > 0 ? o->iters : 10000;
    p->lat_iters = o->lat_iters == 0 ? 1000 : o->lat_iters;
    p->warp_wide = p->threads >= 32 && p->threads % 32 == 0;
    p->nthreads = (long)p->threads * p->blocks;
}

extern "C" int gdaki_bw_write_size(struct gdaki_pair *pair, const struct gdaki_mr *src, uint64_t raddr,
                                   uint32_t rkey, uint64_t sig_raddr, uint32_t sig_rkey, size_t size,
                                   const struct gdaki_bw_opts *o, struct gdaki_bw_result *r,
                                   char *err, size_t errlen)
{
    int rc = -1, h_rc = 0;
    int *drc = NULL;
    unsigned long long *dphase = NULL, hphase[3] = { 0, 0, 0 }, *dround = NULL, *hround = NULL;
    cudaEvent_t t0 = NULL, t1 = NULL;
    /* Non-blocking: softnic copies GPU payloads with synchronous driver
     * copies on the legacy default stream, which must not wait for this
     * kernel (it waits for them). */
    cudaStream_t stream = NULL;
    struct gdaki_qp_dev *q = gdaki_pair_qp_device(pair);
    struct bw_params p;
    bw_params_of(o, &p);
    struct gdaki_op op = { 0 };
    long per_thread = (p.iters + p.nthreads - 1) / p.nthreads;
    float ms = 0;

    memset(r, 0, sizeof(*r));
    if (!q) {
        snprintf(err, errlen, "the pair was opened without CUDA (use_cuda = 0), or not connected");
        return -1;
    }
    if (p.threads > 1024 || size == 0 || size > (1ull << 31) || size > src->len) {
        snprintf(err, errlen, "bad run: %d threads (1..1024), size %zu (1..2^31, <= the source's %llu)",
                 p.threads, size, (unsigned long long)src->len);
        return -1;
    }
    if (o->inline_max < 0 || o->inline_max > (int)GDAKI_INLINE_MAX) {
        snprintf(err, errlen, "bad inline size %d (0..%u)", o->inline_max, GDAKI_INLINE_MAX);
        return -1;
    }
    if (o->signal && !sig_rkey) {
        snprintf(err, errlen, "put_signal asked for without a signal word");
        return -1;
    }
    BW_CHECK(cudaSetDevice(pair->cuda_dev), "cudaSetDevice");
    BW_CHECK(cudaMalloc((void **)&drc, sizeof(int)), "cudaMalloc(rc)");
    BW_CHECK(cudaMemset(drc, 0, sizeof(int)), "cudaMemset");
    BW_CHECK(cudaMalloc((void **)&dphase, sizeof(hphase)), "cudaMalloc(phase)");
    BW_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    BW_CHECK(cudaEventCreate(&t0), "cudaEventCreate");
    BW_CHECK(cudaEventCreate(&t1), "cudaEventCreate");
    op.laddr = src->addr;
    op.lkey = src->lkey;
    op.len = (uint32_t)size;
    op.raddr = raddr;
    op.rkey = rkey;
    /* the source is GPU memory or mapped host memory: the kernel reads it */
    if (o->inline_max > 0 && size <= (size_t)o->inline_max)
        op.flags = GDAKI_OP_INLINE;
    if (o->warmup > 0) {
        long w = (o->warmup + p.nthreads - 1) / p.nthreads;
        gdaki_bw_kernel<<<p.blocks, p.threads, 0, stream>>>(q, op, w, p.window, p.warp_wide, o->signal,
                                                            sig_raddr, sig_rkey, drc, dphase + 2);
    }
    BW_CHECK(cudaEventRecord(t0, stream), "cudaEventRecord");
    gdaki_bw_kernel<<<p.blocks, p.threads, 0, stream>>>(q, op, per_thread, p.window, p.warp_wide,
                                                        o->signal, sig_raddr, sig_rkey, drc, dphase + 2);
    BW_CHECK(cudaGetLastError(), "kernel launch");
    BW_CHECK(cudaEventRecord(t1, stream), "cudaEventRecord");
    if (wait_event(t1, o->timeout_s > 0 ? o->timeout_s : 60, pair, err, errlen) < 0)
        goto out;
    BW_CHECK(cudaMemcpy(&h_rc, drc, sizeof(int), cudaMemcpyDeviceToHost), "cudaMemcpy");
    if (h_rc < 0) {
        describe_failure(pair, err, errlen);
        goto out;
    }
    BW_CHECK(cudaEventElapsedTime(&ms, t0, t1), "cudaEventElapsedTime");
    BW_CHECK(cudaMemcpy(&hphase[2], dphase + 2, sizeof(hphase[2]), cudaMemcpyDeviceToHost), "cudaMemcpy");
    r->post_us = (double)hphase[2] / 1e3 / per_thread;
    r->size = size;
    r->msgs = per_thread * p.nthreads;
    r->usec = ms * 1e3;
    r->msg_rate_mps = r->usec > 0 ? (double)r->msgs / r->usec : 0;
    r->gbps = r->usec > 0 ? (double)r->msgs * (double)size * 8.0 / (r->usec * 1e3) : 0;
    if (p.lat_iters > 0) {
        BW_CHECK(cudaMalloc((void **)&dround, (size_t)p.lat_iters * sizeof(*dround)), "cudaMalloc(rounds)");
        hround = (unsigned long long *)malloc((size_t)p.lat_iters * sizeof(*hround));
        if (!hround) {
            snprintf(err, errlen, "out of memory for %d latency rounds", p.lat_iters);
            goto out;
        }
        BW_CHECK(cudaEventRecord(t0, stream), "cudaEventRecord");
        gdaki_lat_kernel<<<1, 1, 0, stream>>>(q, op, p.lat_iters, drc, dphase, dround);
        BW_CHECK(cudaGetLastError(), "latency kernel launch");
        BW_CHECK(cudaEventRecord(t1, stream), "cudaEventRecord");
        if (wait_event(t1, o->timeout_s > 0 ? o->timeout_s : 60, pair, err, errlen) < 0)
            goto out;
        BW_CHECK(cudaMemcpy(&h_rc, drc, sizeof(int), cudaMemcpyDeviceToHost), "cudaMemcpy");
        if (h_rc < 0) {
            describe_failure(pair, err, errlen);
            goto out;
        }
        BW_CHECK(cudaEventElapsedTime(&ms, t0, t1), "cudaEventElapsedTime");
        r->lat_avg_us = ms * 1e3 / p.lat_iters;
        BW_CHECK(cudaMemcpy(hphase, dphase, 2 * sizeof(hphase[0]), cudaMemcpyDeviceToHost), "cudaMemcpy");
        r->lat_post_us = (double)hphase[0] / 1e3 / p.lat_iters;
        r->lat_wait_us = (double)hphase[1] / 1e3 / p.lat_iters;
        BW_CHECK(cudaMemcpy(hround, dround, (size_t)p.lat_iters * sizeof(*hround), cudaMemcpyDeviceToHost),
                 "cudaMemcpy(rounds)");
        r->lat_us = median_us(hround, p.lat_iters);
    }
    rc = 0;
out:
    if (t0)
        cudaEventDestroy(t0);
    if (t1)
        cudaEventDestroy(t1);
    if (stream)
        cudaStreamDestroy(stream);
    cudaFree(drc);
    cudaFree(dphase);
    cudaFree(dround);
    free(hround);
    return rc;
}

extern "C" int gdaki_bw_run_pair(struct gdaki_pair *pair, const struct gdaki_bw_opts *o,
                                 struct gdaki_bw_result *results, int max_results, char *err,
                                 size_t errlen)
{
    int rows = -1;
    void *src = NULL, *dst = NULL;
    uint64_t *sig = NULL;
    struct gdaki_mr msrc = { 0 }, mdst = { 0 }, msig = { 0 };
    FILE *out = o->out ? o->out : stdout;
    struct bw_params p;
    bw_params_of(o, &p);

    if (!gdaki_pair_qp_device(pair)) {
        snprintf(err, errlen, "the pair was opened without CUDA (use_cuda = 0)");
        return -1;
    }
    if (o->min_size == 0 || o->max_size < o->min_size || o->max_size > (1ull << 31)) {
        snprintf(err, errlen, "bad sweep: sizes %zu..%zu (1..2^31)", o->min_size, o->max_size);
        return -1;
    }
    BW_CHECK(cudaSetDevice(pair->cuda_dev), "cudaSetDevice");
    if (o->host_payload) {
        BW_CHECK(cudaHostAlloc(&src, o->max_size, cudaHostAllocDefault), "cudaHostAlloc(src)");
        BW_CHECK(cudaHostAlloc(&dst, o->max_size, cudaHostAllocDefault), "cudaHostAlloc(dst)");
        memset(src, 0x5a, o->max_size);
    } else {
        BW_CHECK(cudaMalloc(&src, o->max_size), "cudaMalloc(src)");
        BW_CHECK(cudaMalloc(&dst, o->max_size), "cudaMalloc(dst)");
        BW_CHECK(cudaMemset(src, 0x5a, o->max_size), "cudaMemset");
    }
    BW_CHECK(cudaMalloc((void **)&sig, 8), "cudaMalloc(signal)");
    BW_CHECK(cudaMemset(sig, 0, 8), "cudaMemset");
    if (gdaki_pair_reg(pair, src, o->max_size, &msrc, err, errlen) < 0 ||
        gdaki_pair_reg(pair, dst, o->max_size, &mdst, err, errlen) < 0 ||
        gdaki_pair_reg(pair, sig, 8, &msig, err, errlen) < 0)
        goto out;
    if (!o->quiet) {
        fprintf(out, "# GPU-initiated RDMA WRITE on %s port %d: %d block(s) x %d thread(s), "
                "%s variant, window %d%s\n", pair->dev_name, pair->port, p.blocks, p.threads,
                p.warp_wide ? "warp" : "thread", p.window, o->signal ? ", put_signal" : "");
        fprintf(out, "%10s %10s %12s %12s %12s %12s\n", "bytes", "msgs", "usec", "Mmsg/s",
                "Gbit/s", "lat_us");
    }
    rows = 0;
    for (size_t size = o->min_size; size <= o->max_size; size *= 2) {
        struct gdaki_bw_result r;
        if (gdaki_bw_write_size(pair, &msrc, mdst.addr, mdst.rkey, msig.addr, msig.rkey, size, o, &r,
                                err, errlen) < 0) {
            rows = -1;
            goto out;
        }
        if (!o->quiet)
            fprintf(out, "%10zu %10ld %12.1f %12.4f %12.3f %12.2f\n", r.size, r.msgs, r.usec,
                    r.msg_rate_mps, r.gbps, r.lat_us);
        if (results && rows < max_results)
            results[rows] = r;
        rows++;
        if (size > o->max_size / 2)
            break; /* no overflow past 2^31 */
    }
    if (results && rows > max_results)
        rows = max_results;
out:
    gdaki_pair_dereg(pair, &msrc);
    gdaki_pair_dereg(pair, &mdst);
    gdaki_pair_dereg(pair, &msig);
    if (o->host_payload) {
        cudaFreeHost(src);
        cudaFreeHost(dst);
    } else {
        cudaFree(src);
        cudaFree(dst);
    }
    cudaFree(sig);
    return rows;
}

extern "C" int gdaki_bw_run(const struct gdaki_bw_opts *o, struct gdaki_bw_result *results,
                            int max_results, char *err, size_t errlen)
{
    struct gdaki_pair_opts po;
    if (gdaki_pair_opts_default(&po, err, errlen) < 0)
        return -1;
    if (o->dev_name)
        po.dev_name = o->dev_name;
    if (o->port > 0)
        po.port = o->port;
    if (o->ibverbs_lib)
        po.ibverbs_lib = o->ibverbs_lib;
    po.use_cuda = 1;
    po.cuda_dev = o->cuda_dev;
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n <= o->cuda_dev) {
        snprintf(err, errlen, "--gpu-initiated needs CUDA device %d; this host has %d", o->cuda_dev, n);
        return -1;
    }
    if (cudaSetDevice(o->cuda_dev) != cudaSuccess || cudaFree(0) != cudaSuccess) {
        snprintf(err, errlen, "cannot initialise CUDA device %d", o->cuda_dev);
        return -1;
    }
    struct gdaki_pair *pair = NULL;
    if (gdaki_pair_open(&po, &pair, err, errlen) < 0)
        return -1;
    int rows = gdaki_bw_run_pair(pair, o, results, max_results, err, errlen);
    gdaki_pair_close(pair);
    return rows;
}
