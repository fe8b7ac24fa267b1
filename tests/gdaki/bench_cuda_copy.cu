/* tests/gdaki/bench_cuda_copy.cu (make bench, GPU machines): what the CUDA
 * driver calls behind softnic's GPU copies cost, one call pattern at a time,
 * while a kernel of the same context spins (as a GPU-initiated poster's
 * kernel does while softnic moves its payloads).  softnic has no DMA into
 * GPU memory: each RDMA payload read from or written to cudaMalloc memory is
 * a driver call and a stream sync in a NIC thread (tests/softnic/gpu.c), and
 * a 4 KiB put_signal pays four of them.  The rows say which pattern
 * is cheapest, measured side by side in one run.
 *
 * Each row: the median and mean over N rounds of the pattern, in us, timed
 * on the CPU around the calls (the same clock softnic's threads see).  The
 * last rows run two patterns in two threads at once (the requester's reads
 * and the responder's writes of one process), each thread's median.
 * Usage: bench_cuda_copy [ROUNDS]  (default 2000).  Exit 77 without a GPU. */
extern "C" {
#include "cudawrap.h"
}
#include "path_result.h"   /* path_median */

#include <cuda_runtime.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CU_STREAM_NON_BLOCKING 0x1   /* cuda.h */
#define BIG 4096

static const struct cudawrap *cu;
static long rounds = 2000;

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

__global__ void spin(volatile int *stop)
{
    while (!*stop)
        ;
}

/* One thread's buffers and stream. */
struct lane {
    cudawrap_stream st;
    cudawrap_devptr dev, dev2, flag;
    char *host, *host2;
};

enum pat { DTOH, DTOH_SYNC_CALL, HTOD8, HTOD4K, HTOD4K_HTOD8, HTOD4K_WV64, WV64, DTOH2, DTOH2_BATCH, NPAT };
static const char *const pat_name[NPAT] = {
    "DtoH 4 KiB async + sync", "DtoH 4 KiB, synchronous call", "HtoD 8 B async + sync", "HtoD 4 KiB async + sync",
    "HtoD 4 KiB + HtoD 8 B, one sync", "HtoD 4 KiB + WriteValue64, one sync", "WriteValue64 + sync",
    "2 x DtoH 4 KiB, one sync", "batch of 2 DtoH 4 KiB + sync",
};

/* One round of pattern p on lane l; nonzero on a driver error. */
static int run_pat(enum pat p, struct lane *l, unsigned long long i)
{
    int r = 0;
    switch (p) {
    case DTOH: r = cu->memcpy_dtoh_async(l->host, l->dev, BIG, l->st); break;
    case DTOH_SYNC_CALL: return cu->memcpy_dtoh(l->host, l->dev, BIG);
    case HTOD8: r = cu->memcpy_htod_async(l->flag, l->host2, 8, l->st); break;
    case HTOD4K: r = cu->memcpy_htod_async(l->dev, l->host, BIG, l->st); break;
    case HTOD4K_HTOD8:
        r = cu->memcpy_htod_async(l->dev, l->host, BIG, l->st);
        r = r ? r : cu->memcpy_htod_async(l->flag, l->host2, 8, l->st);
        break;
    case HTOD4K_WV64:
        r = cu->memcpy_htod_async(l->dev, l->host, BIG, l->st);
        r = r ? r : cu->stream_write_value64(l->st, l->flag, i, 0);
        break;
    case WV64: r = cu->stream_write_value64(l->st, l->flag, i, 0); break;
    case DTOH2:
        r = cu->memcpy_dtoh_async(l->host, l->dev, BIG, l->st);
        r = r ? r : cu->memcpy_dtoh_async(l->host2, l->dev2, BIG, l->st);
        break;
    case DTOH2_BATCH: {
        cudawrap_devptr d[2] = { (cudawrap_devptr)(uintptr_t)l->host, (cudawrap_devptr)(uintptr_t)l->host2 };
        cudawrap_devptr s[2] = { l->dev, l->dev2 };
        size_t n[2] = { BIG, BIG }, idx = 0;
        struct cudawrap_memcpy_attr a = { .src_access_order = CUDAWRAP_MEMCPY_SRC_ACCESS_ORDER_STREAM };
        r = cu->memcpy_batch_async(d, s, n, 2, &a, &idx, 1, l->st);
        break;
    }
    default: return -1;
    }
    return r ? r : cu->stream_synchronize(l->st);
}

static bool pat_usable(enum pat p)
{
    if (p == HTOD4K_WV64 || p == WV64)
        return cu->stream_write_value64 != NULL;
    if (p == DTOH2_BATCH)
        return cu->memcpy_batch_async != NULL;
    return true;
}

/* Median of rounds of p on l into *med, mean into *mean. */
static int time_pat(enum pat p, struct lane *l, double *med, double *mean)
{
    double *t = (double *)malloc(sizeof(double) * (size_t)rounds);
    if (!t)
        return -1;
    for (long i = 0; i < rounds / 10; i++)   /* warm-up */
        if (run_pat(p, l, (unsigned long long)i)) {
            free(t);
            return -1;
        }
    for (long i = 0; i < rounds; i++) {
        double t0 = now_us();
        if (run_pat(p, l, (unsigned long long)i)) {
            free(t);
            return -1;
        }
        t[i] = now_us() - t0;
    }
    *med = path_median(t, rounds, mean);
    free(t);
    return 0;
}

static int lane_open(struct lane *l)
{
    memset(l, 0, sizeof(*l));
    if (cu->stream_create(&l->st, CU_STREAM_NON_BLOCKING) || cu->mem_alloc(&l->dev, BIG) ||
        cu->mem_alloc(&l->dev2, BIG) || cu->mem_alloc(&l->flag, 64))
        return -1;
    if (cudaHostAlloc((void **)&l->host, BIG, cudaHostAllocPortable) != cudaSuccess ||
        cudaHostAlloc((void **)&l->host2, BIG, cudaHostAllocPortable) != cudaSuccess)
        return -1;
    return 0;
}

struct pair_arg {
    enum pat p;
    struct lane *l;
    double med, mean;
    int rc;
    cudawrap_ctx ctx;
};

static void *pair_thread(void *a)
{
    struct pair_arg *pa = (struct pair_arg *)a;
    cu->ctx_set_current(pa->ctx);
    pa->rc = time_pat(pa->p, pa->l, &pa->med, &pa->mean);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 2 || (argc == 2 && (rounds = atol(argv[1])) < 10)) {
        fprintf(stderr, "usage: bench_cuda_copy [ROUNDS >= 10]\n");
        return 2;
    }
    char why[256];
    int ndev = 0;
    if (!(cu = cudawrap_get(why, sizeof(why))) || cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
        printf("bench_cuda_copy: skipped: no usable GPU (%s)\n", cu ? "no device" : why);
        return 77;
    }
    cudaSetDevice(0);
    cudaFree(0);   /* the runtime's primary context, current to this thread */
    cudawrap_ctx ctx = NULL;
    cu->ctx_get_current(&ctx);
    struct lane a, b;
    volatile int *stop;
    if (lane_open(&a) || lane_open(&b) ||
        cudaHostAlloc((void **)&stop, sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable) != cudaSuccess) {
        fprintf(stderr, "bench_cuda_copy: allocation failed\n");
        return 1;
    }
    printf("# %ld rounds a row; us per round (CPU clock around the calls)\n", rounds);
    printf("%-44s %10s %10s %12s %10s\n", "pattern", "idle_med", "idle_mean", "kernel_med", "kernel_mean");
    double idle_med[NPAT] = { 0 }, idle_mean[NPAT] = { 0 };
    for (int p = 0; p < NPAT; p++)
        if (pat_usable((enum pat)p) && time_pat((enum pat)p, &a, &idle_med[p], &idle_mean[p])) {
            fprintf(stderr, "bench_cuda_copy: %s failed\n", pat_name[p]);
            return 1;
        }
    *stop = 0;
    cudaStream_t ks;
    cudaStreamCreateWithFlags(&ks, cudaStreamNonBlocking);
    int *dstop = NULL;
    cudaHostGetDevicePointer((void **)&dstop, (void *)stop, 0);
    spin<<<1, 1, 0, ks>>>(dstop);
    if (cudaGetLastError() != cudaSuccess) {
        fprintf(stderr, "bench_cuda_copy: launch failed\n");
        return 1;
    }
    int rc = 0;
    for (int p = 0; p < NPAT && !rc; p++) {
        double med = 0, mean = 0;
        if (!pat_usable((enum pat)p)) {
            printf("%-44s %10s %10s %12s %10s\n", pat_name[p], "-", "-", "-", "-");
            continue;
        }
        if (time_pat((enum pat)p, &a, &med, &mean)) {
            fprintf(stderr, "bench_cuda_copy: %s failed beside the kernel\n", pat_name[p]);
            rc = 1;
            break;
        }
        printf("%-44s %10.2f %10.2f %12.2f %10.2f\n", pat_name[p], idle_med[p], idle_mean[p], med, mean);
    }
    /* two threads at once, as a requester's reads and a responder's writes */
    const enum pat pairs[][2] = { { DTOH, HTOD4K_HTOD8 }, { DTOH, DTOH }, { HTOD4K_HTOD8, HTOD4K_HTOD8 } };
    for (size_t k = 0; k < sizeof(pairs) / sizeof(pairs[0]) && !rc; k++) {
        struct pair_arg x = { pairs[k][0], &a, 0, 0, 0, ctx }, y = { pairs[k][1], &b, 0, 0, 0, ctx };
        pthread_t tx, ty;
        if (pthread_create(&tx, NULL, pair_thread, &x) != 0) {
            rc = 1;
            break;
        }
        if (pthread_create(&ty, NULL, pair_thread, &y) != 0) {
            pthread_join(tx, NULL);
            rc = 1;
            break;
        }
        pthread_join(tx, NULL);
        pthread_join(ty, NULL);
        if (x.rc || y.rc) {
            rc = 1;
            break;
        }
        printf("two threads: %s | %s: kernel_med %.2f | %.2f, mean %.2f | %.2f\n", pat_name[x.p], pat_name[y.p],
               x.med, y.med, x.mean, y.mean);
    }
    *stop = 1;
    cudaStreamSynchronize(ks);
    return rc;
}
