/* gdaki_queue.h: slot reservation, in-order doorbell and CQ polling on one
 * mlx5 send queue, shared by many concurrent posters (GPU threads, or CPU
 * threads in the tests).
 *
 * Protocol (counters of struct gdaki_qp_dev, all in basic blocks):
 * 1. reserve: slot = atomic_add(resv, n); then wait until the ring has room
 *    for [slot, slot + n): slot + n - done <= min(2^sq_log, 2^cq_log),
 *    polling the CQ (the CQ bound keeps the NIC from overrunning the CQ).
 * 2. write the n WQEs into their slots (any order, any thread).
 * 3. ring: wait until ready == slot (every earlier slot is doorbelled), then
 *    doorbell record := slot + n, doorbell register := ctrl qword of the last
 *    WQE, ready := slot + n.  Doorbells therefore reach the NIC in slot order
 *    and the producer counter it sees never moves backwards.
 * 4. complete: one poller at a time (poll_lock) consumes CQEs by owner bit,
 *    raises done past the completed WQE (its slot + 1, plus the BBs the
 *    span table says it has beyond the first) and returns the CQEs to the
 *    NIC through the CQ doorbell record.  Only a signaled WQE of several
 *    BBs writes its span entry (before its doorbell); the poller clears it
 *    as it consumes the CQE, before the slot can be reserved again.
 * Every waiter bails out with -1 once err is set: an error CQE moves the QP
 * to the error state and no later slot will ever complete.
 *
 * Deadlock freedom: a poster only waits for earlier slots, and every slot is
 * owned by a running thread that has already reserved it (threads of a warp
 * make progress independently on sm_70 and newer). */
#ifndef RAILNET_GDAKI_QUEUE_H
#define RAILNET_GDAKI_QUEUE_H

#include "railnet_gdaki.h"
#include "gdaki_wqe.h"

#if defined(__cplusplus)
static_assert(GDAKI_INLINE_MAX == GDAKI_INLINE_MAX_WQE, "railnet_gdaki.h's inline limit");
static_assert((GDAKI_WQE_MAX_DS + GDAKI_DS_PER_BB - 1) / GDAKI_DS_PER_BB == GDAKI_INLINE_BBS_MAX,
              "the largest inline WQE's basic blocks");
#else
_Static_assert(GDAKI_INLINE_MAX == GDAKI_INLINE_MAX_WQE, "railnet_gdaki.h's inline limit");
_Static_assert((GDAKI_WQE_MAX_DS + GDAKI_DS_PER_BB - 1) / GDAKI_DS_PER_BB == GDAKI_INLINE_BBS_MAX,
               "the largest inline WQE's basic blocks");
#endif

#define GDAKI_SLOT_ERROR UINT64_MAX
/* CQEs one poller consumes before it hands the lock back. */
#define GDAKI_POLL_BUDGET 64

GDAKI_FN uint32_t gdaki_q_slots(const struct gdaki_qp_dev *q)
{
    return 1u << q->sq_log;
}

/* Slots that may be outstanding (reserved and not yet completed): the ring
 * size, and no more than the CQ holds -- every slot may ask for a CQE, and
 * the NIC must never find the CQ full (real mlx5 reports a CQ overrun and
 * kills the QP; softnic stalls). */
GDAKI_FN uint32_t gdaki_q_window(const struct gdaki_qp_dev *q)
{
    uint32_t sq = gdaki_q_slots(q), cq = 1u << q->cq_log;
    return sq < cq ? sq : cq;
}

GDAKI_FN void *gdaki_q_slot_ptr(const struct gdaki_qp_dev *q, uint64_t slot)
{
    return q->sq + ((slot & (gdaki_q_slots(q) - 1)) << MLX5_SEND_WQE_SHIFT);
}

/* The 16-bit wqe_counter of a CQE names the slot done + ((c - done) mod 2^16):
 * at most 2^sq_log <= 2^15 slots are outstanding, so the distance is exact. */
GDAKI_FN uint64_t gdaki_q_extend_counter(uint64_t done, uint16_t c)
{
    return done + (uint16_t)(c - (uint16_t)done);
}

GDAKI_FN const struct mlx5_cqe64 *gdaki_q_cqe(const struct gdaki_qp_dev *q, uint64_t ci)
{
    const uint8_t *e = q->cq + (ci & ((1u << q->cq_log) - 1)) * q->cqe_size;
    /* With 128-byte CQEs the 64-byte CQE proper is the second half. */
    return (const struct mlx5_cqe64 *)(q->cqe_size == 128 ? e + 64 : e);
}

/* Consume the CQEs that are ready, if no other thread is doing it.
 * Returns the number consumed, or -1 once the QP is in error.
 *
 * Each pass loads the tail words (gdaki_cqe_tail_load) of the next
 * GDAKI_POLL_AHEAD entries together, then consumes them in order up to the
 * first one the NIC has not written: one round trip for up to that many
 * CQEs where an owner read, a fence and a reread of the entry took three
 * each (a kernel consuming a window of 128 CQEs in host memory spent about
 * 10 us per CQE that way).  An entry read ahead before the NIC wrote it
 * fails the owner test and is read again on the next pass. */
#define GDAKI_POLL_AHEAD 8

/* An entry that is not a success: its syndrome lies outside the tail, so
 * the whole entry is read again after the owner byte (the NIC writes
 * op_own last), with volatile loads (on the GPU a plain load may be served
 * from a non-coherent L1 line of an earlier pass).  Sets q->err; -1. */
GDAKI_FN int gdaki_q_record_error(struct gdaki_qp_dev *q, const struct mlx5_cqe64 *cqe)
{
    gdaki_fence_acquire_system();
    union {
        struct mlx5_cqe64 cqe;
        uint64_t w[8];
    } local;
    for (int i = 0; i < 8; i++)
        local.w[i] = gdaki_read_volatile64((const uint64_t *)cqe + i);
    struct gdaki_cqe_view v;
    gdaki_cqe_parse(&local.cqe, &v);
    gdaki_store_release32(&q->err, GDAKI_ERR_WORD(v.opcode, v.vendor_err, v.syndrome));
    return -1;
}

GDAKI_FN int gdaki_q_poll(struct gdaki_qp_dev *q)
{
    if (gdaki_load_acquire32(&q->err))
        return -1;
    if (gdaki_atomic_cas32(&q->poll_lock, 0, 1) != 0)
        return 0;
    uint64_t ci = gdaki_read_volatile64(&q->cq_ci); /* written by the last lock holder */
    uint64_t done = gdaki_load_acquire64(&q->done);
    uint64_t resv = 0; /* read when a completion reaches past it */
    int n = 0, rc = 0;
    for (int more = 1; more && n < GDAKI_POLL_BUDGET;) {
        int fenced = 0; /* once per batch of tails: span loads come after them */
        uint64_t tail[GDAKI_POLL_AHEAD];
        for (int k = 0; k < GDAKI_POLL_AHEAD; k++)
            tail[k] = gdaki_cqe_tail_load(gdaki_q_cqe(q, ci + (uint64_t)k));
        for (int k = 0; k < GDAKI_POLL_AHEAD; k++) {
            struct gdaki_cqe_view v;
            if (n >= GDAKI_POLL_BUDGET || !gdaki_cqe_tail_parse(tail[k], ci, q->cq_log, &v)) {
                more = 0;
                break;
            }
            if (v.opcode != MLX5_CQE_REQ) /* a send CQ sees REQ or REQ_ERR only */
                rc = gdaki_q_record_error(q, gdaki_q_cqe(q, ci));
            ci++;
            n++;
            if (rc) {
                more = 0;
                break;
            }
            uint64_t slot = gdaki_q_extend_counter(done, v.wqe_counter);
            uint64_t end = slot + 1;
            if (q->span) {
                if (!fenced) { /* the span entry was written before the doorbell this CQE answers */
                    gdaki_fence_acquire_device();
                    fenced = 1;
                }
                uint8_t *e = &q->span[slot & (gdaki_q_slots(q) - 1)];
                uint8_t extra = gdaki_read_volatile8(e);
                if (extra) {
                    end += extra;
                    gdaki_write_volatile8(e, 0);
                }
            }
            /* A completion past every reserved slot means the accounting is
             * broken (a stale span entry, a lost CQE): stop the QP with an
             * error rather than let posters overwrite WQEs the NIC has not
             * read. */
            if (end > resv && (resv = gdaki_load_acquire64(&q->resv)) < end) {
                gdaki_store_release32(&q->err, GDAKI_ERR_PROTOCOL);
                rc = -1;
                more = 0;
                break;
            }
            if (end > done)
                done = end;
        }
    }
    if (n) {
        gdaki_write_volatile64(&q->cq_ci, ci);
        /* CQE reads and span clears complete before the new done lets a
         * poster reuse those slots (and their span entries), and before the
         * NIC may overwrite those CQEs. */
        gdaki_fence_system();
        gdaki_atomic_max64(&q->done, done);
        gdaki_write_volatile32(&q->cq_dbrec[GDAKI_CQ_DBR_CI],
                               gdaki_htobe32((uint32_t)(ci & GDAKI_CQ_CI_MASK)));
    }
    gdaki_store_release32(&q->poll_lock, 0);
    return rc ? -1 : n;
}

/* Wait until every slot below target has completed. 0, or -1 on error. */
GDAKI_FN int gdaki_q_wait_done(struct gdaki_qp_dev *q, uint64_t target)
{
    while (gdaki_load_acquire64(&q->done) < target) {
        if (gdaki_q_poll(q) < 0)
            return -1;
        gdaki_cpu_relax();
    }
    return gdaki_load_acquire32(&q->err) ? -1 : 0;
}

/* Step 1: n consecutive slots.  Returns the first slot, or GDAKI_SLOT_ERROR
 * if the QP failed while waiting for room, or if n exceeds the window
 * (such a group could never fit: nothing is reserved then). */
GDAKI_FN uint64_t gdaki_q_reserve(struct gdaki_qp_dev *q, uint32_t n)
{
    uint32_t size = gdaki_q_window(q);
    if (n == 0 || n > size)
        return GDAKI_SLOT_ERROR;
    uint64_t slot = gdaki_atomic_add64(&q->resv, n);
    uint64_t need = slot + n;
    if (need > size && gdaki_q_wait_done(q, need - size) < 0)
        return GDAKI_SLOT_ERROR;
    return slot;
}

/* The 8 bytes the doorbell register takes: the first two words of the ctrl
 * segment as they lie in memory (big-endian opmod_idx_opcode, qpn_ds). */
GDAKI_FN uint64_t gdaki_q_db_value(const void *ctrl)
{
    const struct mlx5_wqe_ctrl_seg *c = (const struct mlx5_wqe_ctrl_seg *)ctrl;
    return (uint64_t)c->opmod_idx_opcode | ((uint64_t)c->qpn_ds << 32);
}

/* Step 3: publish slots [slot, slot + n) whose WQEs the caller (or its
 * group) has written; db_value is gdaki_q_db_value() of the last WQE.
 * Returns 0, or -1 if the QP failed while waiting for its turn. */
GDAKI_FN int gdaki_q_ring(struct gdaki_qp_dev *q, uint64_t slot, uint32_t n, uint64_t db_value)
{
    /* the record's and register's addresses are read before the fences,
     * not behind them */
    uint32_t *dbrec = q->dbrec;
    uint64_t *db = q->db;
    while (gdaki_load_acquire64(&q->ready) != slot) {
        if (gdaki_load_acquire32(&q->err))
            return -1;
        gdaki_cpu_relax();
    }
    /* WQE bytes (written by this thread or its group, ordered to us by the
     * group's barrier) reach memory before the doorbell record says they
     * are there: the NIC may fetch the ring as soon as it sees the record. */
    gdaki_fence_system();
    gdaki_write_volatile32(dbrec, gdaki_htobe32((uint32_t)((slot + n) & 0xffff)));
    /* Doorbell record before the doorbell register: the NIC reads the
     * record when the doorbell arrives. */
    gdaki_fence_system();
    gdaki_write_volatile64(db, db_value);
    /* No system fence here: the next poster's record and doorbell already
     * come after ours.  It acquires ready from this release and then
     * executes its own system fence before its record; fences are
     * cumulative, so our record and doorbell precede its record and
     * doorbell for every observer (and one thread's stores to one address
     * stay in program order).  A third fence cost every post about 1.5 us
     * on an H100 (bench_gdaki's gpu_post: 7.1 us with it, 5.6 without). */
    gdaki_store_release64(&q->ready, slot + n);
    return 0;
}

/* ---- one-thread posting helpers (the thread variant of the device API and
 * the CPU posters of the tests are built from these) ---- */

enum gdaki_kind {
    GDAKI_KIND_WRITE = 0,
    GDAKI_KIND_WRITE_IMM = 1,
    GDAKI_KIND_ATOMIC_FA = 2,
    GDAKI_KIND_NOP = 3,
};

/* Build the WQE of op in slot (CQ_UPDATE when signaled). Returns the
 * doorbell value of that WQE, taken from the registers it was built in. */
GDAKI_FN uint64_t gdaki_q_build(struct gdaki_qp_dev *q, uint64_t slot, int kind,
                                const struct gdaki_op *op, int signaled)
{
    union gdaki_bb bb;
    uint8_t ce = signaled ? (uint8_t)MLX5_WQE_CTRL_CQ_UPDATE : 0;
    uint16_t idx = (uint16_t)slot;
    switch (kind) {
    case GDAKI_KIND_WRITE_IMM:
        gdaki_bb_rdma(&bb, MLX5_OPCODE_RDMA_WRITE_IMM, idx, q->qpn, ce, op);
        break;
    case GDAKI_KIND_ATOMIC_FA:
        gdaki_bb_atomic_fa(&bb, idx, q->qpn, ce, op);
        break;
    case GDAKI_KIND_NOP:
        gdaki_bb_nop(&bb, idx, q->qpn, ce);
        break;
    default:
        gdaki_bb_rdma(&bb, MLX5_OPCODE_RDMA_WRITE, idx, q->qpn, ce, op);
        break;
    }
    gdaki_bb_store(gdaki_q_slot_ptr(q, slot), &bb);
    return gdaki_q_db_value(&bb.seg.ctrl);
}

/* The signal WQE in slot, the last of its group, so it asks for a CQE:
 * SET writes value inline into the 8-byte word at (sig_raddr, sig_rkey);
 * ADD is an ATOMIC_FA of value there, its old value landing in this QP's
 * scratch word for the slot.  Returns its doorbell value. */
GDAKI_FN uint64_t gdaki_q_build_signal(struct gdaki_qp_dev *q, uint64_t slot, uint64_t sig_raddr,
                                       uint32_t sig_rkey, uint64_t value, enum gdaki_signal_op sop)
{
    if (sop == GDAKI_SIGNAL_ADD) {
        struct gdaki_op a = { 0 };
        a.laddr = q->scratch_addr + (slot & 63) * 8;
        a.lkey = q->scratch_lkey;
        a.len = 8;
        a.raddr = sig_raddr;
        a.rkey = sig_rkey;
        a.add = value;
        return gdaki_q_build(q, slot, GDAKI_KIND_ATOMIC_FA, &a, 1);
    }
    union gdaki_bb bb;
    gdaki_bb_rdma_inline(&bb, MLX5_OPCODE_RDMA_WRITE, (uint16_t)slot, q->qpn,
                         (uint8_t)MLX5_WQE_CTRL_CQ_UPDATE, sig_raddr, sig_rkey, 0, &value, 8);
    gdaki_bb_store(gdaki_q_slot_ptr(q, slot), &bb);
    return gdaki_q_db_value(&bb.seg.ctrl);
}

/* Basic blocks the WQE of op takes on q: several only for a WRITE or
 * WRITE_IMM whose payload goes inline past one BB (GDAKI_OP_INLINE, at most
 * GDAKI_INLINE_MAX bytes) in a WQE the device takes (q->max_wqe_ds), and,
 * when it asks for a CQE, only where the poller can learn its size
 * (q->span).  Otherwise one: a payload of at most
 * GDAKI_INLINE_MAX_1BB bytes still goes inline (gdaki_wqe_rdma), a longer
 * one by pointer. */
GDAKI_FN uint32_t gdaki_q_op_bbs(const struct gdaki_qp_dev *q, int kind, const struct gdaki_op *op,
                                 int signaled)
{
    if ((kind != GDAKI_KIND_WRITE && kind != GDAKI_KIND_WRITE_IMM) || !(op->flags & GDAKI_OP_INLINE) ||
        op->len <= GDAKI_INLINE_MAX_1BB || op->len > GDAKI_INLINE_MAX_WQE || (signaled && !q->span))
        return 1;
    uint32_t nbb = gdaki_inline_bbs(op->len);
    return nbb < gdaki_q_window(q) && (!q->max_wqe_ds || gdaki_inline_ds(op->len) <= q->max_wqe_ds) ? nbb : 1;
}

/* The flags to post op with on q now, for a caller that set GDAKI_OP_INLINE
 * by size alone: a payload of more than GDAKI_INLINE_BUSY_MAX bytes keeps
 * the flag only while q has nothing outstanding (every reserved slot seen
 * complete), else it goes by pointer (its lkey must be valid, as for any
 * GDAKI_OP_INLINE op).  One at a time the poster's copy of the payload
 * replaces the NIC's read of it, which lies on the message's path; with
 * WQEs in flight the NIC's reads overlap each other while the poster's
 * copy of a long payload into the ring delays its every next post (a
 * 512-byte put with 8 in flight on an H100 over softnic: 0.070 Mmsg/s
 * inline against 0.085 by pointer; one at a time 47-54 us inline against
 * 58-59 us).  The two counters are read without ordering: a stale view
 * only picks the other, equally valid, encoding. */
GDAKI_FN uint32_t gdaki_q_inline_flags(const struct gdaki_qp_dev *q, const struct gdaki_op *op)
{
    if (!(op->flags & GDAKI_OP_INLINE) || op->len <= GDAKI_INLINE_BUSY_MAX)
        return op->flags;
    if (gdaki_read_volatile64(&q->resv) == gdaki_read_volatile64(&q->done))
        return op->flags;
    return op->flags & ~GDAKI_OP_INLINE;
}

/* Build the WQE of op in nbb slots from slot (nbb from gdaki_q_op_bbs).
 * Returns its doorbell value. */
GDAKI_FN uint64_t gdaki_q_build_bbs(struct gdaki_qp_dev *q, uint64_t slot, int kind,
                                    const struct gdaki_op *op, int signaled, uint32_t nbb)
{
    if (nbb <= 1)
        return gdaki_q_build(q, slot, kind, op, signaled);
    const uint8_t opcode = kind == GDAKI_KIND_WRITE_IMM ? MLX5_OPCODE_RDMA_WRITE_IMM : MLX5_OPCODE_RDMA_WRITE;
    const uint8_t ce = signaled ? (uint8_t)MLX5_WQE_CTRL_CQ_UPDATE : 0;
    uint64_t db = 0;
    for (uint32_t i = 0; i < nbb; i++) {
        union gdaki_bb bb;
        gdaki_wqe_inline_bb(&bb, i, opcode, (uint16_t)slot, q->qpn, ce, op->raddr, op->rkey, op->imm,
                            (const void *)(uintptr_t)op->laddr, op->len);
        if (i == 0)
            db = gdaki_q_db_value(&bb.seg.ctrl);
        gdaki_bb_store(gdaki_q_slot_ptr(q, slot + i), &bb);
    }
    if (signaled) /* published by gdaki_q_ring's fence, cleared by the poller */
        q->span[slot & (gdaki_q_slots(q) - 1)] = (uint8_t)(nbb - 1);
    return db;
}

/* Post one operation; returns the ticket (the slot after its WQE) to wait
 * on, or GDAKI_SLOT_ERROR. */
GDAKI_FN uint64_t gdaki_q_post1(struct gdaki_qp_dev *q, int kind, const struct gdaki_op *op)
{
    uint32_t nbb = gdaki_q_op_bbs(q, kind, op, 1);
    uint64_t slot = gdaki_q_reserve(q, nbb);
    if (slot == GDAKI_SLOT_ERROR)
        return GDAKI_SLOT_ERROR;
    uint64_t db = gdaki_q_build_bbs(q, slot, kind, op, 1, nbb);
    if (gdaki_q_ring(q, slot, nbb, db) < 0)
        return GDAKI_SLOT_ERROR;
    return slot + nbb;
}

/* The WRITE of op (no CQE: it may take several BBs, inline), then its
 * signal WQE (gdaki_q_build_signal), one doorbell for both.  The signal
 * runs after the write on this RC QP, so a receiver that sees it sees the
 * data (see wait_signal): an atomic is ordered behind the write, and the QP
 * places its writes in order (GDAKI_SIGNAL_SET in railnet_gdaki.h; SET
 * works without device atomics, on softnic too).  Returns the ticket, or
 * GDAKI_SLOT_ERROR. */
GDAKI_FN uint64_t gdaki_q_post_with_signal(struct gdaki_qp_dev *q, const struct gdaki_op *op,
                                           uint64_t sig_raddr, uint32_t sig_rkey, uint64_t value,
                                           enum gdaki_signal_op sop)
{
    uint32_t nbb = gdaki_q_op_bbs(q, GDAKI_KIND_WRITE, op, 0);
    uint64_t slot = gdaki_q_reserve(q, nbb + 1);
    if (slot == GDAKI_SLOT_ERROR)
        return GDAKI_SLOT_ERROR;
    gdaki_q_build_bbs(q, slot, GDAKI_KIND_WRITE, op, 0, nbb);
    uint64_t db = gdaki_q_build_signal(q, slot + nbb, sig_raddr, sig_rkey, value, sop);
    if (gdaki_q_ring(q, slot, nbb + 1, db) < 0)
        return GDAKI_SLOT_ERROR;
    return slot + nbb + 1;
}

/* WRITE then ATOMIC_FA of add on the signal word. */
GDAKI_FN uint64_t gdaki_q_post_signal(struct gdaki_qp_dev *q, const struct gdaki_op *op,
                                      uint64_t sig_raddr, uint32_t sig_rkey, uint64_t add)
{
    return gdaki_q_post_with_signal(q, op, sig_raddr, sig_rkey, add, GDAKI_SIGNAL_ADD);
}

/* WRITE then an inline WRITE of value into the signal word. */
GDAKI_FN uint64_t gdaki_q_post_signal_set(struct gdaki_qp_dev *q, const struct gdaki_op *op,
                                          uint64_t sig_raddr, uint32_t sig_rkey, uint64_t value)
{
    return gdaki_q_post_with_signal(q, op, sig_raddr, sig_rkey, value, GDAKI_SIGNAL_SET);
}

/* Wait for every slot reserved so far (this caller's and all earlier ones). */
GDAKI_FN int gdaki_q_quiet(struct gdaki_qp_dev *q)
{
    return gdaki_q_wait_done(q, gdaki_load_acquire64(&q->resv));
}

/* Receiving side: wait until the 8-byte signal word reaches at least value.
 * Returns the value seen. */
GDAKI_FN uint64_t gdaki_wait_signal_ge(const uint64_t *sig, uint64_t value)
{
    uint64_t v;
    while ((v = gdaki_read_volatile64(sig)) < value)
        gdaki_cpu_relax();
    /* The data the signal announces is read after the signal. */
    gdaki_fence_acquire_system();
    return v;
}

#endif
