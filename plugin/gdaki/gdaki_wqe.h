/* gdaki_wqe.h: mlx5 send-WQE encoder and CQE decoder, shared by the CUDA
 * kernel, the CPU tests and softnic's mlx5 queue consumer.
 *
 * Contract:
 * - Layouts and constants come from rdma-core's <infiniband/mlx5dv.h>
 *   (struct mlx5_wqe_ctrl_seg, mlx5_wqe_raddr_seg, mlx5_wqe_atomic_seg,
 *   mlx5_wqe_data_seg, mlx5_wqe_inl_data_seg, struct mlx5_cqe64,
 *   struct mlx5_err_cqe, MLX5_OPCODE_*, MLX5_CQE_*, MLX5_WQE_CTRL_*).
 * - Every multi-byte field is written big-endian.  A send WQE is a run of
 *   64-byte basic blocks (MLX5_SEND_WQE_BB); the ctrl segment's ds counts the
 *   16-byte segments of the WQE, the ctrl segment included.
 * - ctrl.opmod_idx_opcode = opmod[31:24] | wqe index[23:8] | opcode[7:0];
 *   ctrl.qpn_ds = qpn[31:8] | ds[7:0]; fm_ce_se carries CQ_UPDATE (0x08),
 *   SOLICITED (0x02) and the fence mode bits.
 * - The encoders write whole segments (reserved bytes zeroed), so a slot may
 *   be reused without clearing it first.
 * - gdaki_wqe_parse / gdaki_cqe_parse validate before they fill a view; they
 *   never read past the bytes the caller says exist. */
#ifndef RAILNET_GDAKI_WQE_H
#define RAILNET_GDAKI_WQE_H

#include <stddef.h>
#include <stdint.h>
#if !defined(__CUDA_ARCH__)
#include <string.h>
#endif

#include <infiniband/mlx5dv.h>

#include "gdaki_port.h"

/* Sizes of the segments, in bytes and in 16-byte "ds" units. */
#define GDAKI_DS_BYTES 16u
#define GDAKI_BB_BYTES ((uint32_t)MLX5_SEND_WQE_BB)
#define GDAKI_DS_PER_BB (GDAKI_BB_BYTES / GDAKI_DS_BYTES)

/* WRITE / WRITE_IMM / READ: ctrl + raddr + one data segment = 3 ds, 1 BB. */
#define GDAKI_DS_RDMA 3u
/* Atomic: ctrl + raddr + atomic + data = 4 ds, 1 BB. */
#define GDAKI_DS_ATOMIC 4u
/* Largest inline payload that still fits one basic block:
 * 64 - ctrl(16) - raddr(16) - inline header(4). */
#define GDAKI_INLINE_MAX_1BB (GDAKI_BB_BYTES - 2 * GDAKI_DS_BYTES - 4u)

/* Index of the consumer counter in a CQ's doorbell record (the arm word is
 * the next one).  mlx5 keeps the low 24 bits of the consumer index there. */
#define GDAKI_CQ_DBR_CI 0
#define GDAKI_CQ_CI_MASK 0xffffffu

/* ------------------------------------------------------------ segments */

GDAKI_FN void gdaki_set_ctrl(struct mlx5_wqe_ctrl_seg *c, uint16_t idx, uint8_t opcode,
                             uint8_t opmod, uint32_t qpn, uint8_t ds, uint8_t fm_ce_se,
                             uint32_t imm_host)
{
    c->opmod_idx_opcode = gdaki_htobe32(((uint32_t)opmod << 24) | ((uint32_t)idx << 8) | opcode);
    c->qpn_ds = gdaki_htobe32((qpn << 8) | ds);
    c->signature = 0;
    c->dci_stream_channel_id = 0;
    c->fm_ce_se = fm_ce_se;
    c->imm = gdaki_htobe32(imm_host);
}

GDAKI_FN void gdaki_set_raddr(struct mlx5_wqe_raddr_seg *r, uint64_t raddr, uint32_t rkey)
{
    r->raddr = gdaki_htobe64(raddr);
    r->rkey = gdaki_htobe32(rkey);
    r->reserved = 0;
}

GDAKI_FN void gdaki_set_data(struct mlx5_wqe_data_seg *d, uint32_t len, uint32_t lkey, uint64_t addr)
{
    d->byte_count = gdaki_htobe32(len);
    d->lkey = gdaki_htobe32(lkey);
    d->addr = gdaki_htobe64(addr);
}

GDAKI_FN void gdaki_set_atomic(struct mlx5_wqe_atomic_seg *a, uint64_t swap_add, uint64_t compare)
{
    a->swap_add = gdaki_htobe64(swap_add);
    a->compare = gdaki_htobe64(compare);
}

/* ------------------------------------------------------- whole WQEs (1 BB) */

/* A WQE of one basic block is built in registers and written to its slot
 * with four 16-byte stores (gdaki_bb_store).  On the GPU the ring is host
 * memory (or GPU memory a NIC reads over PCIe): field by field, every store
 * -- a byte store too -- was a PCIe write of its own, 30-60 of them for a
 * put_signal's two WQEs, and the system fence before the doorbell record
 * waits until all of them are done. */
union gdaki_bb {
    struct {
        struct mlx5_wqe_ctrl_seg ctrl;
        struct mlx5_wqe_raddr_seg raddr;
        union {
            struct {
                struct mlx5_wqe_data_seg data;
                uint64_t tail[2];
            } rdma;
            struct {
                struct mlx5_wqe_atomic_seg atomic;
                struct mlx5_wqe_data_seg data;
            } atomic;
            struct {
                struct mlx5_wqe_inl_data_seg hdr;
                uint8_t data[GDAKI_INLINE_MAX_1BB];
            } inl;
        } u;
    } seg;
    uint64_t q[8];
    uint32_t w[16];
#if defined(__CUDA_ARCH__)
    uint4 v[4];
#endif
} __attribute__((aligned(16)));

#if defined(__cplusplus)
static_assert(sizeof(union gdaki_bb) == 64 && offsetof(union gdaki_bb, seg.u.inl.data) == 36,
              "one basic block, inline data after ctrl, raddr and the inline header");
#else
_Static_assert(sizeof(union gdaki_bb) == 64 && offsetof(union gdaki_bb, seg.u.inl.data) == 36,
               "one basic block, inline data after ctrl, raddr and the inline header");
#endif

GDAKI_FN void gdaki_bb_clear(union gdaki_bb *bb)
{
    for (int i = 0; i < 8; i++)
        bb->q[i] = 0;
}

/* Writes bb to the 64-byte slot (BB-aligned, so 16-byte aligned). */
GDAKI_FN void gdaki_bb_store(void *slot, const union gdaki_bb *bb)
{
#if defined(__CUDA_ARCH__)
    uint4 *d = (uint4 *)slot;
    for (int i = 0; i < 4; i++)
        d[i] = bb->v[i];
#else
    memcpy(slot, bb, sizeof(*bb));
#endif
}

/* Parameters of one RDMA operation as the device API hands them over. */
struct gdaki_op {
    uint64_t laddr;   /* local buffer (source of a write, target of an atomic result) */
    uint32_t lkey;
    uint32_t len;     /* bytes (8 for an atomic) */
    uint64_t raddr;
    uint32_t rkey;
    uint32_t imm;     /* WRITE_IMM immediate, host order */
    uint64_t add;     /* ATOMIC_FA addend */
    uint32_t flags;   /* GDAKI_OP_* */
    uint32_t pad;
};

/* op.flags: GDAKI_OP_INLINE says the posting thread itself can read the
 * len bytes at laddr (GPU memory of its device, or memory mapped for it;
 * laddr is then that virtual address, as ibv_reg_mr registers it).  They
 * are read with plain loads when the WQE is built: bytes another thread,
 * the host or a NIC wrote must already be visible to the poster (the same
 * fence or synchronization its own reads of them would need).
 * A WRITE or WRITE_IMM that goes inline carries them inside its WQE (lkey
 * unused): the NIC takes the payload with the WQE instead of a DMA read of
 * the buffer, and the buffer may be reused as soon as the post returns.
 * How many bytes go inline depends on the scope (railnet_gdaki.h's
 * GDAKI_INLINE_MAX); longer payloads ignore the flag, so lkey must still
 * be valid. */
#define GDAKI_OP_INLINE 0x1u

/* The largest WQE: ds is 6 bits, so 63 units of 16 bytes (16 basic
 * blocks), and the inline payload it holds after ctrl, raddr and the
 * inline header. */
#define GDAKI_WQE_MAX_DS 63u
#define GDAKI_INLINE_BBS_MAX 16u
#define GDAKI_INLINE_MAX_WQE ((GDAKI_WQE_MAX_DS - 2) * GDAKI_DS_BYTES - 4u)

GDAKI_FN int gdaki_op_goes_inline(const struct gdaki_op *op)
{
    return (op->flags & GDAKI_OP_INLINE) && op->len <= GDAKI_INLINE_MAX_1BB;
}

/* The ds (16-byte units) of a WRITE or WRITE_IMM carrying len bytes
 * inline: ctrl, raddr, then the inline header and payload rounded up. */
GDAKI_FN uint32_t gdaki_inline_ds(uint32_t len)
{
    return 2 + (4 + len + GDAKI_DS_BYTES - 1) / GDAKI_DS_BYTES;
}

/* The basic blocks such a WQE takes. */
GDAKI_FN uint32_t gdaki_inline_bbs(uint32_t len)
{
    return (gdaki_inline_ds(len) + GDAKI_DS_PER_BB - 1) / GDAKI_DS_PER_BB;
}

#if defined(__CUDA_ARCH__)
/* Word w of the payload (bytes 4w..4w+3 of s, zero past n), in memory
 * order: one 4-byte load where s is 4-aligned and the word is whole, else
 * byte loads. */
__device__ __forceinline__ uint32_t gdaki_inline_word(const uint8_t *s, uint32_t n, uint32_t w)
{
    uint32_t at = 4 * w;
    if (at + 4 <= n && ((uintptr_t)s & 3) == 0)
        return *(const uint32_t *)(s + at);
    uint32_t v = 0;
    for (uint32_t j = 0; j < 4; j++)
        if (at + j < n)
            v |= (uint32_t)s[at + j] << (8 * j);
    return v;
}

/* words payload words into bb->w[first..first + words), every index a
 * constant once unrolled: the union stays in registers (an index known
 * only at run time would put it in local memory). */
#define GDAKI_INLINE_FILL(bb, first, words, s, n)                             \
    do {                                                                      \
        _Pragma("unroll") for (uint32_t w_ = 0; w_ < (words); w_++)           \
            if (4 * w_ < (n))                                                 \
                (bb)->w[(first) + w_] = gdaki_inline_word((s), (n), w_);      \
    } while (0)
#endif

/* Basic block i of a WRITE or WRITE_IMM carrying len (at most
 * GDAKI_INLINE_MAX_WQE) bytes from src inline, built in bb: the first holds
 * ctrl, raddr, the inline header and 28 bytes, each later one 64 more; the
 * bytes past len are zero.  The WQE's BBs lie in consecutive ring slots (a
 * WQE may wrap past the ring's end), so each is stored on its own. */
GDAKI_FN void gdaki_wqe_inline_bb(union gdaki_bb *bb, uint32_t i, uint8_t opcode, uint16_t idx,
                                  uint32_t qpn, uint8_t fm_ce_se, uint64_t raddr, uint32_t rkey,
                                  uint32_t imm_host, const void *src, uint32_t len)
{
    gdaki_bb_clear(bb);
    uint32_t at = 0, room = GDAKI_INLINE_MAX_1BB;
    if (i == 0) {
        gdaki_set_ctrl(&bb->seg.ctrl, idx, opcode, 0, qpn, (uint8_t)gdaki_inline_ds(len), fm_ce_se,
                       opcode == MLX5_OPCODE_RDMA_WRITE_IMM ? imm_host : 0);
        gdaki_set_raddr(&bb->seg.raddr, raddr, rkey);
        bb->seg.u.inl.hdr.byte_count = gdaki_htobe32(len | MLX5_INLINE_SEG);
    } else {
        at = GDAKI_INLINE_MAX_1BB + (i - 1) * GDAKI_BB_BYTES;
        room = GDAKI_BB_BYTES;
    }
    uint32_t n = len > at ? len - at : 0;
    if (n > room)
        n = room;
    const uint8_t *s = (const uint8_t *)src + at;
#if defined(__CUDA_ARCH__)
    if (i == 0)
        GDAKI_INLINE_FILL(bb, 9, GDAKI_INLINE_MAX_1BB / 4, s, n); /* data at byte 36 */
    else
        GDAKI_INLINE_FILL(bb, 0, GDAKI_BB_BYTES / 4, s, n);
#else
    if (n)
        memcpy(i == 0 ? bb->seg.u.inl.data : (uint8_t *)bb->w, s, n);
#endif
}

/* One-BB WQEs, built in a register union (gdaki_bb_*) and written to a
 * ring slot by the gdaki_wqe_* wrappers.  The queue builds in the union and
 * takes the doorbell value from it (gdaki_q_build): read back from the
 * slot, it would be a load across PCIe on the GPU, about 1 us a put. */

/* WRITE or WRITE_IMM with len <= GDAKI_INLINE_MAX_1BB bytes from src inline:
 * ctrl, raddr, the inline header, the payload zero-padded to the BB's end.
 * Callers check len (gdaki_op_goes_inline); a longer one would be cut. */
GDAKI_FN void gdaki_bb_rdma_inline(union gdaki_bb *bb, uint8_t opcode, uint16_t idx, uint32_t qpn,
                                   uint8_t fm_ce_se, uint64_t raddr, uint32_t rkey, uint32_t imm_host,
                                   const void *src, uint32_t len)
{
    gdaki_wqe_inline_bb(bb, 0, opcode, idx, qpn, fm_ce_se, raddr, rkey, imm_host, src,
                        len < GDAKI_INLINE_MAX_1BB ? len : GDAKI_INLINE_MAX_1BB);
}

/* WRITE, WRITE_IMM or READ with one pointer segment, or inline when op
 * asks for it and fits one BB (gdaki_op_goes_inline). */
GDAKI_FN void gdaki_bb_rdma(union gdaki_bb *bb, uint8_t opcode, uint16_t idx, uint32_t qpn,
                            uint8_t fm_ce_se, const struct gdaki_op *op)
{
    if (opcode != MLX5_OPCODE_RDMA_READ && gdaki_op_goes_inline(op)) {
        gdaki_bb_rdma_inline(bb, opcode, idx, qpn, fm_ce_se, op->raddr, op->rkey, op->imm,
                             (const void *)(uintptr_t)op->laddr, op->len);
        return;
    }
    /* the unused tail is zeroed too: a parser of the reused slot sees no
     * stale segment */
    gdaki_bb_clear(bb);
    gdaki_set_ctrl(&bb->seg.ctrl, idx, opcode, 0, qpn, GDAKI_DS_RDMA, fm_ce_se,
                   opcode == MLX5_OPCODE_RDMA_WRITE_IMM ? op->imm : 0);
    gdaki_set_raddr(&bb->seg.raddr, op->raddr, op->rkey);
    gdaki_set_data(&bb->seg.u.rdma.data, op->len, op->lkey, op->laddr);
}

/* ATOMIC_FA: adds op->add to the 8-byte word at raddr; the old value lands
 * in laddr (8 bytes, lkey). */
GDAKI_FN void gdaki_bb_atomic_fa(union gdaki_bb *bb, uint16_t idx, uint32_t qpn, uint8_t fm_ce_se,
                                 const struct gdaki_op *op)
{
    gdaki_bb_clear(bb);
    gdaki_set_ctrl(&bb->seg.ctrl, idx, MLX5_OPCODE_ATOMIC_FA, 0, qpn, GDAKI_DS_ATOMIC, fm_ce_se, 0);
    gdaki_set_raddr(&bb->seg.raddr, op->raddr, op->rkey);
    gdaki_set_atomic(&bb->seg.u.atomic.atomic, op->add, 0);
    gdaki_set_data(&bb->seg.u.atomic.data, 8, op->lkey, op->laddr);
}

/* NOP: occupies a slot, asks for a completion (used to fence a quiet). */
GDAKI_FN void gdaki_bb_nop(union gdaki_bb *bb, uint16_t idx, uint32_t qpn, uint8_t fm_ce_se)
{
    gdaki_bb_clear(bb);
    gdaki_set_ctrl(&bb->seg.ctrl, idx, MLX5_OPCODE_NOP, 0, qpn, 1, fm_ce_se, 0);
}

/* The same, written into the 64-byte slot wqe; each returns the number of
 * basic blocks used (1). */
GDAKI_FN uint32_t gdaki_wqe_rdma_inline(void *wqe, uint8_t opcode, uint16_t idx, uint32_t qpn,
                                        uint8_t fm_ce_se, uint64_t raddr, uint32_t rkey,
                                        uint32_t imm_host, const void *src, uint32_t len)
{
    union gdaki_bb bb;
    gdaki_bb_rdma_inline(&bb, opcode, idx, qpn, fm_ce_se, raddr, rkey, imm_host, src, len);
    gdaki_bb_store(wqe, &bb);
    return 1;
}

GDAKI_FN uint32_t gdaki_wqe_rdma(void *wqe, uint8_t opcode, uint16_t idx, uint32_t qpn,
                                 uint8_t fm_ce_se, const struct gdaki_op *op)
{
    union gdaki_bb bb;
    gdaki_bb_rdma(&bb, opcode, idx, qpn, fm_ce_se, op);
    gdaki_bb_store(wqe, &bb);
    return 1;
}

GDAKI_FN uint32_t gdaki_wqe_atomic_fa(void *wqe, uint16_t idx, uint32_t qpn, uint8_t fm_ce_se,
                                      const struct gdaki_op *op)
{
    union gdaki_bb bb;
    gdaki_bb_atomic_fa(&bb, idx, qpn, fm_ce_se, op);
    gdaki_bb_store(wqe, &bb);
    return 1;
}

/* WRITE with the payload inline (len <= GDAKI_INLINE_MAX_1BB). */
GDAKI_FN uint32_t gdaki_wqe_write_inline(void *wqe, uint16_t idx, uint32_t qpn, uint8_t fm_ce_se,
                                         uint64_t raddr, uint32_t rkey, const void *src, uint32_t len)
{
    return gdaki_wqe_rdma_inline(wqe, MLX5_OPCODE_RDMA_WRITE, idx, qpn, fm_ce_se, raddr, rkey, 0, src,
                                 len);
}

GDAKI_FN uint32_t gdaki_wqe_nop(void *wqe, uint16_t idx, uint32_t qpn, uint8_t fm_ce_se)
{
    union gdaki_bb bb;
    gdaki_bb_nop(&bb, idx, qpn, fm_ce_se);
    gdaki_bb_store(wqe, &bb);
    return 1;
}

/* ------------------------------------------------------------- WQE parser */

/* What a consumer learns from a send WQE.  Fields the opcode does not carry
 * are zero. */
struct gdaki_wqe_view {
    uint8_t opcode, opmod, ds, fm_ce_se;
    uint16_t idx;
    uint32_t qpn;
    uint32_t imm;        /* host order */
    uint64_t raddr;
    uint32_t rkey;
    int has_data;        /* one pointer data segment */
    uint64_t laddr;
    uint32_t lkey;
    uint32_t len;        /* data segment byte count, or inline length */
    const uint8_t *inl;  /* inline payload (inside the WQE) or NULL */
    uint64_t swap_add, compare;
    uint32_t nbb;        /* basic blocks the WQE spans */
};

/* Parse the WQE at wqe, whose first avail bytes are readable contiguously
 * (a caller handling ring wrap copies the WQE out first).  Accepts NOP,
 * RDMA_WRITE, RDMA_WRITE_IMM, RDMA_READ, ATOMIC_FA and ATOMIC_CS with one
 * data segment or one inline segment.  Returns 0, or -1 for anything
 * malformed (unknown opcode, ds too small or larger than avail, a segment
 * count that does not match the opcode, inline length past the WQE). */
GDAKI_FN int gdaki_wqe_parse(const void *wqe, uint32_t avail, struct gdaki_wqe_view *v)
{
    const uint8_t *p = (const uint8_t *)wqe;
    if (avail < GDAKI_DS_BYTES)
        return -1;
    const struct mlx5_wqe_ctrl_seg *c = (const struct mlx5_wqe_ctrl_seg *)p;
    uint32_t w0 = gdaki_be32toh(c->opmod_idx_opcode);
    uint32_t w1 = gdaki_be32toh(c->qpn_ds);
    struct gdaki_wqe_view z = { 0 };
    *v = z;
    v->opcode = (uint8_t)(w0 & 0xff);
    v->idx = (uint16_t)((w0 >> 8) & 0xffff);
    v->opmod = (uint8_t)(w0 >> 24);
    v->qpn = w1 >> 8;
    v->ds = (uint8_t)(w1 & 0xff);
    v->fm_ce_se = c->fm_ce_se;
    v->imm = gdaki_be32toh(c->imm);
    if (v->ds == 0 || (uint32_t)v->ds * GDAKI_DS_BYTES > avail)
        return -1;
    v->nbb = ((uint32_t)v->ds + GDAKI_DS_PER_BB - 1) / GDAKI_DS_PER_BB;
    if (v->opcode == MLX5_OPCODE_NOP)
        return 0;
    if (v->ds < 2)
        return -1;
    const struct mlx5_wqe_raddr_seg *r = (const struct mlx5_wqe_raddr_seg *)(p + 16);
    v->raddr = gdaki_be64toh(r->raddr);
    v->rkey = gdaki_be32toh(r->rkey);
    const uint8_t *seg = p + 32;
    uint32_t left = (uint32_t)v->ds - 2; /* ds units after ctrl + raddr */
    switch (v->opcode) {
    case MLX5_OPCODE_ATOMIC_FA:
    case MLX5_OPCODE_ATOMIC_CS: {
        if (left != 2)
            return -1;
        const struct mlx5_wqe_atomic_seg *a = (const struct mlx5_wqe_atomic_seg *)seg;
        v->swap_add = gdaki_be64toh(a->swap_add);
        v->compare = gdaki_be64toh(a->compare);
        seg += 16;
        left = 1;
        break;
    }
    case MLX5_OPCODE_RDMA_WRITE:
    case MLX5_OPCODE_RDMA_WRITE_IMM:
    case MLX5_OPCODE_RDMA_READ:
        if (left == 0)
            return -1;
        break;
    default:
        return -1;
    }
    uint32_t bc = gdaki_be32toh(((const struct mlx5_wqe_data_seg *)seg)->byte_count);
    if (bc & MLX5_INLINE_SEG) {
        uint32_t len = bc & ~(uint32_t)MLX5_INLINE_SEG;
        /* Inline data only for writes, and it must fit the ds it declared. */
        if (v->opcode != MLX5_OPCODE_RDMA_WRITE && v->opcode != MLX5_OPCODE_RDMA_WRITE_IMM)
            return -1;
        if (4 + len > left * GDAKI_DS_BYTES)
            return -1;
        v->len = len;
        v->inl = seg + 4;
        return 0;
    }
    if (left != 1)
        return -1; /* exactly one pointer segment is what railnet posts */
    const struct mlx5_wqe_data_seg *d = (const struct mlx5_wqe_data_seg *)seg;
    v->has_data = 1;
    v->len = bc;
    v->lkey = gdaki_be32toh(d->lkey);
    v->laddr = gdaki_be64toh(d->addr);
    if ((v->opcode == MLX5_OPCODE_ATOMIC_FA || v->opcode == MLX5_OPCODE_ATOMIC_CS) && v->len != 8)
        return -1;
    return 0;
}

/* ------------------------------------------------------------------ CQEs */

/* What a poller learns from a CQE. */
struct gdaki_cqe_view {
    uint8_t opcode;       /* MLX5_CQE_REQ, MLX5_CQE_RESP_WR_IMM, MLX5_CQE_REQ_ERR ... */
    uint8_t owner;
    uint16_t wqe_counter; /* index of the WQE this CQE completes */
    uint32_t qpn;
    uint32_t byte_cnt;
    uint32_t imm;         /* host order (RESP_WR_IMM) */
    uint8_t syndrome;     /* error CQEs only */
    uint8_t vendor_err;
};

/* Does the 64-byte CQE belong to software for consumer index ci on a CQ of
 * 2^log_cnt entries?  The NIC flips the owner bit on every pass over the
 * ring; a slot never written holds opcode MLX5_CQE_INVALID. */
GDAKI_FN int gdaki_op_own_is_sw(uint8_t op_own, uint64_t ci, uint32_t log_cnt)
{
    if ((op_own >> 4) == MLX5_CQE_INVALID)
        return 0;
    return (op_own & MLX5_CQE_OWNER_MASK) == ((ci >> log_cnt) & 1);
}

GDAKI_FN int gdaki_cqe_is_sw_owned(const struct mlx5_cqe64 *cqe, uint64_t ci, uint32_t log_cnt)
{
    return gdaki_op_own_is_sw(gdaki_read_volatile8(&cqe->op_own), ci, log_cnt);
}

/* The last 8 bytes of a 64-byte CQE: sop_drop_qpn, wqe_counter, signature
 * and op_own.  Taken in one aligned 8-byte load they are one
 * single-copy-atomic read, so a send-CQ poller gets owner, opcode and WQE
 * counter without a fence between the owner byte and the rest, and can
 * have the loads of several entries in flight at once (over PCIe each
 * dependent read is a round trip of microseconds). */
#define GDAKI_CQE_TAIL_OFFSET 56

GDAKI_FN uint64_t gdaki_cqe_tail_load(const struct mlx5_cqe64 *cqe)
{
    return gdaki_read_volatile64((const uint8_t *)cqe + GDAKI_CQE_TAIL_OFFSET);
}

/* Fills opcode, owner, wqe_counter and qpn of v from a tail word (byte_cnt,
 * imm, syndrome and vendor_err are not in it: 0).  Returns whether the
 * entry belongs to software for consumer index ci on a CQ of 2^log_cnt
 * entries (gdaki_op_own_is_sw). */
GDAKI_FN int gdaki_cqe_tail_parse(uint64_t tail, uint64_t ci, uint32_t log_cnt, struct gdaki_cqe_view *v)
{
    union {
        uint64_t w;
        uint8_t b[8];
    } t;
    t.w = tail;
    /* byte i of the tail is byte 56 + i of the CQE, whatever the host order */
    uint8_t op_own = t.b[7];
    v->opcode = op_own >> 4;
    v->owner = op_own & MLX5_CQE_OWNER_MASK;
    v->wqe_counter = (uint16_t)((t.b[4] << 8) | t.b[5]);
    v->qpn = ((uint32_t)t.b[1] << 16) | ((uint32_t)t.b[2] << 8) | t.b[3];
    v->byte_cnt = 0;
    v->imm = 0;
    v->syndrome = 0;
    v->vendor_err = 0;
    return gdaki_op_own_is_sw(op_own, ci, log_cnt);
}

GDAKI_FN void gdaki_cqe_parse(const struct mlx5_cqe64 *cqe, struct gdaki_cqe_view *v)
{
    uint8_t op_own = cqe->op_own;
    v->opcode = op_own >> 4;
    v->owner = op_own & MLX5_CQE_OWNER_MASK;
    v->wqe_counter = gdaki_be16toh(cqe->wqe_counter);
    v->qpn = gdaki_be32toh(cqe->sop_drop_qpn) & 0xffffff;
    v->byte_cnt = gdaki_be32toh(cqe->byte_cnt);
    v->imm = gdaki_be32toh(cqe->imm_inval_pkey);
    v->syndrome = 0;
    v->vendor_err = 0;
    if (v->opcode == MLX5_CQE_REQ_ERR || v->opcode == MLX5_CQE_RESP_ERR) {
        /* struct mlx5_err_cqe overlays the same 64 bytes; read its bytes
         * by offset rather than through a second struct type. */
        const uint8_t *b = (const uint8_t *)cqe;
        v->syndrome = b[offsetof(struct mlx5_err_cqe, syndrome)];
        v->vendor_err = b[offsetof(struct mlx5_err_cqe, vendor_err_synd)];
    }
}

/* Write a CQE as a NIC does (for the CPU test NIC and softnic).  The
 * op_own byte, which hands the entry to software, is written last, after
 * a fence; the caller publishes nothing else. */
GDAKI_FN void gdaki_cqe_write(struct mlx5_cqe64 *cqe, uint8_t opcode, uint8_t owner,
                              uint16_t wqe_counter, uint32_t qpn, uint32_t byte_cnt,
                              uint32_t imm, uint8_t syndrome, uint8_t vendor_err)
{
    uint8_t *b = (uint8_t *)cqe;
    for (int i = 0; i < 63; i++)
        b[i] = 0;
    cqe->imm_inval_pkey = gdaki_htobe32(imm);
    cqe->byte_cnt = gdaki_htobe32(byte_cnt);
    cqe->sop_drop_qpn = gdaki_htobe32(qpn & 0xffffff);
    cqe->wqe_counter = gdaki_htobe16(wqe_counter);
    if (opcode == MLX5_CQE_REQ_ERR || opcode == MLX5_CQE_RESP_ERR) {
        b[offsetof(struct mlx5_err_cqe, syndrome)] = syndrome;
        b[offsetof(struct mlx5_err_cqe, vendor_err_synd)] = vendor_err;
    }
    /* The CQE body must be visible before the byte that makes it valid. */
    gdaki_fence_system();
    *(volatile uint8_t *)&cqe->op_own = (uint8_t)((opcode << 4) | (owner & 1));
}

/* Error syndromes are MLX5_CQE_SYNDROME_* from mlx5dv.h. */

#endif
