/* softnic_ctl.h: softnic's control API for tests (version node SOFTNIC_1.0).
 * Link a test against softnic's libibverbs.so.1 or find these with dlsym().
 * Every function returns 0 or a positive errno (ENODEV: not a softnic
 * context, EINVAL: bad port). */
#ifndef SOFTNIC_CTL_H
#define SOFTNIC_CTL_H

#include <infiniband/verbs.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct softnic_ctl_counters {
    uint64_t tx_bytes, tx_packets;   /* packets counted in path-MTU units */
    uint64_t rx_bytes, rx_packets;
    uint64_t errors;                 /* error completions / NAKs */
    uint64_t retries;                /* retry budgets exhausted */
    uint64_t rnr_naks;               /* RNR waits signalled */
};

/* Sets a port up (1) or down (0): IBV_EVENT_PORT_ACTIVE / _PORT_ERR on every
 * open context of the device; a down port moves no data. */
int softnic_ctl_port_set_state(struct ibv_context *ctx, uint8_t port, int up);
/* Fails the device of ctx (a ConnectX's catastrophic error): every context
 * of it gets IBV_EVENT_DEVICE_FATAL and every port goes down, without
 * port events.  There is no way back but a new process. */
int softnic_ctl_device_fatal(struct ibv_context *ctx);
/* Changes a port's egress rate (bytes/s, 0 = unlimited) and added latency
 * (us, at most 2000000: EINVAL beyond). */
int softnic_ctl_port_set_rate(struct ibv_context *ctx, uint8_t port, uint64_t bytes_per_s);
int softnic_ctl_port_set_latency(struct ibv_context *ctx, uint8_t port, uint32_t usec);
/* Reads the counters of this process's view of a port / of a QP. */
int softnic_ctl_port_counters(struct ibv_context *ctx, uint8_t port,
                              struct softnic_ctl_counters *out);
int softnic_ctl_qp_counters(struct ibv_qp *qp, struct softnic_ctl_counters *out);

/* Received payload bytes that were pulled from a same-host peer's memory
 * (SOFTNIC_FASTPATH) instead of read off the wire, of a QP / of a port.
 * (Not in struct softnic_ctl_counters: its size is part of the ABI.) */
int softnic_ctl_qp_fast_bytes(struct ibv_qp *qp, uint64_t *out);
int softnic_ctl_port_fast_bytes(struct ibv_context *ctx, uint8_t port, uint64_t *out);

/* Request payload bytes (WRITE, SEND) this process's QPs of a port sent
 * with GRH traffic class tc (the traffic_class of the address vector their
 * last ibv_modify_qp gave): a NIC's per-priority counters, by which a test
 * sees what class a connection's QPs got. */
int softnic_ctl_port_tc_bytes(struct ibv_context *ctx, uint8_t port, uint8_t tc, uint64_t *out);

/* ACKs the responder of a QP sent to its peer's requester (coalesced: one
 * acknowledges every request before it; requests whose WQE was not
 * signaled are acknowledged with a later one, or after the responder's ACK
 * coalescing delay). */
int softnic_ctl_qp_acks(struct ibv_qp *qp, uint64_t *out);

/* ACKs the responder of a QP left as a note in its same-host requester's
 * memory instead, the requester's polls completing from it (SOFTNIC_PUSH_ACKS). */
int softnic_ctl_qp_acks_noted(struct ibv_qp *qp, uint64_t *out);

/* Send WQEs of a QP that the posting thread put on the wire itself
 * (requester.c: small or pulled payloads on an unpaced port), sparing the
 * requester thread's wake-up. */
int softnic_ctl_qp_direct_wqes(struct ibv_qp *qp, uint64_t *out);

/* Send WQEs of a QP that the posting thread placed in its same-host peer's
 * memory itself (small RDMA WRITEs: no NIC thread and no ACK; push.c). */
int softnic_ctl_qp_pushed_wqes(struct ibv_qp *qp, uint64_t *out);

/* Of those, the ones stored through this process's mapping of the peer's
 * shared memory (a sealed memfd the peer registered: no system call;
 * push_map.c). */
int softnic_ctl_qp_stored_wqes(struct ibv_qp *qp, uint64_t *out);

/* ibv_post_send calls that queued send WQEs on a QP (a list counts once):
 * for a QP made by mlx5dv_create_qp, how many post lists softnic's mlx5
 * NIC thread made of the WQEs it found (mlx5_nic.c). */
int softnic_ctl_qp_post_calls(struct ibv_qp *qp, uint64_t *out);

/* softnic runs every QP's work on a fixed pool of engine threads
 * (SOFTNIC_ENGINES): each role of each QP -- its requester, its completer,
 * the responders of the connections its peers open to it -- is a task an
 * engine runs in steps when it has work.  The steps each role of a QP ran:
 * an idle role runs none, so a QP that only receives one-sided writes runs
 * its responder and nothing else. */
struct softnic_ctl_qp_steps {
    uint64_t requester, completer, responder;
};
int softnic_ctl_qp_steps(struct ibv_qp *qp, struct softnic_ctl_qp_steps *out);
/* The engines of this process: how many run (0 before its first QP), the
 * tasks alive, the steps run, how often an engine slept and woke, and the
 * timers that fired (a rate limit's, a retry budget's ...). */
struct softnic_ctl_engines {
    int engines;
    uint32_t tasks;
    uint64_t steps, wakeups, timers;
};
int softnic_ctl_engines(struct softnic_ctl_engines *out);

/* This process's NIC threads' polls before sleeping (SOFTNIC_SPIN_US,
 * spin.c): how many began, and how many found work before their time ran
 * out (each a wake-up saved).  Both 0 with spinning off. */
int softnic_ctl_spin_counts(uint64_t *started, uint64_t *found_work);

/* The polls of QPs that a GPU drives (mlx5 dv and DEVX QPs,
 * SOFTNIC_ACK_POLL_US, spin.c): their completers' for ACKs and their
 * peers' responders' for the next request, each how many were asked for,
 * how many began (spin.c's cap of polling threads refuses the rest), and
 * how many saw what they waited for come before their time ran out (each
 * a wake-up saved); and the responder connections whose hello asked them
 * to poll while polling is on. */
struct softnic_ctl_ack_polls {
    uint32_t us;                    /* the poll time in force, 0: off */
    uint64_t completer_asked, completer_polls, completer_found;
    uint64_t responder_asked, responder_polls, responder_found;
    uint64_t responder_conns;
};
int softnic_ctl_ack_polls(struct softnic_ctl_ack_polls *out);

/* This process's RDMA WRITEs of 8 bytes into GPU memory that softnic's
 * responders landed with cuStreamWriteValue64, behind a payload copy on
 * the same stream still in flight (a put_signal's signal: gpu.c), rather
 * than with a copy of their own.  ENOTSUP when the CUDA driver has no such
 * call or refused one (every such write is then a copy). */
int softnic_ctl_gpu_value_writes(uint64_t *out);

/* The rate (bytes/s) a port without a rate limit advertises its link
 * within (SOFTNIC_LINK_RATE, or this process's calibration: link.c). */
int softnic_ctl_link_rate(uint64_t *bytes_per_s);

/* This process's UD datagrams (all devices): sent, placed in a receive
 * WQE, and dropped on receipt because they were malformed (size, header
 * fields), named no UD QP here in RTR or later on the port they arrived
 * on, carried another Q_Key, or found no receive WQE posted. */
struct softnic_ctl_ud {
    uint64_t sent, delivered, malformed, no_qp, bad_qkey, no_recv;
};
int softnic_ctl_ud_counts(struct softnic_ctl_ud *out);

/* Verbs objects alive in this process (all devices): leak checks compare
 * these before and after work that must free what it made. */
struct softnic_ctl_objects {
    int64_t qps, cqs, mrs;
};
int softnic_ctl_objects(struct softnic_ctl_objects *out);

#ifdef __cplusplus
}
#endif
#endif
