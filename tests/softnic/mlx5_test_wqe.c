/* mlx5_test_wqe.c: softnic's mlx5 WQE decoder and CQE encoder against
 * hand-computed byte images of the mlx5 format (no NIC needed). */
#include <endian.h>
#include <stdlib.h>
#include <string.h>

#include "../tap.h"
#include "mlx5_wqe.h"

#define QPN 0x012345u

static uint8_t ring[8 * 64] __attribute__((aligned(64)));

static void put32(uint8_t *p, uint32_t v) { v = htobe32(v); memcpy(p, &v, 4); }
static void put64(uint8_t *p, uint64_t v) { v = htobe64(v); memcpy(p, &v, 8); }

/* ctrl segment: opmod_idx_opcode, qpn_ds, signature, stream id, fm_ce_se, imm */
static void ctrl_bytes(uint8_t *p, uint16_t idx, uint8_t opcode, uint8_t ds, uint8_t fm_ce_se,
                       uint32_t imm_be_value)
{
    memset(p, 0, 16);
    put32(p, ((uint32_t)idx << 8) | opcode);
    put32(p + 4, (QPN << 8) | ds);
    p[11] = fm_ce_se;
    put32(p + 12, imm_be_value);
}

TAP_CASE(test_decode_rdma_write_with_one_data_segment)
{
    memset(ring, 0, sizeof(ring));
    uint8_t *w = ring + 2 * 64;
    ctrl_bytes(w, 2, 0x08, 3, 0x08, 0);
    put64(w + 16, 0x1122334455667788ull);   /* raddr */
    put32(w + 24, 0xabcdef01u);             /* rkey */
    put32(w + 32, 4096);                    /* byte_count */
    put32(w + 36, 0x00c0ffeeu);             /* lkey */
    put64(w + 40, 0x7f0000001000ull);       /* addr */
    static struct mlx5_sn_op op;
    EXPECT_EQ_INT(0, mlx5_wqe_decode(ring, 8, 2, QPN, 1, &op));
    EXPECT_EQ_INT(MLX5_OPCODE_RDMA_WRITE, op.opcode);
    EXPECT_EQ_INT(1, op.nbb);
    EXPECT_TRUE(op.signaled);
    EXPECT_EQ_U64(0x1122334455667788ull, op.raddr);
    EXPECT_EQ_U64(0xabcdef01u, op.rkey);
    EXPECT_EQ_INT(1, op.num_sge);
    EXPECT_EQ_U64(0x7f0000001000ull, op.sge[0].addr);
    EXPECT_EQ_U64(0x00c0ffeeu, op.sge[0].lkey);
    EXPECT_EQ_INT(4096, op.sge[0].len);
    EXPECT_EQ_INT(4096, op.len);
}

TAP_CASE(test_decode_write_imm_keeps_imm_in_network_order)
{
    memset(ring, 0, sizeof(ring));
    ctrl_bytes(ring, 0, 0x09, 2, 0, 0xdeadbeef);
    static struct mlx5_sn_op op;
    EXPECT_EQ_INT(0, mlx5_wqe_decode(ring, 8, 0, QPN, 1, &op));
    EXPECT_EQ_INT(MLX5_OPCODE_RDMA_WRITE_IMM, op.opcode);
    EXPECT_TRUE(!op.signaled);
    EXPECT_EQ_U64(htobe32(0xdeadbeef), op.imm);
    EXPECT_EQ_INT(0, op.num_sge);
    EXPECT_EQ_INT(0, op.len);
}

TAP_CASE(test_decode_inline_send_spanning_two_bbs)
{
    memset(ring, 0, sizeof(ring));
    /* ctrl(16) + inline hdr(4) + 100 bytes -> 120 -> 8 units (128 B, 2 BBs) */
    ctrl_bytes(ring, 0, 0x0a, 8, 0x08, 0);
    put32(ring + 16, 100u | 0x80000000u);
    for (int i = 0; i < 100; i++)
        ring[20 + i] = (uint8_t)(i * 7);
    static struct mlx5_sn_op op;
    EXPECT_EQ_INT(0, mlx5_wqe_decode(ring, 8, 0, QPN, 2, &op));
    EXPECT_EQ_INT(2, op.nbb);
    EXPECT_EQ_INT(100, op.inl_len);
    EXPECT_MEMEQ(ring + 20, op.inl, 100);
}

TAP_CASE(test_decode_follows_wqe_across_ring_end)
{
    memset(ring, 0, sizeof(ring));
    /* WQE at BB 7 of 8 (counter 15), 2 BBs: its second BB is ring BB 0. */
    uint8_t *w = ring + 7 * 64;
    ctrl_bytes(w, 15, 0x08, 5, 0x08, 0);
    put64(w + 16, 0x1000);
    put32(w + 24, 7);
    put32(w + 32, 10); put32(w + 36, 1); put64(w + 40, 0xa000);
    put32(w + 48, 20); put32(w + 52, 2); put64(w + 56, 0xb000);
    put32(ring + 0, 30); put32(ring + 4, 3); put64(ring + 8, 0xc000);
    static struct mlx5_sn_op op;
    EXPECT_EQ_INT(0, mlx5_wqe_decode(ring, 8, 15, QPN, 2, &op));
    EXPECT_EQ_INT(2, op.nbb);
    EXPECT_EQ_INT(3, op.num_sge);
    EXPECT_EQ_U64(0xc000, op.sge[2].addr);
    EXPECT_EQ_INT(60, op.len);
}

/* ATOMIC_FA (0x12): ctrl, raddr, atomic seg {swap_add, compare}, one
 * 8-byte data segment for the old value: 4 units, 64 bytes, one BB. */
TAP_CASE(test_decode_atomic_fetch_add_byte_image)
{
    memset(ring, 0, sizeof(ring));
    uint8_t *w = ring + 3 * 64;
    ctrl_bytes(w, 3, 0x12, 4, 0x08, 0);
    put64(w + 16, 0x00007f0012345678ull);   /* raddr */
    put32(w + 24, 0x00beef01u);             /* rkey */
    put64(w + 32, 0x0000000100000002ull);   /* swap_add: the addend */
    put64(w + 40, 0xffffffffffffffffull);   /* compare: ignored by FA */
    put32(w + 48, 8);                       /* byte_count */
    put32(w + 52, 0x00c0ffeeu);             /* lkey */
    put64(w + 56, 0x7f0000002000ull);       /* addr of the result */
    static struct mlx5_sn_op op;
    EXPECT_EQ_INT(0, mlx5_wqe_decode(ring, 8, 3, QPN, 1, &op));
    EXPECT_EQ_INT(MLX5_OPCODE_ATOMIC_FA, op.opcode);
    EXPECT_EQ_INT(1, op.nbb);
    EXPECT_TRUE(op.signaled);
    EXPECT_EQ_U64(0x00007f0012345678ull, op.raddr);
    EXPECT_EQ_U64(0x00beef01u, op.rkey);
    EXPECT_EQ_U64(0x0000000100000002ull, op.swap_add);
    EXPECT_EQ_INT(1, op.num_sge);
    EXPECT_EQ_U64(0x7f0000002000ull, op.sge[0].addr);
    EXPECT_EQ_U64(0x00c0ffeeu, op.sge[0].lkey);
    EXPECT_EQ_INT(8, op.sge[0].len);
    EXPECT_EQ_INT(8, op.len);
}

/* ATOMIC_CS (0x11), placed at the last BB so nothing wraps: swap in
 * swap_add, the compared value in compare. */
TAP_CASE(test_decode_atomic_cmp_swap_byte_image)
{
    memset(ring, 0, sizeof(ring));
    uint8_t *w = ring + 7 * 64;
    ctrl_bytes(w, 15, 0x11, 4, 0x00, 0);
    put64(w + 16, 0x1000);
    put32(w + 24, 7);
    put64(w + 32, 0xaaaaaaaabbbbbbbbull);   /* swap */
    put64(w + 40, 0x0123456789abcdefull);   /* compare */
    put32(w + 48, 8);
    put32(w + 52, 9);
    put64(w + 56, 0x3000);
    static struct mlx5_sn_op op;
    EXPECT_EQ_INT(0, mlx5_wqe_decode(ring, 8, 15, QPN, 1, &op));
    EXPECT_EQ_INT(MLX5_OPCODE_ATOMIC_CS, op.opcode);
    EXPECT_TRUE(!op.signaled);
    EXPECT_EQ_U64(0x1000, op.raddr);
    EXPECT_EQ_U64(0xaaaaaaaabbbbbbbbull, op.swap_add);
    EXPECT_EQ_U64(0x0123456789abcdefull, op.compare);
    EXPECT_EQ_U64(0x3000, op.sge[0].addr);
    EXPECT_EQ_INT(8, op.len);
}

TAP_CASE(test_decode_rejects_atomics_without_one_8_byte_result)
{
    static struct mlx5_sn_op op;
    memset(ring, 0, sizeof(ring));
    /* no atomic segment: ds 2 (ctrl + raddr) */
    ctrl_bytes(ring, 0, 0x12, 2, 0x08, 0);
    EXPECT_EQ_INT(MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR, mlx5_wqe_decode(ring, 8, 0, QPN, 1, &op));
    /* no data segment: ds 3 */
    ctrl_bytes(ring, 0, 0x12, 3, 0x08, 0);
    EXPECT_EQ_INT(MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR, mlx5_wqe_decode(ring, 8, 0, QPN, 1, &op));
    /* a 16-byte result */
    ctrl_bytes(ring, 0, 0x11, 4, 0x08, 0);
    put32(ring + 48, 16);
    put32(ring + 52, 1);
    EXPECT_EQ_INT(MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR, mlx5_wqe_decode(ring, 8, 0, QPN, 1, &op));
    /* two 8-byte results */
    ctrl_bytes(ring, 0, 0x12, 5, 0x08, 0);
    put32(ring + 48, 8);
    put32(ring + 64, 8);
    EXPECT_EQ_INT(MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR, mlx5_wqe_decode(ring, 8, 0, QPN, 2, &op));
    /* an inline result */
    ctrl_bytes(ring, 0, 0x12, 5, 0x08, 0);
    put32(ring + 48, 8u | 0x80000000u);
    EXPECT_EQ_INT(MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR, mlx5_wqe_decode(ring, 8, 0, QPN, 2, &op));
}

TAP_CASE(test_decode_rejects_unknown_opcode)
{
    memset(ring, 0, sizeof(ring));
    ctrl_bytes(ring, 0, 0x3e, 1, 0x08, 0);
    static struct mlx5_sn_op op;
    EXPECT_EQ_INT(MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR, mlx5_wqe_decode(ring, 8, 0, QPN, 1, &op));
    EXPECT_EQ_INT(0x3e, op.opcode);
    EXPECT_EQ_INT(1, op.nbb);
}

TAP_CASE(test_decode_wait_on_cq_byte_image)
{
    /* DOCA GPUNetIO's companion-QP WAIT: ctrl (ds 2), 8 reserved bytes,
     * max_index, qpn_cqn. */
    memset(ring, 0, sizeof(ring));
    uint8_t *w = ring + 1 * 64;
    ctrl_bytes(w, 1, 0x0f, 2, 0x08, 0);
    put32(w + 24, 0x00012345u);     /* max_index */
    put32(w + 28, 0x00000412u);     /* cqn */
    static struct mlx5_sn_op op;
    EXPECT_EQ_INT(0, mlx5_wqe_decode(ring, 8, 1, QPN, 1, &op));
    EXPECT_EQ_INT(MLX5_SN_OPCODE_WAIT, op.opcode);
    EXPECT_EQ_INT(1, op.nbb);
    EXPECT_TRUE(op.signaled);
    EXPECT_EQ_INT(0x12345, (int)op.wait_index);
    EXPECT_EQ_INT(0x412, (int)op.wait_cqn);
    ctrl_bytes(w, 1, 0x0f, 3, 0x08, 0);     /* a WAIT is exactly two segments */
    EXPECT_EQ_INT(MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR, mlx5_wqe_decode(ring, 8, 1, QPN, 1, &op));
}

TAP_CASE(test_decode_dump_byte_image)
{
    /* DOCA GPUNetIO's DUMP after a get: ctrl (opcode 0x23, ds 2), one data
     * segment naming a local buffer. */
    memset(ring, 0, sizeof(ring));
    uint8_t *w = ring + 3 * 64;
    ctrl_bytes(w, 3, 0x23, 2, 0x08, 0);
    put32(w + 16, 1);                       /* byte_count */
    put32(w + 20, 0x00c0ffeeu);             /* lkey */
    put64(w + 24, 0x7f0000002000ull);       /* addr */
    static struct mlx5_sn_op op;
    EXPECT_EQ_INT(0, mlx5_wqe_decode(ring, 8, 3, QPN, 1, &op));
    EXPECT_EQ_INT(MLX5_SN_OPCODE_DUMP, op.opcode);
    EXPECT_EQ_INT(1, op.nbb);
    EXPECT_TRUE(op.signaled);
    EXPECT_EQ_INT(1, (int)op.len);
    EXPECT_EQ_INT(0, op.num_sge);           /* nothing for the engine to move */
    ctrl_bytes(w, 3, 0x23, 1, 0x08, 0);     /* a DUMP without its data segment */
    EXPECT_EQ_INT(MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR, mlx5_wqe_decode(ring, 8, 3, QPN, 1, &op));
}

TAP_CASE(test_decode_rejects_zero_ds)
{
    memset(ring, 0, sizeof(ring));
    ctrl_bytes(ring, 0, 0x08, 0, 0x08, 0);
    static struct mlx5_sn_op op;
    EXPECT_EQ_INT(MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR, mlx5_wqe_decode(ring, 8, 0, QPN, 1, &op));
}

TAP_CASE(test_decode_rejects_ds_beyond_doorbell)
{
    memset(ring, 0, sizeof(ring));
    ctrl_bytes(ring, 0, 0x08, 6, 0x08, 0);  /* 96 bytes = 2 BBs, only 1 posted */
    static struct mlx5_sn_op op;
    EXPECT_EQ_INT(MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR, mlx5_wqe_decode(ring, 8, 0, QPN, 1, &op));
}

TAP_CASE(test_decode_rejects_wrong_wqe_counter)
{
    memset(ring, 0, sizeof(ring));
    ctrl_bytes(ring, 5, 0x08, 2, 0x08, 0);
    static struct mlx5_sn_op op;
    EXPECT_EQ_INT(MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR, mlx5_wqe_decode(ring, 8, 0, QPN, 1, &op));
}

TAP_CASE(test_decode_rejects_wrong_qpn)
{
    memset(ring, 0, sizeof(ring));
    ctrl_bytes(ring, 0, 0x08, 2, 0x08, 0);
    static struct mlx5_sn_op op;
    EXPECT_EQ_INT(MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR, mlx5_wqe_decode(ring, 8, 0, QPN + 1, 1, &op));
}

TAP_CASE(test_decode_rejects_inline_length_past_wqe)
{
    memset(ring, 0, sizeof(ring));
    ctrl_bytes(ring, 0, 0x0a, 2, 0x08, 0);
    put32(ring + 16, 500u | 0x80000000u);
    static struct mlx5_sn_op op;
    EXPECT_EQ_INT(MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR, mlx5_wqe_decode(ring, 8, 0, QPN, 1, &op));
}

TAP_CASE(test_decode_rejects_truncated_raddr_segment)
{
    memset(ring, 0, sizeof(ring));
    ctrl_bytes(ring, 0, 0x10, 1, 0x08, 0);  /* READ with no raddr */
    static struct mlx5_sn_op op;
    EXPECT_EQ_INT(MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR, mlx5_wqe_decode(ring, 8, 0, QPN, 1, &op));
}

TAP_CASE(test_decode_survives_random_bytes)
{
    /* Garbage never crashes the decoder and always names a BB count. */
    srand(7);
    static struct mlx5_sn_op op;
    for (int iter = 0; iter < 20000; iter++) {
        for (size_t i = 0; i < sizeof(ring); i++)
            ring[i] = (uint8_t)rand();
        uint16_t idx = (uint16_t)rand();
        int rc = mlx5_wqe_decode(ring, 8, idx, QPN, 1 + (uint32_t)(rand() % 8), &op);
        EXPECT_TRUE(op.nbb >= 1 && op.nbb <= 16);
        EXPECT_TRUE(rc == 0 || rc == MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR ||
                    rc == MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR);
    }
}

TAP_CASE(test_cqe_req_byte_image)
{
    uint8_t img[64];
    memset(img, 0x5a, sizeof(img));
    mlx5_cqe_write_req((struct mlx5_cqe64 *)img, 0x08, QPN, 0x1234, 4096, 1);
    uint8_t want[64] = { 0 };
    put32(want + 44, 4096);                  /* byte_cnt */
    put32(want + 56, (0x08u << 24) | QPN);   /* sop_drop_qpn */
    want[60] = 0x12; want[61] = 0x34;        /* wqe_counter */
    want[63] = (MLX5_CQE_REQ << 4) | 1;      /* op_own */
    EXPECT_MEMEQ(want, img, 64);
}

TAP_CASE(test_cqe_error_byte_image)
{
    uint8_t img[64];
    memset(img, 0x5a, sizeof(img));
    mlx5_cqe_write_err((struct mlx5_cqe64 *)img, 0x09, QPN, 0x00ff,
                       MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR, 0x77, 0);
    uint8_t want[64] = { 0 };
    want[54] = 0x77;                         /* vendor_err_synd */
    want[55] = MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR;
    put32(want + 56, (0x09u << 24) | QPN);
    want[60] = 0x00; want[61] = 0xff;
    want[63] = MLX5_CQE_REQ_ERR << 4;
    EXPECT_MEMEQ(want, img, 64);
}

TAP_CASE(test_fresh_cq_ring_is_invalid_for_both_poller_styles)
{
    static struct mlx5_cqe64 cq[4];
    mlx5_cq_ring_init(cq, 4);
    for (int i = 0; i < 4; i++) {
        EXPECT_EQ_INT(MLX5_CQE_INVALID, cq[i].op_own >> 4);
        EXPECT_EQ_INT(1, cq[i].op_own & 1);  /* first pass expects owner 0 */
    }
}

TAP_CASE(test_wc_status_maps_to_mlx5_syndrome)
{
    EXPECT_EQ_INT(0x13, mlx5_syndrome_of_wc(IBV_WC_REM_ACCESS_ERR));
    EXPECT_EQ_INT(0x04, mlx5_syndrome_of_wc(IBV_WC_LOC_PROT_ERR));
    EXPECT_EQ_INT(0x05, mlx5_syndrome_of_wc(IBV_WC_WR_FLUSH_ERR));
    EXPECT_EQ_INT(0x15, mlx5_syndrome_of_wc(IBV_WC_RETRY_EXC_ERR));
    EXPECT_EQ_INT(0x16, mlx5_syndrome_of_wc(IBV_WC_RNR_RETRY_EXC_ERR));
}

int main(int argc, char **argv)
{
    return tap_run(argc, argv);
}
