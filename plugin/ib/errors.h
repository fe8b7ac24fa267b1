/* plugin/ib/errors.h: one place that turns failed completions and async
 * events into a comm error, with one WARN naming device, port, QP and status.
 *
 * A comm's error is sticky (comm_fail): the first failure is reported, the
 * completions flushed after it are not. Async events of a device (port down,
 * QP fatal, CQ error) are drained without blocking by whichever thread
 * progresses a comm of that device, under a per-device lock, and recorded so
 * that every comm on the affected port or QP fails. The GIN collComm
 * (plugin/gin/gin_errors.c) watches the same events through errors_watch.
 *
 * Layer: comms (above comm.h: it fails comms; comm.c never calls it; comm.h
 * only embeds the plain struct errors_watch). */
#ifndef RAILNET_IB_ERRORS_H
#define RAILNET_IB_ERRORS_H

#include <infiniband/verbs.h>

#include "handshake.h"
#include "nccl_net_v8.h"
#include "qp.h"

struct comm;

/* ncclRemoteError for statuses that mean the peer or the path failed
 * (retry exceeded, remote access/operation errors), else ncclSystemError. */
int errors_wc_result(enum ibv_wc_status s);
const char *errors_wc_status_name(enum ibv_wc_status s);
void errors_report_wc(struct comm *c, int qpi, const struct ibv_wc *wc);

/* Registers the device context of c for async event draining (at comm
 * creation) and forgets a comm's context reference at close. */
void errors_attach(struct ibv_context *ctx);

/* What one comm (a p2p comm, a GIN collComm) has seen of its device's async
 * events: the per-device counters as they were when it last looked. Start
 * it when the comm is created (only later events count), poll it as the
 * comm progresses; the caller decides what an event means for it (failover
 * acts on port events of a p2p comm, everything else fails the comm). */
struct errors_watch {
    struct ibv_context *ctx;              /* the device's (every port of a comm shares it) */
    int nports;
    unsigned port_num[HS_MAX_PORTS];
    uint64_t port_err_seen[HS_MAX_PORTS]; /* IBV_EVENT_PORT_ERR per port */
    uint64_t port_up_seen[HS_MAX_PORTS];  /* IBV_EVENT_PORT_ACTIVE per port */
    uint64_t fatal_seen;                  /* QP fatal events (IBV_EVENT_QP_FATAL, _REQ_ERR, _ACCESS_ERR) */
    uint64_t cq_err_seen;                 /* IBV_EVENT_CQ_ERR */
    uint64_t dev_fatal_seen;              /* IBV_EVENT_DEVICE_FATAL */
};
/* What errors_watch_poll found since the last look. */
struct errors_news {
    int cq_overrun;      /* the CQ got IBV_EVENT_CQ_ERR: completions were lost */
    int device_fatal;    /* IBV_EVENT_DEVICE_FATAL (every port is in `down` too) */
    uint32_t down, up;   /* bit p: port p of the watch got IBV_EVENT_PORT_ERR / _PORT_ACTIVE
                          * (IBV_EVENT_DEVICE_FATAL: every port down) */
    int fatal_event;     /* 0, or the first fatal event of a QP owns_qp accepted ... */
    uint32_t fatal_qpn;  /* ... and that QP's number */
};
/* Attaches ports[0].ctx and records its counters now. */
void errors_watch_start(struct errors_watch *w, const struct qp_port *ports, int nports);
/* Drains the device's pending events without blocking (under the device's
 * lock), fills *n with what concerns w (owns_qp(owner, qpn): whether a QP
 * that got a fatal event is the comm's; cq: the comm's CQ, compared by
 * address only) and moves w's counters on. */
void errors_watch_poll(struct errors_watch *w, const struct ibv_cq *cq,
                       int (*owns_qp)(const void *owner, uint32_t qpn), const void *owner, struct errors_news *n);
/* "IBV_EVENT_QP_FATAL" ... for a fatal_event. */
const char *errors_event_name(int event);

/* errors_watch_start on c's ports at comm creation: only events after this
 * point fail c. */
void errors_snapshot(struct comm *c);
/* Polls c's watch (at most every 20 ms per comm) and fails c if one of its
 * ports went down (without failover: with it, failover.c acts on the port
 * events), its device failed (IBV_EVENT_DEVICE_FATAL, with failover or
 * not), one of its QPs became fatal or its CQ overran (IBV_EVENT_CQ_ERR:
 * completions were lost, so its requests could never complete): one WARN
 * naming the device, the port or QP, the event and the comm kind. */
void errors_check_async(struct comm *c, uint64_t now);
/* Called when a request cannot progress: notices a peer that closed its
 * socket and, ERRORS_PEER_GONE_GRACE_NS after it was first noticed gone (here
 * or by the failover channel, c->peer_gone_ns), fails the comm with
 * ncclRemoteError: completions may still trail the peer's exit. now is the
 * caller's clock read (comm_now_ns); a peer noticed gone with a later read
 * is within its grace. Cheap: looks at the socket every 50 ms. */
#define ERRORS_PEER_GONE_GRACE_NS 2000000000ull
/* Notes that the peer's socket ended (closed or failed), at now: the
 * first notice stands, and errors_check_peer's grace counts from it. */
void errors_note_peer_gone(struct comm *c, uint64_t now);
ncclResult_t errors_check_peer(struct comm *c, int have_pending, uint64_t now);

#endif
