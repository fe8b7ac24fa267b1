/* tests/gdaki/fake_nic.c: see fake_nic.h. */
#include "fake_nic.h"

#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void violation(struct fake_nic *n, const char *fmt, ...)
{
    if (n->violations++ == 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(n->why, sizeof(n->why), fmt, ap);
        va_end(ap);
    }
}

static void complete(struct fake_nic *n, uint8_t opcode, uint16_t wqe_idx, uint32_t len,
                     uint8_t syndrome)
{
    uint32_t cq_size = 1u << n->q.cq_log;
    uint32_t sw_ci = gdaki_be32toh(__atomic_load_n(&n->cq_dbrec[GDAKI_CQ_DBR_CI], __ATOMIC_ACQUIRE));
    uint32_t used = (uint32_t)(n->cq_pi - sw_ci) & GDAKI_CQ_CI_MASK;
    if (used >= cq_size)
        violation(n, "CQ overrun: producer %llu, consumer %u, size %u",
                  (unsigned long long)n->cq_pi, sw_ci, cq_size);
    struct mlx5_cqe64 *cqe = (struct mlx5_cqe64 *)(n->cq + (n->cq_pi & (cq_size - 1)) * 64);
    gdaki_cqe_write(cqe, opcode, (uint8_t)((n->cq_pi >> n->q.cq_log) & 1), wqe_idx, n->q.qpn,
                    len, 0, syndrome, 0);
    n->cq_pi++;
}

/* Execute the WQE that starts at slot ci, of at most avail BBs below the
 * doorbell record.  Returns the BBs it took, or -1 after an error CQE. */
static int execute(struct fake_nic *n, uint64_t ci, uint32_t avail)
{
    /* the WQE's BBs, copied out of the ring (a WQE may wrap past its end):
     * ds in the ctrl segment says how many */
    uint8_t w[GDAKI_INLINE_BBS_MAX * 64];   /* the largest WQE (ds 63) */
    memcpy(w, gdaki_q_slot_ptr(&n->q, ci), 64);
    uint32_t ds = gdaki_be32toh(((const struct mlx5_wqe_ctrl_seg *)w)->qpn_ds) & 0x3f;
    uint32_t nbb = ds ? (ds * 16 + 63) / 64 : 1;
    if (nbb > avail) {
        violation(n, "slot %llu: a WQE of %u BBs with %u below the doorbell record",
                  (unsigned long long)ci, nbb, avail);
        nbb = avail;
    }
    for (uint32_t i = 1; i < nbb; i++)
        memcpy(w + 64 * i, gdaki_q_slot_ptr(&n->q, ci + i), 64);
    struct gdaki_wqe_view v;
    if (gdaki_wqe_parse(w, 64 * nbb, &v) < 0) {
        complete(n, MLX5_CQE_REQ_ERR, (uint16_t)ci, 0, MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR);
        return -1;
    }
    if (v.idx != (uint16_t)ci)
        violation(n, "slot %llu holds a WQE with idx %u (stale or unwritten slot)",
                  (unsigned long long)ci, v.idx);
    if (v.qpn != n->q.qpn)
        violation(n, "slot %llu: qpn %u, expected %u", (unsigned long long)ci, v.qpn, n->q.qpn);
    if (v.opcode != MLX5_OPCODE_NOP && (v.rkey != FAKE_NIC_KEY || (v.has_data && v.lkey != FAKE_NIC_KEY))) {
        complete(n, MLX5_CQE_REQ_ERR, (uint16_t)ci, 0, MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR);
        return -1;
    }
    switch (v.opcode) {
    case MLX5_OPCODE_RDMA_WRITE:
    case MLX5_OPCODE_RDMA_WRITE_IMM:
        memcpy((void *)(uintptr_t)v.raddr, v.inl ? (const void *)v.inl : (const void *)(uintptr_t)v.laddr,
               v.len);
        break;
    case MLX5_OPCODE_ATOMIC_FA: {
        uint64_t old = __atomic_fetch_add((uint64_t *)(uintptr_t)v.raddr, v.swap_add, __ATOMIC_SEQ_CST);
        memcpy((void *)(uintptr_t)v.laddr, &old, 8);
        break;
    }
    default:
        break;
    }
    n->executed++;
    n->executed_bbs += nbb;
    if (v.fm_ce_se & MLX5_WQE_CTRL_CQ_UPDATE)
        complete(n, MLX5_CQE_REQ, (uint16_t)ci, v.len, 0);
    return (int)nbb;
}

static void *nic_main(void *arg)
{
    struct fake_nic *n = arg;
    uint64_t ci = 0;          /* next slot to execute */
    uint16_t last_pi = 0;
    while (!__atomic_load_n(&n->stop, __ATOMIC_ACQUIRE)) {
        if (__atomic_load_n(&n->paused, __ATOMIC_ACQUIRE) || n->errored) {
            sched_yield();
            continue;
        }
        uint16_t pi = (uint16_t)gdaki_be32toh(__atomic_load_n(&n->dbrec[MLX5_SND_DBR], __ATOMIC_ACQUIRE));
        uint16_t ahead = (uint16_t)(pi - last_pi);
        if (ahead > (1u << n->q.sq_log))
            violation(n, "doorbell record moved from %u to %u (backwards or past the ring)", last_pi, pi);
        last_pi = pi;
        if ((uint16_t)ci == pi) {
            sched_yield();
            continue;
        }
        while ((uint16_t)ci != pi) {
            int nbb = execute(n, ci, (uint16_t)(pi - (uint16_t)ci));
            if (nbb < 0) {
                n->errored = 1;
                break;
            }
            ci += (uint64_t)nbb;
        }
    }
    return NULL;
}

int fake_nic_start(struct fake_nic *n, uint32_t sq_log, uint32_t cq_log, uint32_t qpn)
{
    memset(n, 0, sizeof(*n));
    /* posix_memalign: aligned_alloc wants a size that is a multiple of the
     * alignment, which small rings are not. */
    void *sq = NULL, *cq = NULL;
    if (posix_memalign(&sq, 4096, (size_t)64 << sq_log) || posix_memalign(&cq, 4096, (size_t)64 << cq_log)) {
        free(sq);
        return -1;
    }
    n->sq = sq;
    n->cq = cq;
    memset(n->sq, 0, (size_t)64 << sq_log);
    for (uint32_t i = 0; i < (1u << cq_log); i++) {
        memset(n->cq + i * 64, 0, 64);
        n->cq[i * 64 + 63] = MLX5_CQE_INVALID << 4;
    }
    n->span = calloc(1, (size_t)1 << sq_log);
    if (!n->span) {
        free(sq);
        free(cq);
        return -1;
    }
    n->q.span = n->span;
    n->q.sq = n->sq;
    n->q.dbrec = &n->dbrec[MLX5_SND_DBR];
    n->q.db = &n->db;
    n->q.cq = n->cq;
    n->q.cq_dbrec = n->cq_dbrec;
    n->q.qpn = qpn;
    n->q.sq_log = sq_log;
    n->q.cq_log = cq_log;
    n->q.cqe_size = 64;
    static uint64_t scratch[64];
    n->q.scratch_addr = (uint64_t)(uintptr_t)scratch;
    n->q.scratch_lkey = FAKE_NIC_KEY;
    if (pthread_create(&n->thread, NULL, nic_main, n) != 0)
        return -1;
    n->running = 1;
    return 0;
}

void fake_nic_pause(struct fake_nic *n, int paused)
{
    __atomic_store_n(&n->paused, paused, __ATOMIC_RELEASE);
}

void fake_nic_stop(struct fake_nic *n)
{
    if (n->running) {
        __atomic_store_n(&n->stop, 1, __ATOMIC_RELEASE);
        pthread_join(n->thread, NULL);
        n->running = 0;
    }
    free(n->sq);
    free(n->cq);
    free(n->span);
    n->sq = n->cq = n->span = NULL;
}
