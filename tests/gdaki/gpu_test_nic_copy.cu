/* tests/gdaki/gpu_test_nic_copy.cu (make check-gpu): an RDMA WRITE into GPU
 * memory lands while the application's kernels spin waiting for it, as it
 * does on a ConnectX, whose DMA waits for no CUDA stream.
 *
 * softnic lands such a write with a CUDA copy from its NIC thread. The GPU
 * feeds a context's streams through a few in-order hardware queues, so a
 * copy stream in the application's context can sit behind a kernel that
 * spins until the copy lands: nothing moves (NCCL jobs with GDR died that
 * way, RETRY_EXC on both ports). Here kernels spin on more streams than
 * there are hardware queues, each queue then holds one, and a write from
 * the CPU (softnic, loopback pair, host memory to GPU memory) must reach
 * them all within the kernels' own deadline. Skips without a GPU. */
extern "C" {
#include "tap.h"
}

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "railnet_gdaki.h"

/* more streams than CUDA_DEVICE_MAX_CONNECTIONS can give hardware queues (32) */
#define NSPIN 40
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

/* seen = 1 once *flag == want, 0 at the deadline */
__global__ void spin_until(volatile unsigned long long *flag, unsigned long long want, int *seen)
{
    long long t0 = now_ns();
    while (*flag != want)
        if (now_ns() - t0 > DEADLINE_NS) {
            *seen = 0;
            return;
        }
    *seen = 1;
}

static char err[512];

TAP_CASE(write_reaches_kernels_spinning_on_every_hardware_queue)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0)
        TAP_SKIP("no CUDA GPU on this machine (run make check-gpu on a GPU machine)");
    CK(cudaSetDevice(0));
    CK(cudaFree(0));

    struct gdaki_pair_opts o;
    if (gdaki_pair_opts_default(&o, err, sizeof(err)) != 0)
        tap_fail_at(__FILE__, __LINE__, "%s", err);
    static char lib[4096];
    if (!o.ibverbs_lib) {
        const char *top = getenv("top_builddir");
        snprintf(lib, sizeof(lib), "%s/tests/softnic/libibverbs.so.1", top && *top ? top : ".");
        o.ibverbs_lib = lib;
    }
    struct gdaki_pair *p = NULL;
    if (gdaki_pair_open(&o, &p, err, sizeof(err)) != 0)
        tap_fail_at(__FILE__, __LINE__, "gdaki_pair_open: %s", err);

    unsigned long long *flag = NULL, *src = NULL;
    int *seen = NULL;
    CK(cudaMalloc((void **)&flag, 4096));
    CK(cudaMemset(flag, 0, 4096));
    CK(cudaMalloc((void **)&seen, NSPIN * sizeof(int)));
    CK(cudaMemset(seen, 0xff, NSPIN * sizeof(int)));
    CK(cudaMallocHost((void **)&src, 4096));
    *src = WANT;
    struct gdaki_mr dmr, smr;
    if (gdaki_pair_reg(p, flag, 4096, &dmr, err, sizeof(err)) != 0 ||
        gdaki_pair_reg(p, src, 4096, &smr, err, sizeof(err)) != 0)
        tap_fail_at(__FILE__, __LINE__, "gdaki_pair_reg: %s", err);
    CK(cudaDeviceSynchronize());

    cudaStream_t st[NSPIN];
    for (int i = 0; i < NSPIN; i++) {
        CK(cudaStreamCreateWithFlags(&st[i], cudaStreamNonBlocking));
        spin_until<<<1, 1, 0, st[i]>>>(flag, WANT, seen + i);
        CK(cudaGetLastError());
    }
    /* the write's completion needs the responder's copy to have landed */
    int rc = gdaki_pair_cpu_write_loop(p, &smr, &dmr, sizeof(*src), 1, 1, err, sizeof(err));
    CK(cudaDeviceSynchronize());
    int h[NSPIN];
    CK(cudaMemcpy(h, seen, sizeof(h), cudaMemcpyDeviceToHost));
    int nseen = 0;
    for (int i = 0; i < NSPIN; i++)
        nseen += h[i] == 1;
    if (rc != 0)
        tap_diag("the write failed: %s", err);
    tap_diag("%d of %d spinning kernels saw the write", nseen, NSPIN);
    EXPECT_EQ_INT(0, rc);
    EXPECT_EQ_INT(NSPIN, nseen);

    for (int i = 0; i < NSPIN; i++)
        CK(cudaStreamDestroy(st[i]));
    gdaki_pair_dereg(p, &smr);
    gdaki_pair_dereg(p, &dmr);
    gdaki_pair_close(p);
    CK(cudaFreeHost(src));
    CK(cudaFree(seen));
    CK(cudaFree(flag));
}

int main(int argc, char **argv)
{
    return tap_run(argc, argv);
}
