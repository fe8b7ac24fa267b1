/* gdaki_config.c: defaults of the GPU-initiated path from the plugin's
 * configuration (plugin/ib/config.c, the one reader of RAILNET_*):
 * RAILNET_GDAKI_QUEUE_MEM=host|gpu|host-devx and RAILNET_IBVERBS_LIB. */
#include "railnet_gdaki.h"

#include <string.h>

#include "../ib/config.h"

int gdaki_pair_opts_default(struct gdaki_pair_opts *opts, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    memset(opts, 0, sizeof(*opts));
    opts->port = 1;
    opts->gid_index = -1;
    opts->sq_depth = 1024;
    config_load();  /* once per process; a bad value is a WARN and the default */
    const struct rn_config *c = rn_config();
    opts->queue_mem = c->gdaki_queue_mem == 1   ? GDAKI_QUEUE_MEM_GPU
                     : c->gdaki_queue_mem == 2 ? GDAKI_QUEUE_MEM_HOST_DEVX
                                               : GDAKI_QUEUE_MEM_HOST;
    opts->ibverbs_lib = c->ibverbs_lib[0] ? c->ibverbs_lib : NULL;
    return 0;
}
