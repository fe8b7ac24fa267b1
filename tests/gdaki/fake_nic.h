/* tests/gdaki/fake_nic.h: a minimal mlx5 send-queue consumer on a CPU
 * thread, for testing the posting protocol of gdaki_queue.h without a NIC.
 *
 * It does what a ConnectX does with the bytes, and checks what a ConnectX
 * would trip on: it follows the send doorbell record, executes each WQE in
 * slot order (WRITE, WRITE_IMM, inline WRITE of up to 16 BBs, across the
 * ring's end, ATOMIC_FA, NOP; addresses are
 * plain pointers in this process and the only valid key is FAKE_NIC_KEY),
 * writes a CQE for every CQ_UPDATE WQE (owner bit = pass parity), and turns
 * a malformed WQE or a bad key into an error CQE after which it stops
 * (QP in error).  Protocol violations (a slot whose idx is not the one
 * expected, a doorbell record moving backwards or past the ring, a CQ
 * overrun) are counted with the first one described in why[].
 *
 * Why it stays next to the real softnic (test_gdaki_softnic.c): it needs no
 * library, can be paused so that ring-full and quiet waits are exercised
 * deterministically, and reports protocol violations that softnic absorbs
 * (a CQ overrun, where softnic just waits; a doorbell record that moves
 * backwards). */
#ifndef RAILNET_TESTS_FAKE_NIC_H
#define RAILNET_TESTS_FAKE_NIC_H

#include <pthread.h>
#include <stdint.h>

#include "gdaki_queue.h"

#define FAKE_NIC_KEY 0x5eed

struct fake_nic {
    struct gdaki_qp_dev q;   /* host descriptor handed to the posters */
    uint8_t *sq;
    uint8_t *cq;
    uint8_t *span;           /* the descriptor's span table */
    uint32_t dbrec[2];
    uint32_t cq_dbrec[2];
    uint64_t db;             /* the "UAR register" */
    pthread_t thread;
    int running;
    int stop;                /* set by fake_nic_stop */
    int paused;              /* while set, the NIC executes nothing */
    uint64_t executed;       /* WQEs executed */
    uint64_t executed_bbs;   /* the basic blocks they took (their ds) */
    uint64_t cq_pi;
    int errored;
    int violations;
    char why[256];
};

/* sq_log / cq_log: log2 of the ring sizes.  Returns 0 or -1. */
int fake_nic_start(struct fake_nic *n, uint32_t sq_log, uint32_t cq_log, uint32_t qpn);
void fake_nic_stop(struct fake_nic *n);
void fake_nic_pause(struct fake_nic *n, int paused);

#endif
