/* tests/gpu/gin_device.cu: the GIN cases of tests/gpu/gin_device.h: NCCL's
 * device API (nccl_device.h, CUDA 13's NCCL 2.28.9 headers) on symmetric
 * windows, whatever GIN back end NCCL took (its own IB proxy or GDAKI, or a
 * net plugin's ncclGinPlugin_v11 such as railnet's).
 *
 * Each case fills its source ranges and poisons its destination ranges from
 * the host, then launches one kernel that begins with a GIN barrier over the
 * world team: no peer can write into a window before its owner has reset it.
 * Kernels that wait for data check it on the GPU at the moment the signal
 * says it is there (a check after the kernel could not tell a signal that
 * overtook its data); every case also checks every byte from the host. */
#include "gin_device.h"

#include <cuda_runtime.h>
#include <nccl_device.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Signals, counters, barriers. ginSignalCount's ids start at 0, but NCCL
 * 2.28.9 also put the world GIN barrier's signals (ncclGinBarrierCreate-
 * Requirement) at 0: with the test's signals from 0, rank 0's signal 0
 * ended at 2 after a kernel with two barrier syncs, on NCCL's IB transport
 * and railnet alike. So the first GIN_NBAR ids are left to the barrier, and
 * gin_env_open checks that the ids NCCL gave it do not meet the test's. */
enum {
    GIN_MAX_RANKS = 8,
    GIN_NBAR = 4,              /* alltoall CTAs at most, one barrier and context each */
    SIG_INC0 = GIN_NBAR,       /* + source rank */
    SIG_ADD0 = SIG_INC0 + GIN_MAX_RANKS, /* + source rank */
    SIG_A2A0 = SIG_ADD0 + GIN_MAX_RANKS, /* + CTA */
    SIG_PP = SIG_A2A0 + GIN_NBAR,
    GIN_NSIG = SIG_PP + 1,     /* ids 0..GIN_NSIG-1 requested */
    CTR_PUT = 0,
    GIN_NCTR = 1,
};
static const unsigned char GUARD = 0xEE, SCRIBBLE = 0x5A;
static const size_t SLOT0 = 4096; /* first slot; the bytes before it are guard */

struct gin_res {
    unsigned long long value[GIN_MAX_RANKS]; /* signal or counter values read at the end */
    unsigned long long got, want;            /* first device-side mismatch */
    unsigned long long ns;                   /* timed section, GPU clock */
    unsigned int bad;                        /* device-side mismatches */
    unsigned int bad_k;                      /* put index of the first one */
    unsigned int stuck;                      /* a bounded wait gave up: */
    unsigned int stuck_q, stuck_k;           /*   for source rank q's put k, */
    unsigned long long stuck_got, stuck_want; /*  the value seen and the one awaited */
};

struct gin_env {
    ncclComm_t comm;
    int rank, n, timeout_s, tag;
    size_t win;
    void *sbuf, *rbuf;
    ncclWindow_t swin, rwin;
    ncclDevComm dc;
    ncclGinBarrierHandle_t bar;
    cudaStream_t s;
    struct gin_res *res;
    unsigned char *host;
    struct gin_kill_shared *kill, *kill_dev; /* kill mode: host memory mapped for the GPU */
};

/* Kill mode's progress, written by the kernel's thread 0 (puts, seen,
 * ended) and by the host (stop), each side reading the other's through
 * volatile accesses. */
struct gin_kill_shared {
    unsigned int puts, seen, ended, stop;
};

struct gin_args {
    ncclDevComm dc;
    ncclWindow_t swin, rwin;
    ncclGinBarrierHandle_t bar;
    struct gin_res *res;
    size_t bytes, stride, soff, doff;
    unsigned long long wait_ns; /* bounded waits give up after this */
    int nput, tag, iters, add;
};

#define FAILF(...)                                  \
    do {                                            \
        snprintf(why, whylen, __VA_ARGS__);         \
        return -1;                                  \
    } while (0)
#define CU(call)                                                                              \
    do {                                                                                      \
        cudaError_t e_ = (call);                                                              \
        if (e_ != cudaSuccess)                                                                \
            FAILF("%s: %s (%s:%d)", #call, cudaGetErrorString(e_), __FILE__, __LINE__);       \
    } while (0)
#define NC(call)                                                                              \
    do {                                                                                      \
        ncclResult_t r_ = (call);                                                             \
        if (r_ != ncclSuccess)                                                                \
            FAILF("%s: %s (%s) (%s:%d)", #call, ncclGetErrorString(r_),                       \
                  ncclGetLastError(env->comm), __FILE__, __LINE__);                           \
    } while (0)

/* The byte rank src sends rank dst at index i of case instance tag. */
__host__ __device__ static inline unsigned char gin_pat(int src, int dst, int tag, size_t i)
{
    uint32_t x = (uint32_t)i * 2654435761u ^ (uint32_t)src * 0x9E3779B1u ^
                 (uint32_t)dst * 0x85EBCA77u ^ (uint32_t)tag * 0xC2B2AE3Du ^ (uint32_t)(i >> 32);
    x ^= x >> 15;
    x *= 0x2C1B3C6Du;
    x ^= x >> 12;
    return (unsigned char)x;
}

/* Offset of put k from rank q (in the receiver's window) or to rank q (in the
 * sender's), each slot followed by at least 64 guard bytes. */
__host__ __device__ static inline size_t gin_slot(size_t stride, int nput, int q, int k)
{
    return SLOT0 + ((size_t)q * nput + k) * stride;
}

static size_t gin_stride(size_t bytes) { return (bytes + 64 + 127) & ~(size_t)63; }

__device__ static inline unsigned long long gin_clock_ns(void)
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* CTA-wide check of `bytes` at p against gin_pat(src, dst, tag, base + i). */
__device__ static void gin_check_dev(const volatile unsigned char *p, size_t bytes, int src,
                                     int dst, int tag, size_t base, int k, struct gin_res *res)
{
    for (size_t i = threadIdx.x; i < bytes; i += blockDim.x) {
        unsigned char want = gin_pat(src, dst, tag, base + i);
        unsigned char got = p[i];
        if (got != want && atomicAdd(&res->bad, 1u) == 0) {
            res->got = got;
            res->want = want;
            res->bad_k = (unsigned)k;
        }
    }
    __syncthreads();
}

#define GIN_ACQREL cuda::memory_order_acq_rel

/* CTA-wide bounded wait for a signal (counter = 0) or counter (counter = 1)
 * to reach `want`: thread 0 polls; on success the API's own wait (then
 * immediate) follows, on timeout the value seen goes to res and every
 * thread gets false, so the kernel ends instead of hanging and the host
 * can say which signal stopped where. */
__device__ static bool gin_wait_bounded(const ncclGin &gin, bool counter, uint32_t id,
                                        unsigned long long want, const struct gin_args &a,
                                        int q, int k)
{
    __shared__ int ok;
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned long long t0 = gin_clock_ns(), got;
        for (;;) {
            got = counter ? gin.readCounter(id) : gin.readSignal(id);
            if (nccl::utility::rollingLessEq<uint64_t>(want, got, counter ? 56 : 64)) {
                ok = 1;
                break;
            }
            if (gin_clock_ns() - t0 > a.wait_ns) {
                ok = 0;
                if (atomicAdd(&a.res->stuck, 1u) == 0) {
                    a.res->stuck_q = (unsigned)q;
                    a.res->stuck_k = (unsigned)k;
                    a.res->stuck_got = got;
                    a.res->stuck_want = want;
                }
                break;
            }
        }
    }
    __syncthreads();
    if (!ok)
        return false;
    if (counter)
        gin.waitCounter(ncclCoopCta(), id, want);
    else
        gin.waitSignal(ncclCoopCta(), id, want);
    return true;
}

__global__ void gin_k_put(struct gin_args a)
{
    ncclGin gin(a.dc, 0);
    ncclTeam world = ncclTeamWorld(a.dc);
    ncclGinBarrierSession<ncclCoopCta> bar(ncclCoopCta(), gin, world, a.bar, 0);
    bar.sync(ncclCoopCta(), GIN_ACQREL, ncclGinFenceLevel::Relaxed);
    if (threadIdx.x == 0)
        gin.put(world, (a.dc.rank + 1) % a.dc.nRanks, a.rwin, a.doff, a.swin, a.soff, a.bytes);
    bar.sync(ncclCoopCta(), GIN_ACQREL, ncclGinFenceLevel::Relaxed);
}

/* put + SignalInc (a.add == 0) or put + SignalAdd (a.add == 1). */
__device__ static inline unsigned long long gin_add_value(int k, int nput)
{
    return 1000ull * (unsigned long long)(k + 1) + 7 + (k == nput - 1 ? (1ull << 33) : 0);
}

__global__ void gin_k_signal(struct gin_args a)
{
    ncclGin gin(a.dc, 0);
    ncclTeam world = ncclTeamWorld(a.dc);
    int me = a.dc.rank, n = a.dc.nRanks;
    int sig0 = a.add ? SIG_ADD0 : SIG_INC0;
    if (threadIdx.x < n)
        gin.resetSignal(sig0 + threadIdx.x); /* before the barrier: no peer signals yet */
    __syncthreads();
    ncclGinBarrierSession<ncclCoopCta> bar(ncclCoopCta(), gin, world, a.bar, 0);
    bar.sync(ncclCoopCta(), GIN_ACQREL, ncclGinFenceLevel::Relaxed);
    int p = threadIdx.x;
    if (p < n && p != me) {
        for (int k = 0; k < a.nput; k++) {
            size_t off = gin_slot(a.stride, a.nput, me, k), src = gin_slot(a.stride, a.nput, p, k);
            if (a.add)
                gin.put(world, p, a.rwin, off, a.swin, src, a.bytes,
                        ncclGin_SignalAdd{(ncclGinSignal_t)(SIG_ADD0 + me), gin_add_value(k, a.nput)});
            else
                gin.put(world, p, a.rwin, off, a.swin, src, a.bytes,
                        ncclGin_SignalInc{(ncclGinSignal_t)(SIG_INC0 + me)});
        }
    }
    for (int q = 0; q < n; q++) {
        if (q == me)
            continue;
        unsigned long long want = 0;
        for (int k = 0; k < a.nput; k++) {
            want += a.add ? gin_add_value(k, a.nput) : 1;
            if (!gin_wait_bounded(gin, false, sig0 + q, want, a, q, k))
                return; /* the host reports it; this job's barriers are off step now */
            const volatile unsigned char *d =
                (const unsigned char *)ncclGetLocalPointer(a.rwin, gin_slot(a.stride, a.nput, q, k));
            gin_check_dev(d, a.bytes, q, me, a.tag, (size_t)k * a.bytes, k, a.res);
        }
    }
    bar.sync(ncclCoopCta(), GIN_ACQREL, ncclGinFenceLevel::Relaxed);
    if (threadIdx.x < n)
        a.res->value[threadIdx.x] = gin.readSignal(sig0 + threadIdx.x);
}

__global__ void gin_k_counter(struct gin_args a)
{
    ncclGin gin(a.dc, 0);
    ncclTeam world = ncclTeamWorld(a.dc);
    int me = a.dc.rank, n = a.dc.nRanks;
    if (threadIdx.x == 0)
        gin.resetCounter(CTR_PUT);
    __syncthreads();
    ncclGinBarrierSession<ncclCoopCta> bar(ncclCoopCta(), gin, world, a.bar, 0);
    bar.sync(ncclCoopCta(), GIN_ACQREL, ncclGinFenceLevel::Relaxed);
    int p = threadIdx.x;
    if (p < n && p != me)
        for (int k = 0; k < a.nput; k++)
            gin.put(world, p, a.rwin, gin_slot(a.stride, a.nput, me, k), a.swin,
                    gin_slot(a.stride, a.nput, p, k), a.bytes, ncclGin_None{},
                    ncclGin_CounterInc{(ncclGinCounter_t)CTR_PUT});
    if (!gin_wait_bounded(gin, true, CTR_PUT, (uint64_t)a.nput * (n - 1), a, me, a.nput - 1))
        return;
    bar.sync(ncclCoopCta(), GIN_ACQREL, ncclGinFenceLevel::Relaxed);
    if (threadIdx.x == 0)
        a.res->value[0] = gin.readCounter(CTR_PUT);
}

__global__ void gin_k_flush(struct gin_args a)
{
    ncclGin gin(a.dc, 0);
    ncclTeam world = ncclTeamWorld(a.dc);
    int me = a.dc.rank, n = a.dc.nRanks;
    ncclGinBarrierSession<ncclCoopCta> bar(ncclCoopCta(), gin, world, a.bar, 0);
    bar.sync(ncclCoopCta(), GIN_ACQREL, ncclGinFenceLevel::Relaxed);
    int p = threadIdx.x;
    if (p < n && p != me)
        for (int k = 0; k < a.nput; k++)
            gin.put(world, p, a.rwin, gin_slot(a.stride, a.nput, me, k), a.swin,
                    gin_slot(a.stride, a.nput, p, k), a.bytes);
    gin.flush(ncclCoopCta());
    /* The sources are ours again: overwrite every one of them. */
    for (int q = 0; q < n; q++) {
        if (q == me)
            continue;
        for (int k = 0; k < a.nput; k++) {
            unsigned char *s = (unsigned char *)ncclGetLocalPointer(a.swin, gin_slot(a.stride, a.nput, q, k));
            for (size_t i = threadIdx.x; i < a.bytes; i += blockDim.x)
                s[i] = SCRIBBLE;
        }
    }
    __threadfence_system();
    bar.sync(ncclCoopCta(), GIN_ACQREL, ncclGinFenceLevel::Relaxed);
}

/* Barrier rounds: slot ((r & 1) * n + source) of the receive window gets
 * round r's value, by an 8-byte put from a slot of the send window used for
 * that round only (a.add == 0), or by putValue (a.add == 1: the value rides
 * in the descriptor). */
__global__ void gin_k_barrier(struct gin_args a)
{
    ncclGin gin(a.dc, 0);
    ncclTeam world = ncclTeamWorld(a.dc);
    int me = a.dc.rank, n = a.dc.nRanks;
    ncclGinBarrierSession<ncclCoopCta> bar(ncclCoopCta(), gin, world, a.bar, 0);
    bar.sync(ncclCoopCta(), GIN_ACQREL, ncclGinFenceLevel::Relaxed);
    const volatile unsigned long long *slots =
        (const unsigned long long *)ncclGetLocalPointer(a.rwin, SLOT0);
    for (int r = 1; r <= a.iters; r++) {
        int p = threadIdx.x;
        if (p < n && p != me) {
            unsigned long long v = ((unsigned long long)r << 8) | (unsigned)me;
            size_t dst = SLOT0 + (size_t)((r & 1) * n + me) * 8, src = SLOT0 + ((size_t)r * n + p) * 8;
            if (a.add) {
                gin.putValue(world, p, a.rwin, dst, v);
            } else {
                *(unsigned long long *)ncclGetLocalPointer(a.swin, src) = v;
                gin.put(world, p, a.rwin, dst, a.swin, src, 8); /* put releases the store */
            }
        }
        bar.sync(ncclCoopCta(), GIN_ACQREL, ncclGinFenceLevel::Relaxed);
        if (threadIdx.x == 0) {
            for (int q = 0; q < n; q++) {
                if (q == me)
                    continue;
                unsigned long long want = ((unsigned long long)r << 8) | (unsigned)q;
                unsigned long long got = slots[(r & 1) * n + q];
                if (got != want && a.res->bad++ == 0) {
                    a.res->got = got;
                    a.res->want = want;
                    a.res->bad_k = (unsigned)r;
                }
            }
        }
        __syncthreads();
    }
}

/* alltoall: CTA b moves slice b of every chunk on GIN context b, signal
 * SIG_A2A0 + b and barrier b; the rank's own chunk is copied locally. */
__global__ void gin_k_alltoall(struct gin_args a)
{
    int b = blockIdx.x, nb = gridDim.x, me = a.dc.rank, n = a.dc.nRanks;
    ncclGin gin(a.dc, b);
    ncclTeam world = ncclTeamWorld(a.dc);
    ncclGinSignal_t sig = SIG_A2A0 + b;
    uint64_t base = gin.readSignal(sig); /* peers signal only after the barrier below */
    ncclGinBarrierSession<ncclCoopCta> bar(ncclCoopCta(), gin, world, a.bar, b);
    bar.sync(ncclCoopCta(), GIN_ACQREL, ncclGinFenceLevel::Relaxed);
    size_t lo = a.bytes * b / nb, hi = a.bytes * (b + 1) / nb;
    int p = threadIdx.x;
    if (p < n && p != me) {
        if (hi > lo)
            gin.put(world, p, a.rwin, (size_t)me * a.bytes + lo, a.swin, (size_t)p * a.bytes + lo,
                    hi - lo, ncclGin_SignalInc{sig});
        else
            gin.signal(world, p, ncclGin_SignalInc{sig});
    }
    const uint4 *s16 = (const uint4 *)((const char *)ncclGetLocalPointer(a.swin, (size_t)me * a.bytes + lo));
    uint4 *d16 = (uint4 *)((char *)ncclGetLocalPointer(a.rwin, (size_t)me * a.bytes + lo));
    size_t len = hi - lo;
    if (((uintptr_t)s16 | (uintptr_t)d16 | len) % 16 == 0) {
        for (size_t i = threadIdx.x; i < len / 16; i += blockDim.x)
            d16[i] = s16[i];
    } else {
        for (size_t i = threadIdx.x; i < len; i += blockDim.x)
            ((char *)d16)[i] = ((const char *)s16)[i];
    }
    gin.waitSignal(ncclCoopCta(), sig, base + (uint64_t)(n - 1));
    gin.flush(ncclCoopCta());
}

/* Ranks 0 and 1: iters round trips of an 8-byte put with SignalInc. */
__global__ void gin_k_pingpong(struct gin_args a)
{
    ncclGin gin(a.dc, 0);
    ncclTeam world = ncclTeamWorld(a.dc);
    int me = a.dc.rank;
    uint64_t base = gin.readSignal(SIG_PP);
    ncclGinBarrierSession<ncclCoopCta> bar(ncclCoopCta(), gin, world, a.bar, 0);
    bar.sync(ncclCoopCta(), GIN_ACQREL, ncclGinFenceLevel::Relaxed);
    if (threadIdx.x == 0 && me < 2) {
        int peer = 1 - me;
        unsigned long long t0 = gin_clock_ns();
        for (int i = 0; i < a.iters; i++) {
            if (me == 0) {
                gin.put(world, peer, a.rwin, SLOT0, a.swin, SLOT0, 8, ncclGin_SignalInc{SIG_PP});
                gin.waitSignal(ncclCoopThread(), SIG_PP, base + i + 1);
            } else {
                gin.waitSignal(ncclCoopThread(), SIG_PP, base + i + 1);
                gin.put(world, peer, a.rwin, SLOT0, a.swin, SLOT0, 8, ncclGin_SignalInc{SIG_PP});
            }
        }
        a.res->ns = gin_clock_ns() - t0;
        a.res->value[0] = gin.readSignal(SIG_PP) - base;
    }
    gin.flush(ncclCoopCta());
    bar.sync(ncclCoopCta(), GIN_ACQREL, ncclGinFenceLevel::Relaxed);
}

/* Kill mode (gin_device.h): ranks 0 and 1, thread 0; a.iters ping-pong
 * rounds, then rank 0 puts to rank 1 every GIN_KILL_PUT_NS, a.nput puts at
 * most, until the host says stop or a.wait_ns have passed. Rank 1 answers
 * a.iters rounds, then only waits. No API wait anywhere: every wait here
 * is this loop, bounded by the clock. */
#define GIN_KILL_PUT_NS 100000000ull
__global__ void gin_k_kill(struct gin_args a, struct gin_kill_shared *sh)
{
    ncclGin gin(a.dc, 0);
    ncclTeam world = ncclTeamWorld(a.dc);
    int me = a.dc.rank;
    uint64_t base = gin.readSignal(SIG_PP); /* the peer signals only after the barrier */
    ncclGinBarrierSession<ncclCoopCta> bar(ncclCoopCta(), gin, world, a.bar, 0);
    bar.sync(ncclCoopCta(), GIN_ACQREL, ncclGinFenceLevel::Relaxed);
    if (threadIdx.x == 0 && me < 2) {
        volatile struct gin_kill_shared *v = sh;
        unsigned long long t0 = gin_clock_ns(), last = 0;
        unsigned int issued = 0, seen = 0, end = GIN_KILL_RUNNING;
        int peer = 1 - me;
        for (;;) {
            unsigned long long now = gin_clock_ns();
            if (v->stop) {
                end = GIN_KILL_STOPPED;
                break;
            }
            if (now - t0 > a.wait_ns) {
                end = GIN_KILL_DEADLINE;
                break;
            }
            unsigned int got = (unsigned int)(gin.readSignal(SIG_PP) - base);
            if (got != seen) {
                seen = got;
                v->seen = got;
                __threadfence_system();
            }
            bool go;
            if (me == 0) /* a round's put once the last was answered, then one every GIN_KILL_PUT_NS */
                go = issued < (unsigned)a.iters
                         ? seen >= issued
                         : issued < (unsigned)(a.iters + a.nput) && now - last >= GIN_KILL_PUT_NS;
            else /* answer rounds only */
                go = issued < (unsigned)a.iters && seen > issued;
            if (go) {
                gin.put(world, peer, a.rwin, SLOT0, a.swin, SLOT0, 8, ncclGin_SignalInc{SIG_PP});
                issued++;
                last = now;
                v->puts = issued;
                __threadfence_system();
            }
        }
        v->ended = end;
        __threadfence_system();
    }
    __syncthreads();
}

static double gin_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Waits for the stream, watching the communicator for asynchronous errors
 * (a GIN error lands there) and the clock: a signal that never comes must
 * not hang the test. */
static int gin_wait(struct gin_env *env, const char *what, char *why, size_t whylen)
{
    double t0 = gin_now();
    for (;;) {
        cudaError_t ce = cudaStreamQuery(env->s);
        if (ce == cudaSuccess)
            return 0;
        if (ce != cudaErrorNotReady)
            FAILF("%s kernel: %s", what, cudaGetErrorString(ce));
        ncclResult_t ae = ncclSuccess;
        if (ncclCommGetAsyncError(env->comm, &ae) != ncclSuccess || (ae != ncclSuccess && ae != ncclInProgress))
            FAILF("%s kernel: NCCL asynchronous error %s (%s)", what, ncclGetErrorString(ae),
                  ncclGetLastError(env->comm));
        if (gin_now() - t0 > env->timeout_s)
            FAILF("%s kernel still running after %d s (a signal, counter or barrier never came)",
                  what, env->timeout_s);
        usleep(200);
    }
}

static struct gin_args gin_args_of(struct gin_env *env)
{
    struct gin_args a;
    memset(&a, 0, sizeof(a));
    a.dc = env->dc;
    a.swin = env->swin;
    a.rwin = env->rwin;
    a.bar = env->bar;
    a.res = env->res;
    a.tag = ++env->tag;
    a.wait_ns = (unsigned long long)env->timeout_s * 1000000000ull / 2;
    return a;
}

/* Launch k with a, wait, and copy the result back to *res. */
template <typename K>
static int gin_run(struct gin_env *env, K k, int blocks, struct gin_args *a, struct gin_res *res,
                   const char *what, char *why, size_t whylen)
{
    CU(cudaMemsetAsync(env->res, 0, sizeof(*env->res), env->s));
    k<<<blocks, 128, 0, env->s>>>(*a);
    CU(cudaGetLastError());
    if (gin_wait(env, what, why, whylen) != 0)
        return -1;
    CU(cudaMemcpy(res, env->res, sizeof(*res), cudaMemcpyDeviceToHost));
    return 0;
}

/* The send window's slots hold gin_pat(me, q, tag, k * bytes + i); the
 * receive window is all guard. */
static int gin_fill_slots(struct gin_env *env, const struct gin_args *a, char *why, size_t whylen)
{
    size_t end = gin_slot(a->stride, a->nput, env->n, 0);
    if (end > env->win)
        FAILF("case needs %zu bytes of window, have %zu", end, env->win);
    memset(env->host, GUARD, end);
    for (int q = 0; q < env->n; q++) {
        if (q == env->rank)
            continue;
        for (int k = 0; k < a->nput; k++) {
            unsigned char *d = env->host + gin_slot(a->stride, a->nput, q, k);
            for (size_t i = 0; i < a->bytes; i++)
                d[i] = gin_pat(env->rank, q, a->tag, (size_t)k * a->bytes + i);
        }
    }
    CU(cudaMemcpy(env->sbuf, env->host, end, cudaMemcpyHostToDevice));
    CU(cudaMemset(env->rbuf, GUARD, end));
    CU(cudaDeviceSynchronize());
    return 0;
}

/* Every byte of the receive window's slot area: data from each peer, guard
 * elsewhere. 0 = all as expected, 1 = a difference (in why). */
static int gin_check_slots(struct gin_env *env, const struct gin_args *a, char *why, size_t whylen)
{
    size_t end = gin_slot(a->stride, a->nput, env->n, 0);
    CU(cudaMemcpy(env->host, env->rbuf, end, cudaMemcpyDeviceToHost));
    size_t nbad = 0, first = 0;
    unsigned got = 0, want = 0;
    for (size_t off = 0; off < end; off++) {
        unsigned char w = GUARD;
        if (off >= SLOT0) {
            size_t rel = off - SLOT0, slot = rel / a->stride, in = rel % a->stride;
            int q = (int)(slot / a->nput), k = (int)(slot % a->nput);
            if (q != env->rank && in < a->bytes)
                w = gin_pat(q, env->rank, a->tag, (size_t)k * a->bytes + in);
        }
        if (env->host[off] != w && nbad++ == 0) {
            first = off;
            got = env->host[off];
            want = w;
        }
    }
    if (nbad) {
        snprintf(why, whylen, "%zu of %zu bytes differ in the receive window, first at offset %zu: got 0x%02x, want 0x%02x",
                 nbad, end, first, got, want);
        return 1;
    }
    return 0;
}

/* A bounded wait that gave up: what it saw, and whether the data came. */
static int gin_stuck(struct gin_env *env, const struct gin_args *a, const struct gin_res *r,
                     const char *what, char *why, size_t whylen)
{
    char data[512];
    int d = gin_check_slots(env, a, data, sizeof(data));
    snprintf(why, whylen, "%s of source rank %u stopped at %llu, awaited %llu (put %u of %d) for %d s; "
             "the puts' data %s%s", what, r->stuck_q, r->stuck_got, r->stuck_want, r->stuck_k + 1,
             a->nput, env->timeout_s / 2, d == 0 ? "all arrived" : "did not all arrive: ",
             d == 0 ? "" : data);
    return 1; /* the kernel ended: the next case can still run */
}

static int gin_dev_verdict(const struct gin_res *r, char *why, size_t whylen)
{
    if (r->bad == 0)
        return 0;
    snprintf(why, whylen, "on the GPU, %u bytes were wrong when their signal said they had landed "
             "(first in put %u: got 0x%llx, want 0x%llx)", r->bad, r->bad_k, r->got, r->want);
    return 1;
}

extern "C" int gin_env_open(ncclComm_t comm, size_t win_bytes, int timeout_s, struct gin_env **out,
                            char *why, size_t whylen)
{
    struct gin_env *env = (struct gin_env *)calloc(1, sizeof(*env));
    if (!env)
        FAILF("out of memory");
    *out = env;
    env->comm = comm;
    env->timeout_s = timeout_s;
    env->win = (win_bytes + NCCL_WIN_REQUIRED_ALIGNMENT - 1) & ~(size_t)(NCCL_WIN_REQUIRED_ALIGNMENT - 1);
    NC(ncclCommUserRank(comm, &env->rank));
    NC(ncclCommCount(comm, &env->n));
    if (env->n < 2 || env->n > GIN_MAX_RANKS)
        FAILF("%d ranks: these cases need 2 to %d", env->n, GIN_MAX_RANKS);
    CU(cudaStreamCreateWithFlags(&env->s, cudaStreamNonBlocking));
    CU(cudaMalloc((void **)&env->res, sizeof(*env->res)));
    env->host = (unsigned char *)malloc(env->win);
    if (!env->host)
        FAILF("out of memory for %zu bytes", env->win);
    NC(ncclMemAlloc(&env->sbuf, env->win));
    NC(ncclMemAlloc(&env->rbuf, env->win));
    NC(ncclCommWindowRegister(comm, env->sbuf, env->win, &env->swin, NCCL_WIN_COLL_SYMMETRIC));
    NC(ncclCommWindowRegister(comm, env->rbuf, env->win, &env->rwin, NCCL_WIN_COLL_SYMMETRIC));

    ncclDevResourceRequirements_t barreq;
    memset(&barreq, 0, sizeof(barreq));
    NC(ncclGinBarrierCreateRequirement(comm, ncclTeamWorld(comm), GIN_NBAR, &env->bar, &barreq));
    ncclDevCommRequirements_t reqs;
    memset(&reqs, 0, sizeof(reqs));
    reqs.resourceRequirementsList = &barreq;
    reqs.ginForceEnable = true;
    reqs.ginContextCount = GIN_NBAR;
    reqs.ginSignalCount = GIN_NSIG;
    reqs.ginCounterCount = GIN_NCTR;
    NC(ncclDevCommCreate(comm, &reqs, &env->dc));
    if (env->dc.ginContextCount < 1)
        FAILF("ncclDevCommCreate gave %d GIN contexts", (int)env->dc.ginContextCount);
    printf("# GIN: %d context(s), %d signals, %d counters; world barrier signals %u..%u, test signals %d..%d\n",
           (int)env->dc.ginContextCount, env->dc.ginSignalCount, env->dc.ginCounterCount,
           env->bar.signal0, env->bar.signal0 + GIN_NBAR - 1, (int)SIG_INC0, (int)GIN_NSIG - 1);
    if (env->bar.signal0 < (unsigned)GIN_NSIG && env->bar.signal0 + GIN_NBAR > (unsigned)SIG_INC0)
        FAILF("NCCL put the GIN barrier's signals (%u..%u) among the test's (%d..%d)", env->bar.signal0,
              env->bar.signal0 + GIN_NBAR - 1, (int)SIG_INC0, (int)GIN_NSIG - 1);
    return 0;
}

extern "C" void gin_env_close(struct gin_env *env)
{
    if (!env)
        return;
    if (env->s)
        cudaStreamSynchronize(env->s);
    if (env->dc.nRanks)
        ncclDevCommDestroy(env->comm, &env->dc);
    if (env->rwin)
        ncclCommWindowDeregister(env->comm, env->rwin);
    if (env->swin)
        ncclCommWindowDeregister(env->comm, env->swin);
    if (env->rbuf)
        ncclMemFree(env->rbuf);
    if (env->sbuf)
        ncclMemFree(env->sbuf);
    if (env->res)
        cudaFree(env->res);
    if (env->kill)
        cudaFreeHost(env->kill);
    if (env->s)
        cudaStreamDestroy(env->s);
    free(env->host);
    free(env);
}

extern "C" int gin_kill_launch(struct gin_env *env, int rounds, int puts, int deadline_s, char *why,
                               size_t whylen)
{
    if (env->n != 2)
        FAILF("kill mode needs exactly 2 ranks, have %d", env->n);
    if (rounds < 1 || puts < 1 || rounds + puts > 128)
        FAILF("kill mode: %d rounds and %d puts (at least 1 each, at most 128 in all, so that no "
              "queue fills)", rounds, puts);
    if (!env->kill) {
        CU(cudaHostAlloc((void **)&env->kill, sizeof(*env->kill), cudaHostAllocMapped));
        CU(cudaHostGetDevicePointer((void **)&env->kill_dev, env->kill, 0));
    }
    memset(env->kill, 0, sizeof(*env->kill));
    struct gin_args a = gin_args_of(env);
    a.iters = rounds;
    a.nput = puts;
    a.wait_ns = (unsigned long long)deadline_s * 1000000000ull;
    CU(cudaMemset(env->sbuf, 0x11, SLOT0 + 8));
    CU(cudaDeviceSynchronize());
    gin_k_kill<<<1, 128, 0, env->s>>>(a, env->kill_dev);
    CU(cudaGetLastError());
    return 0;
}

extern "C" void gin_kill_read(struct gin_env *env, struct gin_kill_status *st)
{
    const volatile struct gin_kill_shared *v = env->kill;
    st->puts = v ? v->puts : 0;
    st->seen = v ? v->seen : 0;
    st->ended = v ? v->ended : (unsigned int)GIN_KILL_RUNNING;
}

extern "C" void gin_kill_stop(struct gin_env *env)
{
    volatile struct gin_kill_shared *v = env->kill;
    if (v)
        v->stop = 1;
}

extern "C" int gin_kill_done(struct gin_env *env, char *why, size_t whylen)
{
    cudaError_t e = cudaStreamQuery(env->s);
    if (e == cudaSuccess)
        return 1;
    if (e == cudaErrorNotReady)
        return 0;
    FAILF("kill kernel: %s", cudaGetErrorString(e));
}

extern "C" void gin_env_abort(struct gin_env *env)
{
    if (!env)
        return;
    free(env->host);
    free(env);
}

extern "C" int gin_case_put(struct gin_env *env, size_t bytes, char *why, size_t whylen)
{
    struct gin_args a = gin_args_of(env);
    a.bytes = bytes;
    a.soff = SLOT0 + 40;  /* neither offset aligned to anything larger than 8 */
    a.doff = SLOT0 + 1000;
    size_t end = a.doff + bytes + 4096;
    if (end > env->win || a.soff + bytes > env->win)
        FAILF("put of %zu bytes needs %zu bytes of window, have %zu", bytes, end, env->win);
    int next = (env->rank + 1) % env->n, prev = (env->rank + env->n - 1) % env->n;
    memset(env->host, GUARD, end);
    for (size_t i = 0; i < bytes; i++)
        env->host[a.soff + i] = gin_pat(env->rank, next, a.tag, i);
    CU(cudaMemcpy(env->sbuf, env->host, end, cudaMemcpyHostToDevice));
    CU(cudaMemset(env->rbuf, GUARD, end));
    CU(cudaDeviceSynchronize());
    struct gin_res r;
    if (gin_run(env, gin_k_put, 1, &a, &r, "put", why, whylen) != 0)
        return -1;
    CU(cudaMemcpy(env->host, env->rbuf, end, cudaMemcpyDeviceToHost));
    for (size_t off = 0; off < end; off++) {
        int in = off >= a.doff && off < a.doff + bytes;
        unsigned char w = in ? gin_pat(prev, env->rank, a.tag, off - a.doff) : GUARD;
        if (env->host[off] != w) {
            snprintf(why, whylen, "receive window offset %zu (%s): got 0x%02x, want 0x%02x", off,
                     in ? "data" : "outside the put", env->host[off], w);
            return 1;
        }
    }
    return 0;
}

static int gin_case_signal(struct gin_env *env, size_t bytes, int nput, int add, char *why, size_t whylen)
{
    struct gin_args a = gin_args_of(env);
    a.bytes = bytes;
    a.nput = nput;
    a.stride = gin_stride(bytes);
    a.add = add;
    if (gin_fill_slots(env, &a, why, whylen) != 0)
        return -1;
    struct gin_res r;
    if (gin_run(env, gin_k_signal, 1, &a, &r, add ? "put+SignalAdd" : "put+SignalInc", why, whylen) != 0)
        return -1;
    if (r.stuck)
        return gin_stuck(env, &a, &r, add ? "SignalAdd signal" : "SignalInc signal", why, whylen);
    if (gin_dev_verdict(&r, why, whylen))
        return 1;
    unsigned long long want = 0;
    for (int k = 0; k < nput; k++)
        want += add ? 1000ull * (k + 1) + 7 + (k == nput - 1 ? (1ull << 33) : 0) : 1;
    for (int q = 0; q < env->n; q++) {
        unsigned long long w = q == env->rank ? 0 : want;
        if (r.value[q] != w) {
            snprintf(why, whylen, "signal of source rank %d ended at %llu, want exactly %llu", q,
                     r.value[q], w);
            return 1;
        }
    }
    return gin_check_slots(env, &a, why, whylen);
}

extern "C" int gin_case_put_signal_inc(struct gin_env *env, size_t bytes, int nput, char *why, size_t whylen)
{
    return gin_case_signal(env, bytes, nput, 0, why, whylen);
}

extern "C" int gin_case_put_signal_add(struct gin_env *env, size_t bytes, int nput, char *why, size_t whylen)
{
    return gin_case_signal(env, bytes, nput, 1, why, whylen);
}

extern "C" int gin_case_counter(struct gin_env *env, size_t bytes, int nput, char *why, size_t whylen)
{
    struct gin_args a = gin_args_of(env);
    a.bytes = bytes;
    a.nput = nput;
    a.stride = gin_stride(bytes);
    if (gin_fill_slots(env, &a, why, whylen) != 0)
        return -1;
    struct gin_res r;
    if (gin_run(env, gin_k_counter, 1, &a, &r, "put+CounterInc", why, whylen) != 0)
        return -1;
    if (r.stuck)
        return gin_stuck(env, &a, &r, "counter (local completions)", why, whylen);
    unsigned long long want = (unsigned long long)nput * (env->n - 1);
    if (r.value[0] != want) {
        snprintf(why, whylen, "counter ended at %llu, want exactly %llu", r.value[0], want);
        return 1;
    }
    return gin_check_slots(env, &a, why, whylen);
}

extern "C" int gin_case_flush(struct gin_env *env, size_t bytes, int nput, char *why, size_t whylen)
{
    struct gin_args a = gin_args_of(env);
    a.bytes = bytes;
    a.nput = nput;
    a.stride = gin_stride(bytes);
    if (gin_fill_slots(env, &a, why, whylen) != 0)
        return -1;
    struct gin_res r;
    if (gin_run(env, gin_k_flush, 1, &a, &r, "put+flush", why, whylen) != 0)
        return -1;
    int rc = gin_check_slots(env, &a, why, whylen);
    if (rc != 0) {
        size_t l = strlen(why);
        snprintf(why + l, whylen - l, " (after flush the sender overwrote its source with 0x%02x)", SCRIBBLE);
        return rc;
    }
    /* and the overwrite did happen, so the check above proved something */
    size_t end = gin_slot(a.stride, a.nput, env->n, 0);
    CU(cudaMemcpy(env->host, env->sbuf, end, cudaMemcpyDeviceToHost));
    int q = (env->rank + 1) % env->n;
    if (env->host[gin_slot(a.stride, a.nput, q, 0)] != SCRIBBLE) {
        snprintf(why, whylen, "the kernel did not overwrite its source after flush");
        return 1;
    }
    return 0;
}

static int gin_case_rounds(struct gin_env *env, int rounds, int put_value, char *why, size_t whylen)
{
    struct gin_args a = gin_args_of(env);
    a.iters = rounds;
    a.add = put_value;
    if (SLOT0 + ((size_t)rounds + 1) * env->n * 8 > env->win)
        FAILF("%d rounds need more window", rounds);
    CU(cudaMemset(env->rbuf, 0, SLOT0 + 2 * GIN_MAX_RANKS * 8));
    CU(cudaDeviceSynchronize());
    struct gin_res r;
    if (gin_run(env, gin_k_barrier, 1, &a, &r, put_value ? "putValue" : "GIN barrier", why, whylen) != 0)
        return -1;
    if (r.bad) {
        snprintf(why, whylen, "%u stale reads after a GIN barrier, first in round %u: got 0x%llx, want 0x%llx",
                 r.bad, r.bad_k, r.got, r.want);
        return 1;
    }
    return 0;
}

extern "C" int gin_case_barrier(struct gin_env *env, int rounds, char *why, size_t whylen)
{
    return gin_case_rounds(env, rounds, 0, why, whylen);
}

extern "C" int gin_case_put_value(struct gin_env *env, int rounds, char *why, size_t whylen)
{
    return gin_case_rounds(env, rounds, 1, why, whylen);
}

static int gin_a2a_blocks(size_t chunk) { return chunk >= 4096 ? GIN_NBAR : 1; }

static int gin_a2a_fill(struct gin_env *env, const struct gin_args *a, char *why, size_t whylen)
{
    size_t end = (size_t)env->n * a->bytes;
    if (end + 64 > env->win)
        FAILF("alltoall of %zu bytes a rank needs %zu bytes of window, have %zu", a->bytes, end + 64, env->win);
    for (int q = 0; q < env->n; q++)
        for (size_t i = 0; i < a->bytes; i++)
            env->host[(size_t)q * a->bytes + i] = gin_pat(env->rank, q, a->tag, i);
    CU(cudaMemcpy(env->sbuf, env->host, end, cudaMemcpyHostToDevice));
    CU(cudaMemset(env->rbuf, GUARD, end + 64));
    CU(cudaDeviceSynchronize());
    return 0;
}

static int gin_a2a_check(struct gin_env *env, const struct gin_args *a, char *why, size_t whylen)
{
    size_t end = (size_t)env->n * a->bytes;
    CU(cudaMemcpy(env->host, env->rbuf, end + 64, cudaMemcpyDeviceToHost));
    for (size_t off = 0; off < end + 64; off++) {
        int q = (int)(off / a->bytes);
        unsigned char w = off < end ? gin_pat(q, env->rank, a->tag, off % a->bytes) : GUARD;
        if (env->host[off] != w) {
            snprintf(why, whylen, "receive offset %zu (%s rank %d): got 0x%02x, want 0x%02x", off,
                     off < end ? "chunk from" : "past the end, after", q, env->host[off], w);
            return 1;
        }
    }
    return 0;
}

extern "C" int gin_case_alltoall(struct gin_env *env, size_t chunk, char *why, size_t whylen)
{
    struct gin_args a = gin_args_of(env);
    a.bytes = chunk;
    if (gin_a2a_fill(env, &a, why, whylen) != 0)
        return -1;
    struct gin_res r;
    if (gin_run(env, gin_k_alltoall, gin_a2a_blocks(chunk), &a, &r, "alltoall", why, whylen) != 0)
        return -1;
    return gin_a2a_check(env, &a, why, whylen);
}

extern "C" int gin_bench_alltoall(struct gin_env *env, size_t bytes, int iters, double *seconds,
                                  char *why, size_t whylen)
{
    struct gin_args a = gin_args_of(env);
    a.bytes = bytes / env->n;
    if (a.bytes == 0)
        FAILF("alltoall of %zu bytes over %d ranks", bytes, env->n);
    if (gin_a2a_fill(env, &a, why, whylen) != 0)
        return -1;
    int nb = gin_a2a_blocks(a.bytes);
    cudaEvent_t e0, e1;
    CU(cudaEventCreate(&e0));
    CU(cudaEventCreate(&e1));
    for (int i = 0; i < 2; i++)
        gin_k_alltoall<<<nb, 128, 0, env->s>>>(a);
    CU(cudaEventRecord(e0, env->s));
    for (int i = 0; i < iters; i++)
        gin_k_alltoall<<<nb, 128, 0, env->s>>>(a);
    CU(cudaEventRecord(e1, env->s));
    CU(cudaGetLastError());
    if (gin_wait(env, "alltoall bench", why, whylen) != 0)
        return -1;
    float ms = 0;
    CU(cudaEventElapsedTime(&ms, e0, e1));
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    *seconds = ms * 1e-3 / iters;
    int rc = gin_a2a_check(env, &a, why, whylen);
    return rc == 0 ? 0 : -1;
}

extern "C" int gin_bench_pingpong(struct gin_env *env, int iters, double *seconds, char *why, size_t whylen)
{
    struct gin_args a = gin_args_of(env);
    a.iters = iters;
    struct gin_res r;
    if (gin_run(env, gin_k_pingpong, 1, &a, &r, "ping-pong warm-up", why, whylen) != 0)
        return -1;
    if (gin_run(env, gin_k_pingpong, 1, &a, &r, "ping-pong", why, whylen) != 0)
        return -1;
    if (env->rank < 2 && r.value[0] != (unsigned long long)iters)
        FAILF("ping-pong signal moved by %llu, want %d", r.value[0], iters);
    *seconds = r.ns * 1e-9 / iters;
    return 0;
}
