/* include/railnet_gin_gdaki.h: railnet's own statement of the structures
 * NCCL's GIN GDAKI device code reads, written out from the facts of NCCL's
 * headers (nccl_device/gin/gdaki/gin_gdaki_device_host_common.h and
 * .../doca_gpunetio/common/doca_gpunetio_verbs_{def,dev}.h), not copied.
 * Two layouts, named by NCCL_GIN_GDAKI_VERSION:
 * - 100: NCCL 2.28.x and 2.29.x (doca_gpu_dev_verbs_qp of 280 bytes);
 * - 200: NCCL 2.30.x (DOCA GPUNetIO device code 2.0: a packed QP of 296
 *   bytes with reserved room, a packed CQ of 64, and a context that may
 *   carry per-peer get tracking).
 * Plain C with the same layout on x86-64; the static asserts pin sizes and
 * offsets, and tests/gin_gdaki/test_gin_gdaki_layout.cc checks every field
 * against the installed headers themselves.
 *
 * How NCCL's device code uses them (gin_gdaki.h, doca_gpunetio device/):
 * - ctx.handle points at an array of contexts: NCCL 2.28 reads element 0,
 *   2.29 and 2.30 element ctx.contextId (one per context createContext was
 *   asked for). QP of peer p is gdqp + p, its companion companion_gdqp + p
 *   (a QP that reaches this rank itself: a WAIT on the main QP's CQ, then an
 *   atomic add on this rank's counter table).
 * - Addresses on the wire are offsets: a put writes window offset dstOff
 *   with rkeys[peer] of the window, reads srcOff with the local lkey; a
 *   signal adds at 8 * (id + signals_table.offset) of the signal table with
 *   rkeys[peer]; a counter at 8 * (id + counters_table.offset) of the
 *   counter table with rkeys[own rank]; atomic results land at offset 0 of
 *   the sink (sink_buffer_lkey). Every such memory region is registered
 *   zero-based (iova 0). Locally, a context's signal id s is
 *   signals_table.buffer[s] (buffer already points at the context's part);
 *   NCCL 2.28 has no offset field (that word is padding there).
 * - Keys are stored big-endian (DOCA_GPUNETIO_VERBS_MKEY_SWAPPED): copied
 *   into the WQE as they are.
 * - Every WQE is one 64-byte slot and asks for a CQE; CQE number n is the
 *   completion of slot n (the CQ is polled by index, never through its
 *   doorbell record: the CQ must ignore overrun).  Posting: reserve slots
 *   (sq_rsvd_index), write, mark ready (sq_ready_index), then under sq_lock
 *   raise sq_wqe_pi and, with nic_handler GPU_SM_DB, write the doorbell
 *   register (8 bytes: htobe32(pi << 8), sq_num_shift8_be), the doorbell
 *   record (htobe32(pi & 0xffff)), and the register again. NCCL 2.29 and
 *   2.30 may skip the ring for requests they aggregate (a later ring names
 *   a higher producer index) and skip the free-slot wait where the caller
 *   promises room.
 * - Layout 200 only: a get is an RDMA READ on the main QP; a flush after
 *   gets posts a DUMP WQE (opcode 0x23, 2 segments: 1 byte to the sink)
 *   and waits for its CQE; last_issued_get[peer] and
 *   last_visible_get[peer] (per context, nranks words each, zeroed) hold
 *   ticket + 1 of the last get and of the last DUMP. With NCCL's thread or
 *   CTA resource sharing the device code updates a QP without GPU-wide
 *   atomics: no QP may serve two contexts. */
#ifndef RAILNET_GIN_GDAKI_LAYOUT_H
#define RAILNET_GIN_GDAKI_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#define RN_GIN_GDAKI_V100 100          /* NCCL_GIN_GDAKI_VERSION of 2.28.x and 2.29.x */
#define RN_GIN_GDAKI_V200 200          /* NCCL_GIN_GDAKI_VERSION of 2.30.x */
/* ncclGinConfig_v14_t.backendVersion (NCCL 2.30.7): which context the
 * kernel's device code reads under layout 200 */
#define RN_GIN_GDAKI_BACKEND_V1 1      /* kernels built with NCCL 2.30.3/2.30.4: no get tracking (72 bytes) */
#define RN_GIN_GDAKI_BACKEND_V2 2      /* kernels built with NCCL >= 2.30.5: get tracking (88 bytes) */

/* enum doca_gpu_dev_verbs_nic_handler */
#define RN_DOCA_NIC_HANDLER_AUTO 0
#define RN_DOCA_NIC_HANDLER_CPU_PROXY 1
#define RN_DOCA_NIC_HANDLER_GPU_SM_DB 2
#define RN_DOCA_NIC_HANDLER_GPU_SM_BF 3    /* 6 in layout 200's flag encoding; railnet uses neither */
/* enum doca_gpu_dev_verbs_mem_type */
#define RN_DOCA_MEM_TYPE_HOST 1
#define RN_DOCA_MEM_TYPE_GPU 2
/* mlx5 opcode of the companion QP's WAIT (not in mlx5dv.h) */
#define RN_DOCA_OPCODE_WAIT 0x0f

/* ---------------- layout 100 ---------------- */

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

/* ---------------- both layouts ---------------- */

/* ncclGinGdakiGlobalGPUBufferTable<uint64_t> */
struct rn_gin_gdaki_table {
    uint64_t *buffer;           /* this context's first entry */
    uint32_t *rkeys;            /* __be32 [nranks] */
    uint32_t lkey;              /* __be32 */
    uint32_t offset;            /* entries before this context's (NCCL 2.29+; padding in 2.28) */
};

/* struct ncclGinGdakiGPUContext (layout 100; layout 200 with backend 1) */
struct rn_gin_gdaki_gpu_ctx {
    struct rn_doca_qp *gdqp;
    struct rn_doca_qp *companion_gdqp;
    struct rn_gin_gdaki_table counters_table;
    struct rn_gin_gdaki_table signals_table;
    uint32_t sink_buffer_lkey;  /* __be32 */
};

/* struct ncclGinGdakiGPUContext of layout 200, backend 2 */
struct rn_gin_gdaki_gpu_ctx_v200 {
    struct rn_gin_gdaki_gpu_ctx base;
    uint64_t *last_issued_get;  /* [nranks]: ticket + 1 of the last get, 0 none */
    uint64_t *last_visible_get; /* [nranks]: ticket + 1 of the last DUMP */
};

/* ---------------- layout 200 ---------------- */

/* struct doca_gpu_dev_verbs_cq (packed, 8-aligned) */
struct rn_doca_cq_v200 {
    uint8_t *cqe_daddr;
    uint32_t cq_num;
    uint32_t cqe_num;
    uint32_t *dbrec;            /* __be32 * */
    uint64_t cqe_ci;
    uint32_t cqe_mask;
    uint8_t cqe_size;
    uint8_t reserved1[3];
    uint64_t cqe_rsvd;
    int32_t mem_type;
    uint8_t reserved2[12];
} __attribute__((packed, aligned(8)));

/* struct doca_gpu_dev_verbs_qp (packed, 8-aligned): a fifth pre-shifted
 * QP number (5 segments), the receive queue gone (reserved room) */
struct rn_doca_qp_v200 {
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
    uint32_t sq_num_shift8_be_5ds;
    int32_t sq_lock;
    uint16_t sq_wqe_num;
    uint16_t sq_wqe_mask;
    uint8_t *sq_wqe_daddr;
    uint32_t *sq_dbrec;         /* __be32 * */
    uint64_t *sq_db;
    uint8_t reserved1[8];
    uint8_t reserved2[64];
    struct rn_doca_cq_v200 cq_sq;
    uint8_t reserved3[64];
    int32_t nic_handler;
    int32_t mem_type;
} __attribute__((packed, aligned(8)));

/* ---------------- both layouts ---------------- */

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
_Static_assert(offsetof(struct rn_gin_gdaki_table, offset) == 20, "gdaki table: offset");
_Static_assert(sizeof(struct rn_gin_gdaki_gpu_ctx_v200) == 88, "gdaki gpu context v200 size");
_Static_assert(offsetof(struct rn_gin_gdaki_gpu_ctx_v200, last_issued_get) == 72, "gdaki ctx v200: gets");
_Static_assert(sizeof(struct rn_doca_cq_v200) == 64, "doca cq v200 size");
_Static_assert(offsetof(struct rn_doca_cq_v200, cqe_rsvd) == 40, "doca cq v200: cqe_rsvd");
_Static_assert(offsetof(struct rn_doca_cq_v200, mem_type) == 48, "doca cq v200: mem_type");
_Static_assert(sizeof(struct rn_doca_qp_v200) == 296, "doca qp v200 size");
_Static_assert(offsetof(struct rn_doca_qp_v200, sq_lock) == 56, "doca qp v200: sq_lock");
_Static_assert(offsetof(struct rn_doca_qp_v200, sq_wqe_num) == 60, "doca qp v200: sq_wqe_num");
_Static_assert(offsetof(struct rn_doca_qp_v200, sq_wqe_daddr) == 64, "doca qp v200: sq_wqe_daddr");
_Static_assert(offsetof(struct rn_doca_qp_v200, sq_db) == 80, "doca qp v200: sq_db");
_Static_assert(offsetof(struct rn_doca_qp_v200, cq_sq) == 160, "doca qp v200: cq_sq");
_Static_assert(offsetof(struct rn_doca_qp_v200, nic_handler) == 288, "doca qp v200: nic_handler");
/* What a failed context's release touches (gin_gdaki_release.c) lies at
 * the same offsets in both layouts: only the QPs' stride differs. */
_Static_assert(offsetof(struct rn_doca_qp_v200, sq_rsvd_index) == offsetof(struct rn_doca_qp, sq_rsvd_index),
               "sq_rsvd_index in both layouts");
_Static_assert(offsetof(struct rn_doca_qp_v200, cq_sq) + offsetof(struct rn_doca_cq_v200, cqe_ci) ==
                   offsetof(struct rn_doca_qp, cq_sq) + offsetof(struct rn_doca_cq, cqe_ci),
               "cq_sq.cqe_ci in both layouts");
#endif

#endif
