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
