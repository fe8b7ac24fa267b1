/* tests/gin_gdaki/doca_cpu.h: a CPU-side consumer of the GDAKI descriptors
 * railnet hands NCCL (include/railnet_gin_gdaki.h): it posts into the
 * described queues the way NCCL 2.28.9's device code does
 * (nccl_device/gin/gdaki/gin_gdaki.h over DOCA GPUNetIO's device verbs),
 * with CPU atomics where a GPU thread uses its own:
 * - slots are reserved by an atomic add on sq_rsvd_index; a slot is reused
 *   once the CQE of the WQE that had it (index - sq_wqe_num) is there;
 * - WQEs: RDMA WRITE (ds 3, one pointer segment), NOP (ds 1), ATOMIC
 *   fetch-add (ds 4: raddr, atomic, an 8-byte result segment on the sink at
 *   offset 0), RDMA WRITE inline of a value (ds 3 up to 12 bytes), WAIT on
 *   another QP's CQ (ds 2); every one with CQ_UPDATE; keys copied as stored
 *   (big-endian);
 * - marked ready in order (sq_ready_index), then submitted under sq_lock:
 *   sq_wqe_pi raised, and for nic_handler GPU_SM_DB the doorbell register
 *   written (htobe32(pi << 8), sq_num_shift8_be), the doorbell record
 *   (htobe32(pi & 0xffff)), the register again; two QPs (a put and its
 *   companion's WAIT + counter add) both registers first, then both
 *   records and registers again;
 * - CQE number n is the completion of slot n: polled by owner bit
 *   (n & cqe_num), an opcode of REQ_ERR (13) is -EIO; cqe_ci raised.
 * Addresses are window offsets; the signal of id s is 8 * s of the peer's
 * signal table, the counter of id c 8 * c of this rank's counter table. */
#ifndef RAILNET_TESTS_DOCA_CPU_H
#define RAILNET_TESTS_DOCA_CPU_H

#include <stddef.h>
#include <stdint.h>

#include "railnet_gin_gdaki.h"

struct dc_addr {
    uint64_t addr;
    uint32_t key;       /* big-endian, as the tables store it */
};

/* 0, or -EIO when the CQE of slot idx is an error; -ETIMEDOUT after
 * timeout_s seconds without it. */
int dc_poll_cq_at(struct rn_doca_cq *cq, uint64_t idx, double timeout_s);
/* Flush of one peer: the CQE of the last reserved slot. */
int dc_wait(struct rn_doca_qp *qp, double timeout_s);

void dc_put(struct rn_doca_qp *qp, struct dc_addr raddr, struct dc_addr laddr, size_t size);
void dc_put_signal(struct rn_doca_qp *qp, struct dc_addr raddr, struct dc_addr laddr, size_t size,
                   struct dc_addr sig_raddr, struct dc_addr sig_laddr, uint64_t add);
void dc_put_counter(struct rn_doca_qp *qp, struct dc_addr raddr, struct dc_addr laddr, size_t size,
                    struct rn_doca_qp *companion, struct dc_addr cnt_raddr, struct dc_addr cnt_laddr, uint64_t add);
void dc_put_signal_counter(struct rn_doca_qp *qp, struct dc_addr raddr, struct dc_addr laddr, size_t size,
                           struct dc_addr sig_raddr, struct dc_addr sig_laddr, uint64_t sig_add,
                           struct rn_doca_qp *companion, struct dc_addr cnt_raddr, struct dc_addr cnt_laddr,
                           uint64_t cnt_add);
/* PutValue of 8 bytes with a signal (an inline write, then the atomic). */
void dc_p_signal(struct rn_doca_qp *qp, struct dc_addr raddr, uint64_t value, struct dc_addr sig_raddr,
                 struct dc_addr sig_laddr, uint64_t add);
void dc_signal(struct rn_doca_qp *qp, struct dc_addr sig_raddr, struct dc_addr sig_laddr, uint64_t add);

#endif
