/* plugin/gin/gin_gdaki_layout_v200.c: the images of layout 200's GDAKI
 * structures (NCCL 2.30.x; include/railnet_gin_gdaki.h). Pure functions,
 * checked field by field by tests/gin_gdaki.
 *
 * The QP descriptor says what layout 100's says (gin_gdaki_desc.c) in the
 * packed DOCA GPUNetIO 2.0 form: the QP number also pre-shifted with five
 * data segments, reserved room zeroed, and a CQ descriptor of 64 bytes.
 * The doorbell mode stays GPU_SM_DB (2 in both encodings): the GPU writes
 * the doorbell record and the UAR register, which softnic's NIC thread
 * watches; the record-less mode (GPU_SM_NO_DBR) would need a NIC that
 * fetches without a record. */
#include <endian.h>
#include <string.h>

#include "gin_gdaki.h"

void gin_gdaki_qp_image_v200(const struct gin_gdaki_queue *q, struct rn_doca_qp_v200 *out)
{
    GIN_GDAKI_QP_IMAGE(q, out);
    out->sq_num_shift8_be_5ds = htobe32((q->qpn << 8) | 5);
}

/* Backend 2: the common part, then the per-peer get tracking NCCL 2.30.5+
 * device code reads at every get and flush. */
void gin_gdaki_ctx_image_v200(const struct gin_gdaki_ctx_desc *d, struct rn_gin_gdaki_gpu_ctx_v200 *out)
{
    memset(out, 0, sizeof(*out));
    gin_gdaki_ctx_image(d, &out->base);
    out->last_issued_get = d->last_issued_get;
    out->last_visible_get = d->last_visible_get;
}
