/* tests/gin_gdaki/doca_cpu.c: NCCL 2.28.9's GDAKI posting protocol run by a
 * CPU thread on railnet's descriptors (doca_cpu.h). Written from the
 * protocol's facts (slot reservation, WQE images, submit order, CQ by
 * index), not from DOCA's code. */
#include "doca_cpu.h"

#include <endian.h>
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <time.h>

#define WQE_BB 64
#define OP_NOP 0x00
#define OP_RDMA_WRITE 0x08
#define OP_ATOMIC_FA 0x12
#define CQ_UPDATE 0x08          /* fm_ce_se: CQE always */
#define INLINE_SEG 0x80000000u
#define CQE_REQ_ERR 13

/* atomic max (the device code's fetch_max), returns the old value */
static uint64_t fetch_max(uint64_t *p, uint64_t v)
{
    uint64_t old = __atomic_load_n(p, __ATOMIC_ACQUIRE);
    while (old < v && !__atomic_compare_exchange_n(p, &old, v, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        ;
    return old;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int dc_poll_cq_at(struct rn_doca_cq *cq, uint64_t idx, double timeout_s)
{
    double end = now_s() + timeout_s;
    uint32_t n = cq->cqe_num;
    const uint8_t *cqe = cq->cqe_daddr + (size_t)(idx & (n - 1)) * 64;
    for (;;) {
        uint64_t ci = __atomic_load_n(&cq->cqe_ci, __ATOMIC_ACQUIRE);
        if (idx < ci)
            return 0;
        uint8_t op_own = __atomic_load_n(&cqe[63], __ATOMIC_ACQUIRE);
        if (idx < ci + n && !((op_own & 1) ^ !!(idx & n))) {
            fetch_max(&cq->cqe_ci, idx + 1);
            return (op_own >> 4) == CQE_REQ_ERR ? -EIO : 0;
        }
        if (now_s() > end)
            return -ETIMEDOUT;
        sched_yield();
    }
}

int dc_wait(struct rn_doca_qp *qp, double timeout_s)
{
    uint64_t t = __atomic_load_n(&qp->sq_rsvd_index, __ATOMIC_ACQUIRE);
    return t ? dc_poll_cq_at(&qp->cq_sq, t - 1, timeout_s) : 0;
}

static uint64_t reserve(struct rn_doca_qp *qp, uint32_t n)
{
    uint64_t idx = __atomic_fetch_add(&qp->sq_rsvd_index, n, __ATOMIC_RELAXED);
    uint64_t last = idx + n - 1;
    if (last >= qp->sq_wqe_num)
        (void)dc_poll_cq_at(&qp->cq_sq, last - qp->sq_wqe_num, 60.0);
    return idx;
}

static uint8_t *slot(struct rn_doca_qp *qp, uint64_t idx)
{
    return qp->sq_wqe_daddr + ((size_t)(idx & qp->sq_wqe_mask) << 6);
}

static void put32be(uint8_t *p, uint32_t v)
{
    v = htobe32(v);
    memcpy(p, &v, 4);
}

static void put64be(uint8_t *p, uint64_t v)
{
    v = htobe64(v);
    memcpy(p, &v, 8);
}

/* ctrl: opmod_idx_opcode, qpn_ds (as stored: big-endian), 0, 0, 0,
 * fm_ce_se, imm 0 */
static void ctrl(uint8_t *w, uint64_t idx, uint8_t opcode, uint32_t qpn_ds_be)
{
    memset(w, 0, WQE_BB);
    put32be(w, ((uint32_t)(uint16_t)idx << 8) | opcode);
    memcpy(w + 4, &qpn_ds_be, 4);
    w[11] = CQ_UPDATE;
}

static void raddr_seg(uint8_t *w, uint64_t raddr, uint32_t rkey_be)
{
    put64be(w, raddr);
    memcpy(w + 8, &rkey_be, 4);
}

static void data_seg(uint8_t *w, uint32_t bytes, uint32_t lkey_be, uint64_t addr)
{
    put32be(w, bytes & (INLINE_SEG - 1));
    memcpy(w + 4, &lkey_be, 4);
    put64be(w + 8, addr);
}

static void wqe_write(struct rn_doca_qp *qp, uint64_t idx, uint64_t raddr, uint32_t rkey, uint64_t laddr,
                      uint32_t lkey, uint32_t bytes)
{
    uint8_t *w = slot(qp, idx);
    ctrl(w, idx, OP_RDMA_WRITE, qp->sq_num_shift8_be_3ds);
    raddr_seg(w + 16, raddr, rkey);
    data_seg(w + 32, bytes, lkey, laddr);
}

static void wqe_nop(struct rn_doca_qp *qp, uint64_t idx)
{
    ctrl(slot(qp, idx), idx, OP_NOP, qp->sq_num_shift8_be_1ds);
}

static void wqe_atomic_fa(struct rn_doca_qp *qp, uint64_t idx, struct dc_addr r, struct dc_addr l, uint64_t add)
{
    uint8_t *w = slot(qp, idx);
    ctrl(w, idx, OP_ATOMIC_FA, qp->sq_num_shift8_be_4ds);
    raddr_seg(w + 16, r.addr, r.key);
    put64be(w + 32, add);       /* swap_add */
    put64be(w + 40, add);       /* compare: the add, as the device code writes it */
    data_seg(w + 48, 8, l.key, l.addr);
}

static void wqe_inline8(struct rn_doca_qp *qp, uint64_t idx, struct dc_addr r, uint64_t value)
{
    uint8_t *w = slot(qp, idx);
    ctrl(w, idx, OP_RDMA_WRITE, htobe32(qp->sq_num_shift8 | 3));   /* 8 bytes: ds 3 */
    raddr_seg(w + 16, r.addr, r.key);
    put32be(w + 32, 8 | INLINE_SEG);
    memcpy(w + 36, &value, 8);
}

static void wqe_wait(struct rn_doca_qp *qp, uint64_t idx, uint32_t max_index, uint32_t cqn)
{
    uint8_t *w = slot(qp, idx);
    ctrl(w, idx, RN_DOCA_OPCODE_WAIT, htobe32(qp->sq_num_shift8 | 2));
    put32be(w + 24, max_index);
    put32be(w + 28, cqn);
}

static void mark_ready(struct rn_doca_qp *qp, uint64_t from, uint64_t to)
{
    __atomic_thread_fence(__ATOMIC_RELEASE);
    while (__atomic_load_n(&qp->sq_ready_index, __ATOMIC_ACQUIRE) != from)
        sched_yield();
    __atomic_store_n(&qp->sq_ready_index, to + 1, __ATOMIC_RELEASE);
}

static uint64_t db_value(const struct rn_doca_qp *qp, uint64_t pi)
{
    uint32_t w[2] = { htobe32((uint32_t)(pi << 8)), qp->sq_num_shift8_be };
    uint64_t v;
    memcpy(&v, w, 8);
    return v;
}

static void lock(struct rn_doca_qp *qp)
{
    int z = 0;
    while (!__atomic_compare_exchange_n(&qp->sq_lock, &z, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
        z = 0;
        sched_yield();
    }
}

static void unlock(struct rn_doca_qp *qp)
{
    __atomic_store_n(&qp->sq_lock, 0, __ATOMIC_RELEASE);
}

static void ring(struct rn_doca_qp *qp, uint64_t pi)
{
    __atomic_thread_fence(__ATOMIC_RELEASE);
    __atomic_store_n(qp->sq_db, db_value(qp, pi), __ATOMIC_RELEASE);
}

static void record(struct rn_doca_qp *qp, uint64_t pi)
{
    __atomic_store_n(qp->sq_dbrec, htobe32((uint32_t)(pi & 0xffff)), __ATOMIC_RELEASE);
}

/* submit of one QP, GPU_SM_DB: register, record, register */
static void submit(struct rn_doca_qp *qp, uint64_t pi)
{
    lock(qp);
    uint64_t old = fetch_max(&qp->sq_wqe_pi, pi);
    if (old < pi) {
        ring(qp, pi);
        record(qp, pi);
        ring(qp, pi);
    }
    unlock(qp);
}

/* submit of a QP and its companion: both registers, then both records
 * and registers */
static void submit2(struct rn_doca_qp *a, uint64_t pa, struct rn_doca_qp *b, uint64_t pb)
{
    struct rn_doca_qp *q[2] = { a, b };
    uint64_t p[2] = { pa, pb }, old[2];
    for (int i = 0; i < 2; i++) {
        lock(q[i]);
        old[i] = fetch_max(&q[i]->sq_wqe_pi, p[i]);
        if (old[i] < p[i])
            ring(q[i], p[i]);
    }
    for (int i = 0; i < 2; i++) {
        if (old[i] < p[i]) {
            record(q[i], p[i]);
            ring(q[i], p[i]);
        }
        unlock(q[i]);
    }
}

/* The data WQEs of a put: 1 GiB at most each; a zero-byte put is a NOP. */
static uint64_t put_chunks(struct rn_doca_qp *qp, uint64_t base, struct dc_addr r, struct dc_addr l, size_t size,
                           uint32_t nchunks)
{
    const uint64_t max = 1ull << 30;
    uint64_t idx = base;
    for (uint32_t i = 0; i < nchunks; i++) {
        idx = base + i;
        uint64_t n = size > max ? max : size;
        if (n)
            wqe_write(qp, idx, r.addr + i * max, r.key, l.addr + i * max, l.key, (uint32_t)n);
        else
            wqe_nop(qp, idx);
        size -= n;
    }
    return idx;
}

static uint32_t chunks(size_t size)
{
    uint32_t n = (uint32_t)((size + (1ull << 30) - 1) >> 30);
    return n ? n : 1;
}

void dc_put(struct rn_doca_qp *qp, struct dc_addr raddr, struct dc_addr laddr, size_t size)
{
    uint32_t n = chunks(size);
    uint64_t base = reserve(qp, n);
    uint64_t last = put_chunks(qp, base, raddr, laddr, size, n);
    mark_ready(qp, base, last);
    submit(qp, last + 1);
}

void dc_put_signal(struct rn_doca_qp *qp, struct dc_addr raddr, struct dc_addr laddr, size_t size,
                   struct dc_addr sig_raddr, struct dc_addr sig_laddr, uint64_t add)
{
    uint32_t n = chunks(size);
    uint64_t base = reserve(qp, n + 1);
    uint64_t last = put_chunks(qp, base, raddr, laddr, size, n) + 1;
    wqe_atomic_fa(qp, last, sig_raddr, sig_laddr, add);
    mark_ready(qp, base, last);
    submit(qp, last + 1);
}

/* The companion's half: WAIT for the put's last CQE, then the counter add. */
static void counter_half(struct rn_doca_qp *qp, uint64_t last, struct rn_doca_qp *comp, struct dc_addr cr,
                         struct dc_addr cl, uint64_t add)
{
    uint64_t cb = reserve(comp, 2);
    wqe_wait(comp, cb, (uint32_t)last, qp->cq_sq.cq_num);
    wqe_atomic_fa(comp, cb + 1, cr, cl, add);
    mark_ready(comp, cb, cb + 1);
    submit2(qp, last + 1, comp, cb + 2);
}

void dc_put_counter(struct rn_doca_qp *qp, struct dc_addr raddr, struct dc_addr laddr, size_t size,
                    struct rn_doca_qp *companion, struct dc_addr cnt_raddr, struct dc_addr cnt_laddr, uint64_t add)
{
    uint32_t n = chunks(size);
    uint64_t base = reserve(qp, n);
    uint64_t last = put_chunks(qp, base, raddr, laddr, size, n);
    mark_ready(qp, base, last);
    counter_half(qp, last, companion, cnt_raddr, cnt_laddr, add);
}

void dc_put_signal_counter(struct rn_doca_qp *qp, struct dc_addr raddr, struct dc_addr laddr, size_t size,
                           struct dc_addr sig_raddr, struct dc_addr sig_laddr, uint64_t sig_add,
                           struct rn_doca_qp *companion, struct dc_addr cnt_raddr, struct dc_addr cnt_laddr,
                           uint64_t cnt_add)
{
    uint32_t n = chunks(size);
    uint64_t base = reserve(qp, n + 1);
    uint64_t last = put_chunks(qp, base, raddr, laddr, size, n) + 1;
    wqe_atomic_fa(qp, last, sig_raddr, sig_laddr, sig_add);
    mark_ready(qp, base, last);
    counter_half(qp, last, companion, cnt_raddr, cnt_laddr, cnt_add);
}

void dc_p_signal(struct rn_doca_qp *qp, struct dc_addr raddr, uint64_t value, struct dc_addr sig_raddr,
                 struct dc_addr sig_laddr, uint64_t add)
{
    uint64_t base = reserve(qp, 2);
    wqe_inline8(qp, base, raddr, value);
    wqe_atomic_fa(qp, base + 1, sig_raddr, sig_laddr, add);
    mark_ready(qp, base, base + 1);
    submit(qp, base + 2);
}

void dc_signal(struct rn_doca_qp *qp, struct dc_addr sig_raddr, struct dc_addr sig_laddr, uint64_t add)
{
    uint64_t idx = reserve(qp, 1);
    wqe_atomic_fa(qp, idx, sig_raddr, sig_laddr, add);
    mark_ready(qp, idx, idx);
    submit(qp, idx + 1);
}
