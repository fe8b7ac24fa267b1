/* plugin/ib/errors.h: one place that turns failed completions and async
 * events into a comm error, with one WARN naming device, port, QP and status.
 *
 * A comm's error is sticky (comm_fail): the first failure is reported, the
 * completions flushed after it are not. Async events of a device (port down,
 * QP fatal, CQ error) are drained without blocking by whichever thread
 * progresses a comm of that device, under a per-device lock, and recorded so
 * that every comm on the affected port or QP fails.
 *
 * Layer: comms (above comm.h: it fails comms; comm.c never calls it). */
#ifndef RAILNET_IB_ERRORS_H
#define RAILNET_IB_ERRORS_H

#include <infiniband/verbs.h>

#include "nccl_net_v8.h"

struct comm;

/* ncclRemoteError for statuses that mean the peer or the path failed
 * (retry exceeded, remote access/operation errors), else ncclSystemError. */
int errors_wc_result(enum ibv_wc_status s);
const char *errors_wc_status_name(enum ibv_wc_status s);
void errors_report_wc(struct comm *c, int qpi, const struct ibv_wc *wc);

/* Registers the device context of c for async event draining (at comm
 * creation) and forgets a comm's context reference at close. */
void errors_attach(struct ibv_context *ctx);
/* Records the async-event counters at comm creation (calls errors_attach):
 * only events after this point fail c. */
void errors_snapshot(struct comm *c);
/* Drains pending async events (at most every 20 ms per comm) and fails c if
 * one of its ports went down, one of its QPs became fatal or its CQ overran
 * (IBV_EVENT_CQ_ERR: completions were lost, so its requests could never
 * complete): one WARN naming the device and the comm kind. */
void errors_check_async(struct comm *c);
/* The same CQ overrun check for a CQ that is not a comm's (the GIN
 * collComm's): errors_cq_snapshot attaches ctx and sets *seen to its
 * CQ_ERR events so far; errors_cq_overran drains ctx's events and tells
 * whether cq got IBV_EVENT_CQ_ERR since *seen (which moves on). */
void errors_cq_snapshot(struct ibv_context *ctx, uint64_t *seen);
int errors_cq_overran(struct ibv_context *ctx, const struct ibv_cq *cq, uint64_t *seen);
/* Called when a request cannot progress: notices a peer that closed its
 * socket and, after a grace period for completions still in flight, fails
 * the comm with ncclRemoteError. Cheap: looks at the socket every 50 ms. */
ncclResult_t errors_check_peer(struct comm *c, int have_pending);

#endif
