/* tests/gdaki/gpu_test_gdaki.cu: the GPU-initiated path on a GPU machine
 * (make check-gpu): CUDA kernels post RDMA writes themselves through the
 * device API (gdaki_device.cuh) on a loopback pair, on softnic (default:
 * $top_builddir/tests/softnic/libibverbs.so.1) or on the NIC named by
 * RAILNET_IBVERBS_LIB.  Every case SKIPs without a GPU.  The queue (ring,
 * doorbell records, CQ) is in host memory unless RAILNET_GDAKI_QUEUE_MEM
 * says otherwise; the test_gpu_queue_* cases run the acceptance cases again
 * with the queue in GPU memory (DEVX user memory), whatever the variable.  Buffers are GPU
 * memory; checks run on the GPU against the pattern the source was filled
 * with, so a wrong, missing or stray byte fails the case. */
extern "C" {
#include "tap.h"
#include "build_paths.h"
}

#include <cuda_runtime.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gdaki_device.cuh"
#include "softnic_sym.h"

static char err[512];

#define CK(call)                                                                          \
    do {                                                                                  \
        cudaError_t e_ = (call);                                                          \
        if (e_ != cudaSuccess)                                                            \
            tap_fail_at(__FILE__, __LINE__, "%s: %s", #call, cudaGetErrorString(e_));     \
    } while (0)

/* A launch that failed (resources, configuration) is an error too. */
#define SYNC()                                                                            \
    do {                                                                                  \
        CK(cudaGetLastError());                                                           \
        CK(cudaDeviceSynchronize());                                                      \
    } while (0)

enum scope { SCOPE_THREAD, SCOPE_WARP, SCOPE_BLOCK };

/* ------------------------------------------------------------ helpers */

/* Kernels that post run on a non-blocking stream: softnic moves GPU-memory
 * payloads with synchronous driver copies on the legacy default stream,
 * which would wait for a kernel on that stream -- while the kernel waits
 * (quiet) for those very copies.  A real NIC DMAs and needs no stream. */
static cudaStream_t post_stream(void)
{
    static cudaStream_t s;
    if (!s && cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess)
        tap_fail_at(__FILE__, __LINE__, "cudaStreamCreateWithFlags failed");
    return s;
}

/* A kernel that does not finish means a lost doorbell or completion: fail
 * with the queue's counters instead of holding the GPU machine until the
 * TAP timeout, and let the later cases skip (they would hang the same way). */
#define KERNEL_TIMEOUT_S 60

static void hung_marker(char *path, size_t len)
{
    snprintf(path, len, "/tmp/railnet-gdaki-hung.%d", (int)getppid());
}

static void wait_kernel(struct gdaki_pair *p)
{
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        cudaError_t e = cudaStreamQuery(post_stream());
        if (e == cudaSuccess)
            break;
        if (e != cudaErrorNotReady)
            tap_fail_at(__FILE__, __LINE__, "posting kernel: %s", cudaGetErrorString(e));
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - t0.tv_sec >= KERNEL_TIMEOUT_S) {
            /* The kernel runs on a non-blocking stream: this copy does not wait for it. */
            struct gdaki_qp_dev d;
            memset(&d, 0, sizeof(d));
            cudaMemcpy(&d, gdaki_pair_qp_device(p), sizeof(d), cudaMemcpyDeviceToHost);
            const struct gdaki_qp_dev *h = gdaki_pair_qp_host(p);
            uint32_t dbr = 0, cq_dbr = 0;
            if (h->flags & GDAKI_QP_FLAG_GPU_QUEUE) {  /* device memory: copy it out */
                cudaMemcpy(&dbr, h->dbrec, 4, cudaMemcpyDeviceToHost);
                cudaMemcpy(&cq_dbr, h->cq_dbrec, 4, cudaMemcpyDeviceToHost);
            } else {
                dbr = *(volatile uint32_t *)h->dbrec;
                cq_dbr = *(volatile uint32_t *)h->cq_dbrec;
            }
            char path[64];
            hung_marker(path, sizeof(path));
            FILE *f = fopen(path, "w");
            if (f)
                fclose(f);
            tap_fail_at(__FILE__, __LINE__, "posting kernel still running after %d s: resv %llu ready %llu "
                        "done %llu cq_ci %llu err 0x%08x; NIC-side doorbell record %u, CQ consumer %u",
                        KERNEL_TIMEOUT_S, (unsigned long long)d.resv, (unsigned long long)d.ready,
                        (unsigned long long)d.done, (unsigned long long)d.cq_ci, d.err,
                        gdaki_be32toh(dbr), gdaki_be32toh(cq_dbr) & 0xffffff);
        }
        usleep(1000);
    }
    SYNC();
}

static void need_gpu(void)
{
    char path[64];
    hung_marker(path, sizeof(path));
    if (access(path, F_OK) == 0)
        TAP_SKIP("an earlier case left a posting kernel hung: skipped to save GPU time");
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0)
        TAP_SKIP("no CUDA GPU on this machine (run make check-gpu on a GPU machine)");
    CK(cudaSetDevice(0));
    CK(cudaFree(0));
}

static struct gdaki_pair *open_pair_mem(uint32_t depth, enum gdaki_queue_mem mem, int expect_ok)
{
    need_gpu();
    struct gdaki_pair_opts o;
    if (gdaki_pair_opts_default(&o, err, sizeof(err)) != 0)
        tap_fail_at(__FILE__, __LINE__, "%s", err);
    if (!o.ibverbs_lib)
        o.ibverbs_lib = test_softnic_verbs();
    o.sq_depth = depth;
    o.queue_mem = mem;
    o.use_cuda = 1;
    o.cuda_dev = 0;
    struct gdaki_pair *p = NULL;
    int rc = gdaki_pair_open(&o, &p, err, sizeof(err));
    if (expect_ok && rc != 0)
        tap_fail_at(__FILE__, __LINE__, "gdaki_pair_open: %s", err);
    return p;
}

/* Queue memory of the pairs a case opens: -1 is RAILNET_GDAKI_QUEUE_MEM
 * (host by default); a test_gpu_queue_* case sets GPU (each case runs in
 * its own child). */
static int g_qmem = -1;

static enum gdaki_queue_mem queue_mem(void)
{
    if (g_qmem >= 0)
        return (enum gdaki_queue_mem)g_qmem;
    struct gdaki_pair_opts o;
    gdaki_pair_opts_default(&o, err, sizeof(err));
    return o.queue_mem;
}

static struct gdaki_pair *open_pair(uint32_t depth)
{
    return open_pair_mem(depth, queue_mem(), 1);
}

static void reg(struct gdaki_pair *p, void *buf, size_t len, struct gdaki_mr *mr)
{
    if (gdaki_pair_reg(p, buf, len, mr, err, sizeof(err)) != 0)
        tap_fail_at(__FILE__, __LINE__, "gdaki_pair_reg: %s", err);
}

__host__ __device__ static inline uint8_t pattern(size_t i, unsigned seed)
{
    return (uint8_t)((i * 131u + (size_t)seed * 7u + (i >> 12) + 1u) & 0xff);
}

__global__ void k_fill(uint8_t *p, size_t n, unsigned seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = pattern(i, seed);
}

/* Counts bytes of p[0..n) that differ from pattern(seed); *first gets the
 * lowest bad index seen. */
__global__ void k_check(const uint8_t *p, size_t n, unsigned seed, unsigned long long *bad,
                        unsigned long long *first)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        if (p[i] != pattern(i, seed)) {
            atomicAdd(bad, 1ull);
            atomicMin(first, (unsigned long long)i);
        }
}

__global__ void k_count_nonzero(const uint8_t *p, size_t n, unsigned long long *bad)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        if (p[i])
            atomicAdd(bad, 1ull);
}

struct counters {
    unsigned long long bad, first;
};

/* Bytes of dst[0..n) not equal to the pattern, plus nonzero guard bytes
 * in dst[n..n+guard). */
static unsigned long long check(const uint8_t *dst, size_t n, unsigned seed, size_t guard,
                                unsigned long long *first_bad)
{
    struct counters *c;
    CK(cudaMallocManaged(&c, sizeof(*c)));
    c->bad = 0;
    c->first = ~0ull;
    k_check<<<256, 256>>>(dst, n, seed, &c->bad, &c->first);
    if (guard)
        k_count_nonzero<<<1, 64>>>(dst + n, guard, &c->bad);
    SYNC();
    unsigned long long bad = c->bad;
    if (first_bad)
        *first_bad = c->first;
    CK(cudaFree(c));
    return bad;
}

static struct gdaki_qp_dev read_desc(struct gdaki_pair *p)
{
    struct gdaki_qp_dev d;
    CK(cudaMemcpy(&d, gdaki_pair_qp_device(p), sizeof(d), cudaMemcpyDeviceToHost));
    return d;
}

/* ------------------------------------------------------ put from N threads */

__global__ void k_put(struct gdaki_qp_dev *q, uint64_t src, uint32_t lkey, uint64_t dst, uint32_t rkey,
                      uint32_t size, int scope, int *rc)
{
    const size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    struct gdaki_op op = { 0 };
    op.laddr = src + t * size;
    op.lkey = lkey;
    op.len = size;
    op.raddr = dst + t * size;
    op.rkey = rkey;
    uint64_t ticket;
    int r;
    if (scope == SCOPE_WARP) {
        ticket = gdaki_put_warp(q, &op, 1);
        r = gdaki_quiet_warp(q, ticket);
    } else if (scope == SCOPE_BLOCK) {
        ticket = gdaki_put_block(q, &op, 1);
        r = gdaki_quiet_block(q, ticket);
    } else {
        ticket = gdaki_put_thread(q, &op);
        r = gdaki_quiet_thread(q, ticket);
    }
    if (ticket == GDAKI_SLOT_ERROR || r < 0)
        atomicExch(rc, -1);
}

/* Every size from 8 B to max_size (x8 steps, then max_size) from
 * blocks x threads GPU threads, each writing its own slice. */
static void puts_byte_exact(int blocks, int threads, int scope, size_t max_size)
{
    struct gdaki_pair *p = open_pair(1024);
    const size_t nthr = (size_t)blocks * threads, guard = 64;
    const size_t bytes = nthr * max_size;
    uint8_t *src, *dst;
    int *rc;
    CK(cudaMalloc(&src, bytes));
    CK(cudaMalloc(&dst, bytes + guard));
    CK(cudaMallocManaged(&rc, sizeof(int)));
    struct gdaki_mr ms, md;
    reg(p, src, bytes, &ms);
    reg(p, dst, bytes + guard, &md);
    size_t sizes[16];
    int ns = 0;
    for (size_t s = 8; s < max_size; s *= 8)
        sizes[ns++] = s;
    sizes[ns++] = max_size;
    for (int i = 0; i < ns; i++) {
        const size_t s = sizes[i], n = nthr * s;
        k_fill<<<256, 256>>>(src, n, (unsigned)i + 1);
        CK(cudaMemset(dst, 0, bytes + guard));
        *rc = 0;
        SYNC();
        k_put<<<blocks, threads, 0, post_stream()>>>(gdaki_pair_qp_device(p), ms.addr, ms.lkey, md.addr, md.rkey,
                                   (uint32_t)s, scope, rc);
        wait_kernel(p);
        if (*rc != 0) {
            struct gdaki_qp_dev d = read_desc(p);
            tap_fail_at(__FILE__, __LINE__, "size %zu: a put or quiet failed, err 0x%08x", s, d.err);
        }
        unsigned long long first = 0;
        unsigned long long bad = check(dst, n, (unsigned)i + 1, guard, &first);
        if (bad)
            tap_fail_at(__FILE__, __LINE__, "size %zu x %zu threads: %llu bad bytes, first at %llu",
                        s, nthr, bad, first);
    }
    struct gdaki_qp_dev d = read_desc(p);
    EXPECT_EQ_U64(d.resv, d.done);
    EXPECT_EQ_INT(0, d.err);
    gdaki_pair_dereg(p, &ms);
    gdaki_pair_dereg(p, &md);
    gdaki_pair_close(p);
    CK(cudaFree(src));
    CK(cudaFree(dst));
    CK(cudaFree(rc));
}

/* ------------------------------------------------- inline puts (GPU) */

/* Every entry of the device descriptor's span table is back to 0: each
 * signaled multi-BB WQE's CQE was consumed and cleared its entry. */
static void expect_span_clear(const struct gdaki_qp_dev *d)
{
    EXPECT_TRUE(d->span != NULL);
    uint8_t span[1 << 15];
    CK(cudaMemcpy(span, d->span, (size_t)1 << d->sq_log, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < ((size_t)1 << d->sq_log); i++)
        EXPECT_EQ_INT(0, span[i]);
}

#define INL_STRIDE 1024

/* One thread: puts of every inline size 1..GDAKI_INLINE_MAX, twice, from
 * one GPU source buffer that the kernel refills before each put and
 * overwrites right after it (an inline put's source is reusable once the
 * post returns); even messages alone, odd ones as put_signal.  The source
 * starts at offsets 0-3 in turn, so the byte loads of a misaligned source
 * run too.  lkey 0: a pointer segment would fail with a protection error. */
__global__ void k_inline(struct gdaki_qp_dev *q, uint8_t *src, uint64_t dst, uint32_t rkey, uint64_t sig,
                         int msgs, int *rc)
{
    uint64_t t = 0;
    for (int n = 0; n < msgs; n++) {
        uint32_t len = (uint32_t)(n % GDAKI_INLINE_MAX) + 1;
        uint8_t *s = src + (n & 3);
        for (uint32_t i = 0; i < len; i++)
            s[i] = pattern((size_t)n * INL_STRIDE + i, 5);
        struct gdaki_op op = { 0 };
        op.laddr = (uint64_t)(uintptr_t)s;
        op.len = len;
        op.raddr = dst + (uint64_t)n * INL_STRIDE;
        op.rkey = rkey;
        op.flags = GDAKI_OP_INLINE;
        t = (n & 1) ? gdaki_put_signal_thread(q, &op, sig, rkey, (uint64_t)n, GDAKI_SIGNAL_SET)
                    : gdaki_put_thread(q, &op);
        if (t == GDAKI_SLOT_ERROR) {
            *rc = -1;
            return;
        }
        for (uint32_t i = 0; i < GDAKI_INLINE_MAX + 3; i++)
            src[i] = 0xee;
    }
    if (gdaki_quiet_thread(q, t) < 0)
        *rc = -1;
}

__global__ void k_inline_check(const uint8_t *dst, int msgs, unsigned long long *bad)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (size_t)msgs * INL_STRIDE;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t n = i / INL_STRIDE, k = i % INL_STRIDE;
        uint32_t len = (uint32_t)(n % GDAKI_INLINE_MAX) + 1;
        if (dst[i] != (k < len ? pattern(i, 5) : 0))
            atomicAdd(bad, 1ull);
    }
}

/* Inline puts of 1 to 16 basic blocks from a kernel wrap a 64-BB ring many
 * times; every byte lands, the counters end equal and the device span
 * table is clear again. */
static void inline_puts_from_the_gpu(void)
{
    struct gdaki_pair *p = open_pair(64);
    const int msgs = 2 * GDAKI_INLINE_MAX;
    const size_t bytes = (size_t)msgs * INL_STRIDE;
    uint8_t *src, *dst;
    int *rc;
    unsigned long long *bad;
    CK(cudaMalloc(&src, GDAKI_INLINE_MAX + 3));
    CK(cudaMalloc(&dst, bytes + 64));
    CK(cudaMemset(dst, 0, bytes + 64));
    CK(cudaMallocManaged(&rc, sizeof(int)));
    CK(cudaMallocManaged(&bad, sizeof(*bad)));
    *rc = 0;
    *bad = 0;
    struct gdaki_mr md;
    reg(p, dst, bytes + 64, &md);
    SYNC();
    k_inline<<<1, 1, 0, post_stream()>>>(gdaki_pair_qp_device(p), src, md.addr, md.rkey, md.addr + bytes, msgs, rc);
    wait_kernel(p);
    struct gdaki_qp_dev d = read_desc(p);
    if (*rc != 0)
        tap_fail_at(__FILE__, __LINE__, "an inline put or quiet failed, err 0x%08x", d.err);
    k_inline_check<<<64, 256>>>(dst, msgs, bad);
    SYNC();
    EXPECT_EQ_U64(0, *bad);
    uint64_t sig = 0;   /* the last put_signal's value: message msgs - 1 (odd) */
    CK(cudaMemcpy(&sig, dst + bytes, 8, cudaMemcpyDeviceToHost));
    EXPECT_EQ_U64((uint64_t)msgs - 1, sig);
    EXPECT_EQ_U64(d.resv, d.done);
    EXPECT_TRUE(d.resv > 8ull << d.sq_log);   /* many passes over the ring */
    EXPECT_EQ_INT(0, d.err);
    expect_span_clear(&d);
    gdaki_pair_dereg(p, &md);
    gdaki_pair_close(p);
    CK(cudaFree(src));
    CK(cudaFree(dst));
    CK(cudaFree(rc));
    CK(cudaFree(bad));
}

TAP_CASE(test_inline_puts_of_one_to_sixteen_bbs_from_the_gpu_byte_exact)
{
    inline_puts_from_the_gpu();
}

/* One thread posts two puts that ask for inline, lens[0] then lens[1] bytes
 * from a registered source, back to back (the first still outstanding when
 * the second is posted: nobody has polled, so done stays behind resv);
 * with rule, through gdaki_q_inline_flags.  bbs[n] gets the BBs each took. */
__global__ void k_two_inline_puts(struct gdaki_qp_dev *q, uint64_t src, uint32_t lkey, uint64_t dst,
                                  uint32_t rkey, uint32_t len0, uint32_t len1, int rule, uint64_t *bbs,
                                  int *rc)
{
    uint64_t t = 0;
    for (int n = 0; n < 2; n++) {
        struct gdaki_op op = { 0 };
        op.laddr = src + (uint64_t)n * INL_STRIDE;
        op.lkey = lkey;
        op.len = n ? len1 : len0;
        op.raddr = dst + (uint64_t)n * INL_STRIDE;
        op.rkey = rkey;
        op.flags = GDAKI_OP_INLINE;
        if (rule)
            op.flags = gdaki_q_inline_flags(q, &op);
        uint64_t before = gdaki_read_volatile64(&q->resv);
        t = gdaki_put_thread(q, &op);
        if (t == GDAKI_SLOT_ERROR) {
            *rc = -1;
            return;
        }
        bbs[n] = t - before;
    }
    if (gdaki_quiet_thread(q, t) < 0)
        *rc = -1;
}

/* k_two_inline_puts on a fresh pair whose device descriptor says
 * max_wqe_ds (0: as the device said, 63 units on softnic); checks the BBs each put took and
 * every byte (each message's, and nothing past it). */
static void two_inline_puts(uint32_t max_wqe_ds, int rule, const uint32_t lens[2], const uint64_t want_bbs[2])
{
    struct gdaki_pair *p = open_pair(64);
    uint8_t *src, *dst;
    uint64_t *bbs;
    int *rc;
    CK(cudaMalloc(&src, 2 * INL_STRIDE));
    CK(cudaMalloc(&dst, 2 * INL_STRIDE));
    CK(cudaMemset(dst, 0, 2 * INL_STRIDE));
    CK(cudaMallocManaged(&bbs, 2 * sizeof(*bbs)));
    CK(cudaMallocManaged(&rc, sizeof(int)));
    *rc = 0;
    k_fill<<<8, 256>>>(src, 2 * INL_STRIDE, 21);
    struct gdaki_mr ms, md;
    reg(p, src, 2 * INL_STRIDE, &ms);
    reg(p, dst, 2 * INL_STRIDE, &md);
    struct gdaki_qp_dev *dq = gdaki_pair_qp_device(p);
    struct gdaki_qp_dev d = read_desc(p);
    EXPECT_EQ_INT(63, (int)d.max_wqe_ds);  /* softnic states 1024 bytes: the ds field's most */
    if (max_wqe_ds)
        CK(cudaMemcpy(&dq->max_wqe_ds, &max_wqe_ds, sizeof(max_wqe_ds), cudaMemcpyHostToDevice));
    SYNC();
    k_two_inline_puts<<<1, 1, 0, post_stream()>>>(dq, ms.addr, ms.lkey, md.addr, md.rkey, lens[0], lens[1], rule,
                                                  bbs, rc);
    wait_kernel(p);
    d = read_desc(p);
    if (*rc != 0)
        tap_fail_at(__FILE__, __LINE__, "a put or quiet failed, err 0x%08x", d.err);
    EXPECT_EQ_U64(want_bbs[0], bbs[0]);
    EXPECT_EQ_U64(want_bbs[1], bbs[1]);
    uint8_t h[2 * INL_STRIDE];
    CK(cudaMemcpy(h, dst, sizeof(h), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < sizeof(h); i++)
        if (h[i] != (i % INL_STRIDE < lens[i / INL_STRIDE] ? pattern(i, 21) : 0)) {
            tap_fail_at(__FILE__, __LINE__, "byte %zu: 0x%02x", i, h[i]);
            break;
        }
    EXPECT_EQ_U64(d.resv, d.done);
    expect_span_clear(&d);
    gdaki_pair_dereg(p, &ms);
    gdaki_pair_dereg(p, &md);
    gdaki_pair_close(p);
    CK(cudaFree(src));
    CK(cudaFree(dst));
    CK(cudaFree(bbs));
    CK(cudaFree(rc));
}

/* gdaki_q_inline_flags on the GPU: a 512-byte put asking for inline goes
 * inline (9 BBs) on an idle QP, and by pointer (1 BB) right behind it. */
TAP_CASE(test_long_inline_put_goes_inline_when_idle_and_by_pointer_behind_another)
{
    const uint32_t lens[2] = { 512, 512 };
    const uint64_t want[2] = { gdaki_inline_bbs(512), 1 };
    two_inline_puts(0, 1, lens, want);
}

/* The device's largest WQE (max_wqe_ds, from QUERY_HCA_CAP on a ConnectX)
 * set to 512 bytes (32 units) in the device descriptor: a 476-byte inline
 * put takes 8 BBs and a 972-byte one goes by pointer in one. */
TAP_CASE(test_inline_put_past_the_devices_largest_wqe_goes_by_pointer_from_the_gpu)
{
    const uint32_t lens[2] = { 476, GDAKI_INLINE_MAX };
    const uint64_t want[2] = { 8, 1 };
    two_inline_puts(32, 0, lens, want);
}

/* Many threads of many blocks post inline puts and put_signals of 1 to 16
 * BBs on one queue at once (thread scope), each message into its thread's
 * own rotation of 4 destination slots, waiting before it reuses one; span
 * entries are written and cleared by different threads.  The last 4
 * messages of every thread are checked byte for byte. */
#define MTI_BLOCKS 4
#define MTI_THREADS 64
#define MTI_MSGS 48

__host__ __device__ static inline uint32_t mti_len(unsigned t, int i)
{
    return (uint32_t)((i * 37 + (int)t * 11) % GDAKI_INLINE_MAX) + 1;
}

__global__ void k_inline_mt(struct gdaki_qp_dev *q, uint64_t dst, uint32_t rkey, uint64_t sig, int *rc)
{
    const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    uint8_t src[GDAKI_INLINE_MAX];
    uint64_t ticket[4] = { 0, 0, 0, 0 };
    for (int i = 0; i < MTI_MSGS; i++) {
        uint32_t len = mti_len(t, i);
        for (uint32_t k = 0; k < len; k++)
            src[k] = pattern(((size_t)t * MTI_MSGS + i) * INL_STRIDE + k, 9);
        if (ticket[i % 4] && gdaki_quiet_thread(q, ticket[i % 4]) < 0) {
            atomicExch(rc, -1);
            return;
        }
        struct gdaki_op op = { 0 };
        op.laddr = (uint64_t)(uintptr_t)src;
        op.len = len;
        op.raddr = dst + ((uint64_t)t * 4 + (uint64_t)(i % 4)) * INL_STRIDE;
        op.rkey = rkey;
        op.flags = GDAKI_OP_INLINE;
        uint64_t k = (i & 1) ? gdaki_put_signal_thread(q, &op, sig, rkey, 1, GDAKI_SIGNAL_SET)
                             : gdaki_put_thread(q, &op);
        if (k == GDAKI_SLOT_ERROR) {
            atomicExch(rc, -1);
            return;
        }
        ticket[i % 4] = k;
    }
    for (int j = 0; j < 4; j++)
        if (gdaki_quiet_thread(q, ticket[j]) < 0)
            atomicExch(rc, -1);
}

static void inline_puts_from_many_gpu_threads(void)
{
    struct gdaki_pair *p = open_pair(64);
    const int nthr = MTI_BLOCKS * MTI_THREADS;
    const size_t bytes = (size_t)nthr * 4 * INL_STRIDE;
    uint8_t *dst;
    int *rc;
    CK(cudaMalloc(&dst, bytes + 64));
    CK(cudaMemset(dst, 0, bytes + 64));
    CK(cudaMallocManaged(&rc, sizeof(int)));
    *rc = 0;
    struct gdaki_mr md;
    reg(p, dst, bytes + 64, &md);
    SYNC();
    k_inline_mt<<<MTI_BLOCKS, MTI_THREADS, 0, post_stream()>>>(gdaki_pair_qp_device(p), md.addr, md.rkey,
                                                                md.addr + bytes, rc);
    wait_kernel(p);
    struct gdaki_qp_dev d = read_desc(p);
    if (*rc != 0)
        tap_fail_at(__FILE__, __LINE__, "an inline put or quiet failed, err 0x%08x", d.err);
    uint8_t *h = (uint8_t *)malloc(bytes);
    CK(cudaMemcpy(h, dst, bytes, cudaMemcpyDeviceToHost));
    for (int t = 0; t < nthr; t++)
        for (int i = MTI_MSGS - 4; i < MTI_MSGS; i++) {
            const uint8_t *b = h + ((size_t)t * 4 + (size_t)(i % 4)) * INL_STRIDE;
            uint32_t len = mti_len((unsigned)t, i);
            for (uint32_t k = 0; k < len; k++)
                if (b[k] != pattern(((size_t)t * MTI_MSGS + i) * INL_STRIDE + k, 9))
                    tap_fail_at(__FILE__, __LINE__, "thread %d message %d byte %u", t, i, k);
        }
    free(h);
    EXPECT_EQ_U64(d.resv, d.done);
    EXPECT_EQ_INT(0, d.err);
    expect_span_clear(&d);
    gdaki_pair_dereg(p, &md);
    gdaki_pair_close(p);
    CK(cudaFree(dst));
    CK(cudaFree(rc));
}

TAP_CASE(test_inline_puts_from_many_gpu_threads_byte_exact)
{
    inline_puts_from_many_gpu_threads();
}

TAP_CASE(test_one_thread_puts_8B_to_4MiB_byte_exact)
{
    puts_byte_exact(1, 1, SCOPE_THREAD, 4u << 20);
}

TAP_CASE(test_one_warp_puts_8B_to_4MiB_byte_exact)
{
    puts_byte_exact(1, 32, SCOPE_WARP, 4u << 20);
}

TAP_CASE(test_1024_thread_block_puts_8B_to_4MiB_byte_exact)
{
    puts_byte_exact(1, 1024, SCOPE_BLOCK, 4u << 20);
}

TAP_CASE(test_1024_threads_each_posting_alone_byte_exact)
{
    /* 1024 independent posters contend for slots and doorbell turns. */
    puts_byte_exact(1, 1024, SCOPE_THREAD, 64u << 10);
}

TAP_CASE(test_four_blocks_of_warps_byte_exact)
{
    puts_byte_exact(4, 256, SCOPE_WARP, 256u << 10);
}

/* --------------------------------------------------------- ring wrap */

__global__ void k_many(struct gdaki_qp_dev *q, uint64_t src, uint32_t lkey, uint64_t dst, uint32_t rkey,
                       uint32_t size, int iters, int scope, int *rc)
{
    const size_t nthr = (size_t)gridDim.x * blockDim.x;
    const size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    uint64_t ticket = 0;
    for (int i = 0; i < iters; i++) {
        const size_t slot = (size_t)i * nthr + t;
        struct gdaki_op op = { 0 };
        op.laddr = src + slot * size;
        op.lkey = lkey;
        op.len = size;
        op.raddr = dst + slot * size;
        op.rkey = rkey;
        ticket = scope == SCOPE_WARP ? gdaki_put_warp(q, &op, 1) : gdaki_put_thread(q, &op);
        if (ticket == GDAKI_SLOT_ERROR) {
            atomicExch(rc, -1);
            return;
        }
    }
    int r = scope == SCOPE_WARP ? gdaki_quiet_warp(q, ticket) : gdaki_quiet_thread(q, ticket);
    if (r < 0)
        atomicExch(rc, -1);
}

static void wrap_case(uint32_t depth, int blocks, int threads, int iters, uint32_t size, int scope)
{
    struct gdaki_pair *p = open_pair(depth);
    const size_t n = (size_t)blocks * threads * iters * size;
    uint8_t *src, *dst;
    int *rc;
    CK(cudaMalloc(&src, n));
    CK(cudaMalloc(&dst, n + 64));
    CK(cudaMallocManaged(&rc, sizeof(int)));
    *rc = 0;
    struct gdaki_mr ms, md;
    reg(p, src, n, &ms);
    reg(p, dst, n + 64, &md);
    k_fill<<<256, 256>>>(src, n, 77);
    CK(cudaMemset(dst, 0, n + 64));
    SYNC();
    k_many<<<blocks, threads, 0, post_stream()>>>(gdaki_pair_qp_device(p), ms.addr, ms.lkey, md.addr, md.rkey, size,
                                iters, scope, rc);
    wait_kernel(p);
    EXPECT_EQ_INT(0, *rc);
    unsigned long long first = 0, bad = check(dst, n, 77, 64, &first);
    if (bad)
        tap_fail_at(__FILE__, __LINE__, "%llu bad bytes, first at %llu", bad, first);
    struct gdaki_qp_dev d = read_desc(p);
    const uint64_t wqes = (uint64_t)blocks * threads * iters;
    EXPECT_EQ_U64(wqes, d.done);
    tap_diag("%llu WQEs through a ring of %u slots: %llu passes",
             (unsigned long long)wqes, 1u << d.sq_log, (unsigned long long)(wqes >> d.sq_log));
    gdaki_pair_close(p);
    CK(cudaFree(src));
    CK(cudaFree(dst));
    CK(cudaFree(rc));
}

TAP_CASE(test_warp_posts_wrap_a_small_ring_many_times)
{
    wrap_case(64, 1, 32, 100, 64, SCOPE_WARP);     /* 3200 WQEs, 50 passes */
}

TAP_CASE(test_posts_past_the_16bit_wqe_counter)
{
    wrap_case(1024, 2, 1024, 40, 8, SCOPE_THREAD); /* 81920 WQEs: idx wraps */
}

/* ------------------------------------------------------------ quiet */

/* One thread: put 4 MiB, quiet, and read the destination right away in the
 * same kernel; each round uses another source pattern, so data from an
 * earlier round or none at all shows as bad bytes. */
__global__ void k_quiet(struct gdaki_qp_dev *q, uint64_t src0, uint32_t lkey, uint8_t *dst, uint64_t dst_addr,
                        uint32_t rkey, uint32_t size, int rounds, unsigned long long *bad, int *rc)
{
    for (int r = 0; r < rounds; r++) {
        struct gdaki_op op = { 0 };
        op.laddr = src0 + (uint64_t)r * size;
        op.lkey = lkey;
        op.len = size;
        op.raddr = dst_addr;
        op.rkey = rkey;
        uint64_t t = gdaki_put_thread(q, &op);
        if (gdaki_quiet_thread(q, t) < 0) {
            *rc = -1;
            return;
        }
        const volatile uint8_t *d = dst;
        unsigned long long b = 0;
        for (size_t i = 0; i < size; i += 509)  /* a prime stride, and the last byte */
            b += d[i] != pattern(i, (unsigned)r + 1);
        b += d[size - 1] != pattern(size - 1, (unsigned)r + 1);
        bad[r] = b;
    }
}

static void quiet_returns_only_after_the_write_completed(void)
{
    struct gdaki_pair *p = open_pair(64);
    const uint32_t size = 4u << 20;
    const int rounds = 4;
    uint8_t *src, *dst;
    unsigned long long *bad;
    int *rc;
    CK(cudaMalloc(&src, (size_t)size * rounds));
    CK(cudaMalloc(&dst, size));
    CK(cudaMallocManaged(&bad, sizeof(*bad) * rounds));
    CK(cudaMallocManaged(&rc, sizeof(int)));
    *rc = 0;
    for (int r = 0; r < rounds; r++) {
        k_fill<<<256, 256>>>(src + (size_t)r * size, size, (unsigned)r + 1);
        bad[r] = ~0ull;
    }
    CK(cudaMemset(dst, 0, size));
    SYNC();
    struct gdaki_mr ms, md;
    reg(p, src, (size_t)size * rounds, &ms);
    reg(p, dst, size, &md);
    k_quiet<<<1, 1, 0, post_stream()>>>(gdaki_pair_qp_device(p), ms.addr, ms.lkey, dst, md.addr, md.rkey, size, rounds,
                      bad, rc);
    wait_kernel(p);
    EXPECT_EQ_INT(0, *rc);
    for (int r = 0; r < rounds; r++)
        if (bad[r])
            tap_fail_at(__FILE__, __LINE__, "round %d: %llu sampled bytes not there after quiet", r, bad[r]);
    gdaki_pair_close(p);
    CK(cudaFree(src));
    CK(cudaFree(dst));
    CK(cudaFree(bad));
    CK(cudaFree(rc));
}

TAP_CASE(test_quiet_returns_only_after_the_write_completed)
{
    quiet_returns_only_after_the_write_completed();
}

/* ----------------------------------------------------------- signals */

#define SIG_MSGS 200
#define SIG_LEN 2048   /* bytes per lane per message */

/* Block 0, one warp: message m = 32 lanes x SIG_LEN bytes, then signal m+1.
 * Block 1, one thread: whenever the signal says k, messages < k must be
 * whole in dst (read with volatile loads after wait_signal's fence). */
__global__ void k_signal(struct gdaki_qp_dev *q, uint64_t src, uint32_t lkey, const uint8_t *dst,
                         uint64_t dst_addr, uint32_t rkey, uint64_t *sig, uint64_t sig_addr,
                         uint32_t sig_rkey, int *rc, int *first_bad)
{
    if (blockIdx.x == 0) {
        uint64_t t = 0;
        for (int m = 0; m < SIG_MSGS; m++) {
            const size_t off = ((size_t)m * 32 + threadIdx.x) * SIG_LEN;
            struct gdaki_op op = { 0 };
            op.laddr = src + off;
            op.lkey = lkey;
            op.len = SIG_LEN;
            op.raddr = dst_addr + off;
            op.rkey = rkey;
            t = gdaki_put_signal_warp(q, &op, 1, sig_addr, sig_rkey, (uint64_t)m + 1, GDAKI_SIGNAL_SET);
            if (t == GDAKI_SLOT_ERROR) {
                atomicExch(rc, -1);
                return;
            }
        }
        if (gdaki_quiet_warp(q, t) < 0)
            atomicExch(rc, -1);
        return;
    }
    if (threadIdx.x != 0)
        return;
    const volatile uint8_t *d = dst;
    uint64_t checked = 0;
    while (checked < SIG_MSGS) {
        uint64_t seen = gdaki_wait_signal(sig, checked + 1);
        for (uint64_t m = checked; m < seen; m++) {
            const size_t base = (size_t)m * 32 * SIG_LEN;
            for (size_t i = 0; i < 32 * SIG_LEN; i += 61)
                if (d[base + i] != pattern(base + i, 5) && *first_bad < 0)
                    *first_bad = (int)m;
            const size_t last = base + 32 * SIG_LEN - 1;
            if (d[last] != pattern(last, 5) && *first_bad < 0)
                *first_bad = (int)m;
        }
        checked = seen;
    }
}

/* softnic's count of 8-byte writes landed with cuStreamWriteValue64
 * (softnic_ctl_gpu_value_writes): 0; ENOTSUP when the driver has no such
 * call or refused one; ENOENT when the verbs library is not softnic. */
static int value_writes(struct gdaki_pair *p, uint64_t *n)
{
    int (*fn)(uint64_t *) = NULL;
    *(void **)&fn = softnic_sym(p, "softnic_ctl_gpu_value_writes");
    return fn ? fn(n) : ENOENT;
}

static void signal_arrives_after_its_data(void)
{
    struct gdaki_pair *p = open_pair(256);
    uint64_t vw0 = 0, vw1 = 0;
    int vrc = value_writes(p, &vw0);
    const size_t n = (size_t)SIG_MSGS * 32 * SIG_LEN;
    uint8_t *src, *dst;
    uint64_t *sig;
    int *rc, *first_bad;
    CK(cudaMalloc(&src, n));
    CK(cudaMalloc(&dst, n));
    CK(cudaMalloc(&sig, 8));
    CK(cudaMallocManaged(&rc, sizeof(int)));
    CK(cudaMallocManaged(&first_bad, sizeof(int)));
    *rc = 0;
    *first_bad = -1;
    k_fill<<<256, 256>>>(src, n, 5);
    CK(cudaMemset(dst, 0, n));
    CK(cudaMemset(sig, 0, 8));
    SYNC();
    struct gdaki_mr ms, md, mg;
    reg(p, src, n, &ms);
    reg(p, dst, n, &md);
    reg(p, sig, 8, &mg);
    k_signal<<<2, 32, 0, post_stream()>>>(gdaki_pair_qp_device(p), ms.addr, ms.lkey, dst, md.addr, md.rkey, sig, mg.addr,
                        mg.rkey, rc, first_bad);
    wait_kernel(p);
    EXPECT_EQ_INT(0, *rc);
    EXPECT_EQ_INT(-1, *first_bad);
    uint64_t final_sig = 0;
    CK(cudaMemcpy(&final_sig, sig, 8, cudaMemcpyDeviceToHost));
    EXPECT_EQ_U64(SIG_MSGS, final_sig);
    EXPECT_EQ_INT(0, (int)check(dst, n, 5, 0, NULL));
    /* On softnic the signals that came behind their payload in one batch
     * of the responder went as cuStreamWriteValue64: the order checked
     * above held for them too. */
    if (vrc == 0 && (vrc = value_writes(p, &vw1)) == 0) {
        tap_diag("signals landed as cuStreamWriteValue64: %llu of %d", (unsigned long long)(vw1 - vw0),
                 SIG_MSGS);
        EXPECT_TRUE(vw1 > vw0);
    } else {
        tap_diag("%s: signals as cuStreamWriteValue64 not checked",
                 vrc == ENOTSUP ? "the CUDA driver has no cuStreamWriteValue64 or refused it" : "not softnic");
    }
    gdaki_pair_close(p);
    CK(cudaFree(src));
    CK(cudaFree(dst));
    CK(cudaFree(sig));
    CK(cudaFree(rc));
    CK(cudaFree(first_bad));
}

TAP_CASE(test_signal_arrives_after_its_data)
{
    signal_arrives_after_its_data();
}

__global__ void k_signal_add(struct gdaki_qp_dev *q, uint64_t src, uint32_t lkey, uint64_t dst,
                             uint32_t rkey, uint64_t sig_addr, uint32_t sig_rkey, int *rc)
{
    struct gdaki_op op = { 0 };
    op.laddr = src + threadIdx.x * 64;
    op.lkey = lkey;
    op.len = 64;
    op.raddr = dst + threadIdx.x * 64;
    op.rkey = rkey;
    uint64_t t = gdaki_put_signal_thread(q, &op, sig_addr, sig_rkey, 1, GDAKI_SIGNAL_ADD);
    if (t == GDAKI_SLOT_ERROR || gdaki_quiet_thread(q, t) < 0)
        atomicExch(rc, -1);
}

TAP_CASE(test_signal_add_from_many_threads_sums)
{
    struct gdaki_pair *p = open_pair(1024);
    struct gdaki_qp_dev d = read_desc(p);
    if (d.flags & GDAKI_QP_FLAG_NO_ATOMICS) {
        gdaki_pair_close(p);
        TAP_SKIP("device has no RDMA atomics (atomic_cap NONE): GDAKI_SIGNAL_ADD needs a NIC with them");
    }
    uint8_t *src, *dst;
    uint64_t *sig;
    int *rc;
    CK(cudaMalloc(&src, 256 * 64));
    CK(cudaMalloc(&dst, 256 * 64));
    CK(cudaMalloc(&sig, 8));
    CK(cudaMallocManaged(&rc, sizeof(int)));
    *rc = 0;
    CK(cudaMemset(sig, 0, 8));
    struct gdaki_mr ms, md, mg;
    reg(p, src, 256 * 64, &ms);
    reg(p, dst, 256 * 64, &md);
    reg(p, sig, 8, &mg);
    k_signal_add<<<1, 256, 0, post_stream()>>>(gdaki_pair_qp_device(p), ms.addr, ms.lkey, md.addr, md.rkey, mg.addr,
                             mg.rkey, rc);
    wait_kernel(p);
    EXPECT_EQ_INT(0, *rc);
    uint64_t v = 0;
    CK(cudaMemcpy(&v, sig, 8, cudaMemcpyDeviceToHost));
    EXPECT_EQ_U64(256, v);
    gdaki_pair_close(p);
}

TAP_CASE(test_signal_add_refused_without_device_atomics)
{
    struct gdaki_pair *p = open_pair(64);
    /* softnic has atomics now: the refusal runs on a copy of the QP
     * descriptor that says GDAKI_QP_FLAG_NO_ATOMICS, as a NIC without them
     * would (a device without atomics has the flag already). */
    struct gdaki_qp_dev d = read_desc(p);
    d.flags |= GDAKI_QP_FLAG_NO_ATOMICS;
    struct gdaki_qp_dev *q;
    CK(cudaMalloc(&q, sizeof(d)));
    CK(cudaMemcpy(q, &d, sizeof(d), cudaMemcpyHostToDevice));
    int *rc;
    CK(cudaMallocManaged(&rc, sizeof(int)));
    *rc = 0;
    k_signal_add<<<1, 1, 0, post_stream()>>>(q, 0, 0, 0, 0, 0, 0, rc);
    wait_kernel(p);
    EXPECT_EQ_INT(-1, *rc);
    CK(cudaMemcpy(&d, q, sizeof(d), cudaMemcpyDeviceToHost));
    EXPECT_EQ_U64(0, d.resv);   /* refused before anything was posted */
    EXPECT_EQ_INT(0, d.err);
    EXPECT_EQ_U64(0, read_desc(p).resv);
    gdaki_pair_close(p);
    CK(cudaFree(q));
    CK(cudaFree(rc));
}

/* ------------------------------------------------------ immediate data */

__global__ void k_imm(struct gdaki_qp_dev *q, uint64_t src, uint32_t lkey, uint64_t dst, uint32_t rkey,
                      int *rc)
{
    struct gdaki_op op = { 0 };
    op.laddr = src + threadIdx.x * 256;
    op.lkey = lkey;
    op.len = 256;
    op.raddr = dst + threadIdx.x * 256;
    op.rkey = rkey;
    op.imm = 0x1000u + threadIdx.x;
    uint64_t t = gdaki_put_imm_thread(q, &op);
    if (t == GDAKI_SLOT_ERROR || gdaki_quiet_thread(q, t) < 0)
        atomicExch(rc, -1);
}

static void write_with_imm_from_gpu_reaches_the_receiver(void)
{
    struct gdaki_pair *p = open_pair(64);
    uint8_t *src, *dst;
    int *rc;
    CK(cudaMalloc(&src, 8 * 256));
    CK(cudaMalloc(&dst, 8 * 256));
    CK(cudaMallocManaged(&rc, sizeof(int)));
    *rc = 0;
    k_fill<<<8, 256>>>(src, 8 * 256, 9);
    CK(cudaMemset(dst, 0, 8 * 256));
    SYNC();
    struct gdaki_mr ms, md;
    reg(p, src, 8 * 256, &ms);
    reg(p, dst, 8 * 256, &md);
    EXPECT_EQ_INT(0, gdaki_pair_post_recv(p, 8));
    k_imm<<<1, 8, 0, post_stream()>>>(gdaki_pair_qp_device(p), ms.addr, ms.lkey, md.addr, md.rkey, rc);
    wait_kernel(p);
    EXPECT_EQ_INT(0, *rc);
    uint32_t imm[8];
    int got = 0;
    for (int spin = 0; spin < 100000 && got < 8; spin++) {
        int k = gdaki_pair_poll_recv(p, imm + got, 8 - got);
        EXPECT_TRUE(k >= 0);
        got += k;
        if (!k)
            usleep(100);
    }
    EXPECT_EQ_INT(8, got);
    unsigned seen = 0;
    for (int i = 0; i < got; i++)
        if (imm[i] >= 0x1000 && imm[i] < 0x1008)
            seen |= 1u << (imm[i] - 0x1000);
    EXPECT_EQ_INT(0xff, seen);
    EXPECT_EQ_INT(0, (int)check(dst, 8 * 256, 9, 0, NULL));
    gdaki_pair_close(p);
}

TAP_CASE(test_write_with_imm_from_gpu_reaches_the_receiver)
{
    write_with_imm_from_gpu_reaches_the_receiver();
}

/* ------------------------------------------------------------ errors */

/* One thread posts a good write, then a WQE spoiled as `how` says. */
__global__ void k_bad(struct gdaki_qp_dev *q, uint64_t src, uint32_t lkey, uint64_t dst, uint32_t rkey,
                      int how, int *quiet_rc)
{
    struct gdaki_op op = { 0 };
    op.laddr = src;
    op.lkey = lkey;
    op.len = 64;
    op.raddr = dst;
    op.rkey = rkey;
    uint64_t t = gdaki_put_thread(q, &op);
    quiet_rc[0] = gdaki_quiet_thread(q, t);
    if (how == 1)
        op.rkey ^= 0x5a5a00;
    uint64_t slot = gdaki_q_reserve(q, 1);
    uint8_t *w = (uint8_t *)gdaki_q_slot_ptr(q, slot);
    gdaki_q_build(q, slot, GDAKI_KIND_WRITE, &op, 1);
    if (how == 0)
        w[3] = 0x55;   /* no such opcode */
    uint64_t db = gdaki_q_db_value(w);
    gdaki_q_ring(q, slot, 1, db);
    quiet_rc[1] = gdaki_quiet_thread(q, slot + 1);
    /* Posting after the error fails instead of hanging. */
    uint64_t t2 = gdaki_put_thread(q, &op);
    quiet_rc[2] = (t2 == GDAKI_SLOT_ERROR || gdaki_quiet_thread(q, t2) < 0) ? -1 : 0;
}

static void error_case(int how, uint8_t syndrome)
{
    struct gdaki_pair *p = open_pair(64);
    uint8_t *src, *dst;
    int *qrc;
    CK(cudaMalloc(&src, 64));
    CK(cudaMalloc(&dst, 64));
    CK(cudaMallocManaged(&qrc, 3 * sizeof(int)));
    qrc[0] = qrc[1] = qrc[2] = 99;
    struct gdaki_mr ms, md;
    reg(p, src, 64, &ms);
    reg(p, dst, 64, &md);
    k_bad<<<1, 1, 0, post_stream()>>>(gdaki_pair_qp_device(p), ms.addr, ms.lkey, md.addr, md.rkey, how, qrc);
    wait_kernel(p);
    EXPECT_EQ_INT(0, qrc[0]);
    EXPECT_EQ_INT(-1, qrc[1]);
    EXPECT_EQ_INT(-1, qrc[2]);
    struct gdaki_qp_dev d = read_desc(p);
    EXPECT_EQ_U64(GDAKI_ERR_WORD(MLX5_CQE_REQ_ERR, 0, syndrome), GDAKI_ERR_NO_VENDOR(d.err));
    EXPECT_EQ_INT(IBV_QPS_ERR, gdaki_pair_send_qp_state(p));
    gdaki_pair_close(p);
    CK(cudaFree(src));
    CK(cudaFree(dst));
    CK(cudaFree(qrc));
}

TAP_CASE(test_malformed_wqe_from_gpu_gives_error_completion)
{
    error_case(0, MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR);
}

TAP_CASE(test_bad_rkey_from_gpu_gives_remote_access_error)
{
    error_case(1, MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR);
}

/* ------------------------------------- the tool's step on connected QPs */

static void bw_write_size_on_connected_halves(void)
{
    need_gpu();
    struct gdaki_pair_opts o;
    gdaki_pair_opts_default(&o, err, sizeof(err));
    if (!o.ibverbs_lib)
        o.ibverbs_lib = test_softnic_verbs();
    o.use_cuda = 1;
    o.queue_mem = queue_mem();
    struct gdaki_qp_info si, ri;
    struct gdaki_pair *snd = NULL, *rcv = NULL;
    if (gdaki_half_open(&o, GDAKI_ROLE_SEND, &snd, &si, err, sizeof(err)) ||
        gdaki_half_open(&o, GDAKI_ROLE_RECV, &rcv, &ri, err, sizeof(err)) ||
        gdaki_half_connect(snd, &ri, err, sizeof(err)) || gdaki_half_connect(rcv, &si, err, sizeof(err)))
        tap_fail_at(__FILE__, __LINE__, "halves: %s", err);
    const size_t n = 64 * 1024;
    uint8_t *src, *dst;
    uint64_t *sig;
    CK(cudaMalloc(&src, n));
    CK(cudaMalloc(&dst, n));
    CK(cudaMalloc(&sig, 8));
    k_fill<<<64, 256>>>(src, n, 21);
    CK(cudaMemset(dst, 0, n));
    CK(cudaMemset(sig, 0, 8));
    SYNC();
    struct gdaki_mr ms, md, mg;
    reg(snd, src, n, &ms);
    reg(rcv, dst, n, &md);
    reg(rcv, sig, 8, &mg);
    struct gdaki_bw_opts bo;
    memset(&bo, 0, sizeof(bo));
    bo.iters = 2000;
    bo.threads = 32;
    bo.window = 4;
    bo.lat_iters = 100;
    bo.signal = 1;
    struct gdaki_bw_result r;
    if (gdaki_bw_write_size(snd, &ms, md.addr, md.rkey, mg.addr, mg.rkey, n, &bo, &r, err, sizeof(err)))
        tap_fail_at(__FILE__, __LINE__, "gdaki_bw_write_size: %s", err);
    EXPECT_TRUE(r.msgs >= 2000);
    EXPECT_TRUE(r.msg_rate_mps > 0 && r.lat_us > 0 && r.lat_avg_us > 0);
    /* Half the rounds take at least the median, so the mean is at least
     * half of it (the two clocks differ by far less than that); a unit
     * slip between them would not pass. */
    EXPECT_TRUE(r.lat_us <= 2 * r.lat_avg_us);
    tap_diag("64 KiB x %ld: %.4f Mmsg/s, %.2f Gbit/s, latency median %.2f us, mean %.2f us", r.msgs,
             r.msg_rate_mps, r.gbps, r.lat_us, r.lat_avg_us);
    EXPECT_EQ_INT(0, (int)check(dst, n, 21, 0, NULL));
    uint64_t v = 0;
    CK(cudaMemcpy(&v, sig, 8, cudaMemcpyDeviceToHost));
    EXPECT_TRUE(v >= 1);    /* SET of 1 on softnic, a sum with device atomics */
    gdaki_pair_close(snd);
    gdaki_pair_close(rcv);
}

TAP_CASE(test_bw_write_size_on_connected_halves)
{
    bw_write_size_on_connected_halves();
}

/* ------------------------------------------------------- queue memory */

/* The acceptance cases again with the send ring, doorbell records and CQ in
 * GPU memory (DEVX user memory): the kernel's queue accesses stay on the
 * GPU, the NIC (softnic's thread, through CUDA copies) fetches them. */
static void gpu_queue(void)
{
    g_qmem = GDAKI_QUEUE_MEM_GPU;
}

TAP_CASE(test_gpu_queue_pair_is_made_in_gpu_memory)
{
    gpu_queue();
    struct gdaki_pair *p = open_pair(64);
    struct gdaki_pair_info in;
    gdaki_pair_get_info(p, &in);
    const struct gdaki_qp_dev *h = gdaki_pair_qp_host(p);
    EXPECT_EQ_INT(GDAKI_QUEUE_MEM_GPU, in.queue_mem);
    EXPECT_TRUE(h->flags & GDAKI_QP_FLAG_GPU_QUEUE);
    cudaPointerAttributes a;
    CK(cudaPointerGetAttributes(&a, h->sq));
    EXPECT_EQ_INT(cudaMemoryTypeDevice, a.type);
    CK(cudaPointerGetAttributes(&a, h->cq));
    EXPECT_EQ_INT(cudaMemoryTypeDevice, a.type);
    EXPECT_EQ_INT(IBV_QPS_RTS, gdaki_pair_send_qp_state(p));
    tap_diag("%s: DEVX QP %u, %u slots, %u CQEs in GPU memory, UAR mapped as %s", in.dev_name,
             in.send_qpn, in.sq_slots, in.cq_entries, in.uar_io_registered ? "I/O memory" : "host memory");
    gdaki_pair_close(p);
}

TAP_CASE(test_gpu_queue_inline_puts_of_one_to_sixteen_bbs_byte_exact)
{
    gpu_queue();
    inline_puts_from_the_gpu();
}

TAP_CASE(test_gpu_queue_inline_puts_from_many_gpu_threads_byte_exact)
{
    gpu_queue();
    inline_puts_from_many_gpu_threads();
}

TAP_CASE(test_gpu_queue_one_thread_puts_8B_to_4MiB_byte_exact)
{
    gpu_queue();
    puts_byte_exact(1, 1, SCOPE_THREAD, 4u << 20);
}

TAP_CASE(test_gpu_queue_one_warp_puts_8B_to_4MiB_byte_exact)
{
    gpu_queue();
    puts_byte_exact(1, 32, SCOPE_WARP, 4u << 20);
}

TAP_CASE(test_gpu_queue_1024_thread_block_puts_8B_to_4MiB_byte_exact)
{
    gpu_queue();
    puts_byte_exact(1, 1024, SCOPE_BLOCK, 4u << 20);
}

TAP_CASE(test_gpu_queue_1024_threads_each_posting_alone_byte_exact)
{
    gpu_queue();
    puts_byte_exact(1, 1024, SCOPE_THREAD, 64u << 10);
}

TAP_CASE(test_gpu_queue_warp_posts_wrap_a_small_ring_many_times)
{
    gpu_queue();
    wrap_case(64, 1, 32, 100, 64, SCOPE_WARP);
}

TAP_CASE(test_gpu_queue_posts_past_the_16bit_wqe_counter)
{
    gpu_queue();
    wrap_case(1024, 2, 1024, 40, 8, SCOPE_THREAD);
}

TAP_CASE(test_gpu_queue_quiet_returns_only_after_the_write_completed)
{
    gpu_queue();
    quiet_returns_only_after_the_write_completed();
}

TAP_CASE(test_gpu_queue_signal_arrives_after_its_data)
{
    gpu_queue();
    signal_arrives_after_its_data();
}

TAP_CASE(test_gpu_queue_write_with_imm_reaches_the_receiver)
{
    gpu_queue();
    write_with_imm_from_gpu_reaches_the_receiver();
}

TAP_CASE(test_gpu_queue_malformed_wqe_gives_error_completion)
{
    gpu_queue();
    error_case(0, MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR);
}

TAP_CASE(test_gpu_queue_bad_rkey_gives_remote_access_error)
{
    gpu_queue();
    error_case(1, MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR);
}

TAP_CASE(test_gpu_queue_bw_write_size_on_connected_halves)
{
    gpu_queue();
    bw_write_size_on_connected_halves();
}

TAP_CASE(test_uar_mapping_is_reported)
{
    struct gdaki_pair *p = open_pair(64);
    struct gdaki_pair_info in;
    gdaki_pair_get_info(p, &in);
    tap_diag("%s port %d: %u SQ slots, %u CQEs of %u B, UAR mapped as %s, atomics %s, libs %s + %s",
             in.dev_name, in.port, in.sq_slots, in.cq_entries, in.cqe_size,
             in.uar_io_registered ? "I/O memory" : "host memory", in.atomics ? "yes" : "no",
             in.ibverbs_path, in.mlx5_path);
    EXPECT_TRUE(gdaki_pair_qp_device(p) != NULL);
    gdaki_pair_close(p);
}

int main(int argc, char **argv)
{
    /* Cases are children of this process: their marker names our pid. */
    char path[64];
    snprintf(path, sizeof(path), "/tmp/railnet-gdaki-hung.%d", (int)getpid());
    unlink(path);
    int rc = tap_run(argc, argv);
    unlink(path);
    return rc;
}
