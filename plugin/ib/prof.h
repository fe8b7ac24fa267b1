/* plugin/ib/prof.h: network events for NCCL's profiler (net v10+).
 *
 * A face installs the callback NCCL passes to init (prof_set; NULL: no
 * profiler, and every call here does nothing). The data path starts one
 * event per work request it posts for a request, with the phandle NCCL
 * gave that isend/irecv, in the layout of NCCL's own IB transport
 * (nccl_profiler_net.h: plugin id NCCL_PROFILER_NET_TYPE_IB | 1, type
 * ncclProfileQp), and stops it when the work request's completion is seen:
 *  - a send: one event per chunk written (RDMA WRITE with immediate; the
 *    chunk's QP, wr_id and length); a chunk written again after a failover
 *    ends its first event and starts another;
 *  - a receive: one event per buffer of the group, from the clear-to-send
 *    write (its QP and wr_id, the posted length) until the buffer's data
 *    has landed.
 * An event a request still holds when test reports it done is stopped
 * then. No phandle (NCCL without a profiler passes NULL): no event.
 * Layer: base (like log: no dependency on the rest of the core). */
#ifndef RAILNET_IB_PROF_H
#define RAILNET_IB_PROF_H

#include <stddef.h>
#include <stdint.h>

#include "nccl_profiler_net.h"

void prof_set(ncclProfilerCallback_t fn);
/* Starts an event into *ev (left NULL when none was started). */
void prof_start_qp(void **ev, void *phandle, int dev, uint64_t wr_id, int opcode, uint32_t qp_num, size_t length);
/* Stops the event in *ev, if any, and clears it. */
void prof_stop(void **ev);

#endif
