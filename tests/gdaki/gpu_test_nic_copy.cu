/* tests/gdaki/gpu_test_nic_copy.cu (make check-gpu): an RDMA WRITE into GPU
 * memory lands while the application's kernels spin waiting for it, as it
 * does on a ConnectX, whose DMA waits for no CUDA stream.
 *
 * softnic lands such a write with a CUDA copy from its NIC thread. In a
 * context holding many streams (NCCL's, the application's), work on a new
 * stream can wait for kernels of other streams to end; a copy that waits
 * for a kernel spinning until that very copy lands never ends (NCCL jobs
 * with GDR died that way, RETRY_EXC on both ports). Here 32 kernels spin on
 * their own streams, beside 0 or 96 idle streams, and a write from another
 * thread (softnic, loopback pair, host memory to GPU memory) must reach
 * them all before their deadline. Measured on an H200, 2026-11-26: with
 * softnic's copies in the application's context, both cases with 96 idle
 * streams ended in transport retry counter exceeded and 25 of 32 kernels
 * never saw the flag; with softnic's own context all four cases pass. The
 * flag is cuMemCreate memory, as NCCL's buffers are (cuMemAlloc memory
 * keeps its copies in its own context: tests/softnic/gpu.c).
 *
 * The other way, an RDMA READ of GPU memory (a GDR flush is one) leaves
 * softnic's responder in paced pieces, each copied out of the GPU on its
 * own; reads of 3 bytes, one piece and several pieces plus a tail must
 * bring every byte. Skips without a GPU. */
extern "C" {
#include "tap.h"
#include "build_paths.h"
#include "cuda_dl.h"
}

#include <cuda_runtime.h>
#include <pthread.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "railnet_gdaki.h"

/* kernels spinning, one per stream: all resident at once on an H200 (the
 * launch of a 36th waited for the first to end) */
#define NSPIN 32
#define WANT 0x5eedf00dcafe0001ull
#define DEADLINE_NS 10000000000ll   /* a kernel gives up after 10 s */

#define CK(call)                                                                      \
    do {                                                                              \
        cudaError_t e_ = (call);                                                      \
        if (e_ != cudaSuccess)                                                        \
            tap_fail_at(__FILE__, __LINE__, "%s: %s", #call, cudaGetErrorString(e_)); \
    } while (0)

static __device__ long long now_ns(void)
{
    long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

struct spin_result {
    int seen;                 /* 1 once *flag == want, 0 at the deadline */
    long long start_ns, end_ns;
};

__global__ void spin_until(volatile unsigned long long *flag, unsigned long long want, struct spin_result *r)
{
    long long t0 = now_ns();
    r->start_ns = t0;
    int seen = 1;
    while (*flag != want)
        if (now_ns() - t0 > DEADLINE_NS) {
            seen = 0;
            break;
        }
    r->end_ns = now_ns();
    r->seen = seen;
}

static char err[512];

/* softnic's loopback pair, with the plugin's defaults */
static struct gdaki_pair *open_pair(void)
{
    struct gdaki_pair_opts o;
    if (gdaki_pair_opts_default(&o, err, sizeof(err)) != 0)
        tap_fail_at(__FILE__, __LINE__, "%s", err);
    if (!o.ibverbs_lib)
        o.ibverbs_lib = test_softnic_verbs();
    struct gdaki_pair *p = NULL;
    if (gdaki_pair_open(&o, &p, err, sizeof(err)) != 0)
        tap_fail_at(__FILE__, __LINE__, "gdaki_pair_open: %s", err);
    return p;
}

/* The write, posted from a thread of its own once the kernels had time to
 * start: a launch can block the launching thread until earlier kernels end
 * (with many streams, on an H200), and the write must not wait for that. */
struct writer {
    struct gdaki_pair *p;
    struct gdaki_mr *src, *dst;
    size_t len;
    int rc;
    double ms;
    char err[512];
};

static void *writer_main(void *arg)
{
    struct writer *w = (struct writer *)arg;
    usleep(300 * 1000);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    w->rc = gdaki_pair_cpu_write_loop(w->p, w->src, w->dst, w->len, 1, 1, w->err, sizeof(w->err));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    w->ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
    return NULL;
}

/* stream_flags: cudaStreamNonBlocking, or cudaStreamDefault (streams that
 * also order themselves after the legacy default stream, as a plain
 * cudaStreamCreate makes them) */
static void write_reaches_spinning_kernels(unsigned int stream_flags, int nidle)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0)
        TAP_SKIP("no CUDA GPU on this machine (run make check-gpu on a GPU machine)");
    CK(cudaSetDevice(0));
    CK(cudaFree(0));

    struct gdaki_pair *p = open_pair();

    struct cuda_dl *cu = cuda_dl_open(err, sizeof(err));
    if (!cu || cuda_dl_use_vmm(cu, err, sizeof(err)) != 0)
        tap_fail_at(__FILE__, __LINE__, "%s", err);
    unsigned long long *flag = NULL, *src = NULL;
    struct spin_result *res = NULL;
    if (cuda_dl_alloc(cu, 0, 4096, (void **)&flag, err, sizeof(err)) != 0)
        tap_fail_at(__FILE__, __LINE__, "%s", err);
    CK(cudaMemset(flag, 0, 4096));
    CK(cudaMalloc((void **)&res, NSPIN * sizeof(*res)));
    CK(cudaMemset(res, 0, NSPIN * sizeof(*res)));
    CK(cudaMallocHost((void **)&src, 4096));
    *src = WANT;
    struct gdaki_mr dmr, smr;
    if (gdaki_pair_reg(p, flag, 4096, &dmr, err, sizeof(err)) != 0 ||
        gdaki_pair_reg(p, src, 4096, &smr, err, sizeof(err)) != 0)
        tap_fail_at(__FILE__, __LINE__, "gdaki_pair_reg: %s", err);
    CK(cudaDeviceSynchronize());

    struct writer w = { p, &smr, &dmr, sizeof(*src), -1, 0, "" };
    pthread_t wt;
    if (pthread_create(&wt, NULL, writer_main, &w) != 0)
        tap_fail_at(__FILE__, __LINE__, "pthread_create failed");
    cudaStream_t st[NSPIN], idle[128];
    for (int i = 0; i < nidle; i++)
        CK(cudaStreamCreateWithFlags(&idle[i], stream_flags));
    for (int i = 0; i < NSPIN; i++) {
        CK(cudaStreamCreateWithFlags(&st[i], stream_flags));
        spin_until<<<1, 1, 0, st[i]>>>(flag, WANT, res + i);
        CK(cudaGetLastError());
    }
    /* the write's completion needs the responder's copy to have landed */
    pthread_join(wt, NULL);
    int rc = w.rc;
    CK(cudaDeviceSynchronize());
    struct spin_result h[NSPIN];
    CK(cudaMemcpy(h, res, sizeof(h), cudaMemcpyDeviceToHost));
    int nseen = 0;
    long long first = h[0].start_ns, last_start = 0, last_end = 0;
    for (int i = 0; i < NSPIN; i++)
        first = h[i].start_ns < first ? h[i].start_ns : first;
    for (int i = 0; i < NSPIN; i++) {
        nseen += h[i].seen == 1;
        last_start = h[i].start_ns - first > last_start ? h[i].start_ns - first : last_start;
        last_end = h[i].end_ns - first > last_end ? h[i].end_ns - first : last_end;
    }
    if (rc != 0)
        tap_diag("the write failed: %s", w.err);
    if (nseen != NSPIN) {
        char line[NSPIN * 24], *q = line;
        for (int i = 0; i < NSPIN; i++)
            q += snprintf(q, sizeof(line) - (size_t)(q - line), " %d:%.0f-%.0f", h[i].seen,
                          (h[i].start_ns - first) / 1e6, (h[i].end_ns - first) / 1e6);
        tap_diag("kernels seen:start-end ms:%s", line);
    }
    tap_diag("%d of %d spinning kernels saw the write; the write took %.1f ms; the last kernel started "
             "%.1f ms and ended %.1f ms after the first started",
             nseen, NSPIN, w.ms, last_start / 1e6, last_end / 1e6);
    EXPECT_EQ_INT(0, rc);
    EXPECT_EQ_INT(NSPIN, nseen);

    for (int i = 0; i < NSPIN; i++)
        CK(cudaStreamDestroy(st[i]));
    for (int i = 0; i < nidle; i++)
        CK(cudaStreamDestroy(idle[i]));
    gdaki_pair_dereg(p, &smr);
    gdaki_pair_dereg(p, &dmr);
    gdaki_pair_close(p);
    CK(cudaFreeHost(src));
    CK(cudaFree(res));
    cuda_dl_free(cu, flag);
    cuda_dl_close(cu);
}

TAP_CASE(write_reaches_kernels_spinning_on_their_own_streams)
{
    write_reaches_spinning_kernels(cudaStreamNonBlocking, 0);
}

TAP_CASE(write_reaches_kernels_spinning_on_blocking_streams)
{
    write_reaches_spinning_kernels(cudaStreamDefault, 0);
}

/* NCCL and the application hold many streams besides the spinning ones */
TAP_CASE(write_reaches_spinning_kernels_among_many_streams)
{
    write_reaches_spinning_kernels(cudaStreamNonBlocking, 96);
}

TAP_CASE(write_reaches_spinning_kernels_among_many_blocking_streams)
{
    write_reaches_spinning_kernels(cudaStreamDefault, 96);
}

/* 256 KiB is softnic's read piece (responder.c): below, one, and 4 + a tail */
TAP_CASE(read_of_gpu_memory_brings_every_byte)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0)
        TAP_SKIP("no CUDA GPU on this machine (run make check-gpu on a GPU machine)");
    CK(cudaSetDevice(0));
    struct gdaki_pair *p = open_pair();
    const size_t max = (1u << 20) + 4099;
    unsigned char *gpu = NULL, *want = (unsigned char *)malloc(max), *got = NULL;
    if (!want)
        tap_fail_at(__FILE__, __LINE__, "out of memory");
    for (size_t i = 0; i < max; i++)
        want[i] = (unsigned char)(i * 131 + (i >> 12) + 7);
    CK(cudaMalloc((void **)&gpu, max));
    CK(cudaMemcpy(gpu, want, max, cudaMemcpyHostToDevice));
    CK(cudaMallocHost((void **)&got, max + 1)); /* + 1: the byte past the longest read */
    struct gdaki_mr gmr, hmr;
    if (gdaki_pair_reg(p, gpu, max, &gmr, err, sizeof(err)) != 0 ||
        gdaki_pair_reg(p, got, max + 1, &hmr, err, sizeof(err)) != 0)
        tap_fail_at(__FILE__, __LINE__, "gdaki_pair_reg: %s", err);
    const size_t sizes[] = { 3, 256 * 1024, max };
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        memset(got, 0xa5, max + 1);
        int rc = gdaki_pair_cpu_read(p, &gmr, &hmr, sizes[k], err, sizeof(err));
        if (rc != 0)
            tap_diag("read of %zu bytes: %s", sizes[k], err);
        EXPECT_EQ_INT(0, rc);
        size_t bad = 0;
        while (bad < sizes[k] && got[bad] == want[bad])
            bad++;
        if (bad < sizes[k])
            tap_diag("read of %zu bytes: byte %zu is 0x%02x, not 0x%02x", sizes[k], bad, got[bad], want[bad]);
        EXPECT_EQ_U64(sizes[k], bad);
        EXPECT_EQ_INT(0xa5, got[sizes[k]]); /* and nothing past it */
    }
    gdaki_pair_dereg(p, &hmr);
    gdaki_pair_dereg(p, &gmr);
    gdaki_pair_close(p);
    CK(cudaFreeHost(got));
    CK(cudaFree(gpu));
    free(want);
}

int main(int argc, char **argv)
{
    return tap_run(argc, argv);
}
