/* mlx5_wqe.h: the mlx5 send-queue and CQE formats as softnic's libmlx5
 * reads and writes them.  Pure functions, no verbs calls: the NIC thread
 * (mlx5_nic.c) and the unit tests both use them.
 *
 * Format facts (all from <infiniband/mlx5dv.h>, every field big-endian):
 * a send WQE is one or more 64-byte basic blocks (BBs); it starts with a
 * struct mlx5_wqe_ctrl_seg whose opmod_idx_opcode holds the WQE counter
 * (16 bits, in BBs) and the opcode, and whose qpn_ds holds the QPN and the
 * WQE size in 16-byte units (ds).  RDMA opcodes follow with a
 * mlx5_wqe_raddr_seg, then data segments (mlx5_wqe_data_seg) or inline
 * segments (byte_count | MLX5_INLINE_SEG, data, padded to 16 bytes).
 * ATOMIC_FA / ATOMIC_CS carry a mlx5_wqe_raddr_seg, a mlx5_wqe_atomic_seg
 * (swap_add, compare) and one 8-byte data segment for the old value.  A
 * WQE that runs past the end of the ring continues at its start.
 * WAIT (opcode 0x0f, 2 segments: ctrl, then {8 reserved bytes, max_index,
 * qpn_cqn}) holds the send queue until the CQ numbered qpn_cqn has written
 * its CQE number max_index (counting from 0); DOCA GPUNetIO's companion QP
 * posts it before the atomic that bumps a GIN counter. */
#ifndef SOFTNIC_MLX5_WQE_H
#define SOFTNIC_MLX5_WQE_H

#include <infiniband/mlx5dv.h>
#include <stdbool.h>
#include <stdint.h>

/* ds is 6 bits: at most 63 16-byte units, so at most 16 BBs. */
#define MLX5_SN_MAX_DS 63
#define MLX5_SN_MAX_BBS 16
#define MLX5_SN_MAX_SGE 16
#define MLX5_SN_MAX_INLINE (MLX5_SN_MAX_DS * 16)
#define MLX5_SN_OPCODE_WAIT 0x0f
/* mlx5's DUMP (ctrl + one data segment naming a local buffer): DOCA
 * GPUNetIO posts one after RDMA READs so that a later completion vouches
 * for the data they landed (NCCL 2.30's GDAKI flush after a get). softnic
 * completes WQEs in order and a READ's data is in place before its
 * completion, so a DUMP is a NOP with a data segment. */
#define MLX5_SN_OPCODE_DUMP 0x23

/* One decoded WQE, ready to be executed. */
struct mlx5_sn_op {
    uint8_t opcode;             /* MLX5_OPCODE_* */
    uint8_t fm_ce_se;
    uint16_t wqe_idx;           /* counter from the ctrl segment */
    uint32_t nbb;               /* BBs the WQE occupies */
    uint32_t ds;                /* its 16-byte units (the ctrl segment's ds) */
    bool signaled;              /* CE asks for a CQE */
    uint32_t imm;               /* as in the WQE (network order) */
    uint64_t raddr;
    uint32_t rkey;
    uint64_t swap_add, compare; /* ATOMIC_FA: add; ATOMIC_CS: swap, compare */
    uint32_t wait_index;        /* WAIT: CQE number to wait for */
    uint32_t wait_cqn;          /* WAIT: the CQ (24 bits) */
    uint64_t len;               /* total payload bytes (atomics: 8) */
    int num_sge;
    struct { uint64_t addr; uint32_t lkey; uint32_t len; } sge[MLX5_SN_MAX_SGE];
    uint32_t inl_len;           /* inline bytes (then num_sge is 0) */
    uint8_t inl[MLX5_SN_MAX_INLINE];
};

/* Decodes the WQE that starts at BB index idx (16-bit counter) of a ring
 * of wqe_cnt BBs (a power of two) at sq.  qpn is the QP's number; avail is
 * how many BBs the doorbell says are posted from idx on.  Returns 0, or an
 * mlx5 CQE syndrome (MLX5_CQE_SYNDROME_*) for a malformed WQE; op->wqe_idx,
 * op->opcode and op->nbb are set whenever they could be read (nbb is 1
 * when ds itself is bad, so the consumer can move on). */
int mlx5_wqe_decode(const void *sq, uint32_t wqe_cnt, uint16_t idx,
                    uint32_t qpn, uint32_t avail, struct mlx5_sn_op *op);

/* Writes a requester CQE for a WQE into cqe (64 bytes) and sets its owner
 * bit last (after a release fence), so a poller never sees half a CQE.
 * owner is (producer index / cqe_cnt) & 1. */
void mlx5_cqe_write_req(struct mlx5_cqe64 *cqe, uint8_t wqe_opcode, uint32_t qpn,
                        uint16_t wqe_counter, uint32_t byte_cnt, unsigned owner);
/* Same for an error CQE (MLX5_CQE_REQ_ERR with syndrome/vendor syndrome). */
void mlx5_cqe_write_err(struct mlx5_cqe64 *cqe, uint8_t wqe_opcode, uint32_t qpn,
                        uint16_t wqe_counter, uint8_t syndrome, uint8_t vendor_synd,
                        unsigned owner);
/* Marks every CQE of a fresh ring invalid (opcode MLX5_CQE_INVALID, owner
 * 1 so that a poller expecting owner 0 on the first pass sees nothing). */
void mlx5_cq_ring_init(struct mlx5_cqe64 *ring, uint32_t cqe_cnt);

/* Maps an ibv_wc_status to the mlx5 syndrome real hardware reports. */
uint8_t mlx5_syndrome_of_wc(int wc_status);

#endif
