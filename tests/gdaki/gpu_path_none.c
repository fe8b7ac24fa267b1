/* tests/gdaki/gpu_path_none.c: gpu_path.h for a build without nvcc -- the
 * GPU half reports why it cannot run, so the CPU-proxy half still runs
 * with host memory. */
#include <stdio.h>

#include "gpu_path.h"

static const char why[] = "built without nvcc (configure found no CUDA compiler): no GPU-initiated path";

int gpu_path_probe(int dev, char *err, size_t errlen)
{
    (void)dev;
    snprintf(err, errlen, "%s", why);
    return -1;
}

void gpu_path_bind(void *dev)
{
    (void)dev;
}

int gpu_mem_alloc(size_t len, void **p, char *err, size_t errlen)
{
    (void)len;
    *p = NULL;
    snprintf(err, errlen, "%s", why);
    return -1;
}

void gpu_mem_free(void *p)
{
    (void)p;
}

int gpu_mem_to_device(void *dst, const void *src, size_t len, char *err, size_t errlen)
{
    (void)dst, (void)src, (void)len;
    snprintf(err, errlen, "%s", why);
    return -1;
}

int gpu_mem_to_host(void *dst, const void *src, size_t len, char *err, size_t errlen)
{
    (void)dst, (void)src, (void)len;
    snprintf(err, errlen, "%s", why);
    return -1;
}

int gpu_mem_zero(void *p, size_t len, char *err, size_t errlen)
{
    (void)p, (void)len;
    snprintf(err, errlen, "%s", why);
    return -1;
}

int gpu_path_open(struct gdaki_pair *pair, void *src, void *dst, int slots, double timeout_s,
                  struct gpu_path **out, char *err, size_t errlen)
{
    (void)pair, (void)src, (void)dst, (void)slots, (void)timeout_s;
    *out = NULL;
    snprintf(err, errlen, "%s", why);
    return -1;
}

int gpu_path_rate(struct gpu_path *g, size_t size, long n, int window, double *rate_mps, char *err,
                  size_t errlen)
{
    (void)g, (void)size, (void)n, (void)window, (void)rate_mps;
    snprintf(err, errlen, "%s", why);
    return -1;
}

int gpu_path_lat(struct gpu_path *g, size_t size, long n, double *lat_us, char *err, size_t errlen)
{
    (void)g, (void)size, (void)n, (void)lat_us;
    snprintf(err, errlen, "%s", why);
    return -1;
}

int gpu_path_set_inline(struct gpu_path *g, int inline_max)
{
    (void)g, (void)inline_max;
    return -1;
}

void gpu_path_close(struct gpu_path *g)
{
    (void)g;
}
