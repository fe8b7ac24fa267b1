/* gdaki_config.c: the RAILNET_* variables of the GPU-initiated path, read in
 * this one place (plugin/ib/config.c is the plugin's reader; once it lands,
 * these entries move into its table and this file reads from it). */
#include "railnet_gdaki.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int gdaki_pair_opts_default(struct gdaki_pair_opts *opts, char *err, size_t errlen)
{
    memset(opts, 0, sizeof(*opts));
    opts->port = 1;
    opts->gid_index = -1;
    opts->sq_depth = 1024;
    opts->queue_mem = GDAKI_QUEUE_MEM_HOST;

    const char *mem = getenv("RAILNET_GDAKI_QUEUE_MEM");
    if (mem && *mem) {
        if (strcmp(mem, "host") == 0) {
            opts->queue_mem = GDAKI_QUEUE_MEM_HOST;
        } else if (strcmp(mem, "gpu") == 0) {
            opts->queue_mem = GDAKI_QUEUE_MEM_GPU;
        } else {
            snprintf(err, errlen, "RAILNET_GDAKI_QUEUE_MEM=%s: expected host or gpu", mem);
            return -1;
        }
    }
    const char *depth = getenv("RAILNET_GDAKI_SQ_DEPTH");
    if (depth && *depth) {
        char *end;
        errno = 0;
        unsigned long d = strtoul(depth, &end, 10);
        /* 16-bit WQE counters: at most 2^15 slots may be outstanding. */
        if (errno || *end || d < 8 || d > 32768) {
            snprintf(err, errlen, "RAILNET_GDAKI_SQ_DEPTH=%s: expected 8..32768", depth);
            return -1;
        }
        opts->sq_depth = (uint32_t)d;
    }
    const char *lib = getenv("RAILNET_IBVERBS_LIB");
    if (lib && *lib)
        opts->ibverbs_lib = lib;
    return 0;
}
