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
 * A request starts at most PROF_EVENTS_PER_REQ events (its later writes
 * have none): NCCL's example profiler (plugins/profiler/example, the
 * one profiler plugins start from) keeps that many network events per
 * proxy step in a fixed array and writes past it beyond; a message split
 * over more QPs (RAILNET_QPS_PER_CONN up to 16), or written again after a
 * failover, would reach it.
 * Layer: base (like log: no dependency on the rest of the core). */
#ifndef RAILNET_IB_PROF_H
#define RAILNET_IB_PROF_H

#include <stddef.h>
#include <stdint.h>

#include "nccl_profiler_net.h"

#define PROF_EVENTS_PER_REQ 8

void prof_set(ncclProfilerCallback_t fn);
/* Starts an event into *ev (left NULL when none was started), counting it
 * in *started, the request's events so far: none once that is
 * PROF_EVENTS_PER_REQ. */
void prof_start_qp(void **ev, uint8_t *started, void *phandle, int dev, uint64_t wr_id, int opcode, uint32_t qp_num,
                   size_t length);
/* Stops the event in *ev, if any, and clears it. */
void prof_stop(void **ev);

#endif
