/* tests/gdaki/test_gdaki_wqe.c: the mlx5 WQE encoder and CQE decoder
 * against byte images written by hand from the field definitions of
 * mlx5dv.h (big-endian fields, ctrl: opmod<<24|idx<<8|opcode, qpn<<8|ds). */
#include <stddef.h>
#include <string.h>

#include "gdaki_wqe.h"
#include "tap.h"

/* The offsets the hand images below rely on, checked against mlx5dv.h. */
_Static_assert(sizeof(struct mlx5_wqe_ctrl_seg) == 16, "ctrl seg is 16 bytes");
_Static_assert(offsetof(struct mlx5_wqe_ctrl_seg, qpn_ds) == 4, "qpn_ds at 4");
_Static_assert(offsetof(struct mlx5_wqe_ctrl_seg, fm_ce_se) == 11, "fm_ce_se at 11");
_Static_assert(offsetof(struct mlx5_wqe_ctrl_seg, imm) == 12, "imm at 12");
_Static_assert(sizeof(struct mlx5_wqe_raddr_seg) == 16, "raddr seg is 16 bytes");
_Static_assert(sizeof(struct mlx5_wqe_data_seg) == 16, "data seg is 16 bytes");
_Static_assert(sizeof(struct mlx5_wqe_atomic_seg) == 16, "atomic seg is 16 bytes");
_Static_assert(sizeof(struct mlx5_cqe64) == 64, "cqe is 64 bytes");
_Static_assert(offsetof(struct mlx5_cqe64, imm_inval_pkey) == 36, "imm at 36");
_Static_assert(offsetof(struct mlx5_cqe64, byte_cnt) == 44, "byte_cnt at 44");
_Static_assert(offsetof(struct mlx5_cqe64, sop_drop_qpn) == 56, "qpn at 56");
_Static_assert(offsetof(struct mlx5_cqe64, wqe_counter) == 60, "wqe_counter at 60");
_Static_assert(offsetof(struct mlx5_cqe64, op_own) == 63, "op_own at 63");
_Static_assert(offsetof(struct mlx5_err_cqe, vendor_err_synd) == 54, "vendor syndrome at 54");
_Static_assert(offsetof(struct mlx5_err_cqe, syndrome) == 55, "syndrome at 55");
_Static_assert(MLX5_OPCODE_RDMA_WRITE == 0x08 && MLX5_OPCODE_RDMA_WRITE_IMM == 0x09 &&
               MLX5_OPCODE_ATOMIC_FA == 0x12 && MLX5_OPCODE_NOP == 0x00, "opcodes");
_Static_assert(MLX5_WQE_CTRL_CQ_UPDATE == 0x08, "CQ_UPDATE is bit 3 of fm_ce_se");
_Static_assert(MLX5_SND_DBR == 1, "send doorbell record is word 1");

static const struct gdaki_op sample_op = {
    .laddr = 0x00007f0012345678ull,
    .lkey = 0x01020304,
    .len = 0x1000,
    .raddr = 0x1122334455667788ull,
    .rkey = 0xdeadbeef,
    .imm = 0xcafef00d,
};

static uint8_t *dirty_slot(uint8_t *slot)
{
    memset(slot, 0xa5, 64); /* the encoder must overwrite every byte */
    return slot;
}

TAP_CASE(test_write_wqe_matches_hand_image)
{
    _Alignas(64) uint8_t w[64];
    static const uint8_t expect[64] = {
        0x00, 0x12, 0x34, 0x08, /* opmod 0, idx 0x1234, opcode WRITE */
        0xab, 0xcd, 0xef, 0x03, /* qpn 0xabcdef, ds 3 */
        0x00, 0x00, 0x00, 0x08, /* signature, stream id, fm_ce_se = CQ_UPDATE */
        0x00, 0x00, 0x00, 0x00, /* imm unused */
        0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, /* raddr */
        0xde, 0xad, 0xbe, 0xef, 0x00, 0x00, 0x00, 0x00, /* rkey, reserved */
        0x00, 0x00, 0x10, 0x00, 0x01, 0x02, 0x03, 0x04, /* byte_count 4096, lkey */
        0x00, 0x00, 0x7f, 0x00, 0x12, 0x34, 0x56, 0x78, /* addr */
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    };
    uint32_t nbb = gdaki_wqe_rdma(dirty_slot(w), MLX5_OPCODE_RDMA_WRITE, 0x1234, 0xabcdef,
                                  MLX5_WQE_CTRL_CQ_UPDATE, &sample_op);
    EXPECT_EQ_INT(1, nbb);
    EXPECT_MEMEQ(expect, w, 64);
}

TAP_CASE(test_write_imm_wqe_carries_big_endian_immediate)
{
    _Alignas(64) uint8_t w[64];
    static const uint8_t expect_ctrl[16] = {
        0x00, 0x00, 0x07, 0x09, /* idx 7, opcode WRITE_IMM */
        0x00, 0x01, 0x02, 0x03, /* qpn 0x000102, ds 3 */
        0x00, 0x00, 0x00, 0x00, /* unsignaled */
        0xca, 0xfe, 0xf0, 0x0d, /* imm */
    };
    gdaki_wqe_rdma(dirty_slot(w), MLX5_OPCODE_RDMA_WRITE_IMM, 7, 0x102, 0, &sample_op);
    EXPECT_MEMEQ(expect_ctrl, w, 16);
}

TAP_CASE(test_atomic_fa_wqe_matches_hand_image)
{
    _Alignas(64) uint8_t w[64];
    struct gdaki_op op = { .laddr = 0x1000, .lkey = 0x55, .len = 8, .raddr = 0x2008,
                           .rkey = 0x66, .add = 0x0102030405060708ull };
    static const uint8_t image[64] = {
        0x00, 0xff, 0xff, 0x12, /* idx 0xffff, opcode ATOMIC_FA */
        0x00, 0x00, 0x09, 0x04, /* qpn 9, ds 4 */
        0x00, 0x00, 0x00, 0x08,
        0x00, 0x00, 0x00, 0x00,
        0, 0, 0, 0, 0, 0, 0x20, 0x08, 0x00, 0x00, 0x00, 0x66, 0, 0, 0, 0, /* raddr, rkey */
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, /* add */
        0, 0, 0, 0, 0, 0, 0, 0,                         /* compare */
        0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x55, /* 8 bytes, lkey */
        0, 0, 0, 0, 0, 0, 0x10, 0x00,                   /* result addr */
    };
    gdaki_wqe_atomic_fa(dirty_slot(w), 0xffff, 9, MLX5_WQE_CTRL_CQ_UPDATE, &op);
    EXPECT_MEMEQ(image, w, 64);
}

TAP_CASE(test_inline_write_wqe_matches_hand_image)
{
    _Alignas(64) uint8_t w[64];
    static const uint8_t image[64] = {
        0x00, 0x00, 0x01, 0x08, 0x00, 0x00, 0x01, 0x03, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0x40, 0, 0, 0, 0x02, 0, 0, 0, 0,
        0x80, 0x00, 0x00, 0x05, 'h', 'e', 'l', 'l', 'o', 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    };
    gdaki_wqe_write_inline(dirty_slot(w), 1, 1, 0, 0x40, 2, "hello", 5);
    EXPECT_MEMEQ(image, w, 64);
}

/* An inline WRITE_IMM of several basic blocks: the first BB holds ctrl
 * (ds counting every 16-byte unit of the WQE), raddr, the inline header and
 * 28 payload bytes, each later BB 64 more, zero past the payload; read back
 * whole, it parses to the payload.  gdaki_inline_bbs at each BB boundary. */
TAP_CASE(test_inline_wqe_of_several_bbs_matches_hand_layout)
{
    EXPECT_EQ_INT(1, gdaki_inline_bbs(1));
    EXPECT_EQ_INT(1, gdaki_inline_bbs(28));
    EXPECT_EQ_INT(2, gdaki_inline_bbs(29));
    EXPECT_EQ_INT(2, gdaki_inline_bbs(92));
    EXPECT_EQ_INT(3, gdaki_inline_bbs(93));
    EXPECT_EQ_INT(4, gdaki_inline_bbs(157));
    EXPECT_EQ_INT(4, gdaki_inline_bbs(220));
    EXPECT_EQ_INT(16, gdaki_inline_bbs(972));
    EXPECT_EQ_INT(972, GDAKI_INLINE_MAX_WQE);  /* ds 63: the 6-bit field's most */
    uint8_t src[GDAKI_INLINE_MAX_WQE];
    for (size_t i = 0; i < sizeof(src); i++)
        src[i] = (uint8_t)(0x41 + i * 7);
    static const uint32_t lens[] = { 29, 100, 220, 512, GDAKI_INLINE_MAX_WQE };
    for (size_t t = 0; t < sizeof(lens) / sizeof(lens[0]); t++) {
        uint32_t len = lens[t], nbb = gdaki_inline_bbs(len);
        _Alignas(64) uint8_t w[16 * 64];
        memset(w, 0xcc, sizeof(w));
        for (uint32_t i = 0; i < nbb; i++) {
            union gdaki_bb bb;
            gdaki_wqe_inline_bb(&bb, i, MLX5_OPCODE_RDMA_WRITE_IMM, 9, 0x123, MLX5_WQE_CTRL_CQ_UPDATE,
                                0x7000, 0x55, 0xa1b2c3d4, src, len);
            memcpy(w + 64 * i, &bb, 64);
        }
        uint32_t ds = 2 + (4 + len + 15) / 16;
        const uint8_t ctrl[16] = { 0x00, 0x00, 0x09, 0x09, 0x00, 0x01, 0x23, (uint8_t)ds, 0, 0, 0,
                                   MLX5_WQE_CTRL_CQ_UPDATE, 0xa1, 0xb2, 0xc3, 0xd4 };
        EXPECT_MEMEQ(ctrl, w, 16);
        const uint8_t hdr[4] = { 0x80, 0x00, (uint8_t)(len >> 8), (uint8_t)len };
        EXPECT_MEMEQ(hdr, w + 32, 4);
        EXPECT_MEMEQ(src, w + 36, len);
        for (uint32_t i = 36 + len; i < 64 * nbb; i++)
            EXPECT_EQ_INT(0, w[i]);
        struct gdaki_wqe_view v;
        EXPECT_EQ_INT(0, gdaki_wqe_parse(w, 64 * nbb, &v));
        EXPECT_EQ_INT(nbb, v.nbb);
        EXPECT_EQ_INT(0, v.has_data);
        EXPECT_EQ_INT(len, v.len);
        EXPECT_MEMEQ(src, v.inl, len);
        EXPECT_EQ_INT(0x7000, (int)v.raddr);
    }
}

/* GDAKI_OP_INLINE: a WRITE_IMM of up to 28 readable bytes carries them in
 * the WQE (ds 2 + 2, the immediate kept, no pointer segment); 29 bytes, or
 * a READ, keep the pointer segment. */
TAP_CASE(test_inline_flag_puts_small_payload_in_the_wqe)
{
    _Alignas(64) uint8_t w[64];
    uint8_t src[GDAKI_INLINE_MAX_1BB + 1];
    for (size_t i = 0; i < sizeof(src); i++)
        src[i] = (uint8_t)(0x30 + i);
    struct gdaki_op op = { .laddr = (uintptr_t)src, .lkey = 0x77, .len = GDAKI_INLINE_MAX_1BB,
                           .raddr = 0x5000, .rkey = 0x99, .imm = 0x01020304, .flags = GDAKI_OP_INLINE };
    EXPECT_EQ_INT(28, GDAKI_INLINE_MAX_1BB);
    EXPECT_EQ_INT(1, gdaki_wqe_rdma(dirty_slot(w), MLX5_OPCODE_RDMA_WRITE_IMM, 3, 4, 0, &op));
    static const uint8_t ctrl[16] = {
        0x00, 0x00, 0x03, 0x09, 0x00, 0x00, 0x04, 0x04, 0, 0, 0, 0, 0x01, 0x02, 0x03, 0x04,
    };
    EXPECT_MEMEQ(ctrl, w, 16);
    static const uint8_t hdr[4] = { 0x80, 0x00, 0x00, 0x1c }; /* MLX5_INLINE_SEG | 28 */
    EXPECT_MEMEQ(hdr, w + 32, 4);
    EXPECT_MEMEQ(src, w + 36, GDAKI_INLINE_MAX_1BB);
    struct gdaki_wqe_view v;
    EXPECT_EQ_INT(0, gdaki_wqe_parse(w, 64, &v));
    EXPECT_EQ_INT(0, v.has_data);
    EXPECT_EQ_INT(GDAKI_INLINE_MAX_1BB, v.len);
    EXPECT_TRUE(v.inl == w + 36);
    EXPECT_EQ_INT(0x01020304, v.imm);

    op.len = 8;
    gdaki_wqe_rdma(dirty_slot(w), MLX5_OPCODE_RDMA_WRITE, 3, 4, 0, &op);
    EXPECT_EQ_INT(0, gdaki_wqe_parse(w, 64, &v));
    EXPECT_EQ_INT(3, v.ds); /* ctrl, raddr, 4 + 8 bytes in one ds */
    EXPECT_EQ_INT(8, v.len);
    EXPECT_MEMEQ(src, v.inl, 8);
    for (int i = 36 + 8; i < 64; i++)
        EXPECT_EQ_INT(0, w[i]); /* the padding is zeroed, not the slot's old bytes */

    op.len = GDAKI_INLINE_MAX_1BB + 1;
    gdaki_wqe_rdma(dirty_slot(w), MLX5_OPCODE_RDMA_WRITE, 3, 4, 0, &op);
    EXPECT_EQ_INT(0, gdaki_wqe_parse(w, 64, &v));
    EXPECT_EQ_INT(1, v.has_data);
    EXPECT_EQ_INT(0x77, v.lkey);
    EXPECT_TRUE(v.laddr == (uintptr_t)src);

    op.len = 8;
    gdaki_wqe_rdma(dirty_slot(w), MLX5_OPCODE_RDMA_READ, 3, 4, 0, &op);
    EXPECT_EQ_INT(0, gdaki_wqe_parse(w, 64, &v));
    EXPECT_EQ_INT(1, v.has_data);
}

TAP_CASE(test_nop_wqe_has_one_ds)
{
    _Alignas(64) uint8_t w[64];
    static const uint8_t image[16] = {
        0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x03, 0x01, 0, 0, 0, 0x08, 0, 0, 0, 0,
    };
    gdaki_wqe_nop(dirty_slot(w), 2, 3, MLX5_WQE_CTRL_CQ_UPDATE);
    EXPECT_MEMEQ(image, w, 16);
}

TAP_CASE(test_parse_reads_back_write_fields)
{
    _Alignas(64) uint8_t w[64];
    gdaki_wqe_rdma(w, MLX5_OPCODE_RDMA_WRITE_IMM, 0x1234, 0xabcdef, MLX5_WQE_CTRL_CQ_UPDATE,
                   &sample_op);
    struct gdaki_wqe_view v;
    EXPECT_EQ_INT(0, gdaki_wqe_parse(w, 64, &v));
    EXPECT_EQ_INT(MLX5_OPCODE_RDMA_WRITE_IMM, v.opcode);
    EXPECT_EQ_INT(0x1234, v.idx);
    EXPECT_EQ_U64(0xabcdef, v.qpn);
    EXPECT_EQ_INT(3, v.ds);
    EXPECT_EQ_INT(1, v.nbb);
    EXPECT_EQ_INT(MLX5_WQE_CTRL_CQ_UPDATE, v.fm_ce_se);
    EXPECT_EQ_U64(0xcafef00d, v.imm);
    EXPECT_EQ_U64(sample_op.raddr, v.raddr);
    EXPECT_EQ_U64(sample_op.rkey, v.rkey);
    EXPECT_EQ_INT(1, v.has_data);
    EXPECT_EQ_U64(sample_op.laddr, v.laddr);
    EXPECT_EQ_U64(sample_op.lkey, v.lkey);
    EXPECT_EQ_U64(sample_op.len, v.len);
}

TAP_CASE(test_parse_reads_back_inline_payload)
{
    _Alignas(64) uint8_t w[64];
    gdaki_wqe_write_inline(w, 1, 1, 0, 0x40, 2, "abcdefghijkl", 12);
    struct gdaki_wqe_view v;
    EXPECT_EQ_INT(0, gdaki_wqe_parse(w, 64, &v));
    EXPECT_EQ_INT(12, v.len);
    EXPECT_TRUE(v.inl == w + 36);
    EXPECT_MEMEQ("abcdefghijkl", v.inl, 12);
    EXPECT_EQ_INT(0, v.has_data);
}

/* Each malformed image is the valid write of sample_op with one field broken. */
static int parse_broken(void (*breakit)(uint8_t *w), uint32_t avail)
{
    _Alignas(64) uint8_t w[64];
    gdaki_wqe_rdma(w, MLX5_OPCODE_RDMA_WRITE, 1, 1, 0, &sample_op);
    breakit(w);
    struct gdaki_wqe_view v;
    return gdaki_wqe_parse(w, avail, &v);
}

static void set_ds0(uint8_t *w) { w[7] = 0; }
static void set_ds2(uint8_t *w) { w[7] = 2; }
static void set_ds5(uint8_t *w) { w[7] = 5; }
static void set_bad_opcode(uint8_t *w) { w[3] = 0x2f; }
static void set_atomic_len16(uint8_t *w)
{
    w[3] = MLX5_OPCODE_ATOMIC_FA;
    w[7] = 4;
    w[48] = 0, w[49] = 0, w[50] = 0, w[51] = 16;
}
static void set_inline_too_long(uint8_t *w)
{
    w[32] = 0x80, w[33] = 0, w[34] = 0, w[35] = 40; /* 40 bytes in one 16-byte ds */
}
static void set_nothing(uint8_t *w) { (void)w; }

TAP_CASE(test_parse_rejects_zero_ds)
{
    EXPECT_EQ_INT(-1, parse_broken(set_ds0, 64));
}

TAP_CASE(test_parse_rejects_write_without_data_segment)
{
    EXPECT_EQ_INT(-1, parse_broken(set_ds2, 64));
}

TAP_CASE(test_parse_rejects_ds_past_available_bytes)
{
    EXPECT_EQ_INT(-1, parse_broken(set_ds5, 64));
    EXPECT_EQ_INT(-1, parse_broken(set_nothing, 47));
    EXPECT_EQ_INT(0, parse_broken(set_nothing, 48));
}

TAP_CASE(test_parse_rejects_unknown_opcode)
{
    EXPECT_EQ_INT(-1, parse_broken(set_bad_opcode, 64));
}

TAP_CASE(test_parse_rejects_atomic_not_8_bytes)
{
    EXPECT_EQ_INT(-1, parse_broken(set_atomic_len16, 64));
}

TAP_CASE(test_parse_rejects_inline_past_its_ds)
{
    EXPECT_EQ_INT(-1, parse_broken(set_inline_too_long, 64));
}

TAP_CASE(test_cqe_decode_of_hand_image)
{
    _Alignas(64) uint8_t c[64] = { 0 };
    c[36] = 0xca, c[37] = 0xfe, c[38] = 0xf0, c[39] = 0x0d;       /* imm */
    c[44] = 0x00, c[45] = 0x00, c[46] = 0x10, c[47] = 0x00;       /* byte_cnt 4096 */
    c[56] = 0x00, c[57] = 0xab, c[58] = 0xcd, c[59] = 0xef;       /* qpn */
    c[60] = 0x12, c[61] = 0x34;                                   /* wqe_counter */
    c[63] = (MLX5_CQE_RESP_WR_IMM << 4) | 1;                      /* opcode 1, owner 1 */
    struct gdaki_cqe_view v;
    gdaki_cqe_parse((const struct mlx5_cqe64 *)c, &v);
    EXPECT_EQ_INT(MLX5_CQE_RESP_WR_IMM, v.opcode);
    EXPECT_EQ_INT(1, v.owner);
    EXPECT_EQ_INT(0x1234, v.wqe_counter);
    EXPECT_EQ_U64(0xabcdef, v.qpn);
    EXPECT_EQ_U64(4096, v.byte_cnt);
    EXPECT_EQ_U64(0xcafef00d, v.imm);
    EXPECT_EQ_INT(0, v.syndrome);
}

TAP_CASE(test_error_cqe_decode_gives_syndrome)
{
    _Alignas(64) uint8_t c[64] = { 0 };
    c[54] = 0x6b;                                  /* vendor syndrome */
    c[55] = MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR;   /* 0x13 */
    c[60] = 0x00, c[61] = 0x05;
    c[63] = MLX5_CQE_REQ_ERR << 4;                 /* 0xd0, owner 0 */
    struct gdaki_cqe_view v;
    gdaki_cqe_parse((const struct mlx5_cqe64 *)c, &v);
    EXPECT_EQ_INT(MLX5_CQE_REQ_ERR, v.opcode);
    EXPECT_EQ_INT(0, v.owner);
    EXPECT_EQ_INT(5, v.wqe_counter);
    EXPECT_EQ_INT(0x13, v.syndrome);
    EXPECT_EQ_INT(0x6b, v.vendor_err);
}

TAP_CASE(test_cqe_write_matches_hand_image)
{
    _Alignas(64) uint8_t c[64];
    memset(c, 0xee, sizeof(c));
    uint8_t expect[64] = { 0 };
    expect[44] = 0x00, expect[45] = 0x00, expect[46] = 0x00, expect[47] = 0x40;
    expect[56] = 0x00, expect[57] = 0x00, expect[58] = 0x01, expect[59] = 0x02;
    expect[60] = 0xff, expect[61] = 0xfe;
    expect[63] = 0x01;
    gdaki_cqe_write((struct mlx5_cqe64 *)c, MLX5_CQE_REQ, 1, 0xfffe, 0x102, 64, 0, 0, 0);
    EXPECT_MEMEQ(expect, c, 64);
}

TAP_CASE(test_cqe_owner_follows_pass_parity)
{
    /* A CQ of 4 entries: pass 0 (ci 0..3) expects owner 0, pass 1 owner 1. */
    struct mlx5_cqe64 e;
    memset(&e, 0, sizeof(e));
    e.op_own = MLX5_CQE_REQ << 4 | 0;
    EXPECT_TRUE(gdaki_cqe_is_sw_owned(&e, 0, 2));
    EXPECT_TRUE(gdaki_cqe_is_sw_owned(&e, 3, 2));
    EXPECT_TRUE(!gdaki_cqe_is_sw_owned(&e, 4, 2));
    EXPECT_TRUE(gdaki_cqe_is_sw_owned(&e, 8, 2));
    e.op_own = MLX5_CQE_REQ << 4 | 1;
    EXPECT_TRUE(!gdaki_cqe_is_sw_owned(&e, 1, 2));
    EXPECT_TRUE(gdaki_cqe_is_sw_owned(&e, 5, 2));
}

TAP_CASE(test_cqe_invalid_opcode_is_never_sw_owned)
{
    struct mlx5_cqe64 e;
    memset(&e, 0, sizeof(e));
    e.op_own = MLX5_CQE_INVALID << 4; /* a slot the NIC has not written yet */
    EXPECT_TRUE(!gdaki_cqe_is_sw_owned(&e, 0, 2));
    e.op_own = MLX5_CQE_INVALID << 4 | 1;
    EXPECT_TRUE(!gdaki_cqe_is_sw_owned(&e, 4, 2));
}

TAP_CASE(test_cqe_tail_word_gives_what_the_full_parse_gives)
{
    /* The tail poller (gdaki_q_poll) reads only the last 8 bytes. */
    EXPECT_EQ_INT(GDAKI_CQE_TAIL_OFFSET, (int)offsetof(struct mlx5_cqe64, sop_drop_qpn));
    EXPECT_EQ_INT(GDAKI_CQE_TAIL_OFFSET + 7, (int)offsetof(struct mlx5_cqe64, op_own));
    const uint16_t counters[] = { 0, 1, 0x1234, 0xfffe, 0xffff };
    for (unsigned i = 0; i < sizeof(counters) / sizeof(counters[0]); i++) {
        for (int owner = 0; owner < 2; owner++) {
            struct mlx5_cqe64 e;
            memset(&e, 0xa5, sizeof(e));
            gdaki_cqe_write(&e, MLX5_CQE_REQ, owner, counters[i], 0xabcdef, 4096, 0, 0, 0);
            struct gdaki_cqe_view full, tail;
            gdaki_cqe_parse(&e, &full);
            uint64_t ci = owner ? 4 : 0;    /* a CQ of 4: pass 1 expects owner 1 */
            EXPECT_TRUE(gdaki_cqe_tail_parse(gdaki_cqe_tail_load(&e), ci, 2, &tail));
            EXPECT_TRUE(!gdaki_cqe_tail_parse(gdaki_cqe_tail_load(&e), ci + 4, 2, &tail));
            EXPECT_EQ_INT(full.opcode, tail.opcode);
            EXPECT_EQ_INT(full.owner, tail.owner);
            EXPECT_EQ_INT(full.wqe_counter, tail.wqe_counter);
            EXPECT_EQ_INT(counters[i], tail.wqe_counter);
            EXPECT_EQ_INT(full.qpn, tail.qpn);
            EXPECT_EQ_INT(0xabcdef, (int)tail.qpn);
        }
    }
    /* an error CQE: opcode in the tail, syndrome left to the caller */
    struct mlx5_cqe64 e;
    memset(&e, 0, sizeof(e));
    gdaki_cqe_write(&e, MLX5_CQE_REQ_ERR, 0, 7, 0x102, 0, 0, MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR, 0x88);
    struct gdaki_cqe_view v;
    EXPECT_TRUE(gdaki_cqe_tail_parse(gdaki_cqe_tail_load(&e), 0, 2, &v));
    EXPECT_EQ_INT(MLX5_CQE_REQ_ERR, v.opcode);
    EXPECT_EQ_INT(7, v.wqe_counter);
    EXPECT_EQ_INT(0, v.syndrome);
    /* never written */
    memset(&e, 0, sizeof(e));
    e.op_own = MLX5_CQE_INVALID << 4;
    EXPECT_TRUE(!gdaki_cqe_tail_parse(gdaki_cqe_tail_load(&e), 0, 2, &v));
}

int main(int argc, char **argv)
{
    return tap_run(argc, argv);
}
