/* plugin/ib/p2p.h: the data path of a connection (docs/design.md, "A
 * connection", steps 3-5).
 *
 * - p2p_irecv posts one CTS slot (n entries, n <= 8) into the sender's ring
 *   with one RDMA WRITE (on the comm's home QP, or the QPs in turn: comm.h,
 *   keep_home, comm_homed); *request == NULL when the slot of the receive posted 32
 *   receives ago is still in use (NCCL retries).
 * - p2p_isend matches its tag against the head CTS slot; *request == NULL
 *   while the receiver has not posted it yet, or while the send requests in
 *   flight hold the send queues (send_comm.sq_used). Messages up to
 *   RAILNET_SPLIT_MIN go whole on the comm's home QP (the next live one
 *   while it is down) or on the live QPs in turn (comm.h, keep_home, comm_homed);
 *   larger ones are split in balanced 4 KiB-aligned chunks, one per live
 *   QP, and in more chunks (taking the QPs in turn) where a chunk would
 *   exceed the device's largest write (256 MiB). Each chunk's write carries
 *   an immediate naming the chunk (comm.h IMM_*).
 * - p2p_test progresses the comm's CQ; a receive is done once every chunk of
 *   each of its messages delivered its immediate (each chunk counted once); a
 *   send once every chunk's write completed or a failover sync found it landed
 *   (failover.h). Errors (failed completion, async event, lost peer)
 *   are sticky per comm, reported once with a WARN.
 * Nothing here allocates memory.
 * Layer: data path (over comm.h, errors.h, mr.h, flush.h). */
#ifndef RAILNET_IB_P2P_H
#define RAILNET_IB_P2P_H

#include "comm.h"

/* Sizes are size_t (net v9+), at most HS_MAX_CHUNKS * the device's
 * largest write (devices.h's max_p2p_bytes; more is ncclInvalidArgument
 * with a WARN); phandle(s): NCCL's profiler handles, NULL for none (prof.h).
 * test reports int sizes as every table has them: INT_MAX for 2 GiB or
 * more. */
ncclResult_t p2p_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle, void *phandle,
                       void **request);
ncclResult_t p2p_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags, void **mhandles,
                       void **phandles, void **request);
ncclResult_t p2p_test(void *request, int *done, int *sizes);

/* Drains the comm's CQ, then async events and failover (used by test and
 * by close). */
ncclResult_t p2p_progress(struct comm *c);
/* Drains the comm's CQ only (failover answers a sync after it). */
void p2p_poll(struct comm *c);
/* Writes chunk k of send request r (again) on QP qpi: failover.c replays
 * with it. */
ncclResult_t p2p_post_chunk(struct send_comm *sc, struct request *r, unsigned k, int qpi);
/* Writes the CTS slot of the live receive in `slot` on QP qpi. */
ncclResult_t p2p_post_cts(struct recv_comm *rc, unsigned slot, int qpi);
/* closeRecv: the data path's state of the comm (flush QP), then the comm. */
ncclResult_t p2p_close_recv(void *recv_comm);

#endif
