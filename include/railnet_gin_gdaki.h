/* include/railnet_gin_gdaki.h: railnet's own statement of the structures
 * NCCL 2.28.9's GIN GDAKI device code reads (NCCL_GIN_GDAKI_VERSION 100),
 * written out from the facts of NCCL's installed headers
 * (nccl_device/gin/gdaki/gin_gdaki_device_host_common.h and
 * .../doca_gpunetio/common/doca_gpunetio_verbs_{def,dev}.h), not copied.
 * Plain C with the same layout on x86-64; the static asserts pin sizes and
 * offsets, and tests/gin_gdaki/test_gin_gdaki_layout.cc checks every field
 * against the installed headers themselves.
 *
 * How NCCL's device code uses them (gin_gdaki.h, doca_gpunetio device/):
 * - ctx.handle points at struct rn_gin_gdaki_gpu_ctx; QP of peer p is
 *   gdqp + p, its companion companion_gdqp + p (a QP that reaches this rank
 *   itself: a WAIT on the main QP's CQ, then an atomic add on this rank's
 *   counter table).
 * - Addresses on the wire are offsets: a put writes window offset dstOff
 *   with rkeys[peer] of the window, reads srcOff with the local lkey; a
 *   signal adds at 8 * id of the signal table with rkeys[peer]; a counter at
 *   8 * id of the counter table with rkeys[own rank]; atomic results land
 *   at offset 0 of the sink (sink_buffer_lkey).  Every such memory region
 *   is registered zero-based (iova 0).
 * - Keys are stored big-endian (DOCA_GPUNETIO_VERBS_MKEY_SWAPPED): copied
 *   into the WQE as they are.
 * - Every WQE is one 64-byte slot and asks for a CQE; CQE number n is the
 *   completion of slot n (the CQ is polled by index, never through its
 *   doorbell record: the CQ must ignore overrun).  Posting: reserve slots
 *   (sq_rsvd_index), write, mark ready (sq_ready_index), then under sq_lock
 *   raise sq_wqe_pi and, with nic_handler GPU_SM_DB, write the doorbell
 *   register (8 bytes: htobe32(pi << 8), sq_num_shift8_be), the doorbell
 *   record (htobe32(pi & 0xffff)), and the register again. */
#ifndef RAILNET_GIN_GDAKI_LAYOUT_H
#define RAILNET_GIN_GDAKI_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#define RN_GIN_GDAKI_VERSION 100        /* NCCL_GIN_GDAKI_VERSION written for */

/* enum doca_gpu_dev_verbs_nic_handler */
#define RN_DOCA_NIC_HANDLER_AUTO 0
#define RN_DOCA_NIC_HANDLER_CPU_PROXY 1
#define RN_DOCA_NIC_HANDLER_GPU_SM_DB 2
#define RN_DOCA_NIC_HANDLER_GPU_SM_BF 3
/* enum doca_gpu_dev_verbs_mem_type */
#define RN_DOCA_MEM_TYPE_HOST 1
#define RN_DOCA_MEM_TYPE_GPU 2
/* mlx5 opcode of the companion QP's WAIT (not in mlx5dv.h) */
#define RN_DOCA_OPCODE_WAIT 0x0f

/* struct doca_gpu_dev_verbs_cq */
struct rn_doca_cq {
    uint8_t *cqe_daddr;
    uint32_t cq_num;
    uint32_t cqe_num;
    uint32_t *dbrec;            /* __be32 * */
    uint64_t cqe_ci;
    uint32_t cqe_mask;
    uint8_t cqe_size;
    uint64_t cqe_rsvd;
    int32_t mem_type;
} __attribute__((aligned(8)));

/* struct doca_gpu_dev_verbs_qp */
struct rn_doca_qp {
    uint64_t sq_rsvd_index;
    uint64_t sq_ready_index;
    uint64_t sq_wqe_pi;
    uint32_t sq_num;
    uint32_t sq_num_shift8;
    uint32_t sq_num_shift8_be;
    uint32_t sq_num_shift8_be_1ds;
    uint32_t sq_num_shift8_be_2ds;
    uint32_t sq_num_shift8_be_3ds;
    uint32_t sq_num_shift8_be_4ds;
    int32_t sq_lock;
    uint16_t sq_wqe_num;
    uint16_t sq_wqe_mask;
    uint8_t *sq_wqe_daddr;
    uint32_t *sq_dbrec;         /* __be32 * */
    uint64_t *sq_db;
    uint32_t rq_num;
    uint64_t rq_wqe_pi;
    uint32_t rq_wqe_num;
    uint32_t rq_wqe_mask;
    uint8_t *rq_wqe_daddr;
    uint32_t *rq_dbrec;
    uint32_t rcv_wqe_size;
    uint64_t rq_rsvd_index;
    uint64_t rq_ready_index;
    int32_t rq_lock;
    struct rn_doca_cq cq_sq;
    struct rn_doca_cq cq_rq;
    int32_t nic_handler;
    int32_t mem_type;
} __attribute__((aligned(8)));

/* ncclGinGdakiGlobalGPUBufferTable<uint64_t> */
struct rn_gin_gdaki_table {
    uint64_t *buffer;
    uint32_t *rkeys;            /* __be32 [nranks] */
    uint32_t lkey;              /* __be32 */
};

/* struct ncclGinGdakiGPUContext */
struct rn_gin_gdaki_gpu_ctx {
    struct rn_doca_qp *gdqp;
    struct rn_doca_qp *companion_gdqp;
    struct rn_gin_gdaki_table counters_table;
    struct rn_gin_gdaki_table signals_table;
    uint32_t sink_buffer_lkey;  /* __be32 */
};

/* struct ncclGinGdakiMemHandle: a window as the device code names it */
struct rn_gin_gdaki_mem_handle {
    uint32_t *rkeys;            /* __be32 [nranks] */
    uint32_t lkey;              /* __be32 */
};

#if defined(__x86_64__) && !defined(__cplusplus)
_Static_assert(sizeof(struct rn_doca_cq) == 56, "doca cq size");
_Static_assert(offsetof(struct rn_doca_cq, dbrec) == 16, "doca cq: dbrec");
_Static_assert(offsetof(struct rn_doca_cq, cqe_rsvd) == 40, "doca cq: cqe_rsvd");
_Static_assert(sizeof(struct rn_doca_qp) == 280, "doca qp size");
_Static_assert(offsetof(struct rn_doca_qp, sq_wqe_num) == 56, "doca qp: sq_wqe_num");
_Static_assert(offsetof(struct rn_doca_qp, sq_wqe_daddr) == 64, "doca qp: sq_wqe_daddr");
_Static_assert(offsetof(struct rn_doca_qp, sq_db) == 80, "doca qp: sq_db");
_Static_assert(offsetof(struct rn_doca_qp, cq_sq) == 160, "doca qp: cq_sq");
_Static_assert(offsetof(struct rn_doca_qp, nic_handler) == 272, "doca qp: nic_handler");
_Static_assert(sizeof(struct rn_gin_gdaki_table) == 24, "gdaki table size");
_Static_assert(sizeof(struct rn_gin_gdaki_gpu_ctx) == 72, "gdaki gpu context size");
_Static_assert(offsetof(struct rn_gin_gdaki_gpu_ctx, sink_buffer_lkey) == 64, "gdaki ctx: sink lkey");
_Static_assert(sizeof(struct rn_gin_gdaki_mem_handle) == 16, "gdaki mem handle size");
#endif

#endif
