/* plugin/ib/p2p.h: the data path of a connection (DESIGN.md §2 steps 3-5).
 *
 * - p2p_irecv posts one CTS slot (n entries, n <= 8) into the sender's ring
 *   with one RDMA WRITE; *request == NULL when the slot of the receive posted
 *   32 receives ago is still in use (NCCL retries).
 * - p2p_isend matches its tag against the head CTS slot; *request == NULL
 *   while the receiver has not posted it yet. Messages up to
 *   RAILNET_SPLIT_MIN go whole on one QP (round-robin); larger ones are split
 *   in balanced 4 KiB-aligned chunks, one per QP. The last write on each QP
 *   carries the immediate (comm.h IMM_*).
 * - p2p_test progresses the comm's CQ; a receive is done once every QP that
 *   carried part of each of its messages delivered its immediate; a send once
 *   its writes completed. Errors (failed completion, async event, lost peer)
 *   are sticky per comm, reported once with a WARN.
 * Nothing here allocates memory.
 * Layer: data path (over comm.h, errors.h, mr.h, flush.h). */
#ifndef RAILNET_IB_P2P_H
#define RAILNET_IB_P2P_H

#include "comm.h"

ncclResult_t p2p_isend(void *send_comm, void *data, int size, int tag, void *mhandle, void **request);
ncclResult_t p2p_irecv(void *recv_comm, int n, void **data, int *sizes, int *tags, void **mhandles,
                       void **request);
ncclResult_t p2p_test(void *request, int *done, int *sizes);

/* Drains the comm's CQ (used by test and by close). */
ncclResult_t p2p_progress(struct comm *c);
/* closeRecv: the data path's state of the comm (flush QP), then the comm. */
ncclResult_t p2p_close_recv(void *recv_comm);

#endif
