/* plugin/ib/failover.h: a connection of a merged dual-port device survives a
 * port going down, and takes the port back when it returns (RAILNET_FAILOVER,
 * docs/failover-and-cm.md).
 *
 * Failover. A port is dead for a comm when one of its QPs ends a work
 * request with IBV_WC_RETRY_EXC_ERR / IBV_WC_WR_FLUSH_ERR, when the device
 * raises IBV_EVENT_PORT_ERR for it, or when the peer says so. Then:
 *  - every QP of the port stops taking work and is moved to ERR at once (its
 *    outstanding work flushes instead of waiting out the retry budget);
 *  - the receiver writes every live CTS slot again over a surviving QP;
 *  - the sender finds out which of its chunks landed: the receiver
 *    publishes, per CTS slot and buffer, the receive's sequence and a bitmap
 *    of the chunks it counted (c->fo_pub, updated as it counts), and the
 *    sender reads it with an RDMA READ over a surviving QP, so it needs
 *    nothing from the receiver's thread (a receiver with nothing left to
 *    test would never answer a question). Before that area's address came
 *    (FO_PUB, sent at connection time) it asks over the TCP socket instead
 *    (SYNC_REQ / SYNC_REP). Chunks that were on a dead QP and are not
 *    counted are written again on a surviving QP with the same immediate;
 *    the others are done. Our QP in ERR stops sending, but what the peer's
 *    NIC already holds for its end of the QP (a starved NIC thread, a link
 *    that held it) could still land after the copy, in a buffer reused
 *    meanwhile: so when the read finds a chunk not counted, the sender asks
 *    over the socket instead, and the receiver moves its QPs of the dead port
 *    to ERR (after which nothing lands through them) before it answers; a
 *    receive with a chunk missing is being progressed, so it does answer.
 *    A chunk written again may still
 *    have landed (counted after the read): the receiver counts a chunk once
 *    (bit k of its buffer) and ignores one for a completed receive (an
 *    empty slot, or the slot's next use: the immediate carries the parity
 *    of the receive's use of the slot), and until every chunk written again
 *    is acknowledged no new message is posted (isend returns no request), so
 *    none can land in a buffer before a stale copy does. A message thus
 *    completes exactly once, with its bytes;
 *  - one WARN per device and port names the port and the comms of the
 *    process that go on over the other port (every comm of the device is told).
 * Only a comm with no live QP left fails (test returns the error).
 *
 * Recovery. When the device raises IBV_EVENT_PORT_ACTIVE (or the peer says
 * its port is back) and no chunk is waiting on a dead QP, the sender makes
 * new QPs on the port and sends their numbers and PSNs (REBUILD_REQ); the
 * receiver replaces its QPs (having drained its CQ first: the CQ holds one
 * generation of each QP's work, and the flushed receives of the QPs it
 * replaces must not stay there beside their successors'), posts receives and
 * answers (REBUILD_REP); the
 * sender connects them and writes a probe (8 bytes) on each. When every
 * probe completed the sender uses them again and tells the receiver
 * (PROBE_OK), which then uses them for CTS writes too. One INFO per comm.
 * A probe that fails leaves the port dead until the next PORT_ACTIVE.
 *
 * The GDR flush's loopback QP is made on a live port and, when its port
 * fails, replaced on another with the flushes in flight posted again
 * (flush.c). Limit: a receiver that deregisters a buffer
 * right after its receive completed can refuse a stale copy of a chunk
 * (IBV_WC_REM_ACCESS_ERR fails the sender's comm), which needs a port to
 * fail in that window.
 *
 * Control messages travel on the TCP socket of the connection (non-blocking;
 * looked at on every progress while something is pending, else about every
 * millisecond). They are untrusted: magic, type, exact length and every
 * field range are checked, and a bad one fails the comm (ncclRemoteError). */
#ifndef RAILNET_IB_FAILOVER_H
#define RAILNET_IB_FAILOVER_H

#include <infiniband/verbs.h>

#include "nccl_net_v8.h"

struct comm;
struct fo_comm;

/* At a comm's first isend/irecv (the data path layer attaches itself; the
 * comm layer below only calls c->fo_release at close): every QP live; with
 * RAILNET_FAILOVER=1 and a device of more than one port, the failover state
 * and the comm's entry in the device's registry. */
ncclResult_t failover_attach(struct comm *c);
/* At close: leaves the registry, frees the state. */
void failover_detach(struct comm *c);

/* A failed completion on QP qpi. 1: failover takes it (the comm goes on);
 * 0: the caller fails the comm as without failover. */
int failover_wc_error(struct comm *c, int qpi, const struct ibv_wc *w);
/* An async port event seen for port index p of c's device. */
void failover_port_event(struct comm *c, int p, int up);
/* Control messages, syncs, chunks to write again, rebuilds; called by
 * p2p_progress after it drained the CQ. */
void failover_progress(struct comm *c, uint64_t now);
/* A probe write completed (WR_PROBE): status IBV_WC_SUCCESS, a failed
 * completion's status, or -1 when it could not be posted. A failed probe
 * only leaves the port out of use (never fails the comm): it is the
 * plugin's own test of a path, and a peer that closed its comm after its
 * last receive (deregistering the probe's target) refuses it too. */
void failover_probe_done(struct comm *c, int qpi, int status);
/* The RDMA READ of the receiver's chunk state completed (WR_SYNC). */
void failover_sync_read_done(struct comm *c, int epoch16, int ok);
/* A chunk written again landed (its completion, or a later sync). */
struct request;
void failover_replay_landed(struct comm *c, struct request *r, unsigned k);

/* The first live QP at or after hint (round robin); -1 when none. */
static inline int failover_pick_qp(uint32_t live, int nqps, int hint)
{
    for (int i = 0; i < nqps; i++) {
        int q = (hint + i) % nqps;
        if (live & (1u << q))
            return q;
    }
    return -1;
}

#endif
