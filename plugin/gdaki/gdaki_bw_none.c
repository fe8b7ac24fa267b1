/* gdaki_bw_none.c: gdaki_bw_run* in a build without nvcc (no device code):
 * they say so, so that railnet-write-bw --gpu-initiated fails with the
 * reason instead of failing to link. */
#include <stdio.h>

#include "railnet_gdaki.h"

static int no_nvcc(char *err, size_t errlen)
{
    snprintf(err, errlen, "railnet was built without nvcc: no GPU-initiated device code "
             "(configure --with-cuda=DIR with a CUDA toolkit that has nvcc)");
    return -1;
}

int gdaki_bw_run(const struct gdaki_bw_opts *opts, struct gdaki_bw_result *results,
                 int max_results, char *err, size_t errlen)
{
    (void)opts; (void)results; (void)max_results;
    return no_nvcc(err, errlen);
}

int gdaki_bw_run_pair(struct gdaki_pair *pair, const struct gdaki_bw_opts *opts,
                      struct gdaki_bw_result *results, int max_results, char *err, size_t errlen)
{
    (void)pair; (void)opts; (void)results; (void)max_results;
    return no_nvcc(err, errlen);
}

int gdaki_bw_write_size(struct gdaki_pair *pair, const struct gdaki_mr *src, uint64_t raddr,
                        uint32_t rkey, uint64_t sig_raddr, uint32_t sig_rkey, size_t size,
                        const struct gdaki_bw_opts *opts, struct gdaki_bw_result *r, char *err,
                        size_t errlen)
{
    (void)pair; (void)src; (void)raddr; (void)rkey; (void)sig_raddr; (void)sig_rkey; (void)size;
    (void)opts; (void)r;
    return no_nvcc(err, errlen);
}
