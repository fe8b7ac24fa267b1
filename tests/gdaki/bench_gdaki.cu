/* tests/gdaki/bench_gdaki.cu: message rate and latency of GPU-initiated
 * RDMA WRITEs (8 B .. 4 KiB) against the CPU path on the same port and the
 * same GPU buffers, in one run, with the ratios.
 *
 * GPU rows: gdaki_bw_run_pair (one thread, then one warp posting).
 * CPU rows: ibv_post_send from this thread on the pair's ordinary QP
 * (gdaki_pair_cpu_write_loop), the path a CPU proxy (NCCL's, or the
 * plugin's isend) takes for each message.  Rate: window 128 in flight;
 * latency: one write at a time, post to completion.
 *
 * Usage: bench_gdaki [iters]   (default 20000 messages per size)
 * Device: RAILNET_IBVERBS_LIB, else $top_builddir/tests/softnic's softnic.
 * Exit 0 after printing, 77 (skip) without a GPU. */
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gdaki_port.h"
#include "railnet_gdaki.h"

#define NSIZES 10   /* 8 .. 4096 */

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* The floor under a GPU-posted write's latency on a NIC that is a CPU
 * thread: a kernel stores a sequence number into pinned host memory and
 * waits for a CPU thread to echo it back, n times. */
__global__ void host_rtt_kernel(uint32_t *to_cpu, const uint32_t *to_gpu, int n)
{
    for (uint32_t i = 1; i <= (uint32_t)n; i++) {
        gdaki_write_volatile32(to_cpu, i);
        gdaki_fence_system();
        while (*(const volatile uint32_t *)to_gpu != i)   /* a CPU writes it: system scope */
            gdaki_cpu_relax();
    }
}

struct echo {
    volatile uint32_t *from_gpu, *to_gpu;
    uint32_t last;
};

static void *echo_main(void *arg)
{
    struct echo *e = (struct echo *)arg;
    double until = now_us() + 30e6;
    for (uint32_t seen = 0; seen != e->last && now_us() < until;) {
        uint32_t v = *e->from_gpu;
        if (v != seen) {
            seen = v;
            __atomic_store_n(e->to_gpu, v, __ATOMIC_RELEASE);
        }
    }
    return NULL;
}

/* Microseconds per round trip, or a negative value when it failed. */
static double host_rtt_us(int n)
{
    uint32_t *h = NULL, *d = NULL;
    double us = -1;
    cudaEvent_t t0 = NULL, t1 = NULL;
    cudaStream_t st = NULL;
    pthread_t th;
    struct echo e;
    float ms = 0;
    if (cudaHostAlloc((void **)&h, 4096, cudaHostAllocMapped) != cudaSuccess)
        return -1;
    memset(h, 0, 4096);
    if (cudaHostGetDevicePointer((void **)&d, h, 0) != cudaSuccess ||
        cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) != cudaSuccess ||
        cudaEventCreate(&t0) != cudaSuccess || cudaEventCreate(&t1) != cudaSuccess)
        goto out;
    e.from_gpu = h;
    e.to_gpu = h + 32;      /* another cache line */
    e.last = (uint32_t)n;
    if (pthread_create(&th, NULL, echo_main, &e) != 0)
        goto out;
    cudaEventRecord(t0, st);
    host_rtt_kernel<<<1, 1, 0, st>>>(d, d + 32, n);
    cudaEventRecord(t1, st);
    if (cudaEventSynchronize(t1) == cudaSuccess && cudaEventElapsedTime(&ms, t0, t1) == cudaSuccess)
        us = ms * 1e3 / n;
    pthread_join(th, NULL);
out:
    if (t0)
        cudaEventDestroy(t0);
    if (t1)
        cudaEventDestroy(t1);
    if (st)
        cudaStreamDestroy(st);
    cudaFreeHost(h);
    return us;
}

int main(int argc, char **argv)
{
    char err[512];
    int iters = argc > 1 ? atoi(argv[1]) : 20000;
    if (iters < 100)
        iters = 100;
    int lat_rtt_n = iters / 10;
    int ngpu = 0;
    if (cudaGetDeviceCount(&ngpu) != cudaSuccess || ngpu == 0) {
        printf("bench_gdaki: skipped: no CUDA GPU on this machine\n");
        return 77;
    }
    cudaSetDevice(0);
    cudaFree(0);

    struct gdaki_pair_opts o;
    if (gdaki_pair_opts_default(&o, err, sizeof(err)) != 0) {
        fprintf(stderr, "bench_gdaki: %s\n", err);
        return 1;
    }
    static char lib[4096];
    if (!o.ibverbs_lib) {
        const char *top = getenv("top_builddir");
        snprintf(lib, sizeof(lib), "%s/tests/softnic/libibverbs.so.1", top && *top ? top : ".");
        o.ibverbs_lib = lib;
    }
    o.use_cuda = 1;
    o.sq_depth = 1024;
    struct gdaki_pair *p = NULL;
    if (gdaki_pair_open(&o, &p, err, sizeof(err)) != 0) {
        fprintf(stderr, "bench_gdaki: %s\n", err);
        return 1;
    }
    struct gdaki_pair_info in;
    gdaki_pair_get_info(p, &in);

    struct gdaki_bw_result g1[NSIZES], gw[NSIZES];
    struct gdaki_bw_opts bo;
    memset(&bo, 0, sizeof(bo));
    bo.min_size = 8;
    bo.max_size = 4096;
    bo.iters = iters;
    bo.warmup = iters / 10;
    bo.window = 128;
    bo.lat_iters = iters / 10;
    bo.quiet = 1;
    bo.threads = 1;
    int n1 = gdaki_bw_run_pair(p, &bo, g1, NSIZES, err, sizeof(err));
    if (n1 < 0) {
        fprintf(stderr, "bench_gdaki: GPU, 1 thread: %s\n", err);
        return 1;
    }
    bo.threads = 32;
    bo.window = 4;       /* 4 x 32 = 128 in flight, as on the CPU */
    bo.lat_iters = -1;
    int nw = gdaki_bw_run_pair(p, &bo, gw, NSIZES, err, sizeof(err));
    if (nw < 0) {
        fprintf(stderr, "bench_gdaki: GPU, 1 warp: %s\n", err);
        return 1;
    }

    /* The kernel's posts with payloads in pinned host memory: what the
     * GPU-initiated path costs apart from the NIC's GPU-memory reads and
     * writes (softnic: CUDA copies beside the running kernel) */
    struct gdaki_bw_result gh[NSIZES];
    bo.threads = 1;
    bo.window = 128;
    bo.lat_iters = iters / 10;
    bo.host_payload = 1;
    int nh = gdaki_bw_run_pair(p, &bo, gh, NSIZES, err, sizeof(err));
    if (nh < 0) {
        fprintf(stderr, "bench_gdaki: GPU, 1 thread, host payload: %s\n", err);
        return 1;
    }

    void *src, *dst;
    if (cudaMalloc(&src, 4096) != cudaSuccess || cudaMalloc(&dst, 4096) != cudaSuccess) {
        fprintf(stderr, "bench_gdaki: cudaMalloc failed\n");
        return 1;
    }
    struct gdaki_mr ms, md;
    if (gdaki_pair_reg(p, src, 4096, &ms, err, sizeof(err)) || gdaki_pair_reg(p, dst, 4096, &md, err, sizeof(err))) {
        fprintf(stderr, "bench_gdaki: %s\n", err);
        return 1;
    }

    printf("# GPU-initiated vs CPU-posted RDMA WRITE, %s port %d (%s), GPU buffers, %d msgs/size\n",
           in.dev_name, in.port, in.ibverbs_path ? in.ibverbs_path : "?", iters);
    printf("# rate: Mmsg/s, GPU 1 thread (window 128) | GPU 1 warp (window 4x32) | CPU (window 128)\n");
    printf("# lat:  us per write, post to completion, one at a time, mean (both sides)\n");
    printf("# host payload: the GPU 1-thread rows again with source and target in pinned host memory\n");
    printf("# gpu_post, gpu_wait: gpu_lat's put and quiet by the kernel's clock (gpuh_: host payload)\n");
    printf("# gpu1_post, gpu1h_post: us per put in the 1-thread rate rows, quiets excluded\n");
    printf("# GPU<->CPU round trip through pinned host memory (a store, a CPU thread's echo): %.2f us\n",
           host_rtt_us(lat_rtt_n));
    printf("%6s %10s %10s %10s %9s %9s %10s %10s %9s %11s %10s %9s %9s %9s %9s %9s %10s\n", "bytes", "gpu1_rate",
           "gpuw_rate", "cpu_rate", "gpuw/cpu", "gpu1/cpu", "gpu_lat", "cpu_lat", "cpu/gpu", "gpu1h_rate",
           "gpuh_lat", "gpu_post", "gpu_wait", "gpuh_post", "gpuh_wait", "gpu1_post", "gpu1h_post");
    int n = n1 < nw ? n1 : nw;
    if (nh < n)
        n = nh;
    for (int i = 0; i < n; i++) {
        size_t size = g1[i].size;
        double t0 = now_us();
        if (gdaki_pair_cpu_write_loop(p, &ms, &md, size, iters, 128, err, sizeof(err))) {
            fprintf(stderr, "bench_gdaki: CPU path: %s\n", err);
            return 1;
        }
        double rate_us = now_us() - t0;
        int lat_n = iters / 10;
        t0 = now_us();
        if (gdaki_pair_cpu_write_loop(p, &ms, &md, size, lat_n, 1, err, sizeof(err))) {
            fprintf(stderr, "bench_gdaki: CPU path: %s\n", err);
            return 1;
        }
        double cpu_lat = (now_us() - t0) / lat_n;
        double cpu_rate = iters / rate_us;
        printf("%6zu %10.4f %10.4f %10.4f %9.2f %9.2f %10.2f %10.2f %9.2f %11.4f %10.2f %9.2f %9.2f %9.2f %9.2f %9.2f %10.2f\n",
               size, g1[i].msg_rate_mps, gw[i].msg_rate_mps, cpu_rate, gw[i].msg_rate_mps / cpu_rate,
               g1[i].msg_rate_mps / cpu_rate, g1[i].lat_avg_us, cpu_lat,
               g1[i].lat_avg_us > 0 ? cpu_lat / g1[i].lat_avg_us : 0.0, gh[i].msg_rate_mps, gh[i].lat_avg_us,
               g1[i].lat_post_us, g1[i].lat_wait_us, gh[i].lat_post_us, gh[i].lat_wait_us, g1[i].post_us,
               gh[i].post_us);
    }
    gdaki_pair_dereg(p, &ms);
    gdaki_pair_dereg(p, &md);
    gdaki_pair_close(p);
    cudaFree(src);
    cudaFree(dst);
    return 0;
}
