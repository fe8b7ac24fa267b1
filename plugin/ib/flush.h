/* plugin/ib/flush.h: iflush, making received GPU data visible to the GPU.
 *
 * A NIC writing into GPU memory over PCIe may leave data in flight when the
 * completion is seen; an RDMA READ from the received buffer on a loopback QP
 * (connected to itself) only completes once earlier writes landed. So iflush
 * posts one small READ per non-empty CUDA buffer of the receive and returns
 * a request that completes with it. Host memory needs nothing: *request ==
 * NULL. RAILNET_GDR_FLUSH: 0 never, 1 always for CUDA buffers, auto (-1,
 * default) = 1 (no platform here is known to order these writes; NCCL's
 * built-in transport flushes too), 2 = also host buffers (tests only: it
 * exercises the loopback QP where there is no GPU). The loopback QP is made
 * on the first flush that needs it and freed at close (p2p_close_recv).
 * Layer: data path (over comm.h, mr.h). */
#ifndef RAILNET_IB_FLUSH_H
#define RAILNET_IB_FLUSH_H

#include "comm.h"

ncclResult_t flush_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles, void **request);
void flush_destroy(struct recv_comm *rc);
/* A flush READ completed in error. With failover, when its loopback QP's
 * port failed (RETRY_EXC / FLUSH_ERR), the QP is retired, a new one made on
 * a live port and the request's READs posted again there: 1. Else 0: the
 * caller fails the comm. */
int flush_failed(struct recv_comm *rc, const struct ibv_wc *w);
/* 0 for the completion of a flush READ whose request was posted again on a
 * newer loopback QP since (it no longer counts). */
int flush_counts(const struct recv_comm *rc, const struct ibv_wc *w);

#endif
