/* gdaki_device.cuh: the device API of the GPU-initiated path -- a CUDA
 * kernel posts RDMA writes on an mlx5 send queue itself (IBGDA style).
 *
 * Contract:
 * - q is the device pointer from gdaki_pair_qp_device() (or a railnet comm's
 *   equivalent); every thread of every block may use it at once.
 * - op addresses are NIC addresses (the registered buffers' addr), keys come
 *   from gdaki_pair_reg(); op->len <= 2^31.
 * - Three scopes.  _thread: the calling thread alone posts its op.  _warp:
 *   every thread of the warp calls (converged, same q); each lane passes its
 *   own op and active=0 when it has none; one reservation and one doorbell
 *   for the warp.  _block: every thread of the (1-, 2- or 3-D) block calls;
 *   one reservation and one doorbell for the block.
 * - GDAKI_OP_INLINE in op->flags (gdaki_wqe.h): a thread's put, put_imm or
 *   put_signal carries up to GDAKI_INLINE_MAX bytes inside its WQE (up to
 *   16 basic blocks, within the device's largest WQE, q->max_wqe_ds); the
 *   warp and block scopes up to GDAKI_INLINE_MAX_1BB.  A kernel may pass
 *   op->flags through gdaki_q_inline_flags to inline long payloads only on
 *   an idle QP.
 * - put returns a ticket (the slot counter after the posted WQEs): quiet on
 *   that scope returns once every WQE up to its ticket has completed, i.e.
 *   the data is at the target and the source may be reused.  quiet returns
 *   0, or -1 once the QP is in error (an error CQE: q->err holds opcode and
 *   syndrome, see railnet_gdaki.h); posting after an error returns
 *   GDAKI_SLOT_ERROR.
 * - put_signal: the data write(s), then an update of the 8-byte signal word
 *   at (sig_raddr, sig_rkey), on the same QP, so a receiver that sees the
 *   signal sees the data.  SET writes value (works everywhere); ADD adds it
 *   atomically (needs device atomics: refused with GDAKI_SLOT_ERROR when the
 *   QP's flags say GDAKI_QP_FLAG_NO_ATOMICS: atomic_cap NONE).  In the warp
 *   and block scopes there is one signal, after all the group's writes,
 *   with the leader's (lane 0 / thread 0) signal arguments.
 * - wait_signal on the receiving side spins until the word reaches value
 *   (>=), then orders the caller's later reads after it.
 * - A kernel that posts must not wait on anything that waits for it.  On
 *   softnic, GPU-memory payloads move by synchronous CUDA driver copies on
 *   the legacy default stream: launch posting kernels on a stream created
 *   with cudaStreamNonBlocking, or quiet never returns.
 *
 * Ordering (why each fence is where it is) lives in gdaki_queue.h; the
 * group variants add one rule: the group's barrier (__syncwarp /
 * __syncthreads, which order memory among the group's threads) comes
 * between every thread's WQE stores and the leader's system-scope fence in
 * gdaki_q_ring, so the fence, being cumulative, publishes all of them to
 * the NIC before the doorbell record. */
#ifndef RAILNET_GDAKI_DEVICE_CUH
#define RAILNET_GDAKI_DEVICE_CUH

#include "gdaki_queue.h"
#include "railnet_gdaki.h"

#define GDAKI_FULL_MASK 0xffffffffu

/* ---------------------------------------------------------- internals */

__device__ __forceinline__ unsigned gdaki_lane_id(void)
{
    unsigned l;
    asm volatile("mov.u32 %0, %%laneid;" : "=r"(l));
    return l;
}

/* The GPU's global nanosecond clock (%globaltimer), the same on every SM:
 * what the benches time a kernel's posts and quiets with. */
__device__ __forceinline__ uint64_t gdaki_now_ns(void)
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ unsigned gdaki_block_tid(void)
{
    return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}

__device__ __forceinline__ unsigned gdaki_block_size(void)
{
    return blockDim.x * blockDim.y * blockDim.z;
}

__device__ __forceinline__ int gdaki_signal_refused(const struct gdaki_qp_dev *q,
                                                    enum gdaki_signal_op sop)
{
    return sop == GDAKI_SIGNAL_ADD && (q->flags & GDAKI_QP_FLAG_NO_ATOMICS);
}

/* ------------------------------------------------------------- thread */

__device__ __forceinline__ uint64_t gdaki_put_thread(struct gdaki_qp_dev *q, const struct gdaki_op *op)
{
    return gdaki_q_post1(q, GDAKI_KIND_WRITE, op);
}

/* WRITE_WITH_IMM: the receiver's QP consumes a posted receive and gets imm. */
__device__ __forceinline__ uint64_t gdaki_put_imm_thread(struct gdaki_qp_dev *q, const struct gdaki_op *op)
{
    return gdaki_q_post1(q, GDAKI_KIND_WRITE_IMM, op);
}

__device__ __forceinline__ uint64_t gdaki_put_signal_thread(struct gdaki_qp_dev *q, const struct gdaki_op *op,
                                                            uint64_t sig_raddr, uint32_t sig_rkey,
                                                            uint64_t value, enum gdaki_signal_op sop)
{
    if (gdaki_signal_refused(q, sop))
        return GDAKI_SLOT_ERROR;
    return gdaki_q_post_with_signal(q, op, sig_raddr, sig_rkey, value, sop);
}

/* Wait for every WQE up to ticket (0: everything reserved so far). */
__device__ __forceinline__ int gdaki_quiet_thread(struct gdaki_qp_dev *q, uint64_t ticket)
{
    if (ticket == GDAKI_SLOT_ERROR)
        return -1;
    return ticket ? gdaki_q_wait_done(q, ticket) : gdaki_q_quiet(q);
}

/* --------------------------------------------------------------- warp */

/* One reservation for the warp's n active lanes (+1 for a signal), WQEs
 * written by their own lanes, one doorbell from the leader. */
__device__ __forceinline__ uint64_t gdaki_post_warp(struct gdaki_qp_dev *q, const struct gdaki_op *op,
                                                    int active, int with_signal, uint64_t sig_raddr,
                                                    uint32_t sig_rkey, uint64_t value,
                                                    enum gdaki_signal_op sop)
{
    const unsigned mask = __activemask();
    const unsigned lane = gdaki_lane_id();
    const unsigned want = __ballot_sync(mask, active);
    const unsigned leader = __ffs(mask) - 1;
    const uint32_t n = __popc(want);
    const uint32_t total = n + (with_signal ? 1 : 0);
    if (total == 0)
        return 0;
    uint64_t base = 0;
    if (lane == leader)
        base = (with_signal && gdaki_signal_refused(q, sop)) ? GDAKI_SLOT_ERROR : gdaki_q_reserve(q, total);
    base = __shfl_sync(mask, base, leader);
    if (base == GDAKI_SLOT_ERROR)
        return GDAKI_SLOT_ERROR;
    const uint32_t rank = __popc(want & ((1u << lane) - 1));
    uint64_t db = 0;
    if (active) /* only the group's last WQE asks for a CQE: it completes all */
        db = gdaki_q_build(q, base + rank, GDAKI_KIND_WRITE, op, !with_signal && rank == n - 1);
    if (with_signal && lane == leader)
        db = gdaki_q_build_signal(q, base + n, sig_raddr, sig_rkey, value, sop);
    /* The doorbell carries the ctrl qword of the last WQE. */
    const unsigned last_lane = with_signal ? leader : 31 - __clz(want);
    db = __shfl_sync(mask, db, last_lane);
    /* Every lane's WQE stores before the leader's doorbell (see top). */
    __syncwarp(mask);
    int rc = 0;
    if (lane == leader)
        rc = gdaki_q_ring(q, base, total, db);
    rc = __shfl_sync(mask, rc, leader);
    return rc ? GDAKI_SLOT_ERROR : base + total;
}

__device__ __forceinline__ uint64_t gdaki_put_warp(struct gdaki_qp_dev *q, const struct gdaki_op *op, int active)
{
    return gdaki_post_warp(q, op, active, 0, 0, 0, 0, GDAKI_SIGNAL_SET);
}

__device__ __forceinline__ uint64_t gdaki_put_signal_warp(struct gdaki_qp_dev *q, const struct gdaki_op *op,
                                                          int active, uint64_t sig_raddr, uint32_t sig_rkey,
                                                          uint64_t value, enum gdaki_signal_op sop)
{
    return gdaki_post_warp(q, op, active, 1, sig_raddr, sig_rkey, value, sop);
}

__device__ __forceinline__ int gdaki_quiet_warp(struct gdaki_qp_dev *q, uint64_t ticket)
{
    const unsigned mask = __activemask();
    const unsigned leader = __ffs(mask) - 1;
    int rc = 0;
    if (gdaki_lane_id() == leader)
        rc = gdaki_quiet_thread(q, ticket);
    return __shfl_sync(mask, rc, leader);
}

/* -------------------------------------------------------------- block */

__device__ __forceinline__ uint64_t gdaki_post_block(struct gdaki_qp_dev *q, const struct gdaki_op *op,
                                                     int active, int with_signal, uint64_t sig_raddr,
                                                     uint32_t sig_rkey, uint64_t value,
                                                     enum gdaki_signal_op sop)
{
    __shared__ uint32_t warp_count[32];
    __shared__ uint64_t s_base, s_db;
    __shared__ int s_rc;
    const unsigned tid = gdaki_block_tid();
    const unsigned lane = tid & 31, warp = tid >> 5;
    const unsigned nwarps = (gdaki_block_size() + 31) >> 5;
    const unsigned want = __ballot_sync(__activemask(), active);
    if (lane == 0)
        warp_count[warp] = __popc(want);
    __syncthreads();
    uint32_t before = 0, n = 0;
    for (unsigned w = 0; w < nwarps; w++) {
        before += w < warp ? warp_count[w] : 0;
        n += warp_count[w];
    }
    const uint32_t total = n + (with_signal ? 1 : 0);
    if (tid == 0) {
        s_base = total == 0 ? 0
                 : (with_signal && gdaki_signal_refused(q, sop)) ? GDAKI_SLOT_ERROR
                 : gdaki_q_reserve(q, total);
        s_rc = 0;
    }
    __syncthreads();
    const uint64_t base = s_base;
    if (total == 0 || base == GDAKI_SLOT_ERROR) {
        __syncthreads(); /* everyone has read s_base before it is reused */
        return total == 0 ? 0 : GDAKI_SLOT_ERROR;
    }
    const uint32_t rank = before + __popc(want & ((1u << lane) - 1));
    if (active) {
        const int last = !with_signal && rank == n - 1;
        uint64_t db = gdaki_q_build(q, base + rank, GDAKI_KIND_WRITE, op, last);
        if (last)
            s_db = db;
    }
    if (with_signal && tid == 0)
        s_db = gdaki_q_build_signal(q, base + n, sig_raddr, sig_rkey, value, sop);
    /* Every thread's WQE stores (and s_db) before thread 0's doorbell. */
    __syncthreads();
    if (tid == 0)
        s_rc = gdaki_q_ring(q, base, total, s_db);
    __syncthreads();
    const int rc = s_rc;
    __syncthreads(); /* s_rc / s_base read by all before the next call */
    return rc ? GDAKI_SLOT_ERROR : base + total;
}

__device__ __forceinline__ uint64_t gdaki_put_block(struct gdaki_qp_dev *q, const struct gdaki_op *op, int active)
{
    return gdaki_post_block(q, op, active, 0, 0, 0, 0, GDAKI_SIGNAL_SET);
}

__device__ __forceinline__ uint64_t gdaki_put_signal_block(struct gdaki_qp_dev *q, const struct gdaki_op *op,
                                                           int active, uint64_t sig_raddr, uint32_t sig_rkey,
                                                           uint64_t value, enum gdaki_signal_op sop)
{
    return gdaki_post_block(q, op, active, 1, sig_raddr, sig_rkey, value, sop);
}

__device__ __forceinline__ int gdaki_quiet_block(struct gdaki_qp_dev *q, uint64_t ticket)
{
    __shared__ int s_rc;
    if (gdaki_block_tid() == 0)
        s_rc = gdaki_quiet_thread(q, ticket);
    __syncthreads();
    const int rc = s_rc;
    __syncthreads();
    return rc;
}

/* ------------------------------------------------------------ receive */

__device__ __forceinline__ uint64_t gdaki_wait_signal(const uint64_t *sig, uint64_t value)
{
    return gdaki_wait_signal_ge(sig, value);
}

#endif
