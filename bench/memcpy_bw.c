/* bench/memcpy_bw.c: one thread's memcpy bandwidth, the yardstick of
 * bench/softnic_fastpath.sh.  Copies `block`-byte pieces from one buffer
 * of `span` bytes to another, `total` bytes in all, and prints MiB/s (as
 * perftest counts).  span == block is ib_write_bw's case (one buffer
 * rewritten, cache-warm); a large span is memory-bound.
 *   memcpy_bw BLOCK SPAN TOTAL */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s BLOCK SPAN TOTAL (bytes)\n", argv[0]);
        return 2;
    }
    size_t block = strtoull(argv[1], NULL, 0), span = strtoull(argv[2], NULL, 0);
    uint64_t total = strtoull(argv[3], NULL, 0);
    if (!block || span < block || total < block) {
        fprintf(stderr, "memcpy_bw: need 0 < BLOCK <= SPAN and BLOCK <= TOTAL\n");
        return 2;
    }
    char *src = malloc(span), *dst = malloc(span);
    if (!src || !dst)
        return 1;
    memset(src, 0x5a, span);
    memset(dst, 0, span);   /* every page present before timing */
    size_t pieces = span / block, k = 0;
    uint64_t n = total / block;
    for (size_t i = 0; i < pieces; i++)   /* warm-up pass */
        memcpy(dst + i * block, src + i * block, block);
    double t0 = now_s();
    for (uint64_t i = 0; i < n; i++) {
        memcpy(dst + k * block, src + k * block, block);
        k = k + 1 == pieces ? 0 : k + 1;
        __asm__ volatile("" ::: "memory");   /* every copy happens */
    }
    double dt = now_s() - t0;
    printf("%.0f\n", (double)(n * block) / dt / 1048576.0);
    free(src);
    free(dst);
    return 0;
}
