/* mlx5_wqe.c: decoding mlx5 send WQEs and encoding mlx5 CQEs (see
 * mlx5_wqe.h for the format).  Everything read from the ring is untrusted:
 * a GPU kernel may have written anything, so every size is checked before
 * it is used and a bad WQE becomes a syndrome, never a crash. */
#include "mlx5_wqe.h"

#include <endian.h>
#include <infiniband/verbs.h>
#include <stdatomic.h>
#include <string.h>

/* Copies n bytes of the ring starting at byte offset off, wrapping. */
static void ring_copy(void *dst, const uint8_t *ring, size_t ring_bytes,
                      size_t off, size_t n)
{
    off &= ring_bytes - 1;
    size_t first = ring_bytes - off < n ? ring_bytes - off : n;
    memcpy(dst, ring + off, first);
    if (first < n)
        memcpy((uint8_t *)dst + first, ring, n - first);
}

static bool opcode_is_rdma(uint8_t op)
{
    return op == MLX5_OPCODE_RDMA_WRITE || op == MLX5_OPCODE_RDMA_WRITE_IMM ||
           op == MLX5_OPCODE_RDMA_READ;
}

static bool opcode_is_atomic(uint8_t op)
{
    return op == MLX5_OPCODE_ATOMIC_FA || op == MLX5_OPCODE_ATOMIC_CS;
}

static bool opcode_supported(uint8_t op)
{
    return op == MLX5_OPCODE_NOP || op == MLX5_SN_OPCODE_WAIT || op == MLX5_SN_OPCODE_DUMP || op == MLX5_OPCODE_SEND ||
           op == MLX5_OPCODE_SEND_IMM || opcode_is_rdma(op) || opcode_is_atomic(op);
}

int mlx5_wqe_decode(const void *sq, uint32_t wqe_cnt, uint16_t idx,
                    uint32_t qpn, uint32_t avail, struct mlx5_sn_op *op)
{
    const uint8_t *ring = sq;
    size_t ring_bytes = (size_t)wqe_cnt * MLX5_SEND_WQE_BB;
    size_t base = (size_t)(idx & (wqe_cnt - 1)) * MLX5_SEND_WQE_BB;
    struct mlx5_wqe_ctrl_seg ctrl;

    memset(op, 0, offsetof(struct mlx5_sn_op, inl));
    op->nbb = 1;
    op->wqe_idx = idx;
    ring_copy(&ctrl, ring, ring_bytes, base, sizeof(ctrl));

    uint32_t opmod_idx_opcode = be32toh(ctrl.opmod_idx_opcode);
    uint32_t qpn_ds = be32toh(ctrl.qpn_ds);
    uint32_t ds = qpn_ds & 0x3f;
    op->opcode = opmod_idx_opcode & 0xff;
    op->fm_ce_se = ctrl.fm_ce_se;
    op->signaled = (ctrl.fm_ce_se & MLX5_WQE_CTRL_CQ_UPDATE) != 0;
    op->imm = ctrl.imm;

    if (ds == 0 || (qpn_ds & 0xc0))
        return MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR;
    op->ds = ds;
    op->nbb = (ds * 16 + MLX5_SEND_WQE_BB - 1) / MLX5_SEND_WQE_BB;
    if (op->nbb > avail || op->nbb > wqe_cnt)
        return MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR;
    if (((opmod_idx_opcode >> 8) & 0xffff) != idx)
        return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
    if ((qpn_ds >> 8) != qpn)
        return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
    if (!opcode_supported(op->opcode))
        return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
    if (op->opcode == MLX5_OPCODE_NOP)
        return 0;

    uint8_t wqe[MLX5_SN_MAX_BBS * MLX5_SEND_WQE_BB];
    size_t bytes = (size_t)ds * 16;
    ring_copy(wqe, ring, ring_bytes, base, bytes);
    if (op->opcode == MLX5_SN_OPCODE_DUMP) {
        struct mlx5_wqe_data_seg d;
        if (ds != 2)
            return MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR;
        memcpy(&d, wqe + sizeof(ctrl), sizeof(d));
        op->len = be32toh(d.byte_count);
        return 0;
    }
    if (op->opcode == MLX5_SN_OPCODE_WAIT) {
        uint32_t w[2];
        if (ds != 2)
            return MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR;
        memcpy(w, wqe + sizeof(ctrl) + 8, sizeof(w));
        op->wait_index = be32toh(w[0]);
        op->wait_cqn = be32toh(w[1]) & 0xffffff;
        return 0;
    }
    size_t off = sizeof(struct mlx5_wqe_ctrl_seg);

    if (opcode_is_rdma(op->opcode) || opcode_is_atomic(op->opcode)) {
        struct mlx5_wqe_raddr_seg r;
        if (off + sizeof(r) > bytes)
            return MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR;
        memcpy(&r, wqe + off, sizeof(r));
        op->raddr = be64toh(r.raddr);
        op->rkey = be32toh(r.rkey);
        off += sizeof(r);
    }
    if (opcode_is_atomic(op->opcode)) {
        struct mlx5_wqe_atomic_seg a;
        if (off + sizeof(a) > bytes)
            return MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR;
        memcpy(&a, wqe + off, sizeof(a));
        op->swap_add = be64toh(a.swap_add);
        op->compare = be64toh(a.compare);
        off += sizeof(a);
    }

    /* Data: one inline segment, or a list of pointer segments. */
    while (off < bytes) {
        uint32_t bc;
        memcpy(&bc, wqe + off, sizeof(bc));
        bc = be32toh(bc);
        if (bc & MLX5_INLINE_SEG) {
            uint32_t n = bc & ~(uint32_t)MLX5_INLINE_SEG;
            if (op->num_sge || op->inl_len || op->opcode == MLX5_OPCODE_RDMA_READ ||
                opcode_is_atomic(op->opcode))
                return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
            if (off + 4 + n > bytes)
                return MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR;
            memcpy(op->inl, wqe + off + 4, n);
            op->inl_len = n;
            op->len = n;
            off += (4 + n + 15) & ~(size_t)15;
            continue;
        }
        struct mlx5_wqe_data_seg d;
        if (off + sizeof(d) > bytes)
            return MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR;
        memcpy(&d, wqe + off, sizeof(d));
        off += sizeof(d);
        if (op->inl_len)
            return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
        uint32_t len = be32toh(d.byte_count);
        if (len == 0)   /* zero-length pointer segment: padding, skipped */
            continue;
        if (op->num_sge == MLX5_SN_MAX_SGE)
            return MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR;
        op->sge[op->num_sge].addr = be64toh(d.addr);
        op->sge[op->num_sge].lkey = be32toh(d.lkey);
        op->sge[op->num_sge].len = len;
        op->num_sge++;
        op->len += len;
    }
    if (op->len > ((uint64_t)1 << 31))
        return MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR;
    /* an atomic's result goes to one 8-byte data segment (libmlx5 always
     * writes 8 there) */
    if (opcode_is_atomic(op->opcode) && (op->num_sge != 1 || op->len != 8))
        return MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR;
    return 0;
}

static void cqe_publish(struct mlx5_cqe64 *cqe, uint8_t op_own)
{
    /* Release: the CQE body is visible before its owner byte. */
    atomic_thread_fence(memory_order_release);
    __atomic_store_n(&cqe->op_own, op_own, __ATOMIC_RELEASE);
}

void mlx5_cqe_write_req(struct mlx5_cqe64 *cqe, uint8_t wqe_opcode, uint32_t qpn,
                        uint16_t wqe_counter, uint32_t byte_cnt, unsigned owner)
{
    memset(cqe, 0, offsetof(struct mlx5_cqe64, op_own));
    cqe->byte_cnt = htobe32(byte_cnt);
    cqe->sop_drop_qpn = htobe32(((uint32_t)wqe_opcode << 24) | (qpn & 0xffffff));
    cqe->wqe_counter = htobe16(wqe_counter);
    cqe_publish(cqe, (uint8_t)((MLX5_CQE_REQ << 4) | (owner & 1)));
}

void mlx5_cqe_write_err(struct mlx5_cqe64 *cqe, uint8_t wqe_opcode, uint32_t qpn,
                        uint16_t wqe_counter, uint8_t syndrome, uint8_t vendor_synd,
                        unsigned owner)
{
    struct mlx5_err_cqe *e = (struct mlx5_err_cqe *)cqe;
    memset(cqe, 0, offsetof(struct mlx5_cqe64, op_own));
    e->syndrome = syndrome;
    e->vendor_err_synd = vendor_synd;
    e->s_wqe_opcode_qpn = htobe32(((uint32_t)wqe_opcode << 24) | (qpn & 0xffffff));
    e->wqe_counter = htobe16(wqe_counter);
    cqe_publish(cqe, (uint8_t)((MLX5_CQE_REQ_ERR << 4) | (owner & 1)));
}

void mlx5_cq_ring_init(struct mlx5_cqe64 *ring, uint32_t cqe_cnt)
{
    memset(ring, 0, (size_t)cqe_cnt * sizeof(*ring));
    for (uint32_t i = 0; i < cqe_cnt; i++)
        ring[i].op_own = (MLX5_CQE_INVALID << 4) | MLX5_CQE_OWNER_MASK;
}

uint8_t mlx5_syndrome_of_wc(int st)
{
    switch (st) {
    case IBV_WC_LOC_LEN_ERR: return MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR;
    case IBV_WC_LOC_QP_OP_ERR: return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
    case IBV_WC_LOC_PROT_ERR: return MLX5_CQE_SYNDROME_LOCAL_PROT_ERR;
    case IBV_WC_WR_FLUSH_ERR: return MLX5_CQE_SYNDROME_WR_FLUSH_ERR;
    case IBV_WC_MW_BIND_ERR: return MLX5_CQE_SYNDROME_MW_BIND_ERR;
    case IBV_WC_BAD_RESP_ERR: return MLX5_CQE_SYNDROME_BAD_RESP_ERR;
    case IBV_WC_LOC_ACCESS_ERR: return MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR;
    case IBV_WC_REM_INV_REQ_ERR: return MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR;
    case IBV_WC_REM_ACCESS_ERR: return MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR;
    case IBV_WC_REM_OP_ERR: return MLX5_CQE_SYNDROME_REMOTE_OP_ERR;
    case IBV_WC_RETRY_EXC_ERR: return MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR;
    case IBV_WC_RNR_RETRY_EXC_ERR: return MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR;
    case IBV_WC_REM_ABORT_ERR: return MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR;
    default: return MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR;
    }
}
