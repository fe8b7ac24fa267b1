/* plugin/gin/gin_gdaki_layout.c: which writer and which sizes a layout
 * takes (gin_gdaki.h). The rest of the GDAKI type is the same for every
 * layout: it asks here for a descriptor's size and image. */
#include <stddef.h>

#include "gin_gdaki.h"

size_t gin_gdaki_qp_size(int layout)
{
    switch (layout) {
    case RN_GIN_GDAKI_V100: return sizeof(struct rn_doca_qp);
    case RN_GIN_GDAKI_V200: return sizeof(struct rn_doca_qp_v200);
    default: return 0;
    }
}

size_t gin_gdaki_ctx_size(int layout, int backend)
{
    if (layout == RN_GIN_GDAKI_V100)
        return sizeof(struct rn_gin_gdaki_gpu_ctx);
    if (layout != RN_GIN_GDAKI_V200)
        return 0;
    /* NCCL 2.30.7's own host code refuses backend 0 (kernels built with an
     * NCCL before 2.30.3) as well */
    if (backend == RN_GIN_GDAKI_BACKEND_V1)
        return sizeof(struct rn_gin_gdaki_gpu_ctx);
    if (backend == RN_GIN_GDAKI_BACKEND_V2)
        return sizeof(struct rn_gin_gdaki_gpu_ctx_v200);
    return 0;
}

int gin_gdaki_ctx_gets(int layout, int backend)
{
    return layout == RN_GIN_GDAKI_V200 && backend == RN_GIN_GDAKI_BACKEND_V2;
}

void gin_gdaki_qp_write(int layout, const struct gin_gdaki_queue *q, void *out)
{
    if (layout == RN_GIN_GDAKI_V200)
        gin_gdaki_qp_image_v200(q, out);
    else
        gin_gdaki_qp_image(q, out);
}

void gin_gdaki_ctx_write(int layout, int backend, const struct gin_gdaki_ctx_desc *d, void *out)
{
    if (gin_gdaki_ctx_gets(layout, backend))
        gin_gdaki_ctx_image_v200(d, out);
    else
        gin_gdaki_ctx_image(d, out);
}
