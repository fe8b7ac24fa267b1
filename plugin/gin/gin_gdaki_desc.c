/* plugin/gin/gin_gdaki_desc.c: the images of layout 100's GDAKI structures
 * (NCCL 2.28.x and 2.29.x) railnet hands NCCL's device code (gin_gdaki.h;
 * layouts in include/railnet_gin_gdaki.h), and the window handle and keys
 * both layouts share. Pure functions: tests/gin_gdaki checks them field by
 * field against hand-computed images.
 *
 * The QP descriptor is what DOCA GPUNetIO's exporter makes of a QP: all
 * posting counters at zero, the QP number pre-shifted (<< 8) and
 * pre-swapped with each data-segment count NCCL uses (ds 1..4), the ring
 * size (16 bits) and its mask, the send doorbell record word, the UAR
 * register, the send CQ (size, mask, 64-byte CQEs, its number for the
 * companion's WAIT), no receive queue, and the doorbell mode: the GPU
 * rings the UAR register itself (GPU_SM_DB), which a ConnectX takes as
 * MMIO and softnic's NIC thread watches (tests/softnic/mlx5_nic.c). */
#include <endian.h>
#include <string.h>

#include "gin_gdaki.h"

void gin_gdaki_qp_image(const struct gin_gdaki_queue *q, struct rn_doca_qp *out)
{
    GIN_GDAKI_QP_IMAGE(q, out);
}

/* Also layout 200's context for backend 1, which has no get tracking. */
void gin_gdaki_ctx_image(const struct gin_gdaki_ctx_desc *d, struct rn_gin_gdaki_gpu_ctx *out)
{
    memset(out, 0, sizeof(*out));
    out->gdqp = d->gdqp;
    out->companion_gdqp = d->companion;
    out->counters_table.buffer = d->counters.base + d->counters.offset;
    out->counters_table.rkeys = d->counters.rkeys;
    out->counters_table.lkey = htobe32(d->counters.lkey);
    out->counters_table.offset = d->counters.offset;
    out->signals_table.buffer = d->signals.base + d->signals.offset;
    out->signals_table.rkeys = d->signals.rkeys;
    out->signals_table.lkey = htobe32(d->signals.lkey);
    out->signals_table.offset = d->signals.offset;
    out->sink_buffer_lkey = htobe32(d->sink_lkey);
}

void gin_gdaki_mh_image(uint32_t *rkeys, uint32_t lkey, struct rn_gin_gdaki_mem_handle *out)
{
    memset(out, 0, sizeof(*out));
    out->rkeys = rkeys;
    out->lkey = htobe32(lkey);
}

void gin_gdaki_keys_be(const uint32_t *keys, int n, uint32_t *out)
{
    for (int i = 0; i < n; i++)
        out[i] = htobe32(keys[i]);
}
