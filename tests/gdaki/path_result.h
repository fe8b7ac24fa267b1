/* tests/gdaki/path_result.h: what one path of bench_gdaki_vs_proxy measures
 * for one message size, and the buffer layout both paths share.
 *
 * Both paths write message i from slot i % window of the source buffer to
 * slot i % window of the destination buffer; a slot is PATH_SLOT bytes, so
 * a buffer is window * PATH_SLOT bytes.  The caller fills the source and
 * zeroes the destination before a phase and compares the slots after it. */
#ifndef RAILNET_TESTS_GDAKI_PATH_RESULT_H
#define RAILNET_TESTS_GDAKI_PATH_RESULT_H

#include <stddef.h>
#include <stdlib.h>

#define PATH_SLOT 4096       /* the largest message the benchmark sends */
#define PATH_MAX_WINDOW 32   /* messages in flight at most */

struct path_result {
    size_t size;
    long msgs;               /* messages in the timed rate phase */
    double rate_mps;         /* million messages per second, at most window in flight */
    long lat_msgs;           /* messages in the timed latency phase */
    double lat_med_us;       /* one message at a time: median post-to-completion */
    double lat_mean_us;
};

static inline int path_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median of v[0..n) (sorts v); mean into *mean.  n > 0. */
static inline double path_median(double *v, long n, double *mean)
{
    double sum = 0;
    for (long i = 0; i < n; i++)
        sum += v[i];
    *mean = sum / (double)n;
    qsort(v, (size_t)n, sizeof(double), path_cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#endif
