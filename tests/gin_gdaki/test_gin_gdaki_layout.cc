// tests/gin_gdaki/test_gin_gdaki_layout.cc: railnet's statement of NCCL's
// GIN GDAKI structures (include/railnet_gin_gdaki.h) against the headers
// the installed NCCL ships (nccl_device/gin/gdaki/...), field by field:
// same size, same offset, same width, for the layout those headers are
// (NCCL_GIN_GDAKI_VERSION 100: NCCL 2.28/2.29; 200: NCCL 2.30).  Skips
// (TAP) when the headers are absent.
#include <cstddef>
#include <cstdio>

#include "railnet_gin_gdaki.h"

#include "nccl_gdaki_headers.h"

#ifndef HAVE_NCCL_GDAKI_HEADERS
int main()
{
    std::printf("1..0 # SKIP NCCL's GDAKI device headers are not installed (nccl_device/gin/gdaki)\n");
    return 0;
}
#else

static int n_case, n_fail;

static void check(bool ok, const char *what, long want, long got)
{
    n_case++;
    if (ok) {
        std::printf("ok %d - %s\n", n_case, what);
    } else {
        n_fail++;
        std::printf("not ok %d - %s\n#   NCCL's header: %ld, railnet's: %ld\n", n_case, what, want, got);
    }
}

#define SAME_SIZE(theirs, ours) \
    check(sizeof(theirs) == sizeof(ours), "size of " #theirs, (long)sizeof(theirs), (long)sizeof(ours))
#define SAME_FIELD(theirs, ours, tf, of)                                                          \
    do {                                                                                        \
        check(offsetof(theirs, tf) == offsetof(ours, of), #theirs "." #tf " offset",            \
              (long)offsetof(theirs, tf), (long)offsetof(ours, of));                            \
        check(sizeof(((theirs *)0)->tf) == sizeof(((ours *)0)->of), #theirs "." #tf " width",   \
              (long)sizeof(((theirs *)0)->tf), (long)sizeof(((ours *)0)->of));                  \
    } while (0)

typedef struct doca_gpu_dev_verbs_cq their_cq;
typedef struct doca_gpu_dev_verbs_qp their_qp;
typedef ncclGinGdakiGlobalGPUBufferTable<uint64_t> their_table;
typedef struct ncclGinGdakiGPUContext their_ctx;
typedef struct ncclGinGdakiMemHandle their_mh;
#if NCCL_GIN_GDAKI_VERSION == 200
typedef struct rn_doca_cq_v200 our_cq;
typedef struct rn_doca_qp_v200 our_qp;
typedef struct rn_gin_gdaki_gpu_ctx_v200 our_ctx;
#define CTX(f) base.f
#else
typedef struct rn_doca_cq our_cq;
typedef struct rn_doca_qp our_qp;
typedef struct rn_gin_gdaki_gpu_ctx our_ctx;
#define CTX(f) f
#endif
typedef struct rn_gin_gdaki_table our_table;
typedef struct rn_gin_gdaki_mem_handle our_mh;

int main()
{
    check(NCCL_GIN_GDAKI_VERSION == RN_GIN_GDAKI_V100 || NCCL_GIN_GDAKI_VERSION == RN_GIN_GDAKI_V200,
          "NCCL_GIN_GDAKI_VERSION is one railnet writes", NCCL_GIN_GDAKI_VERSION, RN_GIN_GDAKI_V100);
    check(DOCA_GPUNETIO_VERBS_NIC_HANDLER_GPU_SM_DB == RN_DOCA_NIC_HANDLER_GPU_SM_DB, "nic_handler GPU_SM_DB",
          DOCA_GPUNETIO_VERBS_NIC_HANDLER_GPU_SM_DB, RN_DOCA_NIC_HANDLER_GPU_SM_DB);
    check(DOCA_GPUNETIO_VERBS_MEM_TYPE_GPU == RN_DOCA_MEM_TYPE_GPU, "mem_type GPU", DOCA_GPUNETIO_VERBS_MEM_TYPE_GPU,
          RN_DOCA_MEM_TYPE_GPU);
    check(DOCA_GPUNETIO_VERBS_MEM_TYPE_HOST == RN_DOCA_MEM_TYPE_HOST, "mem_type HOST",
          DOCA_GPUNETIO_VERBS_MEM_TYPE_HOST, RN_DOCA_MEM_TYPE_HOST);
    check(DOCA_GPUNETIO_IB_MLX5_OPCODE_WAIT == RN_DOCA_OPCODE_WAIT, "WAIT opcode", DOCA_GPUNETIO_IB_MLX5_OPCODE_WAIT,
          RN_DOCA_OPCODE_WAIT);
    check(DOCA_GPUNETIO_VERBS_MKEY_SWAPPED == 1, "keys are stored big-endian (MKEY_SWAPPED)",
          1, DOCA_GPUNETIO_VERBS_MKEY_SWAPPED);

    SAME_SIZE(their_cq, our_cq);
    SAME_FIELD(their_cq, our_cq, cqe_daddr, cqe_daddr);
    SAME_FIELD(their_cq, our_cq, cq_num, cq_num);
    SAME_FIELD(their_cq, our_cq, cqe_num, cqe_num);
    SAME_FIELD(their_cq, our_cq, dbrec, dbrec);
    SAME_FIELD(their_cq, our_cq, cqe_ci, cqe_ci);
    SAME_FIELD(their_cq, our_cq, cqe_mask, cqe_mask);
    SAME_FIELD(their_cq, our_cq, cqe_size, cqe_size);
    SAME_FIELD(their_cq, our_cq, cqe_rsvd, cqe_rsvd);
    SAME_FIELD(their_cq, our_cq, mem_type, mem_type);

    SAME_SIZE(their_qp, our_qp);
    SAME_FIELD(their_qp, our_qp, sq_rsvd_index, sq_rsvd_index);
    SAME_FIELD(their_qp, our_qp, sq_ready_index, sq_ready_index);
    SAME_FIELD(their_qp, our_qp, sq_wqe_pi, sq_wqe_pi);
    SAME_FIELD(their_qp, our_qp, sq_num, sq_num);
    SAME_FIELD(their_qp, our_qp, sq_num_shift8, sq_num_shift8);
    SAME_FIELD(their_qp, our_qp, sq_num_shift8_be, sq_num_shift8_be);
    SAME_FIELD(their_qp, our_qp, sq_num_shift8_be_1ds, sq_num_shift8_be_1ds);
    SAME_FIELD(their_qp, our_qp, sq_num_shift8_be_2ds, sq_num_shift8_be_2ds);
    SAME_FIELD(their_qp, our_qp, sq_num_shift8_be_3ds, sq_num_shift8_be_3ds);
    SAME_FIELD(their_qp, our_qp, sq_num_shift8_be_4ds, sq_num_shift8_be_4ds);
#if NCCL_GIN_GDAKI_VERSION == 200
    SAME_FIELD(their_qp, our_qp, sq_num_shift8_be_5ds, sq_num_shift8_be_5ds);
#endif
    SAME_FIELD(their_qp, our_qp, sq_lock, sq_lock);
    SAME_FIELD(their_qp, our_qp, sq_wqe_num, sq_wqe_num);
    SAME_FIELD(their_qp, our_qp, sq_wqe_mask, sq_wqe_mask);
    SAME_FIELD(their_qp, our_qp, sq_wqe_daddr, sq_wqe_daddr);
    SAME_FIELD(their_qp, our_qp, sq_dbrec, sq_dbrec);
    SAME_FIELD(their_qp, our_qp, sq_db, sq_db);
#if NCCL_GIN_GDAKI_VERSION == 100
    SAME_FIELD(their_qp, our_qp, rq_num, rq_num);
    SAME_FIELD(their_qp, our_qp, rq_wqe_pi, rq_wqe_pi);
    SAME_FIELD(their_qp, our_qp, rq_wqe_num, rq_wqe_num);
    SAME_FIELD(their_qp, our_qp, rq_wqe_mask, rq_wqe_mask);
    SAME_FIELD(their_qp, our_qp, rq_wqe_daddr, rq_wqe_daddr);
    SAME_FIELD(their_qp, our_qp, rq_dbrec, rq_dbrec);
    SAME_FIELD(their_qp, our_qp, rcv_wqe_size, rcv_wqe_size);
    SAME_FIELD(their_qp, our_qp, rq_rsvd_index, rq_rsvd_index);
    SAME_FIELD(their_qp, our_qp, rq_ready_index, rq_ready_index);
    SAME_FIELD(their_qp, our_qp, rq_lock, rq_lock);
    SAME_FIELD(their_qp, our_qp, cq_rq, cq_rq);
#endif
    SAME_FIELD(their_qp, our_qp, cq_sq, cq_sq);
    SAME_FIELD(their_qp, our_qp, nic_handler, nic_handler);
    SAME_FIELD(their_qp, our_qp, mem_type, mem_type);

    SAME_SIZE(their_table, our_table);
    SAME_FIELD(their_table, our_table, buffer, buffer);
    SAME_FIELD(their_table, our_table, rkeys, rkeys);
    SAME_FIELD(their_table, our_table, lkey, lkey);
#if NCCL_GIN_GDAKI_VERSION == 200
    SAME_FIELD(their_table, our_table, offset, offset);
#endif

    SAME_SIZE(their_ctx, our_ctx);
    SAME_FIELD(their_ctx, our_ctx, gdqp, CTX(gdqp));
    SAME_FIELD(their_ctx, our_ctx, companion_gdqp, CTX(companion_gdqp));
    SAME_FIELD(their_ctx, our_ctx, counters_table, CTX(counters_table));
    SAME_FIELD(their_ctx, our_ctx, signals_table, CTX(signals_table));
    SAME_FIELD(their_ctx, our_ctx, sink_buffer_lkey, CTX(sink_buffer_lkey));
#if NCCL_GIN_GDAKI_VERSION == 200
    SAME_FIELD(their_ctx, our_ctx, last_issued_get, last_issued_get);
    SAME_FIELD(their_ctx, our_ctx, last_visible_get, last_visible_get);
#endif

    SAME_SIZE(their_mh, our_mh);
    SAME_FIELD(their_mh, our_mh, rkeys, rkeys);
    SAME_FIELD(their_mh, our_mh, lkey, lkey);

    std::printf("1..%d\n", n_case);
    return n_fail ? 1 : 0;
}
#endif
