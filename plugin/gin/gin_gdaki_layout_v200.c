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
    memset(out, 0, sizeof(*out));
    uint32_t s8 = q->qpn << 8;
    out->sq_num = q->qpn;
    out->sq_num_shift8 = s8;
    out->sq_num_shift8_be = htobe32(s8);
    out->sq_num_shift8_be_1ds = htobe32(s8 | 1);
    out->sq_num_shift8_be_2ds = htobe32(s8 | 2);
    out->sq_num_shift8_be_3ds = htobe32(s8 | 3);
    out->sq_num_shift8_be_4ds = htobe32(s8 | 4);
    out->sq_num_shift8_be_5ds = htobe32(s8 | 5);
    out->sq_wqe_num = (uint16_t)(1u << q->sq_log);
    out->sq_wqe_mask = (uint16_t)((1u << q->sq_log) - 1);
    out->sq_wqe_daddr = q->sq;
    out->sq_dbrec = q->sq_dbrec;
    out->sq_db = q->db;
    out->cq_sq.cqe_daddr = q->cq;
    out->cq_sq.cq_num = q->cqn;
    out->cq_sq.cqe_num = 1u << q->cq_log;
    out->cq_sq.dbrec = q->cq_dbrec;
    out->cq_sq.cqe_mask = (1u << q->cq_log) - 1;
    out->cq_sq.cqe_size = 64;
    out->cq_sq.mem_type = q->gpu ? RN_DOCA_MEM_TYPE_GPU : RN_DOCA_MEM_TYPE_HOST;
    out->nic_handler = RN_DOCA_NIC_HANDLER_GPU_SM_DB;
    out->mem_type = q->gpu ? RN_DOCA_MEM_TYPE_GPU : RN_DOCA_MEM_TYPE_HOST;
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
